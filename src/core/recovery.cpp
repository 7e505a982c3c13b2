#include "jobman/core/recovery.hpp"

#include <algorithm>

namespace jobman::core {

using cloud::QueuedResourceState;
using domain::Phase;

SliceVerdict judge_slice(const std::optional<cloud::QueuedResource>& resource) {
  if (!resource) {
    return SliceVerdict::lost;
  }
  switch (resource->state) {
  case QueuedResourceState::state_unspecified:
  case QueuedResourceState::creating:
  case QueuedResourceState::accepted:
  case QueuedResourceState::waiting_for_resources: return SliceVerdict::waiting;
  case QueuedResourceState::provisioning: return SliceVerdict::provisioning;
  case QueuedResourceState::active: return SliceVerdict::active;
  case QueuedResourceState::deleting: return SliceVerdict::deleting;
  case QueuedResourceState::failed:
  case QueuedResourceState::suspending:
  case QueuedResourceState::suspended: return SliceVerdict::lost;
  }
  return SliceVerdict::lost;
}

SliceVerdict judge_node(const std::optional<cloud::Node>& node) {
  using cloud::NodeState;
  if (!node) {
    return SliceVerdict::lost;
  }
  switch (node->state) {
  case NodeState::state_unspecified:
  case NodeState::creating:
  case NodeState::restarting:
  case NodeState::reimaging:
  case NodeState::repairing:
  case NodeState::starting: return SliceVerdict::provisioning;
  case NodeState::ready: return SliceVerdict::active;
  case NodeState::deleting: return SliceVerdict::deleting;
  case NodeState::stopping:
  case NodeState::stopped:
  case NodeState::preempted:
  case NodeState::terminated:
  case NodeState::hiding:
  case NodeState::hidden:
  case NodeState::unhiding:
  case NodeState::unknown: return SliceVerdict::lost;
  }
  return SliceVerdict::lost;
}

SliceView view_slice(const cloud::QueuedResource& resource) {
  return {judge_slice(resource), cloud::to_string(resource.state),
          resource.failed_error ? resource.failed_error->message : std::string(), resource.termination_ms};
}

SliceView view_slice(const cloud::Node& node) {
  return {judge_node(node), cloud::to_string(node.state), {}, std::nullopt};
}

NodeTrouble judge_health(cloud::NodeHealth health) {
  switch (health) {
  case cloud::NodeHealth::timeout:
  case cloud::NodeHealth::unhealthy_tensorflow: return NodeTrouble::bad_hardware;
  case cloud::NodeHealth::unhealthy_maintenance: return NodeTrouble::maintenance;
  default: return NodeTrouble::none;
  }
}

bool maintenance_due(const cloud::UpcomingMaintenance& maintenance, std::int64_t now_ms, std::int64_t lead_ms) {
  if (maintenance.status == "ONGOING") {
    return true;
  }
  std::optional<std::int64_t> opens = maintenance.window_start_ms;
  if (maintenance.latest_window_start_ms && (!opens || *maintenance.latest_window_start_ms < *opens)) {
    opens = maintenance.latest_window_start_ms;
  }
  return opens && *opens - now_ms <= lead_ms;
}

SliceVerdict verdict_of(const std::optional<SliceView>& view) {
  return view ? view->verdict : SliceVerdict::lost;
}

std::optional<Phase> waiting_phase(SliceVerdict verdict) {
  switch (verdict) {
  case SliceVerdict::waiting: return Phase::queued;
  case SliceVerdict::provisioning: return Phase::provisioning;
  default: return std::nullopt;
  }
}

std::string to_string(WorkersSay says) {
  switch (says) {
  case WorkersSay::running: return "running";
  case WorkersSay::succeeded: return "succeeded";
  case WorkersSay::preempted: return "preempted";
  case WorkersSay::restart: return "restart";
  case WorkersSay::failed: return "failed";
  case WorkersSay::unreachable: return "unreachable";
  }
  return "?";
}

namespace {

AttemptVerdict exited(const remote::WorkerStatus& status, const config::RecoverySection& recovery) {
  AttemptVerdict verdict;
  verdict.worker = status.worker;
  verdict.exit_code = status.exit_code;
  verdict.reason = "worker " + std::to_string(status.worker) + " exited " + std::to_string(status.exit_code);
  if (status.exit_code == 0) {
    verdict.says = WorkersSay::succeeded;
  } else if (status.exit_code == 143) {
    verdict.says = WorkersSay::preempted;
    verdict.reason += " (SIGTERM)";
  } else if (std::find(recovery.restart_exit_codes.begin(), recovery.restart_exit_codes.end(), status.exit_code) !=
             recovery.restart_exit_codes.end()) {
    verdict.says = WorkersSay::restart;
    verdict.reason += " (a restart code)";
  } else {
    verdict.says = WorkersSay::failed;
  }
  return verdict;
}

} // namespace

AttemptVerdict judge_workers(const std::vector<remote::WorkerStatus>& statuses,
                             const config::RecoverySection& recovery) {
  using remote::WorkloadState;
  // Worker 0 first: its code is the job's.
  std::vector<const remote::WorkerStatus*> ordered;
  ordered.reserve(statuses.size());
  for (const auto& s : statuses) {
    ordered.push_back(&s);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto* a, const auto* b) { return (a->worker == 0) > (b->worker == 0); });
  for (const auto* s : ordered) {
    if (s->state == WorkloadState::exited && s->exit_code != 0) {
      return exited(*s, recovery);
    }
  }
  for (const auto* s : ordered) {
    if (s->state == WorkloadState::vanished || s->state == WorkloadState::absent) {
      AttemptVerdict verdict;
      verdict.says = WorkersSay::preempted;
      verdict.worker = s->worker;
      verdict.exit_code = 143;
      verdict.reason =
          "worker " + std::to_string(s->worker) + "'s workload " +
          (s->state == WorkloadState::vanished ? "vanished without an exit code" : "is gone with the worker's disk");
      return verdict;
    }
  }
  for (const auto* s : ordered) {
    if (s->state == WorkloadState::unreachable) {
      AttemptVerdict verdict;
      verdict.says = WorkersSay::unreachable;
      verdict.worker = s->worker;
      verdict.exit_code = s->exit_code < 0 ? 255 : s->exit_code;
      verdict.reason = "worker " + std::to_string(s->worker) + " cannot be reached";
      if (!s->diagnostic.empty()) {
        verdict.reason += ": " + s->diagnostic;
      }
      return verdict;
    }
  }
  // No worker failed. Success is decided once every worker has ended: worker 0 first out of the loop (its stream
  // ended) leaves the others, a step behind, to write their last lines; stopping them would cut those off.
  const bool all_exited =
      std::all_of(statuses.begin(), statuses.end(), [](const auto& s) { return s.state == WorkloadState::exited; });
  if (statuses.empty() || !all_exited) {
    return {};
  }
  // Worker 0's code is the job's; without worker 0 among the selected workers, the first one's.
  return exited(*ordered.front(), recovery);
}

domain::PhaseChange after_preemption(const config::JobConfig& config, int spent, const std::string& what) {
  domain::PhaseChange change;
  change.add_preemptions = 1;
  const int now_spent = spent + 1;
  if (!config.job.loop) {
    change.to = Phase::failed;
    change.reason = what + "; job.loop is false, so preemptions are not recovered";
    change.cleanup_pending = true;
  } else if (config.recovery.max_preemptions && now_spent > *config.recovery.max_preemptions) {
    change.to = Phase::failed;
    change.reason = what + "; preemption budget spent (" + std::to_string(*config.recovery.max_preemptions) +
                    " allowed, this was number " + std::to_string(now_spent) + ")";
    change.cleanup_pending = true;
  } else {
    change.to = Phase::recovering;
    change.reason = what + " (preemption " + std::to_string(now_spent) +
                    (config.recovery.max_preemptions ? " of " + std::to_string(*config.recovery.max_preemptions)
                                                     : std::string(", no limit")) +
                    ")";
  }
  return change;
}

domain::PhaseChange after_run_end(const config::JobConfig& config, int runs, const std::string& what) {
  domain::PhaseChange change;
  const auto& max = config.recovery.max_runs;
  if (max && runs >= *max) {
    change.to = Phase::failed;
    change.reason = what + "; recovery.max_runs allows " + std::to_string(*max) + " run" + (*max == 1 ? "" : "s") +
                    ", and this was number " + std::to_string(runs);
    change.cleanup_pending = true;
    return change;
  }
  change.to = Phase::recovering;
  change.reason = std::string(domain::kRunEndedReason) + what + " (run " + std::to_string(runs) +
                  (max ? " of " + std::to_string(*max) : ", no limit") +
                  "); the next run is asked for once the cloud has ended this one";
  return change;
}

domain::PhaseChange after_failure(const config::JobConfig& config, int spent, const std::string& what) {
  domain::PhaseChange change;
  change.add_failures = 1;
  const int now_spent = spent + 1;
  if (now_spent > config.recovery.max_failures) {
    change.to = Phase::failed;
    change.reason =
        what + "; failure budget spent (" + std::to_string(config.recovery.max_failures) + " retries allowed)";
    change.cleanup_pending = true;
  } else {
    change.to = Phase::setup;
    change.reason = what + " (failure " + std::to_string(now_spent) + " of " +
                    std::to_string(config.recovery.max_failures) + " allowed; retrying on the same slice)";
  }
  return change;
}

domain::PhaseChange after_bad_hardware(const config::JobConfig& config, int spent, const std::string& what) {
  domain::PhaseChange change;
  change.add_bad_hardware = 1;
  const int now_spent = spent + 1;
  const int allowed = config.recovery.max_bad_hardware;
  if (now_spent > allowed) {
    change.to = Phase::failed;
    change.reason = what + "; bad-hardware budget spent (" + std::to_string(allowed) + " bad slice(s) allowed)";
    change.cleanup_pending = true;
  } else {
    change.to = Phase::recovering;
    change.reason = what + " (bad slice " + std::to_string(now_spent) + " of " + std::to_string(allowed) +
                    " allowed; replacing the slice)";
  }
  return change;
}

domain::PhaseChange after_rollback(const config::JobConfig& config, int spent, const std::string& what) {
  domain::PhaseChange change;
  const int allowed = config.recovery.loss_spike ? config.recovery.loss_spike->max_rollbacks : 0;
  const int now_spent = spent + 1;
  if (now_spent > allowed) {
    change.to = Phase::failed;
    change.reason = what + "; rollback budget spent (" + std::to_string(allowed) + " rollback(s) allowed)";
    change.cleanup_pending = true;
  } else {
    change.to = Phase::setup;
    change.reason = what + " (rollback " + std::to_string(now_spent) + " of " + std::to_string(allowed) +
                    " allowed; resuming from before the spike on the same slice)";
  }
  return change;
}

} // namespace jobman::core
