#include "jobman/core/cloud.hpp"

#include "jobman/cloud/auth.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/mock_cloud.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"

#include <chrono>

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
    // The mock's operations finish in simulated time; poll them at its pace.
    options.poll_initial = std::chrono::milliseconds(50);
    options.poll_max = std::chrono::milliseconds(500);
    const auto host = server.url.substr(server.url.find("://") + 3);
    tokens = std::make_shared<cloud::CachedTokenSource>(cloud::make_metadata_token_source(host));
    access.gcloud_env = {{"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU", server.url + "/"},
                         {"CLOUDSDK_CONFIG", (mock_cloud_directory() / "gcloud").string()},
                         {"CLOUDSDK_CORE_PROJECT", access.project}};
    // The mock's gcloud reaches the worker hosts with the mock's admin token, read from this file; a mock of one's
    // own is reached with the file the user names in JOBMAN_MOCK_ADMIN_TOKEN_FILE.
    if (settings.api_endpoint.empty()) {
      access.gcloud_env["JOBMAN_MOCK_ADMIN_TOKEN_FILE"] = mock_cloud_admin_token_path().string();
    }
  } else {
    if (settings.project.empty()) {
      throw UsageError("cloud is google but no project is set; set 'project' in " + config::settings_path() +
                       " or JOBMAN_PROJECT");
    }
    access.project = settings.project;
    options.endpoint = cloud::resolve_tpu_endpoint(settings.api_endpoint);
    tokens = std::make_shared<cloud::CachedTokenSource>(cloud::make_default_token_source(settings.gcloud));
  }
  access.client = std::make_shared<cloud::TpuClient>(tokens, options);
  return access;
}

remote::SliceTarget slice_target(const CloudAccess& access, const config::JobConfig& config,
                                 const domain::AttemptRecord& attempt) {
  auto target = remote::slice_target(access.settings, config, attempt.node);
  if (!attempt.zone.empty()) {
    target.zone = attempt.zone;
  }
  target.gcloud = access.gcloud;
  target.project = access.project;
  target.environment.assign(access.gcloud_env.begin(), access.gcloud_env.end());
  if (target.transport == config::Transport::ssh) {
    // The hosts as the supervisor found them when the slice came up; asked of the API again when they are not kept
    // here (another machine's supervisor brought the slice up) or some host had not published its key yet.
    const auto dir = attempt_directory(attempt.job_id, attempt.number);
    auto hosts = load_slice_hosts(dir);
    if ((!hosts || !hosts->complete()) && access.client) {
      const cloud::Location where{access.project, target.zone};
      if (const auto node = access.client->get_node(where, attempt.node)) {
        hosts = slice_hosts_of(*node, access.client->guest_attributes(where, attempt.node), reached_internally(config));
        save_slice_hosts(dir, *hosts);
      }
    }
    if (hosts) {
      target.hosts = hosts->hosts;
    }
    target.known_hosts = known_hosts_file(dir).string();
    // Sockets live in a short directory of jobman's home: a socket's path has room for 107 bytes.
    const auto control = config::jobman_home() / "cm";
    util::ensure_directory(control, 0700);
    target.control_dir = control.string();
    if (target.ssh_key_file.empty()) {
      target.ssh_key_file = default_ssh_identity().string();
    }
    if (target.user.empty()) {
      target.user = remote_user(config);
    }
  }
  return target;
}

} // namespace jobman::core
