// `jobman logs`: the real binary reading the worker logs of attempts written by the test, once and with -f.
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/util/system.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace jobman::test {
namespace cli_logs_test {

using domain::Phase;

constexpr const char* kTrain = JOBMAN_TEST_DATA_DIR "/cli/train.yaml"; // v4-32: 4 hosts, all run it.

// The follower's next line, or a note that none came.
std::string next(LineReadingProcess& process) {
  return process.next_line().value_or("<no line within the patience>");
}

class CliLogs : public ::testing::Test {
protected:
  TempDir dir;
  std::map<std::string, std::string> env() const {
    return {{"JOBMAN_HOME", (dir / "home").string()},
            {"XDG_CONFIG_HOME", (dir / "config").string()},
            {"JOBMAN_PROJECT", ""},
            {"JOBMAN_CLOUD", ""},
            {"JOBMAN_ZONE", ""},
            {"JOBMAN_AUTOSTART", "false"}, // No supervisor: the test plays its part.
            {"NO_COLOR", ""},
            {"USER", "alice"}};
  }
  RunResult jm(const std::vector<std::string>& args) const {
    RunOptions options;
    options.env = env();
    return run_jobman(args, options);
  }
  // `jobman create` on train.yaml with `extra` arguments; the job's id.
  std::string create(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"create", kTrain};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto id = r.out.substr(0, r.out.find('\n'));
    // The test plays the supervisor's part, so it holds the job's lease as a supervisor would: `logs` then sees a
    // driven job and starts no supervisor of its own.
    EXPECT_TRUE(open_store().leases().try_acquire(std::stoll(id), "cli-logs-test", 3'600'000, util::now_ms()));
    return id;
  }
  [[nodiscard]] store::JobStore open_store() const { return store::JobStore::open(dir / "home" / "jobman.db"); }
  // Starts attempt `number` of job 1 as the supervisor would record it.
  void begin_attempt(int number) const {
    const auto name = "cli-train-000001-a" + std::to_string(number);
    EXPECT_EQ(open_store().attempts().begin(1, name, name, "us-central2-b").number, number);
  }
  void move_to(Phase phase) const {
    domain::PhaseChange change;
    change.to = phase;
    change.reason = "set by the test";
    ASSERT_TRUE(open_store().jobs().transition(1, std::nullopt, change));
  }
  // Appends `bytes` to `file` in job 1's attempt directory, as the supervisor does.
  void append(int attempt, const std::string& file, const std::string& bytes) const {
    const auto attempt_dir = dir / "home" / "jobs" / "000001" / ("attempt-" + std::to_string(attempt));
    std::filesystem::create_directories(attempt_dir);
    std::ofstream out(attempt_dir / file, std::ios::app | std::ios::binary);
    out << bytes;
  }
  // `jobman logs ARGS...` running in the background, its stderr going to dir/stderr.
  [[nodiscard]] std::unique_ptr<LineReadingProcess> start_logs(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {jobman_binary(), "logs"};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<LineReadingProcess>(argv, env(), dir / "stderr", std::chrono::seconds(20));
  }
  [[nodiscard]] std::string stderr_text() const {
    std::ifstream in(dir / "stderr");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

TEST_F(CliLogs, PrintsWorkerZeroOfTheCurrentAttemptByDefault) {
  ASSERT_EQ(create(), "000001");
  begin_attempt(1);
  append(1, "worker-0.log", "attempt one\n");
  begin_attempt(2);
  move_to(Phase::running);
  append(2, "worker-0.log", "step 1\nstep 2\n");
  append(2, "worker-1.log", "another worker\n");
  append(2, "setup-0.log", "jobman-setup: venv changed\n");
  const auto r = jm({"logs", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "step 1\nstep 2\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(CliLogs, WorkerAllPrefixesEachLineWithItsWorkerAndSkipsMissingLogs) {
  create();
  begin_attempt(1);
  move_to(Phase::running);
  append(1, "worker-0.log", "zero\n");
  append(1, "worker-1.log", "one a\none b\n");
  append(1, "worker-3.log", "three\n");
  const auto all = jm({"logs", "1", "--worker", "all"});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out, "[w0] zero\n[w1] one a\n[w1] one b\n[w3] three\n");
  const auto one = jm({"logs", "1", "--worker", "1"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, "one a\none b\n") << "one worker's lines carry no prefix";
  const auto missing = jm({"logs", "1", "--worker", "2"});
  EXPECT_EQ(missing.exit_code, 0) << missing.err;
  EXPECT_EQ(missing.out, "") << "a worker that wrote nothing yet has no lines";
}

TEST_F(CliLogs, WorkerAllPrefixesTheLinesOfAOneHostJobToo) {
  ASSERT_EQ(create({"--set", "tpu.accelerator=v4-8"}), "000001");
  begin_attempt(1);
  move_to(Phase::running);
  append(1, "worker-0.log", "only host\n");
  const auto all = jm({"logs", "1", "--worker", "all"});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out, "[w0] only host\n");
  EXPECT_EQ(jm({"logs", "1"}).out, "only host\n") << "without --worker all, no prefix";
  EXPECT_EQ(jm({"logs", "1", "--setup", "--worker", "all"}).exit_code, 1) << "no setup log: none yet";
  auto logs = start_logs({"1", "-f", "--worker", "all"});
  EXPECT_EQ(next(*logs), "[w0] only host");
  append(1, "worker-0.log", "more\n");
  EXPECT_EQ(next(*logs), "[w0] more");
  move_to(Phase::succeeded);
  EXPECT_EQ(logs->finish(), 0);
}

TEST_F(CliLogs, AttemptAndSetupChooseTheFiles) {
  create();
  begin_attempt(1);
  append(1, "worker-0.log", "first try\n");
  append(1, "setup-0.log", "== setup 1 ==\n");
  append(1, "setup-1.log", "== setup 1, worker 1 ==\n");
  begin_attempt(2);
  append(2, "worker-0.log", "second try\n");
  append(2, "setup-0.log", "== setup 2 ==\n");
  move_to(Phase::running);
  EXPECT_EQ(jm({"logs", "1", "--attempt", "1"}).out, "first try\n");
  EXPECT_EQ(jm({"logs", "1", "--attempt", "2"}).out, "second try\n");
  EXPECT_EQ(jm({"logs", "1", "--setup"}).out, "== setup 2 ==\n");
  EXPECT_EQ(jm({"logs", "1", "--setup", "--attempt", "1", "--worker", "all"}).out,
            "[w0] == setup 1 ==\n[w1] == setup 1, worker 1 ==\n");
}

TEST_F(CliLogs, AnUnfinishedLastLineWaitsUntilTheJobHasEnded) {
  create();
  begin_attempt(1);
  move_to(Phase::running);
  append(1, "worker-0.log", "complete\nhalf a li");
  EXPECT_EQ(jm({"logs", "1"}).out, "complete\n");
  move_to(Phase::succeeded);
  EXPECT_EQ(jm({"logs", "1"}).out, "complete\nhalf a li\n") << "the job has ended: its last words are whole";
}

TEST_F(CliLogs, ErrorsNameTheProblemWithTheirExitCodes) {
  const auto none = jm({"logs", "7"});
  EXPECT_EQ(none.exit_code, 3) << none.err;
  EXPECT_NE(none.err.find("no job 000007"), std::string::npos) << none.err;

  create();
  const auto pending = jm({"logs", "1"});
  EXPECT_EQ(pending.exit_code, 1);
  EXPECT_NE(pending.err.find("job 000001 has not started (PENDING)"), std::string::npos) << pending.err;

  begin_attempt(1);
  begin_attempt(2);
  for (const std::string bad : {"0", "3"}) {
    const auto r = jm({"logs", "1", "--attempt", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--attempt " + bad + ": job 000001 has attempts 1 to 2"), std::string::npos) << r.err;
  }
  for (const std::string bad : {"4", "two"}) {
    const auto r = jm({"logs", "1", "--worker", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--worker " + bad + ": job 000001 has workers 0 to 3"), std::string::npos) << r.err;
  }

  ASSERT_EQ(create({"--set", "command.workers=[0, 1]"}), "000002");
  open_store().attempts().begin(2, "a", "a", "us-central2-b");
  const auto idle = jm({"logs", "2", "--worker", "3"});
  EXPECT_EQ(idle.exit_code, 2);
  EXPECT_NE(idle.err.find("worker 3 of job 000002 does not run the command (command.workers: 0, 1)"), std::string::npos)
      << idle.err;
  const auto setup = jm({"logs", "2", "--worker", "3", "--setup"});
  EXPECT_EQ(setup.exit_code, 1) << "every worker runs the setup: not a usage error, but none has begun";
  EXPECT_NE(setup.err.find("job 000002 has no setup logs yet"), std::string::npos) << setup.err;
}

TEST_F(CliLogs, AJobWhoseCommandHasNotBegunHasNoLogsYetAndSaysWhyWithExitCode1) {
  create();
  begin_attempt(1);
  move_to(Phase::queued);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"logs", "1"}, {"logs", "1", "--worker", "all"}, {"logs", "1", "--attempt", "1"}}) {
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, 1) << args.back();
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("job 000001 has no logs yet: it is QUEUED, its slice is queued, waiting for capacity; "
                         "`jobman logs 000001 -f` waits for them"),
              std::string::npos)
        << r.err;
  }

  // The setup began: its logs are there, the command's are not yet.
  move_to(Phase::setup);
  append(1, "setup-0.log", "== setup ==\n");
  EXPECT_EQ(jm({"logs", "1", "--setup"}).out, "== setup ==\n");
  const auto setting_up = jm({"logs", "1"});
  EXPECT_EQ(setting_up.exit_code, 1);
  EXPECT_NE(setting_up.err.find("job 000001 has no logs yet: it is SETUP, its workers are being set up"),
            std::string::npos)
      << setting_up.err;

  // Following such a job waits for its logs.
  auto logs = start_logs({"1", "-f"});
  ASSERT_TRUE(eventually([&] { return stderr_text().find("waiting for them") != std::string::npos; })) << stderr_text();
  EXPECT_EQ(stderr_text(), "jobman: job 000001 has no logs yet (SETUP); waiting for them\n");
  move_to(Phase::running);
  append(1, "worker-0.log", "launched\n");
  EXPECT_EQ(next(*logs), "launched");
  logs->send(SIGINT);
  EXPECT_EQ(logs->finish(), 130);

  // An attempt over before its command began, and a job that ended so, have no logs and never will.
  begin_attempt(2);
  move_to(Phase::failed);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"logs", "1"}, {"logs", "1", "-f"}}) {
    const auto r = jm(args);
    EXPECT_EQ(r.exit_code, 1) << args.back();
    EXPECT_NE(r.err.find("job 000001 has no logs: it ended FAILED before its command began"), std::string::npos)
        << r.err;
  }
  EXPECT_EQ(jm({"logs", "1", "--attempt", "1"}).out, "launched\n");
}

TEST_F(CliLogs, ACommandThatBeganButWroteNothingHasAnEmptyLogAndExitCode0) {
  create();
  begin_attempt(1);
  move_to(Phase::running);
  append(1, "worker-0.log", "");
  const auto r = jm({"logs", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

TEST_F(CliLogs, FollowPrintsLinesAsTheyArriveWholeAndInOrderAndEndsWithTheJob) {
  create();
  begin_attempt(1);
  move_to(Phase::running);
  append(1, "worker-0.log", "first\n");
  auto logs = start_logs({"1", "-f", "--worker", "all"});
  EXPECT_EQ(next(*logs), "[w0] first");
  append(1, "worker-0.log", "second\n");
  EXPECT_EQ(next(*logs), "[w0] second");
  append(1, "worker-2.log", "a log that appeared later\n");
  EXPECT_EQ(next(*logs), "[w2] a log that appeared later");

  // Half a line on worker 0, then two whole lines on worker 1, each awaited: the follower has read worker 0's log
  // after the half line was there before it printed the second (it reads the workers in order), so a half line let
  // through would show up glued to the front of "[w1] sync 2".
  append(1, "worker-0.log", "par");
  append(1, "worker-1.log", "sync 1\n");
  EXPECT_EQ(next(*logs), "[w1] sync 1");
  append(1, "worker-1.log", "sync 2\n");
  EXPECT_EQ(next(*logs), "[w1] sync 2");
  append(1, "worker-0.log", "tial\nthird\n");
  EXPECT_EQ(next(*logs), "[w0] partial");
  EXPECT_EQ(next(*logs), "[w0] third");

  move_to(Phase::succeeded);
  EXPECT_EQ(logs->finish(), 0) << "-f ends by itself once the job has ended; stderr: " << stderr_text();
  EXPECT_EQ(logs->lines().size(), 7U) << "nothing more after the job ended";
  EXPECT_EQ(stderr_text(), "");
}

TEST_F(CliLogs, FollowFinishesTheOldAttemptAndCarriesOnWithTheNewOne) {
  create();
  begin_attempt(1);
  move_to(Phase::running);
  append(1, "worker-0.log", "attempt 1 line\nattempt 1 last words");
  auto logs = start_logs({"1", "-f"});
  EXPECT_EQ(next(*logs), "attempt 1 line");
  begin_attempt(2);
  EXPECT_EQ(next(*logs), "attempt 1 last words") << "an attempt that is over is printed to its end";
  append(2, "worker-0.log", "attempt 2 line\n");
  EXPECT_EQ(next(*logs), "attempt 2 line");
  move_to(Phase::succeeded);
  EXPECT_EQ(logs->finish(), 0);
  EXPECT_EQ(logs->lines().size(), 3U);
  EXPECT_EQ(stderr_text(), "jobman: attempt 2 started\n");
}

TEST_F(CliLogs, FollowOfAJobNotStartedYetWaitsForItsFirstAttempt) {
  create();
  auto logs = start_logs({"1", "-f"});
  ASSERT_TRUE(eventually([&] { return stderr_text().find("waiting") != std::string::npos; })) << stderr_text();
  begin_attempt(1);
  append(1, "worker-0.log", "hello\n");
  EXPECT_EQ(next(*logs), "hello");
  move_to(Phase::succeeded);
  EXPECT_EQ(logs->finish(), 0);
  EXPECT_EQ(stderr_text(), "jobman: job 000001 has not started yet (PENDING); waiting for its first attempt\n"
                           "jobman: attempt 1 started\n");
}

TEST_F(CliLogs, FollowOfAFinishedJobPrintsItAllAndEnds) {
  create();
  begin_attempt(1);
  append(1, "worker-0.log", "all\nof it");
  move_to(Phase::failed);
  const auto r = jm({"logs", "1", "-f"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "all\nof it\n");
}

TEST_F(CliLogs, CtrlCEndsFollowingWithExitCode130) {
  create();
  begin_attempt(1);
  move_to(Phase::running);
  append(1, "worker-0.log", "running\n");
  auto logs = start_logs({"1", "-f"});
  EXPECT_EQ(next(*logs), "running");
  logs->send(SIGINT);
  EXPECT_EQ(logs->finish(), 130);
  EXPECT_FALSE(logs->killed_by_signal()) << "jobman answers SIGINT itself, with its exit code for it";
}

} // namespace cli_logs_test
} // namespace jobman::test
