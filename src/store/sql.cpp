#include "jobman/store/sql.hpp"

#include "jobman/util/error.hpp"

namespace jobman::store::sql {

void Statement::bind(int index, const std::optional<std::int64_t>& value) {
  if (value) {
    bind(index, *value);
  } else {
    bind_null_integer(index);
  }
}

void Statement::bind(int index, const std::optional<int>& value) {
  if (value) {
    bind(index, static_cast<std::int64_t>(*value));
  } else {
    bind_null_integer(index);
  }
}

void Statement::run() {
  while (step()) {
  }
}

std::optional<std::int64_t> Statement::column_optional_int64(int column) const {
  if (is_null(column)) {
    return std::nullopt;
  }
  return column_int64(column);
}

std::optional<int> Statement::column_optional_int(int column) const {
  if (is_null(column)) {
    return std::nullopt;
  }
  return column_int(column);
}

std::int64_t Connection::query_int(const std::string& sql) {
  auto statement = prepare(sql, false);
  if (!statement->step()) {
    throw Error(path() + ": no result from \"" + sql + "\"");
  }
  return statement->column_int64(0);
}

std::string Connection::query_text(const std::string& sql) {
  auto statement = prepare(sql, false);
  if (!statement->step()) {
    throw Error(path() + ": no result from \"" + sql + "\"");
  }
  return statement->column_text(0);
}

StatementCache::Handle::Handle(Statement* statement, bool* in_use, std::unique_ptr<Statement> owned)
    : statement_(statement), in_use_(in_use), owned_(std::move(owned)) {}

StatementCache::Handle::~Handle() {
  statement_->reset();
  if (in_use_ != nullptr) {
    *in_use_ = false;
  }
}

StatementCache::Handle StatementCache::get(const std::string& sql) {
  auto [it, inserted] = entries_.try_emplace(sql);
  Entry& entry = it->second;
  if (inserted) {
    try {
      entry.statement = db_->prepare(sql, true);
    } catch (...) {
      entries_.erase(it);
      throw;
    }
  }
  if (entry.in_use) {
    // Someone up the stack is still stepping the cached one (a callback calling back into the store).
    auto fresh = db_->prepare(sql, false);
    Statement* raw = fresh.get();
    return Handle(raw, nullptr, std::move(fresh));
  }
  entry.in_use = true;
  return Handle(entry.statement.get(), &entry.in_use, nullptr);
}

Transaction::Transaction(Connection& db) : db_(&db) {
  db.begin_write();
  open_ = true;
}

Transaction::~Transaction() {
  if (open_) {
    db_->rollback();
  }
}

void Transaction::commit() {
  db_->commit();
  open_ = false;
}

ReadTransaction::ReadTransaction(Connection& db) : db_(&db) {
  db.begin_read();
}

ReadTransaction::~ReadTransaction() {
  db_->end_read();
}

} // namespace jobman::store::sql
