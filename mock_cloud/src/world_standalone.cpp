// Standalone nodes (nodes.create, as `tpu.allocation_mode: tpu-vm` uses it): creation, capacity and their timers.
#include "jobman/config/accelerator.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <memory>

namespace jobman::mock {

using nlohmann::json;
using world_internal::is_utf8;
using world_internal::kNodeType;
using world_internal::rpc_status;
using world_internal::valid_id;

namespace {

// The accelerator a Node asks for: acceleratorType, else acceleratorConfig {type, topology}; nullopt with `why`.
std::optional<config::AcceleratorType> requested_accelerator(const json& body, std::string* why) {
  if (body.contains("acceleratorType")) {
    if (!body["acceleratorType"].is_string()) {
      *why = "acceleratorType must be a string such as \"v4-8\"";
      return std::nullopt;
    }
    std::string reason;
    auto found = config::find_accelerator(body["acceleratorType"].get<std::string>(), &reason);
    if (!found) {
      *why = "Unknown accelerator type '" + body["acceleratorType"].get<std::string>() + "': " + reason;
    }
    return found;
  }
  const auto config_it = body.find("acceleratorConfig");
  if (config_it == body.end()) {
    *why = "acceleratorType (or acceleratorConfig) is required";
    return std::nullopt;
  }
  const json& wanted = *config_it;
  for (const auto& generation : config::tpu_generations()) {
    for (const int size : generation.sizes) {
      auto candidate = config::find_accelerator(generation.name + "-" + std::to_string(size));
      if (candidate && world_internal::accelerator_config(*candidate) == wanted) {
        return candidate;
      }
    }
  }
  *why = "acceleratorConfig " + wanted.dump() +
         " names no accelerator type (type V2, V3, V4, V5LITE_POD, V5P or V6E "
         "with a topology such as \"2x2x1\")";
  return std::nullopt;
}

// schedulingConfig's booleans; false with `why` set when one is not a boolean.
bool read_scheduling(const json& body, bool* spot, bool* preemptible, std::string* why) {
  const auto it = body.find("schedulingConfig");
  if (it == body.end()) {
    return true;
  }
  if (!it->is_object()) {
    *why = "schedulingConfig must be an object";
    return false;
  }
  for (const auto& [key, target] : {std::pair{"spot", spot}, std::pair{"preemptible", preemptible}}) {
    if (it->contains(key)) {
      if (!(*it)[key].is_boolean()) {
        *why = std::string("schedulingConfig.") + key + " must be true or false";
        return false;
      }
      *target = (*it)[key].get<bool>();
    }
  }
  return true;
}

} // namespace

Reply World::create_node(const std::string& project, const std::string& zone, const std::string& id, const json& body,
                         std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    if (auto r = check_location(zone); !r.ok()) {
      return r;
    }
    if (!is_utf8(project)) {
      return error_reply(400, "Invalid project '" + project + "': not UTF-8 text");
    }
    const auto name = location(project, zone) + "/nodes/" + id;
    if (id.empty()) {
      return error_reply(400, "nodeId is required");
    }
    if (!valid_id(id)) {
      return error_reply(400, "Invalid nodeId '" + id +
                                  "': use lowercase letters, digits and hyphens, starting with a letter (at most 63)");
    }
    if (!body.is_object()) {
      return error_reply(400, "The request body must be a Node JSON object");
    }
    std::string why;
    auto accelerator = requested_accelerator(body, &why);
    if (!accelerator) {
      return error_reply(400, why);
    }
    if (!body.contains("runtimeVersion") || !body["runtimeVersion"].is_string() ||
        body["runtimeVersion"].get<std::string>().empty()) {
      return error_reply(400, "runtimeVersion is required");
    }
    bool spot = false;
    bool preemptible = false;
    if (!read_scheduling(body, &spot, &preemptible, &why)) {
      return error_reply(400, why);
    }
    if (spot && preemptible) {
      return error_reply(400, "schedulingConfig: a node cannot be both spot and preemptible");
    }
    if (nodes_.count(name) != 0) {
      return error_reply(409, "Node '" + name + "' already exists");
    }
    // The id a queued resource asks for stays taken while the resource lives, also after nodes.delete took its node
    // (a reset brings the node back).
    for (const auto& [qr_name, qr] : queued_resources_) {
      if (qr->project == project && qr->zone == zone && qr->state != "DELETING" &&
          std::ranges::count(world_internal::requested_node_ids(qr->request, qr->id), id) != 0) {
        std::string message = "Node '";
        message.append(name).append("' is already requested by queued resource '").append(qr_name).append("'");
        return error_reply(409, message);
      }
    }
    const Tier tier = spot || preemptible ? Tier::spot : Tier::on_demand;
    auto* pool = pool_for(zone, accelerator->generation->name, tier);
    if (pool == nullptr) {
      return error_reply(400, "Accelerator type " + accelerator->name + " (" + std::string(tier_name(tier)) +
                                  ") is not offered in zone " + zone);
    }
    if (auto r = check_quota(project, *pool, accelerator->chips); !r.ok()) {
      return r;
    }
    auto node = std::make_unique<Node>();
    node->name = name;
    node->project = project;
    node->zone = zone;
    node->id = id;
    node->spec = body;
    for (const char* output_only : {"name", "state", "health", "healthDescription", "networkEndpoints", "createTime",
                                    "queuedResource", "id", "apiVersion", "symptoms", "multisliceNode"}) {
      node->spec.erase(output_only);
    }
    node->accelerator = accelerator->name;
    node->generation = accelerator->generation->name;
    node->tier = tier;
    node->chips = accelerator->chips;
    node->preemptible = preemptible;
    node->create_ms = now_ms;
    // Like Google's nodes.create, there is no queue: the chips are free now or the create fails.
    node->holds_capacity = pool->chips - pool->used >= node->chips;
    if (node->holds_capacity) {
      pool->used += node->chips;
      node->next_ms = now_ms + static_cast<std::int64_t>(draw_delay_ms(config_.provisioning_for(node->generation)));
    } else {
      node->next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.creating_seconds));
    }
    place_hosts_locked(*node, accelerator->hosts);
    node->create_op = new_operation(project, zone, "create", name, now_ms);
    const auto op_name = node->create_op;
    nodes_[name] = std::move(node);
    touch_locked(name);
    tick_locked(now_ms);
    return {200, operation_json(*operations_[op_name])};
  });
}

void World::release_capacity(Node& node) {
  if (!node.holds_capacity) {
    return;
  }
  if (auto* pool = pool_for(node.zone, node.generation, node.tier)) {
    pool->used = std::max(0, pool->used - node.chips);
  }
  node.holds_capacity = false;
  touch_locked(node.name);
}

void World::standalone_ready_locked(Node& node, std::string& op, std::int64_t now) {
  node_ready_locked(node);
  if (node.tier == Tier::spot) {
    auto delay = draw_exponential_ms(config_.spot_mean_seconds_between_preemptions);
    node.preempt_ms = delay > 0 ? now + delay : 0;
  } else {
    auto delay = draw_exponential_ms(config_.maintenance_mean_seconds_between_events);
    node.maintenance_ms = delay > 0 ? now + delay : 0;
  }
  auto response = node_json(node);
  response["@type"] = kNodeType;
  finish_operation(op, now, response);
  op.clear();
  touch_locked(node.name);
}

void World::take_back_locked(Node& node, const std::string& state) {
  node.state = state;
  node.preempt_ms = 0;
  node.maintenance_ms = 0;
  hosts_lost_locked(node);
  release_capacity(node);
  touch_locked(node.name);
}

std::int64_t World::next_standalone_event_locked() const {
  std::int64_t next = INT64_MAX;
  for (const auto& [name, node] : nodes_) {
    if (!node->standalone()) {
      continue;
    }
    for (const auto t :
         {node->state == "CREATING" || node->state == "STOPPING" || node->state == "STARTING" ? node->next_ms : 0,
          node->state == "READY" ? node->preempt_ms : 0, node->state == "READY" ? node->maintenance_ms : 0}) {
      if (t > 0) {
        next = std::min(next, t);
      }
    }
  }
  return next;
}

void World::step_standalone_locked(std::int64_t now) {
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    auto& node = *it->second;
    if (!node.standalone()) {
      ++it;
      continue;
    }
    if (node.state == "CREATING" && now >= node.next_ms && !node.holds_capacity) {
      // Google's answer to a create its zone cannot serve now: the operation fails and no node remains.
      finish_operation(node.create_op, now,
                       {{"error", rpc_status(8, "There is no more capacity in the zone \"" + node.zone +
                                                    "\"; you can try in another zone where Cloud TPU Nodes are "
                                                    "offered (see https://cloud.google.com/tpu/docs/regions)")}});
      touch_locked(node.name);
      it = nodes_.erase(it);
      continue;
    }
    if ((node.state == "CREATING" || node.state == "STARTING") && now >= node.next_ms) {
      standalone_ready_locked(node, node.state == "CREATING" ? node.create_op : node.transition_op, now);
    } else if (node.state == "STOPPING" && now >= node.next_ms) {
      node.state = "STOPPED";
      release_capacity(node);
      auto response = node_json(node);
      response["@type"] = kNodeType;
      finish_operation(node.transition_op, now, response);
      node.transition_op.clear();
      touch_locked(node.name);
    } else if (node.state == "READY" && node.preempt_ms > 0 && now >= node.preempt_ms) {
      take_back_locked(node, "PREEMPTED");
    } else if (node.state == "READY" && node.maintenance_ms > 0 && now >= node.maintenance_ms) {
      take_back_locked(node, "TERMINATED");
    }
    ++it;
  }
}

} // namespace jobman::mock
