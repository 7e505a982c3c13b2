// The job driver, getting a slice: PENDING and RECOVERING request one (recording its name first), QUEUED and
// PROVISIONING wait until it is ACTIVE and its node READY, then SETUP.
#include "job_driver.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/util/error.hpp"

#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

using domain::DesiredState;
using domain::Phase;

void JobDriver::acquire_slice(Driven& d) {
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
      store().begin_attempt(d.job.id, open->placement());
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
void JobDriver::create_slice(Driven& d) {
  const std::string qr = resource_id(d.job.tpu_name, d.job.id, d.job.attempt + 1);
  store().begin_attempt(d.job.id, domain::Placement{qr, qr, d.job.zone, d.job.accelerator, d.job.hosts}, true);
  reload(d);
  request_slice(d, *d.current());
}

void JobDriver::request_slice(Driven& d, const domain::AttemptRecord& attempt) {
  const std::string qr = attempt.queued_resource;
  const std::string zone = attempt.zone;
  const int number = attempt.number;
  const auto body = create_request_body(*d.config, access_->project, d.job.id, d.job.user, number);
  const auto id = d.job.id;
  host_.dispatch(d,
                 [this, access = access_, counters = counters_, qr, zone, number, body, id]() -> std::function<void()> {
                   try {
                     ++counters->mutations;
                     access->client->create_queued_resource(access->location(zone), qr, body);
                   } catch (const cloud::ApiError& e) {
                     // A request the API will never accept (bad argument, no permission) ends the job; the rest is
                     // retried.
                     const int status = e.http_status();
                     const bool permanent = status == 400 || status == 403 || status == 404;
                     return [this, id, permanent, qr, number, message = std::string(e.what())] {
                       Driven* live = host_.find(id);
                       if (live == nullptr) {
                         return;
                       }
                       if (permanent) {
                         store().end_attempt(id, number, "failed", std::nullopt);
                         store().mark_released(id, qr, "the TPU API refused to create it");
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

void JobDriver::slice_created(std::int64_t id, const std::string& qr, const std::string& zone, int number) {
  Driven* d = host_.find(id);
  if (d == nullptr) {
    // Cleaned while the request was in flight: the resource must not outlive the job. (A job whose lease went to
    // another supervisor meanwhile keeps it: that one requests the same name and finds it.)
    if (!store().find_job(id)) {
      orphan_delete(qr, zone);
    }
    return;
  }
  try {
    store().confirm_created(id, number);
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
  if (d->job.desired == DesiredState::run && !domain::is_terminal(d->job.phase)) {
    move(*d, std::nullopt, change(Phase::queued, "requested queued resource " + qr + " in " + zone));
  } else if (domain::is_terminal(d->job.phase)) {
    store().set_cleanup_pending(id, true);
    reload(*d);
  }
}

void JobDriver::orphan_delete(const std::string& qr, const std::string& zone) {
  host_.dispatch_detached([access = access_, counters = counters_, qr, zone] {
    try {
      ++counters->mutations;
      access->client->delete_queued_resource(access->location(zone), qr, cloud::DeleteMode::force);
      spdlog::info("deleted {}: its job was removed while it was being requested", qr);
    } catch (const std::exception& e) {
      spdlog::error("{} outlived its job and could not be deleted: {}", qr, e.what());
    }
  });
}

void JobDriver::await_slice(Driven& d) {
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

std::string JobDriver::slice_error(const Driven& d) {
  if (d.seen && d.seen->failed_error) {
    return " (" + d.seen->failed_error->message + ")";
  }
  return {};
}

// A new resource missing from a listing: ask for it by name before calling it lost (listings may lag creates).
void JobDriver::confirm_absent(Driven& d, const domain::AttemptRecord& open) {
  const auto id = d.job.id;
  const auto qr = open.queued_resource;
  const auto zone = open.zone;
  host_.dispatch(d, [this, access = access_, counters = counters_, id, qr, zone]() -> std::function<void()> {
    ++counters->get_calls;
    auto got = access->client->get_queued_resource(access->location(zone), qr);
    return [this, id, got] {
      if (Driven* live = host_.find(id)) {
        live->seen = got;
        live->seen_once = true;
        live->seen_state = got ? cloud::to_string(got->state) : "gone";
      }
    };
  });
}

// The slice is ACTIVE: find worker 0's address and go on to SETUP.
void JobDriver::activate(Driven& d, const domain::AttemptRecord& open) {
  const auto id = d.job.id;
  const auto node = open.node;
  const auto zone = open.zone;
  host_.dispatch(d, [this, access = access_, counters = counters_, id, node, zone]() -> std::function<void()> {
    ++counters->get_calls;
    auto got = access->client->get_node(access->location(zone), node);
    return [this, id, got, node] {
      Driven* live = host_.find(id);
      if (live == nullptr) {
        return;
      }
      if (!got || got->state != cloud::NodeState::ready) {
        // Not up yet (or already going away); the next listing decides.
        live->seen_valid = false;
        return;
      }
      domain::PhaseChange c = change(Phase::setup, "node " + node + " is READY with " +
                                                       std::to_string(got->network_endpoints.size()) + " host(s)");
      if (!got->network_endpoints.empty()) {
        c.host0_ip = got->network_endpoints.front().ip_address;
      }
      move(*live, std::nullopt, c);
    };
  });
}

} // namespace jobman::core::supervision
