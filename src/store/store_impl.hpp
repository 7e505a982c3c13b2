// What the store's files share: the connection and its statements (JobStore::Impl), and reading job rows.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/store/access.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/bad_hardware.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/notifications.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/store/settings.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/store/sqlite.hpp"
#include "jobman/store/zone_catalogs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
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

// A row's columns are named, never counted: a reader asks for a column by its name in the list its SELECT was built
// from, and a name that is not in the list does not compile.
template <std::size_t N>
consteval int column_of(const std::array<std::string_view, N>& columns, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i) {
    if (columns[i] == name) {
      return static_cast<int>(i);
    }
  }
  throw std::logic_error("no such column"); // Not a constant expression: the caller does not compile.
}

// `columns` joined for a SELECT.
template <std::size_t N> std::string column_list(const std::array<std::string_view, N>& columns) {
  std::string list;
  for (const auto column : columns) {
    if (!list.empty()) {
      list += ", ";
    }
    list += column;
  }
  return list;
}

// The columns of JobRecord, which read_job reads; a query may select more after them (config_yaml, from job_configs,
// when asked for; a change's number), from job_column_count on.
constexpr std::array<std::string_view, 33> job_column_names = {"jobs.id",
                                                               "name",
                                                               "user",
                                                               "accelerator",
                                                               "zone",
                                                               "pricing",
                                                               "tpu_name",
                                                               "hosts",
                                                               "phase",
                                                               "desired",
                                                               "phase_reason",
                                                               "attempt",
                                                               "preemptions",
                                                               "failures",
                                                               "host0_ip",
                                                               "exit_code",
                                                               "created_ms",
                                                               "updated_ms",
                                                               "phase_since_ms",
                                                               "finished_ms",
                                                               "config_path",
                                                               "sweep_label",
                                                               "cleanup_pending",
                                                               "kind",
                                                               "worker_id",
                                                               "priority",
                                                               "queue_order",
                                                               "slice_state",
                                                               "max_failures",
                                                               "bad_hardware",
                                                               "step",
                                                               "step_total",
                                                               "step_ms"};
constexpr int job_column_count = static_cast<int>(job_column_names.size());

consteval int job_column(std::string_view name) {
  return column_of(job_column_names, name);
}

// The job columns for a SELECT.
inline const std::string& job_columns() {
  static const std::string list = column_list(job_column_names);
  return list;
}

inline std::string select_jobs(bool with_config) {
  std::string sql = "SELECT ";
  sql += job_columns();
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

// The text the store keeps for a pricing: the name domain::to_string gives it, "" for none (a task that runs on a
// worker of any pricing, or an attempt placed where the job names none).
inline std::string stored_pricing(const std::optional<domain::Pricing>& pricing) {
  return pricing ? domain::to_string(*pricing) : std::string();
}

// A job's pricing as the store spells it: "" is none, which only a task that runs on a worker of any pricing has; any
// spelling domain::parse_pricing accepts is its pricing. Other text fails the read, as an unknown phase does: no
// pricing would stand for it.
inline std::optional<domain::Pricing> job_pricing_column(const Database& db, const Statement& row, int column) {
  const auto text = row.column_text_view(column);
  if (text.empty()) {
    return std::nullopt;
  }
  if (auto pricing = domain::parse_pricing(text)) {
    return *pricing;
  }
  throw Error(db.path() + ": unknown pricing '" + std::string(text) + "' in the database");
}

// What an attempt whose row names no pricing is read as: spot, the pricing a worker takes when its flags name none.
// Only the attempt of a task that runs on a worker of any pricing can name none: one recorded before version 12
// (which copied the job's pricing, the task's none, into its attempts), or one begun on no worker's slice. The pricing
// of the worker's slice it ran on was not kept.
inline constexpr domain::Pricing kUnrecordedPricing = domain::Pricing::spot;

// The pricing of a slice asked for (an attempt's, a rival's) as the store spells it: "" reads as kUnrecordedPricing,
// and any spelling domain::parse_pricing accepts as its pricing. Other text fails the read, as an unknown phase does.
inline domain::Pricing slice_pricing_column(const Database& db, const Statement& row, int column) {
  return job_pricing_column(db, row, column).value_or(kUnrecordedPricing);
}

// Fills `job` from a row selected with job_columns(); reusing one record keeps its strings' buffers across rows.
inline void read_job(const Database& db, const Statement& row, bool with_config, JobRecord& job) {
  job.id = row.column_int64(job_column("jobs.id"));
  job.name.assign(row.column_text_view(job_column("name")));
  job.user.assign(row.column_text_view(job_column("user")));
  job.accelerator.assign(row.column_text_view(job_column("accelerator")));
  job.zone.assign(row.column_text_view(job_column("zone")));
  job.pricing = job_pricing_column(db, row, job_column("pricing"));
  job.tpu_name.assign(row.column_text_view(job_column("tpu_name")));
  job.hosts = row.column_int(job_column("hosts"));
  job.phase = phase_column(db, row, job_column("phase"));
  const auto desired = row.column_text_view(job_column("desired"));
  if (auto parsed = parse_desired_state(desired)) {
    job.desired = *parsed;
  } else {
    throw Error(db.path() + ": unknown desired state '" + std::string(desired) + "' in the database");
  }
  job.phase_reason.assign(row.column_text_view(job_column("phase_reason")));
  job.attempt = row.column_int(job_column("attempt"));
  job.preemptions = row.column_int(job_column("preemptions"));
  job.failures = row.column_int(job_column("failures"));
  job.host0_ip.assign(row.column_text_view(job_column("host0_ip")));
  job.exit_code = row.column_optional_int(job_column("exit_code"));
  job.created_ms = row.column_int64(job_column("created_ms"));
  job.updated_ms = row.column_int64(job_column("updated_ms"));
  job.phase_since_ms = row.column_int64(job_column("phase_since_ms"));
  job.finished_ms = row.column_optional_int64(job_column("finished_ms"));
  job.config_path.assign(row.column_text_view(job_column("config_path")));
  job.sweep_label.assign(row.column_text_view(job_column("sweep_label")));
  job.cleanup_pending = row.column_int(job_column("cleanup_pending")) != 0;
  const auto kind = row.column_text_view(job_column("kind"));
  if (auto parsed = domain::parse_job_kind(kind)) {
    job.kind = *parsed;
  } else {
    throw Error(db.path() + ": unknown kind '" + std::string(kind) + "' in the database");
  }
  job.worker_id = row.column_optional_int64(job_column("worker_id"));
  job.priority = row.column_int(job_column("priority"));
  job.queue_order = row.column_int64(job_column("queue_order"));
  job.slice_state.assign(row.column_text_view(job_column("slice_state")));
  job.max_failures = row.column_int(job_column("max_failures"));
  job.bad_hardware = row.column_int(job_column("bad_hardware"));
  if (const auto step = row.column_optional_int64(job_column("step"))) {
    job.progress = domain::ProgressPoint{*step, row.column_optional_int64(job_column("step_ms")).value_or(0)};
  } else {
    job.progress.reset();
  }
  job.step_total = row.column_optional_int64(job_column("step_total"));
  if (with_config) {
    job.config_yaml.assign(row.column_text_view(job_column_count));
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

// The columns of AttemptRecord, which read_attempt reads.
constexpr std::array<std::string_view, 19> attempt_column_names = {
    "job_id",    "number",         "queued_resource", "node",           "zone",         "started_ms", "ended_ms",
    "outcome",   "exit_code",      "released_ms",     "create_pending", "accelerator",  "hosts",      "worker_id",
    "active_ms", "physical_hosts", "pricing",         "progress",       "rollback_step"};

consteval int attempt_column(std::string_view name) {
  return column_of(attempt_column_names, name);
}

// The attempt columns for a SELECT.
inline const std::string& attempt_columns() {
  static const std::string list = column_list(attempt_column_names);
  return list;
}

inline AttemptRecord read_attempt(const Database& db, const Statement& row) {
  AttemptRecord attempt;
  attempt.job_id = row.column_int64(attempt_column("job_id"));
  attempt.number = row.column_int(attempt_column("number"));
  attempt.queued_resource = row.column_text(attempt_column("queued_resource"));
  attempt.node = row.column_text(attempt_column("node"));
  attempt.zone = row.column_text(attempt_column("zone"));
  attempt.started_ms = row.column_int64(attempt_column("started_ms"));
  attempt.ended_ms = row.column_optional_int64(attempt_column("ended_ms"));
  attempt.outcome = attempt_outcome_column(row, attempt_column("outcome"));
  attempt.exit_code = row.column_optional_int(attempt_column("exit_code"));
  attempt.released_ms = row.column_optional_int64(attempt_column("released_ms"));
  attempt.create_pending = row.column_int(attempt_column("create_pending")) != 0;
  attempt.accelerator = row.column_text(attempt_column("accelerator"));
  attempt.hosts = row.column_int(attempt_column("hosts"));
  attempt.worker_id = row.column_optional_int64(attempt_column("worker_id"));
  attempt.active_ms = row.column_optional_int64(attempt_column("active_ms"));
  if (const auto hosts = row.column_text_view(attempt_column("physical_hosts")); !hosts.empty()) {
    attempt.physical_hosts = util::split(hosts, ',');
  }
  attempt.pricing = slice_pricing_column(db, row, attempt_column("pricing"));
  attempt.progress = domain::ProgressSeries::parse(row.column_text_view(attempt_column("progress")));
  attempt.rollback_step = row.column_optional_int64(attempt_column("rollback_step"));
  return attempt;
}

// The columns of EventRecord, which read_event reads. A query may select expressions in their places (as
// Events::for_each_phase_change does), in the same order.
constexpr std::array<std::string_view, 8> event_column_names = {"id",         "job_id",   "ts_ms",   "kind",
                                                                "from_phase", "to_phase", "message", "data_json"};

consteval int event_column(std::string_view name) {
  return column_of(event_column_names, name);
}

// The event columns for a SELECT.
inline const std::string& event_columns() {
  static const std::string list = column_list(event_column_names);
  return list;
}

inline EventRecord read_event(const Database& db, const Statement& row) {
  EventRecord event;
  event.id = row.column_int64(event_column("id"));
  event.job_id = row.column_int64(event_column("job_id"));
  event.ts_ms = row.column_int64(event_column("ts_ms"));
  event.kind = row.column_text(event_column("kind"));
  if (!row.is_null(event_column("from_phase"))) {
    event.from = phase_column(db, row, event_column("from_phase"));
  }
  if (!row.is_null(event_column("to_phase"))) {
    event.to = phase_column(db, row, event_column("to_phase"));
  }
  event.message = row.column_text(event_column("message"));
  event.data_json = row.column_text(event_column("data_json"));
  return event;
}

[[noreturn]] inline void throw_no_such_job(std::int64_t id) {
  throw domain::NoSuchJobError("no job " + domain::format_job_id(id));
}

} // namespace detail

// The connection and its prepared statements, and the views that share them.
struct JobStore::Impl {
  explicit Impl(std::unique_ptr<sql::Connection> opened)
      : connection(std::move(opened)), db(*connection), statements(db) {}

  std::unique_ptr<sql::Connection> connection;
  sql::Connection& db;
  sql::StatementCache statements;                  // After the connection: finalized before it closes.
  std::string identity_name;                       // identity(), read on first use.
  std::shared_ptr<const SharePolicy> share_policy; // Shares::set_policy.
  std::string driver;                              // JobStore::drive_as; empty: this handle drives nothing.

  Jobs jobs{*this};
  Events events{*this};
  Attempts attempts{*this};
  Rivals rivals{*this};
  BadHardware bad_hardware{*this};
  Leases leases{*this};
  Queue queue{*this};
  Notifications notifications{*this};
  ZoneCatalogs zone_catalogs{*this};
  Access access{*this};
  Settings settings{*this};
  Shares shares{*this};

  // JobStore::clock_ms.
  [[nodiscard]] std::int64_t clock_ms() const;
  // In a write transaction that acts on the job: throws LeaseLostError when this handle drives as a supervisor
  // (JobStore::drive_as), the job exists, and its lease names another supervisor or none (released).
  void check_driving(std::int64_t job_id);
  // JobStore::identity.
  const std::string& identity();

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

  // Shares::in_flight, inside the caller's transaction.
  std::vector<SliceUse> slices_in_flight();

  bool job_exists(std::int64_t id) {
    auto query = statements.get("SELECT 1 FROM jobs WHERE id = ?1");
    query->bind(1, id);
    return query->step();
  }
};

} // namespace jobman::store
