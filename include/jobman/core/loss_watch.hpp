// The loss spike check of recovery.loss_spike: a step whose loss exceeds `factor` times the median loss of the
// `window` steps before it is a spike, and so is a non-finite loss where the slice passed its hardware check.
#pragma once

#include "jobman/config/job_config.hpp"
#include "jobman/domain/job.hpp"

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace jobman::core {

// A step whose loss spiked.
struct LossSpike {
  std::int64_t step = 0;
  double loss = 0;
  std::optional<double> median; // The window's median; nullopt for a non-finite loss judged before a window filled.
  int window = 0;               // How many steps the median is of.
  // "loss 41.2 at step 450 is 13.7 times the median 3.01 of the 100 steps before it".
  [[nodiscard]] std::string describe(double factor) const;
};

// The losses of a job's latest steps, across its attempts: a step at or below the latest one seen (an attempt resumed
// from a checkpoint) drops the losses of the steps it goes back over, so the window always holds the steps just
// before the one judged.
class LossWatch {
public:
  // With `nan_is_spike`, a non-finite loss is a spike (the slice passed its hardware check); otherwise it is left to
  // the bad-hardware patterns.
  LossWatch(const config::RecoverySection::LossSpike& settings, bool nan_is_spike);

  // Takes in the loss of `step`: the spike it is, if it is one (a spike's loss is not kept in the window).
  std::optional<LossSpike> add(std::int64_t step, double loss);

private:
  config::RecoverySection::LossSpike settings_;
  bool nan_is_spike_;
  std::deque<std::pair<std::int64_t, double>> window_; // (step, loss), oldest first.
};

// The step before which the job's next attempt resumes (JOBMAN_RESUME_BEFORE_STEP): the step its latest rolled-back
// attempt spiked at, until an attempt after that one has passed it; nullopt when none applies.
std::optional<std::int64_t> resume_before_step(const std::vector<domain::AttemptRecord>& attempts);

} // namespace jobman::core
