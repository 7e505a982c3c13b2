// What the store has learnt of where capacity is: per zone, accelerator and tier, how long requests waited for an
// ACTIVE slice, how often slices were preempted, failed or were bad, and how many wait now. `jobman availability`
// prints it; the supervisor orders a job's candidates by it.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jobman::core {

// One zone × accelerator × tier.
struct PlaceStats {
  std::string zone;
  std::string accelerator;
  domain::Pricing pricing = domain::Pricing::spot;
  int requests = 0;    // Slices asked for.
  int came_up = 0;     // Of those, slices that became ACTIVE.
  int waiting_now = 0; // Asked for, not ACTIVE yet, not given up.
  int gave_up = 0;     // Ended without becoming ACTIVE: timed out, refused for quota, failed, cancelled.
  std::optional<double> median_wait_seconds; // From the request to ACTIVE, over the slices that came up.
  std::optional<double> p90_wait_seconds;
  double running_hours = 0; // Time slices were ACTIVE, until they ended (or now).
  int preemptions = 0;      // Slices preempted after they came up.
  int failures = 0;         // Attempts that failed (setup or the command).
  int bad_hardware = 0;     // Slices found bad or rejected as known bad.
  // Preemptions per running hour; nullopt with less than a minute of running time.
  [[nodiscard]] std::optional<double> preemptions_per_hour() const;
};

// The statistics of every place `attempts` name, sorted by zone, accelerator and tier (by its name).
std::vector<PlaceStats> availability(const std::vector<store::PlaceRecord>& attempts, std::int64_t now_ms);

// How long a candidate with no history is taken to wait, for the ordering.
inline constexpr double kUnknownWaitSeconds = 1800;

// What ranks a place: the median wait, plus half an hour per preemption per running hour, plus an hour times the
// share of requests given up; kUnknownWaitSeconds (and nothing more) without a slice that came up or a request given
// up.
double place_score(const PlaceStats* stats);

// The candidates best first by place_score (ties keep their written order), and why, for an event ("us-east1-d came up
// in 4m on the median of 20 requests; ...").
std::vector<config::Candidate> rank_candidates(const std::vector<config::Candidate>& candidates,
                                               const std::vector<PlaceStats>& stats, std::string* why = nullptr);

// "v4-8 spot in us-east1-d: up in 4m (median of 20), 0.3 preemptions/h" or "... no history".
std::string describe_place(const config::Candidate& candidate, const PlaceStats* stats);

} // namespace jobman::core
