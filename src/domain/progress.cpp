#include "jobman/domain/progress.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace jobman::domain {

namespace {

std::optional<std::int64_t> number(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

} // namespace

ProgressSeries ProgressSeries::parse(std::string_view text) {
  ProgressSeries series;
  const auto semicolon = text.find(';');
  if (semicolon == std::string_view::npos) {
    return series;
  }
  const auto spacing = number(text.substr(semicolon + 1));
  if (!spacing || *spacing <= 0) {
    return series;
  }
  std::string_view points = text.substr(0, semicolon);
  while (!points.empty()) {
    const auto comma = points.find(',');
    const auto item = points.substr(0, comma);
    const auto at = item.find('@');
    if (at == std::string_view::npos) {
      return {};
    }
    const auto step = number(item.substr(0, at));
    const auto ms = number(item.substr(at + 1));
    if (!step || !ms || (!series.points_.empty() && *ms < series.points_.back().at_ms)) {
      return {};
    }
    series.points_.push_back({*step, *ms});
    if (comma == std::string_view::npos) {
      break;
    }
    points.remove_prefix(comma + 1);
  }
  series.spacing_ms_ = *spacing;
  return series;
}

std::string ProgressSeries::to_text() const {
  std::string out;
  for (const auto& point : points_) {
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(point.step);
    out += '@';
    out += std::to_string(point.at_ms);
  }
  out += ';';
  out += std::to_string(spacing_ms_);
  return out;
}

void ProgressSeries::add(std::int64_t step, std::int64_t at_ms) {
  if (!points_.empty()) {
    at_ms = std::max(at_ms, points_.back().at_ms);
  }
  if (points_.size() < 2) {
    points_.push_back({step, at_ms});
    return;
  }
  // The latest reading stays a point of its own once it is `spacing` past the spaced point before it.
  if (points_.back().at_ms - points_[points_.size() - 2].at_ms >= spacing_ms_) {
    points_.push_back({step, at_ms});
  } else {
    points_.back() = {step, at_ms};
  }
  // Spaced points are those between the first and the latest.
  if (points_.size() - 2 > kMaxPoints) {
    std::vector<ProgressPoint> kept;
    kept.reserve(points_.size() / 2 + 2);
    kept.push_back(points_.front());
    for (std::size_t i = 2; i + 1 < points_.size(); i += 2) {
      kept.push_back(points_[i]);
    }
    kept.push_back(points_.back());
    points_ = std::move(kept);
    spacing_ms_ *= 2;
  }
}

std::optional<ProgressPoint> ProgressSeries::first() const {
  if (points_.empty()) {
    return std::nullopt;
  }
  return points_.front();
}

std::optional<ProgressPoint> ProgressSeries::latest() const {
  if (points_.empty()) {
    return std::nullopt;
  }
  return points_.back();
}

std::optional<std::int64_t> ProgressSeries::time_at(std::int64_t step) const {
  std::optional<std::size_t> below;
  for (std::size_t i = points_.size(); i-- > 0;) {
    if (points_[i].step <= step) {
      below = i;
      break;
    }
  }
  if (!below) {
    return std::nullopt;
  }
  const auto& a = points_[*below];
  if (*below + 1 == points_.size() || points_[*below + 1].step <= a.step) {
    return a.at_ms;
  }
  const auto& b = points_[*below + 1];
  const double share = static_cast<double>(step - a.step) / static_cast<double>(b.step - a.step);
  return a.at_ms + std::llround(share * static_cast<double>(b.at_ms - a.at_ms));
}

std::optional<double> ProgressSeries::rate(std::int64_t window_ms) const {
  if (points_.size() < 2) {
    return std::nullopt;
  }
  const auto& last = points_.back();
  std::size_t from = points_.size() - 2;
  while (from > 0 && points_[from - 1].at_ms >= last.at_ms - window_ms) {
    --from;
  }
  const auto& start = points_[from];
  if (last.step <= start.step || last.at_ms <= start.at_ms) {
    return std::nullopt;
  }
  return static_cast<double>(last.step - start.step) * 1000.0 / static_cast<double>(last.at_ms - start.at_ms);
}

} // namespace jobman::domain
