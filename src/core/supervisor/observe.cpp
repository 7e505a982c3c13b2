// Observing the cloud: one queuedResources.list per zone in use per tick tells every job there how its slice stands
// (see loop.hpp).
#include "loop.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

namespace {

// The largest page the API serves: one request per zone for up to 1,000 slices.
constexpr int kListPageSize = 1000;

// The id part of "projects/P/locations/Z/queuedResources/ID".
std::string last_segment(const std::string& name) {
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

} // namespace

void SupervisorLoop::observe() {
  std::map<std::string, std::vector<Driven*>> zones;
  for (auto& [id, d] : driven) {
    if (d.open_slice() != nullptr) {
      zones[d.open_slice()->zone].push_back(&d);
    }
  }
  ++counters->ticks;
  for (auto& [zone, jobs] : zones) {
    std::vector<cloud::QueuedResource> listed;
    try {
      // The largest page the API serves: one request per zone for up to 1,000 slices.
      listed = access->client->list_queued_resources(access->location(zone), kListPageSize);
    } catch (const std::exception& e) {
      spdlog::warn("listing queued resources in {}: {}", zone, e.what());
      continue;
    } catch (...) {
      continue;
    }
    ++counters->list_calls;
    std::map<std::string, const cloud::QueuedResource*> by_id;
    for (const auto& qr : listed) {
      by_id[last_segment(qr.name)] = &qr;
    }
    for (Driven* d : jobs) {
      if (d->busy) {
        continue; // Its operation's result decides; the next listing will be fresh.
      }
      const auto* slice = d->open_slice();
      const auto found = by_id.find(slice->queued_resource);
      if (found == by_id.end()) {
        d->seen.reset();
      } else {
        d->seen = *found->second;
        d->seen_once = true;
      }
      d->seen_valid = true;
      const std::string state = d->seen ? cloud::to_string(d->seen->state) : "gone";
      if (state != d->seen_state) {
        d->seen_state = state;
        d->dirty = true;
        nlohmann::json data = {{"queued_resource", slice->queued_resource}, {"state", state}};
        if (d->seen && d->seen->failed_error) {
          data["error"] = d->seen->failed_error->message;
        }
        job_store->append_event(d->job.id, "observation", slice->queued_resource + " is " + state, data.dump());
      }
    }
  }
}

} // namespace jobman::core::supervision
