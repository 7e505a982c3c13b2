// The orphan sweep (see loop.hpp and core/orphans.hpp): when the supervisor starts and then every sweep interval, the
// queued resources and nodes with this user's jobman labels that no attempt holds, created longer ago than the grace,
// are deleted. The listings and the deletions run on the action threads, never on the loop's thread; the store is read
// on the loop's thread once the listings are in. A failure is a warning: the next sweep tries again.
#include "jobman/core/plan.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "loop.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

void SupervisorLoop::sweep_if_due(std::chrono::steady_clock::time_point now) {
  // A supervisor driving only some jobs leaves the rest of the cloud to the others.
  if (options.sweep_interval.count() <= 0 || !options.only.empty() || sweeping || now < next_sweep) {
    return;
  }
  next_sweep = now + options.sweep_interval;
  std::vector<std::string> zones;
  try {
    zones = zones_in_use(*job_store, access->settings.zone);
  } catch (const std::exception& e) {
    spdlog::warn("orphan sweep: reading the zones in use: {}", e.what());
    return;
  }
  if (zones.empty()) {
    return;
  }
  sweeping = true;
  actions.submit([this, access = access, inbox = inbox, zones] {
    std::vector<ZoneListing> listings;
    std::vector<std::string> failures;
    for (const auto& zone : zones) {
      try {
        listings.push_back(list_zone(*access, zone));
      } catch (const std::exception& e) {
        failures.push_back(zone + ": " + e.what());
      }
    }
    inbox->post({0, [this, listings = std::move(listings), failures = std::move(failures)] {
                   sweep_listed(listings, failures);
                 }});
  });
}

void SupervisorLoop::sweep_listed(const std::vector<ZoneListing>& listings, const std::vector<std::string>& failures) {
  for (const auto& failure : failures) {
    spdlog::warn("orphan sweep: listing {}", failure);
  }
  std::vector<Orphan> orphans;
  std::size_t young = 0;
  try {
    OrphanFilter filter;
    filter.owners = {orphan_owner};
    filter.store = store_label_value(store_location);
    if (job_store->on_postgres()) {
      // A lab's store: the supervisor takes care of every user's slices, whoever it runs as.
      for (const auto& user : job_store->jobs().users()) {
        filter.owners.insert(owner_label_value(user));
      }
    }
    filter.now_ms = now_ms();
    const auto all = find_orphans(listings, job_store->attempts().held_slices(), filter);
    for (const auto& orphan : all) {
      const auto age = orphan.age_ms(filter.now_ms);
      if (!age || *age <= options.orphan_grace.count()) {
        ++young;
      } else if (!orphan.deleting()) {
        orphans.push_back(orphan);
      }
    }
  } catch (const std::exception& e) {
    spdlog::warn("orphan sweep: reading the store: {}", e.what());
    sweeping = false;
    return;
  }
  spdlog::info("orphan sweep over {} zone(s): {} orphan(s) older than {} to delete, {} younger left alone",
               listings.size(), orphans.size(), util::format_duration(options.orphan_grace.count() / 1000), young);
  if (orphans.empty()) {
    sweeping = false;
    return;
  }
  // One after another on one of the action threads: a sweep that finds many never crowds out the jobs' operations.
  actions.submit([this, access = access, inbox = inbox, counters = counters, orphans = std::move(orphans)] {
    for (const auto& orphan : orphans) {
      std::string error;
      bool already_gone = false;
      try {
        ++counters->mutations;
        already_gone = !delete_orphan(*access, orphan).has_value();
      } catch (const std::exception& e) {
        error = e.what();
      }
      inbox->post({0, [this, orphan, error, already_gone] { orphan_deleted(orphan, error, already_gone); }});
    }
    inbox->post({0, [this] { sweeping = false; }});
  });
}

void SupervisorLoop::orphan_deleted(const Orphan& orphan, const std::string& error, bool already_gone) {
  const auto what = describe(orphan);
  if (!error.empty()) {
    spdlog::warn("orphan sweep: deleting {}: {}", what, error);
    return;
  }
  if (already_gone) {
    spdlog::info("orphan sweep: {} was already gone", what);
    return;
  }
  const auto age = orphan.age_ms(now_ms());
  std::string message = "deleting orphaned " + what + ": no attempt holds it";
  if (age) {
    message += " (created " + util::format_duration(*age / 1000) + " ago)";
  }
  spdlog::info("orphan sweep: {}{}", message,
               orphan.job_id ? " for job " + domain::format_job_id(*orphan.job_id) : std::string());
  if (!orphan.job_id) {
    return;
  }
  nlohmann::json data = {{orphan.kind == ResourceKind::queued_resource ? "queued_resource" : "node", orphan.name},
                         {"zone", orphan.zone},
                         {"state", orphan.state},
                         {"orphan", true}};
  if (!orphan.attempt.empty()) {
    data["attempt_label"] = orphan.attempt;
  }
  try {
    if (job_store->jobs().find(*orphan.job_id)) {
      job_store->events().append(*orphan.job_id, "action", message, data.dump());
    }
  } catch (const domain::NoSuchJobError&) {
    // Removed meanwhile: the log line is the record.
  } catch (const std::exception& e) {
    spdlog::warn("orphan sweep: recording the deletion on job {}: {}", domain::format_job_id(*orphan.job_id), e.what());
  }
}

} // namespace jobman::core::supervision
