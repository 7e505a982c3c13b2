// The config of a worker started from jobman-lite's flags (`jobman worker start -a ACC -z ZONE ...`): a document in
// the config layout, so that a worker is recorded, shown and driven as a job is.
#pragma once

#include "jobman/domain/pricing.hpp"

#include <optional>
#include <string>

namespace jobman::config {

// What `worker start` was given.
struct WorkerFlags {
  std::string name;                       // The worker's name (and its slices' name prefix).
  std::string accelerator;                // "v4-8".
  std::string zone;                       // "us-central2-b".
  std::optional<domain::Pricing> pricing; // nullopt for spot.
  std::string allocation_mode;            // "queued-resources" or "tpu-vm"; "" for queued resources.
  std::string version;                    // The runtime version; "" for the accelerator's default.
  std::string ssh_user;                   // The user on the hosts; "" for gcloud's default.
  std::string startup_script;             // The bootstrap script's absolute path (setup.script reads it); "" for none.
  std::optional<int> max_setup_failures;  // Setup failures (a bootstrap that fails) retried before the worker fails.
  std::string idle_release;               // "30m": release the slice after so long without a task; "" never.
};

// The worker's config document, which load_job_configs/parse_job_configs read and check like any config.
std::string worker_config_yaml(const WorkerFlags& flags);

} // namespace jobman::config
