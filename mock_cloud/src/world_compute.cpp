// Compute Engine's project: projects.get with its commonInstanceMetadata, projects.setCommonInstanceMetadata (the
// fingerprint's optimistic lock) and the global operations it returns.
#include "jobman/util/base64url.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <memory>
#include <regex>
#include <set>

namespace jobman::mock {

using nlohmann::json;
using world_internal::is_utf8;
using world_internal::kComputeRecordPrefix;
using world_internal::project_number;
using world_internal::stable_hash;

namespace {

// Where Compute Engine's links point, whichever endpoint the client called.
constexpr const char* kComputeBase = "https://www.googleapis.com/compute/v1/projects/";
// How long a metadata change takes to reach every VM, in simulated seconds: its operation is RUNNING meanwhile.
constexpr double kMetadataPropagationSeconds = 2;
// Compute Engine's limits on metadata: a value's size, and all keys and values together.
constexpr std::size_t kMaxValueBytes = std::size_t{256} * 1024;
constexpr std::size_t kMaxMetadataBytes = std::size_t{512} * 1024;

std::string project_record_name(const std::string& project) {
  return std::string(kComputeRecordPrefix) + "projects/" + project;
}

std::string operation_record_name(const std::string& project, const std::string& operation) {
  return project_record_name(project) + "/global/operations/" + operation;
}

// A Compute Engine error: the google.rpc Status body with the `errors` list the Compute API adds
// ([{"message", "domain": "global", "reason"}]).
Reply compute_error(int http_status, const std::string& reason, const std::string& message) {
  Reply reply = error_reply(http_status, message);
  reply.body["error"]["errors"] = json::array({{{"message", message}, {"domain", "global"}, {"reason", reason}}});
  return reply;
}

// A fingerprint as Compute Engine's look: eight bytes in base64. Derived from the number of changes too, so that
// metadata set back to what it was still gets a new one.
std::string metadata_fingerprint(const std::string& project, std::int64_t version,
                                 const std::vector<std::pair<std::string, std::string>>& items) {
  json text = {project, version, items};
  std::string digest = world_internal::sha256(text.dump()).substr(0, 8);
  std::string encoded = util::base64url_encode(digest);
  std::replace(encoded.begin(), encoded.end(), '-', '+');
  std::replace(encoded.begin(), encoded.end(), '_', '/');
  while (encoded.size() % 4 != 0) {
    encoded += '=';
  }
  return encoded;
}

// 16 hex digits.
std::string hex64(std::uint64_t value) {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = kDigits[value & 15U];
    value >>= 4U;
  }
  return out;
}

} // namespace

const World::ComputeProject* World::compute_project_locked(const std::string& project) const {
  const auto it = compute_projects_.find(project_record_name(project));
  return it == compute_projects_.end() ? nullptr : it->second.get();
}

json World::compute_project_json(const std::string& project) const {
  const auto* settings = compute_project_locked(project);
  static const std::vector<std::pair<std::string, std::string>> kNone;
  const auto& items = settings != nullptr ? settings->items : kNone;
  json metadata = {{"kind", "compute#metadata"},
                   {"fingerprint", metadata_fingerprint(project, settings != nullptr ? settings->version : 0, items)}};
  if (!items.empty()) {
    metadata["items"] = json::array();
    for (const auto& [key, value] : items) {
      metadata["items"].push_back({{"key", key}, {"value", value}});
    }
  }
  const auto number = std::to_string(project_number(project));
  return {{"kind", "compute#project"},
          {"id", std::to_string(stable_hash("compute project " + project) % 9'000'000'000'000'000'000ULL)},
          {"name", project},
          {"selfLink", kComputeBase + project},
          {"commonInstanceMetadata", metadata},
          {"defaultServiceAccount", number + "-compute@developer.gserviceaccount.com"},
          {"defaultNetworkTier", "PREMIUM"},
          {"xpnProjectStatus", "UNSPECIFIED_XPN_PROJECT_STATUS"},
          {"vmDnsSetting", "ZONAL_ONLY"}};
}

json World::compute_operation_json(const ComputeOperation& op, std::int64_t now) {
  const bool done = now >= op.end_ms;
  json out = {{"kind", "compute#operation"},
              {"id", std::to_string(stable_hash("compute operation " + op.name) % 9'000'000'000'000'000'000ULL)},
              {"name", op.name},
              {"operationType", op.operation_type},
              {"targetLink", kComputeBase + op.project},
              {"targetId", std::to_string(stable_hash("compute project " + op.project) % 9'000'000'000'000'000'000ULL)},
              {"status", done ? "DONE" : "RUNNING"},
              {"progress", done ? 100 : 0},
              {"insertTime", util::format_utc(op.insert_ms)},
              {"startTime", util::format_utc(op.insert_ms)},
              {"selfLink", kComputeBase + op.project + "/global/operations/" + op.name}};
  if (done) {
    out["endTime"] = util::format_utc(op.end_ms);
  }
  return out;
}

Reply World::get_compute_project(const std::string& project, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  if (!is_utf8(project)) {
    return compute_error(400, "invalid", "Invalid value for field 'project': not UTF-8 text");
  }
  return {200, compute_project_json(project)};
}

Reply World::get_compute_zone(const std::string& project, const std::string& zone) {
  const auto known = std::any_of(config_.zones.begin(), config_.zones.end(),
                                 [&](const auto& candidate) { return candidate.name == zone; });
  if (!known) {
    return compute_error(404, "notFound", "The resource 'projects/" + project + "/zones/" + zone + "' was not found");
  }
  const auto region = zone.substr(0, zone.rfind('-'));
  return {200,
          {{"kind", "compute#zone"},
           {"id", std::to_string(stable_hash("compute zone " + zone) % 1'000'000'000'000ULL)},
           {"name", zone},
           {"description", zone},
           {"status", "UP"},
           {"region", kComputeBase + project + "/regions/" + region},
           {"selfLink", kComputeBase + project + "/zones/" + zone},
           {"availableCpuPlatforms", json::array()},
           {"supportsPzs", false}}};
}

Reply World::set_common_instance_metadata(const std::string& project, const json& body, std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    if (!is_utf8(project)) {
      return compute_error(400, "invalid", "Invalid value for field 'project': not UTF-8 text");
    }
    if (!body.is_object()) {
      return compute_error(400, "parseError", "The request body must be a Metadata JSON object");
    }
    if (body.contains("items") && !body["items"].is_array()) {
      return compute_error(400, "invalid", "Invalid value for field 'resource.items': must be a list");
    }
    static const std::regex key_pattern("[a-zA-Z0-9_-]{1,128}");
    std::vector<std::pair<std::string, std::string>> items;
    std::set<std::string> keys;
    std::size_t total = 0;
    for (const auto& item : body.value("items", json::array())) {
      if (!item.is_object() || !item.contains("key") || !item["key"].is_string() ||
          (item.contains("value") && !item["value"].is_string())) {
        return compute_error(400, "invalid",
                             "Invalid value for field 'resource.items': each item needs a string key "
                             "and a string value");
      }
      const auto key = item["key"].get<std::string>();
      const auto value = item.value("value", "");
      if (!std::regex_match(key, key_pattern)) {
        return compute_error(400, "invalid",
                             "Invalid value for field 'resource.items.key': '" + key +
                                 "'. Must be a match of regex '[a-zA-Z0-9-_]{1,128}'");
      }
      if (!keys.insert(key).second) {
        return compute_error(400, "invalid", "Invalid value for field 'resource.items': duplicate key '" + key + "'");
      }
      if (value.size() > kMaxValueBytes) {
        return compute_error(400, "invalid",
                             "Invalid value for field 'resource.items.value': the value of '" + key +
                                 "' exceeds the limit of 262144 bytes");
      }
      total += key.size() + value.size();
      items.emplace_back(key, value);
    }
    if (total > kMaxMetadataBytes) {
      return compute_error(400, "invalid",
                           "Invalid value for field 'resource': the metadata exceeds the limit of "
                           "524288 bytes");
    }
    // The fingerprint is required: without it, or with a stale one, the change is refused, as at Google.
    const auto current = compute_project_json(project)["commonInstanceMetadata"]["fingerprint"];
    if (!body.contains("fingerprint") || body["fingerprint"] != current) {
      return compute_error(412, "conditionNotMet", "Supplied fingerprint does not match current metadata fingerprint.");
    }
    const auto record = project_record_name(project);
    auto& settings = compute_projects_[record];
    if (!settings) {
      settings = std::make_unique<ComputeProject>();
      settings->project = project;
    }
    settings->items = std::move(items);
    ++settings->version;
    touch_locked(record);

    auto op = std::make_unique<ComputeOperation>();
    op->project = project;
    op->operation_type = "compute.projects.setCommonInstanceMetadata";
    op->insert_ms = now_ms;
    op->end_ms = now_ms + std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled_ms(kMetadataPropagationSeconds)));
    op->name = "operation-" + std::to_string(now_ms) + "-" +
               hex64(stable_hash(project + "/" + std::to_string(settings->version)));
    const auto op_record = operation_record_name(project, op->name);
    json reply = compute_operation_json(*op, now_ms);
    compute_operations_[op_record] = std::move(op);
    touch_locked(op_record);
    common_metadata_changed_locked(project);
    return {200, reply};
  });
}

Reply World::get_compute_operation(const std::string& project, const std::string& operation, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  const auto it = compute_operations_.find(operation_record_name(project, operation));
  if (it == compute_operations_.end()) {
    return compute_error(404, "notFound",
                         "The resource 'projects/" + project + "/global/operations/" + operation + "' was not found");
  }
  return {200, compute_operation_json(*it->second, now_ms)};
}

std::optional<std::int64_t> World::compute_operation_end_ms(const std::string& project, const std::string& operation) {
  const std::lock_guard lock(mutex_);
  const auto it = compute_operations_.find(operation_record_name(project, operation));
  if (it == compute_operations_.end()) {
    return std::nullopt;
  }
  return it->second->end_ms;
}

std::map<std::string, std::string> World::common_metadata(const std::string& project) {
  const std::lock_guard lock(mutex_);
  std::map<std::string, std::string> out;
  if (const auto* settings = compute_project_locked(project)) {
    for (const auto& [key, value] : settings->items) {
      out[key] = value;
    }
  }
  return out;
}

void World::common_metadata_changed_locked(const std::string& project) {
  // The project's ssh-keys reach every READY node of the project that does not block them, at once.
  if (listener_ == nullptr) {
    return;
  }
  const auto now = util::now_ms();
  for (const auto& [name, node] : nodes_) {
    if (node->project == project && node->state == "READY") {
      listener_->slice_keys(name, ssh_keys_locked(*node, now));
    }
  }
}

} // namespace jobman::mock
