// Commands on a mock slice's workers through the gcloud command line, as jobman runs them: in parallel, each
// worker's output apart, hostile text quoted end to end, and a step that outlives its timeout stopped.
#include "jobman/remote/gcloud.hpp"
#include "support/mock_cloud.hpp"
#include "support/mock_slice.hpp"
#include "support/temp_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <vector>

namespace remote_gcloud_test {

using jobman::remote::run_on_workers;
using jobman::remote::shell_quote;
using jobman::test::eventually;
namespace fs = std::filesystem;

using RemoteGcloudTest = jobman::test::MockSliceTest;

TEST_F(RemoteGcloudTest, HostileTextArrivesIntactOnEveryWorkerAndRunsNothing) {
  const auto canary = dir / "pwned";
  const std::string hostile = "a'b\"c $(touch " + canary.string() + ") ; `touch " + canary.string() +
                              "` ${HOME} \\\n ünïcødé ✓ | touch " + canary.string();
  auto runs =
      run_on_workers(target, {0, 1, 2, 3}, "printf %s " + shell_quote(hostile) + "; echo; echo w${MOCK_TPU_HOST##*/}",
                     std::chrono::seconds(60));
  ASSERT_EQ(runs.size(), 4U);
  for (const auto& run : runs) {
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_FALSE(run.timed_out);
    // Each worker's output is its own: the text, then its own index.
    EXPECT_EQ(run.output, hostile + "\nw" + std::to_string(run.worker) + "\n");
  }
  EXPECT_FALSE(fs::exists(canary)) << "something in the text was executed";
}

TEST_F(RemoteGcloudTest, ExitCodesComeBackPerWorker) {
  auto runs = run_on_workers(target, {1, 3}, "exit $(( ${MOCK_TPU_HOST##*/} + 10 ))", std::chrono::seconds(60));
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[0].worker, 1);
  EXPECT_EQ(runs[0].exit_code, 11);
  EXPECT_EQ(runs[1].worker, 3);
  EXPECT_EQ(runs[1].exit_code, 13);
  target.node = "no-such-node";
  auto missing = run_on_workers(target, {0}, "true", std::chrono::seconds(60));
  EXPECT_NE(missing[0].exit_code, 0);
  EXPECT_NE(missing[0].output.find("NOT_FOUND"), std::string::npos) << missing[0].output;
}

TEST_F(RemoteGcloudTest, AStepPastItsTimeoutIsStoppedOnTheWorkersToo) {
  // Time enough for both sessions to start and print on a loaded machine; far less than the sleep.
  auto runs = run_on_workers(target, {0, 1}, "echo started; sleep 600", std::chrono::seconds(3));
  ASSERT_EQ(runs.size(), 2U);
  for (const auto& run : runs) {
    EXPECT_TRUE(run.timed_out);
    EXPECT_NE(run.exit_code, 0);
    EXPECT_EQ(run.output.rfind("started\n", 0), 0U) << run.output;
  }
  // The remote sleeps went with their sessions, as sshd ends a session whose client is gone.
  EXPECT_TRUE(eventually([&] { return slice.processes_running() == 0; }));
}

TEST_F(RemoteGcloudTest, GcloudGetsTheTargetsVariablesWithoutThemInThisProcess) {
  // The fixture's variables move from this process's environment into the target's.
  auto own = target;
  std::vector<std::unique_ptr<jobman::test::ScopedEnv>> unset;
  for (const char* name : {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU", "CLOUDSDK_CONFIG", "JOBMAN_MOCK_ADMIN_TOKEN_FILE"}) {
    const char* value = std::getenv(name);
    ASSERT_NE(value, nullptr) << name;
    own.environment.emplace_back(name, value);
    unset.push_back(std::make_unique<jobman::test::ScopedEnv>(name, nullptr));
  }
  const auto without = run_on_workers(target, {0}, "echo reached", std::chrono::seconds(60));
  EXPECT_NE(without[0].exit_code, 0) << "without the variables gcloud cannot reach the mock: " << without[0].output;

  auto runs = run_on_workers(own, {0, 1}, "mkdir -p uploads && echo reached", std::chrono::seconds(60));
  ASSERT_EQ(runs.size(), 2U);
  for (const auto& run : runs) {
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(run.output, "reached\n");
  }
  const auto file = dir / "payload.txt";
  std::ofstream(file) << "payload\n";
  const auto copies = jobman::remote::copy_to_workers(own, {{1, {file.string()}}}, "uploads", std::chrono::seconds(60));
  ASSERT_EQ(copies.size(), 1U);
  EXPECT_EQ(copies[0].exit_code, 0) << copies[0].output;
  EXPECT_EQ(run_on_workers(own, {1}, "cat uploads/payload.txt", std::chrono::seconds(60))[0].output, "payload\n");
  EXPECT_EQ(std::getenv("CLOUDSDK_CONFIG"), nullptr) << "nothing was put into this process's environment";
}

} // namespace remote_gcloud_test
