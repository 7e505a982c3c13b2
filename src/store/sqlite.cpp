#include "jobman/store/sqlite.hpp"

#include "jobman/util/error.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace jobman::store::sqlite {

void create_private_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    return;
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("cannot create " + path.string() + ": " + std::strerror(errno));
  }
  ::close(fd);
}

namespace {

// `path` as an SQLite URI with the immutable flag (characters that mean something in a URI percent-encoded).
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      uri += escaped;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

} // namespace

Database::Database(const std::string& path, OpenMode mode, int busy_timeout_ms) : path_(path) {
  const int flags = mode == OpenMode::read_only ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX
                                                : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                                      (mode == OpenMode::in_memory ? SQLITE_OPEN_MEMORY : 0);
  const std::string name = mode == OpenMode::in_memory   ? std::string(":memory:")
                           : mode == OpenMode::read_only ? immutable_uri(path)
                                                         : path;
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw Error(path_ + ": cannot open database: " + message);
  }
  if (mode == OpenMode::read_write_create) {
    log_path_ = path + "-wal";
  }
  busy_ = std::make_unique<BusyWait>(std::chrono::milliseconds(busy_timeout_ms), kBusyLimit);
  sqlite3_busy_handler(db_, &Database::on_busy, this);
  sqlite3_extended_result_codes(db_, 1);
}

int Database::on_busy(void* self, int count) {
  auto& db = *static_cast<Database*>(self);
  const auto log = db.log_path_.empty() ? BusyWait::LogStamp{} : log_stamp(db.log_path_);
  const auto pause = db.busy_->next(count, BusyWait::Clock::now(), log);
  if (!pause) {
    return 0;
  }
  std::this_thread::sleep_for(*pause);
  return 1;
}

BusyWait::BusyWait(std::chrono::milliseconds patience, std::chrono::milliseconds limit)
    : patience_(patience), limit_(limit), jitter_(static_cast<std::uint32_t>(::getpid()) * 2654435761U ^
                                                  static_cast<std::uint32_t>(Clock::now().time_since_epoch().count())) {
}

std::optional<std::chrono::milliseconds> BusyWait::next(int count, Clock::time_point now, const LogStamp& log) {
  if (count == 0) {
    started_ = now;
    last_move_ = now;
    log_ = log;
  } else if (log != log_) {
    log_ = log;
    last_move_ = now;
  }
  if (now - last_move_ >= patience_ || now - started_ >= limit_) {
    return std::nullopt;
  }
  // Quick retries first (a writer holds the lock for a millisecond or so), then 10-40 ms apart at random, so that the
  // waiters neither sleep in step nor leave the lock idle for long after it is let go.
  if (count < 5) {
    return std::chrono::milliseconds(1 << count);
  }
  jitter_ = jitter_ * 1664525U + 1013904223U;
  return std::chrono::milliseconds(10 + (jitter_ >> 16) % 31);
}

BusyWait::LogStamp log_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return {};
  }
  return {static_cast<std::int64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

Database::~Database() {
  sqlite3_close_v2(db_);
}

// SQLite rolled the failed statement (or transaction) back, so nothing is half-written whatever the reason.
std::string Database::explain(int rc, const std::string& message) const {
  const int primary = rc & 0xff;
  if (primary == SQLITE_READONLY) {
    return read_only_reason_ + " (" + message + ")";
  }
  if (primary == SQLITE_FULL) {
    return std::string(kDiskFull) + " (" + message + ")";
  }
  return message;
}

void Database::fail(std::string_view what, int rc) const {
  std::string message = sqlite3_errmsg(db_);
  if (message.empty() || message == "not an error") {
    message = sqlite3_errstr(rc);
  }
  throw Error(path_ + ": " + std::string(what) + ": " + explain(rc, message));
}

void Database::enable_wal(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto backoff = std::chrono::milliseconds(1);
  std::string mode;
  for (;;) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, "PRAGMA journal_mode=WAL", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        const auto* text = sqlite3_column_text(stmt, 0);
        mode = text != nullptr ? reinterpret_cast<const char*>(text) : "";
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(stmt);
    const int primary = rc & 0xff;
    if (rc == SQLITE_OK && mode == "wal") {
      return;
    }
    // A new database file being set up by another process makes the switch fail with BUSY (or report the old mode).
    if (rc != SQLITE_OK && primary != SQLITE_BUSY && primary != SQLITE_LOCKED) {
      fail("cannot switch to WAL mode", rc);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (rc != SQLITE_OK) {
        fail("cannot switch to WAL mode", rc);
      }
      throw Error(path_ + ": cannot switch to WAL mode: the journal mode stays \"" + mode + "\"");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

void Database::execute(const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = explain(rc, error != nullptr ? error : sqlite3_errstr(rc));
    sqlite3_free(error);
    throw Error(path_ + ": " + message + " (in \"" + sql.substr(0, 60) + "\")");
  }
}

std::int64_t Database::last_insert_rowid() {
  return sqlite3_last_insert_rowid(db_);
}

int Database::changes() const {
  return sqlite3_changes(db_);
}

Statement::Statement(Database& db, std::string_view sql, bool persistent) : db_(&db) {
  const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
  const int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()), flags, &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    db.fail("cannot prepare \"" + std::string(sql.substr(0, 60)) + "\"", rc);
  }
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

void Statement::bind(int index, std::int64_t value) {
  if (const int rc = sqlite3_bind_int64(stmt_, index, value); rc != SQLITE_OK) {
    db_->fail("cannot bind parameter", rc);
  }
}

void Statement::bind(int index, std::string_view value) {
  // A default-constructed string_view has no data pointer, which SQLite would bind as NULL rather than "".
  const char* data = value.data() != nullptr ? value.data() : "";
  const int rc = sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) {
    db_->fail("cannot bind parameter", rc);
  }
}

void Statement::bind_null(int index) {
  if (const int rc = sqlite3_bind_null(stmt_, index); rc != SQLITE_OK) {
    db_->fail("cannot bind parameter", rc);
  }
}

int Statement::parameter_index(const char* name) const {
  return sqlite3_bind_parameter_index(stmt_, name);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  // Reset first so the connection is not left with a half-run statement.
  sqlite3_reset(stmt_);
  db_->fail("cannot run \"" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "\"", rc);
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::column_int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

std::string_view Statement::column_text_view(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) {
    return {};
  }
  return {reinterpret_cast<const char*>(text), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column))};
}

std::unique_ptr<sql::Statement> Database::prepare(std::string_view sql, bool persistent) {
  return std::make_unique<Statement>(*this, sql, persistent);
}

void Database::begin_write() {
  execute("BEGIN IMMEDIATE");
}

void Database::commit() {
  execute("COMMIT");
}

void Database::rollback() noexcept {
  // Nothing useful can be done about a failed rollback; SQLite rolls back on close anyway.
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Database::begin_read() {
  execute("BEGIN");
}

void Database::end_read() noexcept {
  // A read-only transaction has nothing to lose; ending it fails only if it already ended.
  sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
}

} // namespace jobman::store::sqlite
