// The clock: replaying timed events (creation, admission, provisioning, preemption, maintenance, deletion), capacity.
#include "mock_cloud/world.hpp"
#include "world_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace jobman::mock {

using nlohmann::json;
using world_internal::kEmptyType;
using world_internal::kQueuedResourceType;
using world_internal::pool_key;
using world_internal::rpc_status;

void World::release_capacity(QueuedResource& qr) {
  if (!qr.holds_capacity) {
    return;
  }
  if (auto* pool = chips_pool_for(qr.zone, qr.generation, qr.tier)) {
    pool->used = std::max(0, pool->used - qr.chips);
  }
  qr.holds_capacity = false;
  touch_locked(qr.name);
}

std::optional<std::int64_t> World::announce_ms_locked(const QueuedResource& qr) const {
  if (qr.maintenance_ms <= 0 || config_.maintenance_notice_seconds <= 0) {
    return std::nullopt;
  }
  const auto node = qr.node_names.empty() ? nodes_.end() : nodes_.find(qr.node_names.front());
  if (node == nodes_.end() || node->second->maintenance_window_ms == qr.maintenance_ms) {
    return std::nullopt; // No node to announce it, or announced already (its slices announce it together).
  }
  return std::max<std::int64_t>(1, qr.maintenance_ms -
                                       static_cast<std::int64_t>(scaled_ms(config_.maintenance_notice_seconds)));
}

void World::start_suspending(QueuedResource& qr, const std::string& node_state, std::int64_t now) {
  qr.state = "SUSPENDING";
  qr.initiator = "SERVICE";
  qr.next_ms = now + static_cast<std::int64_t>(scaled_ms(config_.suspending_seconds));
  qr.preempt_ms = 0;
  qr.maintenance_ms = 0;
  for (auto* node : nodes_of_locked(qr)) { // A multislice request's slices go together.
    node->state = node_state;
    node->maintenance_window_ms = 0;
    touch_locked(node->name);
    hosts_lost_locked(*node);
  }
  touch_locked(qr.name);
}

std::vector<World::Node*> World::nodes_of_locked(const QueuedResource& qr) {
  std::vector<Node*> out;
  for (const auto& name : qr.node_names) {
    if (auto it = nodes_.find(name); it != nodes_.end() && it->second->queued_resource == qr.name) {
      out.push_back(it->second.get());
    }
  }
  return out;
}

void World::tick(std::int64_t now_ms) {
  const auto lock = settle_at(now_ms); // The replay and its commit are the whole call.
}

std::int64_t World::next_event_locked() const {
  std::int64_t next = INT64_MAX;
  auto consider = [&next](std::int64_t t) {
    if (t > 0) {
      next = std::min(next, t);
    }
  };
  for (const auto& [name, qr] : queued_resources_) {
    if (qr->state == "CREATING" || qr->state == "PROVISIONING" || qr->state == "SUSPENDING" ||
        qr->state == "DELETING") {
      consider(qr->next_ms);
    } else if (qr->state == "WAITING_FOR_RESOURCES") {
      consider(qr->valid_until_ms);
    } else if (qr->state == "ACTIVE") {
      consider(qr->preempt_ms);
      consider(qr->maintenance_ms);
      consider(qr->terminate_ms);
      if (const auto announce = announce_ms_locked(*qr)) {
        consider(*announce);
      }
    }
  }
  for (const auto& [name, node] : nodes_) {
    if (node->state == "DELETING" && !node->delete_op.empty()) {
      consider(node->next_ms);
    }
  }
  return std::min(next, next_standalone_event_locked());
}

void World::tick_locked(std::int64_t now) {
  // Nothing changed since the last tick and no timer is due yet: every step would be a no-op, so skip the walk.
  // This keeps reads O(1) in the number of slices.
  if (now < due_ms_) {
    return;
  }
  // Replays every timed event up to `now` at its own time, so sparse ticks give the same history as frequent ones.
  for (int guard = 0; guard < 100'000; ++guard) {
    auto next = next_event_locked();
    if (next > now) {
      break;
    }
    step_locked(next);
  }
  step_locked(now);
  // Admission ran last and found nothing more to admit; until something changes (touch_locked) or the next timer
  // fires, another step would change nothing.
  due_ms_ = next_event_locked();
}

void World::step_locked(std::int64_t now) {
  for (auto it = queued_resources_.begin(); it != queued_resources_.end();) {
    auto& qr = *it->second;
    const auto nodes = nodes_of_locked(qr);
    if (qr.state == "CREATING" && now >= qr.next_ms) {
      qr.state = "WAITING_FOR_RESOURCES";
      qr.queued_seq = next_sequence_++;
      touch_locked(qr.name);
      auto response = queued_resource_json(qr);
      response["@type"] = kQueuedResourceType;
      finish_operation(qr.create_op, now, response);
    } else if (qr.state == "WAITING_FOR_RESOURCES" && qr.valid_until_ms > 0 && now >= qr.valid_until_ms) {
      qr.state = "FAILED";
      qr.initiator = "SERVICE";
      qr.failed_error = {{"code", 4},
                         {"message", "The queued resource could not be provisioned before its validUntil deadline "
                                     "(queueingPolicy); capacity was not available in time."}};
      touch_locked(qr.name);
    } else if (qr.state == "PROVISIONING" && now >= qr.next_ms) {
      qr.state = "ACTIVE";
      for (auto* node : nodes) {
        node_ready_locked(*node);
      }
      if (qr.tier == Tier::flex_start) {
        // Its run ends at its deadline, and nothing takes it back before.
        qr.terminate_ms = now + std::max<std::int64_t>(1, static_cast<std::int64_t>(scaled_ms(qr.run_seconds)));
      } else if (qr.tier == Tier::spot || qr.tier == Tier::best_effort) {
        auto delay = draw_exponential_ms(config_.spot_mean_seconds_between_preemptions);
        qr.preempt_ms = delay > 0 ? now + delay : 0;
      } else {
        auto delay = draw_exponential_ms(config_.maintenance_mean_seconds_between_events);
        qr.maintenance_ms = delay > 0 ? now + delay : 0;
      }
      touch_locked(qr.name);
    } else if (qr.state == "ACTIVE" && qr.terminate_ms > 0 && now >= qr.terminate_ms) {
      // A flex-start run's end: the service deletes its VMs, and the queued resource is SUSPENDED.
      start_suspending(qr, "DELETING", now);
    } else if (qr.state == "ACTIVE" && qr.preempt_ms > 0 && now >= qr.preempt_ms) {
      start_suspending(qr, "PREEMPTED", now);
    } else if (qr.state == "ACTIVE" && qr.maintenance_ms > 0 && now >= qr.maintenance_ms) {
      start_suspending(qr, "TERMINATED", now);
    } else if (const auto announce = qr.state == "ACTIVE" ? announce_ms_locked(qr) : std::nullopt;
               announce && now >= *announce && !nodes.empty()) {
      for (auto* node : nodes) {
        node->maintenance_window_ms = qr.maintenance_ms;
        touch_locked(node->name);
      }
    } else if (qr.state == "SUSPENDING" && now >= qr.next_ms) {
      qr.state = "SUSPENDED";
      release_capacity(qr);
      if (qr.tier == Tier::flex_start && qr.terminate_ms > 0 && now >= qr.terminate_ms) {
        for (auto* node : nodes) { // Its run ended: its nodes are gone.
          const std::string node_name = node->name;
          finish_operation(node->delete_op, now, {{"@type", kEmptyType}});
          touch_locked(node_name);
          hosts_lost_locked(*node);
          nodes_.erase(node_name);
        }
      }
      touch_locked(qr.name);
    } else if (qr.state == "DELETING" && now >= qr.next_ms) {
      release_capacity(qr);
      for (auto* node : nodes) {
        if (!node->delete_op.empty()) {
          finish_operation(node->delete_op, now, {{"@type", kEmptyType}}); // The node went with its resource.
        }
        const std::string node_name = node->name;
        touch_locked(node_name);
        hosts_lost_locked(*node);
        nodes_.erase(node_name);
      }
      finish_operation(qr.delete_op, now, {{"@type", kEmptyType}});
      if (!qr.create_op.empty()) {
        finish_operation(qr.create_op, now,
                         {{"error", {{"code", 10}, {"message", "The queued resource was deleted while creating."}}}});
      }
      touch_locked(qr.name);
      it = queued_resources_.erase(it);
      continue;
    }
    ++it;
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    auto& node = *it->second;
    if (node.state == "DELETING" && !node.delete_op.empty() && now >= node.next_ms) {
      finish_operation(node.delete_op, now, {{"@type", kEmptyType}});
      release_capacity(node);
      for (const auto* op : {&node.create_op, &node.transition_op}) {
        finish_operation(*op, now, {{"error", rpc_status(10, "The node was deleted while the operation ran.")}});
      }
      if (auto qr_it = queued_resources_.find(node.queued_resource); qr_it != queued_resources_.end()) {
        auto& qr = *qr_it->second;
        if (qr.state != "DELETING" && qr.state != "FAILED") {
          qr.state = "SUSPENDED";
          qr.initiator = "USER";
          qr.preempt_ms = 0;
          qr.maintenance_ms = 0;
          release_capacity(qr);
        }
        std::erase(qr.node_names, node.name);
        touch_locked(qr.name);
      }
      touch_locked(node.name);
      hosts_lost_locked(node);
      it = nodes_.erase(it);
      continue;
    }
    ++it;
  }
  step_standalone_locked(now);
  admit_locked(now);
}

namespace {

// Host number `n` of a world starting at `offset`, as an address of 127.FIRST.0.0 to 127.(FIRST+SPAN-1).255.254:
// the last octet runs from 1 to 254, so no address ends in 0 or 255.
std::string loopback_address(std::uint32_t first, std::uint32_t span, std::uint32_t offset, std::uint32_t n) {
  constexpr std::uint32_t kPerSecond = 256U * 254U; // Addresses under one second octet.
  const std::uint32_t index =
      static_cast<std::uint32_t>((std::uint64_t{offset} + n) % (std::uint64_t{span} * kPerSecond));
  return "127." + std::to_string(first + index / kPerSecond) + "." + std::to_string((index / 254) % 256) + "." +
         std::to_string(index % 254 + 1);
}

} // namespace

void World::preempt_best_effort_locked(const QueuedResource& waiting, const Pool& pool, std::int64_t now) {
  std::vector<QueuedResource*> holding; // Best-effort slices on the pool's chips, newest first.
  int held = 0;
  int leaving = 0; // Chips of best-effort slices already being preempted: free once they are SUSPENDED.
  for (auto& [name, qr] : queued_resources_) {
    if (qr->tier != Tier::best_effort || !qr->holds_capacity || qr->zone != waiting.zone ||
        qr->generation != waiting.generation) {
      continue;
    }
    held += qr->chips;
    if (qr->state == "SUSPENDING") {
      leaving += qr->chips;
    } else if (qr->state == "ACTIVE" || qr->state == "PROVISIONING") {
      holding.push_back(qr.get());
    }
  }
  if (pool.chips - (pool.used - held) < waiting.chips) {
    return; // Not even without every best-effort slice: nothing to gain by preempting them.
  }
  std::sort(holding.begin(), holding.end(),
            [](const QueuedResource* a, const QueuedResource* b) { return a->queued_seq > b->queued_seq; });
  for (auto* qr : holding) {
    if (pool.chips - pool.used + leaving >= waiting.chips) {
      break;
    }
    start_suspending(*qr, "PREEMPTED", now);
    leaving += qr->chips;
  }
}

void World::place_hosts_locked(Node& node, int hosts) {
  node.numeric_id = std::to_string(1'000'000'000'000'000ULL + rng_() % 8'000'000'000'000'000ULL);
  // Internal addresses in 127.16.0.0 to 127.127.255.255, external ones in 127.128.0.0 to 127.254.255.255: never off
  // this machine, since real ssh and gcloud connect wherever the API says. An address something here already
  // listens on (another mock's host) is skipped.
  constexpr int kTries = 1000;
  for (int h = 0; h < hosts; ++h) {
    std::string internal;
    std::string external;
    for (int attempt = 0; attempt < kTries; ++attempt) {
      const std::uint32_t n = next_host_++;
      internal = loopback_address(16, 112, address_offset_, n);
      external = loopback_address(128, 127, address_offset_, n);
      if (listener_ == nullptr || (listener_->address_free(internal) && listener_->address_free(external))) {
        break;
      }
    }
    rng_(); // The draw the external address once took: later draws stay where a seed put them.
    node.endpoints.emplace_back(internal, external);
  }
}

void World::admit_locked(std::int64_t now) {
  std::vector<QueuedResource*> waiting;
  for (auto& [name, qr] : queued_resources_) {
    if (qr->state == "WAITING_FOR_RESOURCES") {
      waiting.push_back(qr.get());
    }
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const QueuedResource* a, const QueuedResource* b) { return a->queued_seq < b->queued_seq; });
  std::map<std::string, bool> blocked; // A pool whose head does not fit admits nobody behind it (strict FIFO).
  std::set<std::string> spot_waits;    // The zones and generations where a spot request waits: no best-effort.
  for (const auto* qr : waiting) {
    if (qr->tier == Tier::spot) {
      spot_waits.insert(world_internal::fleet_key(qr->zone, qr->generation));
    }
  }
  for (auto* qr : waiting) {
    auto key = pool_key(qr->zone, qr->generation, qr->tier);
    if (blocked[key]) {
      continue;
    }
    if (qr->tier == Tier::best_effort && spot_waits.contains(world_internal::fleet_key(qr->zone, qr->generation))) {
      blocked[key] = true; // Best-effort gets the spot chips no spot request waits for.
      continue;
    }
    auto* pool = chips_pool_for(qr->zone, qr->generation, qr->tier);
    if (pool == nullptr || pool->chips - pool->used < qr->chips) {
      if (pool != nullptr && qr->tier == Tier::spot) {
        preempt_best_effort_locked(*qr, *pool, now);
      }
      blocked[key] = true;
      continue;
    }
    pool->used += qr->chips;
    qr->holds_capacity = true;
    qr->state = "PROVISIONING";
    // A multislice request's slices are provisioned together: one delay, every node READY at once.
    qr->next_ms = now + static_cast<std::int64_t>(draw_delay_ms(config_.provisioning_for(qr->generation)));
    const auto& spec = qr->request["tpu"]["nodeSpec"][0];
    qr->node_names.clear();
    for (const auto& node_id : world_internal::requested_node_ids(qr->request, qr->id)) {
      auto node = std::make_unique<Node>();
      node->id = node_id;
      node->name = location(qr->project, qr->zone) + "/nodes/" + node->id;
      node->project = qr->project;
      node->zone = qr->zone;
      node->queued_resource = qr->name;
      node->spec = spec.value("node", json::object());
      node->accelerator = qr->accelerator;
      node->tier = qr->tier;
      node->create_ms = now;
      node->multislice = spec.contains("multisliceParams");
      place_hosts_locked(*node, qr->hosts);
      qr->node_names.push_back(node->name);
      touch_locked(node->name);
      nodes_[node->name] = std::move(node);
    }
    touch_locked(qr->name);
  }
}

} // namespace jobman::mock
