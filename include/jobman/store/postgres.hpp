// The store's PostgreSQL backend (libpq): one server for a lab's users and supervisors. Statements are written in
// SQLite's syntax and translated once each (translate_for_postgres); write transactions are serialized per store by
// a transaction-level advisory lock, so both backends give the same guarantees: one writer at a time, readers never
// waiting.
#pragma once

#include "jobman/store/sql.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pg_conn;
struct pg_result;

namespace jobman::store::postgres {

// A statement in SQLite's syntax, as PostgreSQL reads it.
struct Translated {
  std::string text;                               // With $N parameters.
  int parameters = 0;                             // The largest N.
  std::vector<std::pair<std::string, int>> named; // ":name" -> N, numbered as SQLite numbers them.
  bool writes = false;                            // INSERT, UPDATE or DELETE.
};

// Translates: ?N and :name become $N (SQLite's numbering); the column name user is quoted (a reserved word in
// PostgreSQL); INDEXED BY hints are dropped (the planner picks indexes); INSERT OR IGNORE becomes ON CONFLICT DO
// NOTHING. String literals and quoted identifiers are copied as they are.
Translated translate_for_postgres(std::string_view sql);

// One connection to a PostgreSQL server.
class Connection final : public sql::Connection {
public:
  // Connects to `url` (a libpq URI; the password from the URL, ~/.pgpass or PGPASSFILE). Throws jobman::Error
  // naming the server (without the password) and saying why, on a refused connection or a wrong password.
  explicit Connection(const std::string& url);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  [[nodiscard]] sql::Dialect dialect() const override { return sql::Dialect::postgresql; }
  [[nodiscard]] const std::string& path() const override { return name_; }
  [[nodiscard]] std::unique_ptr<sql::Statement> prepare(std::string_view sql, bool persistent) override;
  void execute(const std::string& sql) override;
  [[nodiscard]] std::int64_t last_insert_rowid() override;
  [[nodiscard]] int changes() const override { return changes_; }
  void begin_write() override;
  void commit() override;
  void rollback() noexcept override;
  void begin_read() override;
  void end_read() noexcept override;

  // The server's clock in milliseconds since the epoch, read as this machine's clock plus the offset measured when
  // the connection opened (and again every minute), so that machines whose clocks differ agree on leases.
  [[nodiscard]] std::int64_t server_now_ms();

  // For statements: runs `text` with the parameters (nullptr for NULL; types 0 to infer, or a type oid).
  pg_result* run(const std::string& text, const std::vector<const char*>& values, const std::vector<unsigned>& types,
                 bool writes);
  // Records what the last command changed.
  void set_changes(int changes) { changes_ = changes; }
  // Throws jobman::Error "<server>: <what>: <PostgreSQL's message>".
  [[noreturn]] void fail(std::string_view what, pg_result* result) const;

private:
  // Runs `sql` (no parameters) and checks it succeeded.
  void simple(const char* sql);
  // Starts a transaction with `begin`; when the connection turns out to have been lost (a server restart, a network
  // cut), reconnects and tries once more: nothing had been done on it yet.
  void begin(const char* begin);
  // Outside a transaction, reopens a connection that was lost: at once the first time, then no sooner than a backoff
  // (0.25 s doubling up to 15 s) after a failed try. Throws jobman::Error while the server cannot be reached.
  void ensure_connected();
  // What every new session runs first.
  void set_up_session();
  void measure_clock();

  std::string name_; // The URL without its password.
  pg_conn* conn_ = nullptr;
  int changes_ = 0;
  bool in_transaction_ = false;
  std::int64_t clock_offset_ms_ = 0;
  std::chrono::steady_clock::time_point clock_measured_;
  std::chrono::milliseconds reconnect_backoff_{0};
  std::chrono::steady_clock::time_point next_reconnect_;
  std::string reconnect_error_; // Why the last try to reconnect failed.
};

// The wake-ups of one store, on a connection of its own that listens on the store's channel: a supervisor learns at
// once that a job arrived or that a user changed what one should do.
class Listener {
public:
  // Connects to `url` and listens. Throws jobman::Error as Connection does.
  explicit Listener(const std::string& url);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Waits up to `timeout` for a wake-up. True when one or more came, or when a lost connection was made again (one
  // may have been missed meanwhile). Never throws: a server that cannot be reached is tried again at the next wait.
  bool wait(std::chrono::milliseconds timeout);

private:
  bool listen();

  std::string name_;
  pg_conn* conn_ = nullptr;
};

} // namespace jobman::store::postgres
