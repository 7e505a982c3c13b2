// A jobman home on its own mock cloud for end-to-end tests of the supervisor: commands run with the home's
// environment, daemons started and killed, the store and the mock looked at. Each test gets a fresh home and mock.
#pragma once

#include "jobman/domain/job.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace jobman::test {

inline constexpr const char* kZone = "us-central2-b";
inline constexpr const char* kLocation = "/mock/v1/projects/jobman-mock/locations/us-central2-b";
// Waits for things the supervisor does: generous, since sanitizer builds on two cores are slow.
inline constexpr std::chrono::seconds kPatience{120};

// The checksum an uninterrupted run of `steps` steps prints.
std::string uninterrupted_checksum(int steps);

// A jobman home on its own mock cloud, with helpers to run commands, start and kill supervisors, and look at the
// store and the mock.
class SupervisorHome : public ::testing::Test {
protected:
  // A home on a mock whose world has two zones of v4 (spot and on-demand): us-central2-b and us-east1-d.
  SupervisorHome()
      : SupervisorHome("  us-central2-b:\n    v4:\n      spot: {chips: 64}\n      on_demand: {chips: 32}\n"
                       "  us-east1-d:\n    v4:\n      spot: {chips: 64}\n      on_demand: {chips: 32}\n") {}
  // A home on a mock whose world has `zones` (the YAML of test_world's zones, two hosts per machine).
  explicit SupervisorHome(const std::string& zones) : mock(start_test_mock(dir, test_world(2, zones))) {}

  void SetUp() override {
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", mock->port());
    env = mock_home_environment(*mock, home, dir / "config");
  }

  void TearDown() override {
    daemons.clear();
    kill_processes_of(home);
  }

  // Runs jobman with this home's environment.
  RunResult jm(const std::vector<std::string>& args) { return run_jobman(args, RunOptions{env, "", ""}); }

  // Starts `jobman daemon` (fast ticks, short leases unless told otherwise); returns its index in `daemons`.
  std::size_t start_daemon(const std::string& lease_ttl = "2s") {
    daemons.push_back(std::make_unique<LineReadingProcess>(
        std::vector<std::string>{jobman_binary(), "daemon", "--tick", "50ms", "--lease-ttl", lease_ttl}, env,
        dir / ("daemon-" + std::to_string(daemons.size()) + ".log")));
    return daemons.size() - 1;
  }

  // A config for a job on a v4 slice running `command`, with `extra` YAML appended.
  std::string config(const std::string& command, const std::string& pricing = "spot",
                     const std::string& accelerator = "v4-8", const std::string& extra = "") {
    static int counter = 0;
    std::string text = "job:\n  name: e2e\n"
                       "tpu:\n  accelerator: " +
                       accelerator + "\n  zone: " + kZone + "\n  pricing: " + pricing +
                       "\n"
                       "gcsfuse:\n  bucket_name: e2e-bucket\n  mount_path: ~/bucket\n"
                       "command:\n  cmd: |\n    " +
                       command + "\n  workers: all\n" + extra;
    return dir.write("job-" + std::to_string(++counter) + ".yaml", text).string();
  }

  // The training command: `steps` steps of `step_ms`, checkpoints in the bucket every 20 steps.
  static std::string training(int steps, int step_ms) {
    return "systolic-train --steps " + std::to_string(steps) + " --step-time-ms " + std::to_string(step_ms) +
           " --ckpt-dir ~/bucket/ckpt-$JOBMAN_JOB_ID --ckpt-every 20";
  }

  std::int64_t create(const std::string& config_path) {
    const auto r = jm({"create", config_path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::stoll(r.out);
  }

  store::JobStore& db() {
    if (!store) {
      store.emplace(store::JobStore::open(home / "jobman.db"));
    }
    return *store;
  }

  domain::JobRecord job(std::int64_t id) { return db().jobs().get(id); }

  // `jobman wait ID` must end with `exit_code` within `seconds`; returns the job as it ended.
  domain::JobRecord wait_for(std::int64_t id, int exit_code = 0, int seconds = 120) {
    const auto waited = jm({"wait", std::to_string(id), "--timeout", std::to_string(seconds)});
    EXPECT_EQ(waited.exit_code, exit_code) << waited.out << waited.err;
    auto ended = job(id);
    if (exit_code == 0) {
      EXPECT_EQ(ended.phase, domain::Phase::succeeded) << ended.phase_reason;
    }
    return ended;
  }

  bool await_phase(std::int64_t id, domain::Phase phase) {
    return eventually([&] { return db().jobs().find(id) && db().jobs().get(id).phase == phase; }, kPatience);
  }

  std::filesystem::path worker_log(std::int64_t id, int attempt, int worker = 0) {
    char name[16];
    std::snprintf(name, sizeof name, "%06lld", static_cast<long long>(id));
    return home / "jobs" / name / ("attempt-" + std::to_string(attempt)) /
           ("worker-" + std::to_string(worker) + ".log");
  }

  bool await_log(std::int64_t id, int attempt, const std::string& text) {
    return eventually([&] { return file_text(worker_log(id, attempt, 0)).find(text) != std::string::npos; }, kPatience);
  }

  // The checksum each of the attempt's workers printed last.
  std::vector<std::string> checksums(std::int64_t id, int attempt, int workers) {
    std::vector<std::string> sums;
    for (int w = 0; w < workers; ++w) {
      const auto text = file_text(worker_log(id, attempt, w));
      const auto at = text.rfind("checksum=");
      sums.push_back(at == std::string::npos ? std::string("missing") : text.substr(at + 9, 16));
    }
    return sums;
  }

  nlohmann::json metrics() {
    return http_call(*client, "GET", "/mock/v1/metrics", nullptr, mock->admin_headers()).body;
  }

  // The mock holds no queued resource, node or process.
  bool mock_is_empty() {
    auto m = metrics();
    const auto count = [](const nlohmann::json& by_state) {
      int n = 0;
      for (const auto& [state, value] : by_state.items()) {
        n += value.get<int>();
      }
      return n;
    };
    return m.is_object() && count(m["queuedResources"]) == 0 && count(m["nodes"]) == 0 &&
           m["processes_running"].get<int>() == 0;
  }

  bool preempt(const std::string& node, const std::string& zone = kZone) {
    return http_call(*client, "POST", "/mock/v1/projects/jobman-mock/locations/" + zone + "/nodes/" + node + ":preempt",
                     nlohmann::json::object(), mock->admin_headers())
               .status == 200;
  }

  // The node of the job's current attempt.
  std::string node_of(std::int64_t id) { return db().attempts().of(id).back().node; }

  TempDir dir;
  std::filesystem::path home = dir / "home";
  std::unique_ptr<MockCloudProcess> mock;
  std::unique_ptr<httplib::Client> client;
  std::map<std::string, std::string> env;
  std::vector<std::unique_ptr<LineReadingProcess>> daemons;
  std::optional<store::JobStore> store;
};

} // namespace jobman::test
