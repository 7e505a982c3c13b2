// What the store's files share: the connection and its statements (JobStore::Impl), and reading job rows.
#pragma once

#include "jobman/store/job_store.hpp"
#include "jobman/store/sqlite.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace jobman::store {

// The domain model, named in the store's files as its own.
using domain::AttemptRecord;
using domain::DesiredState;
using domain::EventRecord;
using domain::is_terminal;
using domain::JobRecord;
using domain::Lease;
using domain::NewJob;
using domain::parse_desired_state;
using domain::parse_phase;
using domain::Phase;
using domain::PhaseChange;
using domain::Placement;

namespace detail {

using Database = sql::Connection;
using Statement = sql::Statement;

// How long a connection waits for a lock while nobody commits (sqlite::BusyWait): a writer holds the lock for about a
// millisecond, so ten seconds without a single commit means a writer hung.
constexpr int busy_timeout_ms = 10'000;

// The columns of JobRecord in the order read_job expects; config_yaml (from job_configs) is appended only when
// asked for.
constexpr std::string_view job_columns =
    "jobs.id, name, user, accelerator, zone, pricing, tpu_name, hosts, phase, desired, phase_reason, attempt, "
    "preemptions, failures, host0_ip, exit_code, created_ms, updated_ms, phase_since_ms, finished_ms, "
    "config_path, sweep_label, cleanup_pending, kind, worker_id, priority, queue_order, slice_state, max_failures, "
    "bad_hardware, step, step_total, step_ms";
constexpr int config_yaml_column = 33;

inline std::string select_jobs(bool with_config) {
  std::string sql = "SELECT ";
  sql += job_columns;
  if (with_config) {
    sql += ", job_configs.config_yaml FROM jobs LEFT JOIN job_configs ON job_configs.job_id = jobs.id";
  } else {
    sql += " FROM jobs";
  }
  return sql;
}

inline Phase phase_column(const Database& db, const Statement& row, int column) {
  const auto text = row.column_text_view(column);
  if (auto phase = parse_phase(text)) {
    return *phase;
  }
  throw Error(db.path() + ": unknown phase '" + std::string(text) + "' in the database");
}

// Fills `job` from a row selected with job_columns; reusing one record keeps its strings' buffers across rows.
inline void read_job(const Database& db, const Statement& row, bool with_config, JobRecord& job) {
  job.id = row.column_int64(0);
  job.name.assign(row.column_text_view(1));
  job.user.assign(row.column_text_view(2));
  job.accelerator.assign(row.column_text_view(3));
  job.zone.assign(row.column_text_view(4));
  job.pricing.assign(row.column_text_view(5));
  job.tpu_name.assign(row.column_text_view(6));
  job.hosts = row.column_int(7);
  job.phase = phase_column(db, row, 8);
  const auto desired = row.column_text_view(9);
  if (auto parsed = parse_desired_state(desired)) {
    job.desired = *parsed;
  } else {
    throw Error(db.path() + ": unknown desired state '" + std::string(desired) + "' in the database");
  }
  job.phase_reason.assign(row.column_text_view(10));
  job.attempt = row.column_int(11);
  job.preemptions = row.column_int(12);
  job.failures = row.column_int(13);
  job.host0_ip.assign(row.column_text_view(14));
  job.exit_code = row.column_optional_int(15);
  job.created_ms = row.column_int64(16);
  job.updated_ms = row.column_int64(17);
  job.phase_since_ms = row.column_int64(18);
  job.finished_ms = row.column_optional_int64(19);
  job.config_path.assign(row.column_text_view(20));
  job.sweep_label.assign(row.column_text_view(21));
  job.cleanup_pending = row.column_int(22) != 0;
  const auto kind = row.column_text_view(23);
  if (auto parsed = domain::parse_job_kind(kind)) {
    job.kind = *parsed;
  } else {
    throw Error(db.path() + ": unknown kind '" + std::string(kind) + "' in the database");
  }
  job.worker_id = row.column_optional_int64(24);
  job.priority = row.column_int(25);
  job.queue_order = row.column_int64(26);
  job.slice_state.assign(row.column_text_view(27));
  job.max_failures = row.column_int(28);
  job.bad_hardware = row.column_int(29);
  if (const auto step = row.column_optional_int64(30)) {
    job.progress = domain::ProgressPoint{*step, row.column_optional_int64(32).value_or(0)};
  } else {
    job.progress.reset();
  }
  job.step_total = row.column_optional_int64(31);
  if (with_config) {
    job.config_yaml.assign(row.column_text_view(config_yaml_column));
  } else {
    job.config_yaml.clear();
  }
}

// An attempt's outcome as the store spells it. A spelling this build does not know (one a newer jobman wrote to a
// shared database, say) reads as unknown rather than failing the read: the attempt has ended, for no reason this
// build can act on (it is neither a request given up nor a bad slice).
inline domain::AttemptOutcome attempt_outcome_column(const Statement& row, int column) {
  return domain::parse_attempt_outcome(row.column_text_view(column)).value_or(domain::AttemptOutcome::unknown);
}

// A rival's outcome as the store spells it. A spelling this build does not know reads as unknown rather than failing
// the read: the rival has left the race (it is not racing: never promoted, never waited for), for no known reason.
inline domain::RivalOutcome rival_outcome_column(const Statement& row, int column) {
  return domain::parse_rival_outcome(row.column_text_view(column)).value_or(domain::RivalOutcome::unknown);
}

// The columns of AttemptRecord in the order read_attempt expects.
constexpr std::string_view attempt_columns =
    "job_id, number, queued_resource, node, zone, started_ms, ended_ms, outcome, exit_code, released_ms, "
    "create_pending, accelerator, hosts, worker_id, active_ms, physical_hosts, pricing, progress";

inline AttemptRecord read_attempt(const Statement& row) {
  AttemptRecord attempt;
  attempt.job_id = row.column_int64(0);
  attempt.number = row.column_int(1);
  attempt.queued_resource = row.column_text(2);
  attempt.node = row.column_text(3);
  attempt.zone = row.column_text(4);
  attempt.started_ms = row.column_int64(5);
  attempt.ended_ms = row.column_optional_int64(6);
  attempt.outcome = attempt_outcome_column(row, 7);
  attempt.exit_code = row.column_optional_int(8);
  attempt.released_ms = row.column_optional_int64(9);
  attempt.create_pending = row.column_int(10) != 0;
  attempt.accelerator = row.column_text(11);
  attempt.hosts = row.column_int(12);
  attempt.worker_id = row.column_optional_int64(13);
  attempt.active_ms = row.column_optional_int64(14);
  if (const auto hosts = row.column_text_view(15); !hosts.empty()) {
    attempt.physical_hosts = util::split(hosts, ',');
  }
  attempt.pricing = row.column_text(16);
  attempt.progress = domain::ProgressSeries::parse(row.column_text_view(17));
  return attempt;
}

// The columns of EventRecord in the order read_event expects.
constexpr std::string_view event_columns = "id, job_id, ts_ms, kind, from_phase, to_phase, message, data_json";

inline EventRecord read_event(const Database& db, const Statement& row) {
  EventRecord event;
  event.id = row.column_int64(0);
  event.job_id = row.column_int64(1);
  event.ts_ms = row.column_int64(2);
  event.kind = row.column_text(3);
  if (!row.is_null(4)) {
    event.from = phase_column(db, row, 4);
  }
  if (!row.is_null(5)) {
    event.to = phase_column(db, row, 5);
  }
  event.message = row.column_text(6);
  event.data_json = row.column_text(7);
  return event;
}

[[noreturn]] inline void throw_no_such_job(std::int64_t id) {
  throw NoSuchJobError("no job " + util::format_job_id(id));
}

} // namespace detail

// The connection and its prepared statements.
struct JobStore::Impl {
  explicit Impl(std::unique_ptr<sql::Connection> opened)
      : connection(std::move(opened)), db(*connection), statements(db) {}

  std::unique_ptr<sql::Connection> connection;
  sql::Connection& db;
  sql::StatementCache statements;                  // After the connection: finalized before it closes.
  std::string identity;                            // JobStore::identity(), read on first use.
  std::shared_ptr<const SharePolicy> share_policy; // JobStore::set_share_policy.

  std::optional<JobRecord> find(std::int64_t id, bool with_config) {
    auto query = statements.get(detail::select_jobs(with_config) + " WHERE jobs.id = ?1");
    query->bind(1, id);
    if (!query->step()) {
      return std::nullopt;
    }
    JobRecord job;
    detail::read_job(db, *query, with_config, job);
    return job;
  }

  // Appends an event; false when the job does not exist.
  static constexpr std::string_view insert_event_sql =
      "INSERT INTO events (job_id, ts_ms, kind, from_phase, to_phase, message, data_json) "
      "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM jobs WHERE id = ?1)";
  bool insert_event(std::int64_t job_id, std::int64_t ts_ms, std::string_view kind, std::optional<Phase> from,
                    std::optional<Phase> to, std::string_view message, std::string_view data_json) {
    auto insert = statements.get(std::string(insert_event_sql));
    insert->bind(1, job_id);
    insert->bind(2, ts_ms);
    insert->bind(3, kind);
    if (from) {
      insert->bind(4, to_string(*from));
    }
    if (to) {
      insert->bind(5, to_string(*to));
    }
    insert->bind(6, message);
    insert->bind(7, data_json);
    insert->run();
    return db.changes() > 0;
  }

  // Inserts the job's next attempt at `where` (jobs.attempt + 1) with its event, inside the caller's transaction.
  AttemptRecord insert_attempt(std::int64_t job_id, const Placement& where, bool create_pending, std::int64_t now);

  // JobStore::slices_in_flight, inside the caller's transaction.
  std::vector<SliceUse> slices_in_flight();

  bool job_exists(std::int64_t id) {
    auto query = statements.get("SELECT 1 FROM jobs WHERE id = ?1");
    query->bind(1, id);
    return query->step();
  }
};

} // namespace jobman::store
