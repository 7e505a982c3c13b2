// Nodes: the Node as the API returns it, and nodes.get, list and delete.
#include "jobman/config/accelerator.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

namespace jobman::mock {

using nlohmann::json;
using world_internal::failed_precondition;
using world_internal::find_reply;
using world_internal::page;
using world_internal::under_prefix;

json World::node_json(const Node& node) const {
  json out = node.spec.is_object() ? node.spec : json::object();
  out["name"] = node.name;
  out["id"] = node.numeric_id;
  out["acceleratorType"] = node.accelerator;
  out["state"] = node.state;
  if (!node.health.empty()) {
    out["health"] = node.health;
  }
  if (!node.health_description.empty()) {
    out["healthDescription"] = node.health_description;
  }
  if (node.maintenance_window_ms > 0 && node.state == "READY") {
    // As Compute Engine announces one: the window opens then, and lasts up to an hour.
    out["upcomingMaintenance"] = {{"type", "SCHEDULED"},
                                  {"canReschedule", false},
                                  {"windowStartTime", util::format_utc(node.maintenance_window_ms)},
                                  {"windowEndTime", util::format_utc(node.maintenance_window_ms + 3'600'000)},
                                  {"latestWindowStartTime", util::format_utc(node.maintenance_window_ms)},
                                  {"maintenanceStatus", "PENDING"}};
  }
  out["createTime"] = util::format_utc(node.create_ms);
  out["apiVersion"] = "V2";
  if (!node.standalone()) {
    out["queuedResource"] = node.queued_resource;
  }
  if (node.multislice) {
    out["multisliceNode"] = true;
  }
  if (auto accelerator = config::find_accelerator(node.accelerator)) {
    out["acceleratorConfig"] = world_internal::accelerator_config(*accelerator);
  }
  // Without external IPs (networkConfig.enableExternalIps false) the hosts have internal addresses only.
  const bool external = !(out.contains("networkConfig") && out["networkConfig"].is_object() &&
                          out["networkConfig"].value("enableExternalIps", true) == false);
  json endpoints = json::array();
  for (const auto& [internal, external_ip] : node.endpoints) {
    json endpoint = {{"ipAddress", internal}, {"port", 8470}};
    if (external) {
      endpoint["accessConfig"] = {{"externalIp", external_ip}};
    }
    endpoints.push_back(endpoint);
  }
  out["networkEndpoints"] = endpoints;
  json scheduling = out.value("schedulingConfig", json::object());
  if (!scheduling.is_object()) {
    scheduling = json::object();
  }
  if (node.preemptible) {
    scheduling["preemptible"] = true;
  } else if (node.tier == Tier::spot) {
    scheduling["spot"] = true;
  } else {
    scheduling.erase("spot");
  }
  if (const auto qr = queued_resources_.find(node.queued_resource); qr != queued_resources_.end()) {
    // v2alpha1's fields (the v2 reply leaves them out): when a flex-start run ends, and the reservation.
    if (qr->second->tier == Tier::flex_start && qr->second->terminate_ms > 0) {
      scheduling["terminationTimestamp"] = util::format_utc(qr->second->terminate_ms);
    }
    if (qr->second->tier == Tier::reserved) {
      scheduling["reserved"] = true;
      scheduling["provisioningModel"] = "RESERVATION_BOUND";
      scheduling["reservationName"] = qr->second->reservation;
    }
  }
  if (scheduling.empty()) {
    out.erase("schedulingConfig");
  } else {
    out["schedulingConfig"] = scheduling;
  }
  return out;
}

World::Node* World::find_node_locked(const std::string& name, Reply* missing) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    *missing = error_reply(404, "Node '" + name + "' was not found");
    return nullptr;
  }
  return it->second.get();
}

Reply World::get_node(const std::string& project, const std::string& zone, const std::string& id, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  return find_reply(nodes_, location(project, zone) + "/nodes/" + id, "Node",
                    [this](const Node& node) { return node_json(node); });
}

Reply World::list_nodes(const std::string& project, const std::string& zone, int page_size,
                        const std::string& page_token, std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  const auto items = under_prefix(nodes_, location(project, zone) + "/");
  return page(
      items.size(), [&](std::size_t i) { return node_json(*items[i]); }, "nodes", page_size, page_token);
}

Reply World::delete_node(const std::string& project, const std::string& zone, const std::string& id,
                         std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    auto name = location(project, zone) + "/nodes/" + id;
    Reply missing;
    auto* found = find_node_locked(name, &missing);
    if (found == nullptr) {
      return missing;
    }
    auto& node = *found;
    if (node.state == "DELETING" && !node.delete_op.empty()) {
      if (operations_.count(node.delete_op) == 0) { // operations.delete forgot it: the repeat gets a new record.
        node.delete_op = new_operation(project, zone, "delete", name, now_ms);
      }
      return {200, operation_json(*operations_.at(node.delete_op))};
    }
    if (node.state == "DELETING") {
      return failed_precondition("Node '" + name + "' is being deleted with its queued resource");
    }
    node.state = "DELETING";
    node.clear_health();
    hosts_lost_locked(node);
    node.next_ms = now_ms + static_cast<std::int64_t>(scaled_ms(config_.deleting_seconds));
    node.delete_op = new_operation(project, zone, "delete", name, now_ms);
    // The node's queued resource loses its slice: it suspends until the node is gone, and never provisions or gets
    // preempted meanwhile (its own timers would otherwise bring the node back to READY).
    if (auto qr = queued_resources_.find(node.queued_resource);
        qr != queued_resources_.end() && (qr->second->state == "PROVISIONING" || qr->second->state == "ACTIVE")) {
      qr->second->state = "SUSPENDING";
      qr->second->initiator = "USER";
      qr->second->next_ms = node.next_ms;
      qr->second->preempt_ms = 0;
      qr->second->maintenance_ms = 0;
      touch_locked(qr->first);
      // The other slices of a multislice request go down with it, as they would be preempted with it: their hosts
      // end, and they stay TERMINATED until the queued resource is deleted or reset.
      for (auto* sibling : nodes_of_locked(*qr->second)) {
        if (sibling != &node) {
          sibling->state = "TERMINATED";
          sibling->clear_health();
          sibling->maintenance_window_ms = 0;
          touch_locked(sibling->name);
          hosts_lost_locked(*sibling);
        }
      }
    }
    auto op_name = node.delete_op;
    touch_locked(name);
    tick_locked(now_ms);
    return {200, operation_json(*operations_[op_name])};
  });
}

} // namespace jobman::mock
