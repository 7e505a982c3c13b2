// The progress series an attempt keeps: bounded, its first and latest readings exact, the time a step was reached
// interpolated, the rate over a window, and its text form read back.
#include "jobman/domain/progress.hpp"

#include <gtest/gtest.h>

namespace jobman::domain {
namespace domain_progress_test {

TEST(ProgressSeries, KeepsTheFirstAndLatestReadingAndPointsSpacedBetween) {
  ProgressSeries series;
  EXPECT_FALSE(series.first());
  for (std::int64_t s = 0; s <= 100; ++s) {
    series.add(s, 1'000'000 + s * 1000); // A step a second.
  }
  EXPECT_EQ(series.first(), (ProgressPoint{0, 1'000'000}));
  EXPECT_EQ(series.latest(), (ProgressPoint{100, 1'100'000}));
  // Spaced at least 10 s apart: 0, 10, 20, ..., 100.
  EXPECT_EQ(series.points().size(), 11U);
  for (std::size_t i = 1; i < series.points().size(); ++i) {
    EXPECT_GE(series.points()[i].at_ms - series.points()[i - 1].at_ms, ProgressSeries::kInitialSpacingMs);
  }
}

TEST(ProgressSeries, StaysBoundedOverAWeekAndInterpolatesTheTimeAStepWasReached) {
  ProgressSeries series;
  const std::int64_t start = 5'000;
  const std::int64_t week_s = 7 * 24 * 3600;
  for (std::int64_t t = 0; t <= week_s; t += 2) {
    series.add(t / 2, start + t * 1000); // A step every 2 s.
  }
  EXPECT_LE(series.points().size(), ProgressSeries::kMaxPoints + 2);
  EXPECT_EQ(series.first()->step, 0);
  EXPECT_EQ(series.latest()->step, week_s / 2);
  // The steady rate makes interpolation exact anywhere.
  EXPECT_EQ(series.time_at(123'456), start + 123'456 * 2000);
  EXPECT_EQ(series.time_at(0), start);
  EXPECT_EQ(series.time_at(week_s), start + week_s * 1000) << "beyond the latest: the latest's time";
  EXPECT_FALSE(series.time_at(-1)) << "before the first reading";
}

TEST(ProgressSeries, TheRateIsOverTheLastWindow) {
  ProgressSeries series;
  // 1 step/s for 100 s, then 4 steps/s for 100 s.
  for (std::int64_t t = 0; t <= 100; ++t) {
    series.add(t, t * 1000);
  }
  for (std::int64_t t = 101; t <= 200; ++t) {
    series.add(100 + (t - 100) * 4, t * 1000);
  }
  ASSERT_TRUE(series.rate(60'000));
  EXPECT_NEAR(*series.rate(60'000), 4.0, 1e-9);
  EXPECT_NEAR(*series.rate(1'000'000), 500.0 / 200.0, 1e-9);
  ProgressSeries one;
  one.add(7, 1000);
  EXPECT_FALSE(one.rate(60'000));
}

TEST(ProgressSeries, ItsTextReadsBackAndBadTextIsEmpty) {
  ProgressSeries series;
  for (std::int64_t s = 0; s < 500; ++s) {
    series.add(s * 3, 10'000 + s * 700);
  }
  const auto back = ProgressSeries::parse(series.to_text());
  EXPECT_EQ(back.points(), series.points());
  EXPECT_EQ(back.to_text(), series.to_text());
  EXPECT_TRUE(ProgressSeries::parse("").empty());
  EXPECT_TRUE(ProgressSeries::parse("1@2,x@3;10000").empty());
  EXPECT_TRUE(ProgressSeries::parse("1@5,2@3;10000").empty()) << "time going backwards";
  EXPECT_TRUE(ProgressSeries::parse("1@2;0").empty());
}

TEST(ProgressSeries, AReadingNeverGoesBackInTime) {
  ProgressSeries series;
  series.add(1, 5000);
  series.add(2, 4000);
  EXPECT_EQ(series.latest(), (ProgressPoint{2, 5000}));
}

} // namespace domain_progress_test
} // namespace jobman::domain
