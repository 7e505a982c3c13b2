// The domain model: what a job is, where it is in its life, what the user wants of it, its attempts and events. Plain
// data that the store records, the supervisor drives and the commands show; it knows nothing of SQLite or the cloud.
#pragma once

#include "jobman/domain/pricing.hpp"
#include "jobman/domain/progress.hpp"
#include "jobman/util/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::domain {

// A job's id as users see it, zero-padded to six digits: 42 -> "000042".
std::string format_job_id(long long id);
// Parses a job id as printed ("000042" or "42"); nullopt when not a positive integer.
std::optional<long long> parse_job_id(std::string_view text);

// The exit codes that speak of jobs; util's ExitCode has the others (README.md, "Exit codes").
namespace job_exit {
inline constexpr ExitCode no_such_job{3}; // A job id that is not in the store.
inline constexpr ExitCode failed{4};      // `wait`: a job ended FAILED.
inline constexpr ExitCode cancelled{5};   // `wait`: a job ended CANCELLED or DELETED.
} // namespace job_exit

// A job id that is not in the store (exit 3).
class NoSuchJobError : public Error {
public:
  explicit NoSuchJobError(const std::string& message) : Error(message, job_exit::no_such_job) {}
};

// Where a job is in its life. Stored, never recomputed; shown by `list`.
enum class Phase { pending, queued, provisioning, setup, running, recovering, succeeded, failed, cancelled, deleted };

// "PENDING", "QUEUED", ...
std::string_view to_string(Phase phase);
// Case-insensitive inverse of to_string.
std::optional<Phase> parse_phase(std::string_view text);
// SUCCEEDED, FAILED, CANCELLED and DELETED: nothing more will happen without `resume`.
bool is_terminal(Phase phase);

// How the phase reason of a job begins while it recovers after its flex-start run ended (a planned end, not a
// preemption): `list` says "RECOVERING (run ended)" by it, reading nothing else.
inline constexpr std::string_view kRunEndedReason = "flex-start run ended: ";
// Every phase, in lifecycle order.
const std::vector<Phase>& all_phases();

// What a record is. One state machine drives all three: a job is a task on a slice of its own; a worker holds a
// slice and runs tasks on it; a task runs on a worker's slice, borrowed for one attempt at a time.
enum class JobKind { job, worker, task };

// "job", "worker", "task".
std::string_view to_string(JobKind kind);
// Inverse of to_string.
std::optional<JobKind> parse_job_kind(std::string_view text);

// What the user wants; the supervisor makes the world match it.
enum class DesiredState { run, stop, remove, clean };

// "run", "stop", "delete", "clean".
std::string_view to_string(DesiredState desired);
// Inverse of to_string.
std::optional<DesiredState> parse_desired_state(std::string_view text);

// How an attempt ended, as the store records it (AttemptRecord::outcome).
enum class AttemptOutcome {
  none,         // Still running, or ended with none recorded (its job removed while it ran).
  succeeded,    // Its command exited 0 on every worker.
  preempted,    // Its slice was preempted, or its workload vanished with it.
  failed,       // Its request, setup or command failed.
  restart,      // Its command exited with a restart code: the job runs again on the same slice.
  cancelled,    // The user stopped or deleted the job.
  bad_hardware, // Its slice was found bad.
  rejected,     // Its slice came up on a machine known to be bad.
  timed_out,    // A request given up: it waited out its candidate's time (tpu.queue_timeout).
  quota,        // A request given up: refused for quota.
  refused,      // A request given up: refused for good (the zone does not offer it, say).
  idle,         // A worker's: it had no task for tpu.idle_release and let its slice go.
  interrupted,  // A task's: its worker stopped lending it the slice.
  run_ended,    // A flex-start slice's run duration ran out (its workload stopped ahead of the deadline, or the cloud
                // ended the run): neither a preemption nor a failure.
  stalled,      // No worker printed a line for recovery.stall_timeout: stopped, a failure (its stacks are kept).
  rolled_back,  // Its loss spiked (recovery.loss_spike): stopped, and the job resumes from before the spike.
  unknown,      // A spelling this build does not know, read from the store (a newer jobman's, say).
};

// "" for none, "succeeded", "bad-hardware", "timed-out", ...: the spelling the store keeps and the commands show.
std::string_view to_string(AttemptOutcome outcome);
// Inverse of to_string, exactly ("" is none); nullopt for any other text.
std::optional<AttemptOutcome> parse_attempt_outcome(std::string_view text);
// bad-hardware and rejected: the slice, not the job, was at fault.
bool is_bad_slice(AttemptOutcome outcome);
// timed-out, quota and refused: the request was given up for the next candidate.
bool is_request_given_up(AttemptOutcome outcome);
// Whether an attempt can end so before its slice came up: a request given up, failed or cancelled, preempted while
// it waited, or a bad slice. Every ending but succeeded, restart, idle, interrupted, run-ended (and none and unknown).
bool can_end_before_slice_up(AttemptOutcome outcome);

// Why a rival left the race (RivalRecord::outcome).
enum class RivalOutcome {
  racing,    // Still in the race.
  outrun,    // Another came up first.
  lost,      // It failed, or was refused, before it came up.
  abandoned, // The attempt ended first.
  unknown,   // A spelling this build does not know, read from the store: out of the race all the same.
};

// "" while racing, "outrun", "lost", "abandoned": the spelling the store keeps and the commands show.
std::string_view to_string(RivalOutcome outcome);
// Inverse of to_string, exactly ("" is racing); nullopt for any other text.
std::optional<RivalOutcome> parse_rival_outcome(std::string_view text);

// One job row.
struct JobRecord {
  std::int64_t id = 0;
  JobKind kind = JobKind::job;
  std::string name;
  std::string user;
  std::string accelerator;
  std::string zone;
  // How the slice asked for is paid for; nullopt for a task that runs on a worker of any pricing (a job and a worker
  // always name one).
  std::optional<Pricing> pricing;
  std::string tpu_name; // Name prefix for the slice's resources.
  int hosts = 0;        // Worker hosts of the accelerator.
  Phase phase = Phase::pending;
  DesiredState desired = DesiredState::run;
  std::string phase_reason;     // Why the job entered its phase.
  int attempt = 0;              // Number of the current (or last) attempt; 0 before the first.
  int preemptions = 0;          // Preemptions spent.
  int failures = 0;             // Failures spent.
  int bad_hardware = 0;         // Slices found bad (their hardware, not the job, at fault).
  std::string host0_ip;         // Worker 0's internal IP while a slice is up.
  std::optional<int> exit_code; // Worker 0's exit code once known.
  std::int64_t created_ms = 0;
  std::int64_t updated_ms = 0;
  std::int64_t phase_since_ms = 0;
  std::optional<std::int64_t> finished_ms; // When the job entered a terminal phase.
  std::string config_path;                 // The file given to `create`, absolute.
  std::string sweep_label;                 // "lr=0.1,bs=32" for sweep members; empty otherwise.
  bool cleanup_pending = false;            // Finished, but its slice is still to be released.
  // A task: the worker whose slice it holds now (from its claim until it lets go); nullopt while queued or done.
  std::optional<std::int64_t> worker_id;
  int priority = 0;             // A task: higher runs first.
  std::int64_t queue_order = 0; // A task: FIFO within a priority (smaller first; the head after a preemption).
  std::string slice_state;      // What the last listing said of its slice ("ACTIVE", "SUSPENDED", "gone"); "" unknown.
  int max_failures = 0;         // The failure budget (a task's retries), as its config set it.
  // The latest training progress its workers printed (job.progress), of any attempt: the step, the total when the
  // output gave one, and when the line reached home; nullopt before any.
  std::optional<ProgressPoint> progress;
  std::optional<std::int64_t> step_total;
  std::string config_yaml; // The resolved config snapshot; filled only when asked for.
};

// What `create` records.
struct NewJob {
  JobKind kind = JobKind::job;
  std::string name;
  std::string user;
  std::string accelerator;
  std::string zone;
  std::optional<Pricing> pricing; // As JobRecord::pricing: nullopt for a task that runs on a worker of any pricing.
  std::string tpu_name;
  int hosts = 0;
  std::string config_path;
  std::string sweep_label;
  std::string config_yaml;
  int priority = 0;     // A task's.
  int max_failures = 0; // The config's failure budget.
};

// Where an attempt runs: its slice's names, zone, accelerator and number of hosts.
struct Placement {
  std::string queued_resource;
  std::string node;
  std::string zone;
  std::string accelerator; // Empty: the job's.
  int hosts = 0;           // 0: the job's.
  // A task's attempt: the worker whose slice it borrows. The worker holds and releases the slice, never the task.
  std::optional<std::int64_t> worker_id;
  std::optional<Pricing> pricing; // nullopt: the job's.
};

// One attempt: one slice requested, set up and run. Its row is where the attempt runs (the job row keeps what was
// asked for; the config snapshot, how to set up and run it).
struct AttemptRecord {
  std::int64_t job_id = 0;
  int number = 0; // 1, 2, ...
  std::string queued_resource;
  std::string node;
  std::string zone;
  std::string accelerator; // "v4-8".
  int hosts = 0;           // Worker hosts of the slice.
  std::int64_t started_ms = 0;
  std::optional<std::int64_t> ended_ms;
  AttemptOutcome outcome = AttemptOutcome::none; // How it ended; none while it runs.
  std::optional<int> exit_code;
  std::optional<std::int64_t> released_ms; // When its queued resource and node (or its node) were confirmed gone.
  bool create_pending = false; // Its queued resource (or node) is being asked for; the API has not accepted it yet.
  std::optional<std::int64_t> worker_id; // A task's attempt: the worker whose slice it borrowed.
  // The tier its slice was asked in (a task's: its worker's slice's). An attempt the store kept without one (a task's,
  // whose task names no pricing, from before the store kept the tier of attempts) reads as spot.
  Pricing pricing = Pricing::spot;
  std::optional<std::int64_t> active_ms; // When its slice was found ACTIVE with its node READY.
  // The physical machine of each worker host, by worker index, as the cloud told it when the slice came up; empty
  // when it did not say.
  std::vector<std::string> physical_hosts;
  // The steps its workers printed, as they reached home (job.progress).
  ProgressSeries progress;
  // Rolled back (recovery.loss_spike): the first step whose loss spiked. The attempts after it resume from a
  // checkpoint older than that step until one passes it.
  std::optional<std::int64_t> rollback_step;

  // The resource that holds the slice: its queued resource, or its node when it has none (tpu-vm mode).
  [[nodiscard]] const std::string& slice_name() const { return queued_resource.empty() ? node : queued_resource; }
  // Whether the slice is a node created directly (tpu-vm mode), without a queued resource.
  [[nodiscard]] bool node_only() const { return queued_resource.empty() && !node.empty(); }
  // Where it runs, for the next attempt on the same slice.
  [[nodiscard]] Placement placement() const {
    return {queued_resource, node, zone, accelerator, hosts, worker_id, pricing};
  }
  // Whether the attempt holds its slice (and must release it): every attempt but a task's, which borrows a worker's.
  [[nodiscard]] bool holds_slice() const { return !worker_id && !slice_name().empty(); }
};

// A queued resource requested alongside an attempt's own (tpu.strategy: first-ready): every candidate is asked at
// once, the first to come up becomes the attempt's slice, and the others are deleted. Its queued resource and node
// share the name.
struct RivalRecord {
  std::int64_t job_id = 0;
  int attempt = 0; // The attempt it raced for.
  std::string name;
  std::string zone;
  std::string accelerator;
  int hosts = 0;
  Pricing pricing = Pricing::spot; // The tier it was asked in.
  std::int64_t requested_ms = 0;
  bool create_pending = true; // The API has not accepted it yet.
  std::optional<std::int64_t> released_ms;
  RivalOutcome outcome = RivalOutcome::racing; // Why it left the race; racing while it races.

  // Where it would run, as an attempt's placement.
  [[nodiscard]] Placement placement() const { return {name, name, zone, accelerator, hosts, std::nullopt, pricing}; }
};

// One finding of bad hardware: where (zone, node, worker and its physical machine), how it was found, and what was
// seen. Kept beyond the job's life: it is how a new slice on the same machine is known to be bad.
struct BadHardwareRecord {
  std::int64_t id = 0;
  std::int64_t ts_ms = 0;
  std::int64_t job_id = 0;
  int attempt = 0;
  std::string zone;
  std::string accelerator;
  std::string node;
  int worker = 0;
  std::string physical_host; // Empty when the cloud did not say.
  std::string signal;        // "output", "preflight", "health".
  std::string detail;        // The line that matched, the preflight's last line, the node's healthDescription.
};

// One timestamped, append-only fact about a job.
struct EventRecord {
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::int64_t ts_ms = 0;
  std::string kind;          // "created", "phase", "desired", "attempt", "observation", "action", "error".
  std::optional<Phase> from; // For phase changes.
  std::optional<Phase> to;
  std::string message;
  std::string data_json; // Extra structured facts; "" when none.
};

// Who drives a job, until when.
struct Lease {
  std::int64_t job_id = 0;
  std::string owner; // host + pid + process start time + machine (core::lease_owner_id).
  std::int64_t acquired_ms = 0;
  std::int64_t heartbeat_ms = 0;
  std::int64_t expires_ms = 0;
};

// Changes applied together with a phase transition.
struct PhaseChange {
  Phase to = Phase::pending;
  std::string reason;
  std::optional<std::string> host0_ip;
  std::optional<int> exit_code;
  int add_preemptions = 0;
  int add_failures = 0;
  int add_bad_hardware = 0;
  std::optional<bool> cleanup_pending; // Set or clear JobRecord::cleanup_pending with the change.
  bool release_worker = false;         // A task lets its worker go (JobRecord::worker_id cleared).
  bool to_queue_head = false;          // A task goes back to the head of the queue (a preempted one).
};

// A change to `to` for `reason` that changes nothing else; set the other fields on it as needed.
PhaseChange change_to(Phase to, std::string reason);

} // namespace jobman::domain
