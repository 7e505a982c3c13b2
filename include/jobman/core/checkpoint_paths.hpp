// Checkpoint directories two jobs share: a copy of a config run again resumes the first job's run when its command
// names the same checkpoint directory. `create` warns before recording such a job.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/store/job_store.hpp"

#include <string>
#include <vector>

namespace jobman::core {

// The checkpoint directories `command` names as the value of a checkpoint flag (--ckpt-dir, --ckpt_dir,
// --checkpoint-dir, --checkpoint_dir, --checkpoint-path, --checkpoint_path, --save-dir, --output-dir, ... with the
// value after '=' or as the next word), in order. A value that the shell expands ($JOBMAN_JOB_ID, $HOME, ...) is
// kept as written.
std::vector<std::string> checkpoint_paths(const std::string& command);

// For each config whose command names a checkpoint directory with no shell expansion in it (the same for every run
// of that config): a warning when a job of the store that has run (at least one attempt; the newest 1,000 of the
// last 90 days) or another config of the same create names the same directory, so the new job would resume from
// checkpoints another job wrote. Each warning names the config file, the directory and the other job.
std::vector<std::string> shared_checkpoint_warnings(const store::JobStore& store,
                                                    const std::vector<config::JobConfig>& configs);

} // namespace jobman::core
