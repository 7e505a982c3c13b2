// Commands on a mock slice's workers through the gcloud command line, as jobman runs them: in parallel, each
// worker's output apart, hostile text quoted end to end, and a step that outlives its timeout stopped.
#include "jobman/remote/gcloud.hpp"
#include "support/mock_cloud.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <gtest/gtest.h>

namespace {

using jobman::remote::run_on_workers;
using jobman::remote::shell_quote;
using jobman::test::eventually;
using nlohmann::json;
namespace fs = std::filesystem;

class RemoteGcloudTest : public ::testing::Test {
protected:
  jobman::test::TempDir dir;
  std::unique_ptr<jobman::test::MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;
  jobman::remote::SliceTarget target;

  void SetUp() override {
    server = jobman::test::start_test_mock(
        dir, jobman::test::test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 64}\n"));
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    ::setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU",
             ("http://127.0.0.1:" + std::to_string(server->port()) + "/").c_str(), 1);
    ::setenv("CLOUDSDK_CONFIG", (dir / "gcloud").c_str(), 1);
    target.gcloud = (fs::path(jobman::test::mock_cloud_binary()).parent_path() / "tools" / "gcloud").string();
    target.project = "p";
    target.zone = "us-central2-b";
    target.node = "slice-node";
    const json body = {{"tpu",
                        {{"nodeSpec",
                          {{{"parent", "projects/p/locations/us-central2-b"},
                            {"nodeId", "slice-node"},
                            {"node", {{"acceleratorType", "v4-32"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                       {"spot", json::object()}};
    const httplib::Headers auth = {{"Authorization", "Bearer test-token"}};
    ASSERT_EQ(jobman::test::http_call(*client, "POST",
                                      "/v2/projects/p/locations/us-central2-b/queuedResources?queuedResourceId=slice",
                                      body, auth)
                  .status,
              200);
    ASSERT_TRUE(eventually([&] {
      auto node = jobman::test::http_call(*client, "GET", "/v2/projects/p/locations/us-central2-b/nodes/slice-node",
                                          nullptr, auth);
      return node.status == 200 && node.body["state"] == "READY";
    }));
  }

  void TearDown() override {
    ::unsetenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU");
    ::unsetenv("CLOUDSDK_CONFIG");
  }
};

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
  auto runs = run_on_workers(target, {0, 1}, "echo started; sleep 600", std::chrono::milliseconds(500));
  ASSERT_EQ(runs.size(), 2U);
  for (const auto& run : runs) {
    EXPECT_TRUE(run.timed_out);
    EXPECT_NE(run.exit_code, 0);
    EXPECT_EQ(run.output.rfind("started\n", 0), 0U) << run.output;
  }
  // The remote sleeps went with their sessions, as sshd ends a session whose client is gone.
  EXPECT_TRUE(eventually([&] {
    auto metrics = jobman::test::http_call(*client, "GET", "/mock/v1/metrics", nullptr, {});
    return metrics.status == 200 && metrics.body["processes_running"] == 0;
  }));
}

} // namespace
