// Which cloud a command talks to and how: Google's TPU API with the user's credentials, or the bundled mock cloud,
// started in the background on first use and shared by every jobman process of the same $JOBMAN_HOME.
#pragma once

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/job_config.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/remote/gcloud.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace jobman::core {

// The project jobman uses on the mock when the settings name none.
inline constexpr const char* kMockProject = "jobman-mock";

// A bundled mock cloud server that is running.
struct MockCloudServer {
  std::string url; // "http://127.0.0.1:PORT".
  long pid = 0;    // The server's process.
};

// $JOBMAN_HOME/mock: the bundled mock's state (state/), its log (server.log) and its address (server.json).
std::filesystem::path mock_cloud_directory();

// The bundled mock serving this $JOBMAN_HOME, if one is running and answers.
std::optional<MockCloudServer> running_mock_cloud();

// The bundled mock serving this $JOBMAN_HOME, started in the background when none is running (with
// --time-scale settings.mock_time_scale and its state under mock_cloud_directory()). Concurrent callers start
// one server between them. When it starts one, says so once on `notice`. Throws jobman::Error when the server
// cannot be found or does not come up.
MockCloudServer ensure_mock_cloud(const config::Settings& settings, std::ostream& notice);

// Everything needed to reach a cloud: its API client, the project, and how to run gcloud against it.
struct CloudAccess {
  config::Settings settings;
  bool mock = true;
  std::string project;                           // The settings' project, or kMockProject on the mock.
  std::shared_ptr<cloud::TpuClient> client;      // Thread-safe.
  std::string gcloud;                            // The gcloud program (Google's, or the mock's stand-in).
  std::map<std::string, std::string> gcloud_env; // Variables gcloud needs: on the mock, its address and a config
                                                 // directory of its own.
  double time_scale = 1;                         // How much faster than real time the cloud runs (the mock's scale).

  // The project and zone as an API location.
  [[nodiscard]] cloud::Location location(const std::string& zone) const { return {project, zone}; }
};

// Connects to the configured cloud: Google when settings.cloud is google (default credentials), otherwise the
// bundled mock (ensure_mock_cloud, talking to it with a token from its metadata path). Throws jobman::Error.
CloudAccess connect_cloud(const config::Settings& settings, std::ostream& notice);

// Puts access.gcloud_env into this process's environment, for the gcloud processes it starts. Call it before
// starting threads.
void export_gcloud_environment(const CloudAccess& access);

// Where commands for a job's node go: access.gcloud, its project, the config's zone, user and key.
remote::SliceTarget slice_target(const CloudAccess& access, const config::JobConfig& config, const std::string& node);

} // namespace jobman::core
