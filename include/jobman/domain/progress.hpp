// Training progress: the steps a workload printed (job.progress), as the supervisor saw them reach home. An attempt
// keeps a bounded series of (step, time) points: its first reading, points spaced at least `spacing` apart, and its
// latest reading. When the spaced points grow past a bound, every other one is dropped and the spacing doubles, so a
// run of any length is kept in a few kilobytes at a resolution of about its length over kMaxPoints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::domain {

// One reading: the step, and when the line that gave it reached home.
struct ProgressPoint {
  std::int64_t step = 0;
  std::int64_t at_ms = 0;
  bool operator==(const ProgressPoint&) const = default;
};

class ProgressSeries {
public:
  // Spaced points kept at most (the first and the latest reading come on top).
  static constexpr std::size_t kMaxPoints = 126;
  // The spacing a new series starts with.
  static constexpr std::int64_t kInitialSpacingMs = 10'000;

  ProgressSeries() = default;
  // The series `text` holds (as to_text() wrote it); an empty series for text that does not parse.
  static ProgressSeries parse(std::string_view text);
  // "step@ms,step@ms,...;spacing": what the store keeps.
  [[nodiscard]] std::string to_text() const;

  // A reading at `at_ms` (never earlier than the latest: a reading that is, is taken at the latest's time).
  void add(std::int64_t step, std::int64_t at_ms);

  [[nodiscard]] bool empty() const { return points_.empty(); }
  [[nodiscard]] const std::vector<ProgressPoint>& points() const { return points_; }
  [[nodiscard]] std::optional<ProgressPoint> first() const;
  [[nodiscard]] std::optional<ProgressPoint> latest() const;

  // When the run reached `step`, interpolated between the points around it: the time of the last point at or below
  // `step` when no later point is above it; nullopt before the first point (the run began beyond `step`) or when the
  // series is empty.
  [[nodiscard]] std::optional<std::int64_t> time_at(std::int64_t step) const;

  // Steps per second over the last `window_ms` before the latest reading (over the whole series when it is shorter);
  // nullopt with fewer than two readings, or none that advance.
  [[nodiscard]] std::optional<double> rate(std::int64_t window_ms) const;

private:
  std::vector<ProgressPoint> points_; // The first reading, the spaced points, and the latest reading last.
  std::int64_t spacing_ms_ = kInitialSpacingMs;
};

} // namespace jobman::domain
