// A mock cloud with one READY slice whose hosts OpenSSH reaches: what tests of the remote layer run against.
#pragma once

#include "jobman/remote/gcloud.hpp"
#include "support/host_ssh.hpp"
#include "support/mock_cloud.hpp"
#include "support/temp_dir.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>

namespace jobman::test {

// Starts a mock (state in dir/), authorizes a key of the test's own for this machine's user and for alice on its
// hosts, creates queued resource "slice" with node "slice-node" of `accelerator` in us-central2-b, and waits until
// the node is READY and its hosts have published their keys. Check ready() before use.
class MockSlice {
public:
  explicit MockSlice(const TempDir& dir, const std::string& accelerator = "v4-32");

  // The node came up READY.
  [[nodiscard]] bool ready() const { return ready_; }
  // Where commands for the slice go: OpenSSH as this machine's user, to project p's node in its zone.
  [[nodiscard]] const remote::SliceTarget& target() const { return target_; }
  // The mock's admin and API client.
  httplib::Client& client() { return *client_; }
  // The running server.
  MockCloudProcess& server() { return *server_; }

  // One worker host's directory, from the mock's admin API (empty when the worker is not up).
  std::filesystem::path worker_dir(int worker);
  // The directory of this machine that holds this machine's user's home on one worker host (empty when the worker
  // is not up).
  std::filesystem::path worker_home(int worker);
  // HOME as the commands of `user` (who logs in by ssh) on one worker host see it: /home/USER where hosts have homes
  // of their own (empty when the worker is not up).
  std::filesystem::path remote_home(int worker, const std::string& user);
  // Preempts the node now (admin API); true when the mock accepted.
  bool preempt();
  // The next `steps` steps of the workload on every worker (or worker `worker`'s) spike by `factor` (admin API
  // :injectLossSpike); true when the mock accepted.
  bool inject_loss_spike(double factor, int steps, std::optional<int> worker = std::nullopt);
  // The workload on every worker (or worker `worker`'s) hangs at its next step (admin API :injectHang); true when the
  // mock accepted.
  bool inject_hang(std::optional<int> worker = std::nullopt);
  // Processes the mock's worker hosts are running (its metrics), -1 when it cannot say.
  int processes_running();

private:
  // A field of the admin API's answer about a worker host, as a path.
  std::filesystem::path worker_path(int worker, const char* key, const std::string& user = "");

  std::unique_ptr<MockCloudProcess> server_;
  std::unique_ptr<httplib::Client> client_;
  std::unique_ptr<MockHostSsh> hosts_;
  remote::SliceTarget target_;
  bool ready_ = false;
};

// A test on a four-host mock slice (v4-32): its directory, the slice, a target for its node, and an empty local
// attempt directory (dir/jobs/7/attempt-1). SetUp fails the test when the slice did not come up.
class MockSliceTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(slice.ready()) << slice.server().first_line();
    std::filesystem::create_directories(attempt_dir);
  }

  TempDir dir;
  MockSlice slice{dir};
  remote::SliceTarget target = slice.target();
  std::filesystem::path attempt_dir = dir / "jobs" / "7" / "attempt-1";
};

} // namespace jobman::test
