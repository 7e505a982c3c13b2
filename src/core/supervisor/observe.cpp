// Observing the cloud: one listing per zone in use per tick tells every job there how its slice stands (see loop.hpp):
// queuedResources.list for the jobs whose slices are queued resources, nodes.list for those whose slices are nodes
// created directly (tpu-vm mode).
#include "loop.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

namespace {

// Every slice of one kind in a zone, by id, as views; nullopt when the listing failed.
std::optional<std::map<std::string, SliceView>> list_zone(const CloudAccess& access, const std::string& zone,
                                                          bool nodes) {
  std::map<std::string, SliceView> by_id;
  try {
    if (nodes) {
      for (const auto& node : access.client->list_nodes(access.location(zone), kListPageSize)) {
        by_id[resource_name_id(node.name)] = view_slice(node);
      }
    } else {
      for (const auto& qr : access.client->list_queued_resources(access.location(zone), kListPageSize)) {
        by_id[resource_name_id(qr.name)] = view_slice(qr);
      }
    }
  } catch (const std::exception& e) {
    spdlog::warn("listing {} in {}: {}", nodes ? "nodes" : "queued resources", zone, e.what());
    return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  return by_id;
}

} // namespace

void SupervisorLoop::observe() {
  // By zone, then by kind of slice: queued resources (false) or nodes (true).
  std::map<std::pair<std::string, bool>, std::vector<Driven*>> zones;
  for (auto& [id, d] : driven) {
    if (const auto* open = d.open_slice()) {
      zones[{open->zone, open->node_only()}].push_back(&d);
    }
  }
  ++counters->ticks;
  for (auto& [where, jobs] : zones) {
    const auto& [zone, nodes] = where;
    const auto listed = list_zone(*access, zone, nodes);
    if (!listed) {
      continue;
    }
    ++counters->list_calls;
    for (Driven* d : jobs) {
      if (d->busy) {
        continue; // Its operation's result decides; the next listing will be fresh.
      }
      const auto* slice = d->open_slice();
      const std::string& name = slice->slice_name();
      if (!d->seen_valid) {
        d->dirty = true; // It may be waiting for a listing newer than its last news, whatever this one says.
      }
      const auto found = listed->find(name);
      if (found == listed->end()) {
        d->seen.reset();
      } else {
        d->seen = found->second;
        d->seen_once = true;
      }
      d->seen_valid = true;
      const std::string state = d->seen ? d->seen->state : "gone";
      if (state != d->seen_state) {
        d->seen_state = state;
        d->dirty = true;
        nlohmann::json data = {{nodes ? "node" : "queued_resource", name}, {"state", state}};
        if (d->seen && !d->seen->error.empty()) {
          data["error"] = d->seen->error;
        }
        std::string message = name;
        message += " is ";
        message += state;
        job_store->record_observation(d->job.id, state, message, data.dump());
      }
    }
  }
}

} // namespace jobman::core::supervision
