#include "jobman/store/job_store.hpp"

#include "job_queries.hpp"
#include "jobman/store/sqlite.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "schema.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <sys/statvfs.h>

namespace jobman::store {
namespace {

using sqlite::Database;
using sqlite::Statement;
using sqlite::Transaction;

// Long enough for 32 processes creating jobs at once; a writer holds the lock for well under a millisecond.
constexpr int busy_timeout_ms = 10'000;

struct PhaseName {
  Phase phase;
  std::string_view name;
};

constexpr std::array<PhaseName, 10> phase_names{{
    {Phase::pending, "PENDING"},
    {Phase::queued, "QUEUED"},
    {Phase::provisioning, "PROVISIONING"},
    {Phase::setup, "SETUP"},
    {Phase::running, "RUNNING"},
    {Phase::recovering, "RECOVERING"},
    {Phase::succeeded, "SUCCEEDED"},
    {Phase::failed, "FAILED"},
    {Phase::cancelled, "CANCELLED"},
    {Phase::deleted, "DELETED"},
}};

struct DesiredName {
  DesiredState desired;
  std::string_view name;
};

constexpr std::array<DesiredName, 4> desired_names{{
    {DesiredState::run, "run"},
    {DesiredState::stop, "stop"},
    {DesiredState::remove, "delete"},
    {DesiredState::clean, "clean"},
}};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

// The columns of JobRecord in the order read_job expects; config_yaml (from job_configs) is appended only when
// asked for.
constexpr std::string_view job_columns =
    "jobs.id, name, user, accelerator, zone, pricing, tpu_name, hosts, phase, desired, phase_reason, attempt, "
    "preemptions, failures, host0_ip, exit_code, created_ms, updated_ms, phase_since_ms, finished_ms, "
    "config_path, sweep_label, cleanup_pending";
constexpr int config_yaml_column = 23;

std::string select_jobs(bool with_config) {
  std::string sql = "SELECT ";
  sql += job_columns;
  if (with_config) {
    sql += ", job_configs.config_yaml FROM jobs LEFT JOIN job_configs ON job_configs.job_id = jobs.id";
  } else {
    sql += " FROM jobs";
  }
  return sql;
}

Phase phase_column(const Database& db, const Statement& row, int column) {
  const auto text = row.column_text_view(column);
  if (auto phase = parse_phase(text)) {
    return *phase;
  }
  throw Error(db.path() + ": unknown phase '" + std::string(text) + "' in the database");
}

// Fills `job` from a row selected with job_columns; reusing one record keeps its strings' buffers across rows.
void read_job(const Database& db, const Statement& row, bool with_config, JobRecord& job) {
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
  if (with_config) {
    job.config_yaml.assign(row.column_text_view(config_yaml_column));
  } else {
    job.config_yaml.clear();
  }
}

[[noreturn]] void throw_no_such_job(std::int64_t id) {
  throw NoSuchJobError("no job " + util::format_job_id(id));
}

int read_user_version(Database& db) {
  return static_cast<int>(db.query_int("PRAGMA user_version"));
}

void refuse_unknown_version(const Database& db, int version) {
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
  return data.empty() ? std::string() : data.dump();
}

} // namespace

std::string_view to_string(Phase phase) {
  for (const auto& entry : phase_names) {
    if (entry.phase == phase) {
      return entry.name;
    }
  }
  return "UNKNOWN";
}

std::optional<Phase> parse_phase(std::string_view text) {
  for (const auto& entry : phase_names) {
    if (iequals(entry.name, text)) {
      return entry.phase;
    }
  }
  return std::nullopt;
}

bool is_terminal(Phase phase) {
  return phase == Phase::succeeded || phase == Phase::failed || phase == Phase::cancelled || phase == Phase::deleted;
}

const std::vector<Phase>& all_phases() {
  static const std::vector<Phase> phases = [] {
    std::vector<Phase> result;
    result.reserve(phase_names.size());
    for (const auto& entry : phase_names) {
      result.push_back(entry.phase);
    }
    return result;
  }();
  return phases;
}

std::string_view to_string(DesiredState desired) {
  for (const auto& entry : desired_names) {
    if (entry.desired == desired) {
      return entry.name;
    }
  }
  return "unknown";
}

std::optional<DesiredState> parse_desired_state(std::string_view text) {
  for (const auto& entry : desired_names) {
    if (iequals(entry.name, text)) {
      return entry.desired;
    }
  }
  return std::nullopt;
}

namespace queries {

std::string list_jobs_sql(const JobFilter& filter) {
  std::vector<std::string> conditions;
  if (!filter.include_history) {
    // Two index scans (the partial index of unfinished jobs, the finished_ms index) instead of the whole table;
    // the id list comes out sorted, so ORDER BY id needs no sort either.
    conditions.push_back("jobs.id IN (SELECT id FROM jobs WHERE phase NOT IN " +
                         std::string(schema::terminal_phase_list) +
                         " UNION SELECT id FROM jobs WHERE finished_ms >= :since)");
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
  std::string sql = select_jobs(filter.with_config);
  for (std::size_t i = 0; i < conditions.size(); ++i) {
    sql += (i == 0 ? " WHERE " : " AND ") + conditions[i];
  }
  sql += " ORDER BY jobs.id";
  return sql;
}

} // namespace queries

struct JobStore::Impl {
  Impl(const std::string& path, sqlite::OpenMode mode) : db(path, mode, busy_timeout_ms), statements(db) {}

  Database db;
  sqlite::StatementCache statements; // After db: finalized before the connection closes.

  std::optional<JobRecord> find(std::int64_t id, bool with_config) {
    auto query = statements.get(select_jobs(with_config) + " WHERE jobs.id = ?1");
    query->bind(1, id);
    if (!query->step()) {
      return std::nullopt;
    }
    JobRecord job;
    read_job(db, *query, with_config, job);
    return job;
  }

  // Appends an event; false when the job does not exist.
  bool insert_event(std::int64_t job_id, std::int64_t ts_ms, std::string_view kind, std::optional<Phase> from,
                    std::optional<Phase> to, std::string_view message, std::string_view data_json) {
    auto insert = statements.get("INSERT INTO events (job_id, ts_ms, kind, from_phase, to_phase, message, data_json) "
                                 "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM jobs WHERE id = ?1)");
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

  bool job_exists(std::int64_t id) {
    auto query = statements.get("SELECT 1 FROM jobs WHERE id = ?1");
    query->bind(1, id);
    return query->step();
  }
};

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
    auto impl = std::make_unique<Impl>(path.string(), sqlite::OpenMode::read_only);
    configure(impl->db, false);
    if (read_user_version(impl->db) != schema::latest_version()) {
      throw Error(path.string() + ": the store needs upgrading to schema version " +
                  std::to_string(schema::latest_version()) + ", which cannot be done on a read-only file system");
    }
    return JobStore(std::move(impl));
  }
  if (path.has_parent_path()) {
    util::ensure_directory(path.parent_path(), 0700);
  }
  sqlite::create_private_file(path);
  auto impl = std::make_unique<Impl>(path.string(), sqlite::OpenMode::read_write_create);
  try {
    configure(impl->db, true);
  } catch (const Error&) {
    // On a full disk SQLite cannot even create its shared-memory file. Reading still works from the database file
    // (the last connection to close checkpointed the log into it); every write fails saying the disk is full.
    constexpr std::uint64_t kNearlyFull = 1 << 20;
    if (::statvfs(dir.c_str(), &fs_info) != 0 ||
        static_cast<std::uint64_t>(fs_info.f_bavail) * fs_info.f_frsize >= kNearlyFull) {
      throw;
    }
    auto reader = std::make_unique<Impl>(path.string(), sqlite::OpenMode::read_only);
    reader->db.set_read_only_reason(std::string(sqlite::kDiskFull));
    configure(reader->db, false);
    return JobStore(std::move(reader));
  }
  migrate(impl->db);
  return JobStore(std::move(impl));
}

JobStore JobStore::open_in_memory() {
  auto impl = std::make_unique<Impl>(":memory:", sqlite::OpenMode::in_memory);
  configure(impl->db, false);
  migrate(impl->db);
  return JobStore(std::move(impl));
}

int JobStore::current_schema_version() {
  return schema::latest_version();
}

int JobStore::schema_version() const {
  return read_user_version(impl_->db);
}

std::vector<std::int64_t> JobStore::create_jobs(const std::vector<NewJob>& jobs) {
  std::vector<std::int64_t> ids;
  if (jobs.empty()) {
    return ids;
  }
  ids.reserve(jobs.size());
  const std::int64_t now = util::now_ms();
  Transaction transaction(impl_->db);
  auto insert = impl_->statements.get(
      "INSERT INTO jobs (name, user, accelerator, zone, pricing, tpu_name, hosts, phase, desired, phase_reason, "
      "created_ms, updated_ms, phase_since_ms, config_path, sweep_label) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'PENDING', 'run', 'created', ?8, ?8, ?8, ?9, ?10)");
  auto insert_config = impl_->statements.get("INSERT INTO job_configs (job_id, config_yaml) VALUES (?1, ?2)");
  for (const NewJob& job : jobs) {
    insert->bind(1, job.name);
    insert->bind(2, job.user);
    insert->bind(3, job.accelerator);
    insert->bind(4, job.zone);
    insert->bind(5, job.pricing);
    insert->bind(6, job.tpu_name);
    insert->bind(7, job.hosts);
    insert->bind(8, now);
    insert->bind(9, job.config_path);
    insert->bind(10, job.sweep_label);
    insert->run();
    insert->reset();
    const std::int64_t id = impl_->db.last_insert_rowid();
    insert_config->bind(1, id);
    insert_config->bind(2, job.config_yaml);
    insert_config->run();
    insert_config->reset();
    nlohmann::json data = {{"accelerator", job.accelerator}, {"zone", job.zone}, {"pricing", job.pricing}};
    if (!job.sweep_label.empty()) {
      data["sweep_label"] = job.sweep_label;
    }
    impl_->insert_event(id, now, "created", std::nullopt, Phase::pending, "created " + job.name, data.dump());
    ids.push_back(id);
  }
  transaction.commit();
  return ids;
}

std::optional<JobRecord> JobStore::find_job(std::int64_t id, bool with_config) const {
  return impl_->find(id, with_config);
}

JobRecord JobStore::get_job(std::int64_t id, bool with_config) const {
  if (auto job = impl_->find(id, with_config)) {
    return std::move(*job);
  }
  throw_no_such_job(id);
}

void JobStore::for_each_job(const JobFilter& filter, const std::function<void(const JobRecord&)>& fn) const {
  auto query = impl_->statements.get(queries::list_jobs_sql(filter));
  if (!filter.include_history) {
    const std::int64_t now = filter.now_ms != 0 ? filter.now_ms : util::now_ms();
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

std::vector<JobRecord> JobStore::list_jobs(const JobFilter& filter) const {
  std::vector<JobRecord> jobs;
  for_each_job(filter, [&](const JobRecord& job) { jobs.push_back(job); });
  return jobs;
}

JobRecord JobStore::set_desired_state(std::int64_t id, DesiredState desired, const std::string& reason) {
  const std::int64_t now = util::now_ms();
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

bool JobStore::transition(std::int64_t id, std::optional<Phase> expected, const PhaseChange& change) {
  const std::int64_t now = util::now_ms();
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
  if (!is_terminal(change.to)) {
    finished_ms.reset();
  } else if (from != change.to || !finished_ms) {
    finished_ms = now;
  }
  {
    auto update = impl_->statements.get(
        "UPDATE jobs SET phase = ?2, phase_reason = ?3, phase_since_ms = ?4, updated_ms = ?5, finished_ms = ?6, "
        "host0_ip = COALESCE(?7, host0_ip), exit_code = COALESCE(?8, exit_code), "
        "preemptions = preemptions + ?9, failures = failures + ?10, "
        "cleanup_pending = COALESCE(?11, cleanup_pending) WHERE id = ?1");
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
    update->run();
  }
  impl_->insert_event(id, now, "phase", from, change.to, change.reason, phase_event_data(change));
  transaction.commit();
  return true;
}

void JobStore::append_event(std::int64_t job_id, std::string_view kind, std::string_view message,
                            std::string_view data_json) {
  Transaction transaction(impl_->db);
  if (!impl_->insert_event(job_id, util::now_ms(), kind, std::nullopt, std::nullopt, message, data_json)) {
    throw_no_such_job(job_id);
  }
  transaction.commit();
}

std::vector<EventRecord> JobStore::events(std::int64_t job_id) const {
  auto query = impl_->statements.get("SELECT id, job_id, ts_ms, kind, from_phase, to_phase, message, data_json "
                                     "FROM events WHERE job_id = ?1 ORDER BY id");
  query->bind(1, job_id);
  std::vector<EventRecord> events;
  while (query->step()) {
    EventRecord event;
    event.id = query->column_int64(0);
    event.job_id = query->column_int64(1);
    event.ts_ms = query->column_int64(2);
    event.kind = query->column_text(3);
    if (!query->is_null(4)) {
      event.from = phase_column(impl_->db, *query, 4);
    }
    if (!query->is_null(5)) {
      event.to = phase_column(impl_->db, *query, 5);
    }
    event.message = query->column_text(6);
    event.data_json = query->column_text(7);
    events.push_back(std::move(event));
  }
  return events;
}

AttemptRecord JobStore::begin_attempt(std::int64_t job_id, const std::string& queued_resource, const std::string& node,
                                      const std::string& zone, bool create_pending) {
  const std::int64_t now = util::now_ms();
  Transaction transaction(impl_->db);
  int number = 0;
  {
    auto query = impl_->statements.get("SELECT attempt FROM jobs WHERE id = ?1");
    query->bind(1, job_id);
    if (!query->step()) {
      throw_no_such_job(job_id);
    }
    number = query->column_int(0) + 1;
  }
  {
    // Worker 0's address and exit code belonged to the previous attempt.
    auto update = impl_->statements.get(
        "UPDATE jobs SET attempt = ?2, updated_ms = ?3, host0_ip = '', exit_code = NULL WHERE id = ?1");
    update->bind(1, job_id);
    update->bind(2, number);
    update->bind(3, now);
    update->run();
  }
  {
    auto insert = impl_->statements.get("INSERT INTO attempts (job_id, number, queued_resource, node, zone, "
                                        "started_ms, create_pending) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    insert->bind(1, job_id);
    insert->bind(2, number);
    insert->bind(3, queued_resource);
    insert->bind(4, node);
    insert->bind(5, zone);
    insert->bind(6, now);
    insert->bind(7, create_pending ? 1 : 0);
    insert->run();
  }
  nlohmann::json data = {{"attempt", number}, {"queued_resource", queued_resource}, {"node", node}, {"zone", zone}};
  std::string message = "attempt " + std::to_string(number) + " started: " + queued_resource + " in " + zone;
  if (create_pending) {
    data["create_pending"] = true;
    message = "attempt " + std::to_string(number) + " started: requesting " + queued_resource + " in " + zone;
  }
  impl_->insert_event(job_id, now, "attempt", std::nullopt, std::nullopt, message, data.dump());
  transaction.commit();

  AttemptRecord attempt;
  attempt.job_id = job_id;
  attempt.number = number;
  attempt.queued_resource = queued_resource;
  attempt.node = node;
  attempt.zone = zone;
  attempt.started_ms = now;
  attempt.create_pending = create_pending;
  return attempt;
}

void JobStore::confirm_created(std::int64_t job_id, int number) {
  auto update = impl_->statements.get(
      "UPDATE attempts SET create_pending = 0 WHERE job_id = ?1 AND number = ?2 AND create_pending = 1");
  update->bind(1, job_id);
  update->bind(2, number);
  update->run();
  if (impl_->db.changes() == 0 && !impl_->job_exists(job_id)) {
    throw_no_such_job(job_id);
  }
}

void JobStore::end_attempt(std::int64_t job_id, int number, const std::string& outcome, std::optional<int> exit_code) {
  const std::int64_t now = util::now_ms();
  Transaction transaction(impl_->db);
  {
    auto update = impl_->statements.get(
        "UPDATE attempts SET ended_ms = ?3, outcome = ?4, exit_code = ?5 WHERE job_id = ?1 AND number = ?2");
    update->bind(1, job_id);
    update->bind(2, number);
    update->bind(3, now);
    update->bind(4, outcome);
    update->bind(5, exit_code);
    update->run();
  }
  if (impl_->db.changes() == 0) {
    if (!impl_->job_exists(job_id)) {
      throw_no_such_job(job_id);
    }
    throw Error("job " + util::format_job_id(job_id) + " has no attempt " + std::to_string(number));
  }
  nlohmann::json data = {{"attempt", number}, {"outcome", outcome}};
  std::string message = "attempt " + std::to_string(number) + " ended: " + outcome;
  if (exit_code) {
    data["exit_code"] = *exit_code;
    message += " (exit code " + std::to_string(*exit_code) + ")";
  }
  impl_->insert_event(job_id, now, "attempt", std::nullopt, std::nullopt, message, data.dump());
  transaction.commit();
}

std::vector<AttemptRecord> JobStore::attempts(std::int64_t job_id) const {
  auto query = impl_->statements.get(
      "SELECT job_id, number, queued_resource, node, zone, started_ms, ended_ms, outcome, exit_code, released_ms, "
      "create_pending FROM attempts WHERE job_id = ?1 ORDER BY number");
  query->bind(1, job_id);
  std::vector<AttemptRecord> attempts;
  while (query->step()) {
    AttemptRecord attempt;
    attempt.job_id = query->column_int64(0);
    attempt.number = query->column_int(1);
    attempt.queued_resource = query->column_text(2);
    attempt.node = query->column_text(3);
    attempt.zone = query->column_text(4);
    attempt.started_ms = query->column_int64(5);
    attempt.ended_ms = query->column_optional_int64(6);
    attempt.outcome = query->column_text(7);
    attempt.exit_code = query->column_optional_int(8);
    attempt.released_ms = query->column_optional_int64(9);
    attempt.create_pending = query->column_int(10) != 0;
    attempts.push_back(std::move(attempt));
  }
  return attempts;
}

void JobStore::mark_released(std::int64_t job_id, const std::string& queued_resource, const std::string& how) {
  const std::int64_t now = util::now_ms();
  Transaction transaction(impl_->db);
  {
    auto update = impl_->statements.get("UPDATE attempts SET released_ms = ?3 "
                                        "WHERE job_id = ?1 AND queued_resource = ?2 AND released_ms IS NULL");
    update->bind(1, job_id);
    update->bind(2, queued_resource);
    update->bind(3, now);
    update->run();
  }
  if (impl_->db.changes() == 0) {
    return; // Already recorded (or never ours): nothing to say twice.
  }
  const nlohmann::json data = {{"queued_resource", queued_resource}};
  impl_->insert_event(job_id, now, "action", std::nullopt, std::nullopt, queued_resource + " released: " + how,
                      data.dump());
  transaction.commit();
}

void JobStore::set_cleanup_pending(std::int64_t job_id, bool pending) {
  auto update = impl_->statements.get("UPDATE jobs SET cleanup_pending = ?2 WHERE id = ?1");
  update->bind(1, job_id);
  update->bind(2, pending ? 1 : 0);
  update->run();
}

std::vector<JobRecord> JobStore::jobs_to_drive(bool with_config) const {
  // Three index scans: unfinished jobs, finished ones with a slice to release, and delete/clean requests.
  auto query = impl_->statements.get(
      select_jobs(with_config) + " WHERE jobs.id IN (SELECT id FROM jobs WHERE phase NOT IN " +
      std::string(schema::terminal_phase_list) +
      " UNION SELECT id FROM jobs WHERE cleanup_pending = 1 OR desired IN ('delete','clean'))"
      " AND NOT (desired = 'delete' AND phase = 'DELETED' AND cleanup_pending = 0) ORDER BY jobs.id");
  std::vector<JobRecord> jobs;
  while (query->step()) {
    JobRecord job;
    read_job(impl_->db, *query, with_config, job);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

bool JobStore::try_acquire_lease(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms,
                                 std::int64_t now_ms) {
  Transaction transaction(impl_->db);
  if (!impl_->job_exists(job_id)) {
    throw_no_such_job(job_id);
  }
  {
    // One statement decides and writes: insert when free, take over when expired, refresh when already ours.
    auto upsert = impl_->statements.get(
        "INSERT INTO leases (job_id, owner, acquired_ms, heartbeat_ms, expires_ms) VALUES (?1, ?2, ?3, ?3, ?4) "
        "ON CONFLICT (job_id) DO UPDATE SET "
        "acquired_ms = CASE WHEN leases.owner = excluded.owner THEN leases.acquired_ms ELSE excluded.acquired_ms END, "
        "owner = excluded.owner, heartbeat_ms = excluded.heartbeat_ms, expires_ms = excluded.expires_ms "
        "WHERE leases.owner = excluded.owner OR leases.expires_ms <= excluded.acquired_ms");
    upsert->bind(1, job_id);
    upsert->bind(2, owner);
    upsert->bind(3, now_ms);
    upsert->bind(4, now_ms + ttl_ms);
    upsert->run();
  }
  const bool held = impl_->db.changes() > 0;
  transaction.commit();
  return held;
}

bool JobStore::renew_lease(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms, std::int64_t now_ms) {
  Transaction transaction(impl_->db);
  {
    auto update =
        impl_->statements.get("UPDATE leases SET heartbeat_ms = ?3, expires_ms = ?4 WHERE job_id = ?1 AND owner = ?2");
    update->bind(1, job_id);
    update->bind(2, owner);
    update->bind(3, now_ms);
    update->bind(4, now_ms + ttl_ms);
    update->run();
  }
  const bool held = impl_->db.changes() > 0;
  transaction.commit();
  return held;
}

std::vector<std::int64_t> JobStore::renew_leases(const std::vector<std::int64_t>& job_ids, const std::string& owner,
                                                 std::int64_t ttl_ms, std::int64_t now_ms) {
  std::vector<std::int64_t> held;
  Transaction transaction(impl_->db);
  auto update =
      impl_->statements.get("UPDATE leases SET heartbeat_ms = ?3, expires_ms = ?4 WHERE job_id = ?1 AND owner = ?2");
  for (const auto id : job_ids) {
    update->reset();
    update->bind(1, id);
    update->bind(2, owner);
    update->bind(3, now_ms);
    update->bind(4, now_ms + ttl_ms);
    update->run();
    if (impl_->db.changes() > 0) {
      held.push_back(id);
    }
  }
  transaction.commit();
  return held;
}

void JobStore::release_lease(std::int64_t job_id, const std::string& owner) {
  Transaction transaction(impl_->db);
  {
    auto remove = impl_->statements.get("DELETE FROM leases WHERE job_id = ?1 AND owner = ?2");
    remove->bind(1, job_id);
    remove->bind(2, owner);
    remove->run();
  }
  transaction.commit();
}

std::optional<Lease> JobStore::lease(std::int64_t job_id) const {
  auto query = impl_->statements.get(
      "SELECT job_id, owner, acquired_ms, heartbeat_ms, expires_ms FROM leases WHERE job_id = ?1");
  query->bind(1, job_id);
  if (!query->step()) {
    return std::nullopt;
  }
  Lease lease;
  lease.job_id = query->column_int64(0);
  lease.owner = query->column_text(1);
  lease.acquired_ms = query->column_int64(2);
  lease.heartbeat_ms = query->column_int64(3);
  lease.expires_ms = query->column_int64(4);
  return lease;
}

void JobStore::remove_job(std::int64_t id) {
  if (!remove_job_if_present(id)) {
    throw_no_such_job(id);
  }
}

bool JobStore::remove_job_if_present(std::int64_t id) {
  Transaction transaction(impl_->db);
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
  return impl_->db.query_text("PRAGMA integrity_check") == "ok";
}

} // namespace jobman::store
