#include "jobman/core/loss_watch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace jobman::core {

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

} // namespace

std::string LossSpike::describe(double factor) const {
  std::string text = "loss " + number(loss) + " at step " + std::to_string(step);
  if (!std::isfinite(loss)) {
    return text + " is not finite on a slice that passed its hardware check";
  }
  if (median) {
    text += " is " + number(loss / *median) + " times the median " + number(*median) + " of the " +
            std::to_string(window) + " steps before it (recovery.loss_spike.factor " + number(factor) + ")";
  }
  return text;
}

LossWatch::LossWatch(const config::RecoverySection::LossSpike& settings, bool nan_is_spike)
    : settings_(settings), nan_is_spike_(nan_is_spike) {}

std::optional<LossSpike> LossWatch::add(std::int64_t step, double loss) {
  while (!window_.empty() && window_.back().first >= step) {
    window_.pop_back(); // Going back over steps seen: an attempt resumed from a checkpoint.
  }
  const bool full = window_.size() >= static_cast<std::size_t>(settings_.window);
  std::optional<double> median;
  if (full) {
    std::vector<double> losses;
    losses.reserve(window_.size());
    for (const auto& entry : window_) {
      losses.push_back(entry.second);
    }
    const auto middle = losses.begin() + static_cast<std::ptrdiff_t>(losses.size() / 2);
    std::nth_element(losses.begin(), middle, losses.end());
    median = *middle;
    if (losses.size() % 2 == 0) {
      *median = (*median + *std::max_element(losses.begin(), middle)) / 2;
    }
  }
  const int size = static_cast<int>(window_.size());
  if (!std::isfinite(loss)) {
    if (nan_is_spike_ && step >= settings_.min_steps) {
      return LossSpike{step, loss, median, size};
    }
    return std::nullopt;
  }
  // A spike is judged against a full window of positive losses (a ratio to a median at or below zero means nothing).
  if (median && *median > 0 && step >= settings_.min_steps && loss > settings_.factor * *median) {
    return LossSpike{step, loss, median, size};
  }
  window_.emplace_back(step, loss);
  if (window_.size() > static_cast<std::size_t>(settings_.window)) {
    window_.pop_front();
  }
  return std::nullopt;
}

std::optional<std::int64_t> resume_before_step(const std::vector<domain::AttemptRecord>& attempts) {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
    if (it->outcome != domain::AttemptOutcome::rolled_back || !it->rollback_step) {
      continue;
    }
    const std::int64_t step = *it->rollback_step;
    for (auto later = it.base(); later != attempts.end(); ++later) {
      if (const auto reached = later->progress.latest(); reached && reached->step >= step) {
        return std::nullopt; // Passed the spike: later attempts resume as usual.
      }
    }
    return step;
  }
  return std::nullopt;
}

} // namespace jobman::core
