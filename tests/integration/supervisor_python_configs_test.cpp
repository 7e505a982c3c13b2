// The configs written for the Python jobman (configs/examples/python-jobman/), each copied unchanged and run with
// `jobman create --wait` against a private mock cloud, as a researcher would run it: with the ssh keys it names in
// ~/.ssh and the files it names under assets/ beside it. Each must get through setup on every selected worker and
// launch, and the job must end with the command's own exit status (the workers have no network, so a `git clone`
// fails there, and that failure is the command's, not jobman's).
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>

namespace jobman::test {
namespace supervisor_python_configs_test {

namespace fs = std::filesystem;
using domain::Phase;

// The zones and pools the four configs name, with room for each slice (v4-128: 64 chips), one-second delays.
const std::string kWorld = test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 64}\n"
                                         "  us-east1-d:\n    v6e:\n      spot: {chips: 8}\n");

// A researcher's machine on its own mock cloud: HOME with the ssh keys the configs name, a jobman home, a daemon.
class SupervisorPythonConfigsTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    env = mock_home_environment(*mock, dir / "jobman", dir / "config");
    env["HOME"] = user_home.string();
    env["XDG_DATA_HOME"] = (dir / "data").string();
    // The keys the configs name (~/.ssh/id_rsa, ~/.ssh/id_ed25519_github), made by ssh-keygen: jobman connects to
    // the workers with ssh.private_key, and copies it there.
    fs::create_directories(user_home / ".ssh");
    for (const std::string key : {"id_rsa", "id_ed25519_github"}) {
      const auto made = run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "researcher@laptop", "-f",
                                     (user_home / ".ssh" / key).string()});
      ASSERT_EQ(made.exit_code, 0) << made.err;
    }
    daemon = std::make_unique<LineReadingProcess>(
        std::vector<std::string>{jobman_binary(), "daemon", "--tick", "50ms", "--lease-ttl", "2s"}, env,
        dir / "daemon.log");
  }

  void TearDown() override {
    daemon.reset();
    kill_processes_of(dir / "jobman");
  }

  // Copies configs/examples/python-jobman/NAME, byte for byte, into the researcher's directory.
  fs::path copy_config(const std::string& name) {
    const auto to = dir / "research" / name;
    fs::create_directories(to.parent_path());
    fs::copy_file(fs::path(JOBMAN_SOURCE_DIR) / "configs" / "examples" / "python-jobman" / name, to);
    return to;
  }

  // A file beside the config (assets/...), which the Python jobman also sends to the workers.
  void asset(const std::string& name, const std::string& text) { dir.write("research/assets/" + name, text); }

  // How far a job got.
  struct Outcome {
    int create_exit = -1;               // `jobman create --wait`'s exit status.
    std::string create_output;          // Its stdout and stderr.
    domain::JobRecord job;              // The job as it ended.
    fs::path attempt_dir;               // $JOBMAN_HOME/jobs/<id>/attempt-1.
    std::string log(int worker) const { // The command's output on a worker.
      return file_text(attempt_dir / ("worker-" + std::to_string(worker) + ".log"));
    }
    std::string setup_log(int worker) const { // Setup's output on a worker.
      return file_text(attempt_dir / ("setup-" + std::to_string(worker) + ".log"));
    }
  };

  Outcome run(const fs::path& config) {
    Outcome outcome;
    const auto created = run_jobman({"create", config.string(), "--wait"}, RunOptions{env, "", ""});
    outcome.create_exit = created.exit_code;
    outcome.create_output = created.out + created.err;
    const auto id = std::stoll(created.out.substr(0, created.out.find(':')));
    auto store = store::JobStore::open(dir / "jobman" / "jobman.db");
    outcome.job = store.jobs().get(id);
    outcome.attempt_dir = dir / "jobman" / "jobs" / domain::format_job_id(id) / "attempt-1";
    return outcome;
  }

  // Setup got through every module on each of `workers`, and the command was launched there.
  static void expect_set_up_and_launched(const Outcome& outcome, const std::vector<int>& workers) {
    for (int w : workers) {
      EXPECT_NE(outcome.setup_log(w).find("== setup done =="), std::string::npos)
          << "worker " << w << ":\n"
          << outcome.setup_log(w) << outcome.create_output;
      EXPECT_TRUE(fs::exists(outcome.attempt_dir / ("worker-" + std::to_string(w) + ".log"))) << "worker " << w;
    }
    EXPECT_EQ(outcome.job.attempt, 1) << outcome.job.phase_reason;
  }

  // The job succeeded on worker 0, whose `pip show jax` and `pip show flax` found the versions the environment
  // installed.
  static void expect_pip_shows_succeeded(const Outcome& outcome) {
    EXPECT_EQ(outcome.create_exit, 0) << outcome.create_output << outcome.log(0);
    EXPECT_EQ(outcome.job.phase, Phase::succeeded) << outcome.job.phase_reason;
    EXPECT_EQ(outcome.job.exit_code, 0);
    EXPECT_NE(outcome.log(0).find("Name: jax\nVersion: 0.4.30\n"), std::string::npos) << outcome.log(0);
    EXPECT_NE(outcome.log(0).find("Name: flax\nVersion: 0.8.5\n"), std::string::npos) << outcome.log(0);
  }

  TempDir dir;
  fs::path user_home = dir / "user-home";
  std::unique_ptr<MockCloudProcess> mock = start_test_mock(dir, kWorld);
  std::map<std::string, std::string> env;
  std::unique_ptr<LineReadingProcess> daemon;
};

// test_venv.yaml: a venv with Python 3.9 from assets/requirements.txt on a v6e-1; `pip show jax` and `pip show
// flax` find what the requirements installed.
TEST_F(SupervisorPythonConfigsTest, TestVenvRunsItsCommandToSuccess) {
  asset("requirements.txt", "jax==0.4.30\nflax==0.8.5\n");
  const auto outcome = run(copy_config("test_venv.yaml"));
  expect_set_up_and_launched(outcome, {0});
  expect_pip_shows_succeeded(outcome);
}

// quick_start.yaml: a conda environment from assets/fms.yaml on a v6e-1; the command is two `pip show`s.
TEST_F(SupervisorPythonConfigsTest, QuickStartRunsItsCommandToItsOwnResult) {
  asset("fms.yaml", "name: fms\nchannels:\n  - conda-forge\n  - defaults\ndependencies:\n  - python=3.9.23\n"
                    "  - pip=25.1\n  - pip:\n      - flax==0.8.5\n      - jax==0.4.30\n");
  const auto outcome = run(copy_config("quick_start.yaml"));
  expect_set_up_and_launched(outcome, {0});
  expect_pip_shows_succeeded(outcome);
}

// v4-us-central2-b.yaml: a v4-32 as zephyr, two ssh identities, the bucket at /home/zephyr/gcs-bucket, a Python
// 3.10 venv; the command configures gcloud, then clones a repository into /home/zephyr, which fails offline.
TEST_F(SupervisorPythonConfigsTest, V4UsCentral2bGetsToItsGitCloneAndFailsWithItsExitStatus) {
  asset("requirements_maxtext.txt", "absl-py==2.3.1\nflax==0.8.5\njax==0.4.30\njaxlib==0.4.30\nnumpy==1.26.4\n"
                                    "orbax-checkpoint==0.6.4\ntensorstore==0.1.69\n");
  const auto outcome = run(copy_config("v4-us-central2-b.yaml"));
  expect_set_up_and_launched(outcome, {0});
  EXPECT_EQ(outcome.create_exit, 4) << outcome.create_output;
  EXPECT_EQ(outcome.job.phase, Phase::failed) << outcome.job.phase_reason;
  // git's own status: the clone could not reach github.com, and the last command found no repository.
  EXPECT_EQ(outcome.job.exit_code, 128) << outcome.job.phase_reason << "\n" << outcome.log(0);
  EXPECT_NE(outcome.job.phase_reason.find("worker 0 exited 128"), std::string::npos) << outcome.job.phase_reason;
  EXPECT_NE(outcome.log(0).find("Updated property [core/project]."), std::string::npos) << outcome.log(0);
  EXPECT_NE(outcome.log(0).find("Cloning into 'maxtext'"), std::string::npos) << outcome.log(0);
  EXPECT_NE(outcome.log(0).find("fatal: not a git repository"), std::string::npos) << outcome.log(0);
  EXPECT_NE(outcome.setup_log(0).find("mounted gs://llm_pruning_us_central2_b on /home/zephyr/gcs-bucket"),
            std::string::npos)
      << outcome.setup_log(0);
}

// template.yaml: a v4-128 (32 hosts) as zephyr, the command on worker 0 in a container of
// yx3038/maxtext_base_image:latest with /home/zephyr mounted and as its workdir; it clones over ssh, offline.
TEST_F(SupervisorPythonConfigsTest, TemplateGetsToItsGitCloneInDockerAndFailsWithItsExitStatus) {
  const auto outcome = run(copy_config("template.yaml"));
  expect_set_up_and_launched(outcome, {0});
  EXPECT_EQ(outcome.create_exit, 4) << outcome.create_output;
  EXPECT_EQ(outcome.job.phase, Phase::failed) << outcome.job.phase_reason;
  EXPECT_EQ(outcome.job.exit_code, 128) << outcome.job.phase_reason << "\n" << outcome.log(0);
  EXPECT_NE(outcome.log(0).find("Updated property [compute/zone]."), std::string::npos) << outcome.log(0);
  EXPECT_NE(outcome.log(0).find("Cloning into 'maxtext'"), std::string::npos) << outcome.log(0);
  EXPECT_NE(outcome.log(0).find("fatal: not a git repository"), std::string::npos) << outcome.log(0);
  EXPECT_NE(outcome.setup_log(0).find("jobman-setup: docker changed"), std::string::npos) << outcome.setup_log(0);
}

} // namespace supervisor_python_configs_test
} // namespace jobman::test
