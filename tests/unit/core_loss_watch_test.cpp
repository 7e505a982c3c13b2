// recovery.loss_spike's check (core::LossWatch) and the step a rolled-back job resumes before.
#include "jobman/core/loss_watch.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

namespace jobman::core {
namespace core_loss_watch_test {

config::RecoverySection::LossSpike settings(double factor, int window, long long min_steps = 0) {
  config::RecoverySection::LossSpike s;
  s.factor = factor;
  s.window = window;
  s.min_steps = min_steps;
  return s;
}

TEST(LossWatch, ASpikeIsAboveFactorTimesTheMedianOfAFullWindow) {
  LossWatch watch(settings(3, 4), false);
  // Until the window holds 4 steps, nothing is judged, however large.
  EXPECT_FALSE(watch.add(1, 100));
  EXPECT_FALSE(watch.add(2, 1));
  EXPECT_FALSE(watch.add(3, 2));
  EXPECT_FALSE(watch.add(4, 3));
  // Window {100, 1, 2, 3}: median 2.5 (the mean of the middle two), so 7.5 is the bound.
  EXPECT_FALSE(watch.add(5, 7.5));
  // Window {1, 2, 3, 7.5}: median 2.5 again.
  const auto spike = watch.add(6, 7.6);
  ASSERT_TRUE(spike);
  EXPECT_EQ(spike->step, 6);
  EXPECT_DOUBLE_EQ(spike->loss, 7.6);
  EXPECT_DOUBLE_EQ(*spike->median, 2.5);
  EXPECT_EQ(spike->window, 4);
  EXPECT_EQ(spike->describe(3), "loss 7.6 at step 6 is 3.04 times the median 2.5 of the 4 steps before it "
                                "(recovery.loss_spike.factor 3)");
  // A spike is not kept: the steps after it are judged against the window before it.
  EXPECT_TRUE(watch.add(7, 8));
  EXPECT_FALSE(watch.add(7, 2));
}

TEST(LossWatch, StepsBeforeMinStepsAndMediansAtOrBelowZeroAreNotJudged) {
  LossWatch early(settings(2, 2, 10), false);
  early.add(1, 1);
  early.add(2, 1);
  EXPECT_FALSE(early.add(3, 50)) << "before min_steps";
  LossWatch negative(settings(2, 2), false);
  negative.add(1, -3);
  negative.add(2, -2);
  EXPECT_FALSE(negative.add(3, 5)) << "a log-likelihood's median is negative: no ratio";
}

TEST(LossWatch, AResumedAttemptGoesBackOverTheStepsItRepeats) {
  LossWatch watch(settings(3, 3), false);
  for (int step = 1; step <= 5; ++step) {
    watch.add(step, 10);
  }
  // Resumed from a checkpoint at step 2: steps 3 to 5 come again, with losses of 1. The losses of the steps they go
  // back over are dropped (the window held steps 3 to 5), so the window fills again with the new ones.
  EXPECT_FALSE(watch.add(3, 1));
  EXPECT_FALSE(watch.add(4, 1));
  EXPECT_FALSE(watch.add(5, 1));
  // Window {1, 1, 1}: a loss of 4 is a spike now, where against the old {10, 10, 10} it would not have been.
  EXPECT_FALSE(watch.add(6, 1));
  EXPECT_TRUE(watch.add(7, 4));
}

TEST(LossWatch, ANonFiniteLossIsASpikeOnlyWhereTheSliceWasChecked) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  LossWatch checked(settings(3, 100), true);
  const auto spike = checked.add(1, nan);
  ASSERT_TRUE(spike);
  EXPECT_FALSE(spike->median);
  EXPECT_EQ(spike->describe(3), "loss nan at step 1 is not finite on a slice that passed its hardware check");
  EXPECT_TRUE(checked.add(2, std::numeric_limits<double>::infinity()));
  LossWatch unchecked(settings(3, 100), false);
  EXPECT_FALSE(unchecked.add(1, nan)) << "left to the bad-hardware patterns";
}

domain::AttemptRecord attempt(int number, domain::AttemptOutcome outcome, std::optional<std::int64_t> rollback,
                              std::optional<std::int64_t> reached) {
  domain::AttemptRecord a;
  a.number = number;
  a.outcome = outcome;
  a.rollback_step = rollback;
  if (reached) {
    a.progress.add(*reached, 1000);
  }
  return a;
}

TEST(ResumeBeforeStep, TheLatestRollbacksStepUntilAnAttemptAfterItPassesIt) {
  using domain::AttemptOutcome;
  EXPECT_FALSE(resume_before_step({}));
  EXPECT_FALSE(resume_before_step({attempt(1, AttemptOutcome::preempted, std::nullopt, 40)}));
  std::vector<domain::AttemptRecord> attempts{attempt(1, AttemptOutcome::rolled_back, 450, 452)};
  EXPECT_EQ(resume_before_step(attempts), 450) << "the rolled-back attempt's own steps past it do not count";
  attempts.push_back(attempt(2, AttemptOutcome::preempted, std::nullopt, 449));
  EXPECT_EQ(resume_before_step(attempts), 450) << "preempted before passing it: still rolling back";
  attempts.push_back(attempt(3, AttemptOutcome::none, std::nullopt, 450));
  EXPECT_FALSE(resume_before_step(attempts));
  attempts.push_back(attempt(4, AttemptOutcome::rolled_back, 700, 700));
  EXPECT_EQ(resume_before_step(attempts), 700) << "a later rollback";
}

} // namespace core_loss_watch_test
} // namespace jobman::core
