// Persistence: attaching the SQLite store, records and snapshots of the state, restoring them, committing changes.
#include "mock_cloud/world.hpp"
#include "mock_cloud/world_store.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace jobman::mock {

using nlohmann::json;
using world_internal::fleet_key;
using world_internal::kComputeRecordPrefix;
using world_internal::kMachineRecordPrefix;
using world_internal::kOsLoginRecordPrefix;
using world_internal::machine_record_name;
using world_internal::pool_key;

void World::attach_store(const std::filesystem::path& file, std::int64_t now_ms) {
  auto store = std::make_unique<WorldStore>(file);
  auto contents = store->load();
  if (!contents.globals.is_null()) {
    json snapshot = contents.globals;
    snapshot["requestIds"] = contents.request_ids;
    for (auto& record : contents.records) {
      snapshot[record.value("kind", "")].push_back(std::move(record));
    }
    restore(snapshot);
  }
  std::lock_guard lock(mutex_);
  store_ = std::move(store);
  if (contents.globals.is_null()) {
    // A new database: everything the world already holds is written by the persist below.
    for (const auto& [name, qr] : queued_resources_) {
      changed_.insert(name);
    }
    for (const auto& [name, node] : nodes_) {
      changed_.insert(name);
    }
    for (const auto& [name, op] : operations_) {
      changed_.insert(name);
    }
    for (const auto& [id, machine] : machines_) {
      changed_.insert(machine_record_name(id));
    }
    for (const auto& [name, project] : compute_projects_) {
      changed_.insert(name);
    }
    for (const auto& [name, op] : compute_operations_) {
      changed_.insert(name);
    }
    for (const auto& [name, user] : oslogin_users_) {
      changed_.insert(name);
    }
    new_request_ids_.assign(request_ids_.begin(), request_ids_.end());
  }
  touch_locked();
  tick_locked(now_ms);
  persist_locked();
}

json World::snapshot() {
  std::lock_guard lock(mutex_);
  return snapshot_locked();
}

json World::globals_locked() const {
  json out;
  out["version"] = 1;
  out["nextSequence"] = next_sequence_;
  out["nextHost"] = next_host_;
  out["addressOffset"] = address_offset_;
  out["nextRelease"] = next_release_;
  out["faultyFraction"] = faulty_fraction_;
  std::ostringstream rng;
  rng << rng_;
  out["rng"] = rng.str();
  out["pools"] = json::array();
  for (const auto& [key, pool] : pools_) {
    out["pools"].push_back({{"zone", pool->zone},
                            {"generation", pool->generation},
                            {"tier", tier_name(pool->tier)},
                            {"chips", pool->chips},
                            {"quota", pool->quota},
                            {"reservation", pool->reservation}});
  }
  return out;
}

json World::record_of(const QueuedResource& qr) {
  return {{"kind", "queuedResources"},
          {"name", qr.name},
          {"project", qr.project},
          {"zone", qr.zone},
          {"id", qr.id},
          {"request", qr.request},
          {"state", qr.state},
          {"initiator", qr.initiator},
          {"accelerator", qr.accelerator},
          {"generation", qr.generation},
          {"tier", tier_name(qr.tier)},
          {"chips", qr.chips},
          {"runSeconds", qr.run_seconds},
          {"terminateMs", qr.terminate_ms},
          {"reservation", qr.reservation},
          {"hosts", qr.hosts},
          {"nodes", qr.node_names},
          {"createMs", qr.create_ms},
          {"nextMs", qr.next_ms},
          {"queuedSeq", qr.queued_seq},
          {"validUntilMs", qr.valid_until_ms},
          {"preemptMs", qr.preempt_ms},
          {"maintenanceMs", qr.maintenance_ms},
          {"holdsCapacity", qr.holds_capacity},
          {"failedError", qr.failed_error},
          {"createOp", qr.create_op},
          {"deleteOp", qr.delete_op}};
}

json World::record_of(const Node& node) {
  json endpoints = json::array();
  for (const auto& [internal, external] : node.endpoints) {
    endpoints.push_back({internal, external});
  }
  return {{"kind", "nodes"},
          {"name", node.name},
          {"project", node.project},
          {"zone", node.zone},
          {"id", node.id},
          {"queuedResource", node.queued_resource},
          {"spec", node.spec},
          {"accelerator", node.accelerator},
          {"tier", tier_name(node.tier)},
          {"state", node.state},
          {"health", node.health},
          {"healthDescription", node.health_description},
          {"createMs", node.create_ms},
          {"nextMs", node.next_ms},
          {"numericId", node.numeric_id},
          {"endpoints", endpoints},
          {"machines", node.machines},
          {"deleteOp", node.delete_op},
          {"generation", node.generation},
          {"chips", node.chips},
          {"holdsCapacity", node.holds_capacity},
          {"preemptible", node.preemptible},
          {"preemptMs", node.preempt_ms},
          {"maintenanceMs", node.maintenance_ms},
          {"maintenanceWindowMs", node.maintenance_window_ms},
          {"createOp", node.create_op},
          {"transitionOp", node.transition_op},
          {"incarnation", node.incarnation},
          {"multislice", node.multislice}};
}

json World::record_of(const Operation& op) {
  return {{"kind", "operations"},     {"name", op.name},
          {"verb", op.verb},          {"target", op.target},
          {"createMs", op.create_ms}, {"endMs", op.end_ms},
          {"done", op.done},          {"response", op.response},
          {"error", op.error},        {"cancelRequested", op.cancel_requested}};
}

json World::record_of(const Machine& machine) {
  return {{"kind", "machines"},
          {"name", machine_record_name(machine.id)},
          {"id", machine.id},
          {"zone", machine.zone},
          {"generation", machine.generation},
          {"serial", machine.serial},
          {"faulty", machine.faulty},
          {"node", machine.node},
          {"worker", machine.worker},
          {"release", machine.release}};
}

json World::record_of(const ComputeProject& project) {
  json items = json::array();
  for (const auto& [key, value] : project.items) {
    items.push_back({key, value});
  }
  return {{"kind", "computeProjects"},
          {"name", std::string(kComputeRecordPrefix) + "projects/" + project.project},
          {"project", project.project},
          {"items", items},
          {"version", project.version}};
}

json World::record_of(const ComputeOperation& op) {
  return {{"kind", "computeOperations"},
          {"name", std::string(kComputeRecordPrefix) + "projects/" + op.project + "/global/operations/" + op.name},
          {"operation", op.name},
          {"project", op.project},
          {"operationType", op.operation_type},
          {"insertMs", op.insert_ms},
          {"endMs", op.end_ms}};
}

json World::record_of(const OsLoginUser& user) {
  json keys = json::array();
  for (const auto& [print, key] : user.keys) {
    keys.push_back({print, key.first, key.second});
  }
  return {{"kind", "osloginUsers"},
          {"name", std::string(kOsLoginRecordPrefix) + user.email},
          {"email", user.email},
          {"keys", keys},
          {"projects", user.projects}};
}

json World::snapshot_locked() const {
  json out = globals_locked();
  out["requestIds"] = request_ids_;
  out["queuedResources"] = json::array();
  for (const auto& [name, qr] : queued_resources_) {
    out["queuedResources"].push_back(record_of(*qr));
  }
  out["nodes"] = json::array();
  for (const auto& [name, node] : nodes_) {
    out["nodes"].push_back(record_of(*node));
  }
  out["operations"] = json::array();
  for (const auto& [name, op] : operations_) {
    out["operations"].push_back(record_of(*op));
  }
  out["machines"] = json::array();
  for (const auto& [id, machine] : machines_) {
    out["machines"].push_back(record_of(*machine));
  }
  out["computeProjects"] = json::array();
  for (const auto& [name, project] : compute_projects_) {
    out["computeProjects"].push_back(record_of(*project));
  }
  out["computeOperations"] = json::array();
  for (const auto& [name, op] : compute_operations_) {
    out["computeOperations"].push_back(record_of(*op));
  }
  out["osloginUsers"] = json::array();
  for (const auto& [name, user] : oslogin_users_) {
    out["osloginUsers"].push_back(record_of(*user));
  }
  return out;
}

void World::restore(const json& snapshot) {
  std::lock_guard lock(mutex_);
  auto tier_of = [](const json& value) { return tier_named(value.get<std::string>()).value_or(Tier::on_demand); };
  next_sequence_ = snapshot.value("nextSequence", std::int64_t{1});
  next_host_ = snapshot.value("nextHost", std::uint32_t{0});
  address_offset_ = snapshot.value("addressOffset", address_offset_);
  next_release_ = snapshot.value("nextRelease", std::int64_t{1});
  faulty_fraction_ = snapshot.value("faultyFraction", config_.faulty_fraction);
  request_ids_ = snapshot.value("requestIds", std::map<std::string, std::string>{});
  for (const auto& p : snapshot.value("pools", json::array())) {
    auto tier = tier_of(p["tier"]);
    auto& pool = pools_[pool_key(p["zone"], p["generation"], tier)];
    if (!pool) {
      pool = std::make_unique<Pool>();
    }
    pool->zone = p["zone"];
    pool->generation = p["generation"];
    pool->tier = tier;
    pool->chips = p["chips"];
    pool->quota = p["quota"];
    // A state written before reservations keeps the config's name.
    pool->reservation = p.value("reservation", pool->reservation);
    pool->used = 0;
  }
  queued_resources_.clear();
  nodes_.clear();
  operations_.clear();
  machines_.clear();
  free_machines_.clear();
  machines_minted_.clear();
  compute_projects_.clear();
  compute_operations_.clear();
  oslogin_users_.clear();
  for (const auto& q : snapshot.value("queuedResources", json::array())) {
    auto qr = std::make_unique<QueuedResource>();
    qr->name = q["name"];
    qr->project = q["project"];
    qr->zone = q["zone"];
    qr->id = q["id"];
    qr->request = q["request"];
    qr->state = q["state"];
    qr->initiator = q["initiator"];
    qr->accelerator = q["accelerator"];
    qr->generation = q["generation"];
    qr->tier = tier_of(q["tier"]);
    qr->chips = q["chips"];
    qr->run_seconds = q.value("runSeconds", 0.0);
    qr->terminate_ms = q.value("terminateMs", std::int64_t{0});
    qr->reservation = q.value("reservation", "");
    qr->hosts = q["hosts"];
    if (q.contains("nodes")) {
      qr->node_names = q["nodes"].get<std::vector<std::string>>();
    } else if (const auto node = q.value("node", ""); !node.empty()) { // Written before multislice requests.
      qr->node_names = {node};
    }
    qr->create_ms = q["createMs"];
    qr->next_ms = q["nextMs"];
    qr->queued_seq = q["queuedSeq"];
    qr->valid_until_ms = q["validUntilMs"];
    qr->preempt_ms = q["preemptMs"];
    qr->maintenance_ms = q["maintenanceMs"];
    qr->holds_capacity = q["holdsCapacity"];
    qr->failed_error = q["failedError"];
    qr->create_op = q["createOp"];
    qr->delete_op = q["deleteOp"];
    if (qr->holds_capacity) {
      if (auto* pool = chips_pool_for(qr->zone, qr->generation, qr->tier)) {
        pool->used += qr->chips;
      }
    }
    auto name = qr->name;
    queued_resources_[name] = std::move(qr);
  }
  std::set<std::string> faulty_before_machines; // Nodes of records written before machines existed, marked faulty.
  for (const auto& n : snapshot.value("nodes", json::array())) {
    auto node = std::make_unique<Node>();
    node->name = n["name"];
    node->project = n["project"];
    node->zone = n["zone"];
    node->id = n["id"];
    node->queued_resource = n["queuedResource"];
    node->spec = n["spec"];
    node->accelerator = n["accelerator"];
    node->tier = tier_of(n["tier"]);
    node->state = n["state"];
    node->health = n["health"];
    node->health_description = n.value("healthDescription", "");
    node->create_ms = n["createMs"];
    node->next_ms = n["nextMs"];
    node->numeric_id = n["numericId"];
    for (const auto& e : n["endpoints"]) {
      node->endpoints.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
    node->machines = n.value("machines", std::vector<std::string>{});
    if (n.value("faulty", false)) {
      faulty_before_machines.insert(node->name);
    }
    node->delete_op = n["deleteOp"];
    // Records written before standalone nodes existed lack these: they describe queued resources' nodes.
    node->generation = n.value("generation", "");
    node->chips = n.value("chips", 0);
    node->holds_capacity = n.value("holdsCapacity", false);
    node->preemptible = n.value("preemptible", false);
    node->preempt_ms = n.value("preemptMs", std::int64_t{0});
    node->maintenance_ms = n.value("maintenanceMs", std::int64_t{0});
    node->maintenance_window_ms = n.value("maintenanceWindowMs", std::int64_t{0});
    node->create_op = n.value("createOp", "");
    node->transition_op = n.value("transitionOp", "");
    node->incarnation = n.value("incarnation", 0);
    node->multislice = n.value("multislice", false);
    if (node->holds_capacity) {
      if (auto* pool = pool_for(node->zone, node->generation, node->tier)) {
        pool->used += node->chips;
      }
    }
    auto name = node->name;
    nodes_[name] = std::move(node);
  }
  for (const auto& o : snapshot.value("operations", json::array())) {
    auto op = std::make_unique<Operation>();
    op->name = o["name"];
    op->verb = o["verb"];
    op->target = o["target"];
    op->create_ms = o["createMs"];
    op->end_ms = o["endMs"];
    op->done = o["done"];
    op->response = o["response"];
    op->error = o["error"];
    op->cancel_requested = o.value("cancelRequested", false);
    auto name = op->name;
    operations_[name] = std::move(op);
  }
  for (const auto& m : snapshot.value("machines", json::array())) {
    auto machine = std::make_unique<Machine>();
    machine->id = m["id"];
    machine->zone = m["zone"];
    machine->generation = m["generation"];
    machine->serial = m["serial"];
    machine->faulty = m["faulty"];
    machine->node = m["node"];
    machine->worker = m["worker"];
    machine->release = m["release"];
    const auto fleet = fleet_key(machine->zone, machine->generation);
    machines_minted_[fleet] = std::max(machines_minted_[fleet], machine->serial + 1);
    if (machine->node.empty()) {
      free_machines_[fleet][machine->release] = machine->id;
    }
    auto id = machine->id;
    machines_[id] = std::move(machine);
  }
  for (const auto& p : snapshot.value("computeProjects", json::array())) {
    auto project = std::make_unique<ComputeProject>();
    project->project = p["project"];
    for (const auto& item : p["items"]) {
      project->items.emplace_back(item[0].get<std::string>(), item[1].get<std::string>());
    }
    project->version = p["version"];
    auto name = p["name"].get<std::string>();
    compute_projects_[name] = std::move(project);
  }
  for (const auto& o : snapshot.value("computeOperations", json::array())) {
    auto op = std::make_unique<ComputeOperation>();
    op->name = o["operation"];
    op->project = o["project"];
    op->operation_type = o["operationType"];
    op->insert_ms = o["insertMs"];
    op->end_ms = o["endMs"];
    auto name = o["name"].get<std::string>();
    compute_operations_[name] = std::move(op);
  }
  for (const auto& u : snapshot.value("osloginUsers", json::array())) {
    auto user = std::make_unique<OsLoginUser>();
    user->email = u["email"];
    for (const auto& key : u["keys"]) {
      user->keys[key[0].get<std::string>()] = {key[1].get<std::string>(), key[2].get<std::int64_t>()};
    }
    user->projects = u["projects"].get<std::set<std::string>>();
    auto name = u["name"].get<std::string>();
    oslogin_users_[name] = std::move(user);
  }
  if (snapshot.contains("rng")) {
    // The generator's state, so a restarted world draws the same delays the original would have.
    std::istringstream in(snapshot["rng"].get<std::string>());
    in >> rng_;
  }
  // Records written before machines existed: a READY node's hosts are placed now, on machines marked faulty when
  // the node was.
  for (auto& [name, node] : nodes_) {
    if (node->state == "READY" && node->machines.empty()) {
      node_ready_locked(*node);
      for (const auto& id : node->machines) {
        if (faulty_before_machines.count(name) != 0) {
          machines_.at(id)->faulty = true;
        }
      }
    }
  }
  for (const auto& [name, project] : compute_projects_) {
    common_metadata_changed_locked(project->project);
  }
  touch_locked();
}

void World::persist_locked() {
  if (!dirty_ || !store_) {
    return;
  }
  WorldStore::Changes changes;
  changes.globals = globals_locked().dump();
  for (const auto& name : changed_) {
    if (auto qr = queued_resources_.find(name); qr != queued_resources_.end()) {
      changes.upserts.emplace_back(name, record_of(*qr->second).dump());
    } else if (auto node = nodes_.find(name); node != nodes_.end()) {
      changes.upserts.emplace_back(name, record_of(*node->second).dump());
    } else if (auto op = operations_.find(name); op != operations_.end()) {
      changes.upserts.emplace_back(name, record_of(*op->second).dump());
    } else if (auto project = compute_projects_.find(name); project != compute_projects_.end()) {
      changes.upserts.emplace_back(name, record_of(*project->second).dump());
    } else if (auto compute_op = compute_operations_.find(name); compute_op != compute_operations_.end()) {
      changes.upserts.emplace_back(name, record_of(*compute_op->second).dump());
    } else if (auto user = oslogin_users_.find(name); user != oslogin_users_.end()) {
      changes.upserts.emplace_back(name, record_of(*user->second).dump());
    } else if (name.starts_with(kMachineRecordPrefix)) { // Machines are never removed.
      changes.upserts.emplace_back(name, record_of(*machines_.at(name.substr(kMachineRecordPrefix.size()))).dump());
    } else {
      changes.removed.push_back(name);
    }
  }
  changes.request_ids = std::move(new_request_ids_);
  store_->save(changes);
  changed_.clear();
  new_request_ids_.clear();
  dirty_ = false;
}

} // namespace jobman::mock
