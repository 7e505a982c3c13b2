// Observing the cloud: one listing per zone in use per tick tells every job there how its slice stands (see loop.hpp):
// queuedResources.list for the jobs whose slices are queued resources, nodes.list for those whose slices are nodes
// created directly (tpu-vm mode).
#include "observe.hpp"

#include "jobman/core/slice_hosts.hpp"
#include "jobman/store/events.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

namespace {

// Every slice of one kind in a zone, by id, as views, and (for nodes) the nodes' health into `health` when given;
// nullopt when the listing failed.
std::optional<std::map<std::string, SliceView>> list_zone(SliceOps& slices, const std::string& zone, bool nodes,
                                                          std::map<std::string, NodeHealthView>* health = nullptr,
                                                          cloud::ApiVersion version = cloud::ApiVersion::v2) {
  std::map<std::string, SliceView> by_id;
  try {
    if (nodes) {
      for (const auto& node : slices.list_nodes(zone)) {
        const auto id = resource_name_id(node.name);
        by_id[id] = view_slice(node);
        if (health != nullptr) {
          (*health)[id] = NodeHealthView{node.health, node.health_description, node.upcoming_maintenance, false};
        }
      }
    } else {
      for (const auto& qr : slices.list_queued_resources(zone, version)) {
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

// Whether a node's health, or its maintenance announced within the job's recovery.maintenance_lead, calls for its
// job to act (sets view.maintenance_due).
bool troubled(NodeHealthView& view, const config::JobConfig& config, const DriverHost& host) {
  if (view.maintenance) {
    const auto lead = host.scaled(static_cast<double>(config.recovery.maintenance_lead_seconds)).count();
    view.maintenance_due = maintenance_due(*view.maintenance, host.now_ms(), lead);
  }
  return view.maintenance_due || judge_health(view.health) != NodeTrouble::none;
}

// Whether the listing of queued resources that tells `jobs` how their slices stand must be v2alpha1's: one of them is
// flex-start, whose run's end only v2alpha1 tells.
cloud::ApiVersion listing_version(const std::vector<Driven*>& jobs) {
  for (const Driven* d : jobs) {
    if (const auto* open = d->open_slice(); open != nullptr && open->pricing == domain::Pricing::flex_start) {
      return cloud::ApiVersion::v2alpha1;
    }
  }
  return cloud::ApiVersion::v2;
}

// What a listing of `zone`'s queued resources says of the rivals there that `d` races (first-ready).
void saw_rivals(Driven& d, const std::string& zone, const std::map<std::string, SliceView>& listed,
                store::JobStore& store) {
  if (d.busy) {
    return; // Its operation's result decides; the next listing will be fresh.
  }
  for (const auto& rival : d.rivals) {
    if (rival.zone != zone) {
      continue;
    }
    auto& seen = d.rival_seen[rival.name];
    const auto found = listed.find(rival.name);
    if (seen.take(found == listed.end() ? nullptr : &found->second, d.dirty)) {
      nlohmann::json data = {{"queued_resource", rival.name}, {"state", seen.state}, {"rival", true}};
      if (seen.view && !seen.view->error.empty()) {
        data["error"] = seen.view->error;
      }
      // An event only: the job's slice_state is its own slice's.
      store.events().append(d.job.id, "observation", rival.name + " is " + seen.state, data.dump());
    }
  }
}

} // namespace

bool run_ending(const Driven& d, const DriverHost& host) {
  const auto* open = d.open_slice();
  if (open == nullptr || open->pricing != domain::Pricing::flex_start || !d.run_ends_ms ||
      d.run_ends_attempt != open->number || !d.config) {
    return false;
  }
  const auto lead = host.scaled(static_cast<double>(d.config->recovery.deadline_lead_seconds)).count();
  return host.now_ms() >= *d.run_ends_ms - lead;
}

bool stall_due(Driven& d, const DriverHost& host) {
  if (!d.config || d.job.phase != domain::Phase::running || d.job.kind != domain::JobKind::job) {
    return false;
  }
  const auto now = host.now_ms();
  if (d.quiet_attempt != d.job.attempt) {
    d.quiet_attempt = d.job.attempt;
    d.quiet_since_ms = now;
    d.heard_output = false;
  }
  if (const auto chunks = d.output_chunks->load(); chunks != d.output_counted) {
    d.output_counted = chunks;
    d.quiet_since_ms = now;
    d.heard_output = true;
  }
  const auto& recovery = d.config->recovery;
  if (recovery.stall_timeout_seconds <= 0) {
    return false;
  }
  // Real time, never scaled: workloads run in real time whatever the pace of a mock's world.
  const auto limit = d.heard_output ? recovery.stall_timeout_seconds
                                    : std::max(recovery.stall_timeout_seconds, recovery.stall_first_line_seconds);
  return now - d.quiet_since_ms >= limit * 1000;
}

void mark_due_after_observation(std::map<std::int64_t, Driven>& driven, const DriverHost& host) {
  for (auto& [id, d] : driven) {
    if (d.job.kind == domain::JobKind::worker &&
        (d.job.phase == domain::Phase::running || d.job.phase == domain::Phase::pending)) {
      d.dirty = true; // Serving and parked workers look at the queue every tick (one index read when none waits).
    }
    if (stall_due(d, host)) {
      d.dirty = true; // Silent past recovery.stall_timeout: its step stops the attempt.
    }
  }
}

void observe_slices(std::map<std::int64_t, Driven>& driven, SliceOps& slices, DriverHost& host, Counters& counters) {
  auto& store = host.store();
  // By zone, then by kind of slice: queued resources (false) or nodes (true).
  std::map<std::pair<std::string, bool>, std::vector<Driven*>> zones;
  // Jobs running on a queued resource's slice, by zone: their nodes' health comes from a nodes.list of the zone.
  std::map<std::string, std::vector<Driven*>> running;
  // Jobs racing queued resources alongside their own (first-ready), by the rivals' zones.
  std::map<std::string, std::vector<Driven*>> racing;
  for (auto& [id, d] : driven) {
    if (const auto* open = d.open_slice()) {
      zones[{open->zone, open->node_only()}].push_back(&d);
      if (!open->node_only() && d.job.phase == domain::Phase::running) {
        running[open->zone].push_back(&d);
      }
    }
    for (const auto& rival : d.rivals) {
      auto& in_zone = racing[rival.zone];
      if (in_zone.empty() || in_zone.back() != &d) {
        in_zone.push_back(&d);
      }
      zones[{rival.zone, false}]; // Listed even when no open slice is there.
    }
  }
  ++counters.ticks;
  for (auto& [zone, jobs] : running) {
    std::map<std::string, NodeHealthView> health;
    if (list_zone(slices, zone, true, &health)) {
      ++counters.list_calls;
      for (Driven* d : jobs) {
        // Each slice's node, for a multislice job: the first whose health calls for action speaks for the job.
        d->node_health.reset();
        const int count = d->config ? d->config->tpu.slices : 1;
        for (const auto& node : slice_node_ids(d->open_slice()->node, count)) {
          const auto found = health.find(node);
          if (found == health.end()) {
            continue;
          }
          auto view = found->second;
          if (d->config && troubled(view, *d->config, host)) {
            d->node_health = view;
            d->dirty = true;
            break;
          }
          if (!d->node_health) {
            d->node_health = view;
          }
        }
      }
    }
  }
  for (auto& [where, jobs] : zones) {
    const auto& [zone, nodes] = where;
    std::map<std::string, NodeHealthView> health;
    const auto listed = list_zone(slices, zone, nodes, nodes ? &health : nullptr,
                                  nodes ? cloud::ApiVersion::v2 : listing_version(jobs));
    if (!listed) {
      continue;
    }
    ++counters.list_calls;
    for (Driven* d : jobs) {
      if (const auto found = health.find(d->open_slice()->slice_name()); found != health.end()) {
        d->node_health = found->second;
        if (d->config && troubled(*d->node_health, *d->config, host)) {
          d->dirty = true;
        }
      }
    }
    if (!nodes) {
      if (const auto found = racing.find(zone); found != racing.end()) {
        for (Driven* d : found->second) {
          saw_rivals(*d, zone, *listed, store);
        }
      }
    }
    for (Driven* d : jobs) {
      if (d->busy) {
        continue; // Its operation's result decides; the next listing will be fresh.
      }
      const auto* slice = d->open_slice();
      const std::string& name = slice->slice_name();
      // A first listing since the job's last news makes it dirty whatever it says: the job may be waiting for one.
      const auto found = listed->find(name);
      if (found != listed->end() && found->second.termination_ms) {
        d->run_ends_ms = found->second.termination_ms; // Kept once the slice is gone, to judge how it went.
        d->run_ends_attempt = slice->number;
      } else if (d->run_ends_attempt != slice->number) {
        d->run_ends_ms.reset();
      }
      if (d->job.phase == domain::Phase::running && run_ending(*d, host)) {
        d->dirty = true;
      }
      if (d->seen.take(found == listed->end() ? nullptr : &found->second, d->dirty)) {
        const std::string& state = d->seen.state;
        nlohmann::json data = {{nodes ? "node" : "queued_resource", name}, {"state", state}};
        if (d->seen.view && !d->seen.view->error.empty()) {
          data["error"] = d->seen.view->error;
        }
        std::string message = name;
        message += " is ";
        message += state;
        store.events().record_observation(d->job.id, state, message, data.dump());
      }
    }
  }
}

} // namespace jobman::core::supervision
