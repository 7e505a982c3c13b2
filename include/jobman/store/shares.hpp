// The slices in flight, by user, and the fair share the store applies to them when it hands chips out.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/util/error.hpp"

#include <memory>
#include <string>
#include <vector>

namespace jobman::store {

// Slices counted for fair share: how many of `user`'s records of `kind` hold or ask for a slice of `accelerator` in
// `pricing` (their current attempt's), as Shares::in_flight reads them. A task's is its worker's slice.
struct SliceUse {
  std::string user;
  domain::JobKind kind = domain::JobKind::job;
  std::string accelerator;
  domain::Pricing pricing = domain::Pricing::spot;
  int count = 0;
};

// A lab's fair share of chips, which the store applies inside the transactions that hand chips out (Queue::claim,
// and Attempts::begin for a new slice), so that supervisors deciding at once never overshoot it. core::FairShare is
// the one.
class SharePolicy {
public:
  SharePolicy() = default;
  SharePolicy(const SharePolicy&) = delete;
  SharePolicy& operator=(const SharePolicy&) = delete;
  virtual ~SharePolicy() = default;
  // Whether any share or cap is set; without one, and with one user waiting, the store reads nothing more.
  [[nodiscard]] virtual bool limits_anything() const = 0;
  // Why `user`'s record of `kind` may not take a slice of `accelerator` in `pricing` now, "" when it may: a job or a
  // worker asks the cloud for a slice of its own, a task borrows a worker's.
  [[nodiscard]] virtual std::string refusal(const std::vector<SliceUse>& in_flight, const std::string& user,
                                            domain::JobKind kind, const std::string& accelerator,
                                            domain::Pricing pricing) const = 0;
  // Of `users`, each with tasks waiting for a worker's slice of `accelerator` in `pricing` (in the order their first
  // task was queued), those who may claim it, in the order they claim: the fewest chips in flight first.
  [[nodiscard]] virtual std::vector<std::string> claim_order(const std::vector<SliceUse>& in_flight,
                                                             const std::vector<std::string>& users,
                                                             const std::string& accelerator,
                                                             domain::Pricing pricing) const = 0;
};

// An attempt refused by the fair share (SharePolicy::refusal, which the message gives): the job waits for chips to
// come free, asking the cloud for nothing.
class ShareExceededError : public Error {
public:
  using Error::Error;
};

class Shares : public StoreView {
public:
  using StoreView::StoreView;

  // Every slice held or asked for now, counted by user, kind, accelerator and pricing: the slices of jobs and workers
  // not yet released (whatever their phase: a finished job's slice counts until it is gone), first-ready rivals
  // included, and the workers' slices that tasks run on (by the task's user). Index scans of the unreleased slices
  // and of the unfinished jobs.
  [[nodiscard]] std::vector<SliceUse> in_flight() const;
  // The fair share that Queue::claim and Attempts::begin apply from now on; none (nullptr) by default.
  void set_policy(std::shared_ptr<const SharePolicy> policy);
};

} // namespace jobman::store
