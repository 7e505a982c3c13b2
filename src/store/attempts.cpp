// The store's attempts: begun, confirmed, ended, released; and the jobs a supervisor has work on.
#include "job_queries.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/util/system.hpp"
#include "schema.hpp"
#include "store_impl.hpp"

#include <nlohmann/json.hpp>

namespace jobman::store {

using detail::read_job;
using detail::select_jobs;
using detail::throw_no_such_job;
using sql::Transaction;

AttemptRecord Attempts::begin(std::int64_t job_id, const std::string& queued_resource, const std::string& node,
                              const std::string& zone, bool create_pending) {
  return begin(job_id, Placement{queued_resource, node, zone, {}, 0, std::nullopt, std::nullopt}, create_pending);
}

AttemptRecord Attempts::begin(std::int64_t job_id, const Placement& where, bool create_pending) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  auto attempt = impl_->insert_attempt(job_id, where, create_pending, now);
  impl_->check_driving(job_id);
  transaction.commit();
  return attempt;
}

AttemptRecord JobStore::Impl::insert_attempt(std::int64_t job_id, const Placement& where, bool create_pending,
                                             std::int64_t now) {
  int number = 0;
  Placement place = where;
  {
    auto query = statements.get(
        "SELECT attempt, accelerator, hosts, pricing, phase, desired, user, kind FROM jobs WHERE id = ?1");
    query->bind(1, job_id);
    if (!query->step()) {
      throw_no_such_job(job_id);
    }
    // Checked in the transaction that records the attempt: a supervisor that read the job before a user's cancel,
    // delete or clean never starts an attempt (and requests a slice) for it after.
    const auto phase = detail::phase_column(db, *query, 4);
    if (is_terminal(phase) || query->column_text_view(5) != "run") {
      throw JobChangedError("job " + domain::format_job_id(job_id) + " is " + std::string(to_string(phase)) +
                            " with desired state " + query->column_text(5) + " now: no attempt started");
    }
    number = query->column_int(0) + 1;
    if (place.accelerator.empty()) {
      place.accelerator = query->column_text(1);
    }
    if (place.hosts <= 0) {
      place.hosts = query->column_int(2);
    }
    if (!place.pricing) {
      place.pricing = detail::job_pricing_column(db, *query, 3);
    }
    if (create_pending && !place.worker_id && share_policy && share_policy->limits_anything()) {
      // A new slice of its own: counted against the fair share under the store's write lock, where no other
      // supervisor hands chips out meanwhile.
      const auto user = query->column_text(6);
      const auto kind = domain::parse_job_kind(query->column_text_view(7)).value_or(domain::JobKind::job);
      const auto why = share_policy->refusal(slices_in_flight(), user, kind, place.accelerator,
                                             place.pricing.value_or(detail::kUnrecordedPricing));
      if (!why.empty()) {
        throw ShareExceededError(why);
      }
    }
  }
  const auto& [queued_resource, node, zone, accelerator, hosts, worker_id, pricing] = place;
  // Recorded as "" when neither the placement nor the job names one (a task of any pricing begun on no worker's
  // slice), which reads back as kUnrecordedPricing.
  const std::string stored = detail::stored_pricing(pricing);
  {
    // Worker 0's address and exit code belonged to the previous attempt.
    auto update =
        statements.get("UPDATE jobs SET attempt = ?2, updated_ms = ?3, host0_ip = '', exit_code = NULL WHERE id = ?1");
    update->bind(1, job_id);
    update->bind(2, number);
    update->bind(3, now);
    update->run();
  }
  {
    auto insert = statements.get(
        "INSERT INTO attempts (job_id, number, queued_resource, node, zone, accelerator, hosts, started_ms, "
        "create_pending, worker_id, pricing) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    insert->bind(1, job_id);
    insert->bind(2, number);
    insert->bind(3, queued_resource);
    insert->bind(4, node);
    insert->bind(5, zone);
    insert->bind(6, accelerator);
    insert->bind(7, hosts);
    insert->bind(8, now);
    insert->bind(9, create_pending ? 1 : 0);
    insert->bind(10, worker_id);
    insert->bind(11, stored);
    insert->run();
  }
  nlohmann::json data = {
      {"attempt", number}, {"node", node}, {"zone", zone}, {"accelerator", accelerator}, {"pricing", stored}};
  if (!queued_resource.empty()) {
    data["queued_resource"] = queued_resource;
  }
  const std::string& slice = queued_resource.empty() ? node : queued_resource;
  std::string message = "attempt " + std::to_string(number) + " started: " + slice + " in " + zone;
  if (worker_id) {
    data["worker_id"] = *worker_id;
    message += " (worker " + domain::format_job_id(*worker_id) + "'s slice)";
  }
  if (create_pending) {
    data["create_pending"] = true;
    message = "attempt " + std::to_string(number) + " started: requesting " + slice + " in " + zone;
  }
  insert_event(job_id, now, "attempt", std::nullopt, std::nullopt, message, data.dump());

  AttemptRecord attempt;
  attempt.job_id = job_id;
  attempt.number = number;
  attempt.queued_resource = queued_resource;
  attempt.node = node;
  attempt.zone = zone;
  attempt.accelerator = accelerator;
  attempt.hosts = hosts;
  attempt.started_ms = now;
  attempt.create_pending = create_pending;
  attempt.worker_id = worker_id;
  attempt.pricing = pricing.value_or(detail::kUnrecordedPricing);
  return attempt;
}

void Attempts::confirm_created(std::int64_t job_id, int number) {
  auto update = impl_->statements.get(
      "UPDATE attempts SET create_pending = 0 WHERE job_id = ?1 AND number = ?2 AND create_pending = 1");
  update->bind(1, job_id);
  update->bind(2, number);
  update->run();
  if (impl_->db.changes() == 0 && !impl_->job_exists(job_id)) {
    throw_no_such_job(job_id);
  }
}

void Attempts::end(std::int64_t job_id, int number, domain::AttemptOutcome outcome, std::optional<int> exit_code,
                   std::optional<std::int64_t> rollback_step) {
  const std::string text(domain::to_string(outcome));
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  impl_->check_driving(job_id);
  {
    auto update =
        impl_->statements.get("UPDATE attempts SET ended_ms = ?3, outcome = ?4, exit_code = ?5, rollback_step = ?6 "
                              "WHERE job_id = ?1 AND number = ?2");
    update->bind(1, job_id);
    update->bind(2, number);
    update->bind(3, now);
    update->bind(4, text);
    update->bind(5, exit_code);
    update->bind(6, rollback_step);
    update->run();
  }
  if (impl_->db.changes() == 0) {
    if (!impl_->job_exists(job_id)) {
      throw_no_such_job(job_id);
    }
    throw Error("job " + domain::format_job_id(job_id) + " has no attempt " + std::to_string(number));
  }
  nlohmann::json data = {{"attempt", number}, {"outcome", text}};
  std::string message = "attempt " + std::to_string(number) + " ended: " + text;
  if (exit_code) {
    data["exit_code"] = *exit_code;
    message += " (exit code " + std::to_string(*exit_code) + ")";
  }
  if (rollback_step) {
    data["rollback_step"] = *rollback_step;
    message += "; the loss spiked at step " + std::to_string(*rollback_step);
  }
  impl_->insert_event(job_id, now, "attempt", std::nullopt, std::nullopt, message, data.dump());
  transaction.commit();
}

std::vector<AttemptRecord> Attempts::of(std::int64_t job_id) const {
  auto query =
      impl_->statements.get("SELECT " + detail::attempt_columns() + " FROM attempts WHERE job_id = ?1 ORDER BY number");
  query->bind(1, job_id);
  std::vector<AttemptRecord> attempts;
  while (query->step()) {
    attempts.push_back(detail::read_attempt(impl_->db, *query));
  }
  return attempts;
}

void Attempts::mark_released(std::int64_t job_id, const std::string& slice, const std::string& how) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  // A queued resource by its name, or a node created without one (tpu-vm mode) by the node's.
  const char* key = "queued_resource";
  for (const char* where : {"queued_resource = ?2", "queued_resource = '' AND node = ?2"}) {
    auto update = impl_->statements.get(std::string("UPDATE attempts SET released_ms = ?3 WHERE job_id = ?1 AND ") +
                                        where + " AND released_ms IS NULL");
    update->bind(1, job_id);
    update->bind(2, slice);
    update->bind(3, now);
    update->run();
    if (impl_->db.changes() > 0) {
      break;
    }
    key = "node";
  }
  if (impl_->db.changes() == 0) {
    // A rival raced for an attempt (first-ready) is named alone.
    auto update = impl_->statements.get(
        "UPDATE rivals SET released_ms = ?3 WHERE job_id = ?1 AND name = ?2 AND released_ms IS NULL");
    update->bind(1, job_id);
    update->bind(2, slice);
    update->bind(3, now);
    update->run();
    key = "queued_resource";
  }
  if (impl_->db.changes() == 0) {
    return; // Already recorded (or never ours): nothing to say twice.
  }
  const nlohmann::json data = {{key, slice}};
  impl_->insert_event(job_id, now, "action", std::nullopt, std::nullopt, slice + " released: " + how, data.dump());
  transaction.commit();
}

namespace queries {

std::string held_slices_sql() {
  // The partial index attempts_unreleased holds only the attempts not released, so its scan reads those alone; its key
  // holds the names and zone, and (attempts being WITHOUT ROWID) the primary key (job_id, number).
  // A task's attempts borrow their worker's slice and never hold it (nor are they in the index).
  // A rival's queued resource and node share its name.
  return "SELECT job_id, number, queued_resource, node, zone FROM attempts INDEXED BY attempts_unreleased "
         "WHERE released_ms IS NULL AND worker_id IS NULL "
         "UNION ALL SELECT job_id, attempt, name, name, zone FROM rivals INDEXED BY rivals_unreleased "
         "WHERE released_ms IS NULL";
}

} // namespace queries

std::vector<HeldSlice> Attempts::held_slices() const {
  auto query = impl_->statements.get(queries::held_slices_sql());
  std::vector<HeldSlice> held;
  while (query->step()) {
    HeldSlice slice;
    slice.job_id = query->column_int64(0);
    slice.attempt = query->column_int(1);
    slice.queued_resource = query->column_text(2);
    slice.node = query->column_text(3);
    slice.zone = query->column_text(4);
    held.push_back(std::move(slice));
  }
  return held;
}

std::vector<std::string> Jobs::zones_in_use() const {
  auto query = impl_->statements.get("SELECT zone FROM jobs WHERE zone != '' UNION SELECT zone FROM attempts "
                                     "WHERE zone != '' UNION SELECT zone FROM rivals ORDER BY 1");
  std::vector<std::string> zones;
  while (query->step()) {
    zones.push_back(query->column_text(0));
  }
  return zones;
}

void Jobs::set_cleanup_pending(std::int64_t job_id, bool pending) {
  auto update = impl_->statements.get("UPDATE jobs SET cleanup_pending = ?2 WHERE id = ?1");
  update->bind(1, job_id);
  update->bind(2, pending ? 1 : 0);
  update->run();
}

namespace {

// The jobs a supervisor has work on, as a WHERE condition on `jobs`: unfinished jobs, finished ones with a slice to
// release, and delete/clean requests, each from its partial index. SQLite takes the union of two index scans;
// PostgreSQL ORs the same indexes in one bitmap scan (the union's join back to `jobs` took it four times as long: 4.8
// against 1.1 ms over 1,035 live jobs of 100,000).
// Queued tasks are not among them: no supervisor drives a task until a worker claims it.
std::string jobs_to_drive_condition(sql::Dialect dialect) {
  const std::string to_release = "cleanup_pending = 1 OR desired IN ('delete','clean')";
  const std::string not_gone = " AND NOT (desired = 'delete' AND phase = 'DELETED' AND cleanup_pending = 0)";
  if (dialect == sql::Dialect::postgresql) {
    return "((" + std::string(schema::driven_condition) + ") OR " + to_release + ")" + not_gone;
  }
  return "jobs.id IN (SELECT id FROM jobs WHERE " + std::string(schema::driven_condition) +
         " UNION SELECT id FROM jobs WHERE " + to_release + ")" + not_gone;
}

// Every row `query` (a select_jobs(with_config) query, bound) returns.
std::vector<JobRecord> read_job_rows(const sql::Connection& db, sql::Statement& query, bool with_config) {
  std::vector<JobRecord> jobs;
  while (query.step()) {
    JobRecord job;
    read_job(db, query, with_config, job);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

} // namespace

std::vector<JobRecord> Leases::jobs_to_drive(bool with_config) const {
  auto query = impl_->statements.get(select_jobs(with_config) + " WHERE " +
                                     jobs_to_drive_condition(impl_->db.dialect()) + " ORDER BY jobs.id");
  return read_job_rows(impl_->db, *query, with_config);
}

std::vector<JobRecord> Leases::jobs_to_drive_by(const std::string& owner, std::int64_t now_ms) const {
  auto query = impl_->statements.get(select_jobs(false) + " WHERE " + jobs_to_drive_condition(impl_->db.dialect()) +
                                     " AND NOT EXISTS (SELECT 1 FROM leases WHERE leases.job_id = jobs.id AND "
                                     "leases.owner != ?1 AND leases.expires_ms > ?2) ORDER BY jobs.id");
  query->bind(1, owner);
  query->bind(2, now_ms);
  return read_job_rows(impl_->db, *query, false);
}

std::set<std::string> Leases::zones_driven_by_others(const std::string& owner, std::int64_t now_ms) const {
  auto query = impl_->statements.get("SELECT DISTINCT jobs.zone FROM leases JOIN jobs ON jobs.id = leases.job_id "
                                     "WHERE leases.owner != ?1 AND leases.expires_ms > ?2");
  query->bind(1, owner);
  query->bind(2, now_ms);
  std::set<std::string> zones;
  while (query->step()) {
    zones.insert(query->column_text(0));
  }
  return zones;
}

int Leases::count_undriven_jobs(std::int64_t now_ms) const {
  auto query = impl_->statements.get(
      "SELECT COUNT(*) FROM jobs WHERE " + jobs_to_drive_condition(impl_->db.dialect()) +
      " AND NOT EXISTS (SELECT 1 FROM leases WHERE leases.job_id = jobs.id AND leases.expires_ms > ?1)");
  query->bind(1, now_ms);
  return query->step() ? static_cast<int>(query->column_int64(0)) : 0;
}

void Attempts::record_transfer(const BucketTransfer& transfer) {
  auto upsert = impl_->statements.get(
      "INSERT INTO attempt_transfers (job_id, attempt, bucket, zone, read_bytes, write_ops, workers_read, workers, "
      "recorded_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (job_id, attempt, bucket) DO UPDATE SET "
      "zone = excluded.zone, read_bytes = excluded.read_bytes, write_ops = excluded.write_ops, "
      "workers_read = excluded.workers_read, workers = excluded.workers, recorded_ms = excluded.recorded_ms");
  upsert->bind(1, transfer.job_id);
  upsert->bind(2, static_cast<std::int64_t>(transfer.attempt));
  upsert->bind(3, transfer.bucket);
  upsert->bind(4, transfer.zone);
  upsert->bind(5, transfer.read_bytes);
  upsert->bind(6, transfer.write_ops);
  upsert->bind(7, static_cast<std::int64_t>(transfer.workers_read));
  upsert->bind(8, static_cast<std::int64_t>(transfer.workers));
  upsert->bind(9, transfer.recorded_ms);
  upsert->run();
}

namespace {

constexpr const char* kTransferColumns =
    "job_id, attempt, bucket, zone, read_bytes, write_ops, workers_read, workers, recorded_ms";

BucketTransfer transfer_of(sql::Statement& row) {
  BucketTransfer t;
  t.job_id = row.column_int64(0);
  t.attempt = static_cast<int>(row.column_int64(1));
  t.bucket = row.column_text(2);
  t.zone = row.column_text(3);
  t.read_bytes = row.column_int64(4);
  t.write_ops = row.column_int64(5);
  t.workers_read = static_cast<int>(row.column_int64(6));
  t.workers = static_cast<int>(row.column_int64(7));
  t.recorded_ms = row.column_int64(8);
  return t;
}

} // namespace

std::vector<BucketTransfer> Attempts::transfers(std::int64_t job_id) const {
  auto query = impl_->statements.get(std::string("SELECT ") + kTransferColumns +
                                     " FROM attempt_transfers WHERE job_id = ?1 ORDER BY attempt, bucket");
  query->bind(1, job_id);
  std::vector<BucketTransfer> out;
  while (query->step()) {
    out.push_back(transfer_of(*query));
  }
  return out;
}

std::vector<BucketTransfer> Attempts::all_transfers() const {
  auto query = impl_->statements.get(std::string("SELECT ") + kTransferColumns +
                                     " FROM attempt_transfers ORDER BY bucket, zone, job_id, attempt");
  std::vector<BucketTransfer> out;
  while (query->step()) {
    out.push_back(transfer_of(*query));
  }
  return out;
}

} // namespace jobman::store
