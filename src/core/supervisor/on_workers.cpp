// The job driver on the workers: SETUP sets every host up and launches the command; RUNNING streams the output
// home, asks the workers how the workload stands when the stream ends, and judges the attempt.
#include "job_driver.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/remote/setup.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "observe.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <spdlog/spdlog.h>
#include <thread>

namespace jobman::core::supervision {

namespace fs = std::filesystem;
using domain::AttemptOutcome;
using domain::DesiredState;
using domain::Phase;
using std::chrono::milliseconds;

namespace {

// The last line of `text` that is not blank, trimmed.
std::string last_line(std::string_view text) {
  std::string last;
  for (const auto& line : util::split(text, '\n')) {
    if (!util::trim(line).empty()) {
      last = util::trim(line);
    }
  }
  return last;
}

} // namespace

remote::LaunchSpec JobDriver::launch_spec(const Driven& d, const domain::AttemptRecord& slice) {
  remote::LaunchSpec spec;
  spec.id = workload_id(d.job.id, d.job.attempt);
  spec.command = remote::environment_command(*d.config, d.config->command.cmd);
  spec.num_workers = std::max(1, slice.hosts);
  spec.num_slices = slice.node_only() ? 1 : std::max(1, d.config->tpu.slices);
  spec.coordinator = d.job.host0_ip; // Slice 0's worker 0.
  spec.tpu_name = slice.node;
  spec.zone = slice.zone;
  spec.accelerator = slice.accelerator;
  spec.docker = d.config->job.env_type == config::EnvType::docker;
  if (d.job.kind == domain::JobKind::task) {
    spec.extra_env["JOBMAN_TASK_ID"] = domain::format_job_id(d.job.id);
  }
  // After a rollback (recovery.loss_spike), until the run passes the spike: resume from a checkpoint before it, and
  // skip the data of loss_spike.skip_steps steps.
  if (const auto before = resume_before_step(d.attempts)) {
    spec.extra_env["JOBMAN_RESUME_BEFORE_STEP"] = std::to_string(*before);
    if (d.config->recovery.loss_spike && d.config->recovery.loss_spike->skip_steps > 0) {
      spec.extra_env["JOBMAN_SKIP_STEPS"] = std::to_string(d.config->recovery.loss_spike->skip_steps);
    }
  }
  return spec;
}

// Whether the open slice is still ACTIVE, asked by name (after a worker could not be reached).
bool JobDriver::slice_active(SliceOps& slices, Counters& counters, const domain::AttemptRecord& open, int slice_count) {
  if (!open.node_only()) {
    ++counters.get_calls;
    if (verdict_of(SliceRef::of(open).get(slices)) != SliceVerdict::active) {
      return false;
    }
  }
  // Every slice's node, for a multislice job.
  for (const auto& id : slice_node_ids(open.node, open.node_only() ? 1 : slice_count)) {
    ++counters.get_calls;
    const auto node = slices.get_node(open.zone, id);
    if (!node || node->state != cloud::NodeState::ready) {
      return false;
    }
  }
  return true;
}

void JobDriver::set_up(Driven& d) {
  const auto kind = d.job.kind;
  if (kind == domain::JobKind::task && task_lost_worker(d)) {
    return;
  }
  if (kind == domain::JobKind::worker && worker_waits_for_task(d)) {
    return; // Set up again (a reboot) only once its task has let go of the slice.
  }
  const auto* open = d.current();
  if (open == nullptr || open->released_ms) {
    move(d, std::nullopt, domain::change_to(Phase::pending, "no slice for the attempt; requesting one"));
    return;
  }
  if (d.seen.valid && verdict_of(d.seen.view) != SliceVerdict::active) {
    preempted(d, SliceRef::of(*open).label() + " is " + d.seen.state + " during setup", 143);
    return;
  }
  const auto id = d.job.id;
  const auto config = d.config;
  // A task sets up only what its own config asks for: its worker set the slice up, and lends it its environment.
  const auto setup_config = d.own_config ? d.own_config : d.config;
  const auto target = slice_target(*access_, *config, *open);
  const auto hosts = all_workers(open->hosts);
  const auto workers = command_workers(*config, open->hosts);
  const auto dir = attempt_directory(id, d.job.attempt);
  const auto spec = launch_spec(d, *open);
  const auto slice = *open;
  // The preflight is the slice's: a job's or a worker's, run by whoever holds the slice; a task's worker ran it.
  const std::string preflight = kind == domain::JobKind::task || config->tpu.preflight.empty()
                                    ? std::string()
                                    : remote::environment_command(*config, config->tpu.preflight);
  const int attempt = d.job.attempt;
  host_.dispatch(
      d,
      [this, slices = slices_, ops = workers_, counters = counters_, id, config, setup_config, target, hosts, workers,
       dir, spec, slice, kind, preflight, attempt]() -> std::function<void()> {
        util::ensure_directory(dir, 0700);
        const auto plan = remote::plan_setup(*setup_config);
        std::vector<remote::WorkerSetup> results;
        if (kind != domain::JobKind::task || !plan.modules.empty()) {
          results = ops->set_up(target, hosts, plan, dir, kSetupTimeout);
        }
        std::string failure;
        bool lost_host = false;
        for (const auto& r : results) {
          if (!r.ok()) {
            if (failure.empty()) {
              failure = "setup failed on worker " + std::to_string(r.worker) + ": " + r.error + " (see " +
                        (dir / ("setup-" + std::to_string(r.worker) + ".log")).string() + ")";
            }
            // A module that failed is the config's problem; anything else (gcloud could not connect or the
            // API failed it) is the connection's, and is retried before it counts.
            const bool module_failed = !r.modules.empty() && r.modules.back().outcome == remote::ModuleOutcome::failed;
            lost_host = lost_host || r.exit_code == 255 || r.timed_out || !module_failed;
          }
        }
        std::optional<HardwareFinding> bad;
        if (failure.empty() && !preflight.empty()) {
          for (const auto& run : ops->run(target, hosts, preflight, kPreflightTimeout)) {
            util::write_file_atomic(dir / ("preflight-" + std::to_string(run.worker) + ".log"), run.output, 0600);
            if (run.exit_code == 255 || run.timed_out) {
              if (failure.empty()) {
                failure = "preflight could not run on worker " + std::to_string(run.worker) + ": " +
                          (run.timed_out ? std::string("timed out") : std::string(util::trim(run.output)));
              }
              lost_host = true;
            } else if (run.exit_code != 0 && !bad) {
              bad = HardwareFinding{attempt, run.worker, "preflight",
                                    "exit " + std::to_string(run.exit_code) + ": " + last_line(run.output)};
            }
          }
        }
        std::vector<remote::WorkerStatus> launched;
        if (failure.empty() && !bad && kind != domain::JobKind::worker) { // A worker's work is its tasks.
          launched = ops->launch(target, workers, spec, kRemoteTimeout);
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
          slice_gone = !slice_active(*slices, *counters, slice, config->tpu.slices);
        }
        return [this, id, failure, lost_host, slice_gone, launched, hosts, bad] {
          Driven* live = host_.find(id);
          if (live == nullptr) {
            return;
          }
          if (live->job.desired != DesiredState::run) {
            return; // Cancel, delete or clean arrived meanwhile; the next step carries it out.
          }
          if (bad && failure.empty()) {
            replace_bad_slice(*live, *bad); // Nothing was launched on it.
            return;
          }
          if (failure.empty()) {
            live->retry_step = 0;
            if (live->job.kind == domain::JobKind::worker) {
              move(*live, Phase::setup,
                   domain::change_to(Phase::running,
                                     "set up on " + std::to_string(hosts.size()) + " host(s); taking tasks"));
              return;
            }
            // The stall watchdog counts from the launch.
            live->quiet_attempt = live->job.attempt;
            live->quiet_since_ms = host_.now_ms();
            live->heard_output = false;
            move(*live, Phase::setup,
                 domain::change_to(Phase::running, "launched attempt " + std::to_string(live->job.attempt) + " on " +
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
          if (live->job.kind == domain::JobKind::task) {
            // The task's own setup failed on its worker: spent like a failed run, the worker let go.
            if (c.to == Phase::setup) {
              requeue_task(*live, AttemptOutcome::failed, std::nullopt, c, false);
            } else {
              end_open_attempt(*live, AttemptOutcome::failed, std::nullopt);
              finish_task(*live, c);
            }
            return;
          }
          move(*live, Phase::setup, c);
          if (c.to == Phase::setup) {
            backoff(*live);
          } else {
            end_open_attempt(*live, AttemptOutcome::failed, std::nullopt);
          }
        };
      });
}

void JobDriver::start_stream(Driven& d) {
  auto stream = std::make_shared<Stream>();
  stream->attempt = d.job.attempt;
  d.stream = stream;
  const auto id = d.job.id;
  const auto target = slice_target(*access_, *d.config, *d.current());
  const auto workers = command_workers(*d.config, d.current()->hosts);
  const auto wid = workload_id(id, d.job.attempt);
  const auto dir = attempt_directory(id, d.job.attempt);
  util::ensure_directory(dir, 0700);
  const auto patterns = hardware_patterns(*d.config);
  auto progress = progress_pattern(*d.config);
  const auto tracker = progress ? progress_tracker(d) : nullptr;
  if (!tracker) {
    progress.reset();
  }
  const auto losses = loss_pattern(*d.config);
  if (losses && progress && !d.loss) {
    // A non-finite loss is a spike, not bad hardware, where the slice passed its hardware check (tpu.preflight).
    d.loss = std::make_shared<LossTracker>(LossWatch(*d.config->recovery.loss_spike, !d.config->tpu.preflight.empty()));
  }
  const auto loss = losses && progress ? d.loss : nullptr;
  const auto output_chunks = d.output_chunks;
  host_.watch_in_background(id,
                            [this, ops = workers_, stream, id, target, workers, wid, dir, patterns, progress, tracker,
                             losses, loss, output_chunks]() -> std::function<void()> {
                              // The first sign of bad hardware is news at once, not when the stream ends.
                              auto report = [this, stream, id](const HardwareFinding& finding) {
                                if (!stream->bad_hardware.exchange(true)) {
                                  host_.post(id, [this, stream, id, finding] {
                                    if (Driven* live = host_.find(id); live != nullptr && live->stream == stream) {
                                      hardware_found(id, finding);
                                    }
                                  });
                                }
                              };
                              if (patterns) {
                                // What an earlier stream (of a supervisor that stopped) wrote before this one.
                                if (auto found = scan_logs(dir, workers, stream->attempt, *patterns)) {
                                  report(*found);
                                }
                              }
                              // A spike is news at once, as bad hardware is.
                              auto spiked = [this, stream, id](const LossSpike& spike) {
                                if (!stream->spiked.exchange(true)) {
                                  host_.post(id, [this, stream, id, spike] {
                                    if (Driven* live = host_.find(id); live != nullptr && live->stream == stream) {
                                      loss_spiked(*live, stream->attempt, spike);
                                    }
                                  });
                                }
                              };
                              // Progress and loss are read from the first worker that runs the command: the others
                              // repeat it. Every chunk counts as output for the stall watchdog.
                              const remote::LineSink sink = [chunks = output_chunks, patterns, report, progress,
                                                             tracker, losses, loss, spiked, attempt = stream->attempt,
                                                             reader = workers.empty() ? 0 : workers.front()](
                                                                int worker, std::string_view lines) {
                                chunks->fetch_add(1, std::memory_order_relaxed);
                                std::optional<LossSpike> spike;
                                if (loss && worker == reader) {
                                  spike = read_losses(*progress, *losses, *loss, lines);
                                  if (spike) {
                                    spiked(*spike);
                                  }
                                }
                                if (patterns && !(spike && !std::isfinite(spike->loss))) {
                                  if (auto line = patterns->first_match(lines)) {
                                    report(HardwareFinding{attempt, worker, "output", std::string(util::trim(*line))});
                                  }
                                }
                                if (progress && worker == reader) {
                                  read_progress(*progress, *tracker, lines);
                                }
                              };
                              std::vector<remote::StreamEnd> ends;
                              std::string error;
                              try {
                                ends = ops->stream(target, workers, wid, dir, stream->stop.get_token(), sink);
                              } catch (const std::exception& e) {
                                error = e.what();
                              }
                              if (stream->stop.stop_requested()) {
                                return {}; // Whoever stopped it no longer cares; `this` may be gone.
                              }
                              return [this, stream, ends = std::move(ends), error, id] {
                                Driven* live = host_.find(id);
                                if (live == nullptr || live->stream != stream) {
                                  return;
                                }
                                stream->ended = true;
                                stream->ends = ends;
                                stream->error = error;
                              };
                            });
  ++counters_->streams;
}

void JobDriver::stop_stream(Driven& d) {
  if (d.stream) {
    d.stream->stop.request_stop();
    d.stream.reset();
    --counters_->streams;
  }
}

void JobDriver::watch(Driven& d) {
  if (d.job.kind == domain::JobKind::task && task_lost_worker(d)) {
    return;
  }
  const auto* open = d.current();
  if (open == nullptr || open->released_ms) {
    move(d, std::nullopt, domain::change_to(Phase::pending, "no slice for the attempt; requesting one"));
    return;
  }
  if (d.seen.valid && verdict_of(d.seen.view) != SliceVerdict::active) {
    stop_stream(d);
    preempted(d, SliceRef::of(*open).label() + " is " + d.seen.state + slice_error(d), 143);
    return;
  }
  if (d.node_health && act_on_health(d)) {
    return;
  }
  if (!d.stream) {
    start_stream(d);
    return;
  }
  if (!d.stream->ended) {
    if (d.job.kind != domain::JobKind::task && run_ending(d, host_)) {
      stop_before_run_ends(d);
    } else if (stall_due(d, host_)) {
      stalled(d);
    }
    return;
  }
  inspect(d);
}

void JobDriver::stop_before_run_ends(Driven& d) {
  const auto id = d.job.id;
  const std::string what = SliceRef::of(*d.current()).label() + "'s run duration ends at " +
                           util::format_utc(*d.run_ends_ms) + "; the workload was stopped ahead of it to checkpoint";
  event(d, "action",
        "stopping the workload: " + SliceRef::of(*d.current()).label() + "'s run ends at " +
            util::format_utc(*d.run_ends_ms),
        {{"termination_time", util::format_utc(*d.run_ends_ms)}, {"attempt", d.job.attempt}});
  stop_workload(d, [this, id, what](const std::vector<remote::WorkerStatus>& statuses) {
    Driven* live = host_.find(id);
    if (live == nullptr || live->job.phase != Phase::running) {
      return;
    }
    // A workload that ended on its own just before the stop (its last step done, or failed) is judged by its
    // exit, as if the stream had seen it end: the deadline did not stop it.
    const bool on_its_own = !statuses.empty() && std::none_of(statuses.begin(), statuses.end(), [](const auto& s) {
      return s.signalled || s.state != remote::WorkloadState::exited;
    });
    if (on_its_own) {
      const auto verdict = judge_workers(statuses, live->config->recovery);
      if (verdict.says != WorkersSay::running && verdict.says != WorkersSay::unreachable) {
        attempt_judged(id, verdict, false, false);
        return;
      }
    }
    run_ended(*live, what, lead_exit_code(statuses));
  });
}

void JobDriver::run_ended(Driven& d, const std::string& what, std::optional<int> exit_code) {
  stop_stream(d);
  int runs = 1;
  for (const auto& attempt : d.attempts) {
    runs += attempt.outcome == AttemptOutcome::run_ended ? 1 : 0;
  }
  end_open_attempt(d, AttemptOutcome::run_ended, exit_code);
  d.unreachable = 0;
  move(d, std::nullopt, after_run_end(*d.config, runs, what));
}

// The stream ended: ask the workers how the workload stands, and end the attempt when it is decided.
void JobDriver::inspect(Driven& d) {
  const auto id = d.job.id;
  const auto config = d.config;
  const auto target = slice_target(*access_, *config, *d.current());
  const auto workers = command_workers(*config, d.current()->hosts);
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
  const auto patterns = hardware_patterns(*config);
  const int attempt = d.job.attempt;
  const auto probe = transfer_probe(d);
  host_.dispatch(
      d,
      [this, slices = slices_, ops = workers_, counters = counters_, id, config, target, workers, wid, slice,
       stream_failed, behind, dir, patterns, attempt, probe]() -> std::function<void()> {
        const auto statuses = ops->query(target, workers, wid, kRemoteTimeout);
        auto verdict = judge_workers(statuses, config->recovery);
        bool slice_gone = false;
        if (verdict.says == WorkersSay::unreachable) {
          slice_gone = !slice_active(*slices, *counters, slice, config->tpu.slices);
        }
        const bool decided = verdict.says != WorkersSay::running && verdict.says != WorkersSay::unreachable;
        // A decided attempt ends on every worker.
        if (decided && std::any_of(statuses.begin(), statuses.end(),
                                   [](const auto& s) { return s.state == remote::WorkloadState::running; })) {
          ops->stop(target, workers, wid, kStopGrace, kRemoteTimeout);
        }
        if (decided && !behind.empty()) {
          catch_up(*ops, id, target, behind, wid, dir);
        }
        // What the attempt read from its bucket, while its workers are there to say.
        std::optional<store::BucketTransfer> moved;
        if (decided && verdict.says != WorkersSay::preempted) {
          moved = read_transfers(*ops, target, workers, probe);
        }
        // An attempt that ended badly may have ended so because of its hardware: the logs, whole now, say.
        std::optional<HardwareFinding> bad;
        if (decided && verdict.says != WorkersSay::succeeded && patterns) {
          bad = scan_logs(dir, workers, attempt, *patterns);
        }
        return [this, id, verdict, slice_gone, stream_failed, bad, moved] {
          record_transfers(moved);
          if (bad) {
            Driven* live = host_.find(id);
            if (live != nullptr && live->job.desired == DesiredState::run && live->job.phase == Phase::running) {
              stop_stream(*live);
              replace_bad_slice(*live, *bad);
            }
            return;
          }
          attempt_judged(id, verdict, slice_gone, stream_failed);
        };
      });
}

// Fetches the rest of the output of workers whose stream broke off, once their workload has ended, so that the
// local logs hold everything before the attempt is recorded as over. A fetch that breaks off too (the connection
// is as unreliable as it was) is tried again; bounded in time, after which a worker that cannot be reached leaves
// its log as it is, with a warning.
void JobDriver::catch_up(WorkerOps& ops, std::int64_t id, const remote::SliceTarget& target, std::vector<int> workers,
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
      for (const auto& end : ops.stream(target, workers, wid, dir, give_up.get_token(), {})) {
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

void JobDriver::attempt_judged(std::int64_t id, const AttemptVerdict& verdict, bool slice_gone, bool stream_failed) {
  Driven* d = host_.find(id);
  if (d == nullptr || d->job.desired != DesiredState::run || d->job.phase != Phase::running) {
    return;
  }
  stop_stream(*d);
  switch (verdict.says) {
  case WorkersSay::running:
    d->unreachable = 0;
    if (stream_failed) {
      backoff(*d); // Watching failed (say, another process holds the log): not in a tight loop.
    }
    return; // The next step re-attaches.
  case WorkersSay::unreachable:
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
  case WorkersSay::succeeded: {
    d->unreachable = 0;
    end_open_attempt(*d, AttemptOutcome::succeeded, verdict.exit_code);
    domain::PhaseChange c = domain::change_to(Phase::succeeded, verdict.reason);
    c.exit_code = verdict.exit_code;
    if (d->job.kind == domain::JobKind::task) {
      finish_task(*d, c); // The slice is the worker's, kept for the next task.
      return;
    }
    c.cleanup_pending = !d->config->tpu.keep_on_success;
    if (d->config->tpu.keep_on_success) {
      c.reason += "; the slice is kept (tpu.keep_on_success)";
    }
    move(*d, Phase::running, c);
    return;
  }
  case WorkersSay::preempted: preempted(*d, verdict.reason, verdict.exit_code); return;
  case WorkersSay::restart:
    end_open_attempt(*d, AttemptOutcome::restart, verdict.exit_code);
    next_attempt_on_same_slice(*d, domain::change_to(Phase::setup, verdict.reason + "; restarting on the same slice"));
    return;
  case WorkersSay::failed: {
    end_open_attempt(*d, AttemptOutcome::failed, verdict.exit_code);
    auto c = after_failure(*d->config, d->job.failures, verdict.reason);
    c.exit_code = verdict.exit_code;
    if (d->job.kind == domain::JobKind::task) {
      // Retried from the queue, as jobman-lite retries a failed task, on whichever worker is free first.
      if (c.to == Phase::setup) {
        requeue_task(*d, AttemptOutcome::failed, verdict.exit_code, c, false);
      } else {
        finish_task(*d, c);
      }
      return;
    }
    if (c.to == Phase::setup) {
      next_attempt_on_same_slice(*d, c);
    } else {
      move(*d, Phase::running, c);
    }
    return;
  }
  }
}

void JobDriver::next_attempt_on_same_slice(Driven& d, const domain::PhaseChange& c) {
  const auto slice = *d.current();
  store().attempts().begin(d.job.id, slice.placement());
  reload(d);
  move(d, std::nullopt, c);
}

void JobDriver::preempted(Driven& d, const std::string& what, int exit_code) {
  if (d.job.kind == domain::JobKind::task) {
    // The worker recovers its slice; the task runs again on the next free worker that matches.
    requeue_task(d, AttemptOutcome::preempted, exit_code, domain::change_to(Phase::pending, what), true);
    return;
  }
  if (run_ending(d, host_)) {
    run_ended(d, what + ", its run duration having run out", exit_code);
    return;
  }
  stop_stream(d);
  stop_survivors(d);
  end_open_attempt(d, AttemptOutcome::preempted, exit_code);
  d.unreachable = 0;
  move(d, std::nullopt, after_preemption(*d.config, d.job.preemptions, what));
}

// A multislice job lost one of its slices: the workload still running on the others is stopped (SIGTERM, so that it
// saves a checkpoint), on the side, while the job goes on to recover; the hosts that are gone do not answer, and
// nothing waits for them. A single slice lost has no host left to stop.
void JobDriver::stop_survivors(Driven& d) {
  const auto* current = d.current();
  if (current == nullptr || current->node_only() || d.config->tpu.slices <= 1 ||
      (d.job.phase != Phase::running && d.job.phase != Phase::setup)) {
    return;
  }
  const auto id = d.job.id;
  const auto target = slice_target(*access_, *d.config, *current);
  const auto workers = command_workers(*d.config, current->hosts);
  const auto wid = workload_id(id, d.job.attempt);
  const auto dir = attempt_directory(id, d.job.attempt);
  host_.dispatch_detached([ops = workers_, id, target, workers, wid, dir] {
    ops->stop(target, workers, wid, kStopGrace, kRemoteTimeout);
    // What the survivors wrote on SIGTERM (the step they stopped at, the checkpoint they saved) comes home too.
    if (std::filesystem::exists(dir)) {
      catch_up(*ops, id, target, workers, wid, dir);
    }
  });
}

} // namespace jobman::core::supervision
