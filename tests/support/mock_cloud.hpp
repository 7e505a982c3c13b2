// A jobman-mock-cloud child process and small HTTP helpers, for tests that talk to the mock over loopback.
#pragma once

#include "support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <httplib.h>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace jobman::test {

// The built jobman-mock-cloud binary's path.
std::string mock_cloud_binary();

// A running jobman-mock-cloud started with `args`; its first stdout line gives the port. The destructor stops it.
class MockCloudProcess {
public:
  // Starts the server and reads its "listening on" line; port() is 0 when it did not start.
  explicit MockCloudProcess(const std::vector<std::string>& args);
  ~MockCloudProcess();
  MockCloudProcess(const MockCloudProcess&) = delete;
  MockCloudProcess& operator=(const MockCloudProcess&) = delete;

  // Sends SIGTERM, waits, and returns the exit status (128 + signal when killed); repeated calls return it again.
  int stop();
  // Sends SIGTERM and waits at most `patience`: the exit status, or nullopt when it was still running (it is then
  // killed with SIGKILL, and stop() returns 128 + SIGKILL).
  std::optional<int> stop_within(std::chrono::milliseconds patience);
  // The port it listens on, or 0.
  [[nodiscard]] int port() const { return port_; }
  // Its process id while it runs.
  [[nodiscard]] pid_t pid() const { return pid_; }
  // What it printed first (the "listening on" line, or whatever it said instead).
  [[nodiscard]] const std::string& first_line() const { return first_line_; }
  // The file holding its admin token (from its second line, "admin token in FILE"); empty when it did not start.
  [[nodiscard]] const std::string& admin_token_file() const { return admin_token_file_; }
  // Its admin token, read from that file when it started.
  [[nodiscard]] const std::string& admin_token() const { return admin_token_; }
  // "Authorization: Bearer <admin token>", what its /mock/v1 routes require.
  [[nodiscard]] httplib::Headers admin_headers() const { return {{"Authorization", "Bearer " + admin_token_}}; }

private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::string first_line_;
  std::string admin_token_file_;
  std::string admin_token_;
};

// Sends `signal` to the child `pid` and waits at most `patience` for it to exit: its exit status (128 + signal when
// killed), or nullopt when it was still running; it is then killed with SIGKILL. Either way it has been waited for.
std::optional<int> signal_and_wait(pid_t pid, int signal, std::chrono::milliseconds patience);

// An HTTP reply: status (0 when the request failed), body parsed as JSON (discarded when not JSON), text, headers.
struct HttpAnswer {
  int status = 0;           // HTTP status, or 0 when there was no reply.
  nlohmann::json body;      // The body as JSON; is_discarded() when it is not JSON.
  std::string text;         // The body as sent.
  httplib::Headers headers; // The reply's headers.
};

// Sends GET, POST, PUT, PATCH or DELETE with `body` as JSON (none when null).
HttpAnswer http_call(httplib::Client& client, const std::string& method, const std::string& path,
                     const nlohmann::json& body, const httplib::Headers& headers);

// The mock's admin call :injectLossSpike on node `node` of `location` ("projects/P/locations/Z"): the next `steps`
// steps the workload computes on every worker of the node (or only on worker `worker`) report `factor` times their
// loss and apply `factor` times their gradient. 200 with {"node", "workers", "lossSpike"}, else the error.
HttpAnswer inject_loss_spike(httplib::Client& client, const MockCloudProcess& mock, const std::string& location,
                             const std::string& node, double factor, int steps,
                             std::optional<int> worker = std::nullopt);

// The mock's admin call :injectHang on node `node` of `location`: the workload on every worker (or only on worker
// `worker`) blocks at its next step until it is stopped. 200 with {"node", "workers", "hang": true}, else the error.
HttpAnswer inject_hang(httplib::Client& client, const MockCloudProcess& mock, const std::string& location,
                       const std::string& node, std::optional<int> worker = std::nullopt);

// A world description for tests: every lifecycle and provisioning delay `seconds` simulated seconds, no random
// preemption or maintenance, and `zones`, the body of the zones: mapping (each line indented by two spaces).
std::string test_world(int seconds, const std::string& zones);

// Starts a jobman-mock-cloud for a test at --time-scale 1000: `world` written to dir/world.yaml, its state in
// dir/state, which trusts the static bearer token "test-token", with `extra` options. Its worker hosts see `dir`
// read-only (--visible-to-hosts), so that a test can hand its workloads files (a gate to wait on, say). Check port()
// before use.
std::unique_ptr<MockCloudProcess> start_test_mock(const TempDir& dir, const std::string& world, int seed = 1,
                                                  const std::vector<std::string>& extra = {});

// The environment of a jobman home on `mock`: JOBMAN_HOME `home`, XDG_CONFIG_HOME `config`, the mock as the cloud
// (its endpoint, admin token file and time scale 1000, no project), no autostart, and no gcloud named (the
// bundled one is used). Tests add what they need on top.
std::map<std::string, std::string> mock_home_environment(const MockCloudProcess& mock,
                                                         const std::filesystem::path& home,
                                                         const std::filesystem::path& config);

// Polls `check` every few milliseconds until it holds or `limit` passes; returns its last answer.
bool eventually(const std::function<bool()>& check, std::chrono::milliseconds limit = std::chrono::seconds(10));

} // namespace jobman::test
