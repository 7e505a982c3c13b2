// Matching lines of output: the built-in signs of bad hardware, a user's own patterns, and lines no regex engine
// should be trusted with.
#include "jobman/config/job_config.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/line_patterns.hpp"

#include <gtest/gtest.h>

namespace jobman::util {
namespace {

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

} // namespace
} // namespace jobman::util
