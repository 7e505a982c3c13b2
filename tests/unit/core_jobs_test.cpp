#include "jobman/config/loader.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "support/sample_job.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <thread>

namespace jobman::core {
namespace core_jobs_test {

using domain::DesiredState;
using domain::Phase;

class CoreRequests : public ::testing::Test {
protected:
  test::TempDir dir;
  store::JobStore store = store::JobStore::open_in_memory();
  std::int64_t id = 0;
  void SetUp() override {
    ::setenv("JOBMAN_HOME", dir.path().c_str(), 1);
    id = store.jobs().create({test::make_job("a")}).front();
  }
  void TearDown() override { ::unsetenv("JOBMAN_HOME"); }
};

TEST_F(CoreRequests, CancelOfAJobWithNothingInTheCloudEndsItAtOnce) {
  const auto outcome = apply_request(store, id, Request::cancel);
  EXPECT_TRUE(outcome.changed);
  EXPECT_TRUE(outcome.done);
  const auto job = store.jobs().get(id);
  EXPECT_EQ(job.phase, Phase::cancelled);
  EXPECT_EQ(job.desired, DesiredState::stop);
  const auto again = apply_request(store, id, Request::cancel);
  EXPECT_FALSE(again.changed) << "repeating a cancel changes nothing";
}

TEST_F(CoreRequests, CancelOfARunningJobIsLeftToTheSupervisor) {
  store.attempts().begin(id, "a-000001-a1", "a-000001-a1", "us-central2-b");
  domain::PhaseChange running;
  running.to = Phase::running;
  running.reason = "workload started";
  ASSERT_TRUE(store.jobs().transition(id, Phase::pending, running));
  const auto outcome = apply_request(store, id, Request::cancel);
  EXPECT_TRUE(outcome.changed);
  EXPECT_FALSE(outcome.done);
  EXPECT_EQ(outcome.message, "cancel requested");
  const auto job = store.jobs().get(id);
  EXPECT_EQ(job.phase, Phase::running) << "only the supervisor stops a workload";
  EXPECT_EQ(job.desired, DesiredState::stop);
  // Asking for less than what is already asked changes nothing.
  EXPECT_EQ(apply_request(store, id, Request::remove).changed, true);
  EXPECT_EQ(apply_request(store, id, Request::cancel).changed, false);
  EXPECT_EQ(store.jobs().get(id).desired, DesiredState::remove);
}

TEST_F(CoreRequests, ResumeBringsAStoppedJobBackToPending) {
  apply_request(store, id, Request::cancel);
  const auto outcome = apply_request(store, id, Request::resume);
  EXPECT_TRUE(outcome.changed);
  const auto job = store.jobs().get(id);
  EXPECT_EQ(job.phase, Phase::pending);
  EXPECT_EQ(job.desired, DesiredState::run);
  EXPECT_FALSE(apply_request(store, id, Request::resume).changed);
}

TEST_F(CoreRequests, ResumeOfASucceededJobIsAnError) {
  domain::PhaseChange done;
  done.to = Phase::succeeded;
  done.reason = "exit 0";
  ASSERT_TRUE(store.jobs().transition(id, std::nullopt, done));
  EXPECT_THROW(apply_request(store, id, Request::resume), Error);
}

TEST_F(CoreRequests, CleanRemovesTheRecordAndTheJobDirectory) {
  std::filesystem::create_directories(job_directory(id) / "attempt-1");
  dir.write("jobs/" + std::string("000001") + "/attempt-1/worker-0.log", "step=1\n");
  const auto outcome = apply_request(store, id, Request::clean);
  EXPECT_TRUE(outcome.done);
  EXPECT_FALSE(store.jobs().find(id).has_value());
  EXPECT_FALSE(std::filesystem::exists(job_directory(id)));
  EXPECT_THROW(apply_request(store, id, Request::clean), domain::NoSuchJobError);
}

TEST_F(CoreRequests, MissingJobIsNoSuchJob) {
  EXPECT_THROW(apply_request(store, 999, Request::cancel), domain::NoSuchJobError);
}

} // namespace core_jobs_test
} // namespace jobman::core

namespace jobman::core {
namespace core_jobs_test {

TEST(CoreCreate, EverySweepMemberBecomesAJobRecordingItsConfig) {
  auto store = store::JobStore::open_in_memory();
  const auto configs = config::load_job_configs(JOBMAN_SOURCE_DIR "/configs/examples/sweep-v6e.yaml");
  ASSERT_EQ(configs.size(), 3U);
  const auto ids = create_jobs(store, configs, "carol");
  ASSERT_EQ(ids.size(), configs.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto job = store.jobs().get(ids[i], true);
    EXPECT_EQ(job.name, configs[i].job.name);
    EXPECT_EQ(job.user, "carol");
    EXPECT_EQ(job.accelerator, "v6e-8");
    EXPECT_EQ(job.zone, "us-east1-d");
    EXPECT_EQ(job.hosts, configs[i].tpu.accelerator.hosts);
    EXPECT_EQ(job.phase, Phase::pending);
    EXPECT_EQ(job.sweep_label, sweep_label(configs[i]));
    EXPECT_EQ(job.config_yaml, configs[i].resolved_yaml);
  }
}

TEST(CoreAttempts, AnAttemptsLogsAndWorkloadAreNamedByTheJobAndTheAttempt) {
  const jobman::test::TempDir dir;
  const jobman::test::ScopedEnv home("JOBMAN_HOME", dir.path().string());
  EXPECT_EQ(attempt_directory(42, 3), dir / "jobs" / "000042" / "attempt-3");
  EXPECT_EQ(attempt_directory(42, 3).parent_path(), job_directory(42));
  const auto id = workload_id(42, 3);
  EXPECT_EQ(id.job_id, "000042");
  EXPECT_EQ(id.attempt, 3);
  EXPECT_EQ(remote::remote_workload_dir(id), ".jobman/jobs/000042/attempt-3");
}

// Found by the chaos harness (seed 3): `clean` and a supervisor carrying out the same clean removed the job's
// directory at once, and the one that found an entry gone under it failed with "No such file or directory".
TEST_F(CoreRequests, TwoCleansRemovingTheSameJobDirectoryAtOnceBothSucceed) {
  for (int round = 0; round < 20; ++round) {
    const auto attempt = attempt_directory(id, 1);
    std::filesystem::create_directories(attempt);
    for (int i = 0; i < 200; ++i) {
      std::ofstream(attempt / ("worker-" + std::to_string(i) + ".log")) << "line\n";
    }
    std::atomic<int> failures{0};
    const auto remove = [&] {
      try {
        remove_job_directory(id);
      } catch (const Error& e) {
        ++failures;
        ADD_FAILURE() << e.what();
      }
    };
    std::thread other(remove);
    remove();
    other.join();
    EXPECT_EQ(failures, 0) << "round " << round;
    EXPECT_FALSE(std::filesystem::exists(job_directory(id)));
  }
}

} // namespace core_jobs_test
} // namespace jobman::core
