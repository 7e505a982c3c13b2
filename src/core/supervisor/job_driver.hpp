// The job driver: the phase machine that moves one job a step at a time, given what the loop knows of it. Its
// methods live in one file per phase group:
//   job_driver.cpp     stepping, the store helpers, which phase does what;
//   getting_slice.cpp  PENDING, RECOVERING, QUEUED, PROVISIONING: request a slice and wait until it is ACTIVE;
//   on_workers.cpp     SETUP and RUNNING: set up, launch, stream the output home, judge how the attempt ended;
//   teardown.cpp       cancel, delete, clean and release: stop the workload and delete the slice.
#pragma once

#include "driven.hpp"
#include "driver_host.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/fair_share.hpp"
#include "jobman/core/recovery.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/remote/gcloud.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/util/line_patterns.hpp"
#include "operations.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::core::supervision {

// How long worker steps may take, in real time: setup installs packages; the others are quick.
inline constexpr std::chrono::milliseconds kSetupTimeout{30 * 60 * 1000};
// How long launch, query and stop may take on the workers.
inline constexpr std::chrono::milliseconds kRemoteTimeout{120'000};
// How long a stopped workload has between SIGTERM and SIGKILL.
inline constexpr std::chrono::milliseconds kStopGrace{30'000};
// How long fetching the output a broken stream missed may take, once the workload has ended.
inline constexpr std::chrono::milliseconds kCatchUpLimit{60'000};
// How often a node's create operation is read while the node is missing from the listings (config seconds).
inline constexpr double kCreatePollSeconds = 5;
// Consecutive unreachable answers from a worker whose slice the cloud calls ACTIVE before it counts as lost.
inline constexpr int kUnreachableLimit = 3;
// The guest attribute (namespace/key) in which a worker publishes the physical machine it runs on.
inline constexpr const char* kPhysicalHostAttribute = "host/physical_host";
// How long a READY node's hosts have to publish their SSH host keys: a host that has not booted by then never will,
// and the slice is replaced. In real seconds, unscaled: the mock's hosts start their sshd in real time, whatever the
// pace of its simulated world.
inline constexpr double kHostKeySeconds = 600;
// How long a READY node's hosts may take to publish their keys before the job's phase reason says it waits for them.
inline constexpr double kHostKeyLateSeconds = 60;
// How long tpu.preflight may take on the workers.
inline constexpr std::chrono::milliseconds kPreflightTimeout{10 * 60 * 1000};
// How long a machine found bad is remembered: a new slice that lands on it within this time is rejected.
inline constexpr std::int64_t kBadHardwareMemoryMs = 30LL * 24 * 3600 * 1000;

// "job 000042", for logs.
std::string job_label(std::int64_t id);
// "worker 000042", for messages.
std::string worker_label(std::int64_t id);

// Which cloud resource holds an attempt's slice: a queued resource (with its node), or a node created directly
// (tpu-vm mode). Everything that asks the cloud about a slice, or deletes it, goes by this.
struct SliceRef {
  std::string name; // The queued resource's id, or the node's.
  std::string zone;
  bool node_only = false; // A node created directly, without a queued resource.

  // The slice of `attempt`.
  static SliceRef of(const domain::AttemptRecord& attempt);
  // "queued resource NAME" or "node NAME", for messages.
  [[nodiscard]] std::string label() const;
  // The slice asked for by name (queuedResources.get or nodes.get); nullopt when it is gone.
  [[nodiscard]] std::optional<SliceView> get(SliceOps& slices) const;
  // Deletes it (a queued resource with force, since it may be ACTIVE); nullopt when it was already gone.
  [[nodiscard]] std::optional<cloud::Operation> remove(SliceOps& slices) const;
};

// How a job's phase reason begins while the fair share keeps it from asking for a slice (JobDriver::wait_for_share).
inline constexpr std::string_view kShareWaitReason = "waiting for its share of chips: ";

// Worker 0's exit status in the states a stop or a query returned, when its workload has exited.
std::optional<int> lead_exit_code(const std::vector<remote::WorkerStatus>& statuses);

// Drives the jobs of one loop. Every method runs on the loop's thread; work on the cloud and the workers goes through
// DriverHost::dispatch, and its result comes back to a method here.
class JobDriver {
public:
  // What a driver works through: the cloud's slices and their workers.
  struct Operations {
    std::shared_ptr<SliceOps> slices;
    std::shared_ptr<WorkerOps> workers;
  };

  // A driver for the jobs of `host`, in the project and with the settings of `access`, working on slices and workers
  // through `ops` and counting into `counters`.
  JobDriver(DriverHost& host, std::shared_ptr<const CloudAccess> access, Operations ops,
            std::shared_ptr<Counters> counters);

  // One step for a job that has news: what the user wants decides (tear down, release, cancel), else its phase.
  void step(Driven& d);

  // Steps the job if it has news and is neither busy, lost nor waiting out a backoff: a failure becomes an error event
  // and a backoff, a user's request that got in first has the job read again, and the fair share's refusal has it
  // wait. False when the job is gone from the store (the caller lets it go).
  bool step_when_due(Driven& d);

  // Applies what work for job `id` handed back (`d` while it is driven); with `ends_operation` (the result of its
  // operation in flight) the job is no longer busy and is read again first, since what the user asked may have
  // changed meanwhile. An error it throws is logged and backs the job off. False when the job is gone from the store.
  bool apply_result(std::int64_t id, Driven* d, const std::function<void()>& apply, bool ends_operation);

  // Reads the job and its attempts again and marks it for a step.
  void reload(Driven& d);

  // The job's record as the store has it now (`row`, read without its config): when it changed and no operation is
  // in flight, the job takes it, reads its attempts and rivals again and is marked for a step; a user's request is
  // acted on at once, not after a backoff or a wait for chips.
  void take_news(Driven& d, domain::JobRecord row);

  // Moves the job to `change.to` when its phase is `expected` (any phase without one); says whether it moved.
  bool move(Driven& d, std::optional<domain::Phase> expected, const domain::PhaseChange& change);

  // Waits out the config's backoff (its next step) before the job is stepped again; returns the wait in the config's
  // seconds.
  double backoff(Driven& d);

  // Records an `error` event for the job and logs it.
  void error_event(Driven& d, const std::string& message);

  // Stops the job's output stream, if one is open.
  void stop_stream(Driven& d);

  // The fair share as the loop last read it from the store (null: none set); the chips in flight are read again on
  // the next check.
  void set_fair_share(std::shared_ptr<const FairShare> share);
  // The job waits, asking the cloud for nothing, because the fair share refuses it a slice (`why`, from
  // FairShare::refusal): its phase's reason says so, and it looks again a little later.
  void wait_for_share(Driven& d, const std::string& why);

private:
  // ---- job_driver.cpp ----
  // Records an event of `kind` for the job and logs it.
  void event(Driven& d, std::string_view kind, const std::string& message, const nlohmann::json& data = {});
  // Ends the current attempt with `outcome` (a rollback's with the step that spiked), unless it has ended already.
  void end_open_attempt(Driven& d, domain::AttemptOutcome outcome, std::optional<int> exit_code,
                        std::optional<std::int64_t> rollback_step = std::nullopt);
  // What the job's phase asks for while the user wants it to run.
  void drive(Driven& d);
  // The result of a failed operation: an error event, then a retry after the backoff.
  std::function<void()> failed_operation(std::int64_t id, std::string message);

  // ---- getting_slice.cpp ----
  // Whether the fair share lets the job ask for a slice of `candidate` now (an in-memory check against the chips in
  // flight; the store checks again as it records the attempt). When not, the job waits (wait_for_share).
  bool share_allows(Driven& d, const config::Candidate& candidate);
  // PENDING or RECOVERING: ask again for a slice whose request was cut short, reuse a kept one, or request a new one.
  void acquire_slice(Driven& d);
  // Records the next attempt and its queued resource's name, then requests it.
  void create_slice(Driven& d);
  // Sends the create request for the attempt's queued resource (a 409 means an earlier request got there).
  void request_slice(Driven& d, const domain::AttemptRecord& attempt);
  // Over OpenSSH, adds the key jobman connects with to the nodes a create request body asks for (add_ssh_key). A key
  // that cannot be made is left out, with a warning: the hosts are then reached only if they know it already.
  void with_ssh_key(const Driven& d, nlohmann::json& body) const;
  // The API accepted the request: QUEUED (a node: PROVISIONING, its create's `operation` kept to learn whether it
  // finds capacity), or, for a job removed meanwhile, the resource deleted.
  void slice_created(std::int64_t id, const SliceRef& slice, int number, const std::string& operation);
  // Deletes a slice whose job is gone, on the action threads, for no job.
  void orphan_delete(const SliceRef& slice);
  // QUEUED or PROVISIONING: follows the listings until the slice is ACTIVE, or lost.
  void await_slice(Driven& d);
  // " (the API's error message)" for a slice that failed; empty otherwise.
  static std::string slice_error(const Driven& d);
  // Asks for a new resource by name before a listing's silence counts as its loss.
  void confirm_absent(Driven& d, const domain::AttemptRecord& open);
  // tpu-vm mode, a node missing from the listings while its create is in flight: reads the create's operation. One
  // that failed for capacity is asked again after the backoff (QUEUED meanwhile), as a queued resource waits for it;
  // one the API will not carry out ends the job.
  void check_create(Driven& d, const domain::AttemptRecord& open);
  // The create's operation ended with `error`: retry it or fail the job.
  void create_failed(Driven& d, const SliceRef& slice, const cloud::RpcStatus& error);
  // The slice is ACTIVE: reads the node and moves to SETUP with worker 0's address.
  void activate(Driven& d, const domain::AttemptRecord& open);
  // The READY node of attempt `number` cannot be set up yet: `without_keys` of its hosts have not published their SSH
  // host keys, or jobman's key cannot be given access (`problem`). Says so in the phase's reason; replaces the slice
  // when hosts have been missing for kHostKeySeconds.
  void hosts_not_ready(Driven& d, const std::string& node, int number, int without_keys, const std::string& problem);

  // ---- on_workers.cpp ----
  // The workload of the job's current attempt, on `slice`.
  static remote::LaunchSpec launch_spec(const Driven& d, const domain::AttemptRecord& slice);
  // Whether the slice is still ACTIVE with its node READY (each of its `slice_count` slices' node, for a multislice
  // job), asked by name.
  static bool slice_active(SliceOps& slices, Counters& counters, const domain::AttemptRecord& open, int slice_count);
  // A multislice job lost a slice: stops the workload on every host, on the side (the survivors checkpoint).
  void stop_survivors(Driven& d);
  // SETUP: sets every host up, then launches the command on its workers.
  void set_up(Driven& d);
  // Streams the workers' output home on a thread of its own; the loop hears when it ends.
  void start_stream(Driven& d);
  // RUNNING: watches the slice and the stream; when the stream ends, inspects the workers.
  void watch(Driven& d);
  // Asks the workers how the workload stands, stops a decided attempt everywhere, fetches missed output.
  void inspect(Driven& d);
  // Fetches what broken streams missed once the workload has ended, within kCatchUpLimit.
  static void catch_up(WorkerOps& ops, std::int64_t id, const remote::SliceTarget& target, std::vector<int> workers,
                       const remote::WorkloadId& wid, const std::filesystem::path& dir);
  // What to read of the current attempt's gcsfuse when it ends: its bucket, its metrics port, the attempt and its
  // zone. Nothing for a job that mounts no bucket, or that turned the metrics off.
  struct TransferProbe {
    std::int64_t job_id = 0;
    int attempt = 0;
    std::string bucket;
    std::string zone;
    int port = 0;
  };
  static std::optional<TransferProbe> transfer_probe(const Driven& d);
  // On a worker thread: reads the metrics of `workers`' gcsfuse and sums them (nullopt when none answered).
  static std::optional<store::BucketTransfer> read_transfers(WorkerOps& ops, const remote::SliceTarget& target,
                                                             const std::vector<int>& workers,
                                                             const std::optional<TransferProbe>& probe);
  // On the loop's thread: records what read_transfers found, with an event.
  void record_transfers(const std::optional<store::BucketTransfer>& transfer);
  // Acts on the verdict: keep watching, recover, restart, or end the job.
  void attempt_judged(std::int64_t id, const AttemptVerdict& verdict, bool slice_gone, bool stream_failed);
  // Begins the next attempt on the current attempt's slice and applies `c`.
  void next_attempt_on_same_slice(Driven& d, const domain::PhaseChange& c);
  // The slice or the workload was lost: ends the attempt and spends a preemption (RECOVERING or FAILED). A flex-start
  // slice lost once its run is within recovery.deadline_lead of its end ran out instead (run_ended).
  void preempted(Driven& d, const std::string& what, int exit_code);
  // RUNNING on a flex-start slice whose run ends within recovery.deadline_lead: stops the workload (SIGTERM, so that
  // it checkpoints), then ends the attempt as run-ended.
  void stop_before_run_ends(Driven& d);
  // The attempt's flex-start run ran out: ends it as run-ended, spending no budget, and goes to RECOVERING for the
  // next run (FAILED past recovery.max_runs).
  void run_ended(Driven& d, const std::string& what, std::optional<int> exit_code);
  // RECOVERING after a run ended: true while the old slice is still up before its termination time (and a poll after
  // it), the cloud being the one to end it; the job looks again then.
  bool waits_for_run_end(Driven& d);

  // ---- candidates.cpp ----
  // Whether the config offers more than one place for a slice.
  static bool several_candidates(const Driven& d);
  // Why the job now asks for on-demand capacity (recovery.fallback), if it does.
  [[nodiscard]] std::optional<std::string> falls_back(const Driven& d) const;
  // The candidates in the order the next slice is asked in (the first is where it comes from), and why (for the
  // event).
  std::vector<config::Candidate> choose_candidates(Driven& d, std::string& why);
  // The candidate of an attempt or a rival: its zone, accelerator and tier.
  static config::Candidate candidate_at(const Driven& d, const std::string& zone, const std::string& accelerator,
                                        domain::Pricing pricing);
  // Whether the API refused every candidate (400, 403, 404 on create) in the attempts just made, and in the races they
  // ran: nothing is left to try.
  [[nodiscard]] bool refused_everywhere(const Driven& d);
  // Ends the open attempt as `outcome` (timed-out, quota), releases its slice and asks the next candidate.
  void give_up_candidate(Driven& d, domain::AttemptOutcome outcome, const std::string& why);
  // A request that has waited out tpu.queue_timeout while other candidates exist gives way to the next; says whether.
  bool outwaited(Driven& d, const domain::AttemptRecord& open);

  // ---- race.cpp ----
  // Whether the job races its candidates: tpu.strategy first-ready, with more than one.
  static bool races(const Driven& d);
  // Records the next attempt on the first of `list` with rivals on the others, then requests the attempt's; the
  // rivals' requests follow at the next step.
  void start_race(Driven& d, const std::vector<config::Candidate>& list, const std::string& why);
  // QUEUED with rivals: requests the rivals not yet asked for, keeps the first slice to come up (a rival swaps places
  // with the attempt's own), lets the failed ones go, and deletes every rival out of the race. True when an operation
  // was sent (the step is over).
  bool run_race(Driven& d);
  // Rival `name` becomes the attempt's slice; the attempt's slice until now becomes a rival with `outcome`.
  void promote(Driven& d, const std::string& name, domain::RivalOutcome outcome, const std::string& why);
  // The attempt's slice came up: every rival still racing is outrun, with an event saying `why`.
  void outrun_rivals(Driven& d, const std::string& why);
  // Ends the race (every rival still racing is abandoned) and deletes the rivals; true once none is held.
  bool let_rivals_go(Driven& d);
  // Sends the deletes of the rivals out of the race, and records those the listings show gone. True when an
  // operation was sent.
  bool delete_rivals(Driven& d);
  // Sends the create requests of `rivals`, in one operation.
  void request_rivals(Driven& d, const std::vector<domain::RivalRecord>& rivals);
  // The attempt's own request (`refused`) was refused (for quota, or for good): the first rival still racing takes
  // its place. False when none races.
  bool promote_after_refusal(Driven& d, const std::string& refused, const std::string& message);

  // ---- bad_hardware.cpp ----
  // The patterns of the config's recovery.bad_hardware, compiled; nullptr when it has none. Jobs with the same
  // patterns share one compiled set (see compiled_).
  std::shared_ptr<const util::LinePatterns> hardware_patterns(const config::JobConfig& config);
  // job.progress compiled (shared as hardware_patterns' are); nullptr when it is off.
  std::shared_ptr<const util::ProgressPattern> progress_pattern(const config::JobConfig& config);
  // The tracker of the current attempt's progress, made (from what the store has) when the attempt has none yet; what
  // the previous attempt's tracker read since the last flush is written first.
  std::shared_ptr<ProgressTracker> progress_tracker(Driven& d);
  // Writes the steps read since the last flush now, rather than at the loop's next flush: before an attempt ends, so
  // that a job recorded as ended shows its last step.
  void record_progress_now(Driven& d);
  // Adds the readings in a chunk of output to `tracker` (on the stream's thread).
  static void read_progress(const util::ProgressPattern& pattern, ProgressTracker& tracker, std::string_view lines);
  // job.loss compiled (shared as the others are); nullptr when recovery.loss_spike is off or job.loss is empty.
  std::shared_ptr<const util::LossPattern> loss_pattern(const config::JobConfig& config);
  // Feeds the loss of each step line in a chunk of output to `tracker` (on the stream's thread): the first spike, if
  // any.
  static std::optional<LossSpike> read_losses(const util::ProgressPattern& steps, const util::LossPattern& losses,
                                              LossTracker& tracker, std::string_view lines);

  // ---- watchdog.cpp ----
  // RUNNING, silent past recovery.stall_timeout: keeps what each worker's processes were doing (stacks-W.txt beside
  // the attempt's logs), stops the workload and ends the attempt as `stalled`, a failure restarted on the same slice;
  // a slice whose attempts stalled twice in a row is replaced as bad hardware.
  void stalled(Driven& d);
  // The stall's stop is done: judges the attempt.
  void stall_judged(Driven& d, const std::string& what, std::optional<int> exit_code);
  // The loss of attempt `attempt` spiked (recovery.loss_spike): stops the workload and ends the attempt as
  // `rolled-back`; the next attempt, on the same slice, resumes from before the spike (JOBMAN_RESUME_BEFORE_STEP).
  void loss_spiked(Driven& d, int attempt, const LossSpike& spike);
  // The first sign of bad hardware in the end of the workers' local logs of an attempt, if any.
  static std::optional<HardwareFinding> scan_logs(const std::filesystem::path& dir, const std::vector<int>& workers,
                                                  int attempt, const util::LinePatterns& patterns);
  // News from a stream: a line of the attempt matched. Replaces the slice if the job still runs that attempt.
  void hardware_found(std::int64_t id, const HardwareFinding& finding);
  // Remembers the finding in the store, with the machine of the worker (its holder's attempt, for a task).
  void record_finding(const Driven& d, const HardwareFinding& finding);
  // "bad hardware: worker 1 printed ...", for the phase change.
  static std::string describe(const HardwareFinding& finding);
  // Records the finding, stops the workload on every worker, ends the attempt as `bad-hardware` and moves on: a job
  // or worker to RECOVERING (a new slice) or FAILED by its bad-hardware budget; a task back to the head of the queue,
  // its worker replacing its slice.
  void replace_bad_slice(Driven& d, const HardwareFinding& finding);
  // A task found its worker's slice bad: the worker ends its attempt and replaces the slice (or fails).
  void bad_worker_slice(const Driven& task, const std::string& what);
  // A running job whose node the last listing called unhealthy: TIMEOUT or UNHEALTHY_TENSORFLOW is bad hardware;
  // UNHEALTHY_MAINTENANCE stops the workload (it checkpoints on SIGTERM) and counts as a preemption, before the
  // maintenance takes the slice. Says whether it acted.
  bool act_on_health(Driven& d);
  // A slice just came up: when one of its machines was found bad within kBadHardwareMemoryMs, ends the attempt as
  // `rejected` and goes to RECOVERING (no budget spent, after the backoff); says whether it did.
  bool rejects_known_bad(Driven& d, const domain::AttemptRecord& open, const std::vector<std::string>& physical_hosts);

  // ---- notify.cpp ----
  // Records the notifications the job's config asks for when it moved from `from` to `to`: BEGIN at its first
  // launch, END when it succeeds, FAIL when it fails for good (a worker: FAIL only).
  void notify_phase(Driven& d, domain::Phase from, domain::Phase to);

  // ---- pool.cpp ----
  // A worker in RUNNING: its slice is set up and it serves the queue. It watches its slice as a job does, and takes
  // the next task it can run whenever it holds none and the last listing showed the slice ACTIVE.
  void serve(Driven& worker);
  // Whether a worker lends its slice to tasks now: RUNNING, wanted running, its slice ACTIVE as far as the listings
  // tell, and (when `borrowed` is given) the slice that attempt runs on.
  static bool lends_slice(const Driven& worker, const domain::AttemptRecord* borrowed);
  // A worker with tpu.idle_release whose last attempt ended idle: it stays in PENDING without a slice (releasing the
  // one it had first) until the queue holds a task it could run. True while it stays.
  bool parked(Driven& worker);
  // The task that holds the worker's slice now, if any.
  std::optional<std::int64_t> task_of(const Driven& worker);
  // Marks the worker's task for a step: the worker no longer lends it the slice, or is waiting for it to let go.
  void wake_task_of(const Driven& worker);
  // A worker about to stop, be deleted, be set up again or recover: true while a task still holds its slice (the
  // task is woken to let go, and wakes the worker when it has).
  bool worker_waits_for_task(Driven& worker);
  // A task in SETUP or RUNNING whose worker no longer lends it the slice: its workload is stopped where the slice is
  // still up, and it goes back to the head of the queue. True when that happened (or is under way).
  bool task_lost_worker(Driven& task);
  // Sends a task back to the queue with its attempt ended as `outcome`, applying `c` (its reason and budgets) with the
  // move: at the head after an interruption (counted as a preemption, never spent), else at its place; it lets its
  // worker go, and this supervisor lets it go.
  void requeue_task(Driven& task, domain::AttemptOutcome outcome, std::optional<int> exit_code, domain::PhaseChange c,
                    bool head);
  // Ends a task (a terminal `c`), letting its worker go.
  void finish_task(Driven& task, const domain::PhaseChange& c);
  // Marks the worker for a step: it may take the next task. With `doubt_slice`, only once the next listing shows its
  // slice ACTIVE (the task may have ended because the slice is going).
  void wake(std::optional<std::int64_t> worker, bool doubt_slice);

  // ---- teardown.cpp ----
  // Whether the current attempt's workload may be running and should be stopped.
  [[nodiscard]] bool workload_may_run(const Driven& d) const;
  // Stops the workload on every worker, then runs `then` (with worker 0's exit code) on the loop's thread.
  void stop_workload(Driven& d, std::function<void(std::optional<int>)> then);
  // The same, `then` given every worker's state after the stop.
  void stop_workload(Driven& d, std::function<void(const std::vector<remote::WorkerStatus>&)> then);
  // The user wants the job stopped: stop the workload, keep the slice, end CANCELLED.
  void cancel(Driven& d);
  // Ends the job CANCELLED, unless what the user wants changed meanwhile.
  void finish_cancel(Driven& d);
  // Deletes the open slice (if any), then runs `done` once none is left.
  void release(Driven& d, const std::function<void()>& done);
  // Sends the delete for the open slice's queued resource (or node).
  void delete_slice(Driven& d, const domain::AttemptRecord& open);
  // Delete or clean: stop the workload, release the slice, end DELETED; clean also removes the record and directory.
  void tear_down(Driven& d);

  // The loop's store.
  [[nodiscard]] store::JobStore& store() { return host_.store(); }

  DriverHost& host_;
  std::shared_ptr<const CloudAccess> access_;
  std::shared_ptr<SliceOps> slices_;
  std::shared_ptr<WorkerOps> workers_;
  std::shared_ptr<Counters> counters_;
  std::shared_ptr<const FairShare> fair_share_;
  std::optional<ChipsInFlight> chips_in_flight_; // Read on the first check after set_fair_share or a new attempt.
  // Compiled patterns by their text, shared by every stream that uses them: a set of glibc regexes takes tens of
  // kilobytes, and more as its matcher caches states, so one per job would cost a thousand jobs tens of megabytes.
  // (regexec on one compiled pattern from several threads is safe: glibc locks it.) Used on the loop's thread only.
  std::map<std::string, std::weak_ptr<const util::LinePatterns>> line_patterns_;
  std::map<std::string, std::weak_ptr<const util::ProgressPattern>> progress_patterns_;
  std::map<std::string, std::weak_ptr<const util::LossPattern>> loss_patterns_;
};

// What a task borrows from its worker besides the slice, where its own config is silent: how to connect (the remote
// user, the ssh key, gcloud's flags) and the environment the worker set up (venv, conda or docker).
void lend_worker_settings(const config::JobConfig& worker, config::JobConfig& task);

// Reads the job's rivals not yet released (tpu.strategy: first-ready) into d.rivals; a job that never raced reads
// nothing.
void load_rivals(const store::JobStore& store, Driven& d);

// Fills a job about to be driven from `fresh` (read with its config): its record, attempts, config (a task's own, and
// as its `worker` lends it) and rivals. Throws jobman::Error when the recorded config cannot be used; the record and
// the attempts are filled by then.
void load_driven(Driven& d, const domain::JobRecord& fresh, const store::JobStore& store, const Driven* worker);

// Every worker host of a slice: 0 .. hosts-1.
std::vector<int> all_workers(int hosts);

// The workers the command runs on.
std::vector<int> command_workers(const config::JobConfig& config, int hosts);

} // namespace jobman::core::supervision
