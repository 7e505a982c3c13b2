// Which accelerator, for this job, per dollar: the finished runs of each experiment grouped by where their slices ran
// (accelerator, zone and tier), with the steps they reached per hour, per chip-hour and per dollar, their goodput and
// their preemptions per day. `report --compare` prints it and `availability --experiment` reads it; README.md
// ("Progress, goodput and cost") defines every figure.
#pragma once

#include "jobman/config/prices.hpp"
#include "jobman/core/goodput.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace jobman::reporting {

// A sweep member's name without the suffix its sweep gave it: "train" for "train-lr=0.1-bs=32" with the label
// "vars.bs=32,vars.lr=0.1" (one "-KEY=VALUE" per swept key, KEY its last part unless two swept keys share it). The
// name as it is when it does not end so (a job of no sweep, or one renamed).
std::string name_without_sweep_suffix(const std::string& name, const std::string& sweep_label);

// The experiment a job belongs to: its recorded config's job.experiment when set, else its name without its sweep
// suffix. Reads JobRecord::config_yaml (empty: the name's); a snapshot that no longer parses counts as one without
// job.experiment.
std::string experiment_of(const domain::JobRecord& job);

// One experiment's runs on one accelerator, in one zone and tier (provisioning model). A run that held slices in
// several places counts in each, with the steps, slice time and wall time of its attempts there.
struct CompareGroup {
  std::string experiment;
  std::string accelerator;
  std::string zone;
  domain::Pricing tier = domain::Pricing::spot;
  int runs = 0;           // Runs that held a slice here.
  int succeeded = 0;      // Of them, SUCCEEDED.
  std::int64_t steps = 0; // Steps first reached on these slices: each step of a run counted once.
  double held_hours = 0;  // Hours the slices were held (all N slices of a multislice attempt at once).
  double chip_hours = 0;  // Chips x slices x hours held.
  double cost = 0;        // The chip-hours at list prices.
  bool priced = true;     // Every slice had a price.
  bool estimated = false; // Some slice time was inferred (its deletion never confirmed).
  core::BucketTimes ms{}; // The runs' wall time spent on these slices or waiting for them, by bucket.
  int preemptions = 0;    // Slices preempted after they came up.

  // Steps per hour held; nullopt without slice time.
  [[nodiscard]] std::optional<double> steps_per_hour() const;
  // Steps per chip-hour; nullopt without chip-hours.
  [[nodiscard]] std::optional<double> steps_per_chip_hour() const;
  // Steps per unit of the price table's currency; nullopt when a slice had no price or nothing was spent.
  [[nodiscard]] std::optional<double> steps_per_dollar() const;
  // Productive over wall time (core::goodput).
  [[nodiscard]] std::optional<double> goodput() const { return core::goodput(ms); }
  // Preemptions per 24 hours held; nullopt without slice time.
  [[nodiscard]] std::optional<double> preemptions_per_day() const;
};

// The groups of the finished runs given to it, filled one run at a time.
class Comparison {
public:
  // Compares every experiment's runs, or only `experiment`'s when given.
  explicit Comparison(const config::PriceTable& prices, std::string experiment = {});

  // Adds a job when it is a finished run: a job or a task (a worker's slice serves many experiments), SUCCEEDED,
  // FAILED or CANCELLED, that printed a step. `attempts` are its attempts oldest first, with their progress;
  // `account` is its account (core::account) with its timeline. A task's slice time is its time on its worker's
  // slice, priced as the worker's.
  void add(const domain::JobRecord& job, std::span<const domain::AttemptRecord> attempts,
           const core::JobAccount& account);

  // The groups, by experiment, accelerator, zone and tier (by its name).
  [[nodiscard]] std::vector<CompareGroup> groups() const;
  // The runs in the groups (one that held slices in several places counts once).
  [[nodiscard]] std::size_t runs() const { return runs_; }
  // Finished runs left out because they printed no step on a slice (their steps are unknown, not zero).
  [[nodiscard]] std::size_t runs_without_steps() const { return runs_without_steps_; }

private:
  const config::PriceTable& prices_;
  std::string experiment_;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, CompareGroup> groups_;
  std::size_t runs_ = 0;
  std::size_t runs_without_steps_ = 0;
};

// The steps per dollar `availability --experiment` shows for a place: the experiment's own there, or, when it ran on
// the same accelerator only in other zones or tiers, an estimate: its steps per chip-hour there (all of them pooled)
// over this place's price per chip-hour.
struct PlaceStepsPerDollar {
  double value = 0;
  bool estimated = false;
  int runs = 0; // The runs it comes from.
};
std::optional<PlaceStepsPerDollar> steps_per_dollar_at(const std::vector<CompareGroup>& groups,
                                                       const std::string& experiment, const std::string& accelerator,
                                                       const std::string& zone, domain::Pricing tier,
                                                       const config::PriceTable& prices);

} // namespace jobman::reporting
