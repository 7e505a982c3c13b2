// The admin API and fault injection: preemption on demand, node health, step faults for the workload, API faults,
// capacity, and metrics.
#include "jobman/config/accelerator.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <memory>
#include <random>
#include <set>

namespace jobman::mock {

using nlohmann::json;
using world_internal::failed_precondition;
using world_internal::pool_key;

Reply World::preempt_node(const std::string& project, const std::string& zone, const std::string& id,
                          std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    auto name = location(project, zone) + "/nodes/" + id;
    Reply missing;
    auto* node = find_node_locked(name, &missing);
    if (node == nullptr) {
      return missing;
    }
    if (node->state == "READY" && node->standalone()) {
      take_back_locked(*node, "PREEMPTED");
      return {200, node_json(*node)};
    }
    auto qr = queued_resources_.find(node->queued_resource);
    if (node->state != "READY" || qr == queued_resources_.end() || qr->second->state != "ACTIVE") {
      return failed_precondition("Node '" + name + "' is " + node->state + "; only a READY node can be preempted");
    }
    start_suspending(*qr->second, "PREEMPTED", now_ms);
    return {200, node_json(*node)};
  });
}

World::Node* World::hosts_of_locked(const std::string& name, std::optional<std::int64_t> worker,
                                    std::vector<int>& workers, Reply& error) {
  auto* node = find_node_locked(name, &error);
  if (node == nullptr) {
    return nullptr;
  }
  const auto hosts = static_cast<std::int64_t>(node->endpoints.size());
  if (worker && (*worker < 0 || *worker >= hosts)) {
    error = error_reply(400, "worker " + std::to_string(*worker) + " is not a worker of node '" + name + "' (0 to " +
                                 std::to_string(hosts - 1) + ")");
    return nullptr;
  }
  if (node->machines.empty()) {
    error = failed_precondition("Node '" + name + "' is " + node->state +
                                "; only the worker hosts of a READY node are on machines");
    return nullptr;
  }
  workers.clear();
  for (std::size_t w = 0; w < node->machines.size(); ++w) {
    if (!worker || static_cast<std::int64_t>(w) == *worker) {
      workers.push_back(static_cast<int>(w));
    }
  }
  return node;
}

Reply World::inject_step_fault(const std::string& project, const std::string& zone, const std::string& id,
                               const StepFault& fault, std::int64_t now_ms, std::optional<std::int64_t> worker) {
  const bool spike = fault.kind == StepFault::Kind::loss_spike;
  if (spike && !(fault.factor > 1 && fault.factor <= 1e6)) {
    return error_reply(400, "factor must be a number above 1 and at most 1000000");
  }
  if (spike && (fault.steps < 1 || fault.steps > 1'000'000)) {
    return error_reply(400, "steps must be a whole number from 1 to 1000000");
  }
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/nodes/" + id;
    Reply error;
    std::vector<int> workers;
    if (hosts_of_locked(name, worker, workers, error) == nullptr) {
      return error;
    }
    for (const int w : workers) {
      if (listener_ != nullptr) {
        listener_->slice_step_fault(name, w, fault);
      }
    }
    json answer = {{"node", name}, {"workers", workers}};
    if (spike) {
      answer["lossSpike"] = {{"factor", fault.factor}, {"steps", fault.steps}};
    } else {
      answer["hang"] = true;
    }
    return {200, answer};
  });
}

Reply World::set_node_health(const std::string& project, const std::string& zone, const std::string& id,
                             const std::string& health, const std::string& description, std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/nodes/" + id;
    Reply missing;
    auto* node = find_node_locked(name, &missing);
    if (node == nullptr) {
      return missing;
    }
    // Node.health's values in the discovery document, but HEALTH_UNSPECIFIED, which no node reports.
    static const std::set<std::string> kHealth = {"HEALTHY", "TIMEOUT", "UNHEALTHY_TENSORFLOW",
                                                  "UNHEALTHY_MAINTENANCE"};
    if (kHealth.count(health) == 0) {
      return error_reply(400, "health must be HEALTHY, TIMEOUT, UNHEALTHY_TENSORFLOW or UNHEALTHY_MAINTENANCE, not '" +
                                  health + "'");
    }
    if (node->state != "READY") {
      return failed_precondition("Node '" + name + "' is " + node->state + "; only a READY node reports its health");
    }
    node->health = health;
    node->health_description = description;
    touch_locked(name);
    return {200, node_json(*node)};
  });
}

Reply World::schedule_maintenance(const std::string& project, const std::string& zone, const std::string& id,
                                  double in_seconds, std::int64_t now_ms) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/nodes/" + id;
    Reply missing;
    auto* node = find_node_locked(name, &missing);
    if (node == nullptr) {
      return missing;
    }
    if (node->state != "READY") {
      return failed_precondition("Node '" + name + "' is " + node->state + "; only a READY node is maintained");
    }
    const auto at = now_ms + std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled_ms(in_seconds)));
    if (node->standalone()) {
      node->maintenance_ms = at;
    } else if (auto qr = queued_resources_.find(node->queued_resource); qr != queued_resources_.end()) {
      qr->second->maintenance_ms = at;
      touch_locked(qr->first);
    }
    node->maintenance_window_ms = at;
    touch_locked(name);
    return {200, node_json(*node)};
  });
}

void World::set_faults(const FaultSettings& faults) {
  std::lock_guard lock(mutex_);
  faults_ = faults.rate <= 0 ? FaultSettings{} : faults;
}

FaultDecision World::decide_fault() {
  std::lock_guard lock(mutex_);
  FaultDecision decision;
  if (faults_.rate <= 0) {
    return decision;
  }
  decision.latency_ms = faults_.latency_ms;
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  if (u < faults_.rate && !faults_.codes.empty()) {
    decision.fail_status = faults_.codes[rng_() % faults_.codes.size()];
  }
  return decision;
}

Reply World::set_capacity(const std::string& zone, const std::string& generation, Tier tier, int chips,
                          std::optional<int> quota, std::int64_t now_ms) {
  // No replay before the change: the events due since the last tick replay with the new capacity.
  std::lock_guard lock(mutex_);
  if (auto r = check_location(zone); !r.ok()) {
    return r;
  }
  bool known = std::any_of(config::tpu_generations().begin(), config::tpu_generations().end(),
                           [&](const auto& g) { return g.name == generation; });
  if (!known) {
    return error_reply(400, "Unknown TPU generation '" + generation + "'");
  }
  if (chips < 0 || (quota && *quota < 0)) {
    return error_reply(400, "chips and quota must not be negative");
  }
  auto key = pool_key(zone, generation, tier);
  auto& pool = pools_[key];
  if (!pool) {
    pool = std::make_unique<Pool>();
    pool->zone = zone;
    pool->generation = generation;
    pool->tier = tier;
    pool->quota = chips;
  }
  pool->chips = chips;
  if (quota) {
    pool->quota = *quota;
  }
  touch_locked();
  tick_locked(now_ms);
  persist_locked();
  return {200,
          {{"zone", zone},
           {"generation", generation},
           {"tier", tier_name(tier)},
           {"chips", pool->chips},
           {"quota", pool->quota},
           {"inUse", pool->used}}};
}

void World::count_request(const std::string& method, int status) {
  std::lock_guard lock(mutex_);
  ++request_counts_[method][std::to_string(status)];
}

int World::live_slices(std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  static const std::set<std::string> kRestingQueuedResources = {"SUSPENDED", "FAILED"};
  static const std::set<std::string> kRestingNodes = {"STOPPED", "PREEMPTED", "TERMINATED"};
  const auto queued = std::count_if(queued_resources_.begin(), queued_resources_.end(), [](const auto& qr) {
    return kRestingQueuedResources.count(qr.second->state) == 0;
  });
  const auto nodes = std::count_if(nodes_.begin(), nodes_.end(),
                                   [](const auto& node) { return kRestingNodes.count(node.second->state) == 0; });
  return static_cast<int>(queued + nodes);
}

json World::metrics(std::int64_t now_ms) {
  const auto lock = settle_at(now_ms);
  json out;
  out["requests"] = json::object();
  for (const auto& [method, by_status] : request_counts_) {
    for (const auto& [status, count] : by_status) {
      out["requests"][method][status] = count;
    }
  }
  out["queuedResources"] = json::object();
  for (const auto& [name, qr] : queued_resources_) {
    out["queuedResources"][qr->state] = out["queuedResources"].value(qr->state, 0) + 1;
  }
  out["nodes"] = json::object();
  for (const auto& [name, node] : nodes_) {
    out["nodes"][node->state] = out["nodes"].value(node->state, 0) + 1;
  }
  // Faulty machines, and the nodes that have a worker host on one now.
  out["faultyMachines"] = json::array();
  std::set<std::string> faulty_nodes;
  for (const auto& [id, machine] : machines_) {
    if (!machine->faulty) {
      continue;
    }
    json entry = {{"physicalHost", id}, {"zone", machine->zone}, {"generation", machine->generation}};
    if (!machine->node.empty()) {
      entry["node"] = machine->node;
      entry["worker"] = machine->worker;
      faulty_nodes.insert(machine->node);
    }
    out["faultyMachines"].push_back(entry);
  }
  out["faultyNodes"] = faulty_nodes;
  out["machines"] = machines_.size();
  out["hardware"] = {{"faulty_fraction", faulty_fraction_}};
  out["capacity"] = json::array();
  for (const auto& [key, pool] : pools_) {
    out["capacity"].push_back({{"zone", pool->zone},
                               {"generation", pool->generation},
                               {"tier", tier_name(pool->tier)},
                               {"chips", pool->chips},
                               {"quota", pool->quota},
                               {"inUse", pool->used}});
  }
  out["faults"] = {{"rate", faults_.rate}, {"codes", faults_.codes}, {"latency_ms", faults_.latency_ms}};
  out["queuedResourcesCreated"] = queued_resources_created_;
  out["processes_running"] = 0;
  return out;
}

} // namespace jobman::mock
