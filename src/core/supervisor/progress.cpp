// The job driver and training progress: the steps the workers print (job.progress) are read on the stream's thread as
// they reach home, and written to the store by the loop, a few seconds at a time, for every job in one transaction.
#include "job_driver.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/system.hpp"

#include <spdlog/spdlog.h>

namespace jobman::core::supervision {

std::shared_ptr<const util::ProgressPattern> JobDriver::progress_pattern(const config::JobConfig& config) {
  if (config.job.progress.empty()) {
    return nullptr;
  }
  if (auto shared = progress_patterns_[config.job.progress].lock()) {
    return shared;
  }
  try {
    auto compiled = std::make_shared<const util::ProgressPattern>(config.job.progress);
    progress_patterns_[config.job.progress] = compiled;
    std::erase_if(progress_patterns_, [](const auto& entry) { return entry.second.expired(); });
    return compiled;
  } catch (const std::exception& e) {
    // The loader refuses such a pattern; a snapshot from elsewhere may still hold one.
    spdlog::warn("job.progress: {}; progress is not read", e.what());
    return nullptr;
  }
}

std::shared_ptr<const util::LossPattern> JobDriver::loss_pattern(const config::JobConfig& config) {
  if (!config.recovery.loss_spike || config.job.loss.empty()) {
    return nullptr;
  }
  if (auto shared = loss_patterns_[config.job.loss].lock()) {
    return shared;
  }
  try {
    auto compiled = std::make_shared<const util::LossPattern>(config.job.loss);
    loss_patterns_[config.job.loss] = compiled;
    std::erase_if(loss_patterns_, [](const auto& entry) { return entry.second.expired(); });
    return compiled;
  } catch (const std::exception& e) {
    spdlog::warn("job.loss: {}; the loss is not watched", e.what());
    return nullptr;
  }
}

std::optional<LossSpike> JobDriver::read_losses(const util::ProgressPattern& steps, const util::LossPattern& losses,
                                                LossTracker& tracker, std::string_view lines) {
  while (!lines.empty()) {
    const auto end = lines.find('\n');
    const auto line = lines.substr(0, end);
    if (const auto step = steps.read(line)) {
      if (const auto loss = losses.read(line)) {
        const std::lock_guard lock(tracker.mutex);
        if (auto spike = tracker.watch.add(step->step, *loss)) {
          return spike;
        }
      }
    }
    if (end == std::string_view::npos) {
      break;
    }
    lines.remove_prefix(end + 1);
  }
  return std::nullopt;
}

std::shared_ptr<ProgressTracker> JobDriver::progress_tracker(Driven& d) {
  const auto* attempt = d.current();
  if (attempt == nullptr) {
    return nullptr;
  }
  if (!d.progress || d.progress->attempt != attempt->number) {
    record_progress_now(d);
    d.progress = std::make_shared<ProgressTracker>(attempt->number, attempt->progress);
  }
  return d.progress;
}

void JobDriver::record_progress_now(Driven& d) {
  if (!d.progress) {
    return;
  }
  std::vector<store::ProgressUpdate> last;
  {
    const std::lock_guard lock(d.progress->mutex);
    if (d.progress->dirty) {
      last.push_back({d.job.id, d.progress->attempt, d.progress->series, d.progress->total});
      d.progress->dirty = false;
    }
  }
  if (!last.empty()) {
    store().attempts().record_progress(last);
  }
}

void JobDriver::read_progress(const util::ProgressPattern& pattern, ProgressTracker& tracker, std::string_view lines) {
  std::vector<util::ProgressPattern::Reading> readings;
  pattern.each(lines, [&](const util::ProgressPattern::Reading& reading) { readings.push_back(reading); });
  if (readings.empty()) {
    return;
  }
  const auto now = util::now_ms();
  const std::lock_guard lock(tracker.mutex);
  for (const auto& reading : readings) {
    tracker.series.add(reading.step, now);
    if (reading.total) {
      tracker.total = reading.total;
    }
  }
  tracker.dirty = true;
}

} // namespace jobman::core::supervision
