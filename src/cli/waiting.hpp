// Waiting for jobs to get somewhere, reading only the store: what wait, create --wait, cancel, delete and clean share.
#pragma once

#include "context.hpp"
#include "jobman/domain/job.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace jobman::cli {

// Where a job has to get.
enum class WaitGoal {
  finished,  // Any terminal phase.
  cancelled, // Not running any more: any terminal phase.
  deleted,   // DELETED, its slice confirmed gone.
  removed,   // Its record gone (clean).
};

// How the wait ended: each job's last record (nullopt once removed), and whether time ran out first.
struct WaitResult {
  std::map<std::int64_t, std::optional<domain::JobRecord>> jobs;
  bool timed_out = false;
};

// Makes sure a supervisor will drive the jobs: unless the settings turn autostart off, starts the bundled mock
// (announcing it on stderr) when it is the cloud, then a background `jobman daemon` when none runs.
void start_supervisor(Context& ctx);

// For the commands that read jobs (list, show, logs): when jobs in the store have nobody driving them (no daemon
// holds its lock and no live lease covers them: a supervisor that crashed, a machine that rebooted), starts the
// supervisor as start_supervisor does, or with autostart off says so on stderr. The lock probe costs microseconds
// and the store is asked only when it finds no daemon. A supervisor that cannot start is a warning, never an error
// of the command.
void keep_jobs_driven(Context& ctx);

// Polls the store until every job reached `goal` or `timeout` passed. Shows progress on stderr when it is a
// terminal. Starts the supervisor in the background when none runs and a job still needs one.
WaitResult wait_for_jobs(Context& ctx, const std::vector<std::int64_t>& ids, WaitGoal goal,
                         std::optional<std::chrono::milliseconds> timeout);

// The exit code of `wait` for a result: 124 when it timed out, else 4 when a job FAILED, 5 when one ended
// CANCELLED or DELETED (or was removed), 0 when all SUCCEEDED.
int wait_exit_code(const WaitResult& result);

} // namespace jobman::cli
