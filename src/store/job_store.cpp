#include "jobman/store/job_store.hpp"

#include "job_queries.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/postgres.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "schema.hpp"
#include "store_impl.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <sys/statvfs.h>

namespace jobman::store {
namespace {

using detail::busy_timeout_ms;
using detail::phase_column;
using detail::read_job;
using detail::select_jobs;
using detail::throw_no_such_job;
using sql::Transaction;
using sqlite::Database;

int read_user_version(sql::Connection& db) {
  if (db.dialect() == sql::Dialect::postgresql) {
    return static_cast<int>(db.query_int("SELECT version FROM jobman_schema"));
  }
  return static_cast<int>(db.query_int("PRAGMA user_version"));
}

void refuse_unknown_version(const sql::Connection& db, int version) {
  const int latest = schema::latest_version();
  if (version > latest) {
    throw Error(db.path() + " was written by a newer jobman (schema " + std::to_string(version) +
                ", this jobman knows " + std::to_string(latest) + ")");
  }
  if (version < 0) {
    throw Error(db.path() + " has an unknown schema version " + std::to_string(version));
  }
}

// Brings the schema up to date, one step per IMMEDIATE transaction. The version is re-read inside each
// transaction, so processes racing to open a new database apply every step exactly once between them.
void migrate(Database& db) {
  int version = read_user_version(db);
  refuse_unknown_version(db, version);
  const auto steps = schema::migrations();
  while (version < schema::latest_version()) {
    Transaction transaction(db);
    version = read_user_version(db);
    refuse_unknown_version(db, version);
    if (version >= schema::latest_version()) {
      transaction.commit();
      break;
    }
    const schema::Migration& step = steps[static_cast<std::size_t>(version)];
    try {
      db.execute(std::string(step.sql));
    } catch (const Error& e) {
      throw Error("cannot migrate " + db.path() + " to schema " + std::to_string(step.version) + " (" +
                  std::string(step.what) + "): " + e.what());
    }
    db.execute("PRAGMA user_version = " + std::to_string(step.version));
    transaction.commit();
    version = step.version;
  }
}

// Connection settings every store uses; the busy timeout was set when the connection opened.
void configure(Database& db, bool file_backed) {
  if (file_backed) {
    db.enable_wal(busy_timeout_ms);
    // In WAL mode NORMAL never corrupts the database; a power cut may lose the last commits, which the
    // supervisor's idempotent reconcile tolerates.
    db.execute("PRAGMA synchronous = NORMAL");
  }
  db.execute("PRAGMA foreign_keys = ON");
}

std::string phase_event_data(const PhaseChange& change) {
  nlohmann::json data = nlohmann::json::object();
  if (change.release_worker) {
    data["release_worker"] = true;
  }
  if (change.to_queue_head) {
    data["queue_head"] = true;
  }
  if (change.host0_ip) {
    data["host0_ip"] = *change.host0_ip;
  }
  if (change.exit_code) {
    data["exit_code"] = *change.exit_code;
  }
  if (change.add_preemptions != 0) {
    data["add_preemptions"] = change.add_preemptions;
  }
  if (change.add_failures != 0) {
    data["add_failures"] = change.add_failures;
  }
  if (change.add_bad_hardware != 0) {
    data["add_bad_hardware"] = change.add_bad_hardware;
  }
  return data.empty() ? std::string() : data.dump();
}

} // namespace

namespace queries {

std::string list_jobs_sql(const JobFilter& filter, bool postgres) {
  std::vector<std::string> conditions;
  const bool pool_only = !filter.kinds.empty() && std::find(filter.kinds.begin(), filter.kinds.end(),
                                                            domain::JobKind::job) == filter.kinds.end();
  if (pool_only) {
    // Workers and tasks only: the jobs_by_kind index (whose WHERE is this term) reads them and nothing else, where
    // the id list below would gather every unfinished job of any kind first.
    conditions.emplace_back("kind != 'job'");
    if (!filter.include_history) {
      conditions.push_back("(phase NOT IN " + std::string(schema::terminal_phase_list) + " OR finished_ms >= :since)");
    }
  } else if (!filter.include_history) {
    // Two index scans (the partial index of unfinished jobs, the finished_ms index) instead of the whole table;
    // the id list comes out sorted, so ORDER BY id needs no sort either.
    const std::string ids = "SELECT id FROM jobs WHERE phase NOT IN " + std::string(schema::terminal_phase_list) +
                            " UNION SELECT id FROM jobs WHERE finished_ms >= :since";
    conditions.push_back(postgres ? "jobs.id = ANY (ARRAY(" + ids + "))" : "jobs.id IN (" + ids + ")");
  }
  if (!filter.phases.empty()) {
    std::string in = "phase IN (";
    for (std::size_t i = 0; i < filter.phases.size(); ++i) {
      in += (i == 0 ? ":p" : ", :p") + std::to_string(i);
    }
    conditions.push_back(in + ")");
  }
  if (!filter.user.empty()) {
    conditions.emplace_back("user = :user");
  }
  if (!filter.kinds.empty()) {
    std::string in = "kind IN (";
    for (std::size_t i = 0; i < filter.kinds.size(); ++i) {
      in += (i == 0 ? "'" : ", '") + std::string(to_string(filter.kinds[i])) + "'";
    }
    conditions.push_back(in + ")");
  }
  std::string sql = select_jobs(filter.with_config);
  for (std::size_t i = 0; i < conditions.size(); ++i) {
    sql += (i == 0 ? " WHERE " : " AND ") + conditions[i];
  }
  sql += " ORDER BY jobs.id";
  return sql;
}

} // namespace queries

JobStore::JobStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JobStore::JobStore(JobStore&&) noexcept = default;
JobStore& JobStore::operator=(JobStore&&) noexcept = default;
JobStore::~JobStore() = default;

JobStore JobStore::open(const std::filesystem::path& path) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  struct statvfs fs_info {};
  if (::statvfs(dir.c_str(), &fs_info) == 0 && (fs_info.f_flag & ST_RDONLY) != 0) {
    // A read-only JOBMAN_HOME (a snapshot, a backup mounted read-only): list and show still work; anything that
    // writes fails with a clear error and changes nothing.
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      throw Error(dir.string() + " is on a read-only file system and holds no job store: set JOBMAN_HOME to a "
                                 "writable directory");
    }
    auto db = std::make_unique<Database>(path.string(), sqlite::OpenMode::read_only, busy_timeout_ms);
    configure(*db, false);
    if (read_user_version(*db) != schema::latest_version()) {
      throw Error(path.string() + ": the store needs upgrading to schema version " +
                  std::to_string(schema::latest_version()) + ", which cannot be done on a read-only file system");
    }
    return JobStore(std::make_unique<Impl>(std::move(db)));
  }
  if (path.has_parent_path()) {
    util::ensure_directory(path.parent_path(), 0700);
  }
  sqlite::create_private_file(path);
  auto db = std::make_unique<Database>(path.string(), sqlite::OpenMode::read_write_create, busy_timeout_ms);
  try {
    configure(*db, true);
  } catch (const Error&) {
    // On a full disk SQLite cannot even create its shared-memory file. Reading still works from the database file
    // (the last connection to close checkpointed the log into it); every write fails saying the disk is full.
    constexpr std::uint64_t kNearlyFull = 1 << 20;
    if (::statvfs(dir.c_str(), &fs_info) != 0 ||
        static_cast<std::uint64_t>(fs_info.f_bavail) * fs_info.f_frsize >= kNearlyFull) {
      throw;
    }
    auto reader = std::make_unique<Database>(path.string(), sqlite::OpenMode::read_only, busy_timeout_ms);
    reader->set_read_only_reason(std::string(sqlite::kDiskFull));
    configure(*reader, false);
    return JobStore(std::make_unique<Impl>(std::move(reader)));
  }
  migrate(*db);
  // The schema is parsed on a connection's first statement; here, rather than inside its first write transaction.
  (void)db->query_int("SELECT count(*) FROM sqlite_schema");
  return JobStore(std::make_unique<Impl>(std::move(db)));
}

namespace {

// The schema version of a PostgreSQL store; 0 for an empty schema. The catalog is read as a table, with the
// statement's snapshot: a name lookup (to_regclass) may answer from the session's cache, which keeps "no such table"
// until the session next takes a lock on a table, so a process that waited on the write lock while another created
// the store would go on to create it again.
int postgres_version(sql::Connection& db) {
  const bool created = db.query_int("SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                                    "ON n.oid = c.relnamespace WHERE c.relname = 'jobman_schema' "
                                    "AND n.nspname = current_schema()") > 0;
  return created ? read_user_version(db) : 0;
}

// A new PostgreSQL store gets the schema of schema::postgres_baseline_version at once, then the later steps in
// PostgreSQL's dialect. A store that is up to date is read, not locked; otherwise the steps run under the store's
// write lock, so that processes opening a new store together create it once between them.
void migrate_postgres(postgres::Connection& db) {
  // The common case in one round trip: the version table is there and up to date. Anything else (no table yet, no
  // right to read it, a connection lost) is decided under the lock, where the catalog is read as it is.
  int version = 0;
  try {
    version = read_user_version(db);
  } catch (const Error&) {
    version = 0;
  }
  if (version == schema::latest_version()) {
    return;
  }
  sql::Transaction transaction(db);
  version = postgres_version(db);
  refuse_unknown_version(db, version);
  if (version == schema::latest_version()) {
    transaction.commit();
    return;
  }
  if (version == 0) {
    try {
      db.execute(std::string(schema::postgres_baseline()));
    } catch (const Error& e) {
      throw Error("cannot create the store's tables in " + db.path() + ": " + e.what());
    }
    db.execute("CREATE TABLE jobman_schema (version BIGINT NOT NULL); INSERT INTO jobman_schema VALUES (" +
               std::to_string(schema::postgres_baseline_version) + ")");
    version = schema::postgres_baseline_version;
  }
  for (const auto& step : schema::migrations()) {
    if (step.version <= version) {
      continue;
    }
    try {
      db.execute(std::string(step.postgres_sql));
    } catch (const Error& e) {
      throw Error("cannot migrate " + db.path() + " to schema " + std::to_string(step.version) + " (" +
                  std::string(step.what) + "): " + e.what());
    }
    db.execute("UPDATE jobman_schema SET version = " + std::to_string(step.version));
  }
  transaction.commit();
}

} // namespace

JobStore JobStore::open_postgres(const std::string& url) {
  auto db = std::make_unique<postgres::Connection>(url);
  migrate_postgres(*db);
  return JobStore(std::make_unique<Impl>(std::move(db)));
}

JobStore JobStore::open_location(const std::string& location) {
  if (util::is_postgres_url(location)) {
    return open_postgres(location);
  }
  return open(location);
}

bool JobStore::on_postgres() const {
  return impl_->db.dialect() == sql::Dialect::postgresql;
}

std::int64_t JobStore::Impl::clock_ms() const {
  if (auto* server = dynamic_cast<postgres::Connection*>(&db)) {
    return server->server_now_ms();
  }
  return util::now_ms();
}

std::int64_t JobStore::clock_ms() const {
  return impl_->clock_ms();
}

void JobStore::drive_as(std::string owner) {
  impl_->driver = std::move(owner);
}

void JobStore::Impl::check_driving(std::int64_t job_id) {
  if (driver.empty()) {
    return;
  }
  // The owner alone decides, not the expiry: a lease that ran out with nobody taking it over leaves nothing written
  // by another to be overlooked, and supervisors whose clocks disagree still never write for the same job.
  auto query = statements.get("SELECT owner FROM leases WHERE job_id = ?1");
  query->bind(1, job_id);
  if ((query->step() && query->column_text_view(0) == driver) || !job_exists(job_id)) {
    return; // Held; or the job is gone, which the write itself finds (nothing to change, or NoSuchJobError).
  }
  throw LeaseLostError("supervisor " + driver + " no longer holds the lease of job " + domain::format_job_id(job_id));
}

// The views: each a member of the shared implementation, as long-lived as the store.
Jobs& JobStore::jobs() {
  return impl_->jobs;
}
const Jobs& JobStore::jobs() const {
  return impl_->jobs;
}
Events& JobStore::events() {
  return impl_->events;
}
const Events& JobStore::events() const {
  return impl_->events;
}
Attempts& JobStore::attempts() {
  return impl_->attempts;
}
const Attempts& JobStore::attempts() const {
  return impl_->attempts;
}
Rivals& JobStore::rivals() {
  return impl_->rivals;
}
const Rivals& JobStore::rivals() const {
  return impl_->rivals;
}
BadHardware& JobStore::bad_hardware() {
  return impl_->bad_hardware;
}
const BadHardware& JobStore::bad_hardware() const {
  return impl_->bad_hardware;
}
Leases& JobStore::leases() {
  return impl_->leases;
}
const Leases& JobStore::leases() const {
  return impl_->leases;
}
Queue& JobStore::queue() {
  return impl_->queue;
}
const Queue& JobStore::queue() const {
  return impl_->queue;
}
Notifications& JobStore::notifications() {
  return impl_->notifications;
}
const Notifications& JobStore::notifications() const {
  return impl_->notifications;
}
ZoneCatalogs& JobStore::zone_catalogs() {
  return impl_->zone_catalogs;
}
const ZoneCatalogs& JobStore::zone_catalogs() const {
  return impl_->zone_catalogs;
}
Access& JobStore::access() {
  return impl_->access;
}
const Access& JobStore::access() const {
  return impl_->access;
}
Settings& JobStore::settings() {
  return impl_->settings;
}
const Settings& JobStore::settings() const {
  return impl_->settings;
}
Shares& JobStore::shares() {
  return impl_->shares;
}
const Shares& JobStore::shares() const {
  return impl_->shares;
}

JobStore JobStore::open_in_memory() {
  auto db = std::make_unique<Database>(":memory:", sqlite::OpenMode::in_memory, busy_timeout_ms);
  configure(*db, false);
  migrate(*db);
  return JobStore(std::make_unique<Impl>(std::move(db)));
}

int JobStore::current_schema_version() {
  return schema::latest_version();
}

int JobStore::schema_version() const {
  return read_user_version(impl_->db);
}

std::vector<std::int64_t> Jobs::create(const std::vector<NewJob>& jobs,
                                       const std::function<void(const std::vector<std::int64_t>&)>& before_commit) {
  std::vector<std::int64_t> ids;
  if (jobs.empty()) {
    return ids;
  }
  ids.reserve(jobs.size());
  const std::int64_t now = impl_->clock_ms();
  auto insert = impl_->statements.get(
      "INSERT INTO jobs (name, user, accelerator, zone, pricing, tpu_name, hosts, phase, desired, phase_reason, "
      "created_ms, updated_ms, phase_since_ms, config_path, sweep_label, kind, priority, max_failures) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'PENDING', 'run', ?11, ?8, ?8, ?8, ?9, ?10, ?12, ?13, ?14)");
  auto insert_config = impl_->statements.get("INSERT INTO job_configs (job_id, config_yaml) VALUES (?1, ?2)");
  // Compiled before the write lock is taken: in a fresh process that is most of the work, and every other writer
  // would wait for it.
  impl_->statements.get(std::string(JobStore::Impl::insert_event_sql));
  Transaction transaction(impl_->db);
  for (const NewJob& job : jobs) {
    const std::string stored = detail::stored_pricing(job.pricing);
    insert->bind(1, job.name);
    insert->bind(2, job.user);
    insert->bind(3, job.accelerator);
    insert->bind(4, job.zone);
    insert->bind(5, stored);
    insert->bind(6, job.tpu_name);
    insert->bind(7, job.hosts);
    insert->bind(8, now);
    insert->bind(9, job.config_path);
    insert->bind(10, job.sweep_label);
    insert->bind(11, job.kind == domain::JobKind::task ? "queued" : "created");
    insert->bind(12, to_string(job.kind));
    insert->bind(13, job.priority);
    insert->bind(14, job.max_failures);
    insert->run();
    insert->reset();
    const std::int64_t id = impl_->db.last_insert_rowid();
    insert_config->bind(1, id);
    insert_config->bind(2, job.config_yaml);
    insert_config->run();
    insert_config->reset();
    nlohmann::json data = {{"accelerator", job.accelerator}, {"zone", job.zone}, {"pricing", stored}};
    if (!job.sweep_label.empty()) {
      data["sweep_label"] = job.sweep_label;
    }
    std::string message = "created " + job.name;
    if (job.kind != domain::JobKind::job) {
      data["kind"] = to_string(job.kind);
      message = (job.kind == domain::JobKind::task ? "submitted task " : "started worker ") + job.name;
    }
    if (job.priority != 0) {
      data["priority"] = job.priority;
    }
    impl_->insert_event(id, now, "created", std::nullopt, Phase::pending, message, data.dump());
    ids.push_back(id);
  }
  if (before_commit) {
    before_commit(ids);
  }
  transaction.commit();
  return ids;
}

std::optional<JobRecord> Jobs::find(std::int64_t id, bool with_config) const {
  return impl_->find(id, with_config);
}

JobRecord Jobs::get(std::int64_t id, bool with_config) const {
  if (auto job = impl_->find(id, with_config)) {
    return std::move(*job);
  }
  throw_no_such_job(id);
}

void Jobs::for_each(const JobFilter& filter, const std::function<void(const JobRecord&)>& fn) const {
  auto query = impl_->statements.get(queries::list_jobs_sql(filter, impl_->db.dialect() == sql::Dialect::postgresql));
  if (!filter.include_history) {
    const std::int64_t now = filter.now_ms != 0 ? filter.now_ms : impl_->clock_ms();
    query->bind(query->parameter_index(":since"), now - filter.recent_ms);
  }
  for (std::size_t i = 0; i < filter.phases.size(); ++i) {
    query->bind(query->parameter_index((":p" + std::to_string(i)).c_str()), to_string(filter.phases[i]));
  }
  if (!filter.user.empty()) {
    query->bind(query->parameter_index(":user"), filter.user);
  }
  JobRecord job;
  while (query->step()) {
    // The shell-style glob (with [!...] classes) is matched here rather than with SQL GLOB, whose syntax differs.
    if (!filter.name_glob.empty() && !util::glob_match(filter.name_glob, query->column_text_view(1))) {
      continue;
    }
    read_job(impl_->db, *query, filter.with_config, job);
    fn(job);
  }
}

std::vector<JobRecord> Jobs::list(const JobFilter& filter) const {
  std::vector<JobRecord> jobs;
  for_each(filter, [&](const JobRecord& job) { jobs.push_back(job); });
  return jobs;
}

JobRecord Jobs::set_desired_state(std::int64_t id, DesiredState desired, const std::string& reason) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  {
    auto update = impl_->statements.get("UPDATE jobs SET desired = ?2, updated_ms = ?3 WHERE id = ?1");
    update->bind(1, id);
    update->bind(2, to_string(desired));
    update->bind(3, now);
    update->run();
  }
  if (impl_->db.changes() == 0) {
    throw_no_such_job(id);
  }
  std::string message = "desired state " + std::string(to_string(desired));
  if (!reason.empty()) {
    message += ": " + reason;
  }
  const nlohmann::json data = {{"desired", to_string(desired)}, {"reason", reason}};
  impl_->insert_event(id, now, "desired", std::nullopt, std::nullopt, message, data.dump());
  JobRecord job = *impl_->find(id, false);
  transaction.commit();
  return job;
}

bool Jobs::transition(std::int64_t id, std::optional<Phase> expected, const PhaseChange& change) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  Phase from = Phase::pending;
  std::optional<std::int64_t> finished_ms;
  std::int64_t phase_since_ms = now;
  {
    auto query = impl_->statements.get("SELECT phase, finished_ms, phase_since_ms FROM jobs WHERE id = ?1");
    query->bind(1, id);
    if (!query->step()) {
      throw_no_such_job(id);
    }
    from = phase_column(impl_->db, *query, 0);
    finished_ms = query->column_optional_int64(1);
    if (from == change.to) {
      // Staying in a phase (to record a new reason, say) keeps the time it was entered.
      phase_since_ms = query->column_int64(2);
    }
  }
  if (expected && from != *expected) {
    return false;
  }
  impl_->check_driving(id);
  if (!is_terminal(change.to)) {
    finished_ms.reset();
  } else if (from != change.to || !finished_ms) {
    finished_ms = now;
  }
  {
    auto update = impl_->statements.get(
        "UPDATE jobs SET phase = ?2, phase_reason = ?3, phase_since_ms = ?4, updated_ms = ?5, finished_ms = ?6, "
        "host0_ip = COALESCE(?7, host0_ip), exit_code = COALESCE(?8, exit_code), "
        "preemptions = preemptions + ?9, failures = failures + ?10, bad_hardware = bad_hardware + ?14, "
        "cleanup_pending = COALESCE(?11, cleanup_pending), "
        "worker_id = CASE WHEN ?12 <> 0 THEN NULL ELSE worker_id END, "
        "queue_order = CASE WHEN ?13 <> 0 THEN (SELECT COALESCE(MIN(q.queue_order), 0) - 1 FROM jobs AS q "
        "WHERE q.kind = 'task' AND q.phase = 'PENDING' AND q.desired = 'run') ELSE queue_order END "
        "WHERE id = ?1");
    update->bind(1, id);
    update->bind(2, to_string(change.to));
    update->bind(3, change.reason);
    update->bind(4, phase_since_ms);
    update->bind(5, now);
    update->bind(6, finished_ms);
    if (change.host0_ip) {
      update->bind(7, *change.host0_ip);
    }
    update->bind(8, change.exit_code);
    update->bind(9, change.add_preemptions);
    update->bind(10, change.add_failures);
    if (change.cleanup_pending) {
      update->bind(11, *change.cleanup_pending ? 1 : 0);
    }
    update->bind(12, change.release_worker ? 1 : 0);
    update->bind(13, change.to_queue_head ? 1 : 0);
    update->bind(14, change.add_bad_hardware);
    update->run();
  }
  impl_->insert_event(id, now, "phase", from, change.to, change.reason, phase_event_data(change));
  transaction.commit();
  return true;
}

void Events::record_observation(std::int64_t job_id, std::string_view state, std::string_view message,
                                std::string_view data_json) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  if (!impl_->insert_event(job_id, now, "observation", std::nullopt, std::nullopt, message, data_json)) {
    throw_no_such_job(job_id);
  }
  auto update = impl_->statements.get("UPDATE jobs SET slice_state = ?2 WHERE id = ?1");
  update->bind(1, job_id);
  update->bind(2, state);
  update->run();
  transaction.commit();
}

void Events::append(std::int64_t job_id, std::string_view kind, std::string_view message, std::string_view data_json) {
  Transaction transaction(impl_->db);
  if (!impl_->insert_event(job_id, impl_->clock_ms(), kind, std::nullopt, std::nullopt, message, data_json)) {
    throw_no_such_job(job_id);
  }
  transaction.commit();
}

void Events::append_as_driver(std::int64_t job_id, std::string_view kind, std::string_view message,
                              std::string_view data_json) {
  Transaction transaction(impl_->db);
  impl_->check_driving(job_id);
  if (!impl_->insert_event(job_id, impl_->clock_ms(), kind, std::nullopt, std::nullopt, message, data_json)) {
    throw_no_such_job(job_id);
  }
  transaction.commit();
}

std::vector<EventRecord> Events::of(std::int64_t job_id) const {
  auto query =
      impl_->statements.get("SELECT " + detail::event_columns() + " FROM events WHERE job_id = ?1 ORDER BY id");
  query->bind(1, job_id);
  std::vector<EventRecord> events;
  while (query->step()) {
    events.push_back(detail::read_event(impl_->db, *query));
  }
  return events;
}

void Jobs::remove(std::int64_t id) {
  if (!remove_if_present(id)) {
    throw_no_such_job(id);
  }
}

bool Jobs::remove_if_present(std::int64_t id) {
  const std::int64_t now = impl_->clock_ms();
  Transaction transaction(impl_->db);
  if (!impl_->job_exists(id)) {
    return false;
  }
  impl_->check_driving(id);
  {
    // What `jobman availability` and the learned ranking read of the job's attempts outlives it (attempt_history,
    // schema 19): each attempt that asked for a slice of its own (a task's borrows its worker's). An attempt still
    // open ends with the job, so that it never counts as a request waiting now. A row kept already (a job a copy
    // brought back after it was removed here) stands.
    auto keep = impl_->statements.get(
        "INSERT OR IGNORE INTO attempt_history (job_id, number, zone, accelerator, pricing, started_ms, active_ms, "
        "ended_ms, outcome) SELECT job_id, number, zone, accelerator, pricing, started_ms, active_ms, "
        "COALESCE(ended_ms, ?2), outcome FROM attempts WHERE job_id = ?1 AND worker_id IS NULL");
    keep->bind(1, id);
    keep->bind(2, now);
    keep->run();
  }
  {
    // The job row goes first: the events trigger refuses deletes while the job exists. Its foreign keys
    // cascade to its config, attempts, events and lease; the explicit deletes below keep that true without them.
    auto remove = impl_->statements.get("DELETE FROM jobs WHERE id = ?1");
    remove->bind(1, id);
    remove->run();
  }
  if (impl_->db.changes() == 0) {
    return false;
  }
  for (const char* table : {"job_configs", "attempts", "events", "leases"}) {
    auto remove = impl_->statements.get(std::string("DELETE FROM ") + table + " WHERE job_id = ?1");
    remove->bind(1, id);
    remove->run();
  }
  transaction.commit();
  return true;
}

bool JobStore::integrity_ok() const {
  if (impl_->db.dialect() == sql::Dialect::postgresql) {
    return true; // The server checks its own pages; there is no PRAGMA integrity_check to ask.
  }
  return impl_->db.query_text("PRAGMA integrity_check") == "ok";
}

} // namespace jobman::store
