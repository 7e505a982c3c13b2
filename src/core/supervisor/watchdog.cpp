// The job driver and a run that hangs or diverges. An attempt silent past recovery.stall_timeout has what its
// workers' processes were doing kept beside its logs (stacks-W.txt), is stopped and judged `stalled`: a failure,
// restarted on the same slice, and a slice whose attempts stall twice in a row is replaced as bad hardware. An
// attempt whose loss spiked (recovery.loss_spike) is stopped and `rolled-back`: the next attempt, on the same slice,
// resumes from a checkpoint before the spike, spending the rollback budget only.
#include "job_driver.hpp"
#include "jobman/core/job_logs.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <cmath>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

using domain::AttemptOutcome;
using domain::DesiredState;
using domain::Phase;
using nlohmann::json;

void JobDriver::stalled(Driven& d) {
  const auto id = d.job.id;
  const auto silent_ms = host_.now_ms() - d.quiet_since_ms;
  std::string what = "stalled: no worker printed a line for " + util::format_duration(silent_ms / 1000);
  what += d.heard_output ? " (the last came at " + util::format_utc(d.quiet_since_ms) + ")"
                         : " since the workload started (it printed nothing)";
  event(d, "action", "stopping the workload: " + what + "; keeping what its processes were doing",
        {{"attempt", d.job.attempt},
         {"silent_seconds", silent_ms / 1000},
         {"last_output", d.heard_output ? json(util::format_utc(d.quiet_since_ms)) : json(nullptr)}});
  stop_stream(d);
  const auto target = slice_target(*access_, *d.config, *d.current());
  const auto workers = command_workers(*d.config, d.current()->hosts);
  const auto wid = workload_id(id, d.job.attempt);
  const auto dir = attempt_directory(id, d.job.attempt);
  const auto probe = transfer_probe(d);
  host_.dispatch(d, [this, ops = workers_, id, target, workers, wid, dir, what, probe]() -> std::function<void()> {
    // First what the processes are doing, while they still hang; then the stop.
    for (const auto& run : ops->stacks(target, workers, wid, kRemoteTimeout)) {
      std::string text = run.output;
      if (run.exit_code != 0) {
        text += "\n# jobman: reading the stacks ended with status " + std::to_string(run.exit_code) +
                (run.timed_out ? " (timed out)" : "") + "\n";
      }
      try {
        util::write_file_atomic(core::stacks_path(dir, run.worker), text, 0600);
      } catch (const std::exception& e) {
        spdlog::warn("{}: keeping worker {}'s stacks: {}", job_label(id), run.worker, e.what());
      }
    }
    const auto statuses = ops->stop(target, workers, wid, kStopGrace, kRemoteTimeout);
    if (std::filesystem::exists(dir)) {
      catch_up(*ops, id, target, workers, wid, dir);
    }
    auto moved = read_transfers(*ops, target, workers, probe);
    std::optional<int> code;
    for (const auto& s : statuses) {
      if (s.worker == workers.front() && s.state == remote::WorkloadState::exited) {
        code = s.exit_code;
      }
    }
    return [this, id, what, code, moved = std::move(moved)] {
      record_transfers(moved);
      Driven* live = host_.find(id);
      if (live != nullptr && live->job.desired == DesiredState::run && live->job.phase == Phase::running) {
        stall_judged(*live, what, code);
      }
    };
  });
}

void JobDriver::stall_judged(Driven& d, const std::string& what, std::optional<int> exit_code) {
  const auto* current = d.current();
  if (current == nullptr) {
    return;
  }
  // The attempt before this one, on the same slice, stalled too: the slice, not the program, is suspect.
  if (d.attempts.size() >= 2) {
    const auto& before = d.attempts[d.attempts.size() - 2];
    if (before.outcome == AttemptOutcome::stalled && before.slice_name() == current->slice_name()) {
      replace_bad_slice(d, HardwareFinding{current->number, command_workers(*d.config, current->hosts).front(), "stall",
                                           what + "; the attempt before it on this slice stalled too"});
      return;
    }
  }
  end_open_attempt(d, AttemptOutcome::stalled, exit_code);
  d.unreachable = 0;
  auto c = after_failure(*d.config, d.job.failures, what);
  c.exit_code = exit_code;
  if (c.to == Phase::setup) {
    next_attempt_on_same_slice(d, c);
  } else {
    move(d, Phase::running, c);
  }
}

void JobDriver::loss_spiked(Driven& d, int attempt, const LossSpike& spike) {
  if (d.job.attempt != attempt || d.job.phase != Phase::running || d.job.desired != DesiredState::run ||
      d.job.kind != domain::JobKind::job || !d.config->recovery.loss_spike) {
    return;
  }
  if (d.busy) {
    if (d.stream) {
      d.stream->spiked = false; // Acted on at the next spike, once the operation in flight is done.
    }
    return;
  }
  const auto id = d.job.id;
  const std::string what = "loss spike: " + spike.describe(d.config->recovery.loss_spike->factor);
  json data = {{"attempt", attempt}, {"step", spike.step}, {"window", spike.window}};
  data["loss"] = std::isfinite(spike.loss) ? json(spike.loss)
                                           : json(std::isnan(spike.loss) ? "nan"
                                                  : spike.loss > 0       ? "inf"
                                                                         : "-inf");
  if (spike.median) {
    data["median"] = *spike.median;
  }
  event(d, "action", "stopping the workload: " + what + "; rolling back to before step " + std::to_string(spike.step),
        data);
  const auto step = spike.step;
  stop_workload(d, [this, id, what, step](std::optional<int> code) {
    Driven* live = host_.find(id);
    if (live == nullptr || live->job.desired != DesiredState::run || live->job.phase != Phase::running) {
      return;
    }
    end_open_attempt(*live, AttemptOutcome::rolled_back, code, step);
    int spent = 0;
    for (const auto& a : live->attempts) {
      spent += a.outcome == AttemptOutcome::rolled_back ? 1 : 0;
    }
    auto c = after_rollback(*live->config, spent - 1, what);
    c.exit_code = code;
    if (c.to == Phase::setup) {
      next_attempt_on_same_slice(*live, c);
    } else {
      move(*live, Phase::running, c);
    }
  });
}

} // namespace jobman::core::supervision
