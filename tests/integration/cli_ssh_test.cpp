// `jobman ssh`: the real binary handing itself over to a gcloud stand-in that records how it was called.
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

class CliSsh : public ::testing::Test {
protected:
  TempDir dir;
  void SetUp() override {
    // Records its arguments, one a line, and its parent (jobman's parent when jobman exec'd it), then exits 7.
    const auto script = dir.write("gcloud", "#!/bin/sh\n"
                                            "printf '%s\\n' \"$@\" > '" +
                                                (dir / "args").string() +
                                                "'\n"
                                                "echo \"$PPID\" > '" +
                                                (dir / "parent").string() +
                                                "'\n"
                                                "echo 'gcloud ran'\n"
                                                "exit 7\n");
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    const auto r = jm({"create", kTrain});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  RunResult jm(const std::vector<std::string>& args) const {
    RunOptions options;
    options.env = {{"JOBMAN_HOME", (dir / "home").string()},
                   {"XDG_CONFIG_HOME", (dir / "config").string()},
                   {"JOBMAN_CLOUD", "google"},
                   {"JOBMAN_PROJECT", "p"},
                   {"JOBMAN_ACCESS_TOKEN", "x"},
                   {"JOBMAN_GCLOUD", (dir / "gcloud").string()},
                   {"JOBMAN_ZONE", ""},
                   {"JOBMAN_AUTOSTART", "false"},
                   {"HOME", (dir / "user-home").string()}, // No ~/.ssh/google_compute_engine: jobman makes its key.
                   {"USER", "alice"}};
    return run_jobman(args, options);
  }
  // The --ssh-key-file gcloud is given: jobman's own key, made before gcloud runs.
  [[nodiscard]] std::string key_flag() const {
    return "--ssh-key-file=" + (dir / "home" / "ssh" / "id_ed25519").string();
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
  [[nodiscard]] std::string file(const std::string& name) const {
    std::ifstream in(dir / name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

TEST_F(CliSsh, RunsTheCommandOnTheChosenWorkerAsGcloudAndExitsWithItsCode) {
  start_running();
  const auto r = jm({"ssh", "1", "--worker", "2", "--", "hostname"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(file("args"), "compute\ntpus\ntpu-vm\nssh\ncli-train-000001-a1\n--zone=us-central2-b\n--project=p\n"
                          "--worker=2\n" +
                              key_flag() + "\n--quiet\n--command=hostname\n");
  EXPECT_EQ(file("parent"), std::to_string(::getpid()) + "\n") << "jobman replaced itself with gcloud";
  EXPECT_EQ(r.out, "gcloud ran\n");

  const auto words = jm({"ssh", "1", "--", "ls", "-l", "/mnt/a b"});
  EXPECT_EQ(words.exit_code, 7) << words.err;
  EXPECT_NE(file("args").find("\n--worker=0\n" + key_flag() + "\n--quiet\n--command=ls -l /mnt/a b\n"),
            std::string::npos)
      << file("args");
}

TEST_F(CliSsh, WithoutACommandItOpensAShellOnWorkerZero) {
  start_running();
  const auto r = jm({"ssh", "000001"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(file("args"),
            "compute\ntpus\ntpu-vm\nssh\ncli-train-000001-a1\n--zone=us-central2-b\n--project=p\n--worker=0\n" +
                key_flag() + "\n--quiet\n");
}

TEST_F(CliSsh, AJobWithoutASliceOrABadWorkerIsRefusedBeforeGcloudRuns) {
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
  EXPECT_FALSE(std::filesystem::exists(dir / "args")) << "gcloud must not have run";
}

// On the mock cloud: jobman finds the mock's gcloud stand-in and gives it the mock's address itself.
class CliSshOnMock : public MockSliceTest {
protected:
  RunResult jm(const std::vector<std::string>& args, const std::string& input = "") {
    RunOptions options;
    options.env = {{"JOBMAN_HOME", (dir / "home").string()},
                   {"XDG_CONFIG_HOME", (dir / "config").string()},
                   {"JOBMAN_CLOUD", "mock"},
                   {"JOBMAN_PROJECT", "p"},
                   {"JOBMAN_API_ENDPOINT", "http://127.0.0.1:" + std::to_string(slice.server().port()) + "/v2/"},
                   {"JOBMAN_GCLOUD", ""},
                   {"JOBMAN_ZONE", ""},
                   {"JOBMAN_AUTOSTART", "false"},
                   {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU", ""}, // The slice fixture's, which jobman must set itself.
                   {"CLOUDSDK_CONFIG", ""},
                   {"USER", "alice"}};
    options.input = input;
    return run_jobman(args, options);
  }
};

TEST_F(CliSshOnMock, RunsACommandAndAShellOnTheWorker) {
  ASSERT_EQ(jm({"create", kTrain}).exit_code, 0);
  auto store = store::JobStore::open(dir / "home" / "jobman.db");
  store.attempts().begin(1, "slice", "slice-node", "us-central2-b");
  domain::PhaseChange running;
  running.to = Phase::running;
  running.reason = "set by the test";
  ASSERT_TRUE(store.jobs().transition(1, std::nullopt, running));

  const auto command = jm({"ssh", "1", "--worker", "2", "--", "pwd"});
  EXPECT_EQ(command.exit_code, 0) << command.err;
  EXPECT_EQ(command.out, slice.remote_home(2, "alice").string() + "\n");

  const auto shell = jm({"ssh", "1", "--worker", "1"}, "pwd\nexit 3\n");
  EXPECT_EQ(shell.exit_code, 3) << shell.err;
  EXPECT_NE(shell.out.find(slice.remote_home(1, "alice").string()), std::string::npos) << shell.out;
}

} // namespace cli_ssh_test
} // namespace jobman::test
