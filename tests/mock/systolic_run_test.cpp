// The training loop of systolic-train in-process: its output, checkpoints, early stops and resumes, with stop
// requests and hardware faults scripted by the test.
#include "support/temp_dir.hpp"
#include "systolic/checkpoint.hpp"
#include "systolic/train.hpp"

#include <algorithm>
#include <csignal>
#include <functional>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace systolic_run_test {

namespace fs = std::filesystem;
using jobman::systolic::CheckpointDirectory;
using jobman::systolic::SkippedCheckpoint;
using jobman::systolic::StepFault;
using jobman::systolic::StopSignals;
using jobman::systolic::TrainExit;
using jobman::systolic::TrainingIo;
using jobman::systolic::TrainOptions;

// Delivers `signal` once the run has completed `steps` steps (0: never); never waits. A run that hangs gets `signal`
// at once.
class StopAfterSteps : public StopSignals {
public:
  StopAfterSteps(std::uint64_t steps, int signal) : steps_(steps), signal_(signal) {}
  int pending() override { return steps_ != 0 && completed_ >= steps_ ? signal_ : 0; }
  int wait_for(std::chrono::milliseconds /*timeout*/) override {
    ++completed_; // The loop waits once after every completed step.
    return pending();
  }
  int block_until_stopped() override { return signal_; }

private:
  std::uint64_t steps_;
  int signal_;
  std::uint64_t completed_ = 0;
};

// One in-process run's outcome.
struct Outcome {
  TrainExit exit = TrainExit::ok;
  std::vector<std::string> lines; // Standard output, line by line.
  std::string err;                // Standard error.

  // The checksum line's value, or "".
  [[nodiscard]] std::string checksum() const {
    for (const auto& line : lines) {
      if (line.starts_with("checksum=")) {
        return line.substr(9);
      }
    }
    return "";
  }
  // The "step=N ..." lines.
  [[nodiscard]] std::vector<std::string> step_lines() const {
    std::vector<std::string> steps;
    for (const auto& line : lines) {
      if (line.starts_with("step=")) {
        steps.push_back(line);
      }
    }
    return steps;
  }
};

TrainOptions small_options(std::uint64_t steps, const fs::path& ckpt_dir = {}) {
  TrainOptions options;
  options.steps = steps;
  options.model.dim = 6;
  options.model.batch = 4;
  options.array = 4;
  options.ckpt_dir = ckpt_dir;
  options.ckpt_every = 5;
  options.keep = 2;
  return options;
}

Outcome train(const TrainOptions& options, std::uint64_t stop_after = 0, int signal = SIGTERM,
              std::function<bool()> faulty = {}, std::function<StepFault()> step_fault = {}) {
  std::ostringstream out;
  std::ostringstream err;
  StopAfterSteps stop(stop_after, signal);
  TrainingIo io{out, err, stop, std::move(faulty), std::move(step_fault)};
  Outcome outcome;
  outcome.exit = jobman::systolic::run_training(options, io);
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    outcome.lines.push_back(line);
  }
  outcome.err = err.str();
  return outcome;
}

TEST(SystolicRun, PrintsTheStartOneLinePerStepAndTheChecksum) {
  const Outcome run = train(small_options(4));
  EXPECT_EQ(run.exit, TrainExit::ok);
  ASSERT_EQ(run.lines.size(), 6U);
  EXPECT_EQ(run.lines[0], "starting from step=0 of 4");
  const std::regex step_line(R"(step=(\d+) loss=([0-9.e+-]+) mxu_util=(0\.\d{4}|1\.0000) cycles=(\d+))");
  for (int i = 1; i <= 4; ++i) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(run.lines[static_cast<std::size_t>(i)], match, step_line))
        << run.lines[static_cast<std::size_t>(i)];
    EXPECT_EQ(match[1], std::to_string(i));
  }
  EXPECT_TRUE(std::regex_match(run.lines[5], std::regex("checksum=[0-9a-f]{16}"))) << run.lines[5];
}

TEST(SystolicRun, SameOptionsGiveTheSameChecksumAndOtherSeedsDoNot) {
  const TrainOptions options = small_options(10);
  TrainOptions other = options;
  other.model.seed = 2;
  EXPECT_EQ(train(options).checksum(), train(options).checksum());
  EXPECT_NE(train(options).checksum(), train(other).checksum());
}

TEST(SystolicRun, ArraySizeChangesCyclesButNotTheResult) {
  TrainOptions options = small_options(6);
  const Outcome small_array = train(options);
  options.array = 2;
  const Outcome smaller_array = train(options);
  EXPECT_EQ(small_array.checksum(), smaller_array.checksum());
  EXPECT_NE(small_array.step_lines(), smaller_array.step_lines()); // Different cycle counts and utilisation.
}

// Stops after every possible step, resumes, and compares with the run that was never stopped.
TEST(SystolicRun, StoppingAfterAnyStepAndResumingGivesTheUninterruptedResult) {
  const std::uint64_t steps = 13;
  const Outcome uninterrupted = train(small_options(steps));
  ASSERT_EQ(uninterrupted.exit, TrainExit::ok);
  for (std::uint64_t stop_at = 1; stop_at < steps; ++stop_at) {
    for (const int signal : {SIGTERM, SIGINT}) {
      jobman::test::TempDir dir;
      const TrainOptions options = small_options(steps, dir / "ckpt");
      const Outcome stopped = train(options, stop_at, signal);
      ASSERT_EQ(stopped.exit, signal == SIGTERM ? TrainExit::terminated : TrainExit::interrupted);
      const std::string by = signal == SIGTERM ? "SIGTERM" : "SIGINT";
      EXPECT_NE(std::find(stopped.lines.begin(), stopped.lines.end(),
                          "terminated at step=" + std::to_string(stop_at) + " by " + by),
                stopped.lines.end());
      const Outcome resumed = train(options);
      ASSERT_EQ(resumed.exit, TrainExit::ok);
      // The stop saved the last completed step, so nothing is computed twice.
      EXPECT_EQ(resumed.lines[0].rfind("resumed from step=" + std::to_string(stop_at) + " of " + std::to_string(steps) +
                                           " checkpoint=",
                                       0),
                0U)
          << resumed.lines[0];
      std::vector<std::string> steps_seen = stopped.step_lines();
      const auto rest = resumed.step_lines();
      steps_seen.insert(steps_seen.end(), rest.begin(), rest.end());
      EXPECT_EQ(steps_seen, uninterrupted.step_lines()) << "stopped after " << stop_at;
      EXPECT_EQ(resumed.checksum(), uninterrupted.checksum()) << "stopped after " << stop_at;
    }
  }
}

// Without the save on a stop, the next run resumes from the last periodic checkpoint and redoes the steps after it,
// as with a training script that ignores SIGTERM's warning; the result is still the uninterrupted one.
TEST(SystolicRun, WithoutSaveOnStopTheStepsSinceTheLastCheckpointAreDoneAgain) {
  const std::uint64_t steps = 13;
  const Outcome uninterrupted = train(small_options(steps));
  jobman::test::TempDir dir;
  TrainOptions options = small_options(steps, dir / "ckpt");
  options.save_on_stop = false;
  const Outcome stopped = train(options, 8, SIGTERM);
  ASSERT_EQ(stopped.exit, TrainExit::terminated);
  EXPECT_EQ(std::count_if(stopped.lines.begin(), stopped.lines.end(),
                          [](const std::string& line) { return line.starts_with("checkpoint step=8"); }),
            0);
  const Outcome resumed = train(options);
  ASSERT_EQ(resumed.exit, TrainExit::ok);
  EXPECT_EQ(resumed.lines[0].rfind("resumed from step=5 of 13 checkpoint=", 0), 0U) << resumed.lines[0];
  EXPECT_EQ(resumed.step_lines().size(), 8U); // Steps 6 to 13: 6, 7 and 8 twice.
  EXPECT_EQ(resumed.checksum(), uninterrupted.checksum());
}

TEST(SystolicRun, CheckpointsFollowCkptEveryAndTheLastStepAndOnlyKeepTheNewest) {
  jobman::test::TempDir dir;
  TrainOptions options = small_options(12, dir / "ckpt");
  options.keep = 2;
  const Outcome run = train(options);
  ASSERT_EQ(run.exit, TrainExit::ok);
  std::vector<std::string> saved;
  for (const auto& line : run.lines) {
    if (line.starts_with("checkpoint ")) {
      saved.push_back(line.substr(0, line.find(" path=")));
    }
  }
  EXPECT_EQ(saved, (std::vector<std::string>{"checkpoint step=5", "checkpoint step=10", "checkpoint step=12"}));
  const auto files = CheckpointDirectory(dir / "ckpt").list();
  ASSERT_EQ(files.size(), 2U);
  EXPECT_EQ(files[0].step, 12U);
  EXPECT_EQ(files[1].step, 10U);
}

TEST(SystolicRun, RunPastItsLastStepOnlyPrintsTheChecksum) {
  jobman::test::TempDir dir;
  const TrainOptions options = small_options(5, dir / "ckpt");
  const Outcome first = train(options);
  const Outcome again = train(options);
  EXPECT_EQ(again.exit, TrainExit::ok);
  EXPECT_TRUE(again.step_lines().empty());
  EXPECT_EQ(again.checksum(), first.checksum());
}

TEST(SystolicRun, WorkersOtherThanZeroResumeButNeverWrite) {
  jobman::test::TempDir dir;
  const Outcome writer = train(small_options(5, dir / "ckpt"));
  ASSERT_EQ(writer.exit, TrainExit::ok);
  TrainOptions reader = small_options(9, dir / "ckpt");
  reader.worker_id = 1;
  const Outcome run = train(reader);
  EXPECT_EQ(run.exit, TrainExit::ok);
  EXPECT_EQ(run.lines[0].rfind("resumed from step=5 ", 0), 0U) << run.lines[0];
  EXPECT_EQ(CheckpointDirectory(dir / "ckpt").list().size(), 1U);
  EXPECT_EQ(run.checksum(), train(small_options(9)).checksum());
}

TEST(SystolicRun, DamagedNewestCheckpointIsReportedSetAsideAndReplayed) {
  jobman::test::TempDir dir;
  TrainOptions options = small_options(10, dir / "ckpt");
  options.keep = 5;
  ASSERT_EQ(train(options).exit, TrainExit::ok);
  const fs::path newest = dir / "ckpt" / CheckpointDirectory::file_name(10);
  fs::resize_file(newest, fs::file_size(newest) - 1);
  options.steps = 12;
  const Outcome resumed = train(options);
  EXPECT_EQ(resumed.exit, TrainExit::ok);
  EXPECT_EQ(resumed.lines[0].rfind("resumed from step=5 ", 0), 0U) << resumed.lines[0];
  EXPECT_NE(resumed.err.find("skipping checkpoint " + newest.string() + ": truncated"), std::string::npos)
      << resumed.err;
  EXPECT_TRUE(fs::exists(newest.string() + ".invalid"));
  EXPECT_EQ(resumed.checksum(), train(small_options(12)).checksum());
}

TEST(SystolicRun, CheckpointsOfAnotherRunAreRefused) {
  jobman::test::TempDir dir;
  ASSERT_EQ(train(small_options(5, dir / "ckpt")).exit, TrainExit::ok);
  TrainOptions other = small_options(10, dir / "ckpt");
  other.model.seed = 8;
  other.model.learning_rate = 0.5;
  const Outcome refused = train(other);
  EXPECT_EQ(refused.exit, TrainExit::usage);
  ASSERT_FALSE(refused.lines.empty());
  EXPECT_NE(refused.lines.back().find("--seed 1 there, 8 here"), std::string::npos) << refused.lines.back();
  EXPECT_NE(refused.lines.back().find("--lr 0.1 there, 0.5 here"), std::string::npos) << refused.lines.back();
}

// The steps of the checkpoint files directly in `dir`, newest first.
std::vector<std::uint64_t> checkpoint_steps(const fs::path& dir) {
  std::vector<std::uint64_t> steps;
  for (const auto& file : CheckpointDirectory(dir).list()) {
    steps.push_back(file.step);
  }
  return steps;
}

// The loss a "step=N loss=L ..." line reports.
double loss_of(const std::string& step_line) {
  const auto at = step_line.find(" loss=") + 6;
  return std::stod(step_line.substr(at, step_line.find(' ', at) - at));
}

// Options of a run of `steps` steps that checkpoints every 5 into `ckpt_dir` and keeps them all.
TrainOptions keeping_options(std::uint64_t steps, const fs::path& ckpt_dir) {
  TrainOptions options = small_options(steps, ckpt_dir);
  options.keep = 100;
  return options;
}

// The options of a run of `steps` steps that checkpoints every 5 into `ckpt_dir` (all kept) and has run to its end
// there, given a rollback before step `before` that skips the data of `skip` steps.
TrainOptions rollback_after_a_run(std::uint64_t steps, const fs::path& ckpt_dir, std::uint64_t before,
                                  std::uint64_t skip) {
  TrainOptions options = keeping_options(steps, ckpt_dir);
  EXPECT_EQ(train(options).exit, TrainExit::ok);
  options.resume_before = before;
  options.skip_steps = skip;
  return options;
}

// Without data to skip, the run rolled back computes the steps after its checkpoint exactly as before.
TEST(SystolicRun, ARollbackResumesFromTheNewestCheckpointBeforeItsStepAndMovesTheLaterOnesAside) {
  const Outcome uninterrupted = train(small_options(20));
  jobman::test::TempDir dir;
  const TrainOptions options = rollback_after_a_run(20, dir / "ckpt", 12, 0);
  ASSERT_EQ(checkpoint_steps(dir / "ckpt"), (std::vector<std::uint64_t>{20, 15, 10, 5}));
  const Outcome rolled = train(options);
  ASSERT_EQ(rolled.exit, TrainExit::ok) << rolled.err;
  ASSERT_GE(rolled.lines.size(), 2U);
  EXPECT_EQ(rolled.lines[0], "rolling back: resuming from step=10, the newest checkpoint before step 12");
  EXPECT_EQ(rolled.lines[1].rfind("resumed from step=10 of 20 checkpoint=", 0), 0U) << rolled.lines[1];
  // Moved aside, not deleted; the run wrote its own 15 and 20 since.
  EXPECT_EQ(checkpoint_steps(dir / "ckpt" / "rolled-back"), (std::vector<std::uint64_t>{20, 15}));
  EXPECT_NE(rolled.err.find("rolled back " + (dir / "ckpt" / CheckpointDirectory::file_name(15)).string() + " to " +
                            (dir / "ckpt" / "rolled-back" / CheckpointDirectory::file_name(15)).string()),
            std::string::npos)
      << rolled.err;
  EXPECT_EQ(checkpoint_steps(dir / "ckpt"), (std::vector<std::uint64_t>{20, 15, 10, 5}));
  const auto all_steps = uninterrupted.step_lines();
  EXPECT_EQ(rolled.step_lines(), std::vector<std::string>(all_steps.begin() + 10, all_steps.end()));
  EXPECT_EQ(rolled.checksum(), uninterrupted.checksum());
}

TEST(SystolicRun, ARollbackWithNoCheckpointBeforeItsStepStartsFromZero) {
  jobman::test::TempDir dir;
  const Outcome rolled = train(rollback_after_a_run(8, dir / "ckpt", 3, 2));
  ASSERT_EQ(rolled.exit, TrainExit::ok) << rolled.err;
  ASSERT_GE(rolled.lines.size(), 2U);
  EXPECT_EQ(
      rolled.lines[0],
      "rolling back: starting from step=0, no checkpoint before step 3; skipping the data of 2 steps (data shift 2)");
  EXPECT_EQ(rolled.lines[1], "starting from step=0 of 8");
  EXPECT_EQ(checkpoint_steps(dir / "ckpt" / "rolled-back"), (std::vector<std::uint64_t>{8, 5}));
  // Without a checkpoint directory it is the same run: step s trains on the batch of step s + 2 from the start.
  TrainOptions without = small_options(8);
  without.resume_before = 3;
  without.skip_steps = 2;
  EXPECT_EQ(train(without).checksum(), rolled.checksum());
  EXPECT_NE(rolled.checksum(), train(small_options(8)).checksum());
}

// Skipping data shifts every later step's batch: where the run rolled back from does not matter, only the checkpoint
// it resumes from, so a run that stopped at that checkpoint and got the same rollback ends bit for bit the same.
TEST(SystolicRun, ARollbackThatSkipsDataEndsWhereTheSameRollbackFromItsCheckpointEnds) {
  jobman::test::TempDir dir;
  TrainOptions went_on = keeping_options(20, dir / "went-on");
  TrainOptions stopped = keeping_options(10, dir / "stopped");
  ASSERT_EQ(train(went_on).exit, TrainExit::ok);
  ASSERT_EQ(train(stopped).exit, TrainExit::ok);
  for (TrainOptions* options : {&went_on, &stopped}) {
    options->steps = 20;
    options->resume_before = 12;
    options->skip_steps = 3;
  }
  const Outcome from_went_on = train(went_on);
  const Outcome from_stopped = train(stopped);
  ASSERT_EQ(from_went_on.exit, TrainExit::ok) << from_went_on.err;
  ASSERT_EQ(from_stopped.exit, TrainExit::ok) << from_stopped.err;
  const std::string rolling_back = "rolling back: resuming from step=10, the newest checkpoint before step 12; "
                                   "skipping the data of 3 steps (data shift 3)";
  EXPECT_EQ(from_went_on.lines.at(0), rolling_back);
  EXPECT_EQ(from_stopped.lines.at(0), rolling_back);
  EXPECT_EQ(from_went_on.step_lines(), from_stopped.step_lines());
  EXPECT_EQ(from_went_on.checksum(), from_stopped.checksum());
  EXPECT_NE(from_went_on.checksum(), train(small_options(20)).checksum());
  EXPECT_FALSE(fs::exists(dir / "stopped" / "rolled-back")) << "nothing there to move aside";

  // The shift is in the checkpoints the rolled-back run wrote: a plain resume from them keeps it, and ends where the
  // same rollback run to the end in one go ends.
  const auto newest = CheckpointDirectory(dir / "went-on").load_newest_valid([](const SkippedCheckpoint&) {});
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->checkpoint.state.step, 20U);
  EXPECT_EQ(newest->checkpoint.state.data_shift, 3U);
  EXPECT_EQ(newest->checkpoint.state.rollback_step, 12U);
  went_on.resume_before = 0;
  went_on.skip_steps = 0;
  went_on.steps = 25;
  const Outcome continued = train(went_on);
  EXPECT_EQ(continued.lines.at(0).rfind("resumed from step=20 of 25 ", 0), 0U) << continued.lines.at(0);
  TrainOptions in_one_go = keeping_options(10, dir / "in-one-go");
  ASSERT_EQ(train(in_one_go).exit, TrainExit::ok);
  in_one_go.steps = 25;
  in_one_go.resume_before = 12;
  in_one_go.skip_steps = 3;
  EXPECT_EQ(continued.checksum(), train(in_one_go).checksum());
}

// jobman passes the same rollback again on every attempt until the run is past its step: stopped before it, at it or
// after it, and given the same K and M again, the run skips the data once and ends where the rollback that was never
// stopped ends.
TEST(SystolicRun, ARollbackGivenAgainAfterAStopSkipsTheDataOnlyOnce) {
  jobman::test::TempDir reference_dir;
  const Outcome once = train(rollback_after_a_run(20, reference_dir / "ckpt", 12, 3));
  ASSERT_EQ(once.exit, TrainExit::ok) << once.err;

  for (const std::uint64_t stop_after : {1, 2, 6}) { // Stopped at step 11, 12 and 16, each saved on the stop.
    jobman::test::TempDir dir;
    const TrainOptions options = rollback_after_a_run(20, dir / "ckpt", 12, 3);
    ASSERT_EQ(train(options, stop_after).exit, TrainExit::terminated);
    const Outcome again = train(options);
    ASSERT_EQ(again.exit, TrainExit::ok) << again.err;
    const std::uint64_t stopped_at = 10 + stop_after;
    const std::string from = stopped_at < 12 ? "the newest checkpoint before step 12"
                                             : "a checkpoint written after this rollback before step 12";
    EXPECT_EQ(again.lines.at(0), "rolling back: resuming from step=" + std::to_string(stopped_at) + ", " + from +
                                     "; its data shift 3 already includes this rollback's skip");
    EXPECT_TRUE(again.err.find("rolled back") == std::string::npos) << "nothing more to move aside: " << again.err;
    EXPECT_EQ(again.checksum(), once.checksum()) << "stopped after " << stop_after << " steps";
  }
}

// A spike from step 12 for 3 steps: those steps report 10 times the loss and apply 10 times the gradient, so the run
// ends elsewhere. Rolled back to before the spike (which is spent by then) it ends at the uninterrupted checksum.
TEST(SystolicRun, ALossSpikeCorruptsTheRunAndARollbackBeforeItUndoesIt) {
  const Outcome uninterrupted = train(small_options(20));
  std::uint64_t asked = 0;
  int spikes_left = 3;
  const auto spike = [&]() {
    StepFault fault;
    if (++asked >= 12 && spikes_left > 0) {
      --spikes_left;
      fault.loss_spike = 10;
    }
    return fault;
  };
  jobman::test::TempDir dir;
  TrainOptions options = keeping_options(20, dir / "ckpt");
  const Outcome spiked = train(options, 0, SIGTERM, {}, spike);
  ASSERT_EQ(spiked.exit, TrainExit::ok) << spiked.err;
  EXPECT_EQ(asked, 20U) << "asked once before every step";
  const auto clean_steps = uninterrupted.step_lines();
  const auto spiked_steps = spiked.step_lines();
  ASSERT_EQ(spiked_steps.size(), 20U);
  EXPECT_EQ(std::vector<std::string>(spiked_steps.begin(), spiked_steps.begin() + 11),
            std::vector<std::string>(clean_steps.begin(), clean_steps.begin() + 11));
  EXPECT_NEAR(loss_of(spiked_steps[11]) / loss_of(clean_steps[11]), 10.0, 1e-6) << spiked_steps[11];
  EXPECT_NE(spiked.checksum(), uninterrupted.checksum());

  options.resume_before = 12;
  const Outcome rolled = train(options, 0, SIGTERM, {}, spike);
  ASSERT_EQ(rolled.exit, TrainExit::ok) << rolled.err;
  EXPECT_EQ(rolled.lines.at(0), "rolling back: resuming from step=10, the newest checkpoint before step 12");
  EXPECT_EQ(rolled.checksum(), uninterrupted.checksum());
}

// A hung step prints nothing, ends on the stop request, and saves nothing: a hung process does not get to.
TEST(SystolicRun, AHangEndsOnlyOnAStopRequestAndSavesNothing) {
  jobman::test::TempDir dir;
  TrainOptions options = small_options(20, dir / "ckpt");
  options.ckpt_every = 100;
  std::uint64_t asked = 0;
  const Outcome hung = train(options, 0, SIGTERM, {}, [&asked] {
    StepFault fault;
    fault.hang = ++asked == 4;
    return fault;
  });
  EXPECT_EQ(hung.exit, TrainExit::terminated);
  ASSERT_EQ(hung.lines.size(), 5U);
  EXPECT_EQ(hung.lines[3].rfind("step=3 ", 0), 0U) << hung.lines[3];
  EXPECT_EQ(hung.lines[4], "terminated at step=3 by SIGTERM while hung in step=4, nothing saved");
  EXPECT_TRUE(CheckpointDirectory(dir / "ckpt").list().empty());
}

// The --selftest run in-process on an array of `array`, the hardware faulty when `faulty` says so.
Outcome selftest(std::uint32_t array, std::function<bool()> faulty = {}) {
  std::ostringstream out;
  std::ostringstream err;
  StopAfterSteps stop(0, SIGTERM);
  TrainingIo io{out, err, stop, std::move(faulty)};
  TrainOptions options;
  options.array = array;
  Outcome outcome;
  outcome.exit = jobman::systolic::run_selftest(options, io);
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    outcome.lines.push_back(line);
  }
  outcome.err = err.str();
  return outcome;
}

TEST(SystolicRun, SelftestPassesOnHealthyArraysOfEverySizeAndFailsOnAFaultyOne) {
  // Arrays smaller than, about as large as, and larger than the product: chained K-tiles, edge tiles, one tile.
  for (const std::uint32_t array : {1U, 3U, 8U, 9U, 32U}) {
    const Outcome healthy = selftest(array, [] { return false; });
    EXPECT_EQ(healthy.exit, TrainExit::ok) << array << ": " << healthy.err;
    const std::string size = std::to_string(array) + "x" + std::to_string(array);
    EXPECT_EQ(healthy.lines, std::vector<std::string>({"selftest passed: the 12x20 by 20x10 product on the " + size +
                                                       " array matches its known answer in all 120 outputs"}));
    EXPECT_EQ(healthy.err, "");
  }
  EXPECT_EQ(selftest(8).exit, TrainExit::ok) << "no probe: healthy";

  // PE (0, 0) yields NaN: every output of the first column of each N-tile (two of them on an 8 x 8 array).
  int probes = 0;
  const Outcome faulty = selftest(8, [&probes] { return ++probes > 0; });
  EXPECT_EQ(probes, 1) << "the hardware is probed once, as before a training step";
  EXPECT_EQ(faulty.exit, TrainExit::failure);
  EXPECT_TRUE(faulty.lines.empty());
  EXPECT_EQ(faulty.err, "selftest failed: the 12x20 by 20x10 product on the 8x8 array has 24 non-finite and 0 "
                        "mismatched of 120 outputs; first [0][0] = nan, expected 47\n");
}

TEST(SystolicRun, FaultyHardwareEndsTheRunWithoutCheckpointingItsResult) {
  jobman::test::TempDir dir;
  TrainOptions options = small_options(100, dir / "ckpt");
  options.ckpt_every = 1;
  options.keep = 100;
  int probes = 0;
  const Outcome run = train(options, 0, SIGTERM, [&probes] { return ++probes >= 7; });
  EXPECT_EQ(run.exit, TrainExit::failure);
  ASSERT_GE(run.lines.size(), 2U);
  EXPECT_EQ(run.lines[run.lines.size() - 2].rfind("step=7 loss=nan ", 0), 0U) << run.lines[run.lines.size() - 2];
  EXPECT_EQ(run.lines.back(), "error: non-finite loss at step 7");
  const auto files = CheckpointDirectory(dir / "ckpt").list();
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files.front().step, 6U);
  const auto loaded = CheckpointDirectory(dir / "ckpt").load_newest_valid([](const SkippedCheckpoint&) {});
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(loaded->checkpoint.state.weights.all_finite());
}

} // namespace systolic_run_test
