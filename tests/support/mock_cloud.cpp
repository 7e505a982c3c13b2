#include "support/mock_cloud.hpp"

#include "jobman/util/process.hpp"
#include "support/run.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <poll.h>
#include <stdexcept>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

namespace jobman::test {

std::string mock_cloud_binary() {
  return JOBMAN_MOCK_BINARY;
}

MockCloudProcess::MockCloudProcess(const std::vector<std::string>& args) {
  auto child = util::ProcessBuilder({mock_cloud_binary()}).args(args).output(util::Stream::pipe()).spawn();
  pid_ = child.pid;
  const auto read_line = [&child] {
    std::string line;
    char c = 0;
    while (::read(child.out_fd, &c, 1) == 1 && c != '\n') {
      line += c;
    }
    return line;
  };
  first_line_ = read_line();
  const std::string prefix = "listening on http://127.0.0.1:";
  if (first_line_.rfind(prefix, 0) == 0) {
    port_ = std::stoi(first_line_.substr(prefix.size()));
    const std::string second = read_line();
    const std::string token_prefix = "admin token in ";
    if (second.rfind(token_prefix, 0) == 0) {
      admin_token_file_ = second.substr(token_prefix.size());
      std::ifstream in(admin_token_file_);
      std::getline(in, admin_token_);
    }
  }
  util::close_fd(child.out_fd);
}

MockCloudProcess::~MockCloudProcess() {
  stop();
}

int MockCloudProcess::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    exit_code_ = util::wait_exit(pid_);
    pid_ = -1;
  }
  return exit_code_;
}

std::optional<int> MockCloudProcess::stop_within(std::chrono::milliseconds patience) {
  if (pid_ <= 0) {
    return exit_code_;
  }
  const auto code = signal_and_wait(pid_, SIGTERM, patience);
  exit_code_ = code.value_or(128 + SIGKILL);
  pid_ = -1;
  return code;
}

std::optional<int> signal_and_wait(pid_t pid, int signal, std::chrono::milliseconds patience) {
  // A child is not reaped until wait_exit below, so its pid stays its own while it is awaited.
  ::kill(pid, signal);
  const bool exited = exits_within(pid, patience);
  if (!exited) {
    ::kill(pid, SIGKILL);
  }
  const int code = util::wait_exit(pid);
  return exited ? std::optional<int>(code) : std::nullopt;
}

HttpAnswer http_call(httplib::Client& client, const std::string& method, const std::string& path,
                     const nlohmann::json& body, const httplib::Headers& headers) {
  const std::string text = body.is_null() ? "" : body.dump();
  auto result = method == "GET"     ? client.Get(path, headers)
                : method == "POST"  ? client.Post(path, headers, text, "application/json")
                : method == "PUT"   ? client.Put(path, headers, text, "application/json")
                : method == "PATCH" ? client.Patch(path, headers, text, "application/json")
                                    : client.Delete(path, headers);
  if (!result) {
    return {};
  }
  return {result->status, nlohmann::json::parse(result->body, nullptr, false), result->body, result->headers};
}

HttpAnswer inject_loss_spike(httplib::Client& client, const MockCloudProcess& mock, const std::string& location,
                             const std::string& node, double factor, int steps, std::optional<int> worker) {
  nlohmann::json body = {{"factor", factor}, {"steps", steps}};
  if (worker) {
    body["worker"] = *worker;
  }
  return http_call(client, "POST", "/mock/v1/" + location + "/nodes/" + node + ":injectLossSpike", body,
                   mock.admin_headers());
}

HttpAnswer inject_hang(httplib::Client& client, const MockCloudProcess& mock, const std::string& location,
                       const std::string& node, std::optional<int> worker) {
  nlohmann::json body = nlohmann::json::object();
  if (worker) {
    body["worker"] = *worker;
  }
  return http_call(client, "POST", "/mock/v1/" + location + "/nodes/" + node + ":injectHang", body,
                   mock.admin_headers());
}

std::string test_world(int seconds, const std::string& zones) {
  const auto delay = std::to_string(seconds) + "s";
  return "lifecycle: {creating: " + delay + ", suspending: " + delay + ", deleting: " + delay + "}\n" +
         "provisioning:\n  default: {distribution: fixed, seconds: " + delay + "}\nzones:\n" + zones;
}

std::unique_ptr<MockCloudProcess> start_test_mock(const TempDir& dir, const std::string& world, int seed,
                                                  const std::vector<std::string>& extra) {
  const auto config = dir.write("world.yaml", world);
  // A static token the mock trusts, as a user would set JOBMAN_ACCESS_TOKEN.
  dir.write("state/access-tokens", "test-token\n");
  std::vector<std::string> args = {
      "--port",        "0",           "--time-scale",          "1000", "--seed", std::to_string(seed), "--config",
      config.string(), "--state-dir", (dir / "state").string()};
  // The hosts read what the test hands them here (a gate file, say); they cannot write it.
  args.insert(args.end(), {"--visible-to-hosts", dir.path().string()});
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<MockCloudProcess>(args);
}

std::map<std::string, std::string> mock_home_environment(const MockCloudProcess& mock,
                                                         const std::filesystem::path& home,
                                                         const std::filesystem::path& config) {
  return {{"JOBMAN_HOME", home.string()},
          {"XDG_CONFIG_HOME", config.string()},
          {"JOBMAN_CLOUD", "mock"},
          {"JOBMAN_PROJECT", ""},
          {"JOBMAN_API_ENDPOINT", "http://127.0.0.1:" + std::to_string(mock.port())},
          {"JOBMAN_MOCK_TIME_SCALE", "1000"},
          {"JOBMAN_AUTOSTART", "0"},
          {"JOBMAN_GCLOUD", ""},
          {"JOBMAN_MOCK_ADMIN_TOKEN_FILE", mock.admin_token_file()}};
}

bool eventually(const std::function<bool()>& check, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (check()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return check();
}

} // namespace jobman::test
