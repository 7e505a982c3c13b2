// The World's core: construction, how calls begin (lock_at, settle_at), pools, random draws, changes, the listener.
#include "mock_cloud/world.hpp"

#include "jobman/util/system.hpp"
#include "mock_cloud/world_store.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <memory>
#include <random>
#include <sstream>
#include <utility>

namespace jobman::mock {

using world_internal::pool_key;

World::World(MockConfig config, double time_scale, std::uint64_t seed)
    : config_(std::move(config)), time_scale_(time_scale > 0 ? time_scale : 1), rng_(seed),
      faulty_fraction_(config_.faulty_fraction) {
  for (const auto& zone : config_.zones) {
    for (const auto& [generation, tiers] : zone.pools) {
      for (const auto& [tier, pool] : tiers) {
        auto entry = std::make_unique<Pool>();
        entry->zone = zone.name;
        entry->generation = generation;
        entry->tier = tier;
        entry->chips = pool.chips;
        entry->quota = pool.quota;
        entry->reservation = pool.reservation;
        pools_[pool_key(zone.name, generation, tier)] = std::move(entry);
      }
    }
  }
  next_host_ = static_cast<std::uint32_t>(rng_() % 40000);
  // Apart from the generator, so that no draw moves; a server spreads it further (start_addresses_at).
  address_offset_ = static_cast<std::uint32_t>(seed * 0x9E3779B1ULL);
}

void World::start_addresses_at(std::uint32_t offset) {
  std::lock_guard lock(mutex_);
  address_offset_ = offset;
}

World::~World() = default;

std::unique_lock<std::mutex> World::lock_at(std::int64_t now) {
  std::unique_lock lock(mutex_);
  tick_locked(now);
  return lock;
}

std::unique_lock<std::mutex> World::settle_at(std::int64_t now) {
  auto lock = lock_at(now);
  persist_locked();
  return lock;
}

double World::scaled_ms(double seconds) const {
  return seconds * 1000.0 / time_scale_;
}

double World::draw_delay_ms(const DelayDistribution& delay) {
  double seconds = delay.a;
  switch (delay.kind) {
  case DelayDistribution::Kind::fixed: break;
  case DelayDistribution::Kind::uniform:
    seconds = std::uniform_real_distribution<double>(delay.a, delay.b)(rng_);
    break;
  case DelayDistribution::Kind::lognormal:
    seconds = delay.a * std::exp(delay.b * std::normal_distribution<double>(0.0, 1.0)(rng_));
    break;
  }
  return scaled_ms(seconds);
}

std::int64_t World::draw_exponential_ms(double mean_seconds) {
  if (mean_seconds <= 0) {
    return 0;
  }
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double ms = -std::log(1.0 - u) * scaled_ms(mean_seconds);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(ms));
}

World::Pool* World::pool_for(const std::string& zone, const std::string& generation, Tier tier) {
  auto it = pools_.find(pool_key(zone, generation, tier));
  return it == pools_.end() ? nullptr : it->second.get();
}

World::Pool* World::chips_pool_for(const std::string& zone, const std::string& generation, Tier tier) {
  return pool_for(zone, generation, tier == Tier::best_effort ? Tier::spot : tier);
}

int World::zone_index(const std::string& zone) const {
  for (std::size_t i = 0; i < config_.zones.size(); ++i) {
    if (config_.zones[i].name == zone) {
      return static_cast<int>(i);
    }
  }
  return 255;
}

std::string World::location(const std::string& project, const std::string& zone) const {
  return "projects/" + project + "/locations/" + zone;
}

Reply World::check_location(const std::string& zone) const {
  if (config_.find_zone(zone) == nullptr) {
    return error_reply(404, "Location '" + zone + "' is not served by this mock cloud (see its config's zones)");
  }
  return {200, {}};
}

void World::set_listener(SliceListener* listener) {
  std::lock_guard lock(mutex_);
  listener_ = listener;
  for (const auto& [name, node] : nodes_) {
    if (node->state == "READY") {
      announce_ready_locked(*node);
    }
  }
}

void World::announce_ready_locked(const Node& node) {
  if (listener_ == nullptr) {
    return;
  }
  SliceHosts slice;
  slice.node_name = node.name;
  // Each start of a stopped node brings fresh hosts: a new incarnation, so that the old hosts' teardown (which runs
  // on after slice_lost returns) never touches the new ones.
  slice.numeric_id = node.incarnation == 0 ? node.numeric_id : node.numeric_id + "s" + std::to_string(node.incarnation);
  for (const auto& id : node.machines) {
    const auto& machine = *machines_.at(id);
    slice.machines.push_back({machine.id, machine.faulty});
  }
  slice.addresses = node.endpoints;
  // Google's form: t1v-n-, eight hex digits of the node, -w- and the worker's index.
  std::ostringstream hash;
  hash << std::hex << std::setw(8) << std::setfill('0')
       << (std::hash<std::string>{}(node.numeric_id) & std::size_t{0xffffffff});
  for (std::size_t w = 0; w < node.endpoints.size(); ++w) {
    slice.hostnames.push_back("t1v-n-" + hash.str() + "-w-" + std::to_string(w));
  }
  slice.ssh_keys = ssh_keys_locked(node, util::now_ms());
  listener_->slice_ready(slice);
}

void World::touch_locked() {
  dirty_ = true;
  due_ms_ = 0;
}

void World::touch_locked(const std::string& name) {
  changed_.insert(name);
  touch_locked();
}

} // namespace jobman::mock
