#include "jobman/core/availability.hpp"

#include "jobman/util/strings.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace jobman::core {

namespace {

// The q-quantile of sorted `values` (nearest rank).
double quantile(const std::vector<double>& sorted, double q) {
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

const PlaceStats* find_stats(const std::vector<PlaceStats>& stats, const config::Candidate& c) {
  for (const auto& s : stats) {
    if (s.zone == c.zone && s.accelerator == c.accelerator.name && s.pricing == c.pricing) {
      return &s;
    }
  }
  return nullptr;
}

} // namespace

std::optional<double> PlaceStats::preemptions_per_hour() const {
  if (running_hours < 1.0 / 60) {
    return std::nullopt;
  }
  return preemptions / running_hours;
}

std::vector<PlaceStats> availability(const std::vector<store::PlaceRecord>& attempts, std::int64_t now_ms) {
  std::map<std::tuple<std::string, std::string, std::string>, PlaceStats> by_place;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> waits;
  for (const auto& a : attempts) {
    // Keyed by the tier's name, which sorts the places.
    const auto key = std::make_tuple(a.zone, a.accelerator, domain::to_string(a.pricing));
    auto& s = by_place[key];
    s.zone = a.zone;
    s.accelerator = a.accelerator;
    s.pricing = a.pricing;
    ++s.requests;
    if (a.active_ms) {
      ++s.came_up;
      waits[key].push_back(static_cast<double>(*a.active_ms - a.started_ms) / 1000.0);
      s.running_hours += static_cast<double>(a.ended_ms.value_or(now_ms) - *a.active_ms) / 3.6e6;
      if (a.outcome == domain::AttemptOutcome::preempted) {
        ++s.preemptions;
      }
    } else if (!a.ended_ms) {
      ++s.waiting_now;
    } else if (domain::can_end_before_slice_up(a.outcome) || a.outcome == domain::AttemptOutcome::none) {
      ++s.gave_up;
    }
    if (a.outcome == domain::AttemptOutcome::failed) {
      ++s.failures;
    }
    if (domain::is_bad_slice(a.outcome)) {
      ++s.bad_hardware;
    }
  }
  std::vector<PlaceStats> out;
  out.reserve(by_place.size());
  for (auto& [key, s] : by_place) {
    if (auto& w = waits[key]; !w.empty()) {
      std::sort(w.begin(), w.end());
      s.median_wait_seconds = quantile(w, 0.5);
      s.p90_wait_seconds = quantile(w, 0.9);
    }
    out.push_back(std::move(s));
  }
  return out;
}

double place_score(const PlaceStats* stats) {
  if (stats == nullptr || (stats->came_up == 0 && stats->gave_up == 0)) {
    return kUnknownWaitSeconds;
  }
  const double wait = stats->median_wait_seconds.value_or(kUnknownWaitSeconds);
  const double preempt = stats->preemptions_per_hour().value_or(0) * 1800;
  const double finished = stats->came_up + stats->gave_up;
  const double abandoned = finished > 0 ? 3600 * stats->gave_up / finished : 0;
  return wait + preempt + abandoned;
}

std::string describe_place(const config::Candidate& candidate, const PlaceStats* stats) {
  std::string out = candidate.label() + ": ";
  if (stats == nullptr || (stats->came_up == 0 && stats->gave_up == 0)) {
    return out + "no history";
  }
  if (stats->median_wait_seconds) {
    out += "up in " + util::format_duration(std::llround(*stats->median_wait_seconds)) + " on the median of " +
           std::to_string(stats->came_up) + " request(s)";
  } else {
    out += "never came up";
  }
  if (stats->gave_up > 0) {
    out += ", " + std::to_string(stats->gave_up) + " given up";
  }
  if (auto pph = stats->preemptions_per_hour(); pph && *pph > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", *pph);
    out += std::string(", ") + text + " preemptions/h";
  }
  return out;
}

std::vector<config::Candidate> rank_candidates(const std::vector<config::Candidate>& candidates,
                                               const std::vector<PlaceStats>& stats, std::string* why) {
  std::vector<std::pair<double, config::Candidate>> scored;
  scored.reserve(candidates.size());
  for (const auto& c : candidates) {
    scored.emplace_back(place_score(find_stats(stats, c)), c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<config::Candidate> out;
  std::vector<std::string> reasons;
  for (const auto& [score, c] : scored) {
    out.push_back(c);
    reasons.push_back(describe_place(c, find_stats(stats, c)));
  }
  if (why != nullptr) {
    *why = util::join(reasons, "; ");
  }
  return out;
}

} // namespace jobman::core
