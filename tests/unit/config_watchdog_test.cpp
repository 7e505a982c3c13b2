// The keys that watch a run: recovery.stall_timeout and stall_first_line, recovery.loss_spike, job.loss and
// job.experiment, as the loader reads them, refuses them at their key, and keeps them through the job's snapshot.
#include "jobman/config/loader.hpp"
#include "jobman/util/line_patterns.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <string>

namespace jobman::config {
namespace config_watchdog_test {

std::string job(const std::string& job_more, const std::string& recovery) {
  return "job:\n  name: w\n" + job_more + "tpu:\n  accelerator: v4-8\n  zone: us-central2-b\ncommand:\n  cmd: train\n" +
         recovery;
}

JobConfig parse_one(const std::string& text) {
  auto configs = parse_job_configs(text, "watch.yaml");
  EXPECT_EQ(configs.size(), 1U);
  return configs.front();
}

std::string error_of(const std::string& text) {
  try {
    parse_job_configs(text, "watch.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigWatchdog, DefaultsWatchForStallsButNotForSpikes) {
  const auto c = parse_one(job("", ""));
  EXPECT_EQ(c.recovery.stall_timeout_seconds, 1800);
  EXPECT_EQ(c.recovery.stall_first_line_seconds, 3600);
  EXPECT_FALSE(c.recovery.loss_spike);
  EXPECT_EQ(c.job.loss, default_loss_pattern());
  EXPECT_EQ(c.job.experiment, "");
}

TEST(ConfigWatchdog, TheKeysAreReadAndSurviveTheSnapshot) {
  const auto c = parse_one(job("  experiment: llama-1b\n  loss: 'train_loss=([0-9.]+)'\n",
                               "recovery:\n  stall_timeout: 10m\n  stall_first_line: 2h\n"
                               "  loss_spike:\n    factor: 2.5\n    window: 20\n    min_steps: 50\n"
                               "    max_rollbacks: 1\n    skip_steps: 8\n"));
  for (const auto& config : {c, parse_one(c.resolved_yaml)}) {
    EXPECT_EQ(config.job.experiment, "llama-1b");
    EXPECT_EQ(config.job.loss, "train_loss=([0-9.]+)");
    EXPECT_EQ(config.recovery.stall_timeout_seconds, 600);
    EXPECT_EQ(config.recovery.stall_first_line_seconds, 7200);
    ASSERT_TRUE(config.recovery.loss_spike);
    EXPECT_DOUBLE_EQ(config.recovery.loss_spike->factor, 2.5);
    EXPECT_EQ(config.recovery.loss_spike->window, 20);
    EXPECT_EQ(config.recovery.loss_spike->min_steps, 50);
    EXPECT_EQ(config.recovery.loss_spike->max_rollbacks, 1);
    EXPECT_EQ(config.recovery.loss_spike->skip_steps, 8);
  }
  // Every setting has a default; 0 turns the watchdog off; false turns the spike check off.
  const auto defaults = parse_one(job("", "recovery:\n  stall_timeout: 0\n  loss_spike: {}\n"));
  EXPECT_EQ(defaults.recovery.stall_timeout_seconds, 0);
  ASSERT_TRUE(defaults.recovery.loss_spike);
  EXPECT_DOUBLE_EQ(defaults.recovery.loss_spike->factor, 3);
  EXPECT_EQ(defaults.recovery.loss_spike->window, 100);
  EXPECT_EQ(defaults.recovery.loss_spike->max_rollbacks, 3);
  EXPECT_EQ(defaults.recovery.loss_spike->skip_steps, 0);
  EXPECT_FALSE(parse_one(job("", "recovery:\n  loss_spike: false\n")).recovery.loss_spike);
}

TEST(ConfigWatchdog, BadValuesAreRefusedAtTheirKey) {
  const auto factor = error_of(job("", "recovery:\n  loss_spike:\n    factor: 1\n"));
  EXPECT_NE(factor.find("watch.yaml:10"), std::string::npos) << factor;
  EXPECT_NE(factor.find("recovery.loss_spike.factor"), std::string::npos) << factor;
  EXPECT_NE(factor.find("must be above 1"), std::string::npos) << factor;
  const auto window = error_of(job("", "recovery:\n  loss_spike:\n    window: 0\n"));
  EXPECT_NE(window.find("recovery.loss_spike.window"), std::string::npos) << window;
  const auto unknown = error_of(job("", "recovery:\n  loss_spike:\n    windw: 5\n"));
  EXPECT_NE(unknown.find("recovery.loss_spike.windw"), std::string::npos) << unknown;
  const auto scalar = error_of(job("", "recovery:\n  loss_spike: 3\n"));
  EXPECT_NE(scalar.find("expected a mapping"), std::string::npos) << scalar;
  const auto stall = error_of(job("", "recovery:\n  stall_timeout: soon\n"));
  EXPECT_NE(stall.find("watch.yaml:9"), std::string::npos) << stall;
  EXPECT_NE(stall.find("recovery.stall_timeout"), std::string::npos) << stall;
  const auto loss = error_of(job("  loss: 'loss=[0-9.]+'\n", ""));
  EXPECT_NE(loss.find("watch.yaml:3"), std::string::npos) << loss;
  EXPECT_NE(loss.find("cannot read the loss"), std::string::npos) << loss;
}

TEST(ConfigWatchdog, TheDefaultLossPatternReadsTheUsualLines) {
  const util::LossPattern pattern(default_loss_pattern());
  EXPECT_EQ(pattern.read("step=611 loss=2.31 mxu_util=0.9"), 2.31);
  EXPECT_EQ(pattern.read("step: 3 | train_loss: 1.5e-02"), 0.015);
  EXPECT_EQ(pattern.read("Step 7 Loss 12"), 12.0);
  const auto nan = pattern.read("step=8 loss=nan");
  ASSERT_TRUE(nan);
  EXPECT_TRUE(std::isnan(*nan));
  const auto inf = pattern.read("step=8 loss=-inf");
  ASSERT_TRUE(inf);
  EXPECT_TRUE(std::isinf(*inf));
  EXPECT_FALSE(pattern.read("step=9 lossless compression"));
  EXPECT_FALSE(pattern.read("step=9 accuracy=0.5"));
}

} // namespace config_watchdog_test
} // namespace jobman::config
