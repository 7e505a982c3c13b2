// The supervisor's judgements, as pure functions: what a queued resource's state means for a job, how an attempt's
// workers ended, and where a preemption or failure leaves the job given its budgets.
#pragma once

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/job_config.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/store/job_store.hpp"

#include <optional>
#include <string>
#include <vector>

namespace jobman::core {

// What the cloud says about an attempt's slice.
enum class SliceVerdict {
  waiting,      // Requested, not yet provisioning (CREATING, ACCEPTED, WAITING_FOR_RESOURCES).
  provisioning, // PROVISIONING.
  active,       // ACTIVE: the nodes are up.
  lost,         // SUSPENDING, SUSPENDED, FAILED, or gone: a preemption as far as the job is concerned.
  deleting,     // DELETING (by someone).
};

// The verdict for a queued resource's state; nullopt (the resource is gone) is `lost`.
SliceVerdict judge_slice(const std::optional<cloud::QueuedResource>& resource);

// The verdict for a node created directly (tpu-vm mode); nullopt (the node is gone) is `lost`. CREATING is
// `provisioning`; READY `active`; PREEMPTED, TERMINATED, STOPPING, STOPPED, UNKNOWN and the hidden states are `lost`
// (its workload is gone or the node is unusable for good); DELETING is `deleting`; a node repairing, restarting,
// reimaging or starting is `provisioning`: not usable now, which a running job counts as a loss.
SliceVerdict judge_node(const std::optional<cloud::Node>& node);

// An attempt's slice as the cloud last showed it, whichever resource holds it.
struct SliceView {
  SliceVerdict verdict = SliceVerdict::lost;
  std::string state; // The resource's state as the API names it: "ACTIVE", "READY", "PREEMPTED", ...
  std::string error; // Why a queued resource failed (state.failedData.error); empty otherwise.
  // When a flex-start slice's run ends (runDuration.terminationTime, read through v2alpha1); nullopt when not told.
  std::optional<std::int64_t> termination_ms;
};

// What a node's health (Node.health) says of its slice while a job runs on it.
enum class NodeTrouble {
  none,         // HEALTHY, or not said.
  bad_hardware, // TIMEOUT or UNHEALTHY_TENSORFLOW: the TPU runtime on it does not answer or is broken.
  maintenance,  // UNHEALTHY_MAINTENANCE: it is under maintenance; the workload will not survive it.
};

// The trouble a node's health names.
NodeTrouble judge_health(cloud::NodeHealth health);

// Whether an announced maintenance (Node.upcomingMaintenance) is due at `now_ms`: under way (ONGOING), or its window
// opens within `lead_ms` (at the earliest of windowStartTime and latestWindowStartTime).
bool maintenance_due(const cloud::UpcomingMaintenance& maintenance, std::int64_t now_ms, std::int64_t lead_ms);

// The view of a queued resource, or of a node (tpu-vm mode).
SliceView view_slice(const cloud::QueuedResource& resource);
SliceView view_slice(const cloud::Node& node);
// The verdict of a view; nullopt (the slice is gone) is `lost`.
SliceVerdict verdict_of(const std::optional<SliceView>& view);

// The phase a job waiting for its slice is in for a verdict: QUEUED or PROVISIONING (nullopt for the others).
std::optional<domain::Phase> waiting_phase(SliceVerdict verdict);

// What an attempt's workers' statuses say of its run, taken together: a verdict on the run, not the outcome the
// store records (domain::AttemptOutcome), which the supervisor decides from it.
enum class WorkersSay {
  running,     // Nothing decided yet: a worker runs or starts, and none failed.
  succeeded,   // Every worker exited 0.
  preempted,   // A worker exited 143, or its workload vanished or its disk was wiped.
  restart,     // A worker exited with one of the restart codes.
  failed,      // A worker exited with any other non-zero code.
  unreachable, // A worker could not be asked: the host may be lost; the cloud decides.
};

// "running", "succeeded", ...
std::string to_string(WorkersSay says);

// What the workers say, with the exit code and the worker that decided it, and a sentence for the event log.
struct AttemptVerdict {
  WorkersSay says = WorkersSay::running;
  int exit_code = 0; // The deciding worker's code (255 when unreachable).
  int worker = 0;
  std::string reason; // "worker 2 exited 1", "worker 0 exited 0", ...
};

// Judges the statuses of the workers that run the command. A non-zero exit on any worker decides (worker 0's
// first, then in worker order); an unreachable worker decides over running ones; success waits for every worker to
// exit 0, as the stream of the workload waits for every worker's output.
AttemptVerdict judge_workers(const std::vector<remote::WorkerStatus>& statuses,
                             const config::RecoverySection& recovery);

// Where a job goes after a preemption: RECOVERING while the preemption budget allows one more (job.loop and
// max_preemptions), otherwise FAILED. `spent` is the preemptions the job had before this one.
domain::PhaseChange after_preemption(const config::JobConfig& config, int spent, const std::string& what);

// Where a job goes after a real failure: SETUP on the same slice while the failure budget allows one more,
// otherwise FAILED. `spent` is the failures the job had before this one.
domain::PhaseChange after_failure(const config::JobConfig& config, int spent, const std::string& what);
// A flex-start run ended (`runs` of them so far, this one counted): RECOVERING for the next run, spending no budget,
// or FAILED once recovery.max_runs runs have ended.
domain::PhaseChange after_run_end(const config::JobConfig& config, int runs, const std::string& what);

// Where a job goes after its slice was found bad (bad hardware): RECOVERING on a new slice while the bad-hardware
// budget (recovery.max_bad_hardware) allows one more, otherwise FAILED. Neither the failure nor the preemption budget
// is spent. `spent` is the bad slices the job had before this one.
domain::PhaseChange after_bad_hardware(const config::JobConfig& config, int spent, const std::string& what);

// Where a job goes after its loss spiked (recovery.loss_spike): SETUP on the same slice, resuming from before the
// spike, while the rollback budget (loss_spike.max_rollbacks) allows one more, otherwise FAILED. No other budget is
// spent. `spent` is the rollbacks the job had before this one.
domain::PhaseChange after_rollback(const config::JobConfig& config, int spent, const std::string& what);

} // namespace jobman::core
