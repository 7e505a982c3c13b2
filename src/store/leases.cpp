// The store's leases: who drives a job, until when.
#include "jobman/util/system.hpp"
#include "store_impl.hpp"

#include <nlohmann/json.hpp>

namespace jobman::store {

using detail::throw_no_such_job;
using sql::Transaction;

bool Leases::try_acquire(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms, std::int64_t now_ms) {
  Transaction transaction(impl_->db);
  if (!impl_->job_exists(job_id)) {
    throw_no_such_job(job_id);
  }
  {
    // One statement decides and writes: insert when free, take over when expired, refresh when already ours.
    auto upsert = impl_->statements.get(
        "INSERT INTO leases (job_id, owner, acquired_ms, heartbeat_ms, expires_ms) VALUES (?1, ?2, ?3, ?3, ?4) "
        "ON CONFLICT (job_id) DO UPDATE SET "
        "acquired_ms = CASE WHEN leases.owner = excluded.owner THEN leases.acquired_ms ELSE excluded.acquired_ms END, "
        "owner = excluded.owner, heartbeat_ms = excluded.heartbeat_ms, expires_ms = excluded.expires_ms "
        "WHERE leases.owner = excluded.owner OR leases.expires_ms <= excluded.acquired_ms");
    upsert->bind(1, job_id);
    upsert->bind(2, owner);
    upsert->bind(3, now_ms);
    upsert->bind(4, now_ms + ttl_ms);
    upsert->run();
  }
  const bool held = impl_->db.changes() > 0;
  transaction.commit();
  return held;
}

bool Leases::renew(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms, std::int64_t now_ms) {
  Transaction transaction(impl_->db);
  {
    auto update =
        impl_->statements.get("UPDATE leases SET heartbeat_ms = ?3, expires_ms = ?4 WHERE job_id = ?1 AND owner = ?2");
    update->bind(1, job_id);
    update->bind(2, owner);
    update->bind(3, now_ms);
    update->bind(4, now_ms + ttl_ms);
    update->run();
  }
  const bool held = impl_->db.changes() > 0;
  transaction.commit();
  return held;
}

std::vector<std::int64_t> Leases::renew_all(const std::vector<std::int64_t>& job_ids, const std::string& owner,
                                            std::int64_t ttl_ms, std::int64_t now_ms) {
  std::vector<std::int64_t> held;
  Transaction transaction(impl_->db);
  auto update =
      impl_->statements.get("UPDATE leases SET heartbeat_ms = ?3, expires_ms = ?4 WHERE job_id = ?1 AND owner = ?2");
  for (const auto id : job_ids) {
    update->reset();
    update->bind(1, id);
    update->bind(2, owner);
    update->bind(3, now_ms);
    update->bind(4, now_ms + ttl_ms);
    update->run();
    if (impl_->db.changes() > 0) {
      held.push_back(id);
    }
  }
  transaction.commit();
  return held;
}

void Leases::release(std::int64_t job_id, const std::string& owner) {
  Transaction transaction(impl_->db);
  {
    auto remove = impl_->statements.get("DELETE FROM leases WHERE job_id = ?1 AND owner = ?2");
    remove->bind(1, job_id);
    remove->bind(2, owner);
    remove->run();
  }
  transaction.commit();
}

std::optional<Lease> Leases::of(std::int64_t job_id) const {
  auto query = impl_->statements.get(
      "SELECT job_id, owner, acquired_ms, heartbeat_ms, expires_ms FROM leases WHERE job_id = ?1");
  query->bind(1, job_id);
  if (!query->step()) {
    return std::nullopt;
  }
  Lease lease;
  lease.job_id = query->column_int64(0);
  lease.owner = query->column_text(1);
  lease.acquired_ms = query->column_int64(2);
  lease.heartbeat_ms = query->column_int64(3);
  lease.expires_ms = query->column_int64(4);
  return lease;
}

std::vector<std::string> Leases::live_owners(std::int64_t now_ms) const {
  auto query = impl_->statements.get("SELECT DISTINCT owner FROM leases WHERE expires_ms > ?1");
  query->bind(1, now_ms);
  std::vector<std::string> owners;
  while (query->step()) {
    owners.push_back(query->column_text(0));
  }
  return owners;
}

std::vector<LiveLease> Leases::live(std::int64_t now_ms) const {
  auto query = impl_->statements.get("SELECT leases.job_id, leases.owner, jobs.phase, jobs.cleanup_pending FROM leases "
                                     "JOIN jobs ON jobs.id = leases.job_id WHERE leases.expires_ms > ?1 "
                                     "ORDER BY leases.job_id");
  query->bind(1, now_ms);
  std::vector<LiveLease> leases;
  while (query->step()) {
    LiveLease lease;
    lease.job_id = query->column_int64(0);
    lease.owner = query->column_text(1);
    lease.phase = domain::parse_phase(query->column_text_view(2)).value_or(domain::Phase::pending);
    lease.cleanup_pending = query->column_int64(3) != 0;
    leases.push_back(std::move(lease));
  }
  return leases;
}

int Leases::expire_all_of(const std::string& owner, std::int64_t now_ms) {
  Transaction transaction(impl_->db);
  {
    auto update = impl_->statements.get("UPDATE leases SET expires_ms = ?2 WHERE owner = ?1 AND expires_ms > ?2");
    update->bind(1, owner);
    update->bind(2, now_ms);
    update->run();
  }
  const int ended = impl_->db.changes();
  transaction.commit();
  return ended;
}

} // namespace jobman::store
