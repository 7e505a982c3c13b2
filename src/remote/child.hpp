// Child processes for the remote layer: gcloud started in its own process group with its output on pipes, and many
// of them run side by side with a deadline.
#pragma once

#include <chrono>
#include <string>
#include <sys/types.h>
#include <vector>

namespace jobman::remote::detail {

// A started child: its pid (also its process group) and the read ends of its output pipes.
struct Child {
  pid_t pid = -1;
  int out_fd = -1; // stdout, and stderr too when they were merged.
  int err_fd = -1; // stderr when kept apart; -1 when merged.
};

// Starts `argv` in its own process group, stdin from /dev/null. With `merge_stderr` stdout and stderr share one pipe
// (interleaved as written); otherwise each has its own.
Child spawn(const std::vector<std::string>& argv, bool merge_stderr);

// Waits for `pid` and returns its exit status, 128 + the signal when a signal ended it.
int wait_exit(pid_t pid);

// Closes `fd` if open and sets it to -1.
void close_fd(int& fd);

// What one child of run_all left: its status, whether its time ran out, and its merged output.
struct ChildRun {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;
};

// Runs every argv at once with stdout and stderr merged and waits for all of them. A child still writing after
// `timeout` gets SIGTERM to its process group, then SIGKILL five seconds later, and is marked timed out.
std::vector<ChildRun> run_all(const std::vector<std::vector<std::string>>& argvs, std::chrono::milliseconds timeout);

} // namespace jobman::remote::detail
