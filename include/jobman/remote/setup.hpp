// Setting the workers up for a job, from its config: ssh keys and config entries, the gcsfuse mount, the environment
// (venv, conda or docker), then the user's setup.script. Every module but the script checks before it acts, so a
// rerun on a healthy worker changes nothing; every worker's output goes to <attempt_dir>/setup-<w>.log.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/remote/gcloud.hpp"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace jobman::remote {

// A local file the setup needs on every worker. It is copied to ~/.jobman/files/<remote_name>, named by its content,
// so that a worker that has it already is not sent it again.
struct SetupFile {
  std::string local_path;  // Absolute; empty for a file made from `content`.
  std::string sha256;      // Hex digest of the content.
  std::string remote_name; // "<sha256>-<file name>".
  std::string content;     // The text sent when local_path is empty: setup.script, which the config holds.
};

// What setting a worker up takes: the files to send and the script that runs the modules in order.
struct SetupPlan {
  std::vector<std::string> modules; // "ssh", "gcsfuse", then "venv", "conda" or "docker", then "script"; in order.
  std::vector<SetupFile> files;
  // Shell text; prints "jobman-setup: MODULE unchanged|changed|failed" per module run ("jobman-setup: script failed
  // (exit N)" for a setup script that exited with N).
  std::string script;
};

// Builds the plan from the config. A local file that does not exist is not sent: its module goes on where the
// worker already has what the file would make (the environment, the key) and fails naming the file where it does
// not. setup.script is sent as the file "<sha256>-setup-script.sh" and run last, with bash, from the home directory,
// in the job's environment (the venv activated, or through `conda run`; on the host for docker, not in a container),
// at every setup: it reports changed, or failed with its exit status. Throws jobman::Error naming a local file that
// exists but cannot be read.
SetupPlan plan_setup(const config::JobConfig& config);

// How one module went on one worker.
enum class ModuleOutcome { unchanged, changed, failed };

// "unchanged", "changed", "failed".
std::string to_string(ModuleOutcome outcome);

// One module's result on one worker.
struct ModuleResult {
  std::string module;
  ModuleOutcome outcome = ModuleOutcome::failed;
};

// One worker's setup.
struct WorkerSetup {
  int worker = 0;
  int exit_code = -1;                // gcloud's status for the last step (255: the worker could not be reached).
  bool timed_out = false;            // A step ran out of time.
  std::vector<std::string> uploaded; // Files sent to this worker (their remote names).
  std::vector<ModuleResult> modules; // The modules that ran, in order; the last one failed when the setup did.
  std::string error;                 // One sentence when the setup failed; empty on success.

  // Every module in the plan ran and none failed.
  [[nodiscard]] bool ok() const { return error.empty(); }
  // Something was sent or changed on the worker.
  [[nodiscard]] bool changed() const;
};

// Sets up each of `workers` in parallel: checks which files each worker lacks (when the plan has files), sends only
// those, then runs the modules. Each worker's output is appended to <attempt_dir>/setup-<w>.log. `timeout` bounds each
// step.
std::vector<WorkerSetup> run_setup(const SliceTarget& target, const std::vector<int>& workers, const SetupPlan& plan,
                                   const std::filesystem::path& attempt_dir, std::chrono::milliseconds timeout);

// The command as it runs in the config's environment: inside the venv (~/<name> when the worker has a venv there, as
// the Python jobman makes it, else ~/venvs/<name>), through `conda run`, or in a docker container named
// $JOBMAN_CONTAINER with the JOBMAN_* variables passed in, docker.env_vars NAME=value entries given through a file
// beside run.sh (never on docker's command line), NAME entries passed on with -e NAME, and docker.flags as shell
// text, expanded by the worker's shell as the Python jobman's were. Unchanged for env_type none. Throws
// jobman::Error for an env_vars entry that is neither one NAME=value line nor a variable name, and for a flag over
// more than one line.
std::string environment_command(const config::JobConfig& config, const std::string& command);

// A path from a config as shell text for the worker: "~" and "~/..." become the remote user's home, the rest is
// quoted.
std::string remote_path_expr(const std::string& path);

} // namespace jobman::remote
