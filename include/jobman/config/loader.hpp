// Reading job configs: YAML, ${section.key} interpolation, --set overrides, sweeps, validation.
#pragma once

#include "jobman/config/job_config.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace jobman::config {

// Command-line changes applied before validation.
struct LoadOptions {
  std::vector<std::string> set_overrides; // "key.path=value", value parsed as a YAML scalar or flow node.
  std::vector<std::string> sweep_args;    // "key.path=v1,v2,..."; the cartesian product with `sweep:`.
  std::string default_zone;               // Zone used when the config has no tpu.zone (the settings' zone).
  // The text is a recorded config (a job's snapshot): its ${oc.env:...} calls are kept, for expand_environment.
  bool recorded = false;
  // A config without a zone (and no default) is no problem: a task queued for a worker in any zone.
  bool zone_optional = false;
};

// Loads a config file and expands sweeps: one JobConfig per combination (one when there is no sweep).
// Throws ConfigError (every problem found, each naming file, line, column and key) or Error (I/O).
std::vector<JobConfig> load_job_configs(const std::string& path, const LoadOptions& options = {});

// The same for text already in memory; `display_name` is what messages call the file.
std::vector<JobConfig> parse_job_configs(const std::string& text, const std::string& display_name,
                                         const LoadOptions& options = {});

// Puts into a recorded config the values of the ${oc.env:...} calls it kept: `lookup`'s for the variable, else the
// call's default. Returns the names of the variables that have neither; their calls are left as written.
std::vector<std::string>
expand_environment(JobConfig& config, const std::function<std::optional<std::string>(const std::string& name)>& lookup);

// The resolved config as JSON (for --json and --dry-run).
std::string to_json(const JobConfig& config, int indent = 2);

} // namespace jobman::config
