// The supervisor's loop: reading the jobs, observing the cloud, stepping each job, applying what other threads hand
// back, and stopping (see loop.hpp).
#include "loop.hpp"

#include "jobman/core/daemon.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "observe.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <spdlog/spdlog.h>
#include <string_view>
#include <thread>
#include <utility>

namespace jobman::core::supervision {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

// How long a stopping supervisor waits for the operations and streams still running (see Outstanding).
constexpr milliseconds kSettleLimit{5'000};
// How long a tick that failed (the store unreachable, say) waits before the next starts over.
constexpr milliseconds kTickRetry{500};
// How often the progress read from the workers' output is written: a trainer printing a hundred steps a second costs
// the store one row per job every this often.
constexpr milliseconds kProgressFlushEvery{3'000};

// Whether `message` (a failed connection to the store's server) says the server is not up yet or is restarting, as
// libpq and PostgreSQL put it; a wrong address, name or password says something else.
bool server_not_up(std::string_view message) {
  for (const std::string_view sign : {"Connection refused", "the database system is starting up",
                                      "the database system is shutting down", "the database system is in recovery"}) {
    if (message.find(sign) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

// Waits `wait` or until `stop` is requested.
void pause(const std::stop_token& stop, milliseconds wait) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, wait, [] { return false; });
}

} // namespace

SupervisorLoop::SupervisorLoop(const CloudAccess& cloud_access, std::string location, SupervisorOptions opts)
    : SupervisorLoop(cloud_access, std::move(location), std::move(opts),
                     {make_slice_ops(cloud_access), make_worker_ops()}) {}

SupervisorLoop::SupervisorLoop(CloudAccess cloud_access, std::string location, SupervisorOptions opts,
                               JobDriver::Operations operations)
    : access(std::make_shared<const CloudAccess>(std::move(cloud_access))), ops(std::move(operations)),
      store_location(std::move(location)), options(std::move(opts)),
      actions(std::max(1, options.action_threads), outstanding), driver(*this, access, ops, counters) {
  if (options.owner.empty()) {
    options.owner = lease_owner_id();
  }
  orphan_owner = owner_label_value(util::current_user());
}

void SupervisorLoop::compute_tick() {
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

bool SupervisorLoop::tick_once(const std::stop_token& stop, TickTimes& times) {
  auto& [next_read, next_observe, next_notify, next_progress] = times;
  const auto now = std::chrono::steady_clock::now();
  if (now >= next_read || read_now) {
    read_now = false;
    store_clock_offset_ms = job_store->clock_ms() - util::now_ms();
    read_share();
    read_jobs();
    compute_tick();
    next_read = now + std::min(tick, milliseconds(1000));
  }
  if (now >= next_observe) {
    observe_slices(driven, *ops.slices, *this, *counters);
    next_observe = now + tick;
    mark_due_after_observation(driven, *this);
  }
  sweep_if_due(now);
  for (auto& [id, d] : driven) {
    step_safely(d);
  }
  if (now >= next_progress) {
    flush_progress();
    next_progress = now + kProgressFlushEvery;
  }
  if (notify_now || now >= next_notify) {
    notify_now = false;
    next_notify = now + std::max(tick, milliseconds(1000));
    send_due_notifications();
  }
  prune();
  if (options.idle_exit) {
    if (!driven.empty()) {
      idle_since.reset();
    } else if (!idle_since) {
      idle_since = now;
    } else if (now - *idle_since >= *options.idle_exit) {
      spdlog::info("supervisor idle for {}; exiting", util::format_duration(options.idle_exit->count() / 1000));
      return false;
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
    try {
      apply(completion);
    } catch (const std::exception& e) {
      spdlog::warn("{}: {}", job_label(completion.job_id), e.what());
    }
  }
  return true;
}

void SupervisorLoop::run(const std::stop_token& stop) {
  // A store whose server is not up yet, or is restarting, is waited for as a tick waits for it: a supervisor started
  // then takes its jobs up once the server answers. Any other failure to open it ends the supervisor.
  for (bool said = false; !job_store;) {
    try {
      job_store.emplace(store::JobStore::open_location(store_location));
    } catch (const Error& e) {
      if (!server_not_up(e.what())) {
        throw;
      }
      if (!said) {
        spdlog::warn("the store cannot be reached yet ({}); waiting for its server", e.what());
        said = true;
      }
      pause(stop, kTickRetry);
      if (stop.stop_requested()) {
        return; // Stopped before it began: nothing to release.
      }
    }
  }
  job_store->drive_as(options.owner);
  store_clock_offset_ms = job_store->clock_ms() - util::now_ms();
  std::jthread heartbeat([this](const std::stop_token& hb_stop) { heartbeat_loop(hb_stop); });
  std::jthread listener;
  if (job_store->on_postgres()) {
    listener = std::jthread([this](const std::stop_token& listen_stop) { listen_loop(listen_stop); });
  }
  TickTimes times;
  times.read = times.observe = times.notify = times.progress = std::chrono::steady_clock::now();
  next_sweep = times.read;
  spdlog::info("supervisor {} started on the {} cloud (project {})", options.owner, access->mock ? "mock" : "Google",
               access->project);
  while (!stop.stop_requested()) {
    try {
      if (!tick_once(stop, times)) {
        break;
      }
    } catch (const std::exception& e) {
      // The store (a server restarting, a network cut) or anything else this tick needed failed: nothing the tick
      // did is lost (each write is a transaction of its own), and the next tick starts over.
      spdlog::warn("this tick stopped short: {}; trying again", e.what());
      pause(stop, kTickRetry);
    }
  }
  shutdown();
  heartbeat.request_stop();
  // Operations not yet started are dropped; the streams were told to stop. What is still running gets a moment to
  // end: its result can no longer be recorded, and whatever it leaves undone the next supervisor redoes.
  actions.close();
  if (const int left = outstanding->wait_for_none(kSettleLimit); left > 0) {
    settled_ = false;
    spdlog::info("{} operation(s) still running are abandoned; the next supervisor takes their jobs over", left);
  }
  const auto s = stats();
  spdlog::info("supervisor stats: ticks={} tick_ms={} list_calls={} get_calls={} mutations={} transitions={}", s.ticks,
               tick.count(), s.list_calls, s.get_calls, s.mutations, s.transitions);
}

SupervisorStats SupervisorLoop::stats() const {
  SupervisorStats s;
  s.ticks = counters->ticks.load();
  s.list_calls = counters->list_calls.load();
  s.get_calls = counters->get_calls.load();
  s.mutations = counters->mutations.load();
  s.transitions = counters->transitions.load();
  s.streams = static_cast<std::size_t>(std::max<std::int64_t>(0, counters->streams.load()));
  const std::lock_guard lock(leases_mutex);
  s.jobs_driven = held.size();
  return s;
}

void SupervisorLoop::apply(Completion& completion) {
  auto it = driven.find(completion.job_id);
  if (it != driven.end() && it->second.lost) {
    // Another supervisor holds the job now: what this one learnt is not its to record.
    if (completion.ends_operation) {
      it->second.busy = false;
      drop(it->second);
      // Unless the job was removed (`clean` found nothing of it in the cloud while its slice was being
      // requested): then the result runs with the job gone, so that what the operation made in the cloud is
      // deleted rather than left to bill (slice_created's orphan path).
      if (!job_store->jobs().find(completion.job_id)) {
        try {
          completion.apply();
        } catch (const std::exception& e) {
          spdlog::warn("{}: after its removal: {}", job_label(completion.job_id), e.what());
        }
      }
    }
    return;
  }
  if (!driver.apply_result(completion.job_id, it == driven.end() ? nullptr : &it->second, completion.apply,
                           completion.ends_operation)) {
    {
      const std::lock_guard lock(leases_mutex);
      held.erase(completion.job_id);
    }
    driven.erase(completion.job_id);
  }
  if (auto again = driven.find(completion.job_id); again != driven.end()) {
    if (again->second.lost && !again->second.busy) {
      drop(again->second);
    } else {
      again->second.dirty = true;
    }
  }
}

void SupervisorLoop::read_share() {
  auto limits = read_share_limits(*job_store);
  if (fair_share && fair_share->limits() == limits) {
    driver.set_fair_share(fair_share); // The same limits; the chips in flight are counted again.
    return;
  }
  fair_share = std::make_shared<const FairShare>(std::move(limits));
  job_store->shares().set_policy(fair_share);
  driver.set_fair_share(fair_share);
}

void SupervisorLoop::step_safely(Driven& d) {
  if (!driver.step_when_due(d)) {
    to_drop.push_back(d.job.id);
  }
}

void SupervisorLoop::flush_progress() {
  std::vector<store::ProgressUpdate> batch;
  std::vector<std::shared_ptr<ProgressTracker>> taken;
  for (auto& [id, d] : driven) {
    if (!d.progress) {
      continue;
    }
    const std::lock_guard lock(d.progress->mutex);
    if (d.progress->dirty) {
      batch.push_back({id, d.progress->attempt, d.progress->series, d.progress->total});
      d.progress->dirty = false;
      taken.push_back(d.progress);
    }
  }
  try {
    store().attempts().record_progress(batch);
  } catch (const std::exception& e) {
    spdlog::warn("recording training progress: {}", e.what());
    for (const auto& tracker : taken) {
      const std::lock_guard lock(tracker->mutex);
      tracker->dirty = true; // The next flush tries again.
    }
  }
}

void SupervisorLoop::prune() {
  if (!to_drop.empty()) {
    flush_progress();
  }
  for (const auto id : to_drop) {
    if (auto it = driven.find(id); it != driven.end() && !it->second.busy) {
      drop(it->second);
    }
  }
  to_drop.clear();
}

void SupervisorLoop::shutdown() {
  spdlog::info("supervisor stopping: releasing {} job(s); workloads keep running", driven.size());
  flush_progress();
  std::vector<std::int64_t> ids;
  for (auto& [id, d] : driven) {
    driver.stop_stream(d);
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

// ---- DriverHost ----

void SupervisorLoop::dispatch(Driven& d, Work work) {
  d.busy = true;
  const auto id = d.job.id;
  actions.submit([work = std::move(work), inbox = inbox, id] {
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

Driven* SupervisorLoop::find(std::int64_t id) {
  auto it = driven.find(id);
  return it == driven.end() ? nullptr : &it->second;
}

milliseconds SupervisorLoop::scaled(double seconds) const {
  const double ms = seconds * 1000.0 / std::max(1.0, access->time_scale);
  return milliseconds(static_cast<long long>(std::max(1.0, ms)));
}

void SupervisorLoop::dispatch_detached(std::function<void()> task) {
  actions.submit(std::move(task));
}

void SupervisorLoop::watch_in_background(std::int64_t id, Work watch) {
  std::thread([inbox = inbox, hold = Outstanding::Hold(outstanding), id, watch = std::move(watch)] {
    if (auto apply = watch()) {
      inbox->post({id, std::move(apply)});
    }
  }).detach();
}

void SupervisorLoop::post(std::int64_t id, std::function<void()> apply) {
  inbox->post({id, std::move(apply)});
}

void SupervisorLoop::forget_lease(std::int64_t id) {
  const std::lock_guard lock(leases_mutex);
  held.erase(id);
}

std::int64_t SupervisorLoop::now_ms() const {
  return util::now_ms() + store_clock_offset_ms.load();
}

} // namespace jobman::core::supervision
