// Setting up the workers of a four-host mock slice from a config: ssh identities, the gcsfuse mount and the
// environment, each checked before it acts, so that the second run sends nothing and touches no file; a worker
// that lost part of its setup gets just that part back; a failing module stops the setup with its reason.
#include "jobman/config/loader.hpp"
#include "jobman/remote/setup.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/util/system.hpp"
#include "support/mock_cloud.hpp"
#include "support/mock_slice.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <sys/stat.h>

namespace remote_setup_test {

namespace fs = std::filesystem;
using jobman::remote::ModuleOutcome;
using jobman::test::eventually;

constexpr auto kStep = std::chrono::seconds(120);
const std::vector<int> kAll = {0, 1, 2, 3};

// Every entry under `root` with its type, mode, size and modification and change times: two equal snapshots mean
// nothing was written, created, removed or re-permissioned in between.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    struct stat info {};
    ::lstat(it->path().c_str(), &info);
    out[fs::relative(it->path(), root).string()] =
        std::to_string(info.st_mode) + " " + std::to_string(info.st_size) + " " + std::to_string(info.st_mtim.tv_sec) +
        "." + std::to_string(info.st_mtim.tv_nsec) + " " + std::to_string(info.st_ctim.tv_sec) + "." +
        std::to_string(info.st_ctim.tv_nsec);
  }
  return out;
}

class RemoteSetupTest : public jobman::test::MockSliceTest {
protected:
  void SetUp() override {
    MockSliceTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    fs::create_directories(dir / "state" / "buckets" / "data");
    dir.write("keys/id_lab",
              "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n");
    fs::permissions(dir / "keys/id_lab", fs::perms::owner_read | fs::perms::owner_write);
    dir.write("keys/id_lab.pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests lab@example\n");
  }

  // Loads a config written to dir/job.yaml: `env` is the job's env_type and `sections` the extra sections.
  jobman::config::JobConfig config(const std::string& env, const std::string& sections) {
    dir.write("job.yaml", "job:\n  name: setup-test\n  env_type: " + env +
                              "\ntpu:\n  accelerator: v4-32\n  name: t\n  zone: us-central2-b\n"
                              "  version: tpu-ubuntu2204-base\n"
                              "command:\n  cmd: echo hi\n  workers: all\n" +
                              sections);
    return jobman::config::load_job_configs((dir / "job.yaml").string()).at(0);
  }

  std::string full_sections() {
    dir.write("env.yaml", "name: fms\nchannels: [conda-forge]\ndependencies:\n  - python=3.10\n  - numpy\n");
    return "gcsfuse:\n  bucket_name: data\n  mount_path: ~/gcs-bucket\n"
           "ssh:\n  private_key: " +
           (dir / "keys/id_lab").string() + "\n  identities:\n    - private_key: " + (dir / "keys/id_lab").string() +
           "\n      public_key: " + (dir / "keys/id_lab.pub").string() +
           "\n      config_entry: |\n        Host 10.*\n          IdentityFile ~/.ssh/id_lab\n"
           "          IdentitiesOnly yes\n"
           "conda:\n  name: fms\n  config_file: env.yaml\n";
  }

  std::string run(int worker, const std::string& command) {
    auto runs = jobman::remote::run_on_workers(target, {worker}, command, kStep);
    return runs[0].exit_code == 0 ? runs[0].output
                                  : "exit " + std::to_string(runs[0].exit_code) + ": " + runs[0].output;
  }

  // What Python's sys.prefix is for the job's command on worker 0: the environment it runs in.
  std::string python_prefix(const jobman::config::JobConfig& cfg) {
    jobman::remote::LaunchSpec spec;
    spec.id = {"9", 1};
    spec.command = jobman::remote::environment_command(cfg, "python -c 'import sys; print(sys.prefix)'");
    jobman::remote::launch(target, {0}, spec, kStep);
    jobman::remote::attach(target, {0}, spec.id, attempt_dir);
    return jobman::util::read_file(jobman::remote::worker_log_path(attempt_dir, 0));
  }
};

TEST_F(RemoteSetupTest, TheSecondRunOnAHealthySliceSendsNothingAndTouchesNothing) {
  const auto plan = jobman::remote::plan_setup(config("conda", full_sections()));
  EXPECT_EQ(plan.modules, (std::vector<std::string>{"ssh", "gcsfuse", "conda"}));
  ASSERT_EQ(plan.files.size(), 3U);

  const auto first = jobman::remote::run_setup(target, kAll, plan, attempt_dir, kStep);
  ASSERT_EQ(first.size(), 4U);
  for (const auto& worker : first) {
    ASSERT_TRUE(worker.ok()) << worker.error;
    EXPECT_EQ(worker.uploaded.size(), 3U);
    ASSERT_EQ(worker.modules.size(), 3U);
    for (const auto& module : worker.modules) {
      EXPECT_EQ(module.outcome, ModuleOutcome::changed) << module.module;
    }
  }
  // What the modules did, seen on the workers.
  for (int w : kAll) {
    const auto home = slice.worker_home(w);
    EXPECT_EQ(jobman::util::read_file(home / ".ssh/id_lab"), jobman::util::read_file(dir / "keys/id_lab"));
    EXPECT_EQ(fs::status(home / ".ssh/id_lab").permissions(), fs::perms::owner_read | fs::perms::owner_write);
    EXPECT_EQ(fs::status(home / ".ssh").permissions(), fs::perms::owner_all);
    EXPECT_NE(jobman::util::read_file(home / ".ssh/config").find("Host 10.*\n  IdentityFile ~/.ssh/id_lab"),
              std::string::npos);
    EXPECT_EQ(jobman::util::read_file(home / ".ssh/authorized_keys"), jobman::util::read_file(dir / "keys/id_lab.pub"));
  }
  EXPECT_EQ(run(2, "echo from-2 > ~/gcs-bucket/note && conda env list | grep -c '^fms '"), "1\n");
  EXPECT_EQ(jobman::util::read_file(dir / "state/buckets/data/note"), "from-2\n") << "the mount is the bucket";

  std::map<int, std::map<std::string, std::string>> before;
  for (int w : kAll) {
    before[w] = snapshot(slice.worker_dir(w));
  }
  const auto second = jobman::remote::run_setup(target, kAll, plan, attempt_dir, kStep);
  for (const auto& worker : second) {
    ASSERT_TRUE(worker.ok()) << worker.error;
    EXPECT_FALSE(worker.changed()) << "worker " << worker.worker;
    EXPECT_TRUE(worker.uploaded.empty());
    ASSERT_EQ(worker.modules.size(), 3U);
    for (const auto& module : worker.modules) {
      EXPECT_EQ(module.outcome, ModuleOutcome::unchanged) << module.module;
    }
    EXPECT_EQ(snapshot(slice.worker_dir(worker.worker)), before[worker.worker])
        << "worker " << worker.worker << " was changed by a second setup";
    // Both runs are in the worker's setup log.
    const auto log = jobman::util::read_file(attempt_dir / ("setup-" + std::to_string(worker.worker) + ".log"));
    EXPECT_NE(log.find("jobman-setup: conda changed"), std::string::npos);
    EXPECT_NE(log.find("jobman-setup: conda unchanged"), std::string::npos);
  }
  EXPECT_EQ(jobman::util::read_file(slice.worker_home(0) / ".ssh/config")
                .find("Host 10.*", jobman::util::read_file(slice.worker_home(0) / ".ssh/config").find("Host 10.*") + 1),
            std::string::npos)
      << "the config entry is there once";

  // A worker that lost its ssh config, its mount and a sent file gets exactly those back.
  ASSERT_EQ(run(1, "rm ~/.ssh/config && fusermount -u ~/gcs-bucket && rm ~/.jobman/files/*-env.yaml && echo ok"),
            "ok\n");
  const auto third = jobman::remote::run_setup(target, kAll, plan, attempt_dir, kStep);
  for (const auto& worker : third) {
    ASSERT_TRUE(worker.ok()) << worker.error;
    EXPECT_EQ(worker.changed(), worker.worker == 1);
  }
  EXPECT_EQ(third[1].uploaded.size(), 1U);
  EXPECT_EQ(third[1].modules[0].outcome, ModuleOutcome::changed);
  EXPECT_EQ(third[1].modules[1].outcome, ModuleOutcome::changed);
  EXPECT_EQ(third[1].modules[2].outcome, ModuleOutcome::unchanged);
  EXPECT_EQ(run(1, "cat ~/gcs-bucket/note"), "from-2\n");
}

TEST_F(RemoteSetupTest, AFailingModuleStopsTheSetupWithItsReason) {
  dir.write("env.yaml", "name: broken\ndependencies:\n  - does-not-exist-pkg\n");
  const auto plan = jobman::remote::plan_setup(
      config("conda", "gcsfuse:\n  bucket_name: data\n  mount_path: ~/m\nconda:\n  name: broken\n"
                      "  config_file: env.yaml\n"));
  const auto result = jobman::remote::run_setup(target, {0, 3}, plan, attempt_dir, kStep);
  for (const auto& worker : result) {
    EXPECT_FALSE(worker.ok());
    ASSERT_EQ(worker.modules.size(), 2U);
    EXPECT_EQ(worker.modules[0].outcome, ModuleOutcome::changed);
    EXPECT_EQ(worker.modules[1].outcome, ModuleOutcome::failed);
    EXPECT_NE(worker.error.find("conda setup on worker " + std::to_string(worker.worker) + " failed"),
              std::string::npos)
        << worker.error;
    EXPECT_NE(worker.error.find("does-not-exist-pkg"), std::string::npos) << worker.error;
    const auto log = jobman::util::read_file(attempt_dir / ("setup-" + std::to_string(worker.worker) + ".log"));
    EXPECT_NE(log.find("PackagesNotFoundError"), std::string::npos) << log;
  }
  // A worker that cannot be reached says so. (Nothing listens at that address of this machine's loopback.)
  target.hosts[0].address = "127.255.255.254";
  const auto unreachable = jobman::remote::run_setup(target, {0}, plan, attempt_dir, kStep);
  EXPECT_FALSE(unreachable[0].ok());
  EXPECT_NE(unreachable[0].error.find("checking worker 0 failed"), std::string::npos) << unreachable[0].error;
}

TEST_F(RemoteSetupTest, AVenvIsMadeOnceAndTheCommandRunsInIt) {
  dir.write("requirements.txt", "# everything the job needs is in the standard library\n");
  const auto cfg = config("venv", "venv:\n  name: exp\n  requirements_file: requirements.txt\n  python: \"3\"\n");
  const auto plan = jobman::remote::plan_setup(cfg);
  auto first = jobman::remote::run_setup(target, {0}, plan, attempt_dir, kStep);
  ASSERT_TRUE(first[0].ok()) << first[0].error;
  EXPECT_EQ(first[0].modules.at(0).outcome, ModuleOutcome::changed);
  auto second = jobman::remote::run_setup(target, {0}, plan, attempt_dir, kStep);
  ASSERT_TRUE(second[0].ok()) << second[0].error;
  EXPECT_FALSE(second[0].changed());

  EXPECT_EQ(python_prefix(cfg), (slice.remote_home(0, jobman::util::current_user()) / "venvs/exp").string() + "\n");
}

TEST_F(RemoteSetupTest, AVenvIsMadeWithPython310OnceAptInstallsItsVenvPackage) {
  // The worker's image lacks python3.10-venv, as a stock Ubuntu TPU image does.
  fs::create_directories(slice.worker_dir(0) / ".mock/apt");
  std::ofstream(slice.worker_dir(0) / ".mock/apt/missing") << "python3.10-venv\n";
  dir.write("requirements.txt", "absl-py==2.3.1\n");
  const auto plan =
      jobman::remote::plan_setup(config("venv", "venv:\n  name: exp\n  requirements_file: requirements.txt\n"));
  const auto first = jobman::remote::run_setup(target, {0}, plan, attempt_dir, kStep);
  ASSERT_TRUE(first[0].ok()) << first[0].error;
  EXPECT_EQ(first[0].modules.at(0).outcome, ModuleOutcome::changed);
  const auto log = jobman::util::read_file(attempt_dir / "setup-0.log");
  const auto venv = (slice.remote_home(0, jobman::util::current_user()) / "venvs/exp").string();
  EXPECT_NE(log.find("ensurepip is not available"), std::string::npos) << log;
  EXPECT_NE(log.find("installing python3.10-venv\nSetting up python3.10-venv"), std::string::npos) << log;
  EXPECT_NE(log.find("created " + venv + " with python3.10\n"), std::string::npos) << log;
  EXPECT_EQ(jobman::util::read_file(slice.worker_dir(0) / ".mock/apt/missing"), "");
  EXPECT_EQ(run(0, "~/venvs/exp/bin/pip show absl-py | head -2"), "Name: absl-py\nVersion: 2.3.1\n");
  const auto second = jobman::remote::run_setup(target, {0}, plan, attempt_dir, kStep);
  ASSERT_TRUE(second[0].ok()) << second[0].error;
  EXPECT_FALSE(second[0].changed());
}

TEST_F(RemoteSetupTest, AVenvTheWorkerHasInItsHomeIsUsedAsThePythonJobmanLeftIt) {
  ASSERT_EQ(run(0, "python3.10 -m venv ~/exp && echo made"), "made\n");
  dir.write("requirements.txt", "absl-py==2.3.1\n");
  const auto cfg = config("venv", "venv:\n  name: exp\n  requirements_file: requirements.txt\n  python: \"3.10\"\n");
  const auto result = jobman::remote::run_setup(target, {0}, jobman::remote::plan_setup(cfg), attempt_dir, kStep);
  ASSERT_TRUE(result[0].ok()) << result[0].error;
  EXPECT_EQ(run(0, "[ -e ~/venvs ] && echo venvs || echo none"), "none\n");
  EXPECT_EQ(run(0, "~/exp/bin/pip show absl-py | head -1"), "Name: absl-py\n");

  EXPECT_EQ(python_prefix(cfg), (slice.remote_home(0, jobman::util::current_user()) / "exp").string() + "\n");
}

TEST_F(RemoteSetupTest, AMissingLocalFileIsNeededOnlyOnAWorkerThatLacksItsEnvironment) {
  dir.write("env.yaml", "name: fms\ndependencies:\n  - numpy\n");
  const auto cfg = config("conda", "conda:\n  name: fms\n  config_file: env.yaml\n");
  const auto made = jobman::remote::run_setup(target, {0}, jobman::remote::plan_setup(cfg), attempt_dir, kStep);
  ASSERT_TRUE(made[0].ok()) << made[0].error;
  fs::remove(dir / "env.yaml");
  const auto plan = jobman::remote::plan_setup(cfg);
  EXPECT_TRUE(plan.files.empty());
  const auto result = jobman::remote::run_setup(target, {0, 1}, plan, attempt_dir, kStep);
  const auto missing = "conda.config_file " + (dir / "env.yaml").string() + " does not exist on this machine";
  // Worker 0 has the environment: it is used as it is.
  ASSERT_TRUE(result[0].ok()) << result[0].error;
  EXPECT_FALSE(result[0].changed());
  EXPECT_NE(
      jobman::util::read_file(attempt_dir / "setup-0.log").find(missing + "; using the conda environment fms as it is"),
      std::string::npos);
  // Worker 1 would have to create it.
  EXPECT_FALSE(result[1].ok());
  EXPECT_NE(result[1].error.find("conda setup on worker 1 failed"), std::string::npos) << result[1].error;
  EXPECT_NE(result[1].error.find(missing + ", and the conda environment fms must be created from it"),
            std::string::npos)
      << result[1].error;
  EXPECT_EQ(run(1, "conda env list | grep -c '^fms ' || true"), "0\n");
}

TEST_F(RemoteSetupTest, ADockerCommandRunsInItsContainerAndStopReachesIt) {
  // The flags are shell text for the worker's shell, as the Python jobman's were: quoted words and $HOME expanded.
  const auto cfg = config("docker", "docker:\n  image: lab/trainer:1.0\n"
                                    "  env_vars: [\"LAB=1\", \"TOKEN=s3cr3t-42\", \"PASSED\"]\n"
                                    "  flags: [\"--privileged\", \"--network=host\", '-e \"SPACED=b  c\"',"
                                    " '-v $HOME/shared:$HOME/shared']\n");
  const auto plan = jobman::remote::plan_setup(cfg);
  auto first = jobman::remote::run_setup(target, {0, 1}, plan, attempt_dir, kStep);
  for (const auto& worker : first) {
    ASSERT_TRUE(worker.ok()) << worker.error;
    EXPECT_TRUE(worker.changed());
  }
  for (const auto& worker : jobman::remote::run_setup(target, {0, 1}, plan, attempt_dir, kStep)) {
    EXPECT_FALSE(worker.changed()) << "the image is pulled once";
  }
  jobman::remote::LaunchSpec spec;
  spec.id = {"9", 1};
  spec.docker = true;
  spec.extra_env = {{"PASSED", "through"}};
  spec.command = jobman::remote::environment_command(
      cfg, "echo worker=$JOBMAN_WORKER_ID lab=$LAB token=${#TOKEN} passed=$PASSED \"spaced=$SPACED\"; exec sleep 600");
  for (const auto& status : jobman::remote::launch(target, {0, 1}, spec, kStep)) {
    EXPECT_EQ(status.state, jobman::remote::WorkloadState::running) << status.diagnostic;
  }
  EXPECT_TRUE(eventually([&] { return run(1, "docker ps --filter name=jobman-9-1-w1 -q").size() > 1; }));
  // The variables' values are in no process's arguments while the container runs.
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::error_code ec;
    if (fs::exists(entry.path() / "cmdline", ec)) {
      std::ifstream in(entry.path() / "cmdline", std::ios::binary);
      const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(cmdline.find("s3cr3t-42"), std::string::npos) << entry.path();
    }
  }
  const auto stopped = jobman::remote::stop(target, {0, 1}, spec.id, std::chrono::seconds(5), kStep);
  for (const auto& status : stopped) {
    EXPECT_EQ(status.state, jobman::remote::WorkloadState::exited);
    EXPECT_EQ(status.exit_code, 143);
  }
  EXPECT_EQ(run(1, "docker ps -q | wc -l"), "0\n");
  jobman::remote::attach(target, {0, 1}, spec.id, attempt_dir);
  EXPECT_EQ(jobman::util::read_file(jobman::remote::worker_log_path(attempt_dir, 1)),
            "worker=1 lab=1 token=9 passed=through spaced=b  c\n");
  // The mount's source is the worker's $HOME/shared, which the mock's docker creates.
  EXPECT_EQ(run(1, "[ -d ~/shared ] && echo mounted"), "mounted\n");
  EXPECT_TRUE(eventually([&] { return slice.processes_running() == 0; }));
}

} // namespace remote_setup_test
