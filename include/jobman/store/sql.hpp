// The store's two database backends behind one interface: a connection, its statements, a statement cache and
// transactions. SQLite (jobman/store/sqlite.hpp) is the embedded default; PostgreSQL (jobman/store/postgres.hpp)
// serves a lab from one server. The job store writes its SQL once, in SQLite's syntax with numbered (?1) and named
// (:name) parameters; the PostgreSQL backend translates each statement once, when it is prepared.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace jobman::store::sql {

// Which database a connection speaks to, for the few statements that differ.
enum class Dialect { sqlite, postgresql };

// A prepared statement. Parameter and column indexes as in SQLite (1- and 0-based); an unbound parameter is NULL.
class Statement {
public:
  Statement() = default;
  virtual ~Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds an integer.
  virtual void bind(int index, std::int64_t value) = 0;
  // Binds an int.
  void bind(int index, int value) { bind(index, static_cast<std::int64_t>(value)); }
  // Binds text (copied).
  virtual void bind(int index, std::string_view value) = 0;
  // Binds text (copied); keeps string literals from decaying to integers.
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  // Binds text (copied).
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  // Binds NULL.
  virtual void bind_null(int index) = 0;
  // Binds the value, or an integer NULL when empty.
  void bind(int index, const std::optional<std::int64_t>& value);
  // Binds the value, or an integer NULL when empty.
  void bind(int index, const std::optional<int>& value);
  // The index of a named parameter such as ":user"; 0 when the statement does not use it.
  [[nodiscard]] virtual int parameter_index(const char* name) const = 0;

  // Advances to the next row: true when there is one, false when done. Throws on errors.
  virtual bool step() = 0;
  // Steps a statement that returns no rows to completion.
  void run();
  // Makes the statement ready to run again and clears its bindings.
  virtual void reset() = 0;

  // True when the column is NULL.
  [[nodiscard]] virtual bool is_null(int column) const = 0;
  // The column as a 64-bit integer (a boolean as 0 or 1).
  [[nodiscard]] virtual std::int64_t column_int64(int column) const = 0;
  // The column as an int.
  [[nodiscard]] int column_int(int column) const { return static_cast<int>(column_int64(column)); }
  // The column as text ("" for NULL).
  [[nodiscard]] std::string column_text(int column) const { return std::string(column_text_view(column)); }
  // The column as text without copying; valid until the next step or reset.
  [[nodiscard]] virtual std::string_view column_text_view(int column) const = 0;
  // The column as an integer, or nullopt for NULL.
  [[nodiscard]] std::optional<std::int64_t> column_optional_int64(int column) const;
  // The column as an int, or nullopt for NULL.
  [[nodiscard]] std::optional<int> column_optional_int(int column) const;

protected:
  // Binds a NULL that stands for an integer (PostgreSQL wants to know).
  virtual void bind_null_integer(int index) { bind_null(index); }
};

// One connection; closed in the destructor. Errors become jobman::Error naming the store.
class Connection {
public:
  Connection() = default;
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Which database this is.
  [[nodiscard]] virtual Dialect dialect() const = 0;
  // The store's name for messages: a file path, or a URL without its password.
  [[nodiscard]] virtual const std::string& path() const = 0;
  // Prepares one statement; `persistent` hints that it will be reused many times.
  [[nodiscard]] virtual std::unique_ptr<Statement> prepare(std::string_view sql, bool persistent) = 0;
  // Runs SQL text without results (DDL, settings); may hold several statements.
  virtual void execute(const std::string& sql) = 0;
  // Runs a query returning one integer.
  [[nodiscard]] std::int64_t query_int(const std::string& sql);
  // Runs a query returning one text value.
  [[nodiscard]] std::string query_text(const std::string& sql);
  // The id the last INSERT into a table with a generated id gave its row, on this connection.
  [[nodiscard]] virtual std::int64_t last_insert_rowid() = 0;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  [[nodiscard]] virtual int changes() const = 0;

  // Begins a write transaction: one at a time per store, waiting for the one under way.
  virtual void begin_write() = 0;
  // Commits the transaction under way.
  virtual void commit() = 0;
  // Rolls the transaction under way back; never throws.
  virtual void rollback() noexcept = 0;
  // Begins a read snapshot: every read until end_read sees one state; neither waits for writers nor blocks them.
  virtual void begin_read() = 0;
  // Ends the read snapshot; never throws.
  virtual void end_read() noexcept = 0;
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
  explicit StatementCache(Connection& db) : db_(&db) {}
  // The cached statement for `sql`, prepared on first use; a fresh one if the cached one is in use (re-entrancy).
  Handle get(const std::string& sql);

private:
  struct Entry {
    std::unique_ptr<Statement> statement;
    bool in_use = false;
  };
  Connection* db_;
  std::unordered_map<std::string, Entry> entries_;
};

// A write transaction: begun in the constructor, rolled back in the destructor unless committed.
class Transaction {
public:
  // Begins the transaction, waiting for the writer under way.
  explicit Transaction(Connection& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  // Commits; the destructor then does nothing.
  void commit();

private:
  Connection* db_;
  bool open_ = false;
};

// A read snapshot for the scope of the object (Connection::begin_read).
class ReadTransaction {
public:
  explicit ReadTransaction(Connection& db);
  ~ReadTransaction();
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

private:
  Connection* db_;
};

} // namespace jobman::store::sql
