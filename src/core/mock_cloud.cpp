#include "jobman/core/mock_cloud.hpp"

#include "jobman/cloud/http.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/file.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace jobman::core {

namespace fs = std::filesystem;

namespace {

// An exclusive flock on a file, released on destruction.
class FileLock {
public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      throw Error("cannot lock " + path.string() + ": " + std::strerror(errno));
    }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

private:
  int fd_;
};

fs::path server_file() {
  return mock_cloud_directory() / "server.json";
}

// The mock's program: beside this binary in a build tree (mock_cloud/jobman-mock-cloud) or an install (bin/).
fs::path mock_cloud_program() {
  if (auto given = util::getenv_nonempty("JOBMAN_MOCK_CLOUD_PROGRAM")) {
    return *given;
  }
  const auto dir = util::executable_dir();
  for (const auto& candidate : {dir / "mock_cloud" / "jobman-mock-cloud", dir / "jobman-mock-cloud"}) {
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  throw Error("the bundled mock cloud is not installed: neither " +
              (dir / "mock_cloud" / "jobman-mock-cloud").string() + " nor " + (dir / "jobman-mock-cloud").string() +
              " exists; set a project to use Google Cloud");
}

// The mock's admin metrics at `url` (GET /mock/v1/metrics with the admin token in `token_file`), within a few
// seconds; nullopt when there is no token or the server does not answer 200.
std::optional<cloud::HttpResponse> admin_metrics(const std::string& url, const fs::path& token_file) {
  std::string token;
  try {
    token = std::string(util::trim(util::read_file(token_file)));
  } catch (const Error&) {
    return std::nullopt;
  }
  cloud::HttpOptions options;
  options.connect_timeout = std::chrono::milliseconds(1000);
  options.request_timeout = std::chrono::milliseconds(2000);
  cloud::HttpClient http(options);
  cloud::HttpRequest request;
  request.url = url + "/mock/v1/metrics";
  request.headers.emplace_back("Authorization", "Bearer " + token);
  auto answer = http.send(request);
  if (answer.status != 200) {
    return std::nullopt;
  }
  return answer;
}

// The server answers its metrics path, with the admin token this home's mock made, within a second.
bool answers(const std::string& url) {
  return admin_metrics(url, mock_cloud_admin_token_path()).has_value();
}

// True when process `pid` is a mock serving this home (its --state-dir is this home's): the pid the server file names
// may have gone to another process since that mock exited (--idle-exit).
bool serves_this_home(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(file, arg, '\0')) {
    args.push_back(arg);
  }
  const auto state = std::find(args.begin(), args.end(), "--state-dir");
  return state != args.end() && state + 1 != args.end() && fs::path(*(state + 1)) == mock_cloud_directory() / "state";
}

std::optional<MockCloudServer> read_server_file() {
  std::error_code ec;
  if (!fs::exists(server_file(), ec)) {
    return std::nullopt;
  }
  const auto json = nlohmann::json::parse(util::read_file(server_file()), nullptr, false);
  if (!json.is_object() || !json.contains("url") || !json.contains("pid")) {
    return std::nullopt;
  }
  MockCloudServer server{json["url"].get<std::string>(), json["pid"].get<long>()};
  if (server.pid <= 0 || ::kill(static_cast<pid_t>(server.pid), 0) != 0 ||
      !serves_this_home(static_cast<pid_t>(server.pid))) {
    return std::nullopt;
  }
  return server;
}

// How long the bundled mock waits, with no request and no slice alive, before it exits: the supervisor's own idle
// exit (core/daemon.cpp), so neither outlives the other's use by much.
constexpr const char* kIdleExitSeconds = "600";

// Starts the server detached from this process (its own session, reparented to init) and returns its pid and the
// address it printed.
MockCloudServer start_server(const config::Settings& settings) {
  const auto dir = mock_cloud_directory();
  const auto program = mock_cloud_program();
  util::ensure_directory(dir / "state", 0700);
  const auto out_path = dir / "server.out";
  const auto log_path = dir / "server.log";
  std::error_code ec;
  fs::remove(out_path, ec);
  std::ostringstream scale;
  scale << settings.mock_time_scale;
  pid_t server_pid = -1;
  try {
    // The program is a path, never looked up on PATH (a bare name is in the working directory).
    server_pid = util::ProcessBuilder({program.string(), "--state-dir", (dir / "state").string(), "--time-scale",
                                       scale.str(), "--idle-exit", kIdleExitSeconds, "--write-service-account-key",
                                       mock_cloud_service_account_key_path().string()})
                     .program(program.has_parent_path() ? program.string() : (fs::path(".") / program).string())
                     .input(util::Stream::null())
                     .output(util::Stream::file(out_path, util::FileMode::truncate))
                     .error(util::Stream::file(log_path, util::FileMode::append))
                     .spawn_detached();
  } catch (const Error& e) {
    throw Error(std::string("cannot start the mock cloud: ") + e.what());
  }
  if (server_pid <= 0) {
    throw Error("cannot start the mock cloud " + program.string());
  }
  // Its first line is "listening on http://127.0.0.1:PORT".
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string url;
  while (url.empty()) {
    const std::string text = fs::exists(out_path, ec) ? util::read_file(out_path) : std::string();
    if (const auto eol = text.find('\n'); eol != std::string::npos) {
      const std::string line = text.substr(0, eol);
      constexpr std::string_view prefix = "listening on ";
      if (!line.starts_with(prefix)) {
        throw Error("the mock cloud said '" + line + "'; see " + log_path.string());
      }
      url = line.substr(prefix.size());
      break;
    }
    if (::kill(server_pid, 0) != 0 || std::chrono::steady_clock::now() > deadline) {
      throw Error("the mock cloud did not start; see " + log_path.string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  MockCloudServer server{url, server_pid};
  const nlohmann::json record = {{"url", url}, {"pid", server.pid}, {"started_ms", util::now_ms()}};
  util::write_file_atomic(server_file(), record.dump() + "\n", 0600);
  return server;
}

} // namespace

fs::path mock_cloud_directory() {
  return config::jobman_home() / "mock";
}

fs::path mock_cloud_admin_token_path() {
  return mock_cloud_directory() / "state" / "admin-token";
}

fs::path mock_cloud_service_account_key_path() {
  return mock_cloud_directory() / "state" / "service-account.json";
}

std::optional<MockCloudServer> running_mock_cloud() {
  auto server = read_server_file();
  if (server && answers(server->url)) {
    return server;
  }
  return std::nullopt;
}

MockCloudServer ensure_mock_cloud(const config::Settings& settings, std::ostream& notice) {
  if (auto server = running_mock_cloud()) {
    return *server;
  }
  util::ensure_directory(mock_cloud_directory(), 0700);
  const FileLock lock(mock_cloud_directory() / "start.lock");
  // Another process may have started one while this one waited for the lock.
  if (auto server = running_mock_cloud()) {
    return *server;
  }
  if (auto stale = read_server_file()) {
    // Alive but not answering: a hung server holds the state directory; end it.
    ::kill(static_cast<pid_t>(stale->pid), SIGKILL);
  }
  auto server = start_server(settings);
  notice << "jobman: no cloud project is set, so jobs run on the bundled mock cloud at " << server.url << " (time x"
         << settings.mock_time_scale << ", state in " << mock_cloud_directory().string() << "); set 'project' in "
         << config::settings_path() << " to use Google Cloud\n";
  return server;
}

std::map<std::string, std::map<std::string, std::map<std::string, TierCapacity>>>
mock_cloud_capacity(const config::Settings& settings) {
  std::map<std::string, std::map<std::string, std::map<std::string, TierCapacity>>> capacity;
  if (settings.cloud != config::CloudKind::mock) {
    return capacity;
  }
  std::string url;
  fs::path token_file;
  if (settings.api_endpoint.empty()) {
    const auto server = running_mock_cloud();
    if (!server) {
      return capacity;
    }
    url = server->url;
    token_file = mock_cloud_admin_token_path();
  } else if (auto given = util::getenv_nonempty("JOBMAN_MOCK_ADMIN_TOKEN_FILE")) {
    url = settings.api_endpoint;
    for (const std::string_view suffix : {"/v2/", "/v2", "/"}) {
      if (url.ends_with(suffix)) {
        url.resize(url.size() - suffix.size());
        break;
      }
    }
    token_file = *given;
  } else {
    return capacity;
  }
  try {
    const auto answer = admin_metrics(url, token_file);
    if (!answer) {
      return capacity;
    }
    const auto metrics = nlohmann::json::parse(answer->body, nullptr, false);
    if (!metrics.is_object() || !metrics.contains("capacity") || !metrics["capacity"].is_array()) {
      return capacity;
    }
    for (const auto& pool : metrics["capacity"]) {
      // A pool is a tier the zone has, even while its capacity is 0 (a request then waits in the queue).
      if (pool.is_object()) {
        const auto number = [&pool](const char* key) {
          const auto it = pool.find(key);
          return it != pool.end() && it->is_number_integer() ? it->get<int>() : 0;
        };
        capacity[pool.value("zone", "")][pool.value("generation", "")][pool.value("tier", "")] =
            TierCapacity{number("chips"), number("quota")};
      }
    }
  } catch (const std::exception&) {
    capacity.clear(); // Not asked: the check goes on without tiers.
  }
  return capacity;
}

std::map<std::string, std::map<std::string, std::set<std::string>>>
tiers_of(const std::map<std::string, std::map<std::string, std::map<std::string, TierCapacity>>>& capacity) {
  std::map<std::string, std::map<std::string, std::set<std::string>>> tiers;
  for (const auto& [zone, generations] : capacity) {
    for (const auto& [generation, pools] : generations) {
      auto& names = tiers[zone][generation];
      for (const auto& [tier, size] : pools) {
        names.insert(tier);
      }
    }
  }
  return tiers;
}

} // namespace jobman::core
