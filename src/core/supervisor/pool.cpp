// The job driver for pools of slices: a worker is a job whose work is to lend its slice to tasks, one at a time; a
// task is a job that runs on a worker's slice instead of one of its own. Both go through the same phases as a job
// (job_driver.hpp); this file holds what differs: a worker serving the queue, a task whose worker stops lending it
// the slice, and a task letting its worker go.
#include "jobman/core/pool.hpp"

#include "job_driver.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

using domain::AttemptOutcome;
using domain::DesiredState;
using domain::Phase;

namespace {

// What a worker offers the queue from `zone`, lending `placement`.
store::WorkerOffer offer_of(const Driven& w, const std::string& zone, const domain::Placement& placement) {
  store::WorkerOffer offer;
  offer.worker_id = w.job.id;
  offer.accelerator = w.job.accelerator;
  offer.zone = zone;
  offer.pricing = w.job.pricing.value_or(domain::Pricing::spot); // A worker's record always names its pricing.
  offer.placement = placement;
  return offer;
}

} // namespace

std::string worker_label(std::int64_t id) {
  return "worker " + domain::format_job_id(id);
}

void lend_worker_settings(const config::JobConfig& worker, config::JobConfig& task) {
  if (task.job.remote_user.empty()) {
    task.job.remote_user = worker.job.remote_user;
  }
  if (!task.ssh && worker.ssh) {
    task.ssh = worker.ssh;
  }
  if (task.tpu.flags.empty()) {
    task.tpu.flags = worker.tpu.flags;
  }
  if (task.job.env_type == config::EnvType::none && worker.job.env_type != config::EnvType::none) {
    task.job.env_type = worker.job.env_type;
    task.venv = worker.venv;
    task.conda = worker.conda;
    task.docker = worker.docker;
  }
}

bool JobDriver::lends_slice(const Driven& worker, const domain::AttemptRecord* borrowed) {
  if (worker.job.phase != Phase::running || worker.job.desired != DesiredState::run) {
    return false;
  }
  const auto* slice = worker.open_slice();
  if (slice == nullptr || (worker.seen.valid && verdict_of(worker.seen.view) != SliceVerdict::active)) {
    return false;
  }
  return borrowed == nullptr || borrowed->slice_name() == slice->slice_name();
}

std::optional<std::int64_t> JobDriver::task_of(const Driven& worker) {
  return store().queue().task_of_worker(worker.job.id);
}

void JobDriver::wake_task_of(const Driven& worker) {
  if (const auto task = task_of(worker)) {
    if (Driven* t = host_.find(*task)) {
      t->dirty = true;
    }
  }
}

void JobDriver::serve(Driven& w) {
  const auto* open = w.current();
  if (open == nullptr || open->released_ms) {
    move(w, std::nullopt, domain::change_to(Phase::pending, "no slice for the attempt; requesting one"));
    return;
  }
  if (w.seen.valid && verdict_of(w.seen.view) != SliceVerdict::active) {
    wake_task_of(w);
    preempted(w, SliceRef::of(*open).label() + " is " + w.seen.state + slice_error(w), 143);
    return;
  }
  if (!w.seen.valid) {
    return; // The next listing says whether the slice is still up.
  }
  if (task_of(w)) {
    w.idle_since_ms = 0;
    return;
  }
  const auto offer = offer_of(w, open->zone, open->placement());
  if (const auto task = host_.claim(w, offer)) {
    w.idle_since_ms = 0;
    spdlog::info("{}: took task {}", worker_label(w.job.id), domain::format_job_id(*task));
    return;
  }
  const auto idle_release = w.config->tpu.idle_release_seconds;
  if (!idle_release) {
    return;
  }
  const auto now = host_.now_ms();
  if (w.idle_since_ms == 0) {
    w.idle_since_ms = now;
  } else if (now - w.idle_since_ms >= host_.scaled(static_cast<double>(*idle_release)).count()) {
    w.idle_since_ms = 0;
    const std::string why = std::string(kIdleReleaseReason) + "no task for " + util::format_duration(*idle_release) +
                            ", releasing " + SliceRef::of(*open).label() + "; a task queued for it brings a new slice";
    end_open_attempt(w, AttemptOutcome::idle, std::nullopt); // Reloads the attempts: `open` is no more.
    move(w, std::nullopt, domain::change_to(Phase::pending, why));
  }
}

bool JobDriver::parked(Driven& w) {
  if (w.job.kind != domain::JobKind::worker || !w.config->tpu.idle_release_seconds || w.attempts.empty()) {
    return false;
  }
  const auto& last = w.attempts.back();
  if (!last.ended_ms || last.outcome != AttemptOutcome::idle) {
    return false;
  }
  if (w.open_slice() != nullptr) {
    const auto id = w.job.id;
    release(w, [this, id] {
      if (Driven* live = host_.find(id)) {
        live->dirty = true;
      }
    });
    return true;
  }
  const auto task = store().queue().first_for(offer_of(w, w.job.zone, {}));
  if (!task) {
    return true;
  }
  if (!w.job.phase_reason.starts_with(kShareWaitReason)) { // Said once, not at every look while the share waits.
    event(w, "action", "task " + domain::format_job_id(*task) + " is queued for it: requesting a slice again");
  }
  return false;
}

bool JobDriver::task_lost_worker(Driven& t) {
  const auto* attempt = t.current();
  Driven* w = t.job.worker_id ? host_.find(*t.job.worker_id) : nullptr;
  if (w != nullptr && attempt != nullptr && lends_slice(*w, attempt)) {
    return false;
  }
  std::string why;
  bool slice_up = true; // Whether the workload may still run there and must be stopped first.
  if (attempt == nullptr || !t.job.worker_id) {
    why = "no worker's slice for the attempt";
    slice_up = false;
  } else if (w == nullptr) {
    why = worker_label(*t.job.worker_id) + " is no longer driven here";
  } else if (w->job.desired == DesiredState::stop) {
    why = worker_label(w->job.id) + " is stopping";
  } else if (w->job.desired == DesiredState::remove || w->job.desired == DesiredState::clean) {
    why = worker_label(w->job.id) + " is being deleted";
  } else if (w->job.phase == Phase::setup) {
    why = worker_label(w->job.id) + " is being set up again";
  } else {
    const auto* slice = w->open_slice();
    slice_up = slice != nullptr && slice->slice_name() == attempt->slice_name() &&
               (!w->seen.valid || verdict_of(w->seen.view) == SliceVerdict::active);
    why = worker_label(w->job.id) + (slice_up ? " no longer lends its slice" : " lost its slice");
  }
  const auto id = t.job.id;
  const bool may_run = slice_up && attempt != nullptr && !attempt->ended_ms &&
                       (t.job.phase == Phase::running || t.job.phase == Phase::setup);
  if (may_run) {
    // Back to the head of the queue either way: the task did nothing wrong.
    stop_workload(t, [this, id, why](std::optional<int> code) {
      if (Driven* live = host_.find(id)) {
        requeue_task(*live, AttemptOutcome::interrupted, code, domain::change_to(Phase::pending, why), true);
      }
    });
  } else {
    stop_stream(t);
    requeue_task(t, slice_up ? AttemptOutcome::interrupted : AttemptOutcome::preempted, std::nullopt,
                 domain::change_to(Phase::pending, why), true);
  }
  return true;
}

void JobDriver::requeue_task(Driven& t, AttemptOutcome outcome, std::optional<int> exit_code, domain::PhaseChange c,
                             bool head) {
  stop_stream(t);
  end_open_attempt(t, outcome, exit_code);
  t.unreachable = 0;
  c.to = Phase::pending;
  c.reason += head ? "; back to the head of the queue" : "; queued again";
  c.release_worker = true;
  c.to_queue_head = head;
  if (head) {
    c.add_preemptions = 1; // Counted, never spent: a task is not to blame for its worker.
  }
  const auto worker = t.job.worker_id;
  move(t, std::nullopt, c);
  wake(worker, head);
  host_.drop_later(t.job.id); // Queued: no supervisor drives it until a worker claims it.
}

void JobDriver::wake(std::optional<std::int64_t> worker, bool doubt_slice) {
  if (!worker) {
    return;
  }
  if (Driven* w = host_.find(*worker)) {
    w->dirty = true;
    if (doubt_slice && w->job.phase == Phase::running && w->job.desired == DesiredState::run) {
      // The task may have ended because the slice is going (a preemption's SIGTERM): take the next one only after
      // the next listing says it is still ACTIVE.
      w->seen.valid = false;
    }
  }
}

void JobDriver::finish_task(Driven& t, const domain::PhaseChange& c) {
  const auto worker = t.job.worker_id;
  domain::PhaseChange with_release = c;
  with_release.release_worker = true;
  move(t, std::nullopt, with_release);
  wake(worker, false);
}

bool JobDriver::worker_waits_for_task(Driven& w) {
  if (!task_of(w)) {
    return false;
  }
  wake_task_of(w);
  return true;
}

} // namespace jobman::core::supervision
