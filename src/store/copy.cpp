// Copying a store into a PostgreSQL one (`jobman store migrate`): every table but the leases, row for row, in one
// transaction of the target's.
#include "jobman/store/copy.hpp"

#include "jobman/util/system.hpp"
#include "store_impl.hpp"

#include <algorithm>
#include <array>
#include <set>

namespace jobman::store {

namespace {

// The tables copied, parents first, with their keys. Leases are not copied: they belong to the supervisors of the
// source, which must be stopped. An immutable table's rows are never updated, only added.
struct Table {
  const char* name;
  const char* key;
  bool immutable;
  const char* identity; // The column whose sequence goes on after the source's highest id, or nullptr.
};
constexpr std::array<Table, 13> kTables{{
    {"jobs", "id", false, "id"},
    {"job_configs", "job_id", false, nullptr},
    {"attempts", "job_id, number", false, nullptr},
    {"attempt_transfers", "job_id, attempt, bucket", false, nullptr},
    {"events", "id", true, "id"},
    {"notifications", "id", false, "id"},
    {"bad_hardware", "id", true, "id"},
    {"attempt_history", "job_id, number", true, nullptr},
    {"rivals", "job_id, name", false, nullptr},
    {"job_removals", "n", true, nullptr},
    {"zone_catalogs", "endpoint, project, zone", false, nullptr},
    {"bucket_places", "endpoint, bucket", false, nullptr},
    {"store_settings", "key", false, nullptr},
}};

// Rows per INSERT: PostgreSQL takes at most 65535 parameters a statement.
constexpr std::size_t kRowsPerInsert = 500;

std::string column_name(std::string_view name) {
  return "\"" + std::string(name) + "\"";
}

// The table's columns in the target, in their order (the same as the source's: the schemas are kept equal).
std::vector<std::string> columns_of(sql::Connection& target, const char* table) {
  auto query = target.prepare("SELECT column_name FROM information_schema.columns WHERE table_schema = "
                              "current_schema() AND table_name = ?1 ORDER BY ordinal_position",
                              false);
  query->bind(1, table);
  std::vector<std::string> columns;
  while (query->step()) {
    columns.push_back(query->column_text(0));
  }
  if (columns.empty()) {
    throw Error(target.path() + ": no table " + table);
  }
  return columns;
}

// INSERT of `rows` rows of `columns`, with what to do when a row's key is there already.
std::string insert_sql(const Table& table, const std::vector<std::string>& columns, std::size_t rows,
                       StoreCopy::Into into) {
  std::string sql = "INSERT INTO " + std::string(table.name) + " (";
  for (std::size_t c = 0; c < columns.size(); ++c) {
    sql += (c > 0 ? ", " : "") + column_name(columns[c]);
  }
  sql += ") VALUES ";
  int parameter = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    sql += r > 0 ? ", (" : "(";
    for (std::size_t c = 0; c < columns.size(); ++c) {
      sql += (c > 0 ? ", ?" : "?") + std::to_string(++parameter);
    }
    sql += ")";
  }
  if (into == StoreCopy::Into::empty) {
    return sql;
  }
  sql += " ON CONFLICT (" + std::string(table.key) + ") DO ";
  if (into == StoreCopy::Into::ahead || table.immutable) {
    return sql + "NOTHING";
  }
  const std::set<std::string> keys = [&] {
    std::set<std::string> out;
    for (const auto& k : util::split(table.key, ',')) {
      out.emplace(util::trim(k));
    }
    return out;
  }();
  std::string set;
  for (const auto& column : columns) {
    if (!keys.contains(column)) {
      set += (set.empty() ? "" : ", ") + column_name(column) + " = excluded." + column_name(column);
    }
  }
  // A row that is the same in both is left alone: copying again writes only what changed.
  return sql + "UPDATE SET " + set + " WHERE (" + table.name + ".*) IS DISTINCT FROM (excluded.*)";
}

// Copies `table` from `source` (inside its read snapshot) into `target` (inside its transaction); rows written.
// `rename` (from, to): in the jobs table, a `user` of `from` is written as `to`.
std::int64_t copy_table(sql::Connection& source, sql::Connection& target, const Table& table, StoreCopy::Into into,
                        const std::pair<std::string, std::string>& rename) {
  const auto columns = columns_of(target, table.name);
  const bool renaming =
      std::string_view(table.name) == "jobs" && !rename.second.empty() && rename.first != rename.second;
  const auto user_column =
      static_cast<std::size_t>(std::find(columns.begin(), columns.end(), "user") - columns.begin());
  std::string select = "SELECT ";
  for (std::size_t c = 0; c < columns.size(); ++c) {
    select += (c > 0 ? ", " : "") + column_name(columns[c]);
  }
  select += " FROM " + std::string(table.name) + " ORDER BY " + table.key;
  auto rows = source.prepare(select, false);
  // Each row's values, NULL as nullopt; sent in batches.
  std::vector<std::optional<std::string>> batch;
  std::int64_t written = 0;
  std::unique_ptr<sql::Statement> full;
  const auto flush = [&] {
    const std::size_t count = batch.size() / columns.size();
    if (count == 0) {
      return;
    }
    std::unique_ptr<sql::Statement> partial;
    if (count == kRowsPerInsert && !full) {
      full = target.prepare(insert_sql(table, columns, count, into), true);
    }
    sql::Statement& insert =
        count == kRowsPerInsert ? *full : *(partial = target.prepare(insert_sql(table, columns, count, into), false));
    insert.reset();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (batch[i]) {
        insert.bind(static_cast<int>(i + 1), *batch[i]);
      } else {
        insert.bind_null(static_cast<int>(i + 1));
      }
    }
    insert.run();
    written += target.changes();
    batch.clear();
  };
  while (rows->step()) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const int column = static_cast<int>(c);
      if (renaming && c == user_column && !rows->is_null(column) && rows->column_text_view(column) == rename.first) {
        batch.emplace_back(rename.second);
        continue;
      }
      batch.push_back(rows->is_null(column) ? std::nullopt : std::optional<std::string>(rows->column_text(column)));
    }
    if (batch.size() == kRowsPerInsert * columns.size()) {
      flush();
    }
  }
  flush();
  return written;
}

// Whether every event of the target up to the source's newest is the source's own (or belongs to a job the source
// has removed since): the target began as a copy of this source. Walks both in id order.
bool same_history(sql::Connection& source, sql::Connection& target, std::int64_t source_newest_event) {
  auto theirs = target.prepare("SELECT id, job_id, ts_ms, kind FROM events WHERE id <= ?1 ORDER BY id", false);
  theirs->bind(1, source_newest_event);
  auto ours = source.prepare("SELECT id, job_id, ts_ms, kind FROM events ORDER BY id", false);
  auto job_here = source.prepare("SELECT count(*) FROM jobs WHERE id = ?1", false);
  bool have_ours = ours->step();
  while (theirs->step()) {
    const auto id = theirs->column_int64(0);
    while (have_ours && ours->column_int64(0) < id) {
      have_ours = ours->step();
    }
    if (have_ours && ours->column_int64(0) == id) {
      if (ours->column_int64(1) != theirs->column_int64(1) || ours->column_int64(2) != theirs->column_int64(2) ||
          ours->column_text_view(3) != theirs->column_text_view(3)) {
        return false;
      }
      continue;
    }
    job_here->reset();
    job_here->bind(1, theirs->column_int64(1));
    if (job_here->step() && job_here->column_int64(0) > 0) {
      return false; // An event of a job the source has, which the source never had.
    }
  }
  return true;
}

} // namespace

StoreCopy copy_store(const JobStore& from, JobStore& target, const std::string& as_user) {
  sql::Connection& source = from.impl_->db;
  sql::Connection& into = target.impl_->db;
  if (source.dialect() != sql::Dialect::sqlite) {
    throw Error("a SQLite store is copied, not " + source.path());
  }
  if (into.dialect() != sql::Dialect::postgresql) {
    throw Error("a store is copied into a PostgreSQL one, not into " + into.path());
  }
  if (source.path() == into.path()) {
    throw Error("cannot copy " + source.path() + " into itself");
  }
  sql::ReadTransaction snapshot(source);
  StoreCopy copy;
  {
    auto held = source.prepare("SELECT count(*), COALESCE(MIN(owner), '') FROM leases WHERE expires_ms > ?1", false);
    held->bind(1, util::now_ms());
    if (held->step() && held->column_int64(0) > 0) {
      throw Error("a supervisor (" + held->column_text(1) + ") drives " + std::to_string(held->column_int64(0)) +
                  " job(s) of " + source.path() +
                  ": stop it before copying the store, so that nothing changes "
                  "under the copy");
    }
  }
  copy.jobs = source.query_int("SELECT count(*) FROM jobs");
  copy.events = source.query_int("SELECT count(*) FROM events");
  const auto newest_event = source.query_int("SELECT COALESCE(MAX(id), 0) FROM events");
  const auto newest_job = source.query_int("SELECT COALESCE(MAX(id), 0) FROM jobs");

  sql::Transaction transaction(into);
  const bool empty = into.query_int("SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM events) + "
                                    "(SELECT count(*) FROM job_removals)") == 0;
  if (!empty) {
    if (!same_history(source, into, newest_event)) {
      throw Error(into.path() + " holds a history of its own, not a copy of " + source.path() +
                  "'s: nothing was copied (copy into an empty database or schema)");
    }
    auto later = into.prepare("SELECT count(*) FROM events WHERE id > ?1", false);
    later->bind(1, newest_event);
    later->step();
    copy.into = later->column_int64(0) > 0 ? StoreCopy::Into::ahead : StoreCopy::Into::behind;
  }
  // The copied rows keep their change numbers: the jobs table's triggers (change numbers, removals, wake-ups) are off
  // until the copy is done. ALTER TABLE is transactional: a failed copy leaves them on.
  into.execute("ALTER TABLE jobs DISABLE TRIGGER USER");
  if (copy.into == StoreCopy::Into::behind) {
    // Jobs the source removed since the earlier copy go here too (their rows below, and in cascade).
    auto gone = into.prepare("SELECT id FROM jobs WHERE id <= ?1 ORDER BY id", false);
    gone->bind(1, newest_job);
    auto here = source.prepare("SELECT count(*) FROM jobs WHERE id = ?1", false);
    std::vector<std::int64_t> removed;
    while (gone->step()) {
      here->reset();
      here->bind(1, gone->column_int64(0));
      if (here->step() && here->column_int64(0) == 0) {
        removed.push_back(gone->column_int64(0));
      }
    }
    auto remove = into.prepare("DELETE FROM jobs WHERE id = ?1", false);
    for (const auto id : removed) {
      remove->reset();
      remove->bind(1, id);
      remove->run();
    }
    copy.removed = static_cast<std::int64_t>(removed.size());
  }
  // A personal store's jobs are its login's; on the target they are the identity the copy is made as (the role, or
  // `as_user`), so that they stay the user's own there.
  const std::pair<std::string, std::string> rename{from.identity(), as_user.empty() ? target.identity() : as_user};
  copy.user = rename.second;
  for (const auto& table : kTables) {
    copy.written.emplace_back(table.name, copy_table(source, into, table, copy.into, rename));
  }
  into.execute("ALTER TABLE jobs ENABLE TRIGGER USER");
  // Ids are never given twice: the target's go on after the highest the source ever gave (SQLite's
  // AUTOINCREMENT remembers it in sqlite_sequence, removed rows included).
  for (const auto& table : kTables) {
    if (table.identity == nullptr) {
      continue;
    }
    auto given = source.prepare("SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = ?1", false);
    given->bind(1, table.name);
    given->step();
    const auto highest =
        std::max(given->column_int64(0), into.query_int("SELECT COALESCE(MAX(id), 0) FROM " + std::string(table.name)));
    if (highest > 0) {
      auto advance = into.prepare("SELECT setval(pg_get_serial_sequence(?1, 'id'), "
                                  "GREATEST(?2, (SELECT last_value FROM " +
                                      std::string(table.name) + "_id_seq)))",
                                  false);
      advance->bind(1, table.name);
      advance->bind(2, highest);
      advance->step();
    }
  }
  transaction.commit();
  // The planner's statistics, so that the first queries on the copy use its indexes (autovacuum would come later).
  try {
    into.execute("ANALYZE");
  } catch (const Error&) {
    // Only the tables' owner may; the copy stands without.
  }
  return copy;
}

} // namespace jobman::store
