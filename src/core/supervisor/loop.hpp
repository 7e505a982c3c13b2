// The supervisor's loop: which jobs it drives (their leases, renewed by a heartbeat thread), what the cloud says of
// their slices (one listing per zone per tick), and when each job is stepped. The phases themselves are the
// JobDriver's. Its methods live in:
//   loop.cpp    the loop, applying results, stepping, shutting down, and DriverHost;
//   leases.cpp  reading the jobs to drive, adopting them under a lease, the heartbeat, losing and dropping jobs;
//   observe.cpp one queuedResources.list per zone in use;
//   sweep.cpp   the orphan sweep: at start and every sweep interval, resources no attempt holds are deleted.
#pragma once

#include "driven.hpp"
#include "driver_host.hpp"
#include "job_driver.hpp"
#include "jobman/cloud/http.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/orphans.hpp"
#include "jobman/core/supervisor.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/queue.hpp"
#include "threads.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <vector>

namespace jobman::core::supervision {

// One reconcile loop over a store (see Supervisor).
class SupervisorLoop final : public DriverHost {
public:
  // A loop over the store at `store_location` (a SQLite file or a postgresql:// URL), reaching the cloud through
  // `access`: its TPU API client for slices, gcloud (or ssh) for workers.
  SupervisorLoop(const CloudAccess& access, std::string store_location, SupervisorOptions options);
  // The same, with the slices and the workers reached through `ops`.
  SupervisorLoop(CloudAccess access, std::string store_location, SupervisorOptions options, JobDriver::Operations ops);
  ~SupervisorLoop() override = default;
  SupervisorLoop(const SupervisorLoop&) = delete;
  SupervisorLoop& operator=(const SupervisorLoop&) = delete;

  // Runs until `stop` is requested or the idle limit passes (Supervisor::run).
  void run(const std::stop_token& stop);

  // The counters so far, and the jobs held now; callable from any thread.
  [[nodiscard]] SupervisorStats stats() const;

  // After run(): whether every thread it started had ended.
  [[nodiscard]] bool settled() const { return settled_; }

  // ---- DriverHost ----
  store::JobStore& store() override { return *job_store; }
  void dispatch(Driven& d, Work work) override;
  void dispatch_detached(std::function<void()> task) override;
  void watch_in_background(std::int64_t id, Work watch) override;
  void post(std::int64_t id, std::function<void()> apply) override;
  std::optional<std::int64_t> claim(Driven& worker, const store::WorkerOffer& offer) override;
  void notifications_due() override { notify_now = true; }
  Driven* find(std::int64_t id) override;
  void drop_later(std::int64_t id) override { to_drop.push_back(id); }
  void forget_lease(std::int64_t id) override;
  void lease_taken(Driven& d) override;
  [[nodiscard]] std::int64_t now_ms() const override;
  [[nodiscard]] std::chrono::milliseconds scaled(double seconds) const override;

private:
  // ---- loop.cpp ----
  // The tick: the option when given, else the smallest poll interval of the settings and the jobs, scaled.
  void compute_tick();
  // Applies a result handed back by another thread, on the loop's thread.
  void apply(Completion& completion);
  // Steps a job that has news and is neither busy nor waiting out a backoff; a failure becomes an error event.
  void step_safely(Driven& d);
  // Reads the fair share's limits from the store and hands them to the store and the driver (FairShare).
  void read_share();
  // Drops the jobs marked for it whose operation has returned.
  void prune();
  // Stops every stream and releases the leases of jobs with no operation in flight.
  void shutdown();
  // Writes the progress read since the last time, every job's, in one transaction.
  void flush_progress();

  // ---- leases.cpp ----
  // Reads the jobs to drive: adopts new ones, refreshes changed ones, marks vanished ones to drop.
  void read_jobs();
  // Which zones are whose, as one read_jobs sees them (zone affinity: one supervisor lists each zone).
  struct ZoneShares {
    std::optional<std::set<std::string>> mine;   // Zones of the records this supervisor drives, on first need.
    std::optional<std::set<std::string>> others; // Zones other supervisors drive records in, on first need.
    std::set<std::string> contested;             // Zones nobody drove in which another supervisor won a race.
  };
  // Whether to take up `row`, which nobody drives, now: yes in a zone this supervisor already lists; in a zone
  // another live supervisor drives records in, only once the row has waited four leases and a minute at least (so
  // that the other takes it up); in a zone nobody drives, yes, unless another supervisor won the race for one of
  // its rows.
  bool take_up_now(const domain::JobRecord& row, ZoneShares& zones);
  // Takes the job's lease (unless another supervisor holds a live one) and starts driving it.
  void adopt(const domain::JobRecord& row);
  // Whether the worker is unfinished (so that whoever drives it drives its task too).
  bool worker_is_live(std::int64_t worker_id);
  // Since when each record nobody drives has been left to the supervisor that drives its zone (take_up_now).
  std::map<std::int64_t, std::int64_t> left_since_ms;
  // Renews every held lease a quarter of its life apart, on its own connection; tells the loop of leases lost.
  void heartbeat_loop(const std::stop_token& stop);
  // When the loop next reads the store, observes the cloud, sends notifications and flushes progress.
  struct TickTimes {
    std::chrono::steady_clock::time_point read, observe, notify, progress;
  };
  // One pass of the loop: read, observe, step every driven job, then wait for the next thing to do and apply what
  // arrived. False when the supervisor has been idle long enough to exit.
  bool tick_once(const std::stop_token& stop, TickTimes& times);
  // On a PostgreSQL store, waits for its wake-ups (a job arrived, a user changed what one should do) on a connection
  // of its own and has the loop read the store at once.
  void listen_loop(const std::stop_token& stop);
  // Another supervisor took the job: stop driving it (once its operation, if any, returns).
  void lease_lost(std::int64_t id);
  // Stops watching a job and gives its lease up.
  void drop(Driven& d);

  // ---- notify.cpp ----
  // Takes the notifications due and sends each on the action threads; the outcome comes back as an event.
  void send_due_notifications();

  // ---- sweep.cpp ----
  // Starts an orphan sweep when one is due and none is under way: the listings (one per kind per zone in use) run on
  // the action threads.
  void sweep_if_due(std::chrono::steady_clock::time_point now);
  // On the loop's thread, with the listings in hand: reads the store (after the cloud, so that a slice requested
  // meanwhile is held), picks the orphans older than the grace, and deletes them one after another on the action
  // threads.
  void sweep_listed(const std::vector<ZoneListing>& listings, const std::vector<std::string>& failures);
  // Records one deletion of the sweep: a daemon log line, and an event on the job its label names if it still exists.
  void orphan_deleted(const Orphan& orphan, const std::string& error, bool already_gone);

  std::shared_ptr<const CloudAccess> access;
  JobDriver::Operations ops;
  std::string store_location;
  SupervisorOptions options;
  std::optional<store::JobStore> job_store;
  std::shared_ptr<const FairShare> fair_share; // As read_share last read it; the store and the driver apply it.
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::shared_ptr<Outstanding> outstanding = std::make_shared<Outstanding>();
  ActionThreads actions;
  std::shared_ptr<Counters> counters = std::make_shared<Counters>();
  JobDriver driver;
  bool settled_ = true; // Whether every thread it started had ended when run() returned.
  std::map<std::int64_t, Driven> driven;
  std::vector<std::int64_t> to_drop;
  std::chrono::milliseconds tick{1000};
  std::optional<std::chrono::steady_clock::time_point> idle_since;
  std::chrono::steady_clock::time_point next_sweep; // When the next orphan sweep is due (the first at start).
  std::chrono::steady_clock::time_point next_dead_owner_check; // When read_jobs next looks for dead supervisors.
  bool sweeping = false;                                       // A sweep's listings or deletions are under way.
  std::string orphan_owner;                                    // The jobman-owner label value of this user's resources.
  // Notifications: the client Brevo and webhooks are reached with, and whether some were just recorded.
  std::shared_ptr<cloud::HttpClient> notify_http = std::make_shared<cloud::HttpClient>();
  bool notify_now = false;
  bool read_now = false; // The store said that something arrived: read it before the next tick.
  // The store's clock less this machine's (PostgreSQL's server clock; 0 on SQLite), kept by the loop for every
  // thread: leases are compared across machines in the store's time.
  std::atomic<std::int64_t> store_clock_offset_ms{0};

  // Leases: the ids held, shared with the heartbeat thread.
  mutable std::mutex leases_mutex;
  std::set<std::int64_t> held;
};

} // namespace jobman::core::supervision
