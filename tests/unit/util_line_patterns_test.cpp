// Matching lines of output: the built-in signs of bad hardware, a user's own patterns, and lines no regex engine
// should be trusted with.
#include "jobman/config/job_config.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/line_patterns.hpp"

#include <gtest/gtest.h>

namespace jobman::util {
namespace util_line_patterns_test {

const LinePatterns& defaults() {
  static const LinePatterns patterns(config::default_bad_hardware_patterns());
  return patterns;
}

TEST(LinePatterns, TheDefaultsFindNonFiniteLossesAndTheFrameworksMessages) {
  for (const std::string line : {
           "step=611 loss=nan lr=0.001",
           "step=12 loss=-inf",
           "Step: 40 | train_loss: NaN | grad_norm: 3.2",
           "step=7 loss=inf checkpoint=ok",
           "FloatingPointError: invalid value (nan) encountered in mul",
           "tensorflow.python.framework.errors_impl.InvalidArgumentError: loss : Tensor had NaN values",
           "RuntimeError: Function 'MulBackward0' returned nan values in its 0th output.",
           "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be "
           "clipped.",
           "Loss is nan, stopping training",
           "error: non-finite loss at step 3",
       }) {
    EXPECT_TRUE(defaults().match(line)) << line;
  }
}

TEST(LinePatterns, TheDefaultsLeaveHealthyOutputAlone) {
  for (const std::string line : {
           "step=611 loss=0.693147181",
           "step=3 loss=1.5e-05 lr=0.01",
           "resumed from step=400 checkpoint=/gcs/ckpt/400",
           "loss=nan", // Not on a step line: a value printed before training, say.
           "step=5 loss=information_gain 0.3",
           "step=5 loss=1.0 nanoseconds=30",
           "Compiling with --xla_gpu_enable_nan_check=false",
           "inference took 3 s",
       }) {
    EXPECT_FALSE(defaults().match(line)) << line;
  }
}

TEST(LinePatterns, FirstMatchPicksTheLineOutOfSeveral) {
  const LinePatterns patterns({"bad [a-z]+"});
  EXPECT_EQ(patterns.first_match("ok\nstill ok\nBAD chip here\nbad again\n"), "BAD chip here");
  EXPECT_EQ(patterns.first_match("no newline at the end: bad end"), "no newline at the end: bad end");
  EXPECT_EQ(patterns.first_match("fine\n"), std::nullopt);
  EXPECT_EQ(patterns.match("x bad y"), 0U);
}

TEST(LinePatterns, AnInvalidPatternIsNamed) {
  EXPECT_TRUE(LinePatterns::check("loss=(nan"));
  EXPECT_FALSE(LinePatterns::check("loss=(nan|inf)"));
  try {
    LinePatterns bad({"ok", "[unclosed"});
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'[unclosed' is not a valid extended regular expression"), std::string::npos)
        << e.what();
  }
}

TEST(LinePatterns, AHugeLineIsMatchedOnlyInItsBeginning) {
  std::string line(4 << 20, 'x');
  EXPECT_FALSE(defaults().match(line));
  line.replace(10, 20, "step=1 loss=nan     ");
  EXPECT_TRUE(defaults().match(line));
  std::string late(LinePatterns::kMaxLineBytes + 100, 'x');
  late += " step=1 loss=nan";
  EXPECT_FALSE(defaults().match(late)) << "past the first kMaxLineBytes nothing is looked at";
  EXPECT_TRUE(LinePatterns(std::vector<std::string>{}).empty());
}

// ---- Progress ----

using Reading = ProgressPattern::Reading;

std::optional<Reading> read_default(std::string_view line) {
  static const ProgressPattern pattern(config::default_progress_pattern());
  return pattern.read(line);
}

TEST(ProgressPattern, TheDefaultReadsTheStepAndATotalWhereOneIsPrinted) {
  const std::vector<std::pair<std::string, std::pair<std::int64_t, std::optional<std::int64_t>>>> cases{
      {"step=611 loss=2.31 mxu_util=0.4762 cycles=2688", {611, std::nullopt}},
      {"starting from step=0 of 2000", {0, 2000}},
      {"resumed from step=300 of 2000 checkpoint=/gcs/ckpt/300", {300, 2000}},
      {"Step 611/2000 | loss 2.3", {611, 2000}},
      {"step: 42", {42, std::nullopt}},
      {"global_step=17 lr=3e-4", {17, std::nullopt}},
      {"I1127 12:00:00 train.py:88] train_step = 9001", {9001, std::nullopt}},
  };
  for (const auto& [line, expected] : cases) {
    const auto reading = read_default(line);
    ASSERT_TRUE(reading) << line;
    EXPECT_EQ(reading->step, expected.first) << line;
    EXPECT_EQ(reading->total, expected.second) << line;
  }
}

TEST(ProgressPattern, TheDefaultLeavesOtherLinesAlone) {
  for (const std::string line :
       {"steps: 5 warmup", "checksum=868ab78ce39fe8dc", "loss=2.3", "footstep=3", "step=nan", "mystep=4", ""}) {
    EXPECT_FALSE(read_default(line)) << line;
  }
}

TEST(ProgressPattern, AUsersPatternTakesItsFirstGroupOfDigitsAsTheStepAndTheNextAsTheTotal) {
  const ProgressPattern pattern("iter ([0-9]+) of ([0-9]+)");
  const auto reading = pattern.read("epoch 2 iter 35 of 400 loss 1.2");
  ASSERT_TRUE(reading);
  EXPECT_EQ(reading->step, 35);
  EXPECT_EQ(reading->total, 400);
  // Groups that capture something other than digits are passed over.
  const ProgressPattern named("(it|iter)=([0-9]+)");
  ASSERT_TRUE(named.read("it=12"));
  EXPECT_EQ(named.read("it=12")->step, 12);
  EXPECT_FALSE(named.read("it=12")->total);
}

TEST(ProgressPattern, EachReadsEveryLineOfAChunkInOrder) {
  static const ProgressPattern pattern(config::default_progress_pattern());
  std::vector<std::int64_t> steps;
  pattern.each("step=1 loss=2\nnoise\r\nstep=2 loss=1\ncheckpoint step=2 path=x\nstep=3",
               [&](const Reading& r) { steps.push_back(r.step); });
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 2, 3}));
}

TEST(ProgressPattern, APatternWithoutAGroupOrThatDoesNotCompileIsRefused) {
  EXPECT_TRUE(ProgressPattern::check("step=[0-9]+"));
  EXPECT_TRUE(ProgressPattern::check("step=([0-9]+"));
  EXPECT_FALSE(ProgressPattern::check(config::default_progress_pattern()));
  EXPECT_THROW(ProgressPattern("step=[0-9]+"), Error);
}

TEST(ProgressPattern, AHugeLineIsReadOnlyToItsBound) {
  std::string line(LinePatterns::kMaxLineBytes - 7, ' ');
  line += "step=12";
  line += std::string(1 << 20, 'y');
  const auto reading = read_default(line);
  ASSERT_TRUE(reading);
  EXPECT_EQ(reading->step, 12);
  EXPECT_FALSE(read_default(std::string(LinePatterns::kMaxLineBytes, ' ') + "step=5"));
}

} // namespace util_line_patterns_test
} // namespace jobman::util
