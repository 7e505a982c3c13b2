// `jobman ssh`: the real binary handing itself over to Debian's ssh, on a mock slice's hosts; and what it refuses
// before it connects anywhere.
#include "jobman/core/jobs.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "support/mock_slice.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

namespace jobman::test {
namespace cli_ssh_test {

using domain::Phase;

constexpr const char* kTrain = JOBMAN_TEST_DATA_DIR "/cli/train.yaml"; // v4-32: 4 hosts.

// A job on Google's cloud (nothing is ever contacted: every command here is refused first).
class CliSsh : public ::testing::Test {
protected:
  TempDir dir;
  void SetUp() override {
    const auto r = jm({"create", kTrain});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  RunResult jm(const std::vector<std::string>& args) const {
    RunOptions options;
    options.env = {{"JOBMAN_HOME", (dir / "home").string()},
                   {"XDG_CONFIG_HOME", (dir / "config").string()},
                   {"JOBMAN_CLOUD", "google"},
                   {"JOBMAN_PROJECT", "p"},
                   // Nothing listens there: create's check of the zone's offers is refused at once, on this machine,
                   // and falls back to the built-in catalog, as it would offline.
                   {"JOBMAN_API_ENDPOINT", "http://127.0.0.1:9/"},
                   {"JOBMAN_ACCESS_TOKEN", "x"},
                   {"JOBMAN_ZONE", ""},
                   {"JOBMAN_AUTOSTART", "false"},
                   {"USER", "alice"}};
    return run_jobman(args, options);
  }
  [[nodiscard]] store::JobStore open_store() const { return store::JobStore::open(dir / "home" / "jobman.db"); }
  void start_running() const {
    open_store().attempts().begin(1, "cli-train-000001-a1", "cli-train-000001-a1", "us-central2-b");
    move_to(Phase::running);
  }
  void move_to(Phase phase) const {
    domain::PhaseChange change;
    change.to = phase;
    change.reason = "set by the test";
    ASSERT_TRUE(open_store().jobs().transition(1, std::nullopt, change));
  }
};

TEST_F(CliSsh, AJobWithoutASliceOrABadWorkerIsRefusedBeforeAnythingRuns) {
  const auto pending = jm({"ssh", "1"});
  EXPECT_EQ(pending.exit_code, 1);
  EXPECT_NE(pending.err.find("job 000001 has no slice: it has not started yet (PENDING)"), std::string::npos)
      << pending.err;

  EXPECT_EQ(jm({"ssh", "2"}).exit_code, 3);

  start_running();
  const auto worker = jm({"ssh", "1", "--worker", "4"});
  EXPECT_EQ(worker.exit_code, 2);
  EXPECT_NE(worker.err.find("--worker 4: job 000001 has workers 0 to 3"), std::string::npos) << worker.err;

  open_store().attempts().mark_released(1, "cli-train-000001-a1", "deleted by the test");
  move_to(Phase::deleted);
  const auto deleted = jm({"ssh", "1"});
  EXPECT_EQ(deleted.exit_code, 1);
  EXPECT_NE(deleted.err.find("job 000001 has no slice: it is DELETED"), std::string::npos) << deleted.err;
}

// On the mock cloud, as alice, with the key the slice's hosts know for her as jobman's own: jobman finds the hosts
// and their keys through the API and execs ssh.
class CliSshOnMock : public MockSliceTest {
protected:
  void SetUp() override {
    MockSliceTest::SetUp();
    std::filesystem::create_directories(dir / "home" / "ssh");
    for (const std::string suffix : {"", ".pub"}) {
      std::filesystem::copy_file(target.ssh_key_file + suffix, (dir / "home" / "ssh" / "id_ed25519").string() + suffix);
    }
    ASSERT_EQ(jm({"create", kTrain}).exit_code, 0);
    auto store = store::JobStore::open(dir / "home" / "jobman.db");
    store.attempts().begin(1, "slice", "slice-node", "us-central2-b");
    domain::PhaseChange running;
    running.to = Phase::running;
    running.reason = "set by the test";
    ASSERT_TRUE(store.jobs().transition(1, std::nullopt, running));
  }

  RunResult jm(const std::vector<std::string>& args, const std::string& input = "") {
    RunOptions options;
    options.env = jobman_env();
    options.input = input;
    return run_jobman(args, options);
  }

  [[nodiscard]] std::map<std::string, std::string> jobman_env() {
    return {{"JOBMAN_HOME", (dir / "home").string()},
            {"XDG_CONFIG_HOME", (dir / "config").string()},
            {"HOME", (dir / "user-home").string()}, // No ~/.ssh/google_compute_engine: jobman's own key.
            {"JOBMAN_CLOUD", "mock"},
            {"JOBMAN_PROJECT", "p"},
            {"JOBMAN_API_ENDPOINT", "http://127.0.0.1:" + std::to_string(slice.server().port()) + "/v2/"},
            {"JOBMAN_ZONE", ""},
            {"JOBMAN_AUTOSTART", "false"},
            {"USER", "alice"}};
  }
};

TEST_F(CliSshOnMock, RunsACommandAndAShellOnTheWorker) {
  const auto command = jm({"ssh", "1", "--worker", "2", "--", "pwd;", "hostname"});
  EXPECT_EQ(command.exit_code, 0) << command.err;
  EXPECT_EQ(command.out.substr(0, command.out.find('\n') + 1), slice.remote_home(2, "alice").string() + "\n");
  EXPECT_EQ(command.out.substr(command.out.size() - 5), "-w-2\n") << command.out;
  EXPECT_EQ(jm({"ssh", "1", "--", "exit", "7"}).exit_code, 7) << "the command's exit code is jobman's";

  const auto shell = jm({"ssh", "1", "--worker", "1"}, "pwd\nexit 3\n");
  EXPECT_EQ(shell.exit_code, 3) << shell.err;
  EXPECT_NE(shell.out.find(slice.remote_home(1, "alice").string()), std::string::npos) << shell.out;
}

TEST_F(CliSshOnMock, TheSessionHasTheWorkersVariablesOnceItsCommandWasLaunched) {
  const auto variables = "echo \"[$JOBMAN_WORKER_ID/$JOBMAN_NUM_WORKERS $JOBMAN_ATTEMPT $MY_SETTING]\"";
  EXPECT_EQ(jm({"ssh", "1", "--worker", "2", "--", variables}).out, "[/  ]\n") << "nothing launched there yet";
  // The attempt's command, launched on every worker as the supervisor launches it.
  remote::LaunchSpec spec;
  spec.id = core::workload_id(1, 1);
  spec.command = "true";
  spec.num_workers = 4;
  spec.tpu_name = "slice-node";
  spec.zone = "us-central2-b";
  spec.accelerator = "v4-32";
  spec.extra_env = {{"MY_SETTING", "a value with 'quotes' and $dollars"}};
  auto as_alice = target;
  as_alice.user = "alice";
  for (const auto& worker : remote::launch(as_alice, {0, 1, 2, 3}, spec, std::chrono::seconds(60))) {
    ASSERT_NE(worker.state, remote::WorkloadState::unreachable) << worker.diagnostic;
  }
  EXPECT_EQ(jm({"ssh", "1", "--worker", "2", "--", variables}).out, "[2/4 1 a value with 'quotes' and $dollars]\n");
  const auto shell = jm({"ssh", "1", "--worker", "3"}, std::string(variables) + "\n");
  EXPECT_EQ(shell.out, "[3/4 1 a value with 'quotes' and $dollars]\n") << shell.err;
}

TEST_F(CliSshOnMock, InATerminalTheShellHasOneOnTheWorkerToo) {
  // jobman in a pseudo-terminal of its own (script(1)), as a person runs it: the worker's shell gets a terminal too.
  std::string line;
  for (const auto& [name, value] : jobman_env()) {
    line += name + "=" + remote::shell_quote(value) + " ";
  }
  line += remote::shell_quote(jobman_binary()) + " ssh 1 --worker 1";
  RunOptions options;
  options.input = "tty; test -t 0 && echo interactive; exit 4\n";
  const auto session = run_program({"script", "-q", "-e", "-c", "env " + line, "/dev/null"}, options);
  EXPECT_EQ(session.exit_code, 4) << session.out << session.err;
  EXPECT_NE(session.out.find("/dev/pts/"), std::string::npos) << session.out;
  EXPECT_NE(session.out.find("interactive"), std::string::npos) << session.out;
}

} // namespace cli_ssh_test
} // namespace jobman::test
