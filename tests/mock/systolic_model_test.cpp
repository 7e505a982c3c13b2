// The teacher-student model of systolic-train and its command line, in-process.
#include "systolic/model.hpp"
#include "systolic/systolic_array.hpp"
#include "systolic/train.hpp"
#include "systolic_command_line.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace systolic_model_test {

using jobman::systolic::Matrix;
using jobman::systolic::ModelConfig;
using jobman::systolic::MxuFault;
using jobman::systolic::ParsedCommandLine;
using jobman::systolic::SystolicArray;
using jobman::systolic::TeacherStudentTask;
using jobman::systolic::TrainExit;
using jobman::systolic::TrainingState;
using jobman::systolic::weights_checksum;

ModelConfig small_config(std::uint64_t seed = 3) {
  ModelConfig config;
  config.dim = 8;
  config.batch = 16;
  config.seed = seed;
  return config;
}

TEST(SystolicModel, BatchDependsOnlyOnSeedAndStep) {
  const TeacherStudentTask task(small_config());
  const TeacherStudentTask same(small_config());
  EXPECT_TRUE(task.batch(7).inputs.bitwise_equal(same.batch(7).inputs));
  EXPECT_TRUE(task.batch(7).targets.bitwise_equal(same.batch(7).targets));
  // Drawing other steps first changes nothing: there is no generator state to advance.
  static_cast<void>(same.batch(1));
  static_cast<void>(same.batch(100));
  EXPECT_TRUE(task.batch(7).inputs.bitwise_equal(same.batch(7).inputs));
  EXPECT_FALSE(task.batch(7).inputs.bitwise_equal(task.batch(8).inputs));
  EXPECT_FALSE(task.batch(7).inputs.bitwise_equal(TeacherStudentTask(small_config(4)).batch(7).inputs));
}

TEST(SystolicModel, InputsAreUniformInMinusOneToOne) {
  const TeacherStudentTask task(small_config());
  const Matrix inputs = task.batch(1).inputs;
  for (const float v : inputs.values()) {
    EXPECT_GE(v, -1.0F);
    EXPECT_LT(v, 1.0F);
  }
  const double mean = std::accumulate(inputs.values().begin(), inputs.values().end(), 0.0) /
                      static_cast<double>(inputs.values().size());
  EXPECT_LT(std::abs(mean), 0.2);
}

TEST(SystolicModel, InitialStateDependsOnlyOnTheSeed) {
  const TrainingState a = TeacherStudentTask(small_config()).initial_state();
  const TrainingState b = TeacherStudentTask(small_config()).initial_state();
  EXPECT_EQ(a.step, 0U);
  EXPECT_TRUE(a.weights.bitwise_equal(b.weights));
  EXPECT_FALSE(a.weights.bitwise_equal(TeacherStudentTask(small_config(4)).initial_state().weights));
}

TEST(SystolicModel, EveryProductOfTheForwardAndBackwardPassRunsOnTheArray) {
  const TeacherStudentTask task(small_config());
  TrainingState state = task.initial_state();
  SystolicArray array(4);
  const auto report = task.train_step(state, array);
  ASSERT_TRUE(report.applied);
  // x W1, h W2 (forward); h^T dy, dy W2^T, x^T dz (backward): five products of batch * dim * dim MACs each.
  EXPECT_EQ(report.mxu.macs, 5U * 16 * 8 * 8);
  EXPECT_GT(report.mxu.utilisation(), 0.0);
  EXPECT_LE(report.mxu.utilisation(), 1.0);
  EXPECT_EQ(report.step, 1U);
  EXPECT_EQ(state.step, 1U);
}

TEST(SystolicModel, WeightsDoNotDependOnTheArraySize) {
  const TeacherStudentTask task(small_config());
  std::vector<TrainingState> states;
  for (const std::size_t size : {1, 3, 4, 8, 32}) {
    TrainingState state = task.initial_state();
    SystolicArray array(size);
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(task.train_step(state, array).applied);
    }
    states.push_back(state);
  }
  for (const TrainingState& state : states) {
    EXPECT_TRUE(state.weights.bitwise_equal(states[0].weights));
    EXPECT_TRUE(state.velocity.bitwise_equal(states[0].velocity));
  }
}

TEST(SystolicModel, TrainingLowersTheLoss) {
  const TeacherStudentTask task(small_config());
  TrainingState state = task.initial_state();
  SystolicArray array(8);
  std::vector<double> losses;
  losses.reserve(300);
  for (int i = 0; i < 300; ++i) {
    losses.push_back(task.train_step(state, array).loss);
  }
  const double first = std::accumulate(losses.begin(), losses.begin() + 20, 0.0);
  const double last = std::accumulate(losses.end() - 20, losses.end(), 0.0);
  EXPECT_LT(last, first / 4) << "first 20: " << first << ", last 20: " << last;
}

TEST(SystolicModel, FaultyArrayGivesNanLossAndLeavesTheStateUntouched) {
  const TeacherStudentTask task(small_config());
  TrainingState state = task.initial_state();
  SystolicArray array(4);
  task.train_step(state, array);
  const TrainingState before = state;
  array.set_fault(MxuFault::nan_multiplier);
  const auto report = task.train_step(state, array);
  EXPECT_TRUE(std::isnan(report.loss));
  EXPECT_FALSE(report.applied);
  EXPECT_EQ(report.step, 2U);
  EXPECT_EQ(state.step, 1U);
  EXPECT_TRUE(state.weights.bitwise_equal(before.weights));
  EXPECT_TRUE(state.velocity.bitwise_equal(before.velocity));
  EXPECT_TRUE(state.weights.all_finite());
}

TEST(SystolicModel, ChecksumCoversEveryWeightBitAndNothingElse) {
  TrainingState state = TeacherStudentTask(small_config()).initial_state();
  const auto original = weights_checksum(state.weights);
  state.velocity.w1.at(0, 0) = 1.0F;
  EXPECT_EQ(weights_checksum(state.weights), original);
  state.weights.b2.at(0, 7) = -0.0F; // +0 and -0 differ in their bits.
  EXPECT_NE(weights_checksum(state.weights), original);
}

// Parses `args` with `env` as the environment.
jobman::systolic::ParsedCommandLine parse(std::vector<std::string> args,
                                          const std::map<std::string, std::string>& env = {}) {
  return jobman::test::parse_systolic_command_line(std::move(args), env);
}

TEST(SystolicCommandLine, DefaultsAreTheDocumentedOnes) {
  const auto parsed = parse({});
  ASSERT_TRUE(parsed.options) << parsed.message;
  const auto& o = *parsed.options;
  EXPECT_EQ(o.steps, 1000U);
  EXPECT_EQ(o.model.dim, 32U);
  EXPECT_EQ(o.array, 8U);
  EXPECT_EQ(o.model.batch, 16U);
  EXPECT_EQ(o.model.seed, 1U);
  EXPECT_EQ(o.model.learning_rate, 0.1);
  EXPECT_EQ(o.model.momentum, 0.9);
  EXPECT_TRUE(o.ckpt_dir.empty());
  EXPECT_EQ(o.ckpt_every, 100U);
  EXPECT_EQ(o.keep, 5U);
  EXPECT_EQ(o.step_time_ms, 0U);
  EXPECT_EQ(o.worker_id, 0U);
  EXPECT_FALSE(o.selftest);
  EXPECT_TRUE(o.save_on_stop);
  EXPECT_EQ(o.resume_before, 0U);
  EXPECT_EQ(o.skip_steps, 0U);
}

TEST(SystolicCommandLine, EveryOptionIsRead) {
  const auto parsed = parse({"--steps",        "7",
                             "--dim",          "12",
                             "--array",        "5",
                             "--batch",        "3",
                             "--seed",         "99",
                             "--lr",           "0.25",
                             "--momentum",     "0",
                             "--ckpt-dir",     "/b/ckpt",
                             "--ckpt-every",   "2",
                             "--keep",         "4",
                             "--step-time-ms", "15",
                             "--worker-id",    "6",
                             "--selftest",     "--no-save-on-stop"});
  ASSERT_TRUE(parsed.options) << parsed.message;
  const auto& o = *parsed.options;
  EXPECT_EQ(o.steps, 7U);
  EXPECT_EQ(o.model.dim, 12U);
  EXPECT_EQ(o.array, 5U);
  EXPECT_EQ(o.model.batch, 3U);
  EXPECT_EQ(o.model.seed, 99U);
  EXPECT_EQ(o.model.learning_rate, 0.25);
  EXPECT_EQ(o.model.momentum, 0.0);
  EXPECT_EQ(o.ckpt_dir, "/b/ckpt");
  EXPECT_EQ(o.ckpt_every, 2U);
  EXPECT_EQ(o.keep, 4U);
  EXPECT_EQ(o.step_time_ms, 15U);
  EXPECT_EQ(o.worker_id, 6U);
  EXPECT_TRUE(o.selftest);
  EXPECT_FALSE(o.save_on_stop);
}

TEST(SystolicCommandLine, TheRollbackComesFromTheOptionsThenTheEnvironment) {
  const auto from_environment = parse({}, {{"JOBMAN_RESUME_BEFORE_STEP", "450"}, {"JOBMAN_SKIP_STEPS", "20"}});
  ASSERT_TRUE(from_environment.options) << from_environment.message;
  EXPECT_EQ(from_environment.options->resume_before, 450U);
  EXPECT_EQ(from_environment.options->skip_steps, 20U);
  const auto overridden = parse({"--resume-before-step", "7", "--skip-steps", "4"},
                                {{"JOBMAN_RESUME_BEFORE_STEP", "450"}, {"JOBMAN_SKIP_STEPS", "20"}});
  ASSERT_TRUE(overridden.options) << overridden.message;
  EXPECT_EQ(overridden.options->resume_before, 7U);
  EXPECT_EQ(overridden.options->skip_steps, 4U);
  const auto empty = parse({}, {{"JOBMAN_RESUME_BEFORE_STEP", ""}, {"JOBMAN_SKIP_STEPS", ""}});
  ASSERT_TRUE(empty.options) << empty.message;
  EXPECT_EQ(empty.options->resume_before, 0U);
}

TEST(SystolicCommandLine, MalformedRollbacksAreUsageErrorsNamingTheOptionOrVariable) {
  const std::vector<std::pair<std::string, std::string>> variables = {
      {"JOBMAN_RESUME_BEFORE_STEP", "abc"}, {"JOBMAN_RESUME_BEFORE_STEP", "-1"},
      {"JOBMAN_RESUME_BEFORE_STEP", "0"},   {"JOBMAN_RESUME_BEFORE_STEP", "1.5"},
      {"JOBMAN_RESUME_BEFORE_STEP", " 3"},  {"JOBMAN_SKIP_STEPS", "x"},
      {"JOBMAN_SKIP_STEPS", "-2"},          {"JOBMAN_SKIP_STEPS", "99999999999999999999"},
  };
  for (const auto& [name, value] : variables) {
    std::map<std::string, std::string> env = {{"JOBMAN_RESUME_BEFORE_STEP", "5"}};
    env[name] = value;
    const auto parsed = parse({}, env);
    EXPECT_FALSE(parsed.options) << name << "=" << value;
    EXPECT_EQ(parsed.exit, TrainExit::usage) << name << "=" << value;
    EXPECT_NE(parsed.message.find(name + " must be "), std::string::npos) << parsed.message;
    EXPECT_NE(parsed.message.find("'" + value + "'"), std::string::npos) << parsed.message;
  }
  const std::vector<std::vector<std::string>> options = {
      {"--resume-before-step", "0"}, {"--resume-before-step", "-4"}, {"--skip-steps", "-1"}, {"--skip-steps", "1e3"}};
  for (const auto& args : options) {
    const auto parsed = parse(args);
    EXPECT_EQ(parsed.exit, TrainExit::usage) << args[0] << " " << args[1];
    EXPECT_NE(parsed.message.find(args[0]), std::string::npos) << parsed.message;
  }
}

TEST(SystolicCommandLine, WorkerIdComesFromTheOptionThenTheEnvironment) {
  EXPECT_EQ(parse({}, {{"JOBMAN_WORKER_ID", "3"}}).options->worker_id, 3U);
  EXPECT_EQ(parse({"--worker-id", "0"}, {{"JOBMAN_WORKER_ID", "3"}}).options->worker_id, 0U);
  EXPECT_EQ(parse({}, {{"JOBMAN_WORKER_ID", ""}}).options->worker_id, 0U);
}

TEST(SystolicCommandLine, MalformedWorkerIdInTheEnvironmentIsAUsageError) {
  const auto parsed = parse({}, {{"JOBMAN_WORKER_ID", "two"}});
  EXPECT_FALSE(parsed.options);
  EXPECT_EQ(parsed.exit, TrainExit::usage);
  EXPECT_NE(parsed.message.find("JOBMAN_WORKER_ID"), std::string::npos) << parsed.message;
}

TEST(SystolicCommandLine, BadValuesAreUsageErrorsNamingTheOption) {
  const std::vector<std::vector<std::string>> cases = {
      {"--steps", "-1"},    {"--steps", "ten"},     {"--dim", "0"},        {"--dim", "5000"}, {"--array", "0"},
      {"--batch", "0"},     {"--seed", "-3"},       {"--lr", "0"},         {"--lr", "nan"},   {"--lr", "inf"},
      {"--momentum", "1"},  {"--momentum", "-0.5"}, {"--ckpt-every", "0"}, {"--keep", "0"},   {"--step-time-ms", "-1"},
      {"--worker-id", "x"}, {"--array", "2.5"},     {"--steps", ""},
  };
  for (const auto& args : cases) {
    const auto parsed = parse(args);
    EXPECT_FALSE(parsed.options) << args[0] << " " << args[1];
    EXPECT_EQ(parsed.exit, TrainExit::usage) << args[0] << " " << args[1];
    EXPECT_NE(parsed.message.find(args[0]), std::string::npos) << parsed.message;
  }
}

TEST(SystolicCommandLine, UnknownOptionsAndStrayArgumentsAreUsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--stepz", "3"}, {"train"}, {"--steps"}}) {
    const auto parsed = parse(args);
    EXPECT_EQ(parsed.exit, TrainExit::usage) << args[0];
    EXPECT_NE(parsed.message.find(args[0]), std::string::npos) << parsed.message;
  }
}

TEST(SystolicCommandLine, HelpDescribesTheOptionsAndSucceeds) {
  const auto parsed = parse({"--help"});
  EXPECT_FALSE(parsed.options);
  EXPECT_EQ(parsed.exit, TrainExit::ok);
  for (const char* option :
       {"--steps", "--ckpt-dir", "--ckpt-every", "--dim", "--array", "--batch", "--seed", "--step-time-ms", "--lr",
        "--keep", "--worker-id", "MOCK_TPU_FAULT_FILE", "--selftest", "selftest passed: ", "selftest failed: "}) {
    EXPECT_NE(parsed.message.find(option), std::string::npos) << option;
  }
  for (const char* rollback : {"--resume-before-step", "--skip-steps", "JOBMAN_RESUME_BEFORE_STEP", "JOBMAN_SKIP_STEPS",
                               "rolled-back/", "MOCK_TPU_LOSS_SPIKE_FILE", "MOCK_TPU_HANG_FILE"}) {
    EXPECT_NE(parsed.message.find(rollback), std::string::npos) << rollback;
  }
}

} // namespace systolic_model_test
