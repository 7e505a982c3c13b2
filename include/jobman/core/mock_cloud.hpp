// The bundled mock cloud: jobman-mock-cloud, started in the background on first use and shared by every jobman
// process of the same $JOBMAN_HOME, which finds it through $JOBMAN_HOME/mock/server.json.
#pragma once

#include "jobman/config/settings.hpp"

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

namespace jobman::core {

// A bundled mock cloud server that is running.
struct MockCloudServer {
  std::string url; // "http://127.0.0.1:PORT".
  long pid = 0;    // The server's process.
};

// $JOBMAN_HOME/mock: the bundled mock's state (state/), its log (server.log) and its address (server.json).
std::filesystem::path mock_cloud_directory();

// The file the bundled mock keeps its admin token in (it makes it, mode 0600, in its state directory).
std::filesystem::path mock_cloud_admin_token_path();

// The bundled mock serving this $JOBMAN_HOME, if one is running and answers.
std::optional<MockCloudServer> running_mock_cloud();

// The bundled mock serving this $JOBMAN_HOME, started in the background when none is running (with
// --time-scale settings.mock_time_scale and its state under mock_cloud_directory()). Concurrent callers start
// one server between them. When it starts one, says so once on `notice`. Throws jobman::Error when the server
// cannot be found or does not come up.
MockCloudServer ensure_mock_cloud(const config::Settings& settings, std::ostream& notice);

} // namespace jobman::core
