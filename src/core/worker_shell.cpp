#include "jobman/core/worker_shell.hpp"

#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/remote/gcloud.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>

namespace jobman::core {

domain::AttemptRecord live_attempt(const store::JobStore& store, const domain::JobRecord& job) {
  const std::string prefix = "job " + domain::format_job_id(job.id) + " has no slice: ";
  const std::string phase(domain::to_string(job.phase));
  const auto attempts = store.attempts().of(job.id);
  const auto current = std::find_if(attempts.begin(), attempts.end(),
                                    [&](const domain::AttemptRecord& a) { return a.number == job.attempt; });
  const bool released = current != attempts.end() && current->released_ms.has_value();
  if (domain::is_terminal(job.phase) && (!job.cleanup_pending || current == attempts.end() || released)) {
    throw Error(prefix + "it is " + phase);
  }
  if (job.attempt < 1) {
    throw Error(prefix + "it has not started yet (" + phase + ")");
  }
  if (current != attempts.end() && current->create_pending && !current->ended_ms) {
    throw Error(prefix + "attempt " + std::to_string(job.attempt) +
                (current->node_only() ? "'s node " : "'s queued resource ") + current->slice_name() +
                " is still being requested (" + phase + ")");
  }
  if (current == attempts.end() || current->node.empty()) {
    throw Error(prefix + "attempt " + std::to_string(job.attempt) + " has no node yet (" + phase + ")");
  }
  if (released) {
    throw Error(prefix + "the slice of attempt " + std::to_string(job.attempt) + " is gone (" + phase + ")");
  }
  return *current;
}

std::vector<std::string> worker_shell_argv(const CloudAccess& access, const config::JobConfig& config,
                                           const domain::AttemptRecord& attempt, int worker, const std::string& command,
                                           bool terminal) {
  const auto target = slice_target(access, config, attempt);
  const auto variables = remote::workload_variables_script(workload_id(attempt.job_id, attempt.number));
  // A shell that is not a login shell: a login shell's profile may set PATH anew, and lose what the host's own
  // session environment put there.
  return command.empty() ? remote::shell_argv(target, worker, variables + "exec \"${SHELL:-/bin/bash}\"", terminal)
                         : remote::ssh_argv(target, worker, variables + command);
}

} // namespace jobman::core
