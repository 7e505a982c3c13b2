// Multislice systolic-train: the exact sums that make any split of a batch give the same bits, and real processes
// on 127.0.0.1 (one per host of every slice) that all-reduce through the coordinator to the single-process
// checksum, resume, refuse a foreign peer, honour the emulated DCN latency and end when a peer is lost.
#include "mock_cloud/host_sshd.hpp"
#include "support/line_process.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"
#include "systolic/exact_sum.hpp"
#include "systolic/model.hpp"
#include "systolic/train.hpp"
#include "systolic_command_line.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <gtest/gtest.h>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace systolic_multislice_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using jobman::systolic::batch_share;
using jobman::systolic::ExampleRange;
using jobman::systolic::FloatSum;
using jobman::systolic::GradientSums;
using jobman::systolic::ModelConfig;
using jobman::systolic::SquareSum;
using jobman::systolic::SystolicArray;
using jobman::systolic::TeacherStudentTask;
using jobman::systolic::TrainExit;
using jobman::systolic::TrainingState;

// Bounds every wait on a child; nothing is asserted about how long things take below it.
constexpr auto kPatience = std::chrono::seconds(60);

// ---- Exact sums ----

TEST(SystolicExactSum, AnyOrderAndGroupingGivesTheSameBits) {
  std::mt19937_64 rng(7);
  std::vector<float> terms;
  // Magnitudes from subnormal to near the largest float, of both signs, so that float addition would round
  // differently in every order.
  for (int i = 0; i < 400; ++i) {
    const float mantissa = std::uniform_real_distribution<float>(-1, 1)(rng);
    const int exponent = std::uniform_int_distribution<int>(-150, 120)(rng);
    terms.push_back(std::ldexp(mantissa, exponent));
  }
  FloatSum whole;
  for (const float term : terms) {
    whole.add(term);
  }
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(terms.begin(), terms.end(), rng);
    const auto cut = std::uniform_int_distribution<std::size_t>(0, terms.size())(rng);
    FloatSum first;
    FloatSum second;
    for (std::size_t i = 0; i < terms.size(); ++i) {
      (i < cut ? first : second).add(terms[i]);
    }
    second += first;
    EXPECT_EQ(second, whole) << "trial " << trial;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(second.to_float()), std::bit_cast<std::uint32_t>(whole.to_float()));
  }
}

TEST(SystolicExactSum, RoundsOnceAndCorrectly) {
  const auto sum = [](std::initializer_list<double> terms) {
    FloatSum s;
    for (const double t : terms) {
      s.add(t);
    }
    return s;
  };
  // Float addition loses the small term in the first step; the exact sum does not.
  EXPECT_EQ(sum({1e30, 1.0, -1e30}).to_float(), 1.0F);
  EXPECT_EQ(sum({0x1p-149, 0x1p-149}).to_float(), 0x1p-148F);
  // Ties go to even: 1 + 2^-24 is halfway between 1 and 1 + 2^-23.
  EXPECT_EQ(sum({1.0, 0x1p-24}).to_float(), 1.0F);
  EXPECT_EQ(sum({1.0, 0x1p-24, 0x1p-149}).to_float(), 1.0F + 0x1p-23F) << "a sticky bit breaks the tie";
  EXPECT_EQ(sum({1.0 + 0x1p-23, 0x1p-24}).to_float(), 1.0F + 0x1p-22F);
  EXPECT_EQ(sum({-3.0, 0.5}).to_float(), -2.5F);
  EXPECT_EQ(sum({}).to_float(), 0.0F);
  EXPECT_EQ(sum({std::numeric_limits<float>::max(), std::numeric_limits<float>::max()}).to_float(),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(sum({1.0, std::nan("")}).to_float()));
  EXPECT_TRUE(std::isnan(sum({INFINITY, -INFINITY}).to_float()));
  EXPECT_EQ(sum({-INFINITY, 5.0}).to_float(), -INFINITY);
  EXPECT_THROW(sum({0x1p-150}), std::domain_error) << "finer than the unit";

  SquareSum squares;
  squares.add(0.1 * 0.1);
  squares.add(1e-40);
  EXPECT_EQ(squares.to_double(), 0.1 * 0.1 + 1e-40);
}

TEST(SystolicExactSum, EncodingRoundTripsAndRefusesGarbage) {
  FloatSum sum;
  sum.add(-1.25);
  sum.add(0x1p100);
  sum.add(INFINITY);
  std::string bytes;
  sum.encode(bytes);
  ASSERT_EQ(bytes.size(), FloatSum::kEncodedSize);
  FloatSum back;
  ASSERT_TRUE(back.decode(bytes));
  EXPECT_EQ(back, sum);
  EXPECT_FALSE(back.decode(bytes.substr(1)));
  bytes.back() = '\x40';
  EXPECT_FALSE(back.decode(bytes));
}

// ---- Partition invariance of a training step ----

ModelConfig small_config(std::uint32_t batch) {
  ModelConfig config;
  config.dim = 6;
  config.batch = batch;
  config.seed = 11;
  return config;
}

TEST(SystolicMultisliceModel, SharesCoverTheBatchInOrderAndDifferByOneAtMost) {
  for (std::uint32_t batch : {1U, 6U, 7U, 12U, 100U}) {
    for (std::uint32_t slices = 1; slices <= 9; ++slices) {
      std::uint32_t next = 0;
      for (std::uint32_t s = 0; s < slices; ++s) {
        const ExampleRange share = batch_share(batch, s, slices);
        EXPECT_EQ(share.begin, next);
        EXPECT_LE(share.size(), batch / slices + 1);
        EXPECT_GE(share.size(), batch / slices);
        next = share.end;
      }
      EXPECT_EQ(next, batch);
    }
  }
}

// The central property: whatever the partition of the batch and whatever the order in which the shares' sums are
// added, a step computes the same bits as the whole batch in one process.
TEST(SystolicMultisliceModel, EveryPartitionOfTheBatchGivesTheSameStep) {
  const std::uint32_t batch = 12;
  const TeacherStudentTask task(small_config(batch));
  SystolicArray array(4);
  TrainingState start = task.initial_state();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(task.train_step(start, array).applied);
  }
  TrainingState whole = start;
  ASSERT_TRUE(task.train_step(whole, array).applied);
  const auto reference = task.partial_step(start, array, {0, batch}).sums;

  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    // Random cut points, including empty shares.
    const auto count = std::uniform_int_distribution<std::uint32_t>(1, 6)(rng);
    std::vector<std::uint32_t> cuts{0, batch};
    for (std::uint32_t i = 1; i < count; ++i) {
      cuts.push_back(std::uniform_int_distribution<std::uint32_t>(0, batch)(rng));
    }
    std::sort(cuts.begin(), cuts.end());
    std::vector<GradientSums> shares;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      shares.push_back(task.partial_step(start, array, {cuts[i], cuts[i + 1]}).sums);
    }
    std::shuffle(shares.begin(), shares.end(), rng);
    GradientSums total = GradientSums::zeros(6);
    for (const auto& share : shares) {
      total += share;
    }
    ASSERT_EQ(total, reference) << "trial " << trial;
    TrainingState state = start;
    ASSERT_TRUE(task.apply_step(state, total, {}).applied);
    EXPECT_TRUE(state.weights.bitwise_equal(whole.weights));
    EXPECT_TRUE(state.velocity.bitwise_equal(whole.velocity));
  }
}

TEST(SystolicMultisliceModel, GradientSumsSurviveTheirEncoding) {
  const TeacherStudentTask task(small_config(5));
  SystolicArray array(3);
  const auto sums = task.partial_step(task.initial_state(), array, {1, 4}).sums;
  const auto bytes = sums.encode();
  const auto back = GradientSums::decode(bytes, 6);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, sums);
  EXPECT_FALSE(GradientSums::decode(bytes, 5));
  EXPECT_FALSE(GradientSums::decode(bytes.substr(0, bytes.size() - 1), 6));
}

// ---- The command line ----

jobman::systolic::ParsedCommandLine parse(std::vector<std::string> args,
                                          const std::map<std::string, std::string>& env = {}) {
  return jobman::test::parse_systolic_command_line(std::move(args), env);
}

TEST(SystolicMultisliceCommandLine, TheEnvironmentJobmanSetsDescribesTheRun) {
  const auto parsed = parse({}, {{"JOBMAN_WORKER_ID", "5"},
                                 {"JOBMAN_NUM_WORKERS", "6"},
                                 {"JOBMAN_SLICE_ID", "2"},
                                 {"JOBMAN_NUM_SLICES", "3"},
                                 {"MEGASCALE_NUM_SLICES", "3"},
                                 {"MEGASCALE_SLICE_ID", "2"},
                                 {"MEGASCALE_COORDINATOR_ADDRESS", "127.0.0.9"},
                                 {"MEGASCALE_PORT", "8081"},
                                 {"MOCK_DCN_LATENCY_US", "2000"},
                                 {"MOCK_DCN_BANDWIDTH_BPS", "25000000000"}});
  ASSERT_TRUE(parsed.options) << parsed.message;
  const auto& dcn = parsed.options->multislice;
  EXPECT_EQ(dcn.num_slices, 3U);
  EXPECT_EQ(dcn.slice_id, 2U);
  EXPECT_EQ(dcn.num_workers, 6U);
  EXPECT_EQ(dcn.worker_id, 5U);
  EXPECT_EQ(dcn.hosts_per_slice(), 2U);
  EXPECT_EQ(dcn.coordinator_host, "127.0.0.9");
  EXPECT_EQ(dcn.port, 8081);
  EXPECT_EQ(dcn.latency, std::chrono::microseconds(2000));
  EXPECT_EQ(dcn.bandwidth_bits_per_second, 25'000'000'000U);
  EXPECT_EQ(dcn.timeout, std::chrono::seconds(60));
}

TEST(SystolicMultisliceCommandLine, OptionsOverrideTheEnvironment) {
  const auto parsed =
      parse({"--num-slices", "2", "--slice-id", "1", "--worker-id", "1", "--num-workers", "2", "--coordinator",
             "127.0.0.3:9000", "--dcn-timeout", "1.5", "--dcn-latency-ms", "0.25", "--dcn-bandwidth-gbps", "10"},
            {{"MEGASCALE_NUM_SLICES", "4"},
             {"MEGASCALE_COORDINATOR_ADDRESS", "127.0.0.9"},
             {"MOCK_DCN_LATENCY_US", "7"},
             {"MEGASCALE_PORT", "8081"}});
  ASSERT_TRUE(parsed.options) << parsed.message;
  const auto& dcn = parsed.options->multislice;
  EXPECT_EQ(dcn.num_slices, 2U);
  EXPECT_EQ(dcn.slice_id, 1U);
  EXPECT_EQ(dcn.coordinator_host, "127.0.0.3");
  EXPECT_EQ(dcn.port, 9000) << "the address's own port wins";
  EXPECT_EQ(dcn.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(dcn.latency, std::chrono::microseconds(250));
  EXPECT_EQ(dcn.bandwidth_bits_per_second, 10'000'000'000U);
}

TEST(SystolicMultisliceCommandLine, AnInconsistentLayoutIsAUsageErrorNamingWhatIsWrong) {
  const std::map<std::string, std::string> base = {{"MEGASCALE_NUM_SLICES", "2"},
                                                   {"MEGASCALE_COORDINATOR_ADDRESS", "127.0.0.1"}};
  const auto with = [&](const std::map<std::string, std::string>& changes) {
    auto env = base;
    for (auto& [name, value] : changes) {
      env[name] = value;
    }
    return env;
  };
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {with({{"MEGASCALE_COORDINATOR_ADDRESS", ""}}), "MEGASCALE_COORDINATOR_ADDRESS"},
      {with({{"JOBMAN_NUM_WORKERS", "3"}}), "not a multiple"},
      {with({{"MEGASCALE_SLICE_ID", "2"}}), "--slice-id"},
      {with({{"JOBMAN_WORKER_ID", "1"}, {"MEGASCALE_SLICE_ID", "0"}}), "does not hold"},
      {with({{"JOBMAN_WORKER_ID", "2"}}), "not below"},
      {with({{"MEGASCALE_NUM_SLICES", "two"}}), "MEGASCALE_NUM_SLICES"},
      {with({{"MEGASCALE_COORDINATOR_ADDRESS", "127.0.0.1:x"}}), "ADDRESS:PORT"},
      {with({{"MEGASCALE_PORT", "70000"}}), "MEGASCALE_PORT"},
  };
  for (const auto& [env, expected] : cases) {
    const auto parsed = parse({}, env);
    EXPECT_FALSE(parsed.options) << expected;
    EXPECT_EQ(parsed.exit, TrainExit::usage) << expected;
    EXPECT_NE(parsed.message.find(expected), std::string::npos) << parsed.message;
  }
  // One slice: the multislice variables do not matter.
  EXPECT_TRUE(parse({}, {{"MEGASCALE_NUM_SLICES", "1"}, {"JOBMAN_NUM_WORKERS", "3"}}).options);
  const auto bad_flag = parse({"--dcn-timeout", "0"}, base);
  EXPECT_EQ(bad_flag.exit, TrainExit::usage);
  EXPECT_NE(bad_flag.message.find("--dcn-timeout"), std::string::npos) << bad_flag.message;
}

// ---- Real processes ----

// The arguments of every run below: a small model, so that sanitizer builds are quick.
std::vector<std::string> small_run(std::uint64_t steps, std::uint32_t batch = 12) {
  return {"--steps", std::to_string(steps), "--dim", "10", "--batch", std::to_string(batch), "--array", "4"};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// An environment without the variables systolic-train reads, whatever the test runner has set.
std::map<std::string, std::string> clean_env() {
  std::map<std::string, std::string> env;
  for (const char* name : {"JOBMAN_WORKER_ID", "JOBMAN_NUM_WORKERS", "JOBMAN_SLICE_ID", "JOBMAN_NUM_SLICES",
                           "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS",
                           "MEGASCALE_PORT", "MOCK_DCN_LATENCY_US", "MOCK_DCN_BANDWIDTH_BPS", "MOCK_TPU_FAULT_FILE"}) {
    env[name] = "";
  }
  return env;
}

// The checksum of one process running `args` alone.
std::string single_process_checksum(const std::vector<std::string>& args) {
  std::vector<std::string> argv{JOBMAN_SYSTOLIC_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto result = jobman::test::run_program(argv, {clean_env(), "", ""});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const auto at = result.out.rfind("checksum=");
  return at == std::string::npos ? "" : result.out.substr(at + 9, 16);
}

// Every process of a multislice run on 127.0.0.1, started the way jobman starts them: the global numbering and the
// MEGASCALE_* variables in the environment.
class MultisliceRun {
public:
  MultisliceRun(const fs::path& dir, std::uint32_t slices, std::uint32_t hosts, int port,
                const std::vector<std::string>& args,
                const std::map<std::uint64_t, std::vector<std::string>>& extra = {},
                const std::map<std::string, std::string>& env_changes = {})
      : dir_(dir) {
    for (std::uint64_t worker = 0; worker < std::uint64_t{slices} * hosts; ++worker) {
      auto env = clean_env();
      env["JOBMAN_WORKER_ID"] = std::to_string(worker);
      env["JOBMAN_NUM_WORKERS"] = std::to_string(std::uint64_t{slices} * hosts);
      env["JOBMAN_SLICE_ID"] = std::to_string(worker / hosts);
      env["JOBMAN_NUM_SLICES"] = std::to_string(slices);
      env["MEGASCALE_NUM_SLICES"] = std::to_string(slices);
      env["MEGASCALE_SLICE_ID"] = std::to_string(worker / hosts);
      env["MEGASCALE_COORDINATOR_ADDRESS"] = "127.0.0.1";
      env["MEGASCALE_PORT"] = std::to_string(port);
      for (const auto& [name, value] : env_changes) {
        env[name] = value;
      }
      std::vector<std::string> argv{JOBMAN_SYSTOLIC_BINARY};
      argv.insert(argv.end(), args.begin(), args.end());
      if (const auto it = extra.find(worker); it != extra.end()) {
        argv.insert(argv.end(), it->second.begin(), it->second.end());
      }
      processes_.push_back(std::make_unique<jobman::test::LineReadingProcess>(argv, env, stderr_of(worker), kPatience));
    }
  }

  jobman::test::LineReadingProcess& process(std::uint64_t worker) { return *processes_.at(worker); }
  [[nodiscard]] std::size_t size() const { return processes_.size(); }
  [[nodiscard]] fs::path stderr_of(std::uint64_t worker) const {
    return dir_ / ("stderr-" + std::to_string(worker) + ".log");
  }

  // Waits for every process; their exit statuses by worker.
  std::vector<int> finish() {
    std::vector<int> statuses;
    statuses.reserve(processes_.size());
    for (auto& process : processes_) {
      statuses.push_back(process->finish());
    }
    return statuses;
  }

  // The checksum worker `worker` printed, or "".
  std::string checksum(std::uint64_t worker) {
    for (const auto& line : process(worker).lines()) {
      if (line.starts_with("checksum=")) {
        return line.substr(9);
      }
    }
    return "";
  }

  // Every stderr, for failure messages.
  std::string errors() const {
    std::string text;
    for (std::size_t worker = 0; worker < processes_.size(); ++worker) {
      text += "--- worker " + std::to_string(worker) + ":\n" + read_text(stderr_of(worker));
    }
    return text;
  }

private:
  fs::path dir_;
  std::vector<std::unique_ptr<jobman::test::LineReadingProcess>> processes_;
};

// The line of `lines` that starts with `prefix`, or "".
std::string line_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  const auto it = std::find_if(lines.begin(), lines.end(), [&](const auto& line) { return line.starts_with(prefix); });
  return it == lines.end() ? "" : *it;
}

// Runs `slices` x `hosts` processes to the end and expects every one to print the single-process checksum.
void expect_single_process_checksum(std::uint32_t slices, std::uint32_t hosts, std::uint32_t batch) {
  jobman::test::TempDir dir;
  const auto args = small_run(25, batch);
  const std::string reference = single_process_checksum(args);
  ASSERT_EQ(reference.size(), 16U);
  MultisliceRun run(dir.path(), slices, hosts, jobman::mock::host_sshd::free_port(), args);
  const auto statuses = run.finish();
  for (std::size_t worker = 0; worker < run.size(); ++worker) {
    EXPECT_EQ(statuses[worker], 0) << "worker " << worker << "\n" << run.errors();
    EXPECT_EQ(run.checksum(worker), reference) << "worker " << worker;
    const auto& lines = run.process(worker).lines();
    EXPECT_EQ(line_starting(lines, "multislice: slice " + std::to_string(worker / hosts) + " of " +
                                       std::to_string(slices) + ", worker " + std::to_string(worker))
                  .empty(),
              false)
        << lines.front();
    const auto step = line_starting(lines, "step=25 ");
    EXPECT_NE(step.find(" dcn_ms="), std::string::npos) << step;
  }
}

TEST(SystolicMultislice, TwoSlicesOfTwoHostsReachTheSingleProcessChecksum) {
  expect_single_process_checksum(2, 2, 12);
}

TEST(SystolicMultislice, FourSlicesOfOneHostReachTheSingleProcessChecksum) {
  expect_single_process_checksum(4, 1, 12);
}

TEST(SystolicMultislice, ThreeSlicesWithUnevenSharesReachTheSingleProcessChecksum) {
  expect_single_process_checksum(3, 1, 7); // Shares of 2, 2 and 3 examples.
}

// The coordinator stopped by SIGTERM saves the last completed step; the other slice ends with status 3; the run
// started again resumes there on every process and still ends with the single-process checksum.
TEST(SystolicMultislice, ResumedFromACheckpointMidRunReachesTheSingleProcessChecksum) {
  jobman::test::TempDir dir;
  const std::uint64_t steps = 30;
  const std::string reference = single_process_checksum(small_run(steps));
  auto args = small_run(steps);
  args.insert(args.end(), {"--ckpt-dir", (dir / "ckpt").string(), "--ckpt-every", "4", "--step-time-ms", "20"});
  const int port = jobman::mock::host_sshd::free_port();
  {
    MultisliceRun first(dir.path(), 2, 1, port, args);
    ASSERT_TRUE(first.process(0).read_until("step=7 ")) << first.errors();
    first.process(0).send(SIGTERM);
    const auto statuses = first.finish();
    EXPECT_EQ(statuses[0], 143) << first.errors();
    EXPECT_EQ(statuses[1], 3) << first.errors();
    const auto terminated = line_starting(first.process(0).lines(), "terminated at step=");
    ASSERT_FALSE(terminated.empty());
    const auto lost = line_starting(first.process(1).lines(), "error: lost slice 0 (worker 0, the coordinator) ");
    EXPECT_NE(lost.find("stopped by SIGTERM after step="), std::string::npos) << lost;
  }
  MultisliceRun second(dir.path(), 2, 1, port, args);
  const auto statuses = second.finish();
  for (std::uint64_t worker = 0; worker < 2; ++worker) {
    EXPECT_EQ(statuses[worker], 0) << second.errors();
    EXPECT_TRUE(second.process(worker).lines().front().starts_with("resumed from step="))
        << second.process(worker).lines().front();
    EXPECT_EQ(second.checksum(worker), reference);
  }
}

// A process killed outright (its host preempted) closes its connection: every other process ends with status 3 at
// once, long before the timeout, naming the lost process.
TEST(SystolicMultislice, AKilledPeerEndsEveryOtherProcessPromptly) {
  jobman::test::TempDir dir;
  auto args = small_run(100000);
  args.insert(args.end(), {"--step-time-ms", "10", "--dcn-timeout", "120"});
  MultisliceRun run(dir.path(), 2, 2, jobman::mock::host_sshd::free_port(), args);
  ASSERT_TRUE(run.process(3).read_until("step=4 ")) << run.errors();
  const auto killed_at = Clock::now();
  run.process(3).send(SIGKILL);
  const auto statuses = run.finish();
  EXPECT_LT(Clock::now() - killed_at, std::chrono::seconds(60)) << "the others waited for the timeout";
  EXPECT_EQ(statuses[3], 128 + SIGKILL);
  for (std::uint64_t worker = 0; worker < 3; ++worker) {
    EXPECT_EQ(statuses[worker], 3) << "worker " << worker << "\n" << run.errors();
    const auto& lines = run.process(worker).lines();
    ASSERT_FALSE(lines.empty());
    EXPECT_TRUE(lines.back().starts_with("error: lost slice 1 (worker 3) during the reduction of step="))
        << "worker " << worker << ": " << lines.back();
  }
}

// A process that stops answering (here: SIGSTOP) is given up after --dcn-timeout.
TEST(SystolicMultislice, ASilentPeerEndsTheOthersAfterTheTimeout) {
  jobman::test::TempDir dir;
  auto args = small_run(100000);
  args.insert(args.end(), {"--step-time-ms", "10", "--dcn-timeout", "1"});
  MultisliceRun run(dir.path(), 2, 1, jobman::mock::host_sshd::free_port(), args);
  ASSERT_TRUE(run.process(1).read_until("step=3 ")) << run.errors();
  run.process(1).send(SIGSTOP);
  EXPECT_EQ(run.process(0).finish(), 3) << run.errors();
  const auto& lines = run.process(0).lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(lines.back().starts_with("error: lost slice 1 (worker 1) during the reduction of step=")) << lines.back();
  EXPECT_NE(lines.back().find("no partial within the 1 s --dcn-timeout"), std::string::npos) << lines.back();
  run.process(1).send(SIGKILL);
  EXPECT_EQ(run.process(1).finish(), 128 + SIGKILL);
}

// SIGTERM ends a wait on the network at once: the coordinator waiting for a slice that never joins, and a process
// waiting for a result from a coordinator that does not answer.
TEST(SystolicMultislice, SigtermDuringANetworkWaitIsHonoured) {
  jobman::test::TempDir dir;
  const int port = jobman::mock::host_sshd::free_port();
  {
    auto env = clean_env();
    env.insert_or_assign("MEGASCALE_NUM_SLICES", "2");
    env.insert_or_assign("MEGASCALE_COORDINATOR_ADDRESS", "127.0.0.1");
    env.insert_or_assign("MEGASCALE_PORT", std::to_string(port));
    std::vector<std::string> argv{JOBMAN_SYSTOLIC_BINARY};
    const auto args = small_run(10);
    argv.insert(argv.end(), args.begin(), args.end());
    jobman::test::LineReadingProcess alone(argv, env, dir / "alone.log", kPatience);
    ASSERT_TRUE(alone.read_until("multislice: "));
    alone.send(SIGTERM);
    EXPECT_EQ(alone.finish(), 143) << read_text(dir / "alone.log");
    EXPECT_EQ(alone.lines().back(), "terminated at step=0 by SIGTERM");
  }
  auto args = small_run(100000);
  args.insert(args.end(), {"--step-time-ms", "10", "--ckpt-dir", (dir / "ckpt").string(), "--ckpt-every", "1000"});
  MultisliceRun run(dir.path(), 2, 1, port, args);
  ASSERT_TRUE(run.process(1).read_until("step=3 ")) << run.errors();
  run.process(0).send(SIGSTOP);
  run.process(1).send(SIGTERM);
  EXPECT_EQ(run.process(1).finish(), 143) << run.errors();
  EXPECT_TRUE(run.process(1).lines().back().starts_with("terminated at step=")) << run.process(1).lines().back();
  run.process(0).send(SIGKILL);
  run.process(0).finish();
}

// An emulated latency holds back every message between slices: each reduction takes at least that long.
TEST(SystolicMultislice, DcnLatencyShowsInEveryStepsDcnTime) {
  jobman::test::TempDir dir;
  const double latency_ms = 30;
  // One process takes the latency from the environment the mock gives its hosts, the other from the option.
  MultisliceRun run(dir.path(), 2, 1, jobman::mock::host_sshd::free_port(), small_run(6),
                    {{1, {"--dcn-latency-ms", "30"}}}, {{"MOCK_DCN_LATENCY_US", "30000"}});
  const auto statuses = run.finish();
  for (std::uint64_t worker = 0; worker < 2; ++worker) {
    EXPECT_EQ(statuses[worker], 0) << run.errors();
    const auto& lines = run.process(worker).lines();
    EXPECT_NE(line_starting(lines, "multislice: ").find("dcn latency=30.000ms"), std::string::npos);
    int steps = 0;
    for (const auto& line : lines) {
      if (!line.starts_with("step=")) {
        continue;
      }
      ++steps;
      const auto at = line.find(" dcn_ms=");
      ASSERT_NE(at, std::string::npos) << line;
      EXPECT_GE(std::stod(line.substr(at + 8)), latency_ms) << line;
    }
    EXPECT_EQ(steps, 6);
  }
}

// A process whose run differs is refused before step one; so is the whole run.
TEST(SystolicMultislice, APeerWithAnotherModelIsRefused) {
  jobman::test::TempDir dir;
  MultisliceRun run(dir.path(), 2, 1, jobman::mock::host_sshd::free_port(), small_run(5), {{1, {"--seed", "2"}}});
  const auto statuses = run.finish();
  EXPECT_EQ(statuses[0], 2) << run.errors();
  EXPECT_EQ(statuses[1], 2) << run.errors();
  const std::string refusal = "refused slice 1 (worker 1): its run differs: --seed 2 at worker 1, 1 at the coordinator";
  EXPECT_EQ(run.process(0).lines().back(), "error: " + refusal);
  EXPECT_EQ(run.process(1).lines().back(), "error: the coordinator " + refusal);
}

} // namespace systolic_multislice_test
