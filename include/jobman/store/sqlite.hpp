// Small RAII wrappers over the SQLite C API: connection, prepared statements, a statement cache, transactions.
#pragma once

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
class Database {
public:
  // Opens `path` (or an in-memory database) and sets its BusyWait (patience `busy_timeout_ms`, at most
  // kBusyLimit in all) before anything else.
  Database(const std::string& path, OpenMode mode, int busy_timeout_ms);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // The path given to the constructor (":memory:" for in-memory databases), for messages.
  [[nodiscard]] const std::string& path() const { return path_; }
  // The raw handle, for the wrappers in this file.
  [[nodiscard]] sqlite3* handle() const { return db_; }

  // Switches to WAL, retrying with a short backoff while another connection's lock makes SQLite refuse.
  void enable_wal(int timeout_ms);
  // Runs SQL text without results (DDL, PRAGMA settings, BEGIN/COMMIT); may hold several statements.
  void execute(const std::string& sql);
  // Runs a query returning one integer (e.g. "PRAGMA user_version").
  [[nodiscard]] std::int64_t query_int(const std::string& sql);
  // Runs a query returning one text value (e.g. "PRAGMA journal_mode=WAL").
  [[nodiscard]] std::string query_text(const std::string& sql);

  // The rowid of the last successful INSERT on this connection.
  [[nodiscard]] std::int64_t last_insert_rowid() const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  [[nodiscard]] int changes() const;

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

// A prepared statement; finalized in the destructor. Parameter and column indexes as in SQLite (1- and 0-based).
class Statement {
public:
  // Prepares `sql` (one statement) on `db`; `persistent` hints SQLite that it will be reused many times.
  Statement(Database& db, std::string_view sql, bool persistent = false);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds an integer.
  void bind(int index, std::int64_t value);
  // Binds an int.
  void bind(int index, int value) { bind(index, static_cast<std::int64_t>(value)); }
  // Binds text (copied).
  void bind(int index, std::string_view value);
  // Binds text (copied); keeps string literals from decaying to integers.
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  // Binds text (copied).
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  // Binds NULL.
  void bind_null(int index);
  // Binds the value, or NULL when empty.
  void bind(int index, const std::optional<std::int64_t>& value);
  // Binds the value, or NULL when empty.
  void bind(int index, const std::optional<int>& value);
  // The index of a named parameter such as ":user"; 0 when the statement does not use it.
  [[nodiscard]] int parameter_index(const char* name) const;

  // Advances to the next row: true when there is one, false when done. Throws on errors.
  bool step();
  // Steps a statement that returns no rows to completion.
  void run();
  // Makes the statement ready to run again and clears its bindings.
  void reset();

  // True when the column is NULL.
  [[nodiscard]] bool is_null(int column) const;
  // The column as a 64-bit integer.
  [[nodiscard]] std::int64_t column_int64(int column) const;
  // The column as an int.
  [[nodiscard]] int column_int(int column) const;
  // The column as text ("" for NULL).
  [[nodiscard]] std::string column_text(int column) const;
  // The column as text without copying; valid until the next step or reset.
  [[nodiscard]] std::string_view column_text_view(int column) const;
  // The column as an integer, or nullopt for NULL.
  [[nodiscard]] std::optional<std::int64_t> column_optional_int64(int column) const;
  // The column as an int, or nullopt for NULL.
  [[nodiscard]] std::optional<int> column_optional_int(int column) const;

private:
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Prepared statements kept for reuse, keyed by their SQL text.
class StatementCache {
public:
  // A statement borrowed from the cache; reset and returned when the handle goes away.
  class Handle {
  public:
    Handle(Statement* statement, bool* in_use, std::unique_ptr<Statement> owned);
    ~Handle();
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    // The statement.
    Statement* operator->() const { return statement_; }
    // The statement.
    Statement& operator*() const { return *statement_; }

  private:
    Statement* statement_;
    bool* in_use_;
    std::unique_ptr<Statement> owned_;
  };

  // A cache preparing its statements on `db`.
  explicit StatementCache(Database& db) : db_(&db) {}
  // The cached statement for `sql`, prepared on first use; a fresh one if the cached one is in use (re-entrancy).
  Handle get(const std::string& sql);

private:
  struct Entry {
    std::unique_ptr<Statement> statement;
    bool in_use = false;
  };
  Database* db_;
  std::unordered_map<std::string, Entry> entries_;
};

// A write transaction: BEGIN IMMEDIATE in the constructor, ROLLBACK in the destructor unless committed.
class Transaction {
public:
  // Begins the transaction, waiting up to the busy timeout for other writers.
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  // Commits; the destructor then does nothing.
  void commit();

private:
  Database* db_;
  bool open_ = false;
};

// A read snapshot: BEGIN (deferred) in the constructor, ended in the destructor. The first read fixes the state every
// read in it sees; in WAL mode it neither waits for writers nor blocks them.
class ReadTransaction {
public:
  explicit ReadTransaction(Database& db);
  ~ReadTransaction();
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

private:
  Database* db_;
};

} // namespace jobman::store::sqlite
