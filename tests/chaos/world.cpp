#include "world.hpp"

#include "jobman/util/system.hpp"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace jobman::chaos {

using nlohmann::json;

namespace {

const auto program_start = std::chrono::steady_clock::now();

} // namespace

void say(const std::string& line) {
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - program_start).count();
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "[%8.1fs] ", seconds);
  std::cerr << stamp << line << std::endl;
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  if (!keep_) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string uninterrupted_checksum(int steps) {
  static std::mutex mutex;
  static std::map<int, std::string> known;
  std::lock_guard lock(mutex);
  if (auto found = known.find(steps); found != known.end()) {
    return found->second;
  }
  const auto tool = (fs::path(test::mock_cloud_binary()).parent_path() / "tools" / "systolic-train").string();
  const auto run = test::run_program({tool, "--steps", std::to_string(steps)});
  const auto at = run.out.rfind("checksum=");
  auto sum = at == std::string::npos ? std::string("none") : run.out.substr(at + 9, 16);
  known.emplace(steps, sum);
  return sum;
}

ChaosCloud::ChaosCloud(const fs::path& dir, const std::string& world, std::uint64_t seed)
    : dir_(dir), home_(dir / "home") {
  write_text(dir / "world.yaml", world);
  write_text(dir / "state" / "access-tokens", "chaos-token\n");
  mock_ = std::make_unique<test::MockCloudProcess>(
      std::vector<std::string>{"--port", "0", "--time-scale", "1000", "--seed", std::to_string(seed), "--config",
                               (dir / "world.yaml").string(), "--state-dir", (dir / "state").string()});
  if (!started()) {
    return;
  }
  proxy_ = std::make_unique<DropProxy>(mock_->port(), seed);
  admin_ = std::make_unique<httplib::Client>("127.0.0.1", mock_->port());
  admin_->set_read_timeout(std::chrono::seconds(30));
  env_ = {{"JOBMAN_HOME", home_.string()},
          {"XDG_CONFIG_HOME", (dir / "config").string()},
          {"JOBMAN_CLOUD", "mock"},
          {"JOBMAN_PROJECT", ""},
          {"JOBMAN_API_ENDPOINT", "http://127.0.0.1:" + std::to_string(proxy_->port())},
          {"JOBMAN_MOCK_TIME_SCALE", "1000"},
          {"JOBMAN_AUTOSTART", "0"},
          {"JOBMAN_GCLOUD", ""},
          {"JOBMAN_MOCK_ADMIN_TOKEN_FILE", mock_->admin_token_file()}};
}

ChaosCloud::~ChaosCloud() {
  stop_supervisors();
  store_.reset();
  kill_processes_of(home_);
  for (const auto& machine : std::set<std::string>(supervisor_machine_.begin(), supervisor_machine_.end())) {
    if (!machine.empty()) {
      kill_processes_of(dir_ / machine);
    }
  }
}

test::RunResult ChaosCloud::jobman(const std::vector<std::string>& args) const {
  return test::run_jobman(args, test::RunOptions{env_, "", ""});
}

void ChaosCloud::use_store(const std::string& url) {
  store_.reset();
  store_location_ = url;
  env_["JOBMAN_STORE"] = url;
}

std::size_t ChaosCloud::start_supervisor(const std::string& tick, const std::string& lease_ttl,
                                         const std::string& machine) {
  std::lock_guard lock(supervisors_mutex_);
  const auto slot = supervisors_.size();
  auto env = env_;
  if (!machine.empty()) {
    env["JOBMAN_HOME"] = (dir_ / machine).string();
  }
  supervisors_.push_back(std::make_unique<test::LineReadingProcess>(
      std::vector<std::string>{test::jobman_binary(), "daemon", "--tick", tick, "--lease-ttl", lease_ttl}, env,
      dir_ / ("supervisor-" + std::to_string(slot) + ".log")));
  supervisor_live_.push_back(true);
  supervisor_machine_.push_back(machine);
  return slot;
}

std::map<pid_t, std::int64_t> ChaosCloud::killed_at_ms() const {
  std::lock_guard lock(supervisors_mutex_);
  return killed_at_ms_;
}

std::string ChaosCloud::machine_of(std::size_t slot) const {
  std::lock_guard lock(supervisors_mutex_);
  return slot < supervisor_machine_.size() ? supervisor_machine_[slot] : "";
}

bool ChaosCloud::kill_supervisor(std::size_t slot) {
  std::lock_guard lock(supervisors_mutex_);
  if (slot >= supervisors_.size() || !supervisor_live_[slot]) {
    return false;
  }
  const pid_t pid = supervisors_[slot]->pid();
  // The time of the signal, not of the reaping: a dead supervisor's leases are ended at once (by its neighbour's next
  // look), so on a loaded machine another supervisor adopts its jobs before finish() returns.
  killed_at_ms_[pid] = util::now_ms();
  supervisors_[slot]->send(SIGKILL);
  supervisors_[slot]->finish();
  supervisor_live_[slot] = false;
  return true;
}

std::vector<std::size_t> ChaosCloud::live_supervisors() {
  std::lock_guard lock(supervisors_mutex_);
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < supervisors_.size(); ++i) {
    if (supervisor_live_[i]) {
      live.push_back(i);
    }
  }
  return live;
}

int ChaosCloud::stop_supervisors() {
  std::lock_guard lock(supervisors_mutex_);
  int unclean = 0;
  for (std::size_t i = 0; i < supervisors_.size(); ++i) {
    if (supervisor_live_[i]) {
      supervisors_[i]->send(SIGTERM);
    }
  }
  for (std::size_t i = 0; i < supervisors_.size(); ++i) {
    if (supervisor_live_[i]) {
      unclean += supervisors_[i]->finish() == 0 ? 0 : 1;
      supervisor_live_[i] = false;
    }
  }
  return unclean;
}

std::string ChaosCloud::supervisor_logs() const {
  std::lock_guard lock(supervisors_mutex_);
  std::string all;
  for (std::size_t i = 0; i < supervisors_.size(); ++i) {
    all += read_text(dir_ / ("supervisor-" + std::to_string(i) + ".log"));
  }
  return all;
}

json ChaosCloud::metrics() {
  std::lock_guard lock(admin_mutex_);
  return test::http_call(*admin_, "GET", "/mock/v1/metrics", nullptr, mock_->admin_headers()).body;
}

int ChaosCloud::preempt(const std::string& node) {
  std::lock_guard lock(admin_mutex_);
  return test::http_call(*admin_, "POST",
                         std::string("/mock/v1/projects/jobman-mock/locations/") + kZone + "/nodes/" + node +
                             ":preempt",
                         json::object(), mock_->admin_headers())
      .status;
}

int ChaosCloud::set_faults(double rate, const std::vector<int>& codes, int latency_ms) {
  std::lock_guard lock(admin_mutex_);
  return test::http_call(*admin_, "POST", "/mock/v1/faults",
                         {{"rate", rate}, {"codes", codes}, {"latency_ms", latency_ms}}, mock_->admin_headers())
      .status;
}

int ChaosCloud::set_capacity(const std::string& tier, int chips) {
  std::lock_guard lock(admin_mutex_);
  return test::http_call(*admin_, "PUT", "/mock/v1/capacity",
                         {{"zone", kZone}, {"generation", "v4"}, {"tier", tier}, {"chips", chips}},
                         mock_->admin_headers())
      .status;
}

bool ChaosCloud::mock_is_empty() {
  const auto m = metrics();
  if (!m.is_object()) {
    return false;
  }
  const auto count = [](const json& by_state) {
    int n = 0;
    for (const auto& [state, value] : by_state.items()) {
      n += value.get<int>();
    }
    return n;
  };
  return count(m["queuedResources"]) == 0 && count(m["nodes"]) == 0 && m.value("processes_running", -1) == 0;
}

store::JobStore& ChaosCloud::store() {
  if (!store_) {
    store_.emplace(store_location_.empty() ? store::JobStore::open(home_ / "jobman.db")
                                           : store::JobStore::open_location(store_location_));
  }
  return *store_;
}

std::map<int, int> launches_per_attempt(const std::vector<domain::EventRecord>& events) {
  std::map<int, int> launches;
  constexpr std::string_view prefix = "launched attempt ";
  for (const auto& e : events) {
    if (e.message.starts_with(prefix)) {
      launches[std::atoi(e.message.c_str() + prefix.size())] += 1;
    }
  }
  return launches;
}

std::map<int, int> starts_per_attempt(const std::vector<domain::EventRecord>& events) {
  std::map<int, int> starts;
  constexpr std::string_view prefix = "attempt ";
  for (const auto& e : events) {
    if (e.kind == "attempt" && e.message.starts_with(prefix) && e.message.find(" started") != std::string::npos) {
      starts[std::atoi(e.message.c_str() + prefix.size())] += 1;
    }
  }
  return starts;
}

} // namespace jobman::chaos
