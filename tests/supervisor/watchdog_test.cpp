// The supervisor and a run that hangs or diverges, in-process on the fakes (tests/supervisor/rig.hpp): the stall
// watchdog (recovery.stall_timeout) keeps the workers' stacks, stops the attempt as a failure and replaces a slice
// whose attempts stall twice in a row; a loss spike (recovery.loss_spike) rolls the job back to before it.
#include "jobman/core/job_logs.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/system.hpp"
#include "rig.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <string>

namespace jobman::test {
namespace watchdog_test {

using domain::AttemptOutcome;
using domain::Phase;

std::string job_yaml(const std::string& recovery, const std::string& tpu_extra = "") {
  return "job:\n  name: watched\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n  pricing: spot\n" + tpu_extra +
         "command:\n  cmd: train\nrecovery:\n" + recovery;
}

class SupervisorWatchdog : public ::testing::Test {
protected:
  Phase phase(std::int64_t id) { return r.job(id).phase; }
  bool runs_attempt(std::int64_t id, int attempt, int limit = 60) {
    return r.tick_until([&] { return phase(id) == Phase::running && r.job(id).attempt == attempt; }, limit);
  }
  void print(std::int64_t id, const std::string& text) { r.workers->print(Rig::wid(id), r.job(id).attempt, 0, text); }

  Rig r;
};

TEST_F(SupervisorWatchdog, ASilentAttemptIsStoppedWithItsStacksKeptAndRestartedOnTheSameSlice) {
  r.slices->set_capacity("us-central2-b", true);
  const auto id = r.create(job_yaml("  max_failures: 3\n  stall_timeout: 10m\n")).front();
  ASSERT_TRUE(runs_attempt(id, 1));
  print(id, "step=1 loss=2.0\n");
  r.tick();

  // Output keeps it alive: a line every 9 minutes for half an hour.
  for (int i = 0; i < 4; ++i) {
    r.advance(9 * 60);
    print(id, "step=" + std::to_string(i + 2) + " loss=1.9\n");
    r.tick(); // Streams it home,
    r.tick(); // and the next look counts it.
  }
  EXPECT_EQ(phase(id), Phase::running);
  EXPECT_EQ(r.job(id).attempt, 1);

  // Then silence: just short of the timeout nothing happens; one tick past it, the attempt is stopped.
  r.workers->take_calls();
  r.advance(10 * 60 - 2);
  r.tick();
  EXPECT_EQ(phase(id), Phase::running);
  EXPECT_EQ(r.job(id).attempt, 1);
  ASSERT_TRUE(runs_attempt(id, 2, 5)) << r.job(id).phase_reason;
  const auto attempts = r.attempts(id);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::stalled);
  EXPECT_EQ(attempts[1].queued_resource, attempts[0].queued_resource) << "restarted on the same slice";
  EXPECT_EQ(r.job(id).failures, 1) << "a stall is a failure";
  EXPECT_EQ(r.job(id).preemptions, 0);

  // The stacks were read before the stop, and kept beside the attempt's logs.
  const auto calls = r.workers->take_calls();
  const auto stacks_at = std::find(calls.begin(), calls.end(), "stacks " + Rig::wid(id) + "/1");
  const auto stop_at = std::find(calls.begin(), calls.end(), "stop " + Rig::wid(id) + "/1");
  ASSERT_NE(stacks_at, calls.end());
  ASSERT_NE(stop_at, calls.end());
  EXPECT_LT(stacks_at, stop_at);
  const auto kept = util::read_file(core::stacks_path(core::attempt_directory(id, 1), 0));
  EXPECT_EQ(kept, Rig::wid(id) + "/1 on worker 0: running\n");

  // The event says how long it was silent and when the last line came.
  const auto actions = r.events(id, "action");
  ASSERT_FALSE(actions.empty());
  const auto& said = actions.back();
  EXPECT_NE(said.find("no worker printed a line for 10m"), std::string::npos) << said;
  EXPECT_NE(said.find("the last came at "), std::string::npos) << said;
}

TEST_F(SupervisorWatchdog, TheFirstLineMayTakeStallFirstLineAndNoWatchdogRunsWhenItIsOff) {
  r.slices->set_capacity("us-central2-b", true);
  const auto watched = r.create(job_yaml("  max_failures: 1\n  stall_timeout: 10m\n  stall_first_line: 1h\n")).front();
  const auto unwatched = r.create(job_yaml("  stall_timeout: 0\n")).front();
  ASSERT_TRUE(runs_attempt(watched, 1));
  ASSERT_TRUE(runs_attempt(unwatched, 1));
  r.advance(59 * 60);
  r.tick();
  EXPECT_EQ(r.job(watched).attempt, 1) << "the first line may take stall_first_line";
  r.advance(60);
  ASSERT_TRUE(runs_attempt(watched, 2, 5)) << r.job(watched).phase_reason;
  EXPECT_NE(r.events(watched, "action").back().find("since the workload started (it printed nothing)"),
            std::string::npos);
  r.advance(24 * 3600);
  r.tick();
  EXPECT_EQ(phase(unwatched), Phase::running);
  EXPECT_EQ(r.job(unwatched).attempt, 1);
}

TEST_F(SupervisorWatchdog, ASliceWhoseAttemptsStallTwiceInARowIsReplacedAsBadHardware) {
  r.slices->set_capacity("us-central2-b", true);
  const auto id = r.create(job_yaml("  max_failures: 5\n  stall_timeout: 5m\n  stall_first_line: 0\n")).front();
  ASSERT_TRUE(runs_attempt(id, 1));
  r.advance(5 * 60);
  ASSERT_TRUE(runs_attempt(id, 2, 5));
  r.advance(5 * 60);
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).bad_hardware == 1; }, 5)) << r.job(id).phase_reason;
  ASSERT_TRUE(runs_attempt(id, 3));
  const auto attempts = r.attempts(id);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::stalled);
  EXPECT_EQ(attempts[1].outcome, AttemptOutcome::bad_hardware);
  EXPECT_NE(attempts[2].queued_resource, attempts[1].queued_resource) << "a new slice";
  EXPECT_EQ(r.job(id).failures, 1);
}

TEST_F(SupervisorWatchdog, ALossSpikeRollsBackToBeforeItWithoutSpendingAnyOtherBudget) {
  r.slices->set_capacity("us-central2-b", true);
  const auto id = r.create(job_yaml("  loss_spike:\n    factor: 3\n    window: 5\n    max_rollbacks: 1\n"
                                    "    skip_steps: 4\n"))
                      .front();
  ASSERT_TRUE(runs_attempt(id, 1));
  EXPECT_EQ(r.workers->launch_env(Rig::wid(id), 1).count("JOBMAN_RESUME_BEFORE_STEP"), 0U);
  // Noisy but healthy: 2.9 is under 3 times the median (1.0).
  print(id, "step=1 loss=1.0\nstep=2 loss=1.1\nstep=3 loss=0.9\nstep=4 loss=1.0\nstep=5 loss=1.0\n"
            "step=6 loss=2.9\nstep=7 loss=1.0\n");
  r.tick();
  r.tick();
  EXPECT_EQ(r.job(id).attempt, 1);
  print(id, "step=8 loss=31.5\nstep=9 loss=40\n");
  ASSERT_TRUE(runs_attempt(id, 2, 10)) << r.job(id).phase_reason;
  auto attempts = r.attempts(id);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::rolled_back);
  EXPECT_EQ(attempts[0].rollback_step, 8);
  EXPECT_EQ(attempts[1].queued_resource, attempts[0].queued_resource);
  EXPECT_EQ(r.job(id).failures, 0);
  EXPECT_EQ(r.job(id).preemptions, 0);
  EXPECT_EQ(r.job(id).bad_hardware, 0);
  const auto env = r.workers->launch_env(Rig::wid(id), 2);
  EXPECT_EQ(env.at("JOBMAN_RESUME_BEFORE_STEP"), "8");
  EXPECT_EQ(env.at("JOBMAN_SKIP_STEPS"), "4");
  EXPECT_NE(r.events(id, "action").back().find("loss 31.5 at step 8 is 31.5 times the median 1"), std::string::npos)
      << r.events(id, "action").back();

  // Resumed from step 5, the run replays steps 6 and 7 (their losses judged against the steps before them, not
  // against the spike) and passes step 8; a restart after that resumes as usual.
  print(id, "step=6 loss=1.0\nstep=7 loss=1.1\nstep=8 loss=0.9\nstep=9 loss=1.0\n");
  r.tick();
  r.tick();
  EXPECT_EQ(r.job(id).attempt, 2);
  r.workers->exit(Rig::wid(id), 2, 42); // A restart code: the next attempt is on the same slice.
  ASSERT_TRUE(runs_attempt(id, 3, 10)) << r.job(id).phase_reason;
  EXPECT_EQ(r.workers->launch_env(Rig::wid(id), 3).count("JOBMAN_RESUME_BEFORE_STEP"), 0U);

  // A second spike is past the budget of one rollback.
  print(id, "step=10 loss=1.0\nstep=11 loss=50\n");
  ASSERT_TRUE(r.tick_until([&] { return phase(id) == Phase::failed; }, 10)) << r.job(id).phase_reason;
  EXPECT_NE(r.job(id).phase_reason.find("rollback budget spent (1 rollback(s) allowed)"), std::string::npos)
      << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id).back().outcome, AttemptOutcome::rolled_back);
}

TEST_F(SupervisorWatchdog, ANonFiniteLossIsASpikeWhereTheSliceHasAPreflightElseBadHardware) {
  r.slices->set_capacity("us-central2-b", true);
  const auto checked = r.create(job_yaml("  loss_spike: {window: 2}\n", "  preflight: check-tpu\n")).front();
  const auto unchecked = r.create(job_yaml("  loss_spike: {window: 2}\n")).front();
  ASSERT_TRUE(runs_attempt(checked, 1));
  ASSERT_TRUE(runs_attempt(unchecked, 1));
  print(checked, "step=1 loss=1.0\nstep=2 loss=nan\n");
  print(unchecked, "step=1 loss=1.0\nstep=2 loss=nan\n");
  ASSERT_TRUE(runs_attempt(checked, 2, 10));
  ASSERT_TRUE(r.tick_until([&] { return r.job(unchecked).bad_hardware == 1; }, 10));
  EXPECT_EQ(r.attempts(checked).front().outcome, AttemptOutcome::rolled_back);
  EXPECT_EQ(r.attempts(checked).front().rollback_step, 2);
  EXPECT_EQ(r.job(checked).bad_hardware, 0);
  EXPECT_EQ(r.attempts(unchecked).front().outcome, AttemptOutcome::bad_hardware);
}

} // namespace watchdog_test
} // namespace jobman::test
