// What a job driver may ask of the loop that owns it: the store, work on other threads, the jobs it holds, time, and
// letting a job go. The loop (SupervisorLoop) implements it; the driver never sees leases, ticks or threads.
#pragma once

#include "driven.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/queue.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace jobman::core::supervision {

// Work for another thread: it runs there and returns what the loop's thread then applies (to the store, to Driven).
using Work = std::function<std::function<void()>()>;

// The loop's side of the contract with a JobDriver. Every call is made on the loop's thread.
class DriverHost {
public:
  virtual ~DriverHost() = default;

  // The store, owned by the loop's thread.
  virtual store::JobStore& store() = 0;

  // Runs `work` on the action threads for the job; its result is applied on the loop's thread, and the job is busy (not
  // stepped, not observed) until then. An exception thrown by `work` becomes an error applied in its place.
  virtual void dispatch(Driven& d, Work work) = 0;

  // Runs `task` on the action threads for no job: nothing waits for it and nothing of it is applied.
  virtual void dispatch_detached(std::function<void()> task) = 0;

  // Runs `watch` on a thread of its own, counted as outstanding; a function it returns is applied on the loop's thread
  // as news about job `id` (it ends no operation). An empty one is dropped.
  virtual void watch_in_background(std::int64_t id, Work watch) = 0;

  // Applies `apply` on the loop's thread as news about job `id`, as soon as the loop can; callable from any thread.
  virtual void post(std::int64_t id, std::function<void()> apply) = 0;

  // Claims the next task `worker` can run (Queue::claim) under this loop's lease, and drives it from now on;
  // its id, or nullopt when none was free.
  virtual std::optional<std::int64_t> claim(Driven& worker, const store::WorkerOffer& offer) = 0;
  // Notifications were recorded: send them soon, not only at the next tick.
  virtual void notifications_due() = 0;
  // The job with this id, while the loop drives it; nullptr once it was dropped.
  virtual Driven* find(std::int64_t id) = 0;

  // Lets the job go after this round: its stream is stopped and its lease released.
  virtual void drop_later(std::int64_t id) = 0;

  // The job's lease went with its record (it was cleaned): stop renewing it.
  virtual void forget_lease(std::int64_t id) = 0;

  // Another supervisor took the job's lease (a write for it was refused, store::LeaseLostError): says so in the
  // job's history and marks it lost, so that it is let go, without a release, once no operation of it is running.
  virtual void lease_taken(Driven& d) = 0;

  // The time now, in milliseconds since the epoch.
  [[nodiscard]] virtual std::int64_t now_ms() const = 0;

  // A duration from a config (simulated seconds on the mock) in real milliseconds.
  [[nodiscard]] virtual std::chrono::milliseconds scaled(double seconds) const = 0;

protected:
  DriverHost() = default;
  DriverHost(const DriverHost&) = default;
  DriverHost& operator=(const DriverHost&) = default;
};

} // namespace jobman::core::supervision
