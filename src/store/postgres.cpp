#include "jobman/store/postgres.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <libpq-fe.h>
#include <poll.h>
#include <thread>

namespace jobman::store::postgres {
namespace {

constexpr Oid kInt8 = 20; // PostgreSQL's type oid of bigint.
constexpr auto kClockRemeasure = std::chrono::minutes(1);
constexpr std::chrono::milliseconds kFirstReconnectBackoff(250);
constexpr std::chrono::milliseconds kLastReconnectBackoff(15000);

// The advisory lock every write transaction of one store (one schema) takes: PostgreSQL's counterpart of SQLite's
// single writer.
constexpr const char* kWriteLock = "SELECT pg_advisory_xact_lock(hashtext('jobman:' || current_schema()))";

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}

std::string lower(std::string_view word) {
  std::string out(word);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The word at `i` (which starts one) and the index after it.
std::pair<std::string_view, std::size_t> word_at(std::string_view sql, std::size_t i) {
  std::size_t end = i;
  while (end < sql.size() && ident_char(sql[end])) {
    ++end;
  }
  return {sql.substr(i, end - i), end};
}

std::size_t skip_space(std::string_view sql, std::size_t i) {
  while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i])) != 0) {
    ++i;
  }
  return i;
}

// Copies the quoted run starting at `i` (a string literal or a quoted identifier; doubled quotes inside) to `out`.
std::size_t copy_quoted(std::string_view sql, std::size_t i, std::string& out) {
  const char quote = sql[i];
  out += quote;
  ++i;
  while (i < sql.size()) {
    out += sql[i];
    if (sql[i] == quote) {
      if (i + 1 < sql.size() && sql[i + 1] == quote) {
        out += quote;
        i += 2;
        continue;
      }
      return i + 1;
    }
    ++i;
  }
  return i;
}

std::string message_of(const PGresult* result, const PGconn* conn) {
  std::string message = result != nullptr ? PQresultErrorMessage(result) : "";
  if (message.empty() && conn != nullptr) {
    message = PQerrorMessage(conn);
  }
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back())) != 0) {
    message.pop_back();
  }
  if (message.starts_with("ERROR:  ")) {
    message.erase(0, 8);
  }
  return message.empty() ? "the server did not say why" : message;
}

// A statement on a PostgreSQL connection: bound values are sent as text with their types, and the whole result is
// fetched on the first step.
class Statement final : public sql::Statement {
public:
  Statement(Connection& db, Translated translated) : db_(&db), sql_(std::move(translated)) {
    values_.resize(static_cast<std::size_t>(sql_.parameters));
    types_.resize(static_cast<std::size_t>(sql_.parameters), 0);
  }
  ~Statement() override { PQclear(result_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  using sql::Statement::bind;
  void bind(int index, std::int64_t value) override { set(index, std::to_string(value), kInt8); }
  // Text goes untyped, as a quoted literal would: PostgreSQL gives it the type its place needs.
  void bind(int index, std::string_view value) override { set(index, std::string(value), 0); }
  void bind_null(int index) override { set(index, std::nullopt, 0); }

  [[nodiscard]] int parameter_index(const char* name) const override {
    for (const auto& [named, index] : sql_.named) {
      if (named == name) {
        return index;
      }
    }
    return 0;
  }

  bool step() override {
    if (result_ == nullptr) {
      std::vector<const char*> values;
      values.reserve(values_.size());
      for (const auto& value : values_) {
        values.push_back(value ? value->c_str() : nullptr);
      }
      result_ = db_->run(sql_.text, values, types_, sql_.writes);
      row_ = 0;
    } else {
      ++row_;
    }
    return row_ < PQntuples(result_);
  }

  void reset() override {
    PQclear(result_);
    result_ = nullptr;
    row_ = -1;
    std::fill(values_.begin(), values_.end(), std::nullopt);
    std::fill(types_.begin(), types_.end(), 0);
  }

  [[nodiscard]] bool is_null(int column) const override { return PQgetisnull(result_, row_, column) != 0; }

  [[nodiscard]] std::int64_t column_int64(int column) const override {
    const auto text = column_text_view(column);
    if (text == "t") {
      return 1;
    }
    if (text == "f" || text.empty()) {
      return 0;
    }
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size()) {
      return value;
    }
    // A numeric (SUM, AVG): its integer part, as SQLite's integer read of a real gives.
    return static_cast<std::int64_t>(std::strtod(std::string(text).c_str(), nullptr));
  }

  [[nodiscard]] std::string_view column_text_view(int column) const override {
    if (PQgetisnull(result_, row_, column) != 0) {
      return {};
    }
    return {PQgetvalue(result_, row_, column), static_cast<std::size_t>(PQgetlength(result_, row_, column))};
  }

protected:
  void bind_null_integer(int index) override { set(index, std::nullopt, kInt8); }

private:
  void set(int index, std::optional<std::string> value, Oid type) {
    if (index < 1 || index > sql_.parameters) {
      throw Error(db_->path() + ": no parameter " + std::to_string(index) + " in \"" + sql_.text.substr(0, 60) + "\"");
    }
    values_[static_cast<std::size_t>(index - 1)] = std::move(value);
    types_[static_cast<std::size_t>(index - 1)] = type;
  }

  Connection* db_;
  Translated sql_;
  std::vector<std::optional<std::string>> values_;
  std::vector<unsigned> types_;
  PGresult* result_ = nullptr;
  int row_ = -1;
};

} // namespace

Translated translate_for_postgres(std::string_view sql) {
  Translated out;
  out.text.reserve(sql.size() + 16);
  bool ignore_conflicts = false;
  bool first_word = true;
  std::size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      i = copy_quoted(sql, i, out.text);
      continue;
    }
    if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      const auto eol = sql.find('\n', i);
      const auto stop = eol == std::string_view::npos ? sql.size() : eol;
      out.text.append(sql.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (c == '?') {
      std::size_t end = i + 1;
      while (end < sql.size() && std::isdigit(static_cast<unsigned char>(sql[end])) != 0) {
        ++end;
      }
      int n = out.parameters + 1;
      if (end > i + 1) {
        std::from_chars(sql.data() + i + 1, sql.data() + end, n);
      }
      out.parameters = std::max(out.parameters, n);
      out.text += "$" + std::to_string(n);
      i = end;
      continue;
    }
    if (c == ':' && i + 1 < sql.size() && ident_start(sql[i + 1]) && (i == 0 || sql[i - 1] != ':')) {
      const auto [name, end] = word_at(sql, i + 1);
      const std::string key = ":" + std::string(name);
      int n = 0;
      for (const auto& [named, index] : out.named) {
        if (named == key) {
          n = index;
        }
      }
      if (n == 0) {
        n = ++out.parameters;
        out.named.emplace_back(key, n);
      }
      out.text += "$" + std::to_string(n);
      i = end;
      continue;
    }
    if (ident_start(c) && (i == 0 || (!ident_char(sql[i - 1]) && sql[i - 1] != '$'))) {
      const auto [word, end] = word_at(sql, i);
      const auto name = lower(word);
      if (first_word) {
        first_word = false;
        out.writes = name == "insert" || name == "update" || name == "delete";
      }
      if (name == "user") {
        out.text += "\"user\"";
        i = end;
        continue;
      }
      if (name == "indexed") {
        const auto by = skip_space(sql, end);
        if (by < sql.size() && ident_start(sql[by]) && lower(word_at(sql, by).first) == "by") {
          const auto index = skip_space(sql, word_at(sql, by).second);
          i = index < sql.size() && ident_start(sql[index]) ? word_at(sql, index).second : index;
          continue;
        }
      }
      if (name == "insert") {
        const auto next = skip_space(sql, end);
        if (next < sql.size() && ident_start(sql[next]) && lower(word_at(sql, next).first) == "or") {
          const auto what = skip_space(sql, word_at(sql, next).second);
          if (what < sql.size() && lower(word_at(sql, what).first) == "ignore") {
            out.text += word;
            ignore_conflicts = true;
            i = word_at(sql, what).second;
            continue;
          }
        }
      }
      out.text.append(word);
      i = end;
      continue;
    }
    out.text += c;
    ++i;
  }
  if (ignore_conflicts) {
    while (!out.text.empty() &&
           (std::isspace(static_cast<unsigned char>(out.text.back())) != 0 || out.text.back() == ';')) {
      out.text.pop_back();
    }
    out.text += " ON CONFLICT DO NOTHING";
  }
  return out;
}

namespace {

// A new session on `url` (`name` is the URL without its password); throws jobman::Error saying why there is none.
PGconn* connect(const std::string& url, const std::string& name) {
  // No GSSAPI encryption unless the URL asks for it (what it says comes after this default): trying it costs each
  // connection a Kerberos lookup, and a lab's store uses TLS (sslmode, the URL's to choose).
  const std::array<const char*, 3> keywords = {"gssencmode", "dbname", nullptr};
  const std::array<const char*, 3> values = {"disable", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords.data(), values.data(), 1);
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    const std::string message = conn != nullptr ? message_of(nullptr, conn) : "out of memory";
    PQfinish(conn);
    throw Error("cannot connect to " + name + ": " + message);
  }
  return conn;
}

} // namespace

Connection::Connection(const std::string& url) : name_(util::without_password(url)), conn_(connect(url, name_)) {
  set_up_session();
}

void Connection::set_up_session() {
  // Notices (e.g. "relation already exists, skipping") are not errors; keep them off the user's terminal (dropped
  // here rather than by a SET after connecting: one round trip less for every command).
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  measure_clock();
}

void Connection::ensure_connected() {
  if (in_transaction_ || PQstatus(conn_) == CONNECTION_OK) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now < next_reconnect_) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_reconnect_ - now);
    throw Error(name_ + ": the server cannot be reached (" + reconnect_error_ + "); trying again in " +
                std::to_string((wait.count() + 999) / 1000) + " s");
  }
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    reconnect_error_ = message_of(nullptr, conn_);
    reconnect_backoff_ = std::clamp(reconnect_backoff_ * 2, kFirstReconnectBackoff, kLastReconnectBackoff);
    next_reconnect_ = now + reconnect_backoff_;
    throw Error("cannot reconnect to " + name_ + ": " + reconnect_error_);
  }
  reconnect_backoff_ = std::chrono::milliseconds(0);
  set_up_session();
}

void Connection::begin(const char* begin) {
  ensure_connected();
  PGresult* result = PQexec(conn_, begin);
  if (PQresultStatus(result) == PGRES_COMMAND_OK) {
    PQclear(result);
    return;
  }
  if (PQstatus(conn_) == CONNECTION_OK) {
    fail(std::string("cannot run \"") + begin + "\"", result);
  }
  PQclear(result);
  ensure_connected();
  simple(begin);
}

Connection::~Connection() {
  PQfinish(conn_);
}

std::unique_ptr<sql::Statement> Connection::prepare(std::string_view sql, bool /*persistent*/) {
  return std::make_unique<Statement>(*this, translate_for_postgres(sql));
}

void Connection::simple(const char* sql) {
  PGresult* result = PQexec(conn_, sql);
  const auto status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    fail(std::string("cannot run \"") + std::string(sql).substr(0, 60) + "\"", result);
  }
  PQclear(result);
}

void Connection::execute(const std::string& sql) {
  ensure_connected();
  simple(sql.c_str());
}

void Connection::fail(std::string_view what, PGresult* result) const {
  std::string message = message_of(result, conn_);
  PQclear(result);
  if (PQstatus(conn_) != CONNECTION_OK) {
    message = "lost the connection to the server (" + message + ")";
  }
  throw Error(name_ + ": " + std::string(what) + ": " + message);
}

PGresult* Connection::run(const std::string& text, const std::vector<const char*>& values,
                          const std::vector<unsigned>& types, bool writes) {
  // A write outside a transaction takes the store's write lock like any other, so that no statement ever runs
  // beside a write transaction on the same rows: the guarantee SQLite gives.
  const bool wrap = writes && !in_transaction_;
  if (wrap) {
    begin_write();
  } else if (!in_transaction_) {
    ensure_connected();
  }
  const auto execute = [&] {
    return PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), types.data(), values.data(), nullptr,
                        nullptr, 0);
  };
  PGresult* result = execute();
  auto status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && !in_transaction_ && PQstatus(conn_) != CONNECTION_OK) {
    // A read on its own found the connection lost: it did nothing, so it runs again on a new one.
    PQclear(result);
    ensure_connected();
    result = execute();
    status = PQresultStatus(result);
  }
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    if (wrap) {
      rollback();
    }
    fail("cannot run \"" + text.substr(0, 60) + "\"", result);
  }
  const char* tuples = PQcmdTuples(result);
  changes_ = 0;
  if (tuples != nullptr) {
    std::from_chars(tuples, tuples + std::strlen(tuples), changes_);
  }
  if (wrap) {
    const int changed = changes_;
    commit();
    changes_ = changed;
  }
  return result;
}

std::int64_t Connection::last_insert_rowid() {
  return query_int("SELECT lastval()");
}

void Connection::begin_write() {
  begin("BEGIN");
  in_transaction_ = true;
  try {
    simple(kWriteLock);
  } catch (...) {
    rollback();
    throw;
  }
}

void Connection::commit() {
  in_transaction_ = false;
  simple("COMMIT");
}

void Connection::rollback() noexcept {
  in_transaction_ = false;
  PQclear(PQexec(conn_, "ROLLBACK"));
}

void Connection::begin_read() {
  begin("BEGIN ISOLATION LEVEL REPEATABLE READ");
  in_transaction_ = true;
}

void Connection::end_read() noexcept {
  in_transaction_ = false;
  PQclear(PQexec(conn_, "COMMIT"));
}

void Connection::measure_clock() {
  const auto before = util::now_ms();
  const auto server = query_int("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint");
  const auto after = util::now_ms();
  clock_offset_ms_ = server - (before + after) / 2;
  clock_measured_ = std::chrono::steady_clock::now();
}

std::int64_t Connection::server_now_ms() {
  if (!in_transaction_ && std::chrono::steady_clock::now() - clock_measured_ >= kClockRemeasure) {
    try {
      measure_clock();
    } catch (const Error&) {
      // The server cannot be asked now; the offset measured last still holds (clocks drift by milliseconds a day).
      clock_measured_ = std::chrono::steady_clock::now();
    }
  }
  return util::now_ms() + clock_offset_ms_;
}

Listener::Listener(const std::string& url) : name_(util::without_password(url)), conn_(connect(url, name_)) {
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  if (!listen()) {
    const std::string message = message_of(nullptr, conn_);
    PQfinish(conn_);
    conn_ = nullptr;
    throw Error(name_ + ": cannot listen for the store's wake-ups: " + message);
  }
}

Listener::~Listener() {
  PQfinish(conn_);
}

bool Listener::listen() {
  // The channel is named after the schema the URL's search_path selects, as the trigger names it.
  PGresult* result = PQexec(conn_, "SELECT current_schema()");
  if (PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) != 1) {
    PQclear(result);
    return false;
  }
  std::string channel = "\"jobman:";
  for (const char* c = PQgetvalue(result, 0, 0); *c != '\0'; ++c) {
    channel += *c;
    if (*c == '"') {
      channel += '"';
    }
  }
  channel += '"';
  PQclear(result);
  result = PQexec(conn_, ("LISTEN " + channel).c_str());
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  PQclear(result);
  return ok;
}

bool Listener::wait(std::chrono::milliseconds timeout) {
  if (PQstatus(conn_) != CONNECTION_OK) {
    PQreset(conn_);
    if (PQstatus(conn_) == CONNECTION_OK && listen()) {
      return true;
    }
    std::this_thread::sleep_for(timeout);
    return false;
  }
  pollfd fd{PQsocket(conn_), POLLIN, 0};
  if (::poll(&fd, 1, static_cast<int>(timeout.count())) <= 0) {
    return false;
  }
  if (PQconsumeInput(conn_) == 0) {
    return false; // The connection is lost: the next wait makes it again.
  }
  bool woken = false;
  while (PGnotify* notice = PQnotifies(conn_)) {
    woken = true;
    PQfreemem(notice);
  }
  return woken;
}

} // namespace jobman::store::postgres
