#include "jobman/core/cloud.hpp"

#include "jobman/cloud/auth.hpp"
#include "jobman/core/gcloud_setup.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/mock_cloud.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"

#include <chrono>
#include <filesystem>
#include <optional>

namespace jobman::core {

std::string resource_name_id(const std::string& name) {
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

CloudAccess connect_cloud(const config::Settings& settings, std::ostream& notice, CloudPatience patience) {
  CloudAccess access;
  access.settings = settings;
  access.mock = settings.cloud == config::CloudKind::mock;
  access.gcloud = settings.gcloud;
  cloud::TpuClientOptions options;
  if (patience == CloudPatience::quick) {
    options.retry.max_attempts = 2;
    options.retry.max_total = std::chrono::seconds(5);
    options.http.connect_timeout = std::chrono::seconds(3);
    options.http.request_timeout = std::chrono::seconds(10);
  }
  std::shared_ptr<cloud::CachedTokenSource> tokens;
  if (access.mock) {
    // A mock of one's own (tests, benchmarks) is named by api_endpoint; otherwise the bundled one.
    MockCloudServer server;
    if (!settings.api_endpoint.empty()) {
      server.url = settings.api_endpoint;
      while (server.url.ends_with('/')) {
        server.url.pop_back();
      }
      if (server.url.ends_with("/v2")) {
        server.url.resize(server.url.size() - 3);
      }
    } else {
      server = ensure_mock_cloud(settings, notice);
    }
    access.project = settings.project.empty() ? kMockProject : settings.project;
    access.time_scale = settings.mock_time_scale;
    options.endpoint = server.url + "/v2/";
    // The mock serves the Compute and OS Login calls jobman makes beside the TPU API's.
    options.compute_endpoint = server.url + "/compute/v1/";
    options.oslogin_endpoint = server.url + "/oslogin/v1/";
    options.storage_endpoint = server.url + "/storage/v1/";
    // The mock's operations finish in simulated time; poll them at its pace.
    options.poll_initial = std::chrono::milliseconds(50);
    options.poll_max = std::chrono::milliseconds(500);
    const auto host = server.url.substr(server.url.find("://") + 3);
    tokens = std::make_shared<cloud::CachedTokenSource>(cloud::make_metadata_token_source(host));
    // Google's gcloud, in a configuration directory of its own, logged in with the mock's service-account key (the
    // bundled mock writes it at start; a mock of one's own names it in JOBMAN_MOCK_SERVICE_ACCOUNT_KEY).
    access.gcloud_env = mock_gcloud_environment(server.url, access.project, mock_cloud_directory() / "gcloud");
    if (settings.api_endpoint.empty()) {
      access.mock_key_file = mock_cloud_service_account_key_path();
    } else if (auto given = util::getenv_nonempty("JOBMAN_MOCK_SERVICE_ACCOUNT_KEY")) {
      access.mock_key_file = *given;
    }
  } else {
    if (settings.project.empty()) {
      throw UsageError("cloud is google but no project is set; set 'project' in " + config::settings_path() +
                       " or JOBMAN_PROJECT");
    }
    access.project = settings.project;
    options.endpoint = cloud::resolve_tpu_endpoint(settings.api_endpoint);
    options.storage_endpoint = cloud::resolve_storage_endpoint(options.endpoint);
    tokens = std::make_shared<cloud::CachedTokenSource>(cloud::make_default_token_source(settings.gcloud));
  }
  access.client = std::make_shared<cloud::TpuClient>(tokens, options);
  return access;
}

namespace {

// The hosts of the attempt's slice as the supervisor found them when the slice came up; with `ask`, asked of the API
// again when they are not kept here (another machine's supervisor brought the slice up) or some host had not
// published its key yet, with the account OS Login gives `key_file`'s key when OS Login is on for the node. nullopt
// when none is known.
std::optional<SliceHosts> attempt_hosts(const CloudAccess& access, const config::JobConfig& config,
                                        const domain::AttemptRecord& attempt, const std::string& zone,
                                        const std::string& key_file, bool ask) {
  const auto dir = attempt_directory(attempt.job_id, attempt.number);
  auto hosts = load_slice_hosts(dir);
  if (ask && (!hosts || !hosts->complete()) && access.client) {
    const cloud::Location where{access.project, zone};
    // Every slice's node, for a multislice job; all of them or none.
    std::vector<std::pair<std::string, SliceHosts>> per_node;
    std::optional<cloud::Node> first;
    for (const auto& id : slice_node_ids(attempt.node, attempt.node_only() ? 1 : config.tpu.slices)) {
      const auto node = access.client->get_node(where, id);
      if (!node) {
        return hosts;
      }
      per_node.emplace_back(
          id, slice_hosts_of(*node, access.client->guest_attributes(where, id), reached_internally(config)));
      if (!first) {
        first = node;
      }
    }
    hosts = per_node.size() == 1 ? per_node.front().second : join_slice_hosts(per_node);
    std::map<std::string, std::string> project;
    try {
      project = access.client->project_metadata(access.project);
    } catch (const std::exception&) {
      // Reading it needs the Compute API: without it, the node's own metadata decides, as for the supervisor.
    }
    if (os_login_enabled(first->metadata, project)) {
      hosts->user =
          access.client->import_ssh_public_key(access.client->account(), access.project, ssh_public_key(key_file));
    }
    save_slice_hosts(dir, *hosts);
  }
  return hosts;
}

// gcloud's HOME: the one its environment names, else this process's.
std::filesystem::path gcloud_home(const remote::SliceTarget& target) {
  for (const auto& [name, value] : target.environment) {
    if (name == "HOME" && !value.empty()) {
      return value;
    }
  }
  return util::home_dir();
}

} // namespace

remote::SliceTarget slice_target(const CloudAccess& access, const config::JobConfig& config,
                                 const domain::AttemptRecord& attempt) {
  auto target = remote::slice_target(access.settings, config, attempt.node);
  if (!attempt.zone.empty()) {
    target.zone = attempt.zone;
  }
  target.gcloud = access.gcloud;
  target.project = access.project;
  target.environment.assign(access.gcloud_env.begin(), access.gcloud_env.end());
  // OpenSSH cannot go without them; gcloud finds the hosts itself, and checks their keys strictly when the supervisor
  // kept them (it waits for every host's key before it sets a slice up).
  if (target.ssh_key_file.empty()) {
    // Made once, safely, before any gcloud runs: gcloud would otherwise make ~/.ssh/google_compute_engine itself, in
    // each of the processes that start at once for the workers of a slice, which would overwrite each other's.
    target.ssh_key_file = default_ssh_identity().string();
  }
  const auto hosts = attempt_hosts(access, config, attempt, target.zone, target.ssh_key_file,
                                   target.transport == config::Transport::ssh);
  if (hosts) {
    target.hosts = hosts->hosts;
  }
  if (target.transport == config::Transport::gcloud) {
    // A mock of one's own whose key is not named is left to the configuration gcloud has (a real gcloud without an
    // account there says so itself).
    if (access.mock && !access.mock_key_file.empty()) {
      const auto config_dir = access.gcloud_env.find("CLOUDSDK_CONFIG");
      activate_service_account(access.gcloud, access.gcloud_env,
                               config_dir == access.gcloud_env.end() ? std::filesystem::path()
                                                                     : std::filesystem::path(config_dir->second),
                               access.mock_key_file);
    }
    // The hosts' keys from their guest attributes, where gcloud looks for them: it then checks them from the first
    // connection instead of taking whatever key a host shows then. Until every host has published its key, gcloud
    // does that, and records the keys in the same file (in a directory it would not make itself).
    const auto home = gcloud_home(target);
    util::ensure_directory(gcloud_known_hosts_file(home).parent_path(), 0700);
    target.host_keys_known = hosts && add_gcloud_known_hosts(*hosts, home);
    return target;
  }
  target.known_hosts = known_hosts_file(attempt_directory(attempt.job_id, attempt.number)).string();
  // Sockets live in a short directory of jobman's home: a socket's path has room for 107 bytes.
  const auto control = config::jobman_home() / "cm";
  util::ensure_directory(control, 0700);
  target.control_dir = control.string();
  if (hosts && !hosts->user.empty()) {
    target.user = hosts->user; // OS Login names the account; no other opens the hosts to jobman's key.
  } else if (target.user.empty()) {
    target.user = remote_user(config);
  }
  return target;
}

} // namespace jobman::core
