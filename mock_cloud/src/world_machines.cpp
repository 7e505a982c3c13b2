// Physical machines: each zone and TPU generation has a fleet of them, one per worker host. A node's hosts are placed
// on machines when it becomes READY and give them back when they go away, so a machine one slice released is handed
// to a later one with its faults. Faulty hardware belongs to machines: :markFaulty and the faulty fraction.
#include "jobman/config/accelerator.hpp"
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <memory>
#include <random>

namespace jobman::mock {

using nlohmann::json;
using world_internal::fleet_key;
using world_internal::machine_record_name;

namespace {

// Sixteen machines make a sub-block and four sub-blocks a block.
constexpr std::int64_t kMachinesPerSubBlock = 16;
constexpr std::int64_t kSubBlocksPerBlock = 4;

// Eight hex digits naming `part` of the fleet `fleet`: the head of their SHA-256, stable across runs and builds.
std::string hex_name(const std::string& fleet, const std::string& part) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto digest = world_internal::sha256(fleet + "/" + part);
  std::string out;
  for (std::size_t i = 0; i < 4; ++i) {
    const auto byte = static_cast<unsigned char>(digest[i]);
    out += kDigits[byte >> 4];
    out += kDigits[byte & 15];
  }
  return out;
}

// The id of the `serial`-th machine of a zone and generation: blockId/subBlockId/hostId, as Compute Engine's
// resourceStatus.physicalHost reads. Opaque, but machines of one sub-block share its first two parts.
std::string machine_id(const std::string& zone, const std::string& generation, std::int64_t serial) {
  const auto fleet = fleet_key(zone, generation);
  const auto sub_block = serial / kMachinesPerSubBlock;
  return hex_name(fleet, "block " + std::to_string(sub_block / kSubBlocksPerBlock)) + "/" +
         hex_name(fleet, "sub-block " + std::to_string(sub_block)) + "/" +
         hex_name(fleet, "host " + std::to_string(serial));
}

} // namespace

int World::fleet_size_locked(const std::string& zone, const std::string& generation) const {
  int per_host = 4;
  for (const auto& known : config::tpu_generations()) {
    if (known.name == generation) {
      per_host = std::max(1, known.max_chips_per_host);
    }
  }
  int chips = 0;
  for (const Tier tier : kTiers) { // best_effort has no chips of its own.
    if (const auto it = pools_.find(world_internal::pool_key(zone, generation, tier)); it != pools_.end()) {
      chips += it->second->chips;
    }
  }
  return (chips + per_host - 1) / per_host;
}

World::Machine& World::take_machine_locked(const std::string& zone, const std::string& generation) {
  const auto fleet = fleet_key(zone, generation);
  // A new machine while the fleet is smaller than the zone's chips need; then the free one released longest ago. So
  // a slice lands on a machine another slice gave back, faults and all, where the zone is full, as capacity is at
  // Google when it is scarce.
  if (auto free = free_machines_.find(fleet); machines_minted_[fleet] >= fleet_size_locked(zone, generation) &&
                                              free != free_machines_.end() && !free->second.empty()) {
    const auto id = free->second.begin()->second;
    free->second.erase(free->second.begin());
    return *machines_.at(id);
  }
  auto machine = std::make_unique<Machine>();
  machine->zone = zone;
  machine->generation = generation;
  machine->serial = machines_minted_[fleet]++;
  machine->id = machine_id(zone, generation, machine->serial);
  // No draw at 0 or 1: a world without faulty hardware makes exactly the draws it made before machines existed.
  machine->faulty = faulty_fraction_ >= 1 ||
                    (faulty_fraction_ > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < faulty_fraction_);
  const auto id = machine->id;
  machines_[id] = std::move(machine);
  return *machines_[id];
}

void World::node_ready_locked(Node& node) {
  node.state = "READY";
  node.health = "HEALTHY";
  node.health_description.clear();
  // The accelerator was found in the catalog when the node was requested.
  const auto generation = config::find_accelerator(node.accelerator).value().generation->name;
  for (std::size_t worker = 0; worker < node.endpoints.size(); ++worker) {
    auto& machine = take_machine_locked(node.zone, generation);
    machine.node = node.name;
    machine.worker = static_cast<int>(worker);
    touch_locked(machine_record_name(machine.id));
    node.machines.push_back(machine.id);
  }
  touch_locked(node.name);
  announce_ready_locked(node);
}

void World::hosts_lost_locked(Node& node) {
  for (const auto& id : node.machines) {
    auto& machine = *machines_.at(id);
    machine.node.clear();
    machine.worker = 0;
    machine.release = next_release_++;
    free_machines_[fleet_key(machine.zone, machine.generation)][machine.release] = id;
    touch_locked(machine_record_name(id));
  }
  if (!node.machines.empty()) {
    node.machines.clear();
    touch_locked(node.name);
  }
  if (listener_ != nullptr) {
    listener_->slice_lost(node.name);
  }
}

Reply World::mark_node_faulty(const std::string& project, const std::string& zone, const std::string& id,
                              std::int64_t now_ms, std::optional<std::int64_t> worker) {
  return mutate_at(now_ms, [&]() -> Reply {
    const auto name = location(project, zone) + "/nodes/" + id;
    Reply error;
    std::vector<int> workers;
    auto* node = hosts_of_locked(name, worker, workers, error);
    if (node == nullptr) {
      return error;
    }
    json marked = json::array();
    for (const int w : workers) {
      auto& machine = *machines_.at(node->machines[static_cast<std::size_t>(w)]);
      machine.faulty = true;
      touch_locked(machine_record_name(machine.id));
      if (listener_ != nullptr) {
        listener_->slice_faulty(name, w);
      }
      marked.push_back({{"worker", w}, {"physicalHost", machine.id}});
    }
    return {200, {{"node", name}, {"faulty", true}, {"machines", marked}}};
  });
}

bool World::node_faulty(const std::string& project, const std::string& zone, const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = nodes_.find(location(project, zone) + "/nodes/" + id);
  if (it == nodes_.end()) {
    return false;
  }
  const auto& machines = it->second->machines;
  return std::any_of(machines.begin(), machines.end(), [this](const auto& m) { return machines_.at(m)->faulty; });
}

Reply World::set_faulty_fraction(double fraction, std::int64_t now_ms) {
  if (!(fraction >= 0 && fraction <= 1)) {
    return error_reply(400, "faulty_fraction must be a number between 0 and 1");
  }
  return mutate_at(now_ms, [&]() -> Reply {
    faulty_fraction_ = fraction;
    touch_locked();
    return {200, {{"faulty_fraction", faulty_fraction_}}};
  });
}

} // namespace jobman::mock
