// tpu.slices (multislice): read as a whole number from 1 to kMaxSlices, refused at its file, line and key otherwise
// or with allocation_mode tpu-vm; set by --set and swept as any key; kept by every candidate's config; in the
// snapshot and JSON only when more than one.
#include "jobman/config/loader.hpp"
#include "jobman/util/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace jobman::config {
namespace config_slices_test {

// A config whose tpu section ends with `more` (from line 6 on).
std::string config_text(const std::string& more) {
  return "job:\n  name: multi\ntpu:\n  accelerator: v4-16\n  zone: us-central2-b\n" + more + "command:\n  cmd: train\n";
}

std::vector<JobConfig> parse(const std::string& more, std::vector<std::string> sets = {},
                             std::vector<std::string> sweeps = {}) {
  LoadOptions options;
  options.set_overrides = std::move(sets);
  options.sweep_args = std::move(sweeps);
  return parse_job_configs(config_text(more), "slices.yaml", options);
}

std::string error_of(const std::string& more, std::vector<std::string> sets = {}) {
  try {
    parse(more, std::move(sets));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigSlices, OneSliceByDefaultAndLeftOutOfTheSnapshot) {
  const auto c = parse("").front();
  EXPECT_EQ(c.tpu.slices, 1);
  EXPECT_EQ(c.resolved_yaml.find("slices"), std::string::npos) << c.resolved_yaml;
  EXPECT_FALSE(nlohmann::json::parse(to_json(c))["tpu"].contains("slices"));
  EXPECT_EQ(parse("  slices: 1\n").front().tpu.slices, 1);
}

TEST(ConfigSlices, SeveralAreReadAndKeptInTheSnapshotAndTheJson) {
  const auto c = parse("  slices: 4\n").front();
  EXPECT_EQ(c.tpu.slices, 4);
  EXPECT_EQ(nlohmann::json::parse(to_json(c))["tpu"]["slices"], 4);
  EXPECT_NE(c.resolved_yaml.find("\n  slices: 4\n"), std::string::npos) << c.resolved_yaml;
  // The snapshot loads again to the same config, as a recorded job's does.
  LoadOptions recorded;
  recorded.recorded = true;
  EXPECT_EQ(parse_job_configs(c.resolved_yaml, "snapshot", recorded).front().tpu.slices, 4);
  EXPECT_EQ(c.tpu.origins.at("slices").line, 6);
}

TEST(ConfigSlices, LessThanOneANonIntegerOrTooManyAreRefusedAtTheKey) {
  EXPECT_NE(error_of("  slices: 0\n").find("slices.yaml:6:11: tpu.slices: must be at least 1, got 0"),
            std::string::npos)
      << error_of("  slices: 0\n");
  EXPECT_NE(error_of("  slices: -2\n").find("tpu.slices: must be at least 1, got -2"), std::string::npos);
  EXPECT_NE(error_of("  slices: 2.5\n").find("slices.yaml:6:11: tpu.slices: expected an integer, got '2.5'"),
            std::string::npos)
      << error_of("  slices: 2.5\n");
  EXPECT_NE(error_of("  slices: two\n").find("tpu.slices: expected an integer, got 'two'"), std::string::npos);
  EXPECT_NE(error_of("  slices: [2]\n").find("tpu.slices: expected an integer, got a list"), std::string::npos)
      << error_of("  slices: [2]\n");
  EXPECT_NE(error_of("  slices: 257\n")
                .find("slices.yaml:6:11: tpu.slices: 257 slices is more than one queued resource may ask for (at "
                      "most 256)"),
            std::string::npos)
      << error_of("  slices: 257\n");
  EXPECT_NE(error_of("  slices: 99999999999999999999999\n").find("tpu.slices: integer out of range"), std::string::npos)
      << error_of("  slices: 99999999999999999999999\n");
  EXPECT_EQ(parse("  slices: 256\n").front().tpu.slices, kMaxSlices);
}

TEST(ConfigSlices, SeveralSlicesNeedAQueuedResource) {
  const auto error = error_of("  allocation_mode: tpu-vm\n  slices: 2\n");
  EXPECT_NE(error.find("slices.yaml:7:11: tpu.slices: 2 slices come only through a queued resource, and "
                       "allocation_mode tpu-vm creates one node"),
            std::string::npos)
      << error;
  EXPECT_EQ(parse("  allocation_mode: tpu-vm\n  slices: 1\n").front().tpu.slices, 1);
}

TEST(ConfigSlices, SetAndSweepReachTheKey) {
  EXPECT_EQ(parse("", {"tpu.slices=2"}).front().tpu.slices, 2);
  EXPECT_EQ(parse("  slices: 4\n", {"tpu.slices=1"}).front().tpu.slices, 1);
  EXPECT_NE(error_of("", {"tpu.slices=0"}).find("tpu.slices: must be at least 1, got 0"), std::string::npos)
      << error_of("", {"tpu.slices=0"});
  const auto swept = parse("", {}, {"tpu.slices=1,2,4"});
  ASSERT_EQ(swept.size(), 3U);
  EXPECT_EQ(swept[0].tpu.slices, 1);
  EXPECT_EQ(swept[1].tpu.slices, 2);
  EXPECT_EQ(swept[2].tpu.slices, 4);
  EXPECT_EQ(swept[2].sweep_point.at("tpu.slices"), "4");
  const auto in_file = parse_job_configs(config_text("") + "sweep:\n  tpu.slices: [2, 3]\n", "sweep.yaml");
  ASSERT_EQ(in_file.size(), 2U);
  EXPECT_EQ(in_file[1].tpu.slices, 3);
}

TEST(ConfigSlices, EveryCandidateAsksForAsManySlices) {
  const auto c = parse_job_configs("job:\n  name: multi\ntpu:\n  accelerator: [v4-16, v5p-16]\n"
                                   "  zone: [us-central2-b, us-east5-a]\n  pricing: [spot, ondemand]\n  slices: 3\n"
                                   "command:\n  cmd: train\n",
                                   "slices.yaml")
                     .front();
  const auto list = candidates(c);
  ASSERT_EQ(list.size(), 8U);
  for (const auto& candidate : list) {
    EXPECT_EQ(candidate_config(c, candidate).tpu.slices, 3) << candidate.label();
  }
}

} // namespace config_slices_test
} // namespace jobman::config
