#include "jobman/core/slice_hosts.hpp"

#include "jobman/config/settings.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace jobman::core {

bool SliceHosts::complete() const {
  return !hosts.empty() && host_keys.size() == hosts.size() &&
         std::none_of(host_keys.begin(), host_keys.end(), [](const std::string& key) { return key.empty(); });
}

SliceHosts slice_hosts_of(const cloud::Node& node, const std::vector<WorkerAttributes>& attributes, bool internal) {
  SliceHosts out;
  out.node_id = node.raw.is_object() && node.raw.contains("id") && node.raw["id"].is_string()
                    ? node.raw["id"].get<std::string>()
                    : node.name.substr(node.name.rfind('/') + 1);
  for (std::size_t w = 0; w < node.network_endpoints.size(); ++w) {
    const auto& endpoint = node.network_endpoints[w];
    remote::SshHost host;
    host.address = internal || endpoint.external_ip.empty() ? endpoint.ip_address : endpoint.external_ip;
    host.host_key_alias = "tpu." + out.node_id + "-" + std::to_string(w);
    std::string key;
    if (w < attributes.size()) {
      const auto& published = attributes[w];
      if (const auto found = published.find(kHostKeyAttribute); found != published.end()) {
        key = found->second;
      }
      if (const auto port = published.find(kSshPortAttribute); port != published.end()) {
        host.port = static_cast<int>(util::parse_int(port->second).value_or(22));
      }
    }
    out.hosts.push_back(std::move(host));
    out.host_keys.push_back(std::move(key));
  }
  return out;
}

std::vector<std::string> slice_node_ids(const std::string& node, int slices) {
  if (slices <= 1) {
    return {node};
  }
  std::vector<std::string> ids;
  ids.reserve(static_cast<std::size_t>(slices));
  for (int s = 0; s < slices; ++s) {
    ids.push_back(node + "-" + std::to_string(s));
  }
  return ids;
}

SliceHosts join_slice_hosts(const std::vector<std::pair<std::string, SliceHosts>>& per_node) {
  SliceHosts out;
  for (const auto& [node, hosts] : per_node) {
    if (out.node_id.empty()) {
      out.node_id = hosts.node_id;
      out.user = hosts.user;
    }
    for (std::size_t w = 0; w < hosts.hosts.size(); ++w) {
      auto host = hosts.hosts[w];
      host.node = node;
      host.node_worker = static_cast<int>(w);
      out.hosts.push_back(std::move(host));
      out.host_keys.push_back(w < hosts.host_keys.size() ? hosts.host_keys[w] : std::string());
    }
  }
  return out;
}

std::filesystem::path known_hosts_file(const std::filesystem::path& attempt_dir) {
  return attempt_dir / "known_hosts";
}

void save_slice_hosts(const std::filesystem::path& attempt_dir, const SliceHosts& hosts) {
  util::ensure_directory(attempt_dir, 0700);
  std::string known;
  nlohmann::json saved = {{"node_id", hosts.node_id}, {"hosts", nlohmann::json::array()}};
  if (!hosts.user.empty()) {
    saved["user"] = hosts.user;
  }
  for (std::size_t w = 0; w < hosts.hosts.size(); ++w) {
    const auto& host = hosts.hosts[w];
    const auto& key = w < hosts.host_keys.size() ? hosts.host_keys[w] : std::string();
    if (!key.empty()) {
      known += host.host_key_alias + " " + key + "\n";
    }
    nlohmann::json entry = {
        {"address", host.address}, {"port", host.port}, {"alias", host.host_key_alias}, {"host_key", key}};
    if (!host.node.empty()) {
      entry["node"] = host.node;
      entry["node_worker"] = host.node_worker;
    }
    saved["hosts"].push_back(std::move(entry));
  }
  util::write_file_atomic(known_hosts_file(attempt_dir), known, 0600);
  util::write_file_atomic(attempt_dir / "hosts.json", saved.dump(2) + "\n", 0600);
}

std::optional<SliceHosts> load_slice_hosts(const std::filesystem::path& attempt_dir) {
  std::string text;
  try {
    text = util::read_file(attempt_dir / "hosts.json");
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const auto saved = nlohmann::json::parse(text, nullptr, false);
  if (!saved.is_object() || !saved.contains("hosts") || !saved["hosts"].is_array()) {
    return std::nullopt;
  }
  SliceHosts out;
  out.node_id = saved.value("node_id", "");
  out.user = saved.contains("user") && saved["user"].is_string() ? saved["user"].get<std::string>() : std::string();
  for (const auto& host : saved["hosts"]) {
    if (!host.is_object()) {
      return std::nullopt;
    }
    out.hosts.push_back({host.value("address", ""), host.value("port", 22), host.value("alias", ""),
                         host.value("node", ""), host.value("node_worker", -1)});
    out.host_keys.push_back(host.value("host_key", ""));
  }
  return out;
}

bool reached_internally(const config::JobConfig& config) {
  return config.tpu.internal_ips || (config.remote && config.remote->internal_ip);
}

std::filesystem::path default_ssh_identity() {
  auto gcloud_key = util::home_dir() / ".ssh" / "google_compute_engine";
  if (::access(gcloud_key.c_str(), R_OK) == 0 && ::access((gcloud_key.string() + ".pub").c_str(), R_OK) == 0) {
    return gcloud_key;
  }
  const auto dir = config::jobman_home() / "ssh";
  auto key = dir / "id_ed25519";
  if (::access(key.c_str(), R_OK) == 0 && ::access((key.string() + ".pub").c_str(), R_OK) == 0) {
    return key;
  }
  util::ensure_directory(dir, 0700);
  // Made under a name of its own, then renamed: two processes making it at once leave one whole key.
  const auto partial = dir / ("id_ed25519.partial-" + std::to_string(::getpid()));
  util::ProcessBuilder make({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "jobman", "-f", partial.string()});
  make.input(util::Stream::null()).output(util::Stream::null()).error(util::Stream::null());
  const int status = util::wait_exit(make.spawn().pid);
  std::error_code ec;
  if (status != 0) {
    std::filesystem::remove(partial, ec);
    std::filesystem::remove(partial.string() + ".pub", ec);
    throw Error("ssh-keygen could not make jobman's key " + key.string() + " (exit " + std::to_string(status) +
                "); is OpenSSH's client installed?");
  }
  // Everything under jobman's home is its user's alone, the public half too (ssh-keygen makes it 0644).
  std::filesystem::permissions(partial.string() + ".pub",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  std::filesystem::rename(partial.string() + ".pub", key.string() + ".pub", ec);
  std::filesystem::rename(partial, key, ec);
  return key;
}

std::string ssh_public_key(const std::filesystem::path& private_key) {
  const auto parts = util::split(std::string(util::trim(util::read_file(private_key.string() + ".pub"))), ' ');
  if (parts.size() < 2 || parts[0].empty() || parts[1].empty()) {
    throw Error(private_key.string() + ".pub is not an OpenSSH public key");
  }
  return parts[0] + " " + parts[1];
}

std::string ssh_keys_entry(const std::filesystem::path& private_key, const std::string& user) {
  return user + ":" + ssh_public_key(private_key) + " " + user;
}

namespace {

// Whether `keys` (an `ssh-keys` value) holds a line of `entry`'s user and key, whatever its comment says.
bool holds_ssh_keys_entry(const std::string& keys, const std::string& entry) {
  const auto key_of = [](std::string_view line) {
    const auto fields = util::split(std::string(util::trim(line)), ' ');
    return fields.size() < 2 ? std::string() : fields[0] + " " + fields[1];
  };
  const auto wanted = key_of(entry);
  const auto lines = util::split(keys, '\n');
  return !wanted.empty() &&
         std::any_of(lines.begin(), lines.end(), [&](const std::string& line) { return key_of(line) == wanted; });
}

} // namespace

bool has_ssh_keys_entry(const std::map<std::string, std::string>& metadata, const std::string& entry) {
  const auto keys = metadata.find("ssh-keys");
  return keys != metadata.end() && holds_ssh_keys_entry(keys->second, entry);
}

std::string with_ssh_keys_entry(std::string keys, const std::string& entry) {
  if (holds_ssh_keys_entry(keys, entry)) {
    return keys;
  }
  if (!keys.empty() && keys.back() != '\n') {
    keys += '\n';
  }
  return keys + entry;
}

bool os_login_enabled(const std::map<std::string, std::string>& node_metadata,
                      const std::map<std::string, std::string>& project_metadata) {
  auto found = node_metadata.find("enable-oslogin");
  if (found == node_metadata.end()) {
    found = project_metadata.find("enable-oslogin");
    if (found == project_metadata.end()) {
      return false;
    }
  }
  return util::to_lower(std::string(util::trim(found->second))) == "true";
}

} // namespace jobman::core
