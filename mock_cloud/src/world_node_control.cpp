// What a client does to a node besides create and delete: nodes.stop, start, patch and getGuestAttributes.
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <openssl/evp.h>
#include <set>
#include <string>
#include <vector>

namespace jobman::mock {

using nlohmann::json;
using world_internal::failed_precondition;
using world_internal::kNodeType;
using world_internal::rpc_status;
using world_internal::sha256;

namespace world_internal {

std::string sha256(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  return {reinterpret_cast<const char*>(digest), size};
}

} // namespace world_internal

namespace {

// The paths nodes.patch updates (both spellings Google accepts) and where each lives in a Node.
const std::map<std::string, json::json_pointer>& patchable_fields() {
  static const std::map<std::string, json::json_pointer> fields = {
      {"description", json::json_pointer("/description")},
      {"tags", json::json_pointer("/tags")},
      {"labels", json::json_pointer("/labels")},
      {"metadata", json::json_pointer("/metadata")},
      {"network_config.enable_external_ips", json::json_pointer("/networkConfig/enableExternalIps")},
      {"networkConfig.enableExternalIps", json::json_pointer("/networkConfig/enableExternalIps")}};
  return fields;
}

// Why `value` cannot be the new value of `path`, or empty when it can (null clears the field).
std::string patch_value_problem(const std::string& path, const json& value) {
  if (value.is_null()) {
    return {};
  }
  if (path == "description") {
    return value.is_string() && value.get<std::string>().size() <= 512 ? ""
                                                                       : "description must be text of at most 512 "
                                                                         "characters";
  }
  // Every element of a list, or every value of a map, must be a string.
  const auto all_strings = [](const json& items) {
    return std::all_of(items.begin(), items.end(), [](const json& item) { return item.is_string(); });
  };
  if (path == "tags") {
    return value.is_array() && all_strings(value) ? "" : "tags must be a list of strings";
  }
  if (path == "labels" || path == "metadata") {
    return value.is_object() && all_strings(value) ? "" : path + " must map strings to strings";
  }
  return value.is_boolean() ? "" : "networkConfig.enableExternalIps must be true or false";
}

// The Node fields the API computes: naming one in an updateMask is an error of its own.
bool output_only(const std::string& path) {
  static const std::set<std::string> fields = {"name",
                                               "id",
                                               "state",
                                               "health",
                                               "health_description",
                                               "healthDescription",
                                               "create_time",
                                               "createTime",
                                               "network_endpoints",
                                               "networkEndpoints",
                                               "api_version",
                                               "apiVersion",
                                               "symptoms",
                                               "queued_resource",
                                               "queuedResource",
                                               "multislice_node",
                                               "multisliceNode"};
  return fields.count(path) != 0;
}

// An SSH wire-format string: a 32-bit big-endian length, then the bytes.
std::string ssh_string(const std::string& bytes) {
  const auto n = static_cast<std::uint32_t>(bytes.size());
  std::string out = {static_cast<char>(n >> 24), static_cast<char>((n >> 16) & 255), static_cast<char>((n >> 8) & 255),
                     static_cast<char>(n & 255)};
  return out + bytes;
}

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// True for a name the guest agent makes an account for: letters, digits, '.', '_' and '-', at most 32, not starting
// with '-' or '.'.
bool valid_account_name(const std::string& name) {
  return !name.empty() && name.size() <= 32 && name.front() != '-' && name.front() != '.' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-';
         });
}

// One guest attribute a worker host publishes.
struct GuestAttribute {
  std::string space; // The namespace: "hostkeys" or "host".
  std::string key;   // The key within it.
  std::string value; // Its value.
};

// The public host keys of one worker host, as its guest agent publishes them under `hostkeys`: derived from the
// host's identity, so they stay the same for the host's life and change when the node is started with fresh hosts.
std::vector<std::pair<std::string, std::string>> host_keys(const std::string& host_identity) {
  const auto ed25519 = sha256(host_identity + "/ssh-ed25519");
  const auto ecdsa = "\x04" + sha256(host_identity + "/ecdsa-x") + sha256(host_identity + "/ecdsa-y");
  return {{"ecdsa-sha2-nistp256", "ecdsa-sha2-nistp256 " + base64(ssh_string("ecdsa-sha2-nistp256") +
                                                                  ssh_string("nistp256") + ssh_string(ecdsa))},
          {"ssh-ed25519", "ssh-ed25519 " + base64(ssh_string("ssh-ed25519") + ssh_string(ed25519))}};
}

} // namespace

std::vector<SshKey> parse_ssh_keys(const std::string& value, std::int64_t now_ms) {
  std::vector<SshKey> keys;
  for (const auto& raw : util::split(value, '\n')) {
    const auto line = std::string(util::trim(raw));
    const auto colon = line.find(':');
    if (line.empty() || colon == std::string::npos || colon == 0) {
      continue;
    }
    SshKey key{line.substr(0, colon), std::string(util::trim(line.substr(colon + 1)))};
    const auto parts = util::split(key.key, ' ');
    if (parts.size() < 2 || !valid_account_name(key.user)) {
      continue;
    }
    // gcloud's and the console's expiring keys: "TYPE BASE64 google-ssh {"userName":..., "expireOn":TIME}".
    if (const auto mark = key.key.find(" google-ssh {"); mark != std::string::npos) {
      const auto details = json::parse(key.key.substr(mark + 12), nullptr, false);
      if (details.is_object() && details.contains("expireOn") && details["expireOn"].is_string()) {
        const auto expires = util::parse_utc(details["expireOn"].get<std::string>());
        if (expires && *expires <= now_ms) {
          continue;
        }
      }
    }
    keys.push_back(std::move(key));
  }
  return keys;
}

std::vector<SshKey> World::ssh_keys_locked(const Node& node, std::int64_t now) const {
  std::vector<SshKey> keys;
  const auto metadata = node.spec.is_object() ? node.spec.value("metadata", json::object()) : json::object();
  if (!metadata.is_object()) {
    return keys;
  }
  const auto* project = compute_project_locked(node.project);
  // OS Login: the node's enable-oslogin, else the project's. When on, the hosts let in the keys OS Login profiles hold
  // for the project, each as its account's POSIX user, and no key from metadata.
  std::string oslogin;
  if (metadata.contains("enable-oslogin") && metadata["enable-oslogin"].is_string()) {
    oslogin = metadata["enable-oslogin"].get<std::string>();
  } else if (project != nullptr) {
    for (const auto& [name, value] : project->items) {
      if (name == "enable-oslogin") {
        oslogin = value;
      }
    }
  }
  if (util::to_lower(std::string(util::trim(oslogin))) == "true") {
    for (const auto& [record, user] : oslogin_users_) {
      if (user->projects.count(node.project) == 0) {
        continue;
      }
      for (const auto& [print, key] : user->keys) {
        const auto& [text, expires_usec] = key;
        if (expires_usec == 0 || expires_usec > now * 1000) {
          keys.push_back({world_internal::oslogin_username(user->email), text});
        }
      }
    }
    return keys;
  }
  for (const char* name : {"ssh-keys", "sshKeys"}) {
    if (metadata.contains(name) && metadata[name].is_string()) {
      for (auto& key : parse_ssh_keys(metadata[name].get<std::string>(), now)) {
        keys.push_back(std::move(key));
      }
    }
  }
  // The project's keys too, unless the node blocks them, as the guest agent reads them.
  const auto block = metadata.value("block-project-ssh-keys", json("false"));
  if (block.is_string() && (block.get<std::string>() == "true" || block.get<std::string>() == "TRUE")) {
    return keys;
  }
  if (project != nullptr) {
    for (const auto& [name, value] : project->items) {
      if (name == "ssh-keys" || name == "sshKeys") {
        for (auto& key : parse_ssh_keys(value, now)) {
          keys.push_back(std::move(key));
        }
      }
    }
  }
  return keys;
}

Reply World::stop_node(const std::string& project, const std::string& zone, const std::string& id,
                       std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/nodes/" + id;
    Reply missing;
    auto* node = find_node_locked(name, &missing);
    if (node == nullptr) {
      return missing;
    }
    if (!node->standalone()) {
      return failed_precondition("Node '" + name + "' belongs to queued resource '" + node->queued_resource +
                                 "'; stop is only available with single TPU nodes (delete the queued resource)");
    }
    if (node->state != "READY") {
      return failed_precondition("Node '" + name + "' is " + node->state + "; only a READY node can be stopped");
    }
    node->state = "STOPPING";
    node->clear_health();
    node->preempt_ms = 0;
    node->maintenance_ms = 0;
    hosts_lost_locked(*node);
    node->next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.suspending_seconds));
    node->transition_op = new_operation(project, zone, "stop", name, now_ms);
    const auto op_name = node->transition_op;
    touch_locked(name);
    tick_locked(now_ms);
    return {200, operation_json(*operations_[op_name])};
  });
}

Reply World::start_node(const std::string& project, const std::string& zone, const std::string& id,
                        std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/nodes/" + id;
    Reply missing;
    auto* node = find_node_locked(name, &missing);
    if (node == nullptr) {
      return missing;
    }
    if (!node->standalone()) {
      return failed_precondition("Node '" + name + "' belongs to queued resource '" + node->queued_resource +
                                 "'; start is only available with single TPU nodes");
    }
    if (node->state != "STOPPED") {
      return failed_precondition("Node '" + name + "' is " + node->state + "; only a STOPPED node can be started");
    }
    auto* pool = pool_for(node->zone, node->generation, node->tier);
    if (pool == nullptr) {
      return failed_precondition("Node '" + name + "': its zone no longer offers " + node->generation);
    }
    if (auto r = check_quota(project, *pool, node->chips); !r.ok()) {
      return r;
    }
    const auto op_name = new_operation(project, zone, "start", name, now_ms);
    if (pool->chips - pool->used < node->chips) {
      // As a create, a start finds its chips now or fails: the node stays STOPPED.
      finish_operation(op_name, now_ms,
                       {{"error", rpc_status(8, "There is no more capacity in the zone \"" + zone +
                                                    "\" to start node '" + name + "'")}});
      return {200, operation_json(*operations_[op_name])};
    }
    pool->used += node->chips;
    node->holds_capacity = true;
    node->state = "STARTING";
    ++node->incarnation;
    node->next_ms = now_ms + static_cast<std::int64_t>(draw_delay_ms(config_.provisioning_for(node->generation)));
    node->transition_op = op_name;
    touch_locked(name);
    tick_locked(now_ms);
    return {200, operation_json(*operations_[op_name])};
  });
}

Reply World::patch_node(const std::string& project, const std::string& zone, const std::string& id,
                        const std::string& update_mask, const json& body, std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/nodes/" + id;
    Reply missing;
    auto* node = find_node_locked(name, &missing);
    if (node == nullptr) {
      return missing;
    }
    if (!body.is_object()) {
      return error_reply(400, "The request body must be a Node JSON object");
    }
    std::vector<std::string> paths;
    for (const auto& part : util::split(update_mask, ',')) {
      paths.emplace_back(util::trim(part));
    }
    if (update_mask.empty()) {
      return error_reply(400, "updateMask is required (supported: description, tags, labels, metadata, "
                              "network_config.enable_external_ips)");
    }
    for (const auto& path : paths) {
      if (output_only(path)) {
        return error_reply(400, "updateMask: '" + path + "' is output only");
      }
      auto field = patchable_fields().find(path);
      if (field == patchable_fields().end()) {
        return error_reply(400, "updateMask: '" + path +
                                    "' cannot be updated (supported: description, tags, labels, metadata, "
                                    "network_config.enable_external_ips)");
      }
      const auto value = body.contains(field->second) ? body[field->second] : json();
      if (auto problem = patch_value_problem(path, value); !problem.empty()) {
        return error_reply(400, problem);
      }
    }
    if (node->state == "DELETING") {
      return failed_precondition("Node '" + name + "' is being deleted");
    }
    if (!node->spec.is_object()) {
      node->spec = json::object();
    }
    for (const auto& path : paths) {
      const auto& pointer = patchable_fields().at(path);
      if (body.contains(pointer) && !body[pointer].is_null()) {
        node->spec[pointer] = body[pointer];
      } else if (node->spec.contains(pointer)) {
        node->spec[pointer.parent_pointer()].erase(pointer.back());
      }
    }
    touch_locked(name);
    if (listener_ != nullptr && node->state == "READY" &&
        std::find(paths.begin(), paths.end(), "metadata") != paths.end()) {
      listener_->slice_keys(name, ssh_keys_locked(*node, now_ms));
    }
    const auto op_name = new_operation(project, zone, "update", name, now_ms);
    auto response = node_json(*node);
    response["@type"] = kNodeType;
    finish_operation(op_name, now_ms, response);
    return {200, operation_json(*operations_[op_name])};
  });
}

Reply World::get_guest_attributes(const std::string& project, const std::string& zone, const std::string& id,
                                  const json& body, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  const auto name = location(project, zone) + "/nodes/" + id;
  Reply missing;
  const auto* node = find_node_locked(name, &missing);
  if (node == nullptr) {
    return missing;
  }
  if (!body.is_object() && !body.is_null()) {
    return error_reply(400, "The request body must be a GetGuestAttributesRequest JSON object");
  }
  const json request = body.is_object() ? body : json::object();
  const auto query_path = request.value("queryPath", json(""));
  if (!query_path.is_string()) {
    return error_reply(400, "queryPath must be a string such as \"hostkeys/\"");
  }
  const auto hosts = static_cast<int>(node->endpoints.size());
  std::vector<int> workers;
  const auto ids = request.value("workerIds", json::array());
  if (!ids.is_array()) {
    return error_reply(400, "workerIds must be a list of worker ids");
  }
  for (const auto& worker : ids) {
    if (worker.is_string() && worker.get_ref<const std::string&>().empty()) {
      continue; // No worker named: gcloud's `tpu-vm ssh --worker=all` asks for every worker with [""].
    }
    auto number = worker.is_string() ? util::parse_int(worker.get<std::string>()) : std::nullopt;
    if (!number || *number < 0 || *number >= hosts) {
      return error_reply(400, "workerIds: " + worker.dump() + " is not a worker of node '" + name + "' (0 to " +
                                  std::to_string(hosts - 1) + ")");
    }
    workers.push_back(static_cast<int>(*number));
  }
  if (workers.empty()) {
    for (int w = 0; w < hosts; ++w) {
      workers.push_back(w);
    }
  }
  if (node->state != "READY") {
    return failed_precondition("Node '" + name + "' is " + node->state +
                               "; guest attributes are published by the workers of a READY node");
  }
  // "", "/", "hostkeys/", "hostkeys", "hostkeys/ssh-ed25519" or "host/physical_host".
  auto path = query_path.get<std::string>();
  const auto parts = util::split(path.rfind('/', 0) == 0 ? path.substr(1) : path, '/');
  const std::string want_namespace = parts.empty() ? "" : parts[0];
  const std::string want_key = parts.size() > 1 ? parts[1] : "";
  json out = {{"guestAttributes", json::array()}};
  for (const int worker : workers) {
    // The host's SSH keys, then the physical machine it runs on.
    const auto identity = node->numeric_id + "/" + std::to_string(node->incarnation) + "/" + std::to_string(worker);
    std::vector<GuestAttribute> published;
    // What the host's own sshd publishes where the data plane runs one (nothing until it is up), else host keys of
    // the world's own making.
    if (auto ssh = listener_ != nullptr ? listener_->ssh_attributes(name, worker) : std::nullopt) {
      for (const auto& [attribute_path, value] : *ssh) {
        const auto slash = attribute_path.find('/');
        published.push_back({attribute_path.substr(0, slash), attribute_path.substr(slash + 1), value});
      }
    } else {
      for (const auto& [key, value] : host_keys(identity)) {
        published.push_back({"hostkeys", key, value});
      }
    }
    published.push_back({"host", "physical_host", node->machines.at(static_cast<std::size_t>(worker))});
    json items = json::array();
    for (const auto& attribute : published) {
      if ((want_namespace.empty() || want_namespace == attribute.space) &&
          (want_key.empty() || want_key == attribute.key)) {
        items.push_back({{"namespace", attribute.space}, {"key", attribute.key}, {"value", attribute.value}});
      }
    }
    json value = json::object();
    if (!items.empty()) {
      value["items"] = items;
    }
    out["guestAttributes"].push_back({{"queryPath", path}, {"queryValue", value}});
  }
  return {200, out};
}

} // namespace jobman::mock
