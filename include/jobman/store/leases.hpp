// The store's leases: which supervisor drives which job, until when, and the jobs there are to drive.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/util/error.hpp"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace jobman::store {

// A write for a job refused because the job's lease no longer names the supervisor the store drives as
// (JobStore::drive_as): another took the job over. That supervisor lets the job go without writing more.
class LeaseLostError : public Error {
public:
  using Error::Error;
};

// A live lease with the state of the record it covers (Leases::live).
struct LiveLease {
  std::int64_t job_id = 0;
  std::string owner;
  domain::Phase phase = domain::Phase::pending;
  bool cleanup_pending = false; // A finished record whose slice is still being released.
};

class Leases : public StoreView {
public:
  using StoreView::StoreView;

  // Takes the job's lease if it is free, expired, or already `owner`'s. True when `owner` holds it.
  bool try_acquire(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms, std::int64_t now_ms);
  // Extends `owner`'s lease; false when `owner` no longer holds it.
  bool renew(std::int64_t job_id, const std::string& owner, std::int64_t ttl_ms, std::int64_t now_ms);
  // Extends each of `owner`'s leases in one transaction; returns the ids `owner` still holds.
  std::vector<std::int64_t> renew_all(const std::vector<std::int64_t>& job_ids, const std::string& owner,
                                      std::int64_t ttl_ms, std::int64_t now_ms);
  // Gives the lease up if `owner` holds it.
  void release(std::int64_t job_id, const std::string& owner);
  // The job's current lease, expired or not.
  [[nodiscard]] std::optional<domain::Lease> of(std::int64_t job_id) const;
  // The owners of the leases still live at `now_ms`, each once: the supervisors that drive something now.
  [[nodiscard]] std::vector<std::string> live_owners(std::int64_t now_ms) const;
  // The leases still live at `now_ms`, by record id, with each record's phase.
  [[nodiscard]] std::vector<LiveLease> live(std::int64_t now_ms) const;
  // Ends every live lease of `owner` at `now_ms` (a supervisor known to be dead), so that another takes its jobs over
  // at once instead of when the leases run out. Returns how many it ended.
  int expire_all_of(const std::string& owner, std::int64_t now_ms);

  // The jobs a supervisor has work on, by id: unfinished ones, finished ones with cleanup pending, and delete or
  // clean requests not yet carried out.
  [[nodiscard]] std::vector<domain::JobRecord> jobs_to_drive(bool with_config = false) const;
  // Those of them `owner` may drive at `now_ms`: no other owner's lease on them is live. One query, however many
  // jobs other supervisors drive (a supervisor reads this every second).
  [[nodiscard]] std::vector<domain::JobRecord> jobs_to_drive_by(const std::string& owner, std::int64_t now_ms) const;
  // The zones of the jobs, workers and tasks other owners hold a live lease on at `now_ms`: where another supervisor
  // already lists the cloud, so that a supervisor may leave that zone's new records to it.
  [[nodiscard]] std::set<std::string> zones_driven_by_others(const std::string& owner, std::int64_t now_ms) const;
  // How many jobs of jobs_to_drive() no live lease covers at `now_ms` (none taken, or expired): jobs nobody drives.
  // Three index scans and a lease lookup per such job; cheap enough for `list` to ask every time.
  [[nodiscard]] int count_undriven_jobs(std::int64_t now_ms) const;
};

} // namespace jobman::store
