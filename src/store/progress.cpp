// Training progress as the supervisor records it, and the bulk reads `report` makes of many jobs' histories.
#include "store_impl.hpp"

namespace jobman::store {

using sql::Transaction;

void Attempts::record_progress(const std::vector<ProgressUpdate>& updates) {
  if (updates.empty()) {
    return;
  }
  Transaction transaction(impl_->db);
  for (const auto& update : updates) {
    const auto latest = update.series.latest();
    if (!latest) {
      continue;
    }
    auto series = impl_->statements.get("UPDATE attempts SET progress = ?3 WHERE job_id = ?1 AND number = ?2");
    series->bind(1, update.job_id);
    series->bind(2, update.attempt);
    series->bind(3, update.series.to_text());
    series->step();
    auto job = impl_->statements.get("UPDATE jobs SET step = ?3, step_ms = ?4, step_total = COALESCE(?5, step_total) "
                                     "WHERE id = ?1 AND attempt = ?2");
    job->bind(1, update.job_id);
    job->bind(2, update.attempt);
    job->bind(3, latest->step);
    job->bind(4, latest->at_ms);
    job->bind(5, update.total);
    job->step();
  }
  transaction.commit();
}

void Events::for_each_phase_change(std::int64_t first, std::int64_t last,
                                   const std::function<void(const EventRecord&)>& fn) const {
  // Without the messages (a report reads hundreds of thousands): the columns of read_event, those two empty, and
  // every one of the rest in the index (its kind a constant), so that no table row is read.
  auto query = impl_->statements.get(
      "SELECT id, job_id, ts_ms, 'phase', from_phase, to_phase, '', '' FROM events INDEXED BY events_phase_changes "
      "WHERE kind = 'phase' AND job_id BETWEEN ?1 AND ?2 ORDER BY job_id, id");
  query->bind(1, first);
  query->bind(2, last);
  while (query->step()) {
    fn(detail::read_event(impl_->db, *query));
  }
}

void Attempts::for_each(std::int64_t first, std::int64_t last,
                        const std::function<void(const AttemptRecord&)>& fn) const {
  auto query = impl_->statements.get("SELECT " + detail::attempt_columns() +
                                     " FROM attempts WHERE job_id BETWEEN ?1 AND ?2 ORDER BY job_id, number");
  query->bind(1, first);
  query->bind(2, last);
  while (query->step()) {
    fn(detail::read_attempt(impl_->db, *query));
  }
}

std::vector<AttemptRecord> Attempts::on_worker(std::int64_t worker_id) const {
  auto query = impl_->statements.get("SELECT " + detail::attempt_columns() +
                                     " FROM attempts INDEXED BY attempts_by_worker WHERE worker_id = ?1 ORDER BY "
                                     "started_ms");
  query->bind(1, worker_id);
  std::vector<AttemptRecord> attempts;
  while (query->step()) {
    attempts.push_back(detail::read_attempt(impl_->db, *query));
  }
  return attempts;
}

} // namespace jobman::store
