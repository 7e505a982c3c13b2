// Runs the jobman binary (or any program) as a child process and captures what it did.
#pragma once

#include "jobman/util/process.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace jobman::test {

// What a finished child process left behind.
struct RunResult {
  int exit_code = -1; // Exit status, or 128 + signal.
  std::string out;    // Standard output.
  std::string err;    // Standard error.
};

// How to run it.
struct RunOptions {
  std::map<std::string, std::string> env; // Set (or, with an empty value, unset) on top of the parent's.
  std::string input;                      // Written to standard input, then closed.
  std::string cwd;                        // Working directory; empty means the parent's.
};

// `argv` (argv[0] is a path) as a child process with `changes` applied to this process's environment (an empty value
// unsets the variable). The process module builds the environment before fork: between fork and exec a child of a
// multi-threaded process may only make async-signal-safe calls, and setenv (which allocates) can deadlock there on a
// lock another thread held.
util::ProcessBuilder child_process(const std::vector<std::string>& argv,
                                   const std::map<std::string, std::string>& changes);

// Runs `argv` (argv[0] is a path) and waits for it.
RunResult run_program(const std::vector<std::string>& argv, const RunOptions& options = {});

// Runs the built jobman binary with `args`; JOBMAN_AUTOSTART is 0 unless `options.env` sets it.
RunResult run_jobman(const std::vector<std::string>& args, const RunOptions& options = {});

// The built jobman binary's path.
std::string jobman_binary();

// The ids of the processes now running (the numeric entries of /proc).
std::vector<std::string> process_ids();

// The processes whose environment names `home` as its JOBMAN_HOME (a supervisor or mock that a command under test
// started in the background): pid and command line (arguments joined by spaces).
std::vector<std::pair<int, std::string>> processes_of(const std::filesystem::path& home);

// Whether process `pid` (a child or not) has exited, or exits within `patience`: waited on through a pidfd, which
// becomes readable when the process exits, with no polling. A process that cannot be found has exited.
bool exits_within(int pid, std::chrono::milliseconds patience);

// Kills (SIGKILL) every process of processes_of(home) but a FUSE mount's fusermount3, which unmounts once its
// server is gone, and the mock's gcs meter, which unmounts and exits once its mock is gone: it is awaited (10 s at
// most, then killed).
void kill_processes_of(const std::filesystem::path& home);

} // namespace jobman::test
