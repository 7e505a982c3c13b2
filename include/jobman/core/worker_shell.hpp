// A shell on one of a job's worker hosts: the slice the job's current attempt runs on, and the ssh (or gcloud)
// command that reaches it.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"

#include <string>
#include <vector>

namespace jobman::core {

// The job's current attempt when its slice may still be up: the attempt has a node, its slice was not released, and
// the job is unfinished or still has its slice to release. Throws jobman::Error saying why not otherwise
// ("job 000042 has no slice: it is DELETED").
domain::AttemptRecord live_attempt(const store::JobStore& store, const domain::JobRecord& job);

// The argv of ssh (or gcloud's) to `worker` of the attempt's node, in the attempt's zone: the user's shell when
// `command` is empty (with a terminal of its own when `terminal`), otherwise that shell text run there; either with
// the variables the attempt's workload got on that worker (JOBMAN_WORKER_ID, ...), when it was launched there.
std::vector<std::string> worker_shell_argv(const CloudAccess& access, const config::JobConfig& config,
                                           const domain::AttemptRecord& attempt, int worker, const std::string& command,
                                           bool terminal = false);

} // namespace jobman::core
