// The supervisor's phase machine in-process: a JobDriver on a real SQLite store in a temporary home, with the cloud
// and the workers faked (FakeSlices, FakeWorkers) and a host that runs every operation on the test's thread, on a
// clock the test moves. A tick does what a tick of the daemon's loop does, in a fixed order: take up the jobs to
// drive, observe the zones, step every job with news, run the operations dispatched and apply their results, run the
// output streams that have news and apply theirs, and let go of the jobs that are done.
#pragma once

#include "driver_host.hpp"
#include "fake_cloud.hpp"
#include "fake_workers.hpp"
#include "job_driver.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/queue.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace jobman::test {

// A DriverHost whose work runs when the rig says, on the rig's thread, at the rig's time.
class FakeHost final : public core::supervision::DriverHost {
public:
  // A supervisor named `owner` (its leases') on `store`, its clock at `start_ms`.
  FakeHost(store::JobStore& store, std::string owner, std::int64_t start_ms)
      : store_(store), owner_(std::move(owner)), now_ms_(start_ms) {}

  // The driver whose results the host applies.
  void set_driver(core::supervision::JobDriver* driver) { driver_ = driver; }

  // Reads the jobs to drive, as the loop does every second: takes up those not driven yet, hands the driven ones what
  // changed, and lets go of those the store no longer has for a supervisor.
  void read_jobs();
  // Runs the dispatched operations and applies what they (and posts) hand back, until nothing is left; then the
  // streams for which `has_news` says a stream would return, and what they hand back. Returns whether anything ran.
  bool settle(const std::function<bool(std::int64_t id, int attempt)>& has_news);
  // Lets go of the jobs dropped (once no operation of theirs is in flight).
  void prune();
  // Moves the clock.
  void advance_ms(std::int64_t ms) { now_ms_ += ms; }
  // The lease of job `id` was lost, as the heartbeat tells the loop when another supervisor took it: the job is let
  // go at once, or when its operation in flight returns.
  void lose_lease(std::int64_t id);
  // Called with each job that is given an operation, as it is dispatched (to act while it is in flight).
  std::function<void(std::int64_t id)> on_dispatch;

  std::map<std::int64_t, core::supervision::Driven>& driven() { return driven_; }
  // The jobs a refused write told this supervisor it no longer holds (lease_taken), in order.
  [[nodiscard]] const std::vector<std::int64_t>& leases_taken() const { return leases_taken_; }
  [[nodiscard]] std::size_t streams_waiting() const { return watches_.size(); }

  // ---- DriverHost ----
  store::JobStore& store() override { return store_; }
  void dispatch(core::supervision::Driven& d, core::supervision::Work work) override;
  void dispatch_detached(std::function<void()> task) override { detached_.push_back(std::move(task)); }
  void watch_in_background(std::int64_t id, core::supervision::Work watch) override;
  void post(std::int64_t id, std::function<void()> apply) override;
  std::optional<std::int64_t> claim(core::supervision::Driven& worker, const store::WorkerOffer& offer) override;
  void notifications_due() override {}
  core::supervision::Driven* find(std::int64_t id) override;
  void drop_later(std::int64_t id) override { to_drop_.insert(id); }
  void forget_lease(std::int64_t) override {}
  void lease_taken(core::supervision::Driven& d) override;
  [[nodiscard]] std::int64_t now_ms() const override { return now_ms_; }
  [[nodiscard]] std::chrono::milliseconds scaled(double seconds) const override;

private:
  struct Pending {
    std::int64_t id = 0;
    core::supervision::Work work;
  };
  struct Result {
    std::int64_t id = 0;
    std::function<void()> apply;
    bool ends_operation = false;
  };
  void adopt(const domain::JobRecord& row);
  void apply(Result& result);

  store::JobStore& store_;
  std::string owner_;
  core::supervision::JobDriver* driver_ = nullptr;
  std::int64_t now_ms_;
  std::map<std::int64_t, core::supervision::Driven> driven_;
  std::deque<Pending> operations_;
  std::deque<Pending> watches_;
  std::deque<Result> results_;
  std::vector<std::function<void()>> detached_;
  std::set<std::int64_t> to_drop_;
  std::vector<std::int64_t> leases_taken_;
};

// A home, a store, the fakes, the host and the driver.
class Rig {
public:
  Rig();
  ~Rig();
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  // Records the jobs of a config (YAML, as a user writes it) as `create` does; their ids.
  std::vector<std::int64_t> create(const std::string& yaml);
  // One tick (see the top of this file).
  void tick();
  // Ticks until `done` holds, at most `limit` ticks, moving the clock `step_seconds` before each; whether it held.
  bool tick_until(const std::function<bool()>& done, int limit = 50, double step_seconds = 1);
  // Moves the clock.
  void advance(double seconds) { host->advance_ms(static_cast<std::int64_t>(seconds * 1000)); }
  // The supervisor is killed and another takes over once its leases expire: what the old one held in memory (its
  // streams, its operations not yet applied) is gone; the workers and the cloud are as they were.
  void restart_supervisor();

  // The job as the store has it.
  [[nodiscard]] domain::JobRecord job(std::int64_t id) const;
  [[nodiscard]] std::vector<domain::AttemptRecord> attempts(std::int64_t id) const;
  // The job's id as the workers' workload ids have it.
  [[nodiscard]] static std::string wid(std::int64_t id);
  // The queued resource (or node) of the job's current attempt, and its node.
  [[nodiscard]] std::string slice_of(std::int64_t id) const;
  [[nodiscard]] std::string node_of(std::int64_t id) const;
  // The events of the job of `kind`, their messages.
  [[nodiscard]] std::vector<std::string> events(std::int64_t id, const std::string& kind) const;
  // The user asks for something (cancel, delete, clean, resume), as the CLI records it.
  void request(std::int64_t id, domain::DesiredState desired);

  TempDir dir;
  ScopedEnv home;
  store::JobStore store; // The user's and the test's.
  // The supervisor's, on the same file: its writes for a job need the job's lease (JobStore::drive_as).
  store::JobStore supervisor_store;
  std::shared_ptr<FakeSlices> slices =
      std::make_shared<FakeSlices>([this] { return host ? host->now_ms() : std::int64_t{0}; });
  std::shared_ptr<FakeWorkers> workers = std::make_shared<FakeWorkers>();
  std::shared_ptr<core::supervision::Counters> counters = std::make_shared<core::supervision::Counters>();
  std::unique_ptr<FakeHost> host;
  std::unique_ptr<core::supervision::JobDriver> driver;

private:
  void start_supervisor(std::int64_t now_ms);
  int supervisors_ = 0;
};

} // namespace jobman::test
