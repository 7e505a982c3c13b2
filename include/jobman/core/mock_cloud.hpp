// The bundled mock cloud: jobman-mock-cloud, started in the background on first use and shared by every jobman
// process of the same $JOBMAN_HOME, which finds it through $JOBMAN_HOME/mock/server.json.
#pragma once

#include "jobman/config/settings.hpp"
#include "jobman/core/zone_offers.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <set>
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

// The service-account key the bundled mock writes when it starts (mode 0600, in its state directory; its token_uri is
// the mock). The mock trusts every key it ever wrote there, so a gcloud logged in with an earlier one still works.
std::filesystem::path mock_cloud_service_account_key_path();

// The bundled mock serving this $JOBMAN_HOME, if one is running and answers.
std::optional<MockCloudServer> running_mock_cloud();

// The bundled mock serving this $JOBMAN_HOME, started in the background when none is running (with
// --time-scale settings.mock_time_scale, its state under mock_cloud_directory(), and --idle-exit 600: it exits once
// unused for ten minutes with no slice alive, and the next call starts it again). Concurrent callers start one
// server between them. When it starts one, says so once on `notice`. Throws jobman::Error when the server
// cannot be found or does not come up.
MockCloudServer ensure_mock_cloud(const config::Settings& settings, std::ostream& notice);

// The pools a mock cloud's world has: for each zone, TPU generation and tier ("spot", "on_demand", "flex_start",
// "reserved", "best_effort"), its chips and the project's quota (a best-effort pool has a quota of its own and no
// chips: it runs on the spot pool's), from the admin metrics of the bundled mock (its admin token in its state
// directory) or of the one `settings.api_endpoint` names when JOBMAN_MOCK_ADMIN_TOKEN_FILE gives its token. Empty when
// the cloud is Google's or the mock cannot be asked: Google's API does not say which tiers a zone has, nor how much.
std::map<std::string, std::map<std::string, std::map<std::string, TierCapacity>>>
mock_cloud_capacity(const config::Settings& settings);

// The tiers each zone has of each generation, by zone then generation: the pools `capacity` names.
std::map<std::string, std::map<std::string, std::set<std::string>>>
tiers_of(const std::map<std::string, std::map<std::string, std::map<std::string, TierCapacity>>>& capacity);

} // namespace jobman::core
