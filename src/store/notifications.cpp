// The store's notifications: recorded with a job's phase change, claimed by a supervisor when due, sent or given up.
#include "store_impl.hpp"

namespace jobman::store {

using sql::Transaction;

void Notifications::enqueue(std::int64_t job_id, int attempt, const std::string& event,
                            const std::vector<std::pair<std::string, std::string>>& recipients, std::int64_t now_ms) {
  if (recipients.empty()) {
    return;
  }
  Transaction transaction(impl_->db);
  auto insert = impl_->statements.get(
      "INSERT OR IGNORE INTO notifications (job_id, attempt, event, channel, target, created_ms, next_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)");
  for (const auto& [channel, target] : recipients) {
    insert->reset();
    insert->bind(1, job_id);
    insert->bind(2, attempt);
    insert->bind(3, event);
    insert->bind(4, channel);
    insert->bind(5, target);
    insert->bind(6, now_ms);
    insert->run();
  }
  transaction.commit();
}

std::vector<Notification> Notifications::claim(std::int64_t now_ms, std::int64_t retry_ms, int limit) {
  const std::string due = "FROM notifications INDEXED BY notifications_due WHERE sent_ms IS NULL AND gave_up = 0 AND "
                          "next_ms <= ?1";
  {
    // A read first: nothing due, the usual case of a tick, costs no write transaction.
    auto peek = impl_->statements.get("SELECT 1 " + due + " LIMIT 1");
    peek->bind(1, now_ms);
    if (!peek->step()) {
      return {};
    }
  }
  std::vector<Notification> claimed;
  Transaction transaction(impl_->db);
  {
    auto select = impl_->statements.get("SELECT id, job_id, attempt, event, channel, target, tries " + due +
                                        " ORDER BY next_ms LIMIT ?2");
    select->bind(1, now_ms);
    select->bind(2, limit);
    while (select->step()) {
      Notification n;
      n.id = select->column_int64(0);
      n.job_id = select->column_int64(1);
      n.attempt = select->column_int(2);
      n.event = select->column_text(3);
      n.channel = select->column_text(4);
      n.target = select->column_text(5);
      n.tries = select->column_int(6) + 1;
      claimed.push_back(std::move(n));
    }
  }
  auto update = impl_->statements.get("UPDATE notifications SET tries = ?2, next_ms = ?3 WHERE id = ?1");
  for (const auto& n : claimed) {
    update->reset();
    update->bind(1, n.id);
    update->bind(2, n.tries);
    update->bind(3, now_ms + (retry_ms << std::min(n.tries - 1, 10)));
    update->run();
  }
  transaction.commit();
  return claimed;
}

void Notifications::sent(std::int64_t id, std::int64_t now_ms) {
  auto update = impl_->statements.get("UPDATE notifications SET sent_ms = ?2, error = '' WHERE id = ?1");
  update->bind(1, id);
  update->bind(2, now_ms);
  update->run();
}

void Notifications::failed(std::int64_t id, const std::string& error, bool give_up) {
  auto update = impl_->statements.get("UPDATE notifications SET error = ?2, gave_up = ?3 WHERE id = ?1");
  update->bind(1, id);
  update->bind(2, error);
  update->bind(3, give_up ? 1 : 0);
  update->run();
}

} // namespace jobman::store
