// Small RAII wrappers over the SQLite C API: connection, prepared statements, a statement cache, transactions.
#pragma once

#include "jobman/store/sql.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3;
struct sqlite3_stmt;

namespace jobman::store::sqlite {

// Creates an empty database file with mode 0600 unless `path` exists; SQLite gives its -wal and -shm files the same
// mode. Throws jobman::Error when it cannot.
void create_private_file(const std::filesystem::path& path);

// What a write on a full disk fails with.
inline constexpr std::string_view kDiskFull =
    "the disk is full; nothing was changed: free some space and repeat the command";

// How a connection is opened. `read_only` is for a database on a read-only file system: opened immutable (no locks,
// no journal), which is sound because nothing can write there.
enum class OpenMode { read_write_create, in_memory, read_only };

// How long a connection waits for a lock another connection holds. SQLite's own busy timeout gives up after a fixed
// time however busy the store is: 64 processes queued for the write lock on a loaded machine then fail one after
// another while every one of them is being served. This waits for as long as the store moves (the write-ahead log
// changes: someone commits) and gives up after `patience` with no commit by anyone, which is what a writer that hung
// looks like, or after `limit` in all.
class BusyWait {
public:
  // What changes whenever a connection commits: the write-ahead log's size and modification time.
  struct LogStamp {
    std::int64_t size = -1;
    std::int64_t mtime_ns = 0;
    friend bool operator==(const LogStamp&, const LogStamp&) = default;
  };
  using Clock = std::chrono::steady_clock;

  BusyWait(std::chrono::milliseconds patience, std::chrono::milliseconds limit);
  // For the `count`-th time in a row (0 first) the lock was busy, at `now`, with the log at `log`: how long to sleep
  // before trying again, or nothing to give up.
  std::optional<std::chrono::milliseconds> next(int count, Clock::time_point now, const LogStamp& log);

private:
  std::chrono::milliseconds patience_;
  std::chrono::milliseconds limit_;
  Clock::time_point started_;
  Clock::time_point last_move_;
  LogStamp log_;
  std::uint32_t jitter_;
};

// The stamp of the file at `path` (size -1 when it does not exist).
BusyWait::LogStamp log_stamp(const std::string& path);

// One SQLite connection; closed in the destructor. Errors become jobman::Error naming the database.
class Database final : public sql::Connection {
public:
  // Opens `path` (or an in-memory database) and sets its BusyWait (patience `busy_timeout_ms`, at most
  // kBusyLimit in all) before anything else.
  Database(const std::string& path, OpenMode mode, int busy_timeout_ms);
  ~Database() override;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  [[nodiscard]] sql::Dialect dialect() const override { return sql::Dialect::sqlite; }
  // The path given to the constructor (":memory:" for in-memory databases), for messages.
  [[nodiscard]] const std::string& path() const override { return path_; }
  // The raw handle, for the wrappers in this file.
  [[nodiscard]] sqlite3* handle() const { return db_; }
  [[nodiscard]] std::unique_ptr<sql::Statement> prepare(std::string_view sql, bool persistent) override;

  // Switches to WAL, retrying with a short backoff while another connection's lock makes SQLite refuse.
  void enable_wal(int timeout_ms);
  // Runs SQL text without results (DDL, PRAGMA settings, BEGIN/COMMIT); may hold several statements.
  void execute(const std::string& sql) override;

  // The rowid of the last successful INSERT on this connection.
  [[nodiscard]] std::int64_t last_insert_rowid() override;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  [[nodiscard]] int changes() const override;

  // BEGIN IMMEDIATE: SQLite's one writer at a time, waited for with BusyWait.
  void begin_write() override;
  void commit() override;
  void rollback() noexcept override;
  // BEGIN (deferred): in WAL mode the first read fixes the snapshot.
  void begin_read() override;
  void end_read() noexcept override;

  // Throws jobman::Error "<path>: <what>: <SQLite's message>" for the SQLite result `rc`.
  [[noreturn]] void fail(std::string_view what, int rc) const;
  // Why a write to a read-only connection fails, said instead of SQLite's "attempt to write a readonly database".
  void set_read_only_reason(std::string reason) { read_only_reason_ = std::move(reason); }

  // The longest a connection waits for a lock, however much the store moves meanwhile.
  static constexpr std::chrono::milliseconds kBusyLimit{120'000};

private:
  // SQLite's message for `rc`, with what a user can do about a read-only store or a full disk.
  [[nodiscard]] std::string explain(int rc, const std::string& message) const;
  // SQLite's busy handler: sleeps as BusyWait says, or returns 0 to give up.
  static int on_busy(void* self, int count);

  std::string path_;
  std::string log_path_; // The write-ahead log, whose changes tell a waiting connection the store moves.
  std::unique_ptr<BusyWait> busy_;
  std::string read_only_reason_ = "the store is read-only: JOBMAN_HOME must be writable to change anything";
  sqlite3* db_ = nullptr;
};

// A prepared SQLite statement; finalized in the destructor.
class Statement final : public sql::Statement {
public:
  // Prepares `sql` (one statement) on `db`; `persistent` hints SQLite that it will be reused many times.
  Statement(Database& db, std::string_view sql, bool persistent = false);
  ~Statement() override;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  using sql::Statement::bind;
  void bind(int index, std::int64_t value) override;
  void bind(int index, std::string_view value) override;
  void bind_null(int index) override;
  [[nodiscard]] int parameter_index(const char* name) const override;
  bool step() override;
  void reset() override;
  [[nodiscard]] bool is_null(int column) const override;
  [[nodiscard]] std::int64_t column_int64(int column) const override;
  [[nodiscard]] std::string_view column_text_view(int column) const override;

private:
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// The backend-neutral helpers, under the names this backend's users know.
using sql::ReadTransaction;
using sql::StatementCache;
using sql::Transaction;

} // namespace jobman::store::sqlite
