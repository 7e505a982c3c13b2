#include "support/host_ssh.hpp"

#include "jobman/cloud/tpu_client.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

namespace jobman::test {

namespace {

using nlohmann::json;

const httplib::Headers& api_auth() {
  static const httplib::Headers headers = {{"Authorization", "Bearer test-token"}};
  return headers;
}

} // namespace

MockHostSsh::MockHostSsh(const TempDir& dir, const MockCloudProcess& mock, const std::vector<std::string>& users,
                         std::string project)
    : dir_(dir / "ssh"), key_(dir_ / "id_ed25519"), project_(std::move(project)), port_(mock.port()) {
  std::filesystem::create_directories(dir_ / "cm");
  // A mock restarted on the same directory keeps the key it was given.
  if (!std::filesystem::exists(key_)) {
    const auto made = run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", key_.string()});
    if (made.exit_code != 0) {
      error_ = "ssh-keygen failed: " + made.err;
      return;
    }
  }
  std::string lines;
  for (const auto& user : users) {
    lines += ssh_keys_entry(user) + "\n";
  }
  httplib::Client client("127.0.0.1", port_);
  const std::string base = "/compute/v1/projects/" + project_;
  const auto current = http_call(client, "GET", base, nullptr, api_auth());
  if (current.status != 200) {
    error_ = "projects.get: " + std::to_string(current.status) + " " + current.text;
    return;
  }
  const json metadata = {{"fingerprint", current.body["commonInstanceMetadata"]["fingerprint"]},
                         {"items", {{{"key", "ssh-keys"}, {"value", lines}}}}};
  const auto set = http_call(client, "POST", base + "/setCommonInstanceMetadata", metadata, api_auth());
  if (set.status != 200) {
    error_ = "setCommonInstanceMetadata: " + std::to_string(set.status) + " " + set.text;
    return;
  }
  // Done once the hosts have the keys, as at Google.
  const auto done =
      http_call(client, "POST", base + "/global/operations/" + set.body["name"].get<std::string>() + "/wait",
                json::object(), api_auth());
  if (done.status != 200 || done.body["status"] != "DONE") {
    error_ = "the metadata change did not finish: " + done.text;
  }
}

std::string MockHostSsh::ssh_keys_entry(const std::string& user) const {
  return core::ssh_keys_entry(key_, user);
}

std::optional<remote::SliceTarget> MockHostSsh::target(const std::string& zone, const std::string& node,
                                                       const std::string& user, std::chrono::milliseconds patience) {
  httplib::Client client("127.0.0.1", port_);
  const std::string name = "/v2/projects/" + project_ + "/locations/" + zone + "/nodes/" + node;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  do {
    const auto got = http_call(client, "GET", name, nullptr, api_auth());
    const auto state = got.status == 200 ? got.body.value("state", "") : std::string();
    if (state == "STOPPING" || state == "STOPPED" || state == "PREEMPTED" || state == "TERMINATED" ||
        state == "DELETING") {
      return std::nullopt; // No hosts, and none coming.
    }
    if (state == "READY") {
      const auto attributes =
          http_call(client, "POST", name + ":getGuestAttributes", json{{"queryPath", ""}}, api_auth());
      std::vector<core::WorkerAttributes> workers;
      for (const auto& worker : attributes.body.value("guestAttributes", json::array())) {
        core::WorkerAttributes each;
        for (const auto& item : worker["queryValue"].value("items", json::array())) {
          each[item.value("namespace", "") + "/" + item.value("key", "")] = item.value("value", "");
        }
        workers.push_back(std::move(each));
      }
      const auto hosts = core::slice_hosts_of(cloud::parse_node(got.body), workers, false);
      if (hosts.complete() && !hosts.hosts.empty()) {
        const auto node_dir = dir_ / (zone + "-" + node);
        core::save_slice_hosts(node_dir, hosts);
        remote::SliceTarget target;
        target.transport = config::Transport::ssh;
        target.project = project_;
        target.zone = zone;
        target.node = node;
        target.user = user;
        target.ssh_key_file = key_.string();
        target.hosts = hosts.hosts;
        target.known_hosts = core::known_hosts_file(node_dir).string();
        target.control_dir = (dir_ / "cm").string();
        return target;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  return std::nullopt;
}

std::vector<int> MockHostSsh::workers_of(const std::string& selection, int count) {
  std::vector<int> workers;
  if (selection == "all") {
    for (int w = 0; w < count; ++w) {
      workers.push_back(w);
    }
    return workers;
  }
  for (const auto& part : util::split(selection, ',')) {
    const auto dash = part.find('-');
    const auto first = util::parse_int(part.substr(0, dash));
    const auto last = dash == std::string::npos ? first : util::parse_int(part.substr(dash + 1));
    if (!first || !last || *first < 0 || *last >= count || *first > *last) {
      return {};
    }
    for (auto w = *first; w <= *last; ++w) {
      workers.push_back(static_cast<int>(w));
    }
  }
  return workers;
}

namespace {

// Runs one argv per worker at once; outputs joined in worker order, the first failure's status.
RunResult run_each(const std::vector<std::vector<std::string>>& argvs, const remote::SliceTarget& target) {
  RunOptions options;
  for (const auto& [name, value] : target.environment) {
    options.env[name] = value;
  }
  std::vector<std::future<RunResult>> runs;
  runs.reserve(argvs.size());
  for (const auto& argv : argvs) {
    runs.push_back(std::async(std::launch::async, [&argv, &options] { return run_program(argv, options); }));
  }
  RunResult all{0, "", ""};
  for (auto& run : runs) {
    auto one = run.get();
    all.out += one.out;
    all.err += one.err;
    if (all.exit_code == 0 && one.exit_code != 0) {
      all.exit_code = one.exit_code;
    }
  }
  return all;
}

} // namespace

RunResult
MockHostSsh::on_workers(const std::string& zone, const std::string& node, const std::string& selection,
                        const std::string& user,
                        const std::function<std::vector<std::string>(const remote::SliceTarget&, int)>& argv) {
  // Every host up, its host keys published: a 64-host slice on a loaded two-core machine may take a while.
  const auto slice = target(zone, node, user, std::chrono::seconds(60));
  if (!slice) {
    return {255, "", "node " + node + " in " + zone + " is not up"};
  }
  const auto workers = workers_of(selection, static_cast<int>(slice->hosts.size()));
  if (workers.empty()) {
    return {2, "", "no workers '" + selection + "' on " + node};
  }
  std::vector<std::vector<std::string>> argvs;
  for (const int w : workers) {
    argvs.push_back(argv(*slice, w));
  }
  return run_each(argvs, *slice);
}

RunResult MockHostSsh::ssh(const std::string& zone, const std::string& node, const std::string& selection,
                           const std::string& command, const std::string& user) {
  return on_workers(zone, node, selection, user,
                    [&](const remote::SliceTarget& slice, int w) { return remote::ssh_argv(slice, w, command); });
}

RunResult MockHostSsh::scp_to(const std::string& zone, const std::string& node, const std::string& selection,
                              const std::vector<std::string>& sources, const std::string& remote_path,
                              const std::string& user, bool recursive) {
  return on_workers(zone, node, selection, user, [&](const remote::SliceTarget& slice, int w) {
    auto argv = remote::scp_argv(slice, w, sources, remote_path);
    if (recursive) {
      argv.insert(argv.begin() + 1, "-r");
    }
    return argv;
  });
}

RunResult MockHostSsh::scp_from(const std::string& zone, const std::string& node, int worker,
                                const std::string& remote_path, const std::string& local_path,
                                const std::string& user) {
  auto read = ssh(zone, node, std::to_string(worker), "cat -- " + remote::shell_quote(remote_path), user);
  if (read.exit_code == 0) {
    util::write_file_atomic(local_path, read.out, 0644);
    read.out.clear();
  }
  return read;
}

} // namespace jobman::test
