// Which jobs a supervisor drives: reading them from the store, taking and renewing their leases, and letting them go
// (see loop.hpp).
#include "jobman/store/leases.hpp"

#include "jobman/config/loader.hpp"
#include "jobman/core/daemon.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/postgres.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/util/error.hpp"
#include "loop.hpp"

#include <algorithm>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

using domain::Phase;
using std::chrono::milliseconds;

void SupervisorLoop::read_jobs() {
  // A supervisor of this machine that died (kill -9, a crash) gives its jobs up now, not when its leases run out: a
  // look at /proc per live owner, once a second.
  if (const auto now = std::chrono::steady_clock::now(); now >= next_dead_owner_check) {
    next_dead_owner_check = now + milliseconds(1000);
    try {
      for (const auto& owner : end_leases_of_dead_supervisors(*job_store, now_ms())) {
        spdlog::info("supervisor {} is dead (its process is gone); its jobs are taken over now", owner);
      }
    } catch (const std::exception& e) {
      spdlog::warn("ending the leases of dead supervisors: {}", e.what());
    }
  }
  std::vector<domain::JobRecord> rows;
  try {
    // Those other supervisors drive are left out by the query: no lease is read per job.
    rows = job_store->leases().jobs_to_drive_by(options.owner, now_ms());
  } catch (const std::exception& e) {
    spdlog::warn("reading the store: {}", e.what());
    return;
  }
  std::set<std::int64_t> present;
  ZoneShares zones;
  // Workers and jobs first: a task claimed by a worker is driven by the supervisor that drives the worker.
  std::stable_partition(rows.begin(), rows.end(), [](const auto& r) { return r.kind != domain::JobKind::task; });
  for (auto& row : rows) {
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), row.id) == options.only.end()) {
      continue;
    }
    present.insert(row.id);
    auto it = driven.find(row.id);
    if (it == driven.end()) {
      if (row.kind == domain::JobKind::task && row.worker_id && !driven.contains(*row.worker_id) &&
          worker_is_live(*row.worker_id)) {
        continue; // Another supervisor drives its worker, and so the task.
      }
      if (take_up_now(row, zones)) {
        adopt(row);
        if (row.zone.empty()) {
          continue;
        }
        if (driven.contains(row.id)) {
          zones.mine.value().insert(row.zone); // take_up_now read them.
        } else {
          zones.contested.insert(row.zone); // Taken by another supervisor between the listing and the lease.
        }
      }
      continue;
    }
    driver.take_news(it->second, std::move(row));
  }
  for (auto& [id, d] : driven) {
    if (!present.contains(id)) {
      to_drop.push_back(id);
    }
  }
  std::erase_if(left_since_ms,
                [&](const auto& entry) { return !present.contains(entry.first) || driven.contains(entry.first); });
}

bool SupervisorLoop::take_up_now(const domain::JobRecord& row, ZoneShares& zones) {
  if (!zones.mine) {
    zones.mine.emplace();
    for (const auto& [id, d] : driven) {
      zones.mine->insert(d.job.zone);
    }
  }
  if (row.zone.empty() || zones.mine->contains(row.zone)) {
    return true;
  }
  if (!zones.others) {
    try {
      zones.others = job_store->leases().zones_driven_by_others(options.owner, now_ms());
    } catch (const std::exception& e) {
      spdlog::warn("reading which zones other supervisors drive: {}", e.what());
      zones.others.emplace();
    }
  }
  if (!zones.others->contains(row.zone) && !zones.contested.contains(row.zone)) {
    left_since_ms.erase(row.id);
    return true; // Nobody drives the zone: whoever takes this row's lease first lists it from now on.
  }
  // Left to the supervisor that drives the zone, unless that one leaves it undriven for four leases' length and at
  // least a minute: it may be a daemon for a few jobs only (`jobman daemon ID...`), or be wedged. Taking up a
  // thousand new records takes a loaded supervisor several seconds, which is no reason to share its zone.
  const auto since = left_since_ms.try_emplace(row.id, now_ms()).first->second;
  return now_ms() - since >= std::max<std::int64_t>(4 * options.lease_ttl.count(), 60'000);
}

bool SupervisorLoop::worker_is_live(std::int64_t worker_id) {
  const auto worker = job_store->jobs().find(worker_id);
  return worker && !domain::is_terminal(worker->phase);
}

std::optional<std::int64_t> SupervisorLoop::claim(Driven& worker, const store::WorkerOffer& offer) {
  const auto id = job_store->queue().claim(offer, options.owner, options.lease_ttl.count(), now_ms());
  if (!id) {
    return std::nullopt;
  }
  if (auto row = job_store->jobs().find(*id)) {
    adopt(*row);
  }
  worker.dirty = true;
  return id;
}

namespace {

// What Leases::jobs_to_drive selects, for one job read again: unfinished (a task once a worker claimed it), a slice
// still to release, or a delete or clean not yet done.
bool needs_a_supervisor(const domain::JobRecord& job) {
  using domain::DesiredState;
  if (job.desired == DesiredState::remove && job.phase == Phase::deleted && !job.cleanup_pending) {
    return false;
  }
  const bool queued_task =
      job.kind == domain::JobKind::task && job.phase == Phase::pending && job.desired == DesiredState::run;
  return (!domain::is_terminal(job.phase) && !queued_task) || job.cleanup_pending ||
         job.desired == DesiredState::remove || job.desired == DesiredState::clean;
}

} // namespace

void SupervisorLoop::adopt(const domain::JobRecord& row) {
  const auto id = row.id;
  try {
    // read_jobs left out the jobs under another supervisor's live lease, so this write is for a job nobody held
    // when it was listed (or one this supervisor's worker just claimed).
    if (!job_store->leases().try_acquire(id, options.owner, options.lease_ttl.count(), now_ms())) {
      return; // Another supervisor drives it.
    }
  } catch (const std::exception& e) {
    spdlog::warn("{}: taking its lease: {}", job_label(id), e.what());
    return;
  }
  // The listing may be older than the lease: another supervisor may have finished the job and let it go in between.
  // Read it again, now that no one else may change it, and give the lease back when nothing is left to do.
  std::optional<domain::JobRecord> fresh;
  try {
    fresh = job_store->jobs().find(id, true);
  } catch (const std::exception& e) {
    spdlog::warn("{}: reading it: {}", job_label(id), e.what());
  }
  if (!fresh || !needs_a_supervisor(*fresh)) {
    try {
      job_store->leases().release(id, options.owner);
    } catch (const std::exception& e) {
      spdlog::warn("{}: letting its lease go: {}", job_label(id), e.what());
    }
    return;
  }
  {
    const std::lock_guard lock(leases_mutex);
    held.insert(id);
  }
  Driven& d = driven[id];
  try {
    load_driven(d, *fresh, *job_store, fresh->worker_id ? find(*fresh->worker_id) : nullptr);
  } catch (const std::exception& e) {
    // Without its config nothing can be done for it but to say so.
    if (!domain::is_terminal(d.job.phase)) {
      driver.move(d, std::nullopt,
                  domain::change_to(Phase::failed, std::string("its recorded config cannot be read: ") + e.what()));
    }
    to_drop.push_back(id);
    return;
  }
  try {
    // Refused when another supervisor took the lease since (this one stalled longer than the lease lasts).
    job_store->events().append_as_driver(id, "action", "driven by supervisor " + options.owner,
                                         nlohmann::json{{"owner", options.owner}}.dump());
  } catch (const domain::NoSuchJobError&) {
    // Cleaned (by `clean`, which found nothing in the cloud) between the listing and here: nothing to drive.
    to_drop.push_back(id);
    return;
  } catch (const store::LeaseLostError& e) {
    spdlog::info("{}: {}; another supervisor drives it", job_label(id), e.what());
    d.lost = true;
    to_drop.push_back(id);
    return;
  }
  spdlog::debug("{}: driving it ({}, desired {})", job_label(id), domain::to_string(d.job.phase),
                domain::to_string(d.job.desired));
}

void SupervisorLoop::heartbeat_loop(const std::stop_token& stop) {
  auto hb_store = store::JobStore::open_location(store_location);
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
      const auto kept = hb_store.leases().renew_all(ids, options.owner, options.lease_ttl.count(), now_ms());
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

void SupervisorLoop::listen_loop(const std::stop_token& stop) {
  constexpr milliseconds kWaitAtMost(250); // How soon a stopping supervisor's listener notices.
  std::optional<store::postgres::Listener> listener;
  while (!stop.stop_requested()) {
    if (!listener) {
      try {
        listener.emplace(store_location);
      } catch (const std::exception& e) {
        spdlog::warn("listening for the store's wake-ups: {}", e.what());
        std::mutex m;
        std::condition_variable_any cv;
        std::unique_lock lock(m);
        cv.wait_for(lock, stop, std::chrono::seconds(5), [] { return false; });
        continue;
      }
    }
    if (listener->wait(kWaitAtMost)) {
      inbox->post({0, [this] { read_now = true; }});
    }
  }
}

void SupervisorLoop::lease_lost(std::int64_t id) {
  auto it = driven.find(id);
  if (it == driven.end() || it->second.lost) {
    return;
  }
  lease_taken(it->second);
  if (!it->second.busy) {
    drop(it->second);
  }
}

void SupervisorLoop::lease_taken(Driven& d) {
  if (d.lost) {
    return;
  }
  const auto id = d.job.id;
  spdlog::warn("{}: lost its lease to another supervisor; no longer driving it", job_label(id));
  // In the job's history too: a supervisor cut off from the store longer than its lease lasts (a server restart, a
  // machine frozen) is alive and hands the job over, which `show` then explains.
  try {
    job_store->events().append(id, "action", "supervisor " + options.owner + " lost its lease; no longer driving it",
                               nlohmann::json{{"owner", options.owner}}.dump());
  } catch (const std::exception& e) {
    spdlog::warn("{}: recording its lost lease: {}", job_label(id), e.what());
  }
  d.lost = true;
}

void SupervisorLoop::drop(Driven& d) {
  driver.stop_stream(d);
  const auto id = d.job.id;
  {
    const std::lock_guard lock(leases_mutex);
    held.erase(id);
  }
  if (!d.lost) {
    try {
      job_store->leases().release(id, options.owner);
    } catch (const std::exception& e) {
      spdlog::warn("{}: releasing its lease: {}", job_label(id), e.what());
    }
  }
  driven.erase(id);
}

} // namespace jobman::core::supervision
