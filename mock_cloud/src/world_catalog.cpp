// The read-only catalog: locations, accelerator types and runtime versions of the world's zones, and the project's
// service identity.
#include "jobman/config/accelerator.hpp"
#include "mock_cloud/list_query.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace jobman::mock {

using nlohmann::json;

namespace {

// The AcceleratorConfig.type enum of each generation, and whether its topology has three dimensions.
struct GenerationShape {
  const char* type;
  bool three_d;
};

const std::map<std::string, GenerationShape>& generation_shapes() {
  static const std::map<std::string, GenerationShape> shapes = {
      {"v2", {"V2", false}},  {"v3", {"V3", false}},  {"v4", {"V4", true}}, {"v5litepod", {"V5LITE_POD", false}},
      {"v5p", {"V5P", true}}, {"v6e", {"V6E", false}}};
  return shapes;
}

// The most nearly cubic (or square) arrangement of `chips`, smallest dimension first: 4x8, 2x4x4, 16x16x24.
std::string topology(int chips, bool three_d) {
  if (three_d && chips == 4) {
    return "2x2x1"; // One host's tray, as Google writes it.
  }
  std::array<int, 3> best = {1, 1, chips};
  for (int a = 1; a * a <= chips; ++a) {
    if (chips % a != 0) {
      continue;
    }
    const int rest = chips / a;
    if (!three_d) {
      best = {1, a, rest}; // The last divisor up to the square root is the squarest.
      continue;
    }
    for (int b = a; b * b <= rest; ++b) {
      if (rest % b == 0) {
        const std::array<int, 3> candidate = {a, b, rest / b};
        if (candidate[2] < best[2] || (candidate[2] == best[2] && candidate[1] < best[1])) {
          best = candidate;
        }
      }
    }
  }
  std::string out = three_d ? std::to_string(best[0]) + "x" : "";
  return out + std::to_string(best[1]) + "x" + std::to_string(best[2]);
}

// A city near the zone's region, as Google's console names it; the region itself when the mock does not know it.
std::string display_name(const std::string& region) {
  static const std::map<std::string, std::string> cities = {
      {"us-central1", "Iowa"},      {"us-central2", "Oklahoma"},      {"us-east1", "South Carolina"},
      {"us-east5", "Columbus"},     {"us-west1", "Oregon"},           {"us-west4", "Las Vegas"},
      {"us-south1", "Dallas"},      {"europe-west4", "Netherlands"},  {"asia-east1", "Taiwan"},
      {"asia-northeast1", "Tokyo"}, {"asia-southeast1", "Singapore"}, {"southamerica-west1", "Santiago"}};
  auto it = cities.find(region);
  return it == cities.end() ? region : it->second;
}

// The listed items that pass `query`'s filter, in its order, one page of them.
Reply list_reply(std::vector<json> items, const ListQuery& query, const std::set<std::string>& fields,
                 const char* field) {
  std::string why;
  auto terms = parse_filter(query.filter, fields, &why);
  if (!terms) {
    return error_reply(400, why);
  }
  auto order = parse_order_by(query.order_by, fields, &why);
  if (!order) {
    return error_reply(400, why);
  }
  std::erase_if(items, [&](const json& item) { return !filter_matches(*terms, item); });
  sort_items(items, *order);
  return world_internal::page(
      items.size(), [&](std::size_t i) { return items[i]; }, field, query.page_size, query.page_token);
}

} // namespace

namespace world_internal {

std::uint64_t stable_hash(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const char c : text) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  return hash;
}

std::uint64_t project_number(const std::string& project) {
  // Google numbers a project; the mock derives a stable 12-digit number from its id.
  return 100'000'000'000ULL + stable_hash(project) % 900'000'000'000ULL;
}

json accelerator_config(const config::AcceleratorType& accelerator) {
  const auto& shape = generation_shapes().at(accelerator.generation->name);
  return {{"type", shape.type}, {"topology", topology(accelerator.chips, shape.three_d)}};
}

} // namespace world_internal

std::vector<const config::TpuGeneration*> World::generations_in_locked(const std::string& zone) const {
  std::vector<const config::TpuGeneration*> out;
  for (const auto& generation : config::tpu_generations()) {
    const bool offered = std::any_of(pools_.begin(), pools_.end(), [&](const auto& pool) {
      return pool.second->zone == zone && pool.second->generation == generation.name;
    });
    if (offered) {
      out.push_back(&generation);
    }
  }
  return out;
}

json World::location_json(const std::string& project, const std::string& zone) const {
  const auto region = zone.substr(0, zone.rfind('-'));
  return {{"name", location(project, zone)},
          {"locationId", zone},
          {"displayName", display_name(region)},
          {"labels", {{"cloud.googleapis.com/region", region}}}};
}

Reply World::list_locations(const std::string& project, const ListQuery& query) {
  std::vector<json> items;
  for (const auto& zone : config_.zones) {
    items.push_back(location_json(project, zone.name));
  }
  std::sort(items.begin(), items.end(), [](const json& a, const json& b) { return a["name"] < b["name"]; });
  return list_reply(std::move(items), query, {"name", "locationId", "displayName"}, "locations");
}

Reply World::get_location(const std::string& project, const std::string& zone) {
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  return {200, location_json(project, zone)};
}

std::vector<json> World::accelerator_types_locked(const std::string& project, const std::string& zone) const {
  std::vector<json> out;
  for (const auto* generation : generations_in_locked(zone)) {
    for (const int size : generation->sizes) {
      const auto accelerator = config::find_accelerator(generation->name + "-" + std::to_string(size));
      out.push_back({{"name", location(project, zone) + "/acceleratorTypes/" + accelerator->name},
                     {"type", accelerator->name},
                     {"acceleratorConfigs", json::array({world_internal::accelerator_config(*accelerator)})}});
    }
  }
  return out;
}

Reply World::list_accelerator_types(const std::string& project, const std::string& zone, const ListQuery& query) {
  std::lock_guard lock(mutex_);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  return list_reply(accelerator_types_locked(project, zone), query, {"name", "type"}, "acceleratorTypes");
}

Reply World::get_accelerator_type(const std::string& project, const std::string& zone, const std::string& id) {
  std::lock_guard lock(mutex_);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  for (auto& item : accelerator_types_locked(project, zone)) {
    if (item["type"] == id) {
      return {200, std::move(item)};
    }
  }
  return error_reply(404, "Accelerator type '" + location(project, zone) + "/acceleratorTypes/" + id +
                              "' was not found (the zone offers no such size)");
}

std::vector<json> World::runtime_versions_locked(const std::string& project, const std::string& zone) const {
  std::set<std::string> versions;
  for (const auto* generation : generations_in_locked(zone)) {
    versions.insert(generation->runtime_versions.begin(), generation->runtime_versions.end());
  }
  std::vector<json> out;
  out.reserve(versions.size());
  for (const auto& version : versions) {
    out.push_back({{"name", location(project, zone) + "/runtimeVersions/" + version}, {"version", version}});
  }
  return out;
}

Reply World::list_reservations(const std::string& project, const std::string& zone, const ListQuery& query) {
  std::lock_guard lock(mutex_);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  std::vector<json> items;
  for (const auto& [key, pool] : pools_) {
    if (pool->zone != zone || pool->tier != Tier::reserved) {
      continue;
    }
    const auto shape = generation_shapes().find(pool->generation);
    items.push_back({{"name", location(project, zone) + "/reservations/" + pool->reservation},
                     {"standard",
                      {{"size", pool->chips},
                       {"capacityUnits", "CHIPS"},
                       {"resourceType", shape == generation_shapes().end() ? pool->generation : shape->second.type},
                       {"usage", {{"total", std::to_string(pool->used)}}}}},
                     {"state", "ACTIVE"}});
  }
  std::sort(items.begin(), items.end(), [](const json& a, const json& b) { return a["name"] < b["name"]; });
  return list_reply(std::move(items), query, {"name"}, "reservations");
}

Reply World::list_runtime_versions(const std::string& project, const std::string& zone, const ListQuery& query) {
  std::lock_guard lock(mutex_);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  return list_reply(runtime_versions_locked(project, zone), query, {"name", "version"}, "runtimeVersions");
}

Reply World::get_runtime_version(const std::string& project, const std::string& zone, const std::string& id) {
  std::lock_guard lock(mutex_);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  for (auto& item : runtime_versions_locked(project, zone)) {
    if (item["version"] == id) {
      return {200, std::move(item)};
    }
  }
  return error_reply(404, "Runtime version '" + location(project, zone) + "/runtimeVersions/" + id +
                              "' was not found (no TPU generation of this zone runs it)");
}

Reply World::generate_service_identity(const std::string& project, const std::string& zone) {
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  // Google names the identity after the project's number.
  const auto number = world_internal::project_number(project);
  return {200, {{"identity", {{"email", "service-" + std::to_string(number) + "@cloud-tpu.iam.gserviceaccount.com"}}}}};
}

} // namespace jobman::mock
