// What the store's history says of each place, and the order it gives a job's candidates.
#include "jobman/config/loader.hpp"
#include "jobman/core/availability.hpp"

#include <gtest/gtest.h>

namespace jobman::core {
namespace core_availability_test {

constexpr std::int64_t kMinute = 60'000;
constexpr std::int64_t kNow = 1'000 * kMinute;

store::PlaceRecord record(const std::string& zone, std::int64_t started, std::optional<std::int64_t> active,
                          std::optional<std::int64_t> ended, domain::AttemptOutcome outcome) {
  return {zone, "v4-8", domain::Pricing::spot, outcome, started, active, ended};
}

TEST(CoreAvailability, WaitsPreemptionsAndGivenUpRequestsPerPlace) {
  std::vector<store::PlaceRecord> history;
  // us-east1-d: five slices up after 1..5 minutes, each running an hour; two preempted.
  for (int i = 1; i <= 5; ++i) {
    const std::int64_t start = i * 100 * kMinute;
    history.push_back(record("us-east1-d", start, start + i * kMinute, start + i * kMinute + 60 * kMinute,
                             i <= 2 ? domain::AttemptOutcome::preempted : domain::AttemptOutcome::succeeded));
  }
  // us-central2-b: one timed out after two hours, one refused for quota, one still waiting, one bad.
  history.push_back(record("us-central2-b", 0, std::nullopt, 120 * kMinute, domain::AttemptOutcome::timed_out));
  history.push_back(record("us-central2-b", 10 * kMinute, std::nullopt, 10 * kMinute, domain::AttemptOutcome::quota));
  history.push_back(record("us-central2-b", kNow - kMinute, std::nullopt, std::nullopt, domain::AttemptOutcome::none));
  history.push_back(
      record("us-central2-b", 20 * kMinute, 50 * kMinute, 51 * kMinute, domain::AttemptOutcome::bad_hardware));

  const auto stats = availability(history, kNow);
  ASSERT_EQ(stats.size(), 2U);
  const auto& central = stats[0];
  const auto& east = stats[1];
  EXPECT_EQ(central.zone, "us-central2-b");
  EXPECT_EQ(central.requests, 4);
  EXPECT_EQ(central.came_up, 1);
  EXPECT_EQ(central.gave_up, 2);
  EXPECT_EQ(central.waiting_now, 1);
  EXPECT_EQ(central.bad_hardware, 1);
  EXPECT_EQ(central.median_wait_seconds, 30 * 60);
  EXPECT_EQ(east.requests, 5);
  EXPECT_EQ(east.came_up, 5);
  EXPECT_EQ(east.median_wait_seconds, 3 * 60);
  EXPECT_EQ(east.p90_wait_seconds, 5 * 60);
  EXPECT_DOUBLE_EQ(east.running_hours, 5);
  EXPECT_EQ(east.preemptions, 2);
  EXPECT_DOUBLE_EQ(*east.preemptions_per_hour(), 0.4);
}

TEST(CoreAvailability, CandidatesAreRankedByTheirRecordAndUnknownOnesByAPrior) {
  const auto config = config::parse_job_configs("job:\n  name: f\ntpu:\n  accelerator: v4-8\n"
                                                "  zone: [us-central2-b, us-east1-d, europe-west4-a]\n"
                                                "command:\n  cmd: train\n",
                                                "f.yaml")
                          .front();
  const auto candidates = config::candidates(config, domain::Pricing::spot);
  std::vector<store::PlaceRecord> history;
  for (int i = 0; i < 3; ++i) {
    history.push_back(
        record("us-east1-d", i * kMinute, i * kMinute + 4 * kMinute, std::nullopt, domain::AttemptOutcome::none));
    history.push_back(record("us-central2-b", i * kMinute, std::nullopt, i * kMinute + 120 * kMinute,
                             domain::AttemptOutcome::timed_out));
  }
  std::string why;
  const auto ranked = rank_candidates(candidates, availability(history, kNow), &why);
  ASSERT_EQ(ranked.size(), 3U);
  EXPECT_EQ(ranked[0].zone, "us-east1-d") << why;
  EXPECT_EQ(ranked[1].zone, "europe-west4-a") << "no history: the prior of " << kUnknownWaitSeconds << " s";
  EXPECT_EQ(ranked[2].zone, "us-central2-b");
  EXPECT_NE(why.find("v4-8 spot in us-east1-d: up in 4m on the median of 3 request(s)"), std::string::npos) << why;
  EXPECT_NE(why.find("v4-8 spot in us-central2-b: never came up, 3 given up"), std::string::npos) << why;
  EXPECT_NE(why.find("europe-west4-a: no history"), std::string::npos) << why;

  // Without history the written order stands.
  const auto unranked = rank_candidates(candidates, {});
  EXPECT_EQ(unranked[0].zone, "us-central2-b");
  EXPECT_EQ(unranked[2].zone, "europe-west4-a");
}

} // namespace core_availability_test
} // namespace jobman::core
