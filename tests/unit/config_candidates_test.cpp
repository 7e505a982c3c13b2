// Candidates: tpu.zone and tpu.accelerator as lists, the order, recovery.fallback, and the config each
// candidate is asked with.
#include "jobman/config/loader.hpp"
#include "jobman/util/error.hpp"

#include <gtest/gtest.h>

namespace jobman::config {
namespace config_candidates_test {

JobConfig parse(const std::string& tpu, const std::string& recovery = "") {
  return parse_job_configs("job:\n  name: f\ntpu:\n" + tpu + "command:\n  cmd: train\n" + recovery, "f.yaml").front();
}

std::string error_of(const std::string& tpu, const std::string& recovery = "") {
  try {
    parse(tpu, recovery);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> labels(const std::vector<Candidate>& list) {
  std::vector<std::string> out;
  for (const auto& c : list) {
    out.push_back(c.label());
  }
  return out;
}

TEST(ConfigCandidates, ASingleZoneAndAcceleratorIsOneCandidate) {
  const auto c = parse("  accelerator: v4-8\n  zone: us-central2-b\n");
  EXPECT_EQ(c.tpu.zones, std::vector<std::string>{"us-central2-b"});
  ASSERT_EQ(c.tpu.accelerators.size(), 1U);
  EXPECT_EQ(c.tpu.order, CandidateOrder::learned);
  EXPECT_EQ(labels(candidates(c, c.tpu.pricing)), std::vector<std::string>{"v4-8 spot in us-central2-b"});
  EXPECT_NE(c.resolved_yaml.find("zone: us-central2-b\n"), std::string::npos) << "a single zone stays a string";
}

TEST(ConfigCandidates, ListsGiveEveryAcceleratorInEveryZoneAcceleratorByAccelerator) {
  const auto c = parse("  accelerator: [v4-32, v5litepod-16]\n  zone: [us-central2-b, us-east1-d]\n"
                       "  pricing: spot\n  order: as-written\n");
  EXPECT_EQ(c.tpu.zone, "us-central2-b");
  EXPECT_EQ(c.tpu.accelerator.name, "v4-32");
  EXPECT_EQ(c.tpu.order, CandidateOrder::as_written);
  EXPECT_EQ(labels(candidates(c, Pricing::spot)),
            (std::vector<std::string>{"v4-32 spot in us-central2-b", "v4-32 spot in us-east1-d",
                                      "v5litepod-16 spot in us-central2-b", "v5litepod-16 spot in us-east1-d"}));
  EXPECT_EQ(labels(candidates(c, Pricing::ondemand)).front(), "v4-32 ondemand in us-central2-b");

  // Each candidate is asked for with its own accelerator and its generation's runtime.
  const auto lite = candidate_config(c, candidates(c, Pricing::ondemand)[3]);
  EXPECT_EQ(lite.tpu.zone, "us-east1-d");
  EXPECT_EQ(lite.tpu.accelerator.name, "v5litepod-16");
  EXPECT_EQ(lite.tpu.pricing, Pricing::ondemand);
  EXPECT_EQ(lite.tpu.version, lite.tpu.accelerator.generation->runtime_versions.front());
  EXPECT_NE(lite.tpu.version, c.tpu.version);

  // The snapshot keeps the lists, and reads back the same.
  const auto again = parse_job_configs(c.resolved_yaml, "snapshot.yaml").front();
  EXPECT_EQ(again.tpu.zones, c.tpu.zones);
  ASSERT_EQ(again.tpu.accelerators.size(), 2U);
  EXPECT_EQ(again.tpu.accelerators[1].name, "v5litepod-16");
  EXPECT_FALSE(again.tpu.version_given);
  EXPECT_EQ(again.tpu.order, CandidateOrder::as_written);
}

TEST(ConfigCandidates, ListErrorsNameTheEntry) {
  EXPECT_NE(error_of("  accelerator: [v4-8, v9-8]\n  zone: us-central2-b\n").find("f.yaml:4:23: tpu.accelerator[1]:"),
            std::string::npos)
      << error_of("  accelerator: [v4-8, v9-8]\n  zone: us-central2-b\n");
  EXPECT_NE(error_of("  accelerator: v4-8\n  zone: [us-central2-b, us-central2-b]\n")
                .find("tpu.zone[1]: 'us-central2-b' is listed twice"),
            std::string::npos);
  EXPECT_NE(error_of("  accelerator: v4-8\n  zone: []\n").find("tpu.zone: an empty list"), std::string::npos);
  EXPECT_NE(error_of("  accelerator: [v4-8, v5litepod-8]\n  zone: us-central2-b\n  version: tpu-ubuntu2204-base\n")
                .find("tpu.version: one runtime version for accelerators of 2 generations (v4, v5litepod)"),
            std::string::npos);
  EXPECT_NE(error_of("  accelerator: v4-8\n  zone: us-central2-b\n  order: fastest\n").find("tpu.order:"),
            std::string::npos);
}

TEST(ConfigCandidates, FallbackToOnDemandAfterPreemptionsOrWaiting) {
  const auto c = parse("  accelerator: v4-8\n  zone: us-central2-b\n",
                       "recovery:\n  fallback:\n    after_preemptions: 3\n    after_waiting: 6h\n");
  EXPECT_EQ(c.recovery.fallback_after_preemptions, 3);
  EXPECT_EQ(c.recovery.fallback_after_waiting_seconds, 6 * 3600);
  const auto again = parse_job_configs(c.resolved_yaml, "snapshot.yaml").front();
  EXPECT_EQ(again.recovery.fallback_after_preemptions, 3);
  EXPECT_EQ(again.recovery.fallback_after_waiting_seconds, 6 * 3600);
  EXPECT_FALSE(parse("  accelerator: v4-8\n  zone: us-central2-b\n").recovery.fallback_after_preemptions);
  EXPECT_NE(error_of("  accelerator: v4-8\n  zone: us-central2-b\n", "recovery:\n  fallback: {}\n")
                .find("recovery.fallback: give after_preemptions, after_waiting or both"),
            std::string::npos);
  EXPECT_NE(error_of("  accelerator: v4-8\n  zone: us-central2-b\n", "recovery:\n  fallback:\n    after: 3\n")
                .find("recovery.fallback.after"),
            std::string::npos);
}

} // namespace config_candidates_test
} // namespace jobman::config
