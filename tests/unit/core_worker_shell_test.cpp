// Which slice `jobman ssh` may reach, and the gcloud command that reaches it.
#include "jobman/config/loader.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/worker_shell.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>

namespace jobman::core {
namespace core_worker_shell_test {

using domain::Phase;

class CoreWorkerShell : public ::testing::Test {
protected:
  store::JobStore store = store::JobStore::open_in_memory();
  std::int64_t id = 0;
  void SetUp() override {
    domain::NewJob job;
    job.name = "train";
    job.user = "alice";
    job.accelerator = "v4-32";
    job.zone = "us-central2-b";
    job.pricing = domain::Pricing::spot;
    job.tpu_name = "train";
    job.hosts = 4;
    id = store.jobs().create({job}).front();
  }
  void move_to(Phase phase) {
    domain::PhaseChange change;
    change.to = phase;
    change.reason = "test";
    ASSERT_TRUE(store.jobs().transition(id, std::nullopt, change));
  }
  // The message live_attempt throws, or "" when it returns an attempt.
  std::string refusal() {
    try {
      live_attempt(store, store.jobs().get(id));
      return "";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::error);
      return e.what();
    }
  }
};

TEST_F(CoreWorkerShell, AJobThatHasNotStartedHasNoSlice) {
  EXPECT_EQ(refusal(), "job 000001 has no slice: it has not started yet (PENDING)");
  move_to(Phase::cancelled);
  EXPECT_EQ(refusal(), "job 000001 has no slice: it is CANCELLED");
}

TEST_F(CoreWorkerShell, TheCurrentAttemptsSliceIsLiveUntilReleased) {
  store.attempts().begin(id, "train-000001-a1", "train-000001-a1", "us-central2-b");
  store.attempts().begin(id, "train-000001-a2", "train-000001-a2", "us-central2-b");
  move_to(Phase::running);
  const auto attempt = live_attempt(store, store.jobs().get(id));
  EXPECT_EQ(attempt.number, 2);
  EXPECT_EQ(attempt.node, "train-000001-a2");
  store.attempts().mark_released(id, "train-000001-a2", "test");
  move_to(Phase::recovering);
  EXPECT_EQ(refusal(), "job 000001 has no slice: the slice of attempt 2 is gone (RECOVERING)");
}

TEST_F(CoreWorkerShell, ASliceStillBeingRequestedIsNotOneToLogInto) {
  store.attempts().begin(id, "train-000001-a1", "train-000001-a1", "us-central2-b", true);
  EXPECT_EQ(refusal(), "job 000001 has no slice: attempt 1's queued resource train-000001-a1 is still being "
                       "requested (PENDING)");
  store.attempts().confirm_created(id, 1);
  move_to(Phase::running);
  EXPECT_EQ(refusal(), "");
}

TEST_F(CoreWorkerShell, AFinishedJobHasASliceOnlyWhileItsReleaseIsPending) {
  store.attempts().begin(id, "train-000001-a1", "train-000001-a1", "us-central2-b");
  move_to(Phase::failed);
  EXPECT_EQ(refusal(), "job 000001 has no slice: it is FAILED");
  store.jobs().set_cleanup_pending(id, true);
  EXPECT_EQ(refusal(), "") << "a failed job's slice is kept until it is released, and can be looked at";
  store.attempts().mark_released(id, "train-000001-a1", "test");
  EXPECT_EQ(refusal(), "job 000001 has no slice: it is FAILED");
  move_to(Phase::deleted);
  EXPECT_EQ(refusal(), "job 000001 has no slice: it is DELETED");
}

TEST_F(CoreWorkerShell, TheArgvIsAShellWithoutACommandAndRunsOneWithIt) {
  const auto config = config::parse_job_configs("job:\n  name: train\ntpu:\n  accelerator: v4-32\n  zone: "
                                                "us-central2-b\nssh:\n  private_key: /keys/lab\n"
                                                "command:\n  cmd: python3 train.py\n",
                                                "train.yaml")
                          .front();
  const test::TempDir homes; // gcloud's ~/.ssh is made there.
  const test::ScopedEnv home("HOME", homes.path().string());
  const test::ScopedEnv jobman_home("JOBMAN_HOME", (homes / "jobman").string());
  CloudAccess access;
  access.settings.cloud = config::CloudKind::google;
  access.settings.transport = config::Transport::gcloud;
  access.mock = false;
  access.project = "proj";
  access.gcloud = "/opt/gcloud";
  domain::AttemptRecord attempt;
  attempt.job_id = 1;
  attempt.number = 2;
  attempt.node = "train-000001-a2";
  attempt.zone = "us-central2-a";
  // Both read the variables attempt 2's workload got on the worker before the shell or the command.
  const auto variables = remote::workload_variables_script(workload_id(1, 2));
  EXPECT_NE(variables.find("/jobs/000001/attempt-2'/run.sh"), std::string::npos) << variables;
  EXPECT_EQ(
      worker_shell_argv(access, config, attempt, 2, ""),
      (std::vector<std::string>{"/opt/gcloud", "compute", "tpus", "tpu-vm", "ssh", "train-000001-a2",
                                "--zone=us-central2-a", "--project=proj", "--worker=2", "--ssh-key-file=/keys/lab",
                                "--quiet", "--command=" + variables + "exec \"${SHELL:-/bin/bash}\""}))
      << "the attempt's zone wins over the config's";
  const auto terminal = worker_shell_argv(access, config, attempt, 2, "", true);
  EXPECT_NE(std::find(terminal.begin(), terminal.end(), "--ssh-flag=-t"), terminal.end())
      << "a shell in a terminal gets one on the worker";
  EXPECT_EQ(worker_shell_argv(access, config, attempt, 0, "df -h /tmp").back(),
            "--command=" + variables + "df -h /tmp");
}

TEST_F(CoreWorkerShell, GcloudsVariablesTravelWithTheSliceTarget) {
  const auto config = config::parse_job_configs("job:\n  name: train\ntpu:\n  accelerator: v4-32\n  zone: "
                                                "us-central2-b\ncommand:\n  cmd: python3 train.py\n",
                                                "train.yaml")
                          .front();
  // jobman's own key is made for gcloud where the config names none: in this test's homes.
  const test::TempDir homes;
  const test::ScopedEnv home("HOME", homes.path().string());
  const test::ScopedEnv jobman_home("JOBMAN_HOME", (homes / "jobman").string());
  CloudAccess access;
  access.settings.cloud = config::CloudKind::google;
  access.settings.transport = config::Transport::gcloud;
  access.mock = false;
  access.project = "proj";
  access.gcloud = "/opt/gcloud";
  access.gcloud_env = {{"CLOUDSDK_CONFIG", "/home/a/.jobman/mock/gcloud"},
                       {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU", "http://127.0.0.1:9/"}};
  domain::AttemptRecord attempt;
  attempt.node = "train-000001-a1";
  attempt.zone = "us-central2-b";
  const auto target = slice_target(access, config, attempt);
  EXPECT_EQ(target.gcloud, "/opt/gcloud");
  EXPECT_EQ(target.environment, (std::vector<std::pair<std::string, std::string>>{
                                    {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU", "http://127.0.0.1:9/"},
                                    {"CLOUDSDK_CONFIG", "/home/a/.jobman/mock/gcloud"}}));
  EXPECT_EQ(target.ssh_key_file, (homes / "jobman" / "ssh" / "id_ed25519").string());
  EXPECT_FALSE(target.host_keys_known) << "no host of the slice is known yet";
}

} // namespace core_worker_shell_test
} // namespace jobman::core
