// Child processes for the remote layer: gcloud started in its own process group with its output on pipes, and many
// of them run side by side with a deadline.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace jobman::remote::detail {

// A started child: its pid (also its process group) and the read ends of its output pipes.
struct Child {
  pid_t pid = -1;
  int out_fd = -1; // stdout, and stderr too when they were merged.
  int err_fd = -1; // stderr when kept apart; -1 when merged.
  int in_fd = -1;  // The write end of its stdin when it was given a pipe; -1 for /dev/null.
};

// Starts `argv` in its own process group. With `merge_stderr` stdout and stderr share one pipe (interleaved as
// written); otherwise each has its own. Its stdin is a pipe (in_fd) with `stdin_pipe`, /dev/null otherwise.
Child spawn(const std::vector<std::string>& argv, bool merge_stderr, bool stdin_pipe = false);

// Writes as much of `data` as `fd` takes without blocking and returns how much that was; a reader that has gone
// away (EPIPE) counts as taking everything. SIGPIPE is kept from the process.
std::size_t write_some(int fd, std::string_view data);

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

// Runs every argv at once with stdout and stderr merged and waits for all of them; inputs[i] (when given) is fed to
// child i's stdin, which is then closed. A child still writing after `timeout` gets SIGTERM to its process group,
// then SIGKILL five seconds later, and is marked timed out.
std::vector<ChildRun> run_all(const std::vector<std::vector<std::string>>& argvs, std::chrono::milliseconds timeout,
                              const std::vector<std::string>& inputs = {});

} // namespace jobman::remote::detail
