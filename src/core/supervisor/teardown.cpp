// The job driver taking things down: cancel stops the workload and keeps the slice; delete and clean stop it and
// delete the slice; release deletes a finished job's slice and confirms it gone.
#include "job_driver.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"

#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

using domain::AttemptOutcome;
using domain::DesiredState;
using domain::Phase;

// Whether the current attempt's workload may be running and should be stopped.
bool JobDriver::workload_may_run(const Driven& d) const {
  if (d.job.kind == domain::JobKind::worker) {
    return false; // A worker runs nothing of its own; its tasks are stopped by their drivers.
  }
  const auto* current = d.current();
  return current != nullptr && !current->ended_ms && !current->released_ms &&
         (d.job.phase == Phase::running || d.job.phase == Phase::setup) &&
         (!d.seen.valid || verdict_of(d.seen.view) == SliceVerdict::active);
}

std::optional<int> lead_exit_code(const std::vector<remote::WorkerStatus>& statuses) {
  for (const auto& s : statuses) {
    if (s.worker == 0 && s.state == remote::WorkloadState::exited) {
      return s.exit_code;
    }
  }
  return std::nullopt;
}

// Stops the workload on every worker, then runs `then` on the loop's thread.
void JobDriver::stop_workload(Driven& d, std::function<void(std::optional<int>)> then) {
  stop_workload(d, [then = std::move(then)](const std::vector<remote::WorkerStatus>& statuses) {
    then(lead_exit_code(statuses));
  });
}

void JobDriver::stop_workload(Driven& d, std::function<void(const std::vector<remote::WorkerStatus>&)> then) {
  stop_stream(d);
  const auto id = d.job.id;
  const auto target = slice_target(*access_, *d.config, *d.current());
  const auto workers = command_workers(*d.config, d.current()->hosts);
  const auto wid = workload_id(id, d.job.attempt);
  const auto dir = attempt_directory(id, d.job.attempt);
  const auto probe = transfer_probe(d);
  host_.dispatch(
      d,
      [this, ops = workers_, id, target, workers, wid, dir, probe, then = std::move(then)]() -> std::function<void()> {
        auto statuses = ops->stop(target, workers, wid, kStopGrace, kRemoteTimeout);
        // What the workload wrote after its stream stopped (its last lines on SIGTERM, the checkpoint it saved) comes
        // home too, once it has ended; and what it read from its bucket.
        if (std::filesystem::exists(dir)) {
          catch_up(*ops, id, target, workers, wid, dir);
        }
        auto moved = read_transfers(*ops, target, workers, probe);
        return [this, then, statuses = std::move(statuses), moved = std::move(moved)] {
          record_transfers(moved);
          then(statuses);
        };
      });
}

void JobDriver::cancel(Driven& d) {
  if (d.job.kind == domain::JobKind::worker && worker_waits_for_task(d)) {
    return;
  }
  const auto id = d.job.id;
  if (workload_may_run(d)) {
    stop_workload(d, [this, id](std::optional<int> code) {
      if (Driven* live = host_.find(id)) {
        end_open_attempt(*live, AttemptOutcome::cancelled, code);
        finish_cancel(*live);
      }
    });
    return;
  }
  stop_stream(d);
  if (!let_rivals_go(d)) {
    return; // A cancelled job keeps its own slice, never a rival.
  }
  end_open_attempt(d, AttemptOutcome::cancelled, std::nullopt);
  finish_cancel(d);
}

void JobDriver::finish_cancel(Driven& d) {
  if (d.job.desired != DesiredState::stop || domain::is_terminal(d.job.phase)) {
    return;
  }
  if (d.job.kind == domain::JobKind::task) {
    finish_task(d, domain::change_to(Phase::cancelled, "paused by the user"));
    return;
  }
  const auto* open = d.open_slice();
  move(d, std::nullopt,
       domain::change_to(Phase::cancelled, open != nullptr
                                               ? "cancelled by the user; slice " + open->slice_name() + " kept"
                                               : "cancelled by the user"));
}

// Deletes the open slice (if any), then runs `done` once none is left.
void JobDriver::release(Driven& d, const std::function<void()>& done) {
  if (!let_rivals_go(d)) {
    return; // The job's next steps come back here until the listings show every rival gone.
  }
  const auto* open = d.open_slice();
  if (open == nullptr) {
    done();
    return;
  }
  if (d.seen.valid && !d.seen.view && (d.seen.once || d.seen.delete_sent_ms > 0)) {
    store().attempts().mark_released(d.job.id, open->slice_name(),
                                     d.seen.delete_sent_ms > 0 ? "deleted" : "gone from the cloud");
    reload(d);
    d.seen.valid = false;
    d.seen.once = false;
    d.seen.delete_sent_ms = 0;
    release(d, done);
    return;
  }
  const bool deleting = d.seen.valid && d.seen.view && d.seen.view->verdict == SliceVerdict::deleting;
  const bool resend = d.seen.delete_sent_ms > 0 && host_.now_ms() - d.seen.delete_sent_ms > host_.scaled(600).count();
  if (d.seen.delete_sent_ms == 0 || (resend && !deleting)) {
    delete_slice(d, *open);
  } else if (d.seen.valid && !d.seen.view && !d.seen.once) {
    confirm_absent(d, *open);
  }
  // Otherwise the listings will show it gone.
}

void JobDriver::delete_slice(Driven& d, const domain::AttemptRecord& open) {
  const auto id = d.job.id;
  host_.dispatch(
      d, [this, slices = slices_, counters = counters_, id, slice = SliceRef::of(open)]() -> std::function<void()> {
        std::optional<cloud::Operation> op;
        try {
          ++counters->mutations;
          op = slice.remove(*slices);
        } catch (const std::exception& e) {
          return failed_operation(id, "deleting " + slice.name + ": " + e.what());
        }
        const bool already_gone = !op.has_value();
        return [this, id, slice, already_gone] {
          Driven* live = host_.find(id);
          if (live == nullptr) {
            return;
          }
          live->retry_step = 0;
          if (already_gone) {
            store().attempts().mark_released(id, slice.name, "already gone");
            reload(*live);
            live->seen.valid = false;
            live->seen.once = false;
            live->seen.delete_sent_ms = 0;
            return;
          }
          live->seen.delete_sent_ms = host_.now_ms();
          live->seen.valid = false;
          event(*live, "action", "deleting " + slice.label(),
                {{slice.node_only ? "node" : "queued_resource", slice.name}});
        };
      });
}

void JobDriver::tear_down(Driven& d) {
  if (d.job.kind == domain::JobKind::worker && worker_waits_for_task(d)) {
    return; // Its task goes back to the queue first.
  }
  const auto id = d.job.id;
  if (workload_may_run(d)) {
    stop_workload(d, [this, id](std::optional<int> code) {
      if (Driven* live = host_.find(id)) {
        end_open_attempt(*live, AttemptOutcome::cancelled, code);
      }
    });
    return;
  }
  stop_stream(d);
  end_open_attempt(d, AttemptOutcome::cancelled, std::nullopt);
  release(d, [this, &d] {
    if (d.job.phase != Phase::deleted || d.job.cleanup_pending) {
      domain::PhaseChange c =
          domain::change_to(Phase::deleted, d.job.kind == domain::JobKind::task ? "deleted by the user"
                                                                                : "deleted by the user; no slice left");
      c.cleanup_pending = false;
      if (d.job.kind == domain::JobKind::task) {
        finish_task(d, c);
      } else {
        move(d, std::nullopt, c);
      }
    }
    if (d.job.desired == DesiredState::clean) {
      remove_job_directory(d.job.id);
      store().jobs().remove_if_present(d.job.id); // The clean command may have removed it meanwhile.
      spdlog::info("{}: cleaned: its record and directory are removed", job_label(d.job.id));
      host_.forget_lease(d.job.id);
      d.lost = true; // Its lease went with the record.
    }
    host_.drop_later(d.job.id);
  });
}

} // namespace jobman::core::supervision
