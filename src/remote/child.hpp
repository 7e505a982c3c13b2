// Child processes for the remote layer: gcloud started in its own process group with its output on pipes, and many
// of them run side by side with a deadline.
#pragma once

#include "jobman/util/process.hpp"

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobman::remote::detail {

// Variables set on top of this process's environment for a gcloud child (SliceTarget::environment).
using Environment = std::vector<std::pair<std::string, std::string>>;

// Starts `argv` in its own process group (its pid is the group's id), with `environment` added to its environment.
// With `merge_stderr` stdout and stderr share one pipe (out_fd, interleaved as written); otherwise each has its own
// (out_fd, err_fd). Its stdin is a pipe with `stdin_pipe` (in_fd, non-blocking), /dev/null otherwise. A program that
// cannot be run exits with 127, as a shell's would.
util::Child spawn(const std::vector<std::string>& argv, const Environment& environment, bool merge_stderr,
                  bool stdin_pipe = false);

// Writes as much of `data` as `fd` takes without blocking and returns how much that was; a reader that has gone
// away (EPIPE) counts as taking everything. SIGPIPE is kept from the process.
std::size_t write_some(int fd, std::string_view data);

// What one child of run_all left: its status, whether its time ran out, and its merged output.
struct ChildRun {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;
};

// Runs every argv (each with `environment` added), at most `limit` at a time (0: all at once), with stdout and stderr
// merged, and waits for all of them; inputs[i] (when given) is fed to child i's stdin, which is then closed. A child
// still writing `timeout` after it started gets SIGTERM to its process group, then SIGKILL five seconds later, and
// is marked timed out.
std::vector<ChildRun> run_all(const std::vector<std::vector<std::string>>& argvs, const Environment& environment,
                              std::chrono::milliseconds timeout, const std::vector<std::string>& inputs = {},
                              std::size_t limit = 0);

} // namespace jobman::remote::detail
