// Queued resources: queuedResources.create, get, list, delete and reset, quota, and the QueuedResource the API returns.
#include "jobman/config/accelerator.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <utility>

namespace jobman::mock {

using nlohmann::json;
using world_internal::failed_precondition;
using world_internal::find_reply;
using world_internal::is_utf8;
using world_internal::kQueuedResourceType;
using world_internal::page;
using world_internal::under_prefix;
using world_internal::valid_id;

namespace {

// The most slices one multislice request may ask for.
constexpr std::int64_t kMaxMultisliceNodes = 256;

// The longest protobuf Duration: 10,000 years.
constexpr double kMaxDurationSeconds = 315'576'000'000.0;

// "3600s" or "1.5s" (protobuf Duration JSON, at most kMaxDurationSeconds) into seconds.
std::optional<double> parse_proto_duration(const json& value) {
  if (!value.is_string()) {
    return std::nullopt;
  }
  auto text = value.get<std::string>();
  if (text.size() < 2 || text.back() != 's') {
    return std::nullopt;
  }
  try {
    std::size_t used = 0;
    double seconds = std::stod(text.substr(0, text.size() - 1), &used);
    if (used != text.size() - 1 || !std::isfinite(seconds) || seconds < 0 || seconds > kMaxDurationSeconds) {
      return std::nullopt;
    }
    return seconds;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The longest run a flex-start request may ask for: 7 days.
constexpr double kMaxRunSeconds = 7 * 24 * 3600.0;

// How a queued resource asks to be provisioned, read from its request: the tier, a flex-start run's length and a
// reservation's name as asked ("" for none, or ".../reservations/-" for any of the project's).
struct Provisioning {
  Tier tier = Tier::on_demand;
  double run_seconds = 0;
  std::string reservation;
};

// An object member, or nullptr when absent; `bad` set when present and not an object.
const json* member_object(const json& body, const char* key, bool* bad) {
  const auto it = body.find(key);
  if (it == body.end()) {
    return nullptr;
  }
  if (!it->is_object()) {
    *bad = true;
  }
  return &*it;
}

// Reads the tiers (spot, guaranteed, bestEffort), provisioningModel, runDuration and reservationName of a
// QueuedResource, and the node's schedulingConfig.spot and reserved; a 400 for a request no tier fits.
Reply read_provisioning(const json& body, const json& node, Provisioning& out) {
  bool bad = false;
  const json* spot = member_object(body, "spot", &bad);
  const json* guaranteed = member_object(body, "guaranteed", &bad);
  const json* best_effort = member_object(body, "bestEffort", &bad);
  const json* run = member_object(body, "runDuration", &bad);
  if (bad) {
    return error_reply(400, "spot, guaranteed, bestEffort and runDuration must be objects");
  }
  if (static_cast<int>(spot != nullptr) + static_cast<int>(guaranteed != nullptr) +
          static_cast<int>(best_effort != nullptr) >
      1) {
    return error_reply(400, "A queued resource asks for one tier: spot, guaranteed or bestEffort");
  }
  bool node_spot = false;
  bool node_reserved = false;
  if (const auto scheduling = node.find("schedulingConfig"); scheduling != node.end() && scheduling->is_object()) {
    for (const auto& [key, target] : {std::pair{"spot", &node_spot}, std::pair{"reserved", &node_reserved}}) {
      if (const auto value = scheduling->find(key); value != scheduling->end()) {
        if (!value->is_boolean()) {
          return error_reply(400,
                             std::string("tpu.nodeSpec[0].node.schedulingConfig.") + key + " must be true or false");
        }
        *target = value->get<bool>();
      }
    }
  }
  std::string model = "PROVISIONING_MODEL_UNSPECIFIED";
  if (const auto value = body.find("provisioningModel"); value != body.end()) {
    static const std::set<std::string> models = {"PROVISIONING_MODEL_UNSPECIFIED", "STANDARD", "SPOT",
                                                 "RESERVATION_BOUND", "FLEX_START"};
    if (!value->is_string() || !models.contains(value->get<std::string>())) {
      return error_reply(400, "Invalid value at 'queued_resource.provisioning_model': " + value->dump() +
                                  " (one of STANDARD, SPOT, RESERVATION_BOUND, FLEX_START)");
    }
    model = value->get<std::string>();
  }
  if (const auto name = body.find("reservationName"); name != body.end()) {
    if (!name->is_string()) {
      return error_reply(400, "reservationName must be a string");
    }
    out.reservation = name->get<std::string>();
  }
  bool guaranteed_reserved = false;
  if (guaranteed != nullptr && guaranteed->contains("reserved")) {
    if (!(*guaranteed)["reserved"].is_boolean()) {
      return error_reply(400, "guaranteed.reserved must be true or false");
    }
    guaranteed_reserved = (*guaranteed)["reserved"].get<bool>();
  }
  const bool reserved =
      guaranteed_reserved || node_reserved || !out.reservation.empty() || model == "RESERVATION_BOUND";
  if (model == "FLEX_START") {
    if (spot != nullptr || best_effort != nullptr || reserved) {
      return error_reply(400, "FLEX_START is a provisioning model of its own: not with spot, bestEffort or a "
                              "reservation");
    }
    const auto max = run == nullptr ? std::nullopt : parse_proto_duration(run->value("maxRunDuration", json()));
    if (!max || *max <= 0) {
      return error_reply(400, "runDuration.maxRunDuration is required with provisioningModel FLEX_START, as a "
                              "duration such as \"10800s\"");
    }
    if (*max > kMaxRunSeconds) {
      return error_reply(400, "runDuration.maxRunDuration may be at most 7 days (604800s)");
    }
    out.tier = Tier::flex_start;
    out.run_seconds = *max;
    return {200, {}};
  }
  if (run != nullptr) {
    return error_reply(400, "runDuration is for provisioningModel FLEX_START only");
  }
  const bool spot_asked = spot != nullptr || node_spot || model == "SPOT";
  if (reserved && (spot_asked || best_effort != nullptr)) {
    return error_reply(400, "A reservation's capacity is not spot or best-effort capacity");
  }
  if (best_effort != nullptr && (node_spot || model == "SPOT")) {
    return error_reply(400, "A queued resource asks for one tier: spot, guaranteed or bestEffort");
  }
  out.tier = reserved                 ? Tier::reserved
             : best_effort != nullptr ? Tier::best_effort
             : spot_asked             ? Tier::spot
                                      : Tier::on_demand;
  return {200, {}};
}

} // namespace

namespace world_internal {

bool valid_id(const std::string& id) {
  static const std::regex pattern("[a-z]([-a-z0-9]{0,61}[a-z0-9])?");
  return std::regex_match(id, pattern);
}

std::vector<std::string> requested_node_ids(const json& request, const std::string& queued_resource_id) {
  const json& spec = request["tpu"]["nodeSpec"][0];
  if (spec.contains("nodeId")) {
    return {spec["nodeId"].get<std::string>()};
  }
  const json& params = spec["multisliceParams"];
  const json& count = params["nodeCount"];
  const long long nodes =
      count.is_string() ? util::parse_int(count.get<std::string>()).value_or(0) : count.get<long long>();
  const std::string prefix = params.value("nodeIdPrefix", queued_resource_id);
  std::vector<std::string> ids;
  for (long long i = 0; i < nodes; ++i) {
    ids.push_back(prefix + "-" + std::to_string(i));
  }
  return ids;
}

bool is_utf8(const std::string& text) {
  try {
    (void)json(text).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

} // namespace world_internal

json World::queued_resource_json(const QueuedResource& qr) const {
  json out = qr.request;
  out["name"] = qr.name;
  out["createTime"] = util::format_utc(qr.create_ms);
  auto& spec = out["tpu"]["nodeSpec"][0];
  spec["parent"] = location(qr.project, qr.zone);
  spec["node"]["acceleratorType"] = qr.accelerator;
  if (qr.tier == Tier::flex_start && qr.terminate_ms > 0) {
    out["runDuration"]["terminationTime"] = util::format_utc(qr.terminate_ms);
  }
  if (!qr.reservation.empty()) {
    out["reservationName"] = qr.reservation;
  }
  json state = {{"state", qr.state}, {"stateInitiator", qr.initiator}};
  static const std::map<std::string, std::string> data_keys = {
      {"CREATING", "creatingData"},   {"ACCEPTED", "acceptedData"}, {"PROVISIONING", "provisioningData"},
      {"DELETING", "deletingData"},   {"ACTIVE", "activeData"},     {"SUSPENDING", "suspendingData"},
      {"SUSPENDED", "suspendedData"}, {"FAILED", "failedData"}};
  if (auto it = data_keys.find(qr.state); it != data_keys.end()) {
    state[it->second] = json::object();
  }
  if (qr.state == "FAILED" && !qr.failed_error.is_null()) {
    state["failedData"]["error"] = qr.failed_error;
  }
  out["state"] = state;
  return out;
}

Reply World::create_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                    const std::string& request_id, const json& body, std::int64_t now_ms) {
  // Commits only a request it accepts: a refused create changes nothing itself, and what the replay changed is
  // committed by the next call.
  const auto lock = lock_at(now_ms);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  if (!is_utf8(project)) {
    return error_reply(400, "Invalid project '" + project + "': not UTF-8 text");
  }
  auto loc = location(project, zone);
  const auto name = loc + "/queuedResources/" + id;
  const auto request_key = "create " + name + " " + request_id;
  if (const auto* op = operation_for_request(request_id.empty() ? "" : request_key)) {
    return {200, operation_json(*op)};
  }
  if (id.empty()) {
    return error_reply(400, "queuedResourceId is required");
  }
  if (!valid_id(id)) {
    return error_reply(400, "Invalid queuedResourceId '" + id +
                                "': use lowercase letters, digits and hyphens, starting with a letter (at most 63)");
  }
  if (!body.is_object()) {
    return error_reply(400, "The request body must be a QueuedResource JSON object");
  }
  if (queued_resources_.count(name) != 0) {
    return error_reply(409, "Queued resource '" + name + "' already exists");
  }
  const json* specs = nullptr;
  if (body.contains("tpu") && body["tpu"].is_object() && body["tpu"].contains("nodeSpec")) {
    specs = &body["tpu"]["nodeSpec"];
  }
  if (specs == nullptr || !specs->is_array() || specs->empty()) {
    return error_reply(400, "tpu.nodeSpec must list one node");
  }
  if (specs->size() != 1) {
    return error_reply(400, "tpu.nodeSpec: the mock cloud supports one node spec per queued resource (several "
                            "slices of one spec are asked for with multisliceParams)");
  }
  const json& spec = (*specs)[0];
  if (!spec.is_object()) {
    return error_reply(400, "tpu.nodeSpec[0] must be a NodeSpec object");
  }
  const bool multislice = spec.contains("multisliceParams");
  if (multislice == spec.contains("nodeId")) {
    return error_reply(400, "tpu.nodeSpec[0] needs either nodeId (one node) or multisliceParams (a multislice "
                            "request), not both");
  }
  if (!multislice && (!spec["nodeId"].is_string() || !valid_id(spec["nodeId"].get<std::string>()))) {
    return error_reply(400, "tpu.nodeSpec[0].nodeId is not a valid id");
  }
  if (multislice) {
    const json& params = spec["multisliceParams"];
    // int32 in Google's JSON mapping: a number, or a decimal string.
    std::optional<long long> count;
    if (params.is_object() && params.contains("nodeCount")) {
      const json& value = params["nodeCount"];
      if (value.is_number_integer()) {
        count = value.get<long long>();
      } else if (value.is_string()) {
        count = util::parse_int(value.get<std::string>());
      }
    }
    if (!count || *count < 2 || *count > kMaxMultisliceNodes) {
      return error_reply(400, "tpu.nodeSpec[0].multisliceParams.nodeCount must be a whole number from 2 to " +
                                  std::to_string(kMaxMultisliceNodes));
    }
    if (params.contains("nodeIdPrefix") && !params["nodeIdPrefix"].is_string()) {
      return error_reply(400, "tpu.nodeSpec[0].multisliceParams.nodeIdPrefix must be a string");
    }
  }
  if (spec.contains("parent") && spec["parent"] != loc) {
    return error_reply(400, "tpu.nodeSpec[0].parent must be '" + loc + "'");
  }
  if (!spec.contains("node") || !spec["node"].is_object() || !spec["node"].contains("acceleratorType") ||
      !spec["node"]["acceleratorType"].is_string()) {
    return error_reply(400, "tpu.nodeSpec[0].node.acceleratorType is required");
  }
  std::string why;
  auto accelerator = config::find_accelerator(spec["node"]["acceleratorType"].get<std::string>(), &why);
  if (!accelerator) {
    return error_reply(400,
                       "Unknown accelerator type '" + spec["node"]["acceleratorType"].get<std::string>() + "': " + why);
  }
  Provisioning provisioning;
  if (auto r = read_provisioning(body, spec["node"], provisioning); !r.ok()) {
    return r;
  }
  const Tier tier = provisioning.tier;
  std::int64_t valid_until = 0;
  if (body.contains("queueingPolicy")) {
    const auto& policy = body["queueingPolicy"];
    if (!policy.is_object()) {
      return error_reply(400, "queueingPolicy must be an object");
    }
    if (policy.contains("validUntilDuration")) {
      auto seconds = parse_proto_duration(policy["validUntilDuration"]);
      if (!seconds) {
        return error_reply(400, "queueingPolicy.validUntilDuration must be a duration such as \"3600s\"");
      }
      valid_until = now_ms + std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled_ms(*seconds)));
    }
    if (policy.contains("validUntilTime")) {
      auto when = policy["validUntilTime"].is_string() ? util::parse_utc(policy["validUntilTime"].get<std::string>())
                                                       : std::nullopt;
      if (!when) {
        return error_reply(400, "queueingPolicy.validUntilTime must be an RFC 3339 UTC time");
      }
      valid_until = *when;
    }
  }
  const auto node_ids = world_internal::requested_node_ids(body, id);
  std::vector<std::string> node_names;
  for (const auto& node_id : node_ids) {
    if (!valid_id(node_id)) {
      return error_reply(400, "Invalid node id '" + node_id +
                                  "' (from multisliceParams.nodeIdPrefix): use lowercase "
                                  "letters, digits and hyphens, starting with a letter");
    }
    node_names.push_back(loc);
    node_names.back().append("/nodes/").append(node_id);
  }
  for (std::size_t i = 0; i < node_ids.size(); ++i) {
    if (nodes_.count(node_names[i]) != 0) {
      return error_reply(409, "Node '" + node_names[i] + "' already exists");
    }
    for (const auto& [other_name, other] : queued_resources_) {
      if (other->project == project && other->zone == zone && other->state != "DELETING" &&
          std::ranges::count(world_internal::requested_node_ids(other->request, other->id), node_ids[i]) != 0) {
        std::string message = "Node '";
        message.append(node_names[i])
            .append("' is already requested by queued resource '")
            .append(other_name)
            .append("'");
        return error_reply(409, message);
      }
    }
  }
  auto* pool = pool_for(zone, accelerator->generation->name, tier);
  if (pool == nullptr) {
    return error_reply(400, "Accelerator type " + accelerator->name + " (" + std::string(tier_name(tier)) +
                                ") is not offered in zone " + zone);
  }
  std::string reservation;
  if (tier == Tier::reserved) {
    // projects/P/locations/Z/reservations/R, "-" for any of the project's; a bare id means the project's own.
    const std::string prefix = loc + "/reservations/";
    std::string asked = provisioning.reservation;
    if (!asked.empty() && asked.find('/') == std::string::npos) {
      asked = prefix + asked;
    }
    if (!asked.empty() && asked != prefix + "-" && asked != prefix + pool->reservation) {
      return error_reply(400, "Reservation '" + asked + "' was not found, or does not hold " +
                                  accelerator->generation->name + " chips in " + zone + " (reservations.list)");
    }
    reservation = prefix + pool->reservation;
  }
  const int chips = accelerator->chips * static_cast<int>(node_ids.size());
  if (auto r = check_quota(project, *pool, chips); !r.ok()) {
    return r;
  }
  auto qr = std::make_unique<QueuedResource>();
  qr->name = name;
  qr->project = project;
  qr->zone = zone;
  qr->id = id;
  qr->request = body;
  for (const char* output_only : {"name", "createTime", "state"}) {
    qr->request.erase(output_only);
  }
  for (const char* output_only : {"name", "state", "health", "healthDescription", "networkEndpoints", "createTime",
                                  "queuedResource", "id", "apiVersion", "symptoms", "multisliceNode"}) {
    qr->request["tpu"]["nodeSpec"][0]["node"].erase(output_only);
  }
  if (multislice) { // An int32 is a JSON number in the replies, whichever form the request used.
    qr->request["tpu"]["nodeSpec"][0]["multisliceParams"]["nodeCount"] = static_cast<int>(node_ids.size());
  }
  qr->accelerator = accelerator->name;
  qr->generation = accelerator->generation->name;
  qr->tier = tier;
  qr->run_seconds = provisioning.run_seconds;
  qr->reservation = reservation;
  qr->chips = chips;
  qr->hosts = accelerator->hosts;
  qr->node_names = node_names;
  qr->create_ms = now_ms;
  qr->next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.creating_seconds));
  qr->valid_until_ms = valid_until;
  qr->create_op = new_operation(project, zone, "create", name, now_ms);
  auto op_name = qr->create_op;
  queued_resources_[name] = std::move(qr);
  ++queued_resources_created_;
  if (!request_id.empty()) {
    remember_request_id(request_key, op_name);
  }
  touch_locked(name);
  tick_locked(now_ms);
  persist_locked();
  return {200, operation_json(*operations_[op_name])};
}

Reply World::check_quota(const std::string& project, const Pool& pool, int chips) const {
  int held = 0;
  for (const auto& [name, other] : queued_resources_) {
    if (other->project == project && other->zone == pool.zone && other->generation == pool.generation &&
        other->tier == pool.tier && other->state != "FAILED" && other->state != "SUSPENDED" &&
        other->state != "DELETING") {
      held += other->chips;
    }
  }
  for (const auto& [name, node] : nodes_) {
    if (node->holds_capacity && node->project == project && node->zone == pool.zone &&
        node->generation == pool.generation && node->tier == pool.tier) {
      held += node->chips;
    }
  }
  if (held + chips <= pool.quota) {
    return {200, {}};
  }
  return error_reply(429, "Quota exceeded: " + std::to_string(chips) + " " + pool.generation + " " +
                              std::string(tier_name(pool.tier)) + " chips requested in " + pool.zone + ", " +
                              std::to_string(held) + " of the quota of " + std::to_string(pool.quota) +
                              " already in use");
}

Reply World::get_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                 std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  return find_reply(queued_resources_, location(project, zone) + "/queuedResources/" + id, "Queued resource",
                    [this](const QueuedResource& qr) { return queued_resource_json(qr); });
}

Reply World::list_queued_resources(const std::string& project, const std::string& zone, int page_size,
                                   const std::string& page_token, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  const auto items = under_prefix(queued_resources_, location(project, zone) + "/");
  return page(
      items.size(), [&](std::size_t i) { return queued_resource_json(*items[i]); }, "queuedResources", page_size,
      page_token);
}

Reply World::delete_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                    bool force, const std::string& request_id, std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    auto loc = location(project, zone);
    const auto name = loc + "/queuedResources/" + id;
    const auto request_key = "delete " + name + " " + request_id;
    if (const auto* op = operation_for_request(request_id.empty() ? "" : request_key)) {
      return {200, operation_json(*op)};
    }
    auto it = queued_resources_.find(name);
    if (it == queued_resources_.end()) {
      return error_reply(404, "Queued resource '" + name + "' was not found");
    }
    auto& qr = *it->second;
    if (qr.state == "DELETING") {
      if (operations_.count(qr.delete_op) == 0) { // operations.delete forgot it: the repeat gets a new record.
        qr.delete_op = new_operation(project, zone, "delete", name, now_ms);
        touch_locked(name);
      }
      return {200, operation_json(*operations_.at(qr.delete_op))};
    }
    if ((qr.state == "ACTIVE" || qr.state == "PROVISIONING") && !force) {
      return failed_precondition("Queued resource '" + name + "' is " + qr.state +
                                 " and has a node; delete it with force=true");
    }
    qr.state = "DELETING";
    qr.initiator = "USER";
    qr.preempt_ms = 0;
    qr.maintenance_ms = 0;
    qr.next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.deleting_seconds));
    for (const auto& node_name : qr.node_names) {
      if (auto node = nodes_.find(node_name); node != nodes_.end() && node->second->queued_resource == qr.name) {
        node->second->state = "DELETING";
        node->second->clear_health();
        touch_locked(node->first);
        hosts_lost_locked(*node->second);
      }
    }
    qr.delete_op = new_operation(project, zone, "delete", name, now_ms);
    if (!request_id.empty()) {
      remember_request_id(request_key, qr.delete_op);
    }
    auto op_name = qr.delete_op;
    touch_locked(name);
    tick_locked(now_ms);
    return {200, operation_json(*operations_[op_name])};
  });
}

Reply World::reset_queued_resource(const std::string& project, const std::string& zone, const std::string& id,
                                   std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    auto name = location(project, zone) + "/queuedResources/" + id;
    auto it = queued_resources_.find(name);
    if (it == queued_resources_.end()) {
      return error_reply(404, "Queued resource '" + name + "' was not found");
    }
    auto& qr = *it->second;
    if (qr.state != "SUSPENDED" && qr.state != "FAILED") {
      return failed_precondition("Queued resource '" + name + "' is " + qr.state +
                                 "; only a SUSPENDED or FAILED queued resource can be reset");
    }
    if (const auto* pool = pool_for(qr.zone, qr.generation, qr.tier)) {
      if (auto r = check_quota(project, *pool, qr.chips); !r.ok()) {
        return r;
      }
    }
    for (const auto& node_name : qr.node_names) {
      if (auto node = nodes_.find(node_name); node != nodes_.end() && node->second->queued_resource == qr.name) {
        touch_locked(node->first);
        hosts_lost_locked(*node->second);
        nodes_.erase(node);
      }
    }
    qr.node_names.clear();
    for (const auto& node_id : world_internal::requested_node_ids(qr.request, qr.id)) {
      qr.node_names.push_back(location(project, zone) + "/nodes/" + node_id);
    }
    release_capacity(qr);
    qr.state = "WAITING_FOR_RESOURCES";
    qr.initiator = "USER";
    qr.failed_error = nullptr;
    qr.queued_seq = next_sequence_++;
    qr.valid_until_ms = 0;
    qr.terminate_ms = 0; // A flex-start request runs its whole duration again.
    if (auto policy = qr.request.find("queueingPolicy"); policy != qr.request.end() && policy->is_object()) {
      if (auto seconds = parse_proto_duration(policy->value("validUntilDuration", json()))) {
        qr.valid_until_ms = now_ms + std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled_ms(*seconds)));
      }
    }
    auto op_name = new_operation(project, zone, "reset", name, now_ms);
    auto response = queued_resource_json(qr);
    response["@type"] = kQueuedResourceType;
    finish_operation(op_name, now_ms, response);
    touch_locked(name);
    tick_locked(now_ms);
    return {200, operation_json(*operations_[op_name])};
  });
}

} // namespace jobman::mock
