// Change numbers for watchers: the jobs created, changed or removed after a number a watcher saw (schema version 15
// keeps them up to date with triggers, whatever writes the row).
#include "job_queries.hpp"
#include "store_impl.hpp"

namespace jobman::store {

namespace {

constexpr std::string_view kCursorSql = "SELECT seq - 1 FROM next_change";

} // namespace

std::string queries::job_changes_sql() {
  // The changed rows and the removals after ?1, with (the same on every row) the change number of the oldest removal
  // kept and whether older ones were dropped.
  return "SELECT " + detail::job_columns() +
         ", c.seq, c.removed_id, (SELECT seq FROM job_removals WHERE n = (SELECT MIN(n) FROM job_removals)), "
         "(SELECT MIN(n) FROM job_removals) "
         "FROM (SELECT change_seq AS seq, id, NULL AS removed_id FROM jobs INDEXED BY jobs_by_change "
         "WHERE change_seq > ?1 UNION ALL SELECT seq, NULL, job_id FROM job_removals WHERE seq > ?1) AS c "
         "LEFT JOIN jobs ON jobs.id = c.id ORDER BY c.seq";
}

std::int64_t Jobs::for_each_with_cursor(const JobFilter& filter,
                                        const std::function<void(const JobRecord&)>& fn) const {
  sql::ReadTransaction snapshot(impl_->db);
  const std::int64_t cursor = change_cursor();
  for_each(filter, fn);
  return cursor;
}

std::int64_t Jobs::change_cursor() const {
  auto query = impl_->statements.get(std::string(kCursorSql));
  query->step();
  return query->column_int64(0);
}

JobChanges Jobs::changes_since(std::int64_t cursor) const {
  auto query = impl_->statements.get(queries::job_changes_sql());
  query->bind(1, cursor);
  // After the job's columns: the change's number, the removed id, the oldest removal kept and its n.
  constexpr int kSeq = detail::job_column_count;
  constexpr int kRemovedId = kSeq + 1;
  constexpr int kOldestKeptSeq = kSeq + 2;
  constexpr int kOldestKeptN = kSeq + 3;
  JobChanges changes;
  changes.cursor = cursor;
  while (query->step()) {
    changes.cursor = query->column_int64(kSeq);
    if (const auto removed = query->column_optional_int64(kRemovedId)) {
      changes.removed.push_back(*removed);
    } else {
      detail::read_job(impl_->db, *query, false, changes.jobs.emplace_back());
    }
    // Removals between the cursor and the oldest one kept were dropped when any were dropped at all.
    const auto oldest_kept = query->column_optional_int64(kOldestKeptSeq);
    if (oldest_kept && *oldest_kept > cursor + 1 && query->column_int64(kOldestKeptN) > 1) {
      changes.complete = false;
    }
  }
  return changes;
}

} // namespace jobman::store
