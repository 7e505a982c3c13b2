// State shared by the command implementations: output streams, output mode, the store, the chosen action.
#pragma once

#include "jobman/store/job_store.hpp"

#include <functional>
#include <iostream>
#include <memory>
#include <optional>

namespace jobman::cli {

// Everything a command needs from its surroundings; tests construct one with string streams.
struct Context {
  std::ostream* out = &std::cout; // Data goes here.
  std::ostream* err = &std::cerr; // Progress and hints for people go here.
  bool color = false;             // ANSI colour on `out`.
  bool verbose = false;
  bool daemon = false;         // The command is the long-running supervisor: timestamped logs.
  std::function<int()> action; // The parsed command, run after parsing succeeded.

  // The job store, opened on first use.
  store::JobStore& store();

private:
  std::optional<store::JobStore> opened_;
};

// Turns a job id argument into a number; throws UsageError naming the argument.
std::int64_t parse_job_id_argument(const std::string& text);

} // namespace jobman::cli
