// The step fault files of systolic-train (the mock cloud's loss spike and hang): their format, and how each is
// consumed as the steps it affects are computed.
#include "support/temp_dir.hpp"
#include "systolic/step_faults.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <sstream>
#include <string>

namespace systolic_step_faults_test {

namespace fs = std::filesystem;
using jobman::systolic::format_loss_spike;
using jobman::systolic::LossSpike;
using jobman::systolic::parse_loss_spike;
using jobman::systolic::StepFault;
using jobman::systolic::StepFaultFiles;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(SystolicStepFaults, ALossSpikeFileHoldsAFactorAndAStepCount) {
  const auto spike = parse_loss_spike("10.0 3\n");
  ASSERT_TRUE(spike);
  EXPECT_EQ(spike->factor, 10.0);
  EXPECT_EQ(spike->steps, 3U);
  EXPECT_TRUE(parse_loss_spike("  2.5\t1  "));
  EXPECT_TRUE(parse_loss_spike("1e3 7"));
  for (const char* bad : {"", "10", "10 0", "10 -1", "0 3", "-2 3", "nan 3", "inf 3", "x 3", "10 3 4", "10 3x"}) {
    EXPECT_FALSE(parse_loss_spike(bad)) << "'" << bad << "'";
  }
  // Written back with every bit of the factor.
  const LossSpike odd{0.1 + 1e-17, 9};
  const auto again = parse_loss_spike(format_loss_spike(odd));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->factor, odd.factor);
  EXPECT_EQ(again->steps, 9U);
}

TEST(SystolicStepFaults, ALossSpikeCountsDownStepByStepAndIsRemovedWhenSpent) {
  jobman::test::TempDir dir;
  const fs::path spike = dir.write("loss-spike", "10 3\n");
  StepFaultFiles files(spike, dir / "hang");
  std::ostringstream warnings;
  EXPECT_EQ(files.next_step(warnings).loss_spike, 10.0);
  EXPECT_EQ(read_text(spike), "10 2\n");
  EXPECT_EQ(files.next_step(warnings).loss_spike, 10.0);
  EXPECT_EQ(read_text(spike), "10 1\n");
  EXPECT_EQ(files.next_step(warnings).loss_spike, 10.0);
  EXPECT_FALSE(fs::exists(spike));
  EXPECT_EQ(files.next_step(warnings).loss_spike, 1.0);
  EXPECT_EQ(warnings.str(), "");
  // Nothing is left behind in the directory: no temporary of the countdown.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 0);
}

TEST(SystolicStepFaults, AHangIsConsumedByTheStepItHangs) {
  jobman::test::TempDir dir;
  const fs::path hang = dir.write("hang", "");
  StepFaultFiles files(dir / "loss-spike", hang);
  std::ostringstream warnings;
  EXPECT_TRUE(files.next_step(warnings).hang);
  EXPECT_FALSE(fs::exists(hang));
  EXPECT_FALSE(files.next_step(warnings).hang) << "a restart does not hang again";
  EXPECT_EQ(warnings.str(), "");
}

TEST(SystolicStepFaults, WithoutFilesOrPathsNoStepIsFaulty) {
  jobman::test::TempDir dir;
  std::ostringstream warnings;
  StepFaultFiles absent(dir / "loss-spike", dir / "hang");
  StepFaultFiles unnamed("", "");
  for (StepFaultFiles* files : {&absent, &unnamed}) {
    const StepFault fault = files->next_step(warnings);
    EXPECT_EQ(fault.loss_spike, 1.0);
    EXPECT_FALSE(fault.hang);
  }
  EXPECT_EQ(warnings.str(), "");
}

// A malformed file is reported once and never applied: guessing could spike forever.
TEST(SystolicStepFaults, AMalformedLossSpikeFileIsReportedOnceAndIgnored) {
  jobman::test::TempDir dir;
  const fs::path spike = dir.write("loss-spike", "lots\n");
  StepFaultFiles files(spike, "");
  std::ostringstream warnings;
  EXPECT_EQ(files.next_step(warnings).loss_spike, 1.0);
  EXPECT_EQ(files.next_step(warnings).loss_spike, 1.0);
  EXPECT_EQ(warnings.str(), "systolic-train: warning: no 'FACTOR STEPS' in the loss spike file " + spike.string() +
                                "; ignoring it from now on\n");
}

} // namespace systolic_step_faults_test
