// Which cloud a command talks to and how: Google's TPU API with the user's credentials, or a mock cloud (the bundled
// one of core/mock_cloud.hpp, or one of one's own named by api_endpoint).
#pragma once

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/job_config.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/remote/gcloud.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>

namespace jobman::core {

// The project jobman uses on the mock when the settings name none.
inline constexpr const char* kMockProject = "jobman-mock";

// Everything needed to reach a cloud: its API client, the project, and how to run gcloud against it.
struct CloudAccess {
  config::Settings settings;
  bool mock = true;
  std::string project;                           // The settings' project, or kMockProject on the mock.
  std::shared_ptr<cloud::TpuClient> client;      // Thread-safe.
  std::string gcloud;                            // The gcloud program (Google's, or the mock's stand-in).
  std::map<std::string, std::string> gcloud_env; // Variables gcloud needs: on the mock, its addresses and a config
                                                 // directory of its own (core/gcloud_setup.hpp).
  std::filesystem::path mock_key_file{};         // On the mock: the service-account key gcloud logs in with (the
                                                 // bundled mock's, or JOBMAN_MOCK_SERVICE_ACCOUNT_KEY); may be empty.
  double time_scale = 1;                         // How much faster than real time the cloud runs (the mock's scale).

  // The project and zone as an API location.
  [[nodiscard]] cloud::Location location(const std::string& zone) const { return {project, zone}; }
};

// How long a caller is willing to wait for the cloud.
enum class CloudPatience {
  normal, // The retry policy's defaults: the supervisor and the commands that change the cloud.
  quick,  // Two attempts, short timeouts: a check that has an answer of its own to fall back to.
};

// Connects to the configured cloud: Google when settings.cloud is google (default credentials), otherwise the
// bundled mock (ensure_mock_cloud, talking to it with a token from its metadata path). Throws jobman::Error.
// The largest page the TPU API serves: one list call per zone and kind for up to 1,000 resources.
inline constexpr int kListPageSize = 1000;

// The id part of a resource's name: ID in "projects/P/locations/Z/queuedResources/ID" or ".../nodes/ID".
std::string resource_name_id(const std::string& name);

CloudAccess connect_cloud(const config::Settings& settings, std::ostream& notice,
                          CloudPatience patience = CloudPatience::normal);

// Where commands for an attempt's slice go: access.gcloud and its project; the attempt's node and zone (the config's
// zone only for an attempt that records none); the config's user and key (default_ssh_identity() when it names
// none); access.gcloud_env for every gcloud process; the hosts' addresses, ports and keys (kept in the attempt's
// directory, or asked of the API). With the gcloud transport, gcloud is first logged in with the mock's key on the
// mock (once; not when no key is known), and the hosts' keys are added to its known-hosts file so that it checks them
// strictly. Throws jobman::Error when either cannot be done.
remote::SliceTarget slice_target(const CloudAccess& access, const config::JobConfig& config,
                                 const domain::AttemptRecord& attempt);

} // namespace jobman::core
