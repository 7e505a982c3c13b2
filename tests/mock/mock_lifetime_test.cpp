// The mock's own lifetime: with --idle-exit it exits once nothing has asked it anything for that long and it holds
// no slice; however it is stopped (SIGTERM, SIGTERM then SIGKILL a second later, SIGKILL alone), no workload it
// started on a worker host outlives it, and a killed mock leaves no scratch directory behind.
#include "jobman/util/process.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/worker_hosts.hpp"
#include "mock_cloud/workload_reaper.hpp"
#include "support/host_ssh.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <poll.h>
#include <string>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace mock_lifetime_test {

using jobman::test::eventually;
using jobman::test::MockCloudProcess;
using jobman::test::RunResult;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kZone = "us-central2-b";
const std::string kLoc = "projects/p/locations/" + kZone;
const httplib::Headers kAuth = {{"Authorization", "Bearer test-token"}};

// Waits at most `limit` for `pid`, a child of this process, to exit, without reaping it: true when it did.
bool exits_within(pid_t pid, std::chrono::milliseconds limit) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    return false;
  }
  pollfd fds{pidfd, POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int ready = 0;
  do {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    ready = ::poll(&fds, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
  } while (ready < 0 && errno == EINTR);
  ::close(pidfd);
  return ready > 0;
}

// True while `pid` runs: it exists and is not a zombie.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return false;
  }
  const auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < line.size() && line[close_paren + 2] != 'Z';
}

// The reapers (jobman-mock-cloud --reap-workloads PREFIX) running for the hosts whose markers begin with `prefix`.
std::vector<pid_t> reapers_of(const std::string& prefix) {
  std::vector<pid_t> found;
  for (const auto& id : jobman::test::process_ids()) {
    std::ifstream file("/proc/" + id + "/cmdline", std::ios::binary);
    std::vector<std::string> args;
    std::string arg;
    while (std::getline(file, arg, '\0')) {
      args.push_back(arg);
    }
    if (args.size() >= 3 && args[1] == jobman::mock::kReapWorkloadsOption && args[2] == prefix &&
        running(static_cast<pid_t>(std::stol(id)))) {
      found.push_back(static_cast<pid_t>(std::stol(id)));
    }
  }
  return found;
}

class MockLifetimeTest : public ::testing::Test {
protected:
  // Starts a mock at `time_scale` with its state in dir/state, the static token "test-token", and `extra` options.
  void start(const std::string& time_scale, const std::vector<std::string>& extra = {}) {
    const auto config = dir.write("world.yaml", jobman::test::test_world(1, "  us-central2-b:\n    v4:\n"
                                                                            "      spot: {chips: 64}\n"));
    dir.write("state/access-tokens", "test-token\n");
    std::vector<std::string> args = {"--port",        "0",           "--time-scale",          time_scale, "--config",
                                     config.string(), "--state-dir", (dir / "state").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    server = std::make_unique<MockCloudProcess>(args);
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    hosts = std::make_unique<jobman::test::MockHostSsh>(dir, *server);
    ASSERT_EQ(hosts->error(), "");
  }

  jobman::test::HttpAnswer api(const std::string& method, const std::string& path, const json& body = nullptr) {
    return jobman::test::http_call(*client, method, path, body, kAuth);
  }

  // Creates queued resource "w" with a v4-8 node "w-node" and waits until it is ACTIVE.
  void create_active() {
    const json body = {{"tpu",
                        {{"nodeSpec",
                          {{{"parent", kLoc},
                            {"nodeId", "w-node"},
                            {"node", {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                       {"spot", json::object()}};
    ASSERT_EQ(api("POST", "/v2/" + kLoc + "/queuedResources?queuedResourceId=w", body).status, 200);
    ASSERT_TRUE(eventually(
        [&] { return api("GET", "/v2/" + kLoc + "/queuedResources/w").body["state"].value("state", "") == "ACTIVE"; }));
  }

  // Worker 0 of w-node, as the mock describes it.
  json worker() {
    return jobman::test::http_call(*client, "GET", "/mock/v1/" + kLoc + "/nodes/w-node/workers/0", nullptr,
                                   server->admin_headers())
        .body;
  }

  // Starts on worker 0 a workload that ignores SIGTERM, detached as jobman launches one (setsid, nohup, its ssh
  // session ended at once); returns its pid, which it writes to its home.
  pid_t start_stubborn_workload() {
    const auto started =
        hosts->ssh(kZone, "w-node", "0",
                   "setsid nohup bash -c 'trap \"\" TERM; echo $$ > ~/pid.part && mv ~/pid.part ~/pid; "
                   "while :; do sleep 1; done' > /dev/null 2>&1 < /dev/null &");
    EXPECT_EQ(started.exit_code, 0) << started.err;
    const fs::path pid_file = fs::path(worker()["sandbox_home"].get<std::string>()) / "pid";
    EXPECT_TRUE(eventually([&] { return fs::exists(pid_file); }));
    const auto text = jobman::test::file_text(pid_file);
    return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
  }

  jobman::test::TempDir dir;
  std::unique_ptr<MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;
  std::unique_ptr<jobman::test::MockHostSsh> hosts; // A key for root on every host.
};

TEST_F(MockLifetimeTest, SigtermThenSigkillASecondLaterEndsEveryWorkloadOfItsHosts) {
  // At time scale 10 a slice's grace period is 3 s: the mock is still waiting on the workload when SIGKILL comes.
  start("10");
  create_active();
  const auto marker = worker()["marker"].get<std::string>();
  const pid_t workload = start_stubborn_workload();
  ASSERT_GT(workload, 0);
  ASSERT_TRUE(running(workload));

  ::kill(server->pid(), SIGTERM);
  std::this_thread::sleep_for(std::chrono::seconds(1)); // The scenario: SIGKILL one second after SIGTERM.
  ASSERT_FALSE(exits_within(server->pid(), std::chrono::milliseconds(0)))
      << "the mock ended before SIGKILL: its grace period did not hold it";
  ::kill(server->pid(), SIGKILL);
  EXPECT_EQ(server->stop(), 128 + SIGKILL);

  EXPECT_TRUE(eventually([&] { return !running(workload); }, std::chrono::seconds(10)))
      << "the workload " << workload << " outlived the killed mock";
  EXPECT_TRUE(eventually([&] { return jobman::mock::find_marked_processes(marker).empty(); }));
}

TEST_F(MockLifetimeTest, SigtermAloneEndsEveryWorkloadOfItsHosts) {
  start("1000");
  create_active();
  const auto marker = worker()["marker"].get<std::string>();
  const pid_t workload = start_stubborn_workload();
  ASSERT_GT(workload, 0);
  ASSERT_TRUE(running(workload));
  ::kill(server->pid(), SIGTERM);
  ASSERT_TRUE(exits_within(server->pid(), std::chrono::seconds(30)));
  EXPECT_EQ(server->stop(), 0);
  EXPECT_TRUE(eventually([&] { return !running(workload); }, std::chrono::seconds(10)));
  EXPECT_TRUE(jobman::mock::find_marked_processes(marker).empty());
}

TEST_F(MockLifetimeTest, SigkillAloneEndsEveryWorkloadAndTheReaperThenEnds) {
  start("1000");
  create_active();
  const auto marker = worker()["marker"].get<std::string>();
  const auto prefix = marker.substr(0, marker.find('/') + 1);
  const pid_t workload = start_stubborn_workload();
  ASSERT_GT(workload, 0);
  EXPECT_EQ(reapers_of(prefix).size(), 1U) << "one reaper stands by for the mock";
  ::kill(server->pid(), SIGKILL);
  EXPECT_EQ(server->stop(), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return !running(workload); }, std::chrono::seconds(10)))
      << "the workload " << workload << " outlived the killed mock";
  EXPECT_TRUE(eventually([&] { return reapers_of(prefix).empty(); })) << "the reaper lingers";
}

TEST_F(MockLifetimeTest, AKilledMockLeavesNoScratchDirectoryBehind) {
  // Without --state-dir the sandboxes, buckets and admin token live in a scratch directory.
  server = std::make_unique<MockCloudProcess>(std::vector<std::string>{"--port", "0"});
  ASSERT_GT(server->port(), 0) << server->first_line();
  const auto scratch = fs::path(server->admin_token_file()).parent_path();
  ASSERT_TRUE(fs::is_directory(scratch / "workers")) << scratch;
  ::kill(server->pid(), SIGKILL);
  EXPECT_EQ(server->stop(), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return !fs::exists(scratch); })) << scratch;
}

TEST_F(MockLifetimeTest, IdleExitWaitsForItsSlicesToGoAndThenForTheIdleTime) {
  start("1000", {"--idle-exit", "1"});
  create_active();
  // With a slice alive it stays, however long nobody asks (nothing is asked here while it waits).
  EXPECT_FALSE(exits_within(server->pid(), std::chrono::milliseconds(2500))) << "it exited with a slice alive";
  ASSERT_EQ(api("DELETE", "/v2/" + kLoc + "/queuedResources/w?force=true").status, 200);
  const auto last_request = std::chrono::steady_clock::now();
  ASSERT_TRUE(exits_within(server->pid(), std::chrono::seconds(20))) << "still running with no slice and no use";
  EXPECT_GE(std::chrono::steady_clock::now() - last_request, std::chrono::milliseconds(900));
  EXPECT_EQ(server->stop(), 0);
}

TEST_F(MockLifetimeTest, IdleExitCountsEveryRequestAsUse) {
  start("1000", {"--idle-exit", "1"});
  // Asked something every quarter second for twice the idle time, it stays.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  auto last_request = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(jobman::test::http_call(*client, "GET", "/mock/v1/metrics", nullptr, server->admin_headers()).status,
              200);
    last_request = std::chrono::steady_clock::now();
    ASSERT_FALSE(exits_within(server->pid(), std::chrono::milliseconds(250))) << "it exited while in use";
  }
  ASSERT_TRUE(exits_within(server->pid(), std::chrono::seconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - last_request, std::chrono::milliseconds(900));
  EXPECT_EQ(server->stop(), 0);
}

} // namespace mock_lifetime_test
