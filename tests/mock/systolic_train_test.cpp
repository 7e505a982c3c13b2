// The systolic-train binary as a child process: killed and resumed at random steps it still ends with the
// uninterrupted run's checksum; signals, faulty hardware, workers and bad options behave as documented.
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"
#include "systolic/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <optional>
#include <poll.h>
#include <random>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace systolic_train_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using jobman::systolic::CheckpointDirectory;
using jobman::systolic::SkippedCheckpoint;

// How long any single wait on the child may take before the test gives up: generous, for sanitizer builds on busy
// machines. Nothing is asserted about how long things take below this.
constexpr auto kPatience = std::chrono::seconds(60);

std::string systolic_binary() {
  return JOBMAN_SYSTOLIC_BINARY;
}

// A running systolic-train whose stdout is read line by line as it is written; stderr goes to a file.
class TrainerProcess : public jobman::test::LineReadingProcess {
public:
  // Starts the binary with `args`; `env` entries are set (an empty value unsets the variable).
  TrainerProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                 const fs::path& stderr_file)
      : LineReadingProcess(with_binary(args), env, stderr_file, kPatience) {}

private:
  static std::vector<std::string> with_binary(const std::vector<std::string>& args) {
    std::vector<std::string> all{systolic_binary()};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }
};

// The value after "checksum=" in `lines`, or "".
std::string checksum_of(const std::vector<std::string>& lines) {
  for (const auto& line : lines) {
    if (line.starts_with("checksum=")) {
      return line.substr(9);
    }
  }
  return "";
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  return lines;
}

// The step number of a "step=N ..." line.
std::uint64_t step_of(const std::string& line) {
  return std::stoull(line.substr(5, line.find(' ') - 5));
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// An environment without the variables systolic-train reads, whatever the test runner has set.
std::map<std::string, std::string> clean_env() {
  return {{"JOBMAN_WORKER_ID", ""},   {"MOCK_TPU_FAULT_FILE", ""}, {"MOCK_TPU_LOSS_SPIKE_FILE", ""},
          {"MOCK_TPU_HANG_FILE", ""}, {"JOBMAN_SKIP_STEPS", ""},   {"JOBMAN_RESUME_BEFORE_STEP", ""}};
}

// systolic-train with `args` to completion; `env` on top of clean_env().
jobman::test::RunResult run_trainer(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), systolic_binary());
  auto all = clean_env();
  for (const auto& [name, value] : env) {
    all[name] = value;
  }
  return jobman::test::run_program(args, {all, "", ""});
}

// `args` with a small model added, so that sanitizer builds run it quickly.
std::vector<std::string> with_small_model(std::vector<std::string> args) {
  args.insert(args.end(), {"--dim", "10", "--batch", "6", "--array", "4"});
  return args;
}

TEST(SystolicTrain, DefaultRunOfAHundredStepsPrintsEveryStepAndAChecksum) {
  const auto result = run_trainer({"--steps", "100"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto lines = split_lines(result.out);
  ASSERT_EQ(lines.size(), 102U);
  EXPECT_EQ(lines.front(), "starting from step=0 of 100");
  EXPECT_EQ(lines[100].rfind("step=100 loss=", 0), 0U);
  EXPECT_EQ(checksum_of(lines).size(), 16U);
}

// The central guarantee: a run killed at random steps (SIGTERM and SIGKILL) and restarted each time computes
// exactly what the run that was never interrupted computes, step by step and in its final weights.
TEST(SystolicTrain, KilledAndResumedAtRandomStepsEndsWithTheUninterruptedChecksum) {
  const std::uint64_t steps = 80;
  const std::vector<std::string> args = with_small_model({"--steps", std::to_string(steps)});
  const auto uninterrupted = run_trainer(args);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  const auto reference_lines = split_lines(uninterrupted.out);
  const std::string reference_checksum = checksum_of(reference_lines);
  ASSERT_EQ(reference_checksum.size(), 16U);
  std::map<std::uint64_t, std::string> reference_steps;
  for (const auto& line : reference_lines) {
    if (line.starts_with("step=")) {
      reference_steps[step_of(line)] = line;
    }
  }

  // SYSTOLIC_TEST_SEED reproduces a failing sequence of kill points.
  const char* seed_text = std::getenv("SYSTOLIC_TEST_SEED");
  const std::uint64_t seed = seed_text != nullptr ? std::stoull(seed_text) : std::random_device{}();
  std::cout << "[ info     ] kill points drawn with SYSTOLIC_TEST_SEED=" << seed << std::endl;
  SCOPED_TRACE("SYSTOLIC_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);

  jobman::test::TempDir dir;
  // Checkpoints every 3 steps; a short step time so that the signal lands before the run can finish.
  std::vector<std::string> interrupted_args = args;
  interrupted_args.insert(interrupted_args.end(), {"--ckpt-dir", (dir / "bucket" / "ckpt").string(), "--ckpt-every",
                                                   "3", "--keep", "2", "--step-time-ms", "10"});
  const int signals[] = {SIGTERM, SIGKILL, SIGTERM, SIGKILL, SIGTERM, SIGTERM, SIGKILL};
  int interruptions = 0;
  for (const int signal : signals) {
    TrainerProcess trainer(interrupted_args, clean_env(), dir / "stderr.log");
    const auto first = trainer.next_line();
    ASSERT_TRUE(first) << read_text(dir / "stderr.log");
    std::uint64_t resume_step = 0;
    if (interruptions == 0) {
      EXPECT_EQ(*first, "starting from step=0 of " + std::to_string(steps));
    } else {
      // Every earlier run left a checkpoint: the first was stopped by SIGTERM, which saves the last step.
      ASSERT_EQ(first->rfind("resumed from step=", 0), 0U) << *first;
      resume_step = std::stoull(first->substr(18, first->find(' ', 18) - 18));
    }
    // A few steps past the resume point, never within 6 steps of the end, so the run cannot finish first.
    const std::uint64_t last_kill_step = std::min(resume_step + 8, steps - 6);
    ASSERT_LT(resume_step, last_kill_step) << "no room left for another interruption";
    const std::uint64_t kill_step = std::uniform_int_distribution<std::uint64_t>(resume_step + 1, last_kill_step)(rng);
    ASSERT_TRUE(trainer.read_until("step=" + std::to_string(kill_step) + " "))
        << "no step=" << kill_step << " line; stderr: " << read_text(dir / "stderr.log");
    trainer.send(signal);
    const int exit_code = trainer.finish();
    EXPECT_EQ(exit_code, signal == SIGTERM ? 143 : 128 + SIGKILL) << "killed at step " << kill_step;
    ++interruptions;
    for (const auto& line : trainer.lines()) {
      if (line.starts_with("step=")) {
        EXPECT_EQ(line, reference_steps[step_of(line)]) << "a resumed run computed a different step";
      }
    }
    if (signal == SIGTERM) {
      const auto& lines = trainer.lines();
      EXPECT_TRUE(std::any_of(lines.begin(), lines.end(),
                              [](const std::string& line) { return line.starts_with("terminated at step="); }));
    }
  }
  EXPECT_GE(interruptions, 5);

  TrainerProcess last(interrupted_args, clean_env(), dir / "stderr.log");
  EXPECT_EQ(last.finish(), 0) << read_text(dir / "stderr.log");
  ASSERT_FALSE(last.lines().empty());
  EXPECT_EQ(last.lines().front().rfind("resumed from step=", 0), 0U) << last.lines().front();
  for (const auto& line : last.lines()) {
    if (line.starts_with("step=")) {
      EXPECT_EQ(line, reference_steps[step_of(line)]);
    }
  }
  EXPECT_EQ(checksum_of(last.lines()), reference_checksum);
  // No temporary file of a writer killed mid-write survives the next writer's start.
  for (const auto& entry : fs::directory_iterator(dir / "bucket" / "ckpt")) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST(SystolicTrain, SigtermDuringALongStepTimeEndsTheRunWith143) {
  jobman::test::TempDir dir;
  // Each step lasts at least ten minutes, so the signal arrives during the first step's wait.
  TrainerProcess trainer(
      with_small_model({"--steps", "3", "--step-time-ms", "600000", "--ckpt-dir", (dir / "ckpt").string()}),
      clean_env(), dir / "stderr.log");
  ASSERT_TRUE(trainer.read_until("step=1 "));
  trainer.send(SIGTERM);
  EXPECT_EQ(trainer.finish(), 143) << read_text(dir / "stderr.log");
  const auto& lines = trainer.lines();
  EXPECT_NE(std::find(lines.begin(), lines.end(), "terminated at step=1 by SIGTERM"), lines.end());
  // The completed step was saved on the way out.
  EXPECT_EQ(CheckpointDirectory(dir / "ckpt").list().front().step, 1U);
}

TEST(SystolicTrain, SigintEndsTheRunWith130) {
  jobman::test::TempDir dir;
  TrainerProcess trainer(with_small_model({"--steps", "3", "--step-time-ms", "600000"}), clean_env(),
                         dir / "stderr.log");
  ASSERT_TRUE(trainer.read_until("step=1 "));
  trainer.send(SIGINT);
  EXPECT_EQ(trainer.finish(), 130) << read_text(dir / "stderr.log");
  EXPECT_EQ(trainer.lines().back(), "terminated at step=1 by SIGINT");
}

TEST(SystolicTrain, FaultFileMakesTheLossNanAndTheRunFailWithoutCheckpointingIt) {
  jobman::test::TempDir dir;
  const fs::path fault = dir / "tpu-fault";
  std::map<std::string, std::string> env = clean_env();
  env["MOCK_TPU_FAULT_FILE"] = fault.string();
  TrainerProcess trainer(with_small_model({"--steps", "100000000", "--ckpt-dir", (dir / "ckpt").string(),
                                           "--ckpt-every", "2", "--keep", "1000000"}),
                         env, dir / "stderr.log");
  ASSERT_TRUE(trainer.read_until("step=5 "));
  std::ofstream(fault) << "faulty\n";
  const auto nan_line = trainer.read_until("step=");
  std::optional<std::string> bad = nan_line;
  while (bad && bad->find(" loss=nan ") == std::string::npos) {
    bad = trainer.read_until("step=");
  }
  ASSERT_TRUE(bad) << "no loss=nan line";
  const std::uint64_t bad_step = step_of(*bad);
  const auto error = trainer.next_line();
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "error: non-finite loss at step " + std::to_string(bad_step));
  EXPECT_EQ(trainer.finish(), 1);
  // Every checkpoint is intact, finite, and older than the NaN step.
  const auto files = CheckpointDirectory(dir / "ckpt").list();
  ASSERT_FALSE(files.empty());
  EXPECT_LT(files.front().step, bad_step);
  const auto loaded = CheckpointDirectory(dir / "ckpt").load_newest_valid([](const SkippedCheckpoint& skipped) {
    ADD_FAILURE() << "damaged checkpoint " << skipped.path << ": " << skipped.reason;
  });
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(loaded->checkpoint.state.weights.all_finite());
  EXPECT_TRUE(loaded->checkpoint.state.velocity.all_finite());
}

TEST(SystolicTrain, SelftestPassesWithoutTheFaultFileAndFailsWithItWritingNothing) {
  jobman::test::TempDir dir;
  const auto ckpt = dir / "ckpt";
  const auto passed = run_trainer({"--selftest", "--ckpt-dir", ckpt.string()});
  EXPECT_EQ(passed.exit_code, 0) << passed.err;
  EXPECT_EQ(passed.out.rfind("selftest passed: ", 0), 0U) << passed.out;
  EXPECT_EQ(split_lines(passed.out).size(), 1U) << passed.out;
  EXPECT_EQ(passed.err, "");

  const auto fault = dir.write("fault", "");
  const auto failed =
      run_trainer({"--selftest", "--ckpt-dir", ckpt.string()}, {{"MOCK_TPU_FAULT_FILE", fault.string()}});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_EQ(failed.out, "");
  EXPECT_EQ(failed.err.rfind("selftest failed: ", 0), 0U) << failed.err;
  EXPECT_NE(failed.err.find(" non-finite "), std::string::npos) << failed.err;
  EXPECT_EQ(split_lines(failed.err).size(), 1U) << failed.err;
  EXPECT_FALSE(fs::exists(ckpt)) << "a selftest writes no checkpoint";
}

TEST(SystolicTrain, FaultFileFromTheStartFailsTheFirstStep) {
  jobman::test::TempDir dir;
  const fs::path fault = dir.write("fault", "");
  const auto result = run_trainer(with_small_model({"--steps", "10", "--ckpt-dir", (dir / "ckpt").string()}),
                                  {{"MOCK_TPU_FAULT_FILE", fault.string()}});
  EXPECT_EQ(result.exit_code, 1);
  const auto lines = split_lines(result.out);
  ASSERT_EQ(lines.size(), 3U) << result.out;
  EXPECT_EQ(lines[1].rfind("step=1 loss=nan mxu_util=", 0), 0U) << lines[1];
  EXPECT_EQ(lines[2], "error: non-finite loss at step 1");
  EXPECT_TRUE(CheckpointDirectory(dir / "ckpt").list().empty());
}

TEST(SystolicTrain, OnlyWorkerZeroWritesCheckpointsAndEveryWorkerResumes) {
  jobman::test::TempDir dir;
  const std::string ckpt = (dir / "bucket" / "ckpt").string();
  const auto whole = run_trainer(with_small_model({"--steps", "30"}));
  ASSERT_EQ(whole.exit_code, 0);

  // Worker 3 (from the environment) with no checkpoints yet: trains from zero, writes nothing, not even the dir.
  const auto worker3 = run_trainer(with_small_model({"--steps", "20", "--ckpt-dir", ckpt, "--ckpt-every", "5"}),
                                   {{"JOBMAN_WORKER_ID", "3"}});
  ASSERT_EQ(worker3.exit_code, 0) << worker3.err;
  EXPECT_FALSE(fs::exists(ckpt));

  // Worker 0 (the environment says 3, the option wins) writes.
  const auto worker0 =
      run_trainer(with_small_model({"--steps", "20", "--ckpt-dir", ckpt, "--ckpt-every", "10", "--worker-id", "0"}),
                  {{"JOBMAN_WORKER_ID", "3"}});
  ASSERT_EQ(worker0.exit_code, 0) << worker0.err;
  const auto written = CheckpointDirectory(ckpt).list();
  ASSERT_EQ(written.size(), 2U);
  EXPECT_EQ(written.front().step, 20U);

  // Worker 1 resumes from worker 0's newest checkpoint, finishes the run, and leaves the directory as it was.
  const auto worker1 = run_trainer(with_small_model({"--steps", "30", "--ckpt-dir", ckpt, "--ckpt-every", "5"}),
                                   {{"JOBMAN_WORKER_ID", "1"}});
  ASSERT_EQ(worker1.exit_code, 0) << worker1.err;
  EXPECT_EQ(worker1.out.rfind("resumed from step=20 of 30 checkpoint=" + written.front().path.string() + "\n", 0), 0U)
      << worker1.out;
  EXPECT_EQ(worker1.out.find("checkpoint step="), std::string::npos);
  const auto after = CheckpointDirectory(ckpt).list();
  ASSERT_EQ(after.size(), written.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].path, written[i].path);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(ckpt), fs::directory_iterator()), 2);
  EXPECT_EQ(checksum_of(split_lines(worker1.out)), checksum_of(split_lines(whole.out)));
}

TEST(SystolicTrain, CorruptedNewestCheckpointIsSkippedWithAWarning) {
  jobman::test::TempDir dir;
  const fs::path ckpt = dir / "ckpt";
  ASSERT_EQ(
      run_trainer(with_small_model({"--steps", "20", "--ckpt-dir", ckpt.string(), "--ckpt-every", "10"})).exit_code, 0);
  const fs::path newest = ckpt / CheckpointDirectory::file_name(20);
  {
    std::fstream file(newest, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(200);
    file.put('\x5a');
  }
  const auto resumed = run_trainer(with_small_model({"--steps", "25", "--ckpt-dir", ckpt.string()}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(resumed.out.rfind("resumed from step=10 ", 0), 0U) << resumed.out;
  EXPECT_NE(resumed.err.find("skipping checkpoint " + newest.string() + ": checksum mismatch"), std::string::npos)
      << resumed.err;
  EXPECT_EQ(checksum_of(split_lines(resumed.out)),
            checksum_of(split_lines(run_trainer(with_small_model({"--steps", "25"})).out)));
}

TEST(SystolicTrain, ArraySizeDoesNotChangeTheChecksum) {
  std::string checksum;
  for (const char* array : {"1", "3", "16"}) {
    const auto result = run_trainer({"--steps", "5", "--dim", "10", "--batch", "6", "--array", array});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::string this_checksum = checksum_of(split_lines(result.out));
    if (checksum.empty()) {
      checksum = this_checksum;
    }
    EXPECT_EQ(this_checksum, checksum) << "--array " << array;
  }
}

TEST(SystolicTrain, BadOptionsExitTwoNamingTheOption) {
  const std::vector<std::vector<std::string>> cases = {
      {"--steps", "-5"}, {"--array", "0"},      {"--dim", "many"}, {"--lr", "-0.1"},
      {"--keep", "0"},   {"--ckpt-every", "0"}, {"--unknown"},     {"--step-time-ms", "soon"},
  };
  for (const auto& args : cases) {
    const auto result = run_trainer(args);
    EXPECT_EQ(result.exit_code, 2) << args[0];
    EXPECT_NE(result.err.find(args[0]), std::string::npos) << result.err;
    EXPECT_EQ(result.out, "") << args[0];
  }
  const auto env = run_trainer({"--steps", "1"}, {{"JOBMAN_WORKER_ID", "-1"}});
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_NE(env.err.find("JOBMAN_WORKER_ID"), std::string::npos) << env.err;
}

// The loss a "step=N loss=L ..." line reports.
double loss_of(const std::string& step_line) {
  const auto at = step_line.find(" loss=") + 6;
  return std::stod(step_line.substr(at, step_line.find(' ', at) - at));
}

// The "step=N ..." line of `lines`, or "".
std::string step_line(const std::vector<std::string>& lines, std::uint64_t step) {
  for (const auto& line : lines) {
    if (line.starts_with("step=" + std::to_string(step) + " ")) {
      return line;
    }
  }
  return "";
}

// jobman's rollback through the environment: the later checkpoints move aside, so a plain resume afterwards continues
// the rolled-back run (its data shift included), never the one before the rollback.
TEST(SystolicTrain, ARollbackFromTheEnvironmentMovesTheLaterCheckpointsAsideForGood) {
  jobman::test::TempDir dir;
  const fs::path ckpt = dir / "ckpt";
  const auto args =
      with_small_model({"--steps", "20", "--ckpt-dir", ckpt.string(), "--ckpt-every", "5", "--keep", "100"});
  const auto before = run_trainer(args);
  ASSERT_EQ(before.exit_code, 0) << before.err;
  const auto rolled = run_trainer(args, {{"JOBMAN_RESUME_BEFORE_STEP", "12"}, {"JOBMAN_SKIP_STEPS", "3"}});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err;
  const auto lines = split_lines(rolled.out);
  ASSERT_GE(lines.size(), 2U);
  EXPECT_EQ(lines[0], "rolling back: resuming from step=10, the newest checkpoint before step 12; skipping the data "
                      "of 3 steps (data shift 3)");
  EXPECT_EQ(lines[1], "resumed from step=10 of 20 checkpoint=" + (ckpt / CheckpointDirectory::file_name(10)).string());
  const auto aside = CheckpointDirectory(ckpt / "rolled-back").list();
  ASSERT_EQ(aside.size(), 2U);
  EXPECT_EQ(aside[0].step, 20U);
  EXPECT_EQ(aside[1].step, 15U);
  EXPECT_NE(checksum_of(lines), checksum_of(split_lines(before.out)));

  const auto plain = run_trainer(with_small_model({"--steps", "25", "--ckpt-dir", ckpt.string()}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.rfind("resumed from step=20 of 25 ", 0), 0U) << plain.out;
  jobman::test::TempDir other;
  const auto other_args =
      with_small_model({"--steps", "10", "--ckpt-dir", (other / "ckpt").string(), "--ckpt-every", "5"});
  ASSERT_EQ(run_trainer(other_args).exit_code, 0);
  const auto in_one_go = run_trainer(with_small_model({"--steps", "25", "--ckpt-dir", (other / "ckpt").string()}),
                                     {{"JOBMAN_RESUME_BEFORE_STEP", "12"}, {"JOBMAN_SKIP_STEPS", "3"}});
  ASSERT_EQ(in_one_go.exit_code, 0) << in_one_go.err;
  EXPECT_EQ(checksum_of(split_lines(plain.out)), checksum_of(split_lines(in_one_go.out)));
}

TEST(SystolicTrain, MalformedRollbackVariablesExitTwoNamingThem) {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"JOBMAN_RESUME_BEFORE_STEP", "0"}, {"JOBMAN_RESUME_BEFORE_STEP", "-5"}, {"JOBMAN_SKIP_STEPS", "some"}}) {
    std::map<std::string, std::string> env = {{"JOBMAN_RESUME_BEFORE_STEP", "3"}};
    env[name] = value;
    const auto result = run_trainer({"--steps", "1"}, env);
    EXPECT_EQ(result.exit_code, 2) << name << "=" << value;
    EXPECT_EQ(result.out, "");
    EXPECT_NE(result.err.find("systolic-train: error: " + name + " must be "), std::string::npos) << result.err;
  }
}

// The mock's loss spike file: the next steps spike (10 times the loss, and the update), counting the file down; the
// run that does not roll back ends elsewhere, and a rollback before the spike ends at the uninterrupted checksum.
TEST(SystolicTrain, ALossSpikeFileSpikesTheNextStepsAndARollbackBeforeThemUndoesIt) {
  const auto reference = run_trainer(with_small_model({"--steps", "20"}));
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const auto reference_lines = split_lines(reference.out);
  jobman::test::TempDir dir;
  const std::string ckpt = (dir / "ckpt").string();
  ASSERT_EQ(run_trainer(with_small_model({"--steps", "10", "--ckpt-dir", ckpt, "--ckpt-every", "5"})).exit_code, 0);
  const fs::path spike = dir.write("loss-spike", "10 3\n");
  const std::map<std::string, std::string> env = {{"MOCK_TPU_LOSS_SPIKE_FILE", spike.string()}};

  const auto one_step = run_trainer(with_small_model({"--steps", "11", "--ckpt-dir", ckpt}), env);
  ASSERT_EQ(one_step.exit_code, 0) << one_step.err;
  const std::string spiked_line = step_line(split_lines(one_step.out), 11);
  EXPECT_NEAR(loss_of(spiked_line) / loss_of(step_line(reference_lines, 11)), 10.0, 1e-6) << spiked_line;
  EXPECT_EQ(read_text(spike), "10 2\n");
  const auto rest = run_trainer(with_small_model({"--steps", "20", "--ckpt-dir", ckpt}), env);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_FALSE(fs::exists(spike)) << "spent after steps 11, 12 and 13";
  EXPECT_NE(checksum_of(split_lines(rest.out)), checksum_of(reference_lines));

  auto rollback_env = env;
  rollback_env["JOBMAN_RESUME_BEFORE_STEP"] = "11";
  const auto rolled = run_trainer(with_small_model({"--steps", "20", "--ckpt-dir", ckpt}), rollback_env);
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err;
  EXPECT_EQ(rolled.out.rfind("rolling back: resuming from step=10, the newest checkpoint before step 11\n", 0), 0U)
      << rolled.out;
  EXPECT_EQ(checksum_of(split_lines(rolled.out)), checksum_of(reference_lines));
}

// The kernel's wait channel of `pid` (empty when it cannot be read).
std::string wait_channel(pid_t pid) {
  return read_text("/proc/" + std::to_string(pid) + "/wchan");
}

// The mock's hang file: the next step blocks in a read of a pipe (as a collective that never returns) and prints
// nothing; SIGTERM ends it at once with 143 and no checkpoint, and the file is consumed, so a restart runs.
TEST(SystolicTrain, AHangFileBlocksTheNextStepSilentlyUntilSigtermWhichSavesNothing) {
  jobman::test::TempDir dir;
  const fs::path hang = dir / "hang";
  auto env = clean_env();
  env["MOCK_TPU_HANG_FILE"] = hang.string();
  const std::string ckpt = (dir / "ckpt").string();
  TrainerProcess trainer(
      with_small_model({"--steps", "1000", "--step-time-ms", "20", "--ckpt-dir", ckpt, "--ckpt-every", "1000"}), env,
      dir / "stderr.log");
  ASSERT_TRUE(trainer.read_until("step=3 ")) << read_text(dir / "stderr.log");
  std::ofstream(hang).close();
  ASSERT_TRUE(jobman::test::eventually(
      [&] {
        const std::string channel = wait_channel(trainer.pid());
        // Some kernels do not name wait channels ("0"); there the file being consumed is what can be seen.
        return !fs::exists(hang) && (channel.find("pipe_read") != std::string::npos || channel == "0");
      },
      std::chrono::seconds(30)))
      << "wchan " << wait_channel(trainer.pid());
  trainer.send(SIGTERM);
  EXPECT_EQ(trainer.finish(), 143) << read_text(dir / "stderr.log");
  EXPECT_FALSE(trainer.killed_by_signal()) << "it ended itself";
  const auto& lines = trainer.lines();
  ASSERT_GE(lines.size(), 2U);
  const std::uint64_t last = step_of(lines[lines.size() - 2]);
  EXPECT_EQ(lines.back(), "terminated at step=" + std::to_string(last) +
                              " by SIGTERM while hung in step=" + std::to_string(last + 1) + ", nothing saved");
  EXPECT_TRUE(CheckpointDirectory(ckpt).list().empty());

  const auto restarted = run_trainer(with_small_model({"--steps", "5", "--ckpt-dir", ckpt}), env);
  EXPECT_EQ(restarted.exit_code, 0) << restarted.err;
  EXPECT_EQ(checksum_of(split_lines(restarted.out)).size(), 16U);
}

TEST(SystolicTrain, CheckpointsOfADifferentRunExitTwo) {
  jobman::test::TempDir dir;
  const std::string ckpt = (dir / "ckpt").string();
  ASSERT_EQ(run_trainer(with_small_model({"--steps", "3", "--ckpt-dir", ckpt})).exit_code, 0);
  const auto other = run_trainer({"--steps", "3", "--ckpt-dir", ckpt, "--dim", "12", "--batch", "6"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.out.find("--dim 10 there, 12 here"), std::string::npos) << other.out;
}

} // namespace systolic_train_test
