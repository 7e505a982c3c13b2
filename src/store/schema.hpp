// The job store's schema: an ordered list of forward migrations, one per PRAGMA user_version step.
#pragma once

#include <span>
#include <string_view>

namespace jobman::store::schema {

// One step from `version - 1` to `version`, run in its own IMMEDIATE transaction.
struct Migration {
  int version;           // The user_version after this step.
  std::string_view what; // What the step does, for messages.
  std::string_view sql;  // The DDL it runs.
  // The same step in PostgreSQL's dialect; empty up to postgres_baseline_version, which the baseline covers.
  std::string_view postgres_sql = {};
};

// The version postgres_baseline() creates; a PostgreSQL store goes on from it with the steps' postgres_sql.
inline constexpr int postgres_baseline_version = 16;

// Every migration in order; migrations()[i].version == i + 1.
std::span<const Migration> migrations();

// The version a fully migrated database has.
int latest_version();

// The DDL of a new PostgreSQL store at postgres_baseline_version, equivalent to every SQLite migration up to it.
std::string_view postgres_baseline();

// The DDL of version 1 exactly as the first release ran it (tests build old databases with it).
std::string_view v1_sql();

// The terminal phases as an SQL list; must stay identical to the WHERE of migration 2's jobs_unfinished index.
inline constexpr std::string_view terminal_phase_list = "('SUCCEEDED','FAILED','CANCELLED','DELETED')";

// What a supervisor drives besides jobs finishing their cleanup: unfinished records but the queued tasks. Must stay
// identical to the WHERE of migration 8's jobs_driven index, so that SQLite reads that index alone.
inline constexpr std::string_view driven_condition =
    "phase NOT IN ('SUCCEEDED','FAILED','CANCELLED','DELETED') AND NOT (kind = 'task' AND phase = 'PENDING' AND "
    "desired = 'run')";

// The queue: tasks waiting for a worker; identical to the WHERE of migration 8's tasks_queued index.
inline constexpr std::string_view queued_condition = "kind = 'task' AND phase = 'PENDING' AND desired = 'run'";

} // namespace jobman::store::schema
