// The store's task queue: tasks waiting for a worker's slice, and the workers claiming them.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/store/job_store.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace jobman::store {

// The tasks `status` shows by default (Queue::board).
struct TaskBoard {
  // In id order, each with its place (1-based) among all the tasks `status` lists: unfinished ones and those finished
  // within a day. That place is the `#` the task commands resolve.
  std::vector<std::pair<std::size_t, domain::JobRecord>> shown;
  std::int64_t queued = 0; // Tasks waiting in the queue, shown or not.
  std::int64_t queued_shown = 0;
};

// What a worker offers the queue: its slice, and what a task may ask of it.
struct WorkerOffer {
  std::int64_t worker_id = 0;
  std::string accelerator;                         // A task runs on a worker of its accelerator only.
  std::string zone;                                // And of its zone, when it names one.
  domain::Pricing pricing = domain::Pricing::spot; // And of its pricing, when it names one.
  domain::Placement placement; // The worker's slice (its current attempt's), which the task's attempt borrows.
};

class Queue : public StoreView {
public:
  using StoreView::StoreView;

  // Claims the first queued task `worker` can run (highest priority first, then queue order) in one transaction: the
  // task moves to SETUP naming the worker, its next attempt begins on the worker's slice, and `owner` takes its lease.
  // With a fair share set (Shares::set_policy), users take turns as SharePolicy::claim_order says, and priority
  // orders each user's own tasks. nullopt, changing nothing, when no task matches or the worker holds one already.
  // Two supervisors claiming at once never get the same task, and a worker never holds two (the tasks_on_worker
  // index).
  std::optional<std::int64_t> claim(const WorkerOffer& worker, const std::string& owner, std::int64_t ttl_ms,
                                    std::int64_t now_ms);
  // The task `worker` would claim now (the queue's first that it can run), changing nothing.
  [[nodiscard]] std::optional<std::int64_t> first_for(const WorkerOffer& worker) const;
  // The tasks `status` lists, but of those waiting in the queue only the `head` that would run first (priority, then
  // queue order): every running, paused or recently finished task, and a count of the rest of the queue. Reads ids
  // only for the tasks it leaves out.
  [[nodiscard]] TaskBoard board(std::size_t head, std::int64_t now_ms) const;
  // The task that holds the worker's slice now, if any.
  [[nodiscard]] std::optional<std::int64_t> task_of_worker(std::int64_t worker_id) const;
  // How many tasks wait in the queue.
  [[nodiscard]] std::int64_t queued() const;
};

} // namespace jobman::store
