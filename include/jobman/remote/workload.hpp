// The job's command on the workers, detached from whoever launched it: launched under setsid with its pid and exit
// code kept in files on each worker, its output streamed home into the attempt's worker logs, and found again later
// from nothing but the job and the attempt (still running? exit code? re-attach, stop).
#pragma once

#include "jobman/remote/gcloud.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::remote {

// Which run of the command: the job and its attempt. On a worker its files live in
// ~/.jobman/jobs/<job>/attempt-<n>/ (pid, exit_code, output.log, run.sh).
struct WorkloadId {
  std::string job_id; // The job's id as text; letters, digits, '-', '_' and '.' only.
  int attempt = 1;    // 1, 2, ...
};

// The directory of a workload on a worker, relative to the remote user's home.
std::string remote_workload_dir(const WorkloadId& id);

// What to launch. The command is shell text run by bash in the remote user's home, with every JOBMAN_* variable of
// the contract exported (JOBMAN_WORKER_ID per worker).
struct LaunchSpec {
  WorkloadId id;
  std::string command; // Already wrapped for its environment (see environment_command in setup.hpp).
  int num_workers = 1; // JOBMAN_NUM_WORKERS: the host count (of every slice, for a multislice job).
  // JOBMAN_NUM_SLICES (and MEGASCALE_NUM_SLICES beyond 1): the slices of a multislice job, whose hosts are numbered
  // slice after slice, num_workers / num_slices each.
  int num_slices = 1;
  // MEGASCALE_COORDINATOR_ADDRESS: the internal address of slice 0's worker 0, where JAX's multislice runtime meets.
  std::string coordinator;
  std::string tpu_name;                         // JOBMAN_TPU_NAME.
  std::string zone;                             // JOBMAN_ZONE.
  std::string accelerator;                      // JOBMAN_ACCELERATOR.
  std::map<std::string, std::string> extra_env; // More variables for the command (names must be shell names).
  bool docker = false; // The command runs in a container named $JOBMAN_CONTAINER, which stop() also stops.
};

// The docker container of one worker's workload: "jobman-<job>-<attempt>-w<worker>".
std::string container_name(const WorkloadId& id, int worker);

// The port of MEGASCALE_PORT: the one multislice launchers of JAX give it.
inline constexpr int kMegascalePort = 8081;

// The JOBMAN_* variables one worker's command sees (and JOBMAN_CONTAINER for a docker workload); with several slices,
// the MEGASCALE_* ones JAX's multislice runtime reads as well.
std::map<std::string, std::string> workload_environment(const LaunchSpec& spec, int worker);

// Shell text that exports, in the shell running it on a worker, the variables the workload `id` got there (read from
// its run.sh, so that no value travels in an argument); nothing when the worker has no such workload. What
// `jobman ssh` runs before the user's shell or command.
std::string workload_variables_script(const WorkloadId& id);

// Where a workload stands on one worker.
enum class WorkloadState {
  absent,      // Never launched there (or the worker's disk was wiped).
  starting,    // Launched, but its pid is not recorded yet.
  running,     // Its process is alive.
  exited,      // It ended; exit_code holds its status (143 for SIGTERM, 137 when stop had to SIGKILL it).
  vanished,    // Its process is gone without an exit code (killed from outside, or the host rebooted).
  unreachable, // The worker could not be asked (gcloud failed: host preempted, deleted or down).
};

// "running", "exited", ...
std::string to_string(WorkloadState state);

// One worker's answer.
struct WorkerStatus {
  int worker = 0;
  WorkloadState state = WorkloadState::unreachable;
  int exit_code = -1;     // The workload's status when exited, gcloud's (255 for a lost host) when unreachable.
  long long pid = 0;      // The workload's process (its session leader) when running.
  bool launched = false;  // launch(): this call started it (false when it was already there).
  bool signalled = false; // stop(): this call signalled it (false when it had ended on its own before).
  std::string diagnostic; // What gcloud or the worker said when the answer is not a state.
};

// Launches the command on each of `workers`, detached (setsid, nohup, output to the worker's output.log), and
// returns each worker's state afterwards. Idempotent per worker: a workload already launched for this id is never
// started a second time; its state is reported instead.
std::vector<WorkerStatus> launch(const SliceTarget& target, const std::vector<int>& workers, const LaunchSpec& spec,
                                 std::chrono::milliseconds timeout);

// Asks each worker where the workload stands.
std::vector<WorkerStatus> query(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                                std::chrono::milliseconds timeout);

// Stops the workload on each worker: SIGTERM to its process group (and `docker stop` to its container), then
// SIGKILL after `grace`. Returns the states afterwards: exited with the workload's own status, or 137 when it had
// to be killed; absent or unreachable as query() would say. `signalled` tells a workload this call stopped from one
// that had already ended on its own.
std::vector<WorkerStatus> stop(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                               std::chrono::milliseconds grace, std::chrono::milliseconds timeout);

// What the workload's processes are doing on each worker, as text: every process of its session (the workload's
// process tree) with its state, the kernel function it waits in (wchan) and its command line, read from /proc; its
// kernel stack where /proc lets it be read; and, where py-spy is installed on the worker, `py-spy dump` of each
// Python process. Exit 3 when the worker has no such workload.
std::vector<WorkerRun> stacks(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                              std::chrono::milliseconds timeout);

// The local log of one worker's output: <attempt_dir>/worker-<w>.log.
std::filesystem::path worker_log_path(const std::filesystem::path& attempt_dir, int worker);

// How one worker's stream ended.
struct StreamEnd {
  int worker = 0;
  int exit_code = -1;      // gcloud's: 0 when the workload ended and all its output arrived; 255 when the host
                           // went away; other values when the worker had nothing to stream.
  bool cancelled = false;  // The caller's stop token ended it.
  std::uint64_t bytes = 0; // Bytes appended to the local log by this call.
  std::string diagnostic;  // gcloud's stderr ("Connection to ... closed by remote host.").
};

// Told of the lines just appended to a worker's local log (one or more whole lines, each ending with '\n' but perhaps
// the workload's very last), on the streaming thread, as they are written.
using LineSink = std::function<void(int worker, std::string_view lines)>;

// Streams each worker's output into its local log while the workload runs, starting where the local log ends, so
// that a second attach (from this process or another) neither repeats nor loses a line. Only complete lines are
// written while the stream runs; a last line without a newline is written once the workload has ended. Each write is
// handed to `on_lines` too, when given. Returns when every stream has ended, or soon after `stop` is requested.
// Throws jobman::Error when another process is already attached to one of the logs.
std::vector<StreamEnd> attach(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                              const std::filesystem::path& attempt_dir, const std::stop_token& stop = {},
                              const LineSink& on_lines = {});

} // namespace jobman::remote
