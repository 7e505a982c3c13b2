// The job driver choosing where a slice comes from: among the config's candidates (zones × equivalent accelerators),
// in the order the store's history ranks them unless the config pins it, the next one after a candidate given up
// (it outwaited tpu.queue_timeout, or was refused for quota), and on-demand once recovery.fallback says spot has cost
// enough.
#include "job_driver.hpp"
#include "jobman/core/availability.hpp"
#include "jobman/core/data_locality.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/store/zone_catalogs.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <set>

namespace jobman::core::supervision {

using domain::AttemptOutcome;

namespace {

// How far back the history that ranks candidates reaches.
constexpr std::int64_t kHistoryMs = 30LL * 24 * 3600 * 1000;

bool same_place(const domain::AttemptRecord& a, const config::Candidate& c) {
  return a.zone == c.zone && a.accelerator == c.accelerator.name && a.pricing == c.pricing;
}

} // namespace

bool JobDriver::several_candidates(const Driven& d) {
  return config::candidates(*d.config).size() > 1;
}

std::optional<std::string> JobDriver::falls_back(const Driven& d) const {
  const auto& r = d.config->recovery;
  if (d.config->tpu.pricing == domain::Pricing::ondemand) {
    return std::nullopt;
  }
  if (r.fallback_after_preemptions && d.job.preemptions >= *r.fallback_after_preemptions) {
    return std::to_string(d.job.preemptions) + " preemption(s), recovery.fallback.after_preemptions is " +
           std::to_string(*r.fallback_after_preemptions);
  }
  if (r.fallback_after_waiting_seconds) {
    // Waiting since the last slice went away (or since the job was created, if none ever came up).
    std::int64_t since = d.job.created_ms;
    for (const auto& a : d.attempts) {
      if (a.active_ms) {
        since = a.ended_ms.value_or(host_.now_ms());
      }
    }
    const auto waited = host_.now_ms() - since;
    if (waited >= host_.scaled(static_cast<double>(*r.fallback_after_waiting_seconds)).count()) {
      return "no slice for " +
             util::format_duration(static_cast<long long>(static_cast<double>(waited) / 1000 * access_->time_scale)) +
             ", recovery.fallback.after_waiting is " + util::format_duration(*r.fallback_after_waiting_seconds);
    }
  }
  return std::nullopt;
}

std::vector<config::Candidate> JobDriver::choose_candidates(Driven& d, std::string& why) {
  const auto& config = *d.config;
  std::vector<std::string> reasons;
  auto list = config::candidates(config); // Every tier of tpu.pricing.
  if (auto fallback = falls_back(d)) {
    list = config::candidates(config, domain::Pricing::ondemand);
    reasons.push_back("on-demand from now on: " + *fallback);
  }
  if (list.size() > 1 && config.tpu.order == config::CandidateOrder::learned) {
    std::vector<store::PlaceRecord> history;
    for (const auto& c : list) {
      auto some = store().attempts().since(host_.now_ms() - kHistoryMs, c.zone, c.accelerator.name);
      history.insert(history.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
    }
    std::string ranking;
    list = rank_candidates(list, availability(history, host_.now_ms()), &ranking);
    reasons.push_back("ranked by the last 30 days: " + ranking);
  }
  // Near the data first: a candidate in the bucket's region before one elsewhere, another continent last. Where the
  // bucket is comes from the store (validate and create looked it up); nothing is asked here.
  if (list.size() > 1 && config.gcsfuse && !config.gcsfuse->bucket_name.empty()) {
    if (const auto place =
            store().zone_catalogs().bucket(bucket_cache_id(access_->settings), config.gcsfuse->bucket_name)) {
      std::string moved;
      list = prefer_near_data(std::move(list), *place, &moved);
      if (!moved.empty()) {
        reasons.push_back(moved);
      }
      // A race asks every candidate at once: one on another continent from the data joins it only once a race of the
      // rest was given up (a failover asks them one by one, in the order above, and reaches it last).
      const auto* last = d.attempts.empty() ? nullptr : &d.attempts.back();
      if (races(d) && (last == nullptr || !domain::is_request_given_up(last->outcome))) {
        if (auto held = hold_back_far(list, *place); !held.empty()) {
          reasons.push_back(held);
        }
      }
    }
  }
  std::size_t pick = 0;
  if (const auto* last = d.attempts.empty() ? nullptr : &d.attempts.back();
      last != nullptr && domain::is_request_given_up(last->outcome)) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (same_place(*last, list[i])) {
        pick = (i + 1) % list.size();
        reasons.insert(reasons.begin(), last->zone + " " +
                                            (last->outcome == AttemptOutcome::quota     ? "refused for quota "
                                             : last->outcome == AttemptOutcome::refused ? "does not offer "
                                                                                        : "waited out ") +
                                            last->accelerator + " " + domain::to_string(last->pricing));
        break;
      }
    }
  }
  why = util::join(reasons, "; ");
  std::rotate(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(pick), list.end());
  return list;
}

bool JobDriver::refused_everywhere(const Driven& d) {
  // The places of the attempts refused in a row, with those their races asked alongside (each refused in turn).
  std::set<std::string> places;
  for (auto it = d.attempts.rbegin(); it != d.attempts.rend() && it->outcome == AttemptOutcome::refused; ++it) {
    places.insert(it->zone + " " + it->accelerator + " " + domain::to_string(it->pricing));
    for (const auto& r : store().rivals().of(d.job.id, it->number)) {
      places.insert(r.zone + " " + r.accelerator + " " + domain::to_string(r.pricing));
    }
  }
  return places.size() >= config::candidates(*d.config).size();
}

void JobDriver::give_up_candidate(Driven& d, AttemptOutcome outcome, const std::string& why) {
  end_open_attempt(d, outcome, std::nullopt);
  event(d, "action", why + "; trying the next candidate", {{"outcome", std::string(domain::to_string(outcome))}});
  release(d, [this, &d] { create_slice(d); });
}

bool JobDriver::outwaited(Driven& d, const domain::AttemptRecord& open) {
  const auto& timeout = d.config->tpu.queue_timeout_seconds;
  if (!timeout || !several_candidates(d) || open.active_ms) {
    return false;
  }
  const auto waited = host_.now_ms() - open.started_ms;
  if (waited < host_.scaled(static_cast<double>(*timeout)).count()) {
    return false;
  }
  give_up_candidate(d, AttemptOutcome::timed_out,
                    open.accelerator + " " + domain::to_string(open.pricing) + " in " + open.zone + " waited " +
                        util::format_duration(*timeout) + " (tpu.queue_timeout)");
  return true;
}

} // namespace jobman::core::supervision
