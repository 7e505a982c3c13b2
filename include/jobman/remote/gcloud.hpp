// Running commands on a slice's worker hosts through `gcloud compute tpus tpu-vm ssh`, every worker in parallel.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::remote {

// Quotes `text` for a POSIX shell: the shell reads it back as exactly one word equal to `text`, whatever it holds
// (quotes, $, backticks, newlines, any bytes).
std::string shell_quote(std::string_view text);

// Where commands go: the gcloud program and the TPU node.
struct SliceTarget {
  std::string gcloud = "gcloud"; // The program (Google's, or the mock's stand-in).
  std::string project;           // --project.
  std::string zone;              // --zone.
  std::string node;              // The TPU node's name.
  std::string user;              // Remote user; empty for gcloud's default.
};

// The argv of `gcloud compute tpus tpu-vm ssh` running `command` on one worker. The command travels as one argv
// element: no local shell ever sees it.
std::vector<std::string> ssh_argv(const SliceTarget& target, int worker, const std::string& command);

// What one worker's run of a command left.
struct WorkerRun {
  int worker = 0;         // The worker's index.
  int exit_code = -1;     // gcloud's status: the command's own, 255 when the host was unreachable or lost.
  bool timed_out = false; // The step's time ran out and the run was stopped.
  std::string output;     // Its stdout and stderr, interleaved as written.
};

// Runs `command` on each of `workers` in parallel, one gcloud process per worker with its output kept apart, and
// waits for all of them. A run still going after `timeout` gets SIGTERM, then SIGKILL, and is marked timed out.
std::vector<WorkerRun> run_on_workers(const SliceTarget& target, const std::vector<int>& workers,
                                      const std::string& command, std::chrono::milliseconds timeout);

} // namespace jobman::remote
