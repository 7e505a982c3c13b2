#include "jobman/core/supervisor.hpp"

#include "jobman/config/loader.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/core/recovery.hpp"
#include "jobman/remote/setup.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/spdlog.h>
#include <stop_token>
#include <sys/file.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace jobman::core {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using store::DesiredState;
using store::Phase;

namespace {

// How long worker steps may take, in real time: setup installs packages; the others are quick.
constexpr milliseconds kSetupTimeout{30 * 60 * 1000};
constexpr milliseconds kRemoteTimeout{120'000};
constexpr milliseconds kStopGrace{30'000};
// How long fetching the output a broken stream missed may take, once the workload has ended.
constexpr milliseconds kCatchUpLimit{60'000};
// How long a stopping supervisor waits for the operations and streams still running (see Outstanding).
constexpr milliseconds kSettleLimit{5'000};
// Consecutive unreachable answers from a worker whose slice the cloud calls ACTIVE before it counts as lost.
constexpr int kUnreachableLimit = 3;
constexpr int kListPageSize = 1000;

std::int64_t now_ms() {
  return util::now_ms();
}

std::string job_label(std::int64_t id) {
  return "job " + util::format_job_id(id);
}

// Every worker host of a slice: 0 .. hosts-1.
std::vector<int> all_workers(int hosts) {
  std::vector<int> all(static_cast<std::size_t>(std::max(hosts, 1)));
  for (int w = 0; w < static_cast<int>(all.size()); ++w) {
    all[static_cast<std::size_t>(w)] = w;
  }
  return all;
}

// The workers the command runs on.
std::vector<int> command_workers(const config::JobConfig& config, int hosts) {
  return config.command.workers.all ? all_workers(hosts) : config.command.workers.indices;
}

// The id part of "projects/P/locations/Z/queuedResources/ID".
std::string last_segment(const std::string& name) {
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

// Completed work, applied to the store by the loop's thread.
struct Completion {
  std::int64_t job_id = 0;
  std::function<void()> apply;
  bool ends_operation = false; // The result of the job's operation in flight (not news from a stream or a lease).
};

// Where threads hand their results to the loop.
class Inbox {
public:
  void post(Completion completion) {
    {
      const std::lock_guard lock(mutex_);
      items_.push_back(std::move(completion));
    }
    ready_.notify_one();
  }
  // Waits until something arrives, `deadline` passes or `stop` is requested; returns what arrived.
  std::deque<Completion> wait(std::chrono::steady_clock::time_point deadline, const std::stop_token& stop) {
    std::unique_lock lock(mutex_);
    ready_.wait_until(lock, stop, deadline, [&] { return !items_.empty(); });
    return std::exchange(items_, {});
  }

private:
  std::mutex mutex_;
  std::condition_variable_any ready_;
  std::deque<Completion> items_;
};

// The threads a supervisor starts that may outlive it: operations in flight and log streams being stopped. They hold
// only shared state, so the supervisor may go while they run; but the process must not run its static destructors
// (logging, libcurl, OpenSSL) under them. Counting them lets shutdown wait a little and tell whether any is left.
class Outstanding {
public:
  // One counted thread, for as long as it lives.
  class Hold {
  public:
    explicit Hold(std::shared_ptr<Outstanding> of) : of_(std::move(of)) {
      const std::lock_guard lock(of_->mutex_);
      ++of_->count_;
    }
    ~Hold() {
      if (!of_) {
        return;
      }
      {
        const std::lock_guard lock(of_->mutex_);
        --of_->count_;
      }
      of_->none_.notify_all();
    }
    Hold(Hold&& other) noexcept = default;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    Hold& operator=(Hold&&) = delete;

  private:
    std::shared_ptr<Outstanding> of_;
  };

  // Waits until none is left or `limit` passes; returns how many are left.
  int wait_for_none(milliseconds limit) {
    std::unique_lock lock(mutex_);
    none_.wait_for(lock, limit, [this] { return count_ == 0; });
    return count_;
  }

private:
  std::mutex mutex_;
  std::condition_variable none_;
  int count_ = 0;
};

// A fixed set of threads running cloud and worker operations. Its threads hold only shared state, so that they may
// outlive the supervisor at shutdown (an operation in flight is bounded by its own timeout).
class ActionPool {
public:
  ActionPool(int threads, const std::shared_ptr<Outstanding>& outstanding) : state_(std::make_shared<State>()) {
    for (int i = 0; i < threads; ++i) {
      std::thread([state = state_, outstanding] {
        for (;;) {
          std::function<void()> task;
          {
            std::unique_lock lock(state->mutex);
            state->ready.wait(lock, [&] { return state->closed || !state->tasks.empty(); });
            if (state->tasks.empty()) {
              return;
            }
            task = std::move(state->tasks.front());
            state->tasks.pop_front();
          }
          const Outstanding::Hold running(outstanding);
          task();
        }
      }).detach();
    }
  }
  ~ActionPool() { close(); }
  ActionPool(const ActionPool&) = delete;
  ActionPool& operator=(const ActionPool&) = delete;

  void submit(std::function<void()> task) {
    {
      const std::lock_guard lock(state_->mutex);
      state_->tasks.push_back(std::move(task));
    }
    state_->ready.notify_one();
  }

  // Drops the operations not yet started and lets the threads end once their current one is done.
  void close() {
    {
      const std::lock_guard lock(state_->mutex);
      state_->closed = true;
      state_->tasks.clear();
    }
    state_->ready.notify_all();
  }

private:
  struct State {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::function<void()>> tasks;
    bool closed = false;
  };
  std::shared_ptr<State> state_;
};

// One attach() running on its own thread.
struct Stream {
  std::stop_source stop;
  int attempt = 0;
  bool ended = false;
  std::vector<remote::StreamEnd> ends;
  std::string error;
};

// A job this supervisor holds the lease of.
struct Driven {
  store::JobRecord job;
  std::shared_ptr<const config::JobConfig> config;
  std::vector<store::AttemptRecord> attempts;
  bool busy = false;            // An operation is in flight.
  bool dirty = true;            // Something new is known: step it.
  bool lost = false;            // The lease was lost while busy: drop it when the operation returns.
  std::int64_t retry_at_ms = 0; // Backoff after a failed operation.
  int retry_step = 0;
  // The open slice as the last zone listing saw it.
  bool seen_valid = false;
  std::optional<cloud::QueuedResource> seen;
  bool seen_once = false; // The open slice has appeared in a listing at least once.
  std::string seen_state; // Its state at the last event, to record changes only.
  std::int64_t delete_sent_ms = 0;
  std::shared_ptr<Stream> stream;
  int unreachable = 0;

  // The attempt that holds a queued resource not yet released, if any (the newest).
  [[nodiscard]] const store::AttemptRecord* open_slice() const {
    for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
      if (!it->released_ms && !it->queued_resource.empty()) {
        return &*it;
      }
    }
    return nullptr;
  }
  // The current attempt's record, when it has one.
  [[nodiscard]] const store::AttemptRecord* current() const {
    if (attempts.empty() || attempts.back().number != job.attempt) {
      return nullptr;
    }
    return &attempts.back();
  }
};

} // namespace

struct Supervisor::Impl {
  Impl(CloudAccess cloud_access, fs::path path, SupervisorOptions opts)
      : access(std::make_shared<const CloudAccess>(std::move(cloud_access))), store_path(std::move(path)),
        options(std::move(opts)), pool(std::max(1, options.action_threads), outstanding) {
    if (options.owner.empty()) {
      options.owner = lease_owner_id();
    }
  }

  std::shared_ptr<const CloudAccess> access;
  fs::path store_path;
  SupervisorOptions options;
  std::optional<store::JobStore> store;
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::shared_ptr<Outstanding> outstanding = std::make_shared<Outstanding>();
  ActionPool pool;
  bool settled = true; // Whether every thread it started had ended when run() returned.
  std::map<std::int64_t, Driven> driven;
  milliseconds tick{1000};
  std::optional<std::chrono::steady_clock::time_point> idle_since;

  mutable std::mutex stats_mutex;
  SupervisorStats counters;
  std::shared_ptr<std::atomic<std::uint64_t>> gets = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::shared_ptr<std::atomic<std::uint64_t>> mutations = std::make_shared<std::atomic<std::uint64_t>>(0);

  // Leases: the ids held, shared with the heartbeat thread.
  std::mutex leases_mutex;
  std::set<std::int64_t> held;

  // ---- time -------------------------------------------------------------------------------------------------------

  // A duration from a config (simulated seconds on the mock) in real milliseconds.
  [[nodiscard]] milliseconds scaled(double seconds) const {
    const double ms = seconds * 1000.0 / std::max(1.0, access->time_scale);
    return milliseconds(static_cast<long long>(std::max(1.0, ms)));
  }

  void compute_tick() {
    if (options.tick.count() > 0) {
      tick = options.tick;
      return;
    }
    double seconds = static_cast<double>(access->settings.poll_interval_seconds);
    for (const auto& [id, d] : driven) {
      if (d.config) {
        seconds = std::min(seconds, static_cast<double>(d.config->recovery.poll_interval_seconds));
      }
    }
    tick = std::max(milliseconds(20), scaled(seconds));
  }

  void backoff(Driven& d) {
    const auto& r = d.config->recovery;
    const double wait = std::min(static_cast<double>(r.backoff_max_seconds),
                                 static_cast<double>(r.backoff_initial_seconds) *
                                     std::pow(std::max(1.0, r.backoff_multiplier), d.retry_step));
    d.retry_at_ms = now_ms() + scaled(wait).count();
    ++d.retry_step;
  }

  // ---- store helpers (loop thread only) ---------------------------------------------------------------------------

  void reload(Driven& d) {
    if (auto job = store->find_job(d.job.id)) {
      d.job = std::move(*job);
      d.attempts = store->attempts(d.job.id);
    }
    d.dirty = true;
  }

  bool move(Driven& d, std::optional<Phase> expected, const store::PhaseChange& change) {
    const Phase from = d.job.phase;
    const bool moved = store->transition(d.job.id, expected, change);
    if (moved) {
      {
        const std::lock_guard lock(stats_mutex);
        ++counters.transitions;
      }
      spdlog::info("{}: {} -> {}: {}", job_label(d.job.id), store::to_string(from), store::to_string(change.to),
                   change.reason);
    }
    reload(d);
    return moved;
  }

  static store::PhaseChange change(Phase to, std::string reason) {
    store::PhaseChange c;
    c.to = to;
    c.reason = std::move(reason);
    return c;
  }

  void event(Driven& d, std::string_view kind, const std::string& message, const nlohmann::json& data = {}) {
    spdlog::info("{}: {}", job_label(d.job.id), message);
    store->append_event(d.job.id, kind, message, data.is_null() ? std::string() : data.dump());
  }

  void error_event(Driven& d, const std::string& message) {
    spdlog::warn("{}: {}", job_label(d.job.id), message);
    store->append_event(d.job.id, "error", message);
  }

  void end_open_attempt(Driven& d, const std::string& outcome, std::optional<int> exit_code) {
    if (const auto* attempt = d.current(); attempt != nullptr && !attempt->ended_ms) {
      store->end_attempt(d.job.id, attempt->number, outcome, exit_code);
      reload(d);
    }
  }

  // ---- the loop ---------------------------------------------------------------------------------------------------

  void run(const std::stop_token& stop) {
    store.emplace(store::JobStore::open(store_path));
    std::jthread heartbeat([this](const std::stop_token& hb_stop) { heartbeat_loop(hb_stop); });
    auto next_read = std::chrono::steady_clock::now();
    auto next_observe = next_read;
    spdlog::info("supervisor {} started on the {} cloud (project {})", options.owner, access->mock ? "mock" : "Google",
                 access->project);
    while (!stop.stop_requested()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_read) {
        read_jobs();
        compute_tick();
        next_read = now + std::min(tick, milliseconds(1000));
      }
      if (now >= next_observe) {
        observe();
        next_observe = now + tick;
      }
      for (auto& [id, d] : driven) {
        step_safely(d);
      }
      prune();
      if (options.idle_exit) {
        if (!driven.empty()) {
          idle_since.reset();
        } else if (!idle_since) {
          idle_since = now;
        } else if (now - *idle_since >= *options.idle_exit) {
          spdlog::info("supervisor idle for {}; exiting", util::format_duration(options.idle_exit->count() / 1000));
          break;
        }
      }
      auto deadline = std::min(next_read, next_observe);
      // A job waiting out a backoff wakes the loop when it is due.
      for (const auto& [id, d] : driven) {
        if (!d.busy && d.retry_at_ms > 0) {
          const auto due =
              std::chrono::steady_clock::now() + milliseconds(std::max<std::int64_t>(0, d.retry_at_ms - now_ms()));
          deadline = std::min(deadline, due);
        }
      }
      for (auto& completion : inbox->wait(deadline, stop)) {
        apply(completion);
      }
    }
    shutdown();
    heartbeat.request_stop();
    // Operations not yet started are dropped; the streams were told to stop. What is still running gets a moment to
    // end: its result can no longer be recorded, and whatever it leaves undone the next supervisor redoes.
    pool.close();
    if (const int left = outstanding->wait_for_none(kSettleLimit); left > 0) {
      settled = false;
      spdlog::info("{} operation(s) still running are abandoned; the next supervisor takes their jobs over", left);
    }
    const auto s = snapshot();
    spdlog::info("supervisor stats: ticks={} tick_ms={} list_calls={} get_calls={} mutations={} transitions={}",
                 s.ticks, tick.count(), s.list_calls, s.get_calls, s.mutations, s.transitions);
  }

  [[nodiscard]] SupervisorStats snapshot() const {
    const std::lock_guard lock(stats_mutex);
    SupervisorStats s = counters;
    s.get_calls = gets->load();
    s.mutations = mutations->load();
    return s;
  }

  void apply(Completion& completion) {
    auto it = driven.find(completion.job_id);
    if (it != driven.end() && it->second.lost) {
      // Another supervisor holds the job now: what this one learnt is not its to record.
      if (completion.ends_operation) {
        it->second.busy = false;
        drop(it->second);
        // Unless the job was removed (`clean` found nothing of it in the cloud while its slice was being
        // requested): then the result runs with the job gone, so that what the operation made in the cloud is
        // deleted rather than left to bill (slice_created's orphan path).
        if (!store->find_job(completion.job_id)) {
          try {
            completion.apply();
          } catch (const std::exception& e) {
            spdlog::warn("{}: after its removal: {}", job_label(completion.job_id), e.what());
          }
        }
      }
      return;
    }
    try {
      if (it != driven.end() && completion.ends_operation) {
        it->second.busy = false;
        // What the user asked may have changed while the operation ran.
        reload(it->second);
      }
      completion.apply();
    } catch (const NoSuchJobError&) {
      {
        const std::lock_guard lock(leases_mutex);
        held.erase(completion.job_id);
      }
      driven.erase(completion.job_id);
    } catch (const std::exception& e) {
      spdlog::error("{}: {}", job_label(completion.job_id), e.what());
      if (auto again = driven.find(completion.job_id); again != driven.end()) {
        backoff(again->second);
      }
    }
    if (auto again = driven.find(completion.job_id); again != driven.end()) {
      if (again->second.lost && !again->second.busy) {
        drop(again->second);
      } else {
        again->second.dirty = true;
      }
    }
  }

  void heartbeat_loop(const std::stop_token& stop) {
    auto hb_store = store::JobStore::open(store_path);
    const auto period = std::max(milliseconds(50), options.lease_ttl / 4);
    std::mutex m;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      {
        std::unique_lock lock(m);
        cv.wait_for(lock, stop, period, [] { return false; });
      }
      if (stop.stop_requested()) {
        break;
      }
      std::vector<std::int64_t> ids;
      {
        const std::lock_guard lock(leases_mutex);
        ids.assign(held.begin(), held.end());
      }
      if (ids.empty()) {
        continue;
      }
      try {
        const auto kept = hb_store.renew_leases(ids, options.owner, options.lease_ttl.count(), now_ms());
        const std::set<std::int64_t> kept_set(kept.begin(), kept.end());
        for (const auto id : ids) {
          if (!kept_set.contains(id)) {
            inbox->post({id, [this, id] { lease_lost(id); }});
          }
        }
      } catch (const std::exception& e) {
        spdlog::warn("renewing leases: {}", e.what());
      }
    }
  }

  void lease_lost(std::int64_t id) {
    auto it = driven.find(id);
    if (it == driven.end()) {
      return;
    }
    spdlog::warn("{}: lost its lease to another supervisor; no longer driving it", job_label(id));
    it->second.lost = true;
    if (!it->second.busy) {
      drop(it->second);
    }
  }

  // Stops watching a job and gives its lease up.
  void drop(Driven& d) {
    stop_stream(d);
    const auto id = d.job.id;
    {
      const std::lock_guard lock(leases_mutex);
      held.erase(id);
    }
    if (!d.lost) {
      try {
        store->release_lease(id, options.owner);
      } catch (const std::exception& e) {
        spdlog::warn("{}: releasing its lease: {}", job_label(id), e.what());
      }
    }
    driven.erase(id);
  }

  std::vector<std::int64_t> to_drop;

  void prune() {
    for (const auto id : to_drop) {
      if (auto it = driven.find(id); it != driven.end() && !it->second.busy) {
        drop(it->second);
      }
    }
    to_drop.clear();
  }

  void read_jobs() {
    std::vector<store::JobRecord> rows;
    try {
      rows = store->jobs_to_drive(false);
    } catch (const std::exception& e) {
      spdlog::warn("reading the store: {}", e.what());
      return;
    }
    std::set<std::int64_t> present;
    for (auto& row : rows) {
      if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), row.id) == options.only.end()) {
        continue;
      }
      present.insert(row.id);
      auto it = driven.find(row.id);
      if (it == driven.end()) {
        adopt(std::move(row));
        continue;
      }
      Driven& d = it->second;
      if (!d.busy && (row.updated_ms != d.job.updated_ms || row.desired != d.job.desired || row.phase != d.job.phase)) {
        d.job = std::move(row);
        d.attempts = store->attempts(d.job.id);
        d.dirty = true;
      }
    }
    for (auto& [id, d] : driven) {
      if (!present.contains(id)) {
        to_drop.push_back(id);
      }
    }
  }

  void adopt(store::JobRecord row) {
    const auto id = row.id;
    try {
      // A read first: another supervisor's live lease costs no write transaction each second.
      if (const auto lease = store->lease(id); lease && lease->owner != options.owner && lease->expires_ms > now_ms()) {
        return;
      }
      if (!store->try_acquire_lease(id, options.owner, options.lease_ttl.count(), now_ms())) {
        return; // Another supervisor drives it.
      }
    } catch (const std::exception& e) {
      spdlog::warn("{}: taking its lease: {}", job_label(id), e.what());
      return;
    }
    {
      const std::lock_guard lock(leases_mutex);
      held.insert(id);
    }
    Driven& d = driven[id];
    d.job = std::move(row);
    d.attempts = store->attempts(id);
    try {
      const auto full = store->get_job(id, true);
      auto configs = config::parse_job_configs(full.config_yaml, job_label(id) + "'s config");
      d.config = std::make_shared<const config::JobConfig>(std::move(configs.front()));
    } catch (const std::exception& e) {
      // Without its config nothing can be done for it but to say so.
      if (!store::is_terminal(d.job.phase)) {
        move(d, std::nullopt, change(Phase::failed, std::string("its recorded config cannot be read: ") + e.what()));
      }
      to_drop.push_back(id);
      return;
    }
    try {
      store->append_event(id, "action", "driven by supervisor " + options.owner,
                          nlohmann::json{{"owner", options.owner}}.dump());
    } catch (const NoSuchJobError&) {
      // Cleaned (by `clean`, which found nothing in the cloud) between the listing and here: nothing to drive.
      to_drop.push_back(id);
      return;
    }
    spdlog::debug("{}: driving it ({}, desired {})", job_label(id), store::to_string(d.job.phase),
                  store::to_string(d.job.desired));
  }

  // One queuedResources.list per zone in use covers every job there.
  void observe() {
    std::map<std::string, std::vector<Driven*>> zones;
    for (auto& [id, d] : driven) {
      if (d.open_slice() != nullptr) {
        zones[d.open_slice()->zone].push_back(&d);
      }
    }
    {
      const std::lock_guard lock(stats_mutex);
      ++counters.ticks;
    }
    for (auto& [zone, jobs] : zones) {
      std::vector<cloud::QueuedResource> listed;
      try {
        // The largest page the API serves: one request per zone for up to 1,000 slices.
        listed = access->client->list_queued_resources(access->location(zone), kListPageSize);
      } catch (const std::exception& e) {
        spdlog::warn("listing queued resources in {}: {}", zone, e.what());
        continue;
      } catch (...) {
        continue;
      }
      {
        const std::lock_guard lock(stats_mutex);
        ++counters.list_calls;
      }
      std::map<std::string, const cloud::QueuedResource*> by_id;
      for (const auto& qr : listed) {
        by_id[last_segment(qr.name)] = &qr;
      }
      for (Driven* d : jobs) {
        if (d->busy) {
          continue; // Its operation's result decides; the next listing will be fresh.
        }
        const auto* slice = d->open_slice();
        const auto found = by_id.find(slice->queued_resource);
        if (found == by_id.end()) {
          d->seen.reset();
        } else {
          d->seen = *found->second;
          d->seen_once = true;
        }
        d->seen_valid = true;
        const std::string state = d->seen ? cloud::to_string(d->seen->state) : "gone";
        if (state != d->seen_state) {
          d->seen_state = state;
          d->dirty = true;
          nlohmann::json data = {{"queued_resource", slice->queued_resource}, {"state", state}};
          if (d->seen && d->seen->failed_error) {
            data["error"] = d->seen->failed_error->message;
          }
          store->append_event(d->job.id, "observation", slice->queued_resource + " is " + state, data.dump());
        }
      }
    }
  }

  void shutdown() {
    spdlog::info("supervisor stopping: releasing {} job(s); workloads keep running", driven.size());
    std::vector<std::int64_t> ids;
    for (auto& [id, d] : driven) {
      stop_stream(d);
      ids.push_back(id);
    }
    for (const auto id : ids) {
      auto it = driven.find(id);
      if (it != driven.end() && !it->second.busy) {
        drop(it->second);
      }
    }
    // Jobs with an operation in flight keep their lease until it expires: the operation may still act.
    const std::lock_guard lock(leases_mutex);
    held.clear();
  }

  // ---- stepping ---------------------------------------------------------------------------------------------------

  void step_safely(Driven& d) {
    if (d.busy || d.lost || !d.dirty || !d.config) {
      return;
    }
    if (d.retry_at_ms > now_ms()) {
      return;
    }
    d.dirty = false;
    try {
      step(d);
    } catch (const NoSuchJobError&) {
      to_drop.push_back(d.job.id);
    } catch (const std::exception& e) {
      error_event(d, e.what());
      backoff(d);
      d.dirty = true;
    }
  }

  void step(Driven& d) {
    const auto& job = d.job;
    if (job.desired == DesiredState::remove || job.desired == DesiredState::clean) {
      tear_down(d);
    } else if (store::is_terminal(job.phase)) {
      if (job.cleanup_pending) {
        release(d, [this, &d] {
          store->set_cleanup_pending(d.job.id, false);
          reload(d);
          to_drop.push_back(d.job.id);
        });
      } else {
        to_drop.push_back(job.id);
      }
    } else if (job.desired == DesiredState::stop) {
      cancel(d);
    } else {
      drive(d);
    }
  }

  // Runs `work` on the pool; its result (a function) is applied on the loop's thread.
  void dispatch(Driven& d, std::function<std::function<void()>()> work) {
    d.busy = true;
    const auto id = d.job.id;
    pool.submit([work = std::move(work), inbox = inbox, id] {
      std::function<void()> apply;
      try {
        apply = work();
      } catch (const std::exception& e) {
        std::string message = e.what();
        apply = [message] { throw Error(message); };
      }
      inbox->post({id, std::move(apply), true});
    });
  }

  // An operation's failure: an error event and a retry after the backoff.
  std::function<void()> failed_operation(std::int64_t id, std::string message) {
    return [this, id, message = std::move(message)] {
      auto it = driven.find(id);
      if (it == driven.end()) {
        return;
      }
      error_event(it->second, message);
      backoff(it->second);
      it->second.dirty = true;
    };
  }

  Driven* find(std::int64_t id) {
    auto it = driven.find(id);
    return it == driven.end() ? nullptr : &it->second;
  }

  void drive(Driven& d) {
    if (d.config->tpu.allocation_mode != config::AllocationMode::queued_resources) {
      move(d, std::nullopt,
           change(Phase::failed, "tpu.allocation_mode tpu-vm is not driven by the supervisor; use queued-resources"));
      return;
    }
    switch (d.job.phase) {
    case Phase::pending:
    case Phase::recovering: acquire_slice(d); break;
    case Phase::queued:
    case Phase::provisioning: await_slice(d); break;
    case Phase::setup: set_up(d); break;
    case Phase::running: watch(d); break;
    default: break;
    }
  }

  // ---- getting a slice --------------------------------------------------------------------------------------------

  void acquire_slice(Driven& d) {
    if (const auto* asked = d.current(); asked != nullptr && asked->create_pending && !asked->ended_ms) {
      // Its name was recorded and then the request failed, or the supervisor that made it stopped before the
      // answer was recorded: ask again under the same name (the API answers 409 if the first request got there).
      request_slice(d, *asked);
      return;
    }
    if (const auto* open = d.open_slice()) {
      if (!d.seen_valid) {
        return; // The next listing tells what it is.
      }
      const auto verdict = judge_slice(d.seen);
      if (d.job.phase == Phase::pending && verdict != SliceVerdict::lost && verdict != SliceVerdict::deleting) {
        // Resumed with a slice kept: the next attempt runs on it.
        const std::string qr = open->queued_resource;
        store->begin_attempt(d.job.id, qr, open->node, open->zone);
        reload(d);
        move(d, std::nullopt, change(Phase::queued, "resumed on the kept slice " + qr));
        return;
      }
      release(d, [this, &d] { create_slice(d); });
      return;
    }
    create_slice(d);
  }

  // Records the next attempt and the name of its queued resource, then asks for it. The name is in the store before
  // the request leaves: a supervisor killed in between leaves a name that the next one asks for again (or deletes,
  // if the user cancelled meanwhile), never a slice the store does not know of.
  void create_slice(Driven& d) {
    const std::string qr = resource_id(d.job.tpu_name, d.job.id, d.job.attempt + 1);
    store->begin_attempt(d.job.id, qr, qr, d.config->tpu.zone, true);
    reload(d);
    request_slice(d, *d.current());
  }

  void request_slice(Driven& d, const store::AttemptRecord& attempt) {
    const std::string qr = attempt.queued_resource;
    const std::string zone = attempt.zone;
    const int number = attempt.number;
    const auto body = create_request_body(*d.config, access->project, d.job.id, d.job.user, number);
    const auto id = d.job.id;
    dispatch(d, [this, access = access, mutations = mutations, qr, zone, number, body, id]() -> std::function<void()> {
      try {
        ++*mutations;
        access->client->create_queued_resource(access->location(zone), qr, body);
      } catch (const cloud::ApiError& e) {
        // A request the API will never accept (bad argument, no permission) ends the job; the rest is retried.
        const int status = e.http_status();
        const bool permanent = status == 400 || status == 403 || status == 404;
        return [this, id, permanent, qr, number, message = std::string(e.what())] {
          Driven* live = find(id);
          if (live == nullptr) {
            return;
          }
          if (permanent) {
            store->end_attempt(id, number, "failed", std::nullopt);
            store->mark_released(id, qr, "the TPU API refused to create it");
            reload(*live);
            move(*live, std::nullopt, change(Phase::failed, "the TPU API refused the slice: " + message));
          } else {
            error_event(*live, "requesting a slice: " + message);
            backoff(*live);
          }
        };
      }
      return [this, id, qr, zone, number] { slice_created(id, qr, zone, number); };
    });
  }

  void slice_created(std::int64_t id, const std::string& qr, const std::string& zone, int number) {
    Driven* d = find(id);
    if (d == nullptr) {
      // Cleaned while the request was in flight: the resource must not outlive the job. (A job whose lease went to
      // another supervisor meanwhile keeps it: that one requests the same name and finds it.)
      if (!store->find_job(id)) {
        orphan_delete(qr, zone);
      }
      return;
    }
    try {
      store->confirm_created(id, number);
    } catch (const NoSuchJobError&) {
      orphan_delete(qr, zone);
      throw;
    }
    reload(*d);
    d->retry_step = 0;
    d->seen_valid = false;
    d->seen_once = false;
    d->seen_state.clear();
    d->delete_sent_ms = 0;
    if (d->job.desired == DesiredState::run && !store::is_terminal(d->job.phase)) {
      move(*d, std::nullopt, change(Phase::queued, "requested queued resource " + qr + " in " + zone));
    } else if (store::is_terminal(d->job.phase)) {
      store->set_cleanup_pending(id, true);
      reload(*d);
    }
  }

  void orphan_delete(const std::string& qr, const std::string& zone) {
    pool.submit([access = access, mutations = mutations, qr, zone] {
      try {
        ++*mutations;
        access->client->delete_queued_resource(access->location(zone), qr, cloud::DeleteMode::force);
        spdlog::info("deleted {}: its job was removed while it was being requested", qr);
      } catch (const std::exception& e) {
        spdlog::error("{} outlived its job and could not be deleted: {}", qr, e.what());
      }
    });
  }

  void await_slice(Driven& d) {
    const auto* open = d.open_slice();
    if (open == nullptr) {
      move(d, std::nullopt, change(Phase::pending, "no slice recorded for the attempt; requesting one"));
      return;
    }
    if (!d.seen_valid) {
      return;
    }
    if (!d.seen && !d.seen_once) {
      confirm_absent(d, *open);
      return;
    }
    const auto verdict = judge_slice(d.seen);
    if (auto phase = waiting_phase(verdict)) {
      if (*phase != d.job.phase) {
        move(d, d.job.phase, change(*phase, open->queued_resource + " is " + d.seen_state));
      }
      return;
    }
    if (verdict == SliceVerdict::active) {
      activate(d, *open);
      return;
    }
    preempted(d, "queued resource " + open->queued_resource + " is " + d.seen_state + slice_error(d), 143);
  }

  static std::string slice_error(const Driven& d) {
    if (d.seen && d.seen->failed_error) {
      return " (" + d.seen->failed_error->message + ")";
    }
    return {};
  }

  // A new resource missing from a listing: ask for it by name before calling it lost (listings may lag creates).
  void confirm_absent(Driven& d, const store::AttemptRecord& open) {
    const auto id = d.job.id;
    const auto qr = open.queued_resource;
    const auto zone = open.zone;
    dispatch(d, [this, access = access, gets = gets, id, qr, zone]() -> std::function<void()> {
      ++*gets;
      auto got = access->client->get_queued_resource(access->location(zone), qr);
      return [this, id, got] {
        if (Driven* live = find(id)) {
          live->seen = got;
          live->seen_once = true;
          live->seen_state = got ? cloud::to_string(got->state) : "gone";
        }
      };
    });
  }

  // The slice is ACTIVE: find worker 0's address and go on to SETUP.
  void activate(Driven& d, const store::AttemptRecord& open) {
    const auto id = d.job.id;
    const auto node = open.node;
    const auto zone = open.zone;
    dispatch(d, [this, access = access, gets = gets, id, node, zone]() -> std::function<void()> {
      ++*gets;
      auto got = access->client->get_node(access->location(zone), node);
      return [this, id, got, node] {
        Driven* live = find(id);
        if (live == nullptr) {
          return;
        }
        if (!got || got->state != cloud::NodeState::ready) {
          // Not up yet (or already going away); the next listing decides.
          live->seen_valid = false;
          return;
        }
        store::PhaseChange c = change(Phase::setup, "node " + node + " is READY with " +
                                                        std::to_string(got->network_endpoints.size()) + " host(s)");
        if (!got->network_endpoints.empty()) {
          c.host0_ip = got->network_endpoints.front().ip_address;
        }
        move(*live, std::nullopt, c);
      };
    });
  }

  // ---- on the workers ---------------------------------------------------------------------------------------------

  [[nodiscard]] remote::LaunchSpec launch_spec(const Driven& d) const {
    remote::LaunchSpec spec;
    spec.id = workload_id(d.job.id, d.job.attempt);
    spec.command = remote::environment_command(*d.config, d.config->command.cmd);
    spec.num_workers = std::max(1, d.job.hosts);
    spec.tpu_name = d.current() != nullptr ? d.current()->node : d.job.tpu_name;
    spec.zone = d.config->tpu.zone;
    spec.accelerator = d.job.accelerator;
    spec.docker = d.config->job.env_type == config::EnvType::docker;
    return spec;
  }

  // Whether the open slice is still ACTIVE, asked by name (after a worker could not be reached).
  static bool slice_active(const CloudAccess& access, std::atomic<std::uint64_t>& gets,
                           const store::AttemptRecord& open) {
    ++gets;
    const auto qr = access.client->get_queued_resource(access.location(open.zone), open.queued_resource);
    if (judge_slice(qr) != SliceVerdict::active) {
      return false;
    }
    ++gets;
    const auto node = access.client->get_node(access.location(open.zone), open.node);
    return node && node->state == cloud::NodeState::ready;
  }

  void set_up(Driven& d) {
    const auto* open = d.current();
    if (open == nullptr || open->released_ms) {
      move(d, std::nullopt, change(Phase::pending, "no slice for the attempt; requesting one"));
      return;
    }
    if (d.seen_valid && judge_slice(d.seen) != SliceVerdict::active) {
      preempted(d, "queued resource " + open->queued_resource + " is " + d.seen_state + " during setup", 143);
      return;
    }
    const auto id = d.job.id;
    const auto config = d.config;
    const auto target = slice_target(*access, *config, open->node);
    const auto hosts = all_workers(d.job.hosts);
    const auto workers = command_workers(*config, d.job.hosts);
    const auto dir = attempt_directory(id, d.job.attempt);
    const auto spec = launch_spec(d);
    const auto slice = *open;
    dispatch(d,
             [this, access = access, gets = gets, id, config, target, hosts, workers, dir, spec,
              slice]() -> std::function<void()> {
               util::ensure_directory(dir, 0700);
               const auto plan = remote::plan_setup(*config);
               const auto results = remote::run_setup(target, hosts, plan, dir, kSetupTimeout);
               std::string failure;
               bool lost_host = false;
               for (const auto& r : results) {
                 if (!r.ok()) {
                   if (failure.empty()) {
                     failure = "setup failed on worker " + std::to_string(r.worker) + ": " + r.error + " (see " +
                               (dir / ("setup-" + std::to_string(r.worker) + ".log")).string() + ")";
                   }
                   // A module that failed is the config's problem; anything else (gcloud could not connect or the API
                   // failed it) is the connection's, and is retried before it counts.
                   const bool module_failed =
                       !r.modules.empty() && r.modules.back().outcome == remote::ModuleOutcome::failed;
                   lost_host = lost_host || r.exit_code == 255 || r.timed_out || !module_failed;
                 }
               }
               std::vector<remote::WorkerStatus> launched;
               if (failure.empty()) {
                 launched = remote::launch(target, workers, spec, kRemoteTimeout);
                 for (const auto& s : launched) {
                   if (s.state == remote::WorkloadState::unreachable) {
                     failure = "launch failed on worker " + std::to_string(s.worker) + ": " + s.diagnostic;
                     lost_host = true;
                     break;
                   }
                 }
               }
               bool slice_gone = false;
               if (lost_host) {
                 slice_gone = !slice_active(*access, *gets, slice);
               }
               return [this, id, failure, lost_host, slice_gone, launched] {
                 Driven* live = find(id);
                 if (live == nullptr) {
                   return;
                 }
                 if (live->job.desired != DesiredState::run) {
                   return; // Cancel, delete or clean arrived meanwhile; the next step carries it out.
                 }
                 if (failure.empty()) {
                   live->retry_step = 0;
                   move(*live, Phase::setup,
                        change(Phase::running, "launched attempt " + std::to_string(live->job.attempt) + " on " +
                                                   std::to_string(launched.size()) + " worker(s)"));
                   return;
                 }
                 if (slice_gone) {
                   preempted(*live, failure + "; the slice is gone", 255);
                   return;
                 }
                 if (lost_host && ++live->unreachable < kUnreachableLimit) {
                   error_event(*live, failure + "; the slice is ACTIVE, trying again");
                   backoff(*live);
                   return;
                 }
                 live->unreachable = 0;
                 const auto c = after_failure(*live->config, live->job.failures, failure);
                 move(*live, Phase::setup, c);
                 if (c.to == Phase::setup) {
                   backoff(*live);
                 } else {
                   end_open_attempt(*live, "failed", std::nullopt);
                 }
               };
             });
  }

  void start_stream(Driven& d) {
    auto stream = std::make_shared<Stream>();
    stream->attempt = d.job.attempt;
    d.stream = stream;
    const auto id = d.job.id;
    const auto target = slice_target(*access, *d.config, d.current()->node);
    const auto workers = command_workers(*d.config, d.job.hosts);
    const auto wid = workload_id(id, d.job.attempt);
    const auto dir = attempt_directory(id, d.job.attempt);
    util::ensure_directory(dir, 0700);
    std::thread([this, inbox = inbox, hold = Outstanding::Hold(outstanding), stream, id, target, workers, wid, dir] {
      std::vector<remote::StreamEnd> ends;
      std::string error;
      try {
        ends = remote::attach(target, workers, wid, dir, stream->stop.get_token());
      } catch (const std::exception& e) {
        error = e.what();
      }
      const bool cancelled = stream->stop.stop_requested();
      if (cancelled) {
        return; // Whoever stopped it no longer cares; `this` may be gone.
      }
      inbox->post({id, [this, stream, ends = std::move(ends), error, id] {
                     Driven* live = find(id);
                     if (live == nullptr || live->stream != stream) {
                       return;
                     }
                     stream->ended = true;
                     stream->ends = ends;
                     stream->error = error;
                   }});
    }).detach();
    {
      const std::lock_guard lock(stats_mutex);
      ++counters.streams;
    }
  }

  void stop_stream(Driven& d) {
    if (d.stream) {
      d.stream->stop.request_stop();
      d.stream.reset();
      const std::lock_guard lock(stats_mutex);
      --counters.streams;
    }
  }

  void watch(Driven& d) {
    const auto* open = d.current();
    if (open == nullptr || open->released_ms) {
      move(d, std::nullopt, change(Phase::pending, "no slice for the attempt; requesting one"));
      return;
    }
    if (d.seen_valid && judge_slice(d.seen) != SliceVerdict::active) {
      stop_stream(d);
      preempted(d, "queued resource " + open->queued_resource + " is " + d.seen_state + slice_error(d), 143);
      return;
    }
    if (!d.stream) {
      start_stream(d);
      return;
    }
    if (!d.stream->ended) {
      return;
    }
    inspect(d);
  }

  // The stream ended: ask the workers how the workload stands, and end the attempt when it is decided.
  void inspect(Driven& d) {
    const auto id = d.job.id;
    const auto config = d.config;
    const auto target = slice_target(*access, *config, d.current()->node);
    const auto workers = command_workers(*config, d.job.hosts);
    const auto wid = workload_id(id, d.job.attempt);
    const auto slice = *d.current();
    const bool stream_failed = !d.stream->error.empty();
    if (stream_failed) {
      spdlog::warn("{}: watching the workload: {}", job_label(id), d.stream->error);
    }
    // Workers whose stream broke off before their workload ended (the connection dropped): their local log lacks
    // what came after.
    std::vector<int> behind;
    for (const auto& end : d.stream->ends) {
      if (end.exit_code != 0) {
        behind.push_back(end.worker);
      }
    }
    const auto dir = attempt_directory(id, d.job.attempt);
    dispatch(d,
             [this, access = access, gets = gets, id, config, target, workers, wid, slice, stream_failed, behind,
              dir]() -> std::function<void()> {
               const auto statuses = remote::query(target, workers, wid, kRemoteTimeout);
               auto verdict = judge_workers(statuses, config->recovery);
               bool slice_gone = false;
               if (verdict.outcome == AttemptOutcome::unreachable) {
                 slice_gone = !slice_active(*access, *gets, slice);
               }
               const bool decided =
                   verdict.outcome != AttemptOutcome::running && verdict.outcome != AttemptOutcome::unreachable;
               // A decided attempt ends on every worker.
               if (decided && std::any_of(statuses.begin(), statuses.end(),
                                          [](const auto& s) { return s.state == remote::WorkloadState::running; })) {
                 remote::stop(target, workers, wid, kStopGrace, kRemoteTimeout);
               }
               if (decided && !behind.empty()) {
                 catch_up(id, target, behind, wid, dir);
               }
               return [this, id, verdict, slice_gone, stream_failed] {
                 attempt_judged(id, verdict, slice_gone, stream_failed);
               };
             });
  }

  // Fetches the rest of the output of workers whose stream broke off, once their workload has ended, so that the
  // local logs hold everything before the attempt is recorded as over. A fetch that breaks off too (the connection
  // is as unreliable as it was) is tried again; bounded in time, after which a worker that cannot be reached leaves
  // its log as it is, with a warning.
  static void catch_up(std::int64_t id, const remote::SliceTarget& target, std::vector<int> workers,
                       const remote::WorkloadId& wid, const fs::path& dir) {
    std::stop_source give_up;
    std::jthread timer([&give_up](const std::stop_token& done) {
      std::mutex mutex;
      std::condition_variable_any wake;
      std::unique_lock lock(mutex);
      wake.wait_for(lock, done, kCatchUpLimit, [] { return false; });
      give_up.request_stop();
    });
    std::uint64_t bytes = 0;
    std::string trouble;
    for (int round = 0; !workers.empty() && !give_up.stop_requested(); ++round) {
      if (round > 0) {
        std::this_thread::sleep_for(std::min(milliseconds(100) * (1 << std::min(round, 5)), milliseconds(2000)));
      }
      try {
        std::vector<int> still;
        for (const auto& end : remote::attach(target, workers, wid, dir, give_up.get_token())) {
          bytes += end.bytes;
          if (end.exit_code != 0) {
            still.push_back(end.worker);
            trouble = util::trim(end.diagnostic);
          }
        }
        workers = std::move(still);
      } catch (const std::exception& e) {
        trouble = e.what();
      }
    }
    if (workers.empty()) {
      spdlog::info("{}: fetched the last {} bytes of output that a broken stream missed", job_label(id), bytes);
    } else {
      spdlog::warn("{}: the output of {} worker(s) whose stream broke off may be incomplete: {}", job_label(id),
                   workers.size(), trouble);
    }
  }

  void attempt_judged(std::int64_t id, const AttemptVerdict& verdict, bool slice_gone, bool stream_failed) {
    Driven* d = find(id);
    if (d == nullptr || d->job.desired != DesiredState::run || d->job.phase != Phase::running) {
      return;
    }
    stop_stream(*d);
    switch (verdict.outcome) {
    case AttemptOutcome::running:
      d->unreachable = 0;
      if (stream_failed) {
        backoff(*d); // Watching failed (say, another process holds the log): not in a tight loop.
      }
      return; // The next step re-attaches.
    case AttemptOutcome::unreachable:
      if (slice_gone) {
        preempted(*d, verdict.reason + "; the slice is gone", verdict.exit_code);
      } else if (++d->unreachable >= kUnreachableLimit) {
        preempted(*d, verdict.reason + " " + std::to_string(kUnreachableLimit) + " times while the slice is ACTIVE",
                  verdict.exit_code);
      } else {
        error_event(*d, verdict.reason + "; the slice is ACTIVE, watching again");
        backoff(*d);
      }
      return;
    case AttemptOutcome::succeeded: {
      d->unreachable = 0;
      end_open_attempt(*d, "succeeded", verdict.exit_code);
      store::PhaseChange c = change(Phase::succeeded, verdict.reason);
      c.exit_code = verdict.exit_code;
      c.cleanup_pending = !d->config->tpu.keep_on_success;
      if (d->config->tpu.keep_on_success) {
        c.reason += "; the slice is kept (tpu.keep_on_success)";
      }
      move(*d, Phase::running, c);
      return;
    }
    case AttemptOutcome::preempted: preempted(*d, verdict.reason, verdict.exit_code); return;
    case AttemptOutcome::restart:
      end_open_attempt(*d, "restart", verdict.exit_code);
      next_attempt_on_same_slice(*d, change(Phase::setup, verdict.reason + "; restarting on the same slice"));
      return;
    case AttemptOutcome::failed: {
      end_open_attempt(*d, "failed", verdict.exit_code);
      auto c = after_failure(*d->config, d->job.failures, verdict.reason);
      c.exit_code = verdict.exit_code;
      if (c.to == Phase::setup) {
        next_attempt_on_same_slice(*d, c);
      } else {
        move(*d, Phase::running, c);
      }
      return;
    }
    }
  }

  void next_attempt_on_same_slice(Driven& d, const store::PhaseChange& c) {
    const auto slice = *d.current();
    store->begin_attempt(d.job.id, slice.queued_resource, slice.node, slice.zone);
    reload(d);
    move(d, std::nullopt, c);
  }

  void preempted(Driven& d, const std::string& what, int exit_code) {
    stop_stream(d);
    end_open_attempt(d, "preempted", exit_code);
    d.unreachable = 0;
    move(d, std::nullopt, after_preemption(*d.config, d.job.preemptions, what));
  }

  // ---- cancel, delete, clean, release -----------------------------------------------------------------------------

  // Whether the current attempt's workload may be running and should be stopped.
  [[nodiscard]] bool workload_may_run(const Driven& d) const {
    const auto* current = d.current();
    return current != nullptr && !current->ended_ms && !current->released_ms &&
           (d.job.phase == Phase::running || d.job.phase == Phase::setup) &&
           (!d.seen_valid || judge_slice(d.seen) == SliceVerdict::active);
  }

  // Stops the workload on every worker, then runs `then` on the loop's thread.
  void stop_workload(Driven& d, std::function<void(std::optional<int>)> then) {
    stop_stream(d);
    const auto id = d.job.id;
    const auto target = slice_target(*access, *d.config, d.current()->node);
    const auto workers = command_workers(*d.config, d.job.hosts);
    const auto wid = workload_id(id, d.job.attempt);
    dispatch(d, [target, workers, wid, then = std::move(then)]() -> std::function<void()> {
      const auto statuses = remote::stop(target, workers, wid, kStopGrace, kRemoteTimeout);
      std::optional<int> code;
      for (const auto& s : statuses) {
        if (s.worker == 0 && s.state == remote::WorkloadState::exited) {
          code = s.exit_code;
        }
      }
      return [then, code] { then(code); };
    });
  }

  void cancel(Driven& d) {
    const auto id = d.job.id;
    if (workload_may_run(d)) {
      stop_workload(d, [this, id](std::optional<int> code) {
        if (Driven* live = find(id)) {
          end_open_attempt(*live, "cancelled", code);
          finish_cancel(*live);
        }
      });
      return;
    }
    stop_stream(d);
    end_open_attempt(d, "cancelled", std::nullopt);
    finish_cancel(d);
  }

  void finish_cancel(Driven& d) {
    if (d.job.desired != DesiredState::stop || store::is_terminal(d.job.phase)) {
      return;
    }
    const auto* open = d.open_slice();
    move(d, std::nullopt,
         change(Phase::cancelled, open != nullptr ? "cancelled by the user; slice " + open->queued_resource + " kept"
                                                  : "cancelled by the user"));
  }

  // Deletes the open slice (if any), then runs `done` once none is left.
  void release(Driven& d, const std::function<void()>& done) {
    const auto* open = d.open_slice();
    if (open == nullptr) {
      done();
      return;
    }
    if (d.seen_valid && !d.seen && (d.seen_once || d.delete_sent_ms > 0)) {
      store->mark_released(d.job.id, open->queued_resource, d.delete_sent_ms > 0 ? "deleted" : "gone from the cloud");
      reload(d);
      d.seen_valid = false;
      d.seen_once = false;
      d.delete_sent_ms = 0;
      release(d, done);
      return;
    }
    const bool deleting = d.seen_valid && d.seen && d.seen->state == cloud::QueuedResourceState::deleting;
    const bool resend = d.delete_sent_ms > 0 && now_ms() - d.delete_sent_ms > scaled(600).count();
    if (d.delete_sent_ms == 0 || (resend && !deleting)) {
      delete_slice(d, *open);
    } else if (d.seen_valid && !d.seen && !d.seen_once) {
      confirm_absent(d, *open);
    }
    // Otherwise the listings will show it gone.
  }

  void delete_slice(Driven& d, const store::AttemptRecord& open) {
    const auto id = d.job.id;
    const auto qr = open.queued_resource;
    const auto zone = open.zone;
    dispatch(d, [this, access = access, mutations = mutations, id, qr, zone]() -> std::function<void()> {
      std::optional<cloud::Operation> op;
      try {
        ++*mutations;
        op = access->client->delete_queued_resource(access->location(zone), qr, cloud::DeleteMode::force);
      } catch (const std::exception& e) {
        return failed_operation(id, "deleting " + qr + ": " + e.what());
      }
      const bool already_gone = !op.has_value();
      return [this, id, qr, already_gone] {
        Driven* live = find(id);
        if (live == nullptr) {
          return;
        }
        live->retry_step = 0;
        if (already_gone) {
          store->mark_released(id, qr, "already gone");
          reload(*live);
          live->seen_valid = false;
          live->seen_once = false;
          live->delete_sent_ms = 0;
          return;
        }
        live->delete_sent_ms = now_ms();
        live->seen_valid = false;
        event(*live, "action", "deleting queued resource " + qr, {{"queued_resource", qr}});
      };
    });
  }

  void tear_down(Driven& d) {
    const auto id = d.job.id;
    if (workload_may_run(d)) {
      stop_workload(d, [this, id](std::optional<int> code) {
        if (Driven* live = find(id)) {
          end_open_attempt(*live, "cancelled", code);
        }
      });
      return;
    }
    stop_stream(d);
    end_open_attempt(d, "cancelled", std::nullopt);
    release(d, [this, &d] {
      if (d.job.phase != Phase::deleted || d.job.cleanup_pending) {
        store::PhaseChange c = change(Phase::deleted, "deleted by the user; no slice left");
        c.cleanup_pending = false;
        move(d, std::nullopt, c);
      }
      if (d.job.desired == DesiredState::clean) {
        remove_job_directory(d.job.id);
        store->remove_job_if_present(d.job.id); // The clean command may have removed it meanwhile.
        spdlog::info("{}: cleaned: its record and directory are removed", job_label(d.job.id));
        {
          const std::lock_guard lock(leases_mutex);
          held.erase(d.job.id);
        }
        d.lost = true; // Its lease went with the record.
      }
      to_drop.push_back(d.job.id);
    });
  }
};

Supervisor::Supervisor(CloudAccess access, fs::path store_path, SupervisorOptions options)
    : impl_(std::make_unique<Impl>(std::move(access), std::move(store_path), std::move(options))) {}

Supervisor::~Supervisor() = default;

void Supervisor::run(const std::stop_token& stop) {
  impl_->run(stop);
}

bool Supervisor::settled() const {
  return impl_->settled;
}

SupervisorStats Supervisor::stats() const {
  SupervisorStats s = impl_->snapshot();
  const std::lock_guard leases(impl_->leases_mutex);
  s.jobs_driven = impl_->held.size();
  return s;
}

} // namespace jobman::core
