// What the chaos programs share: a jobman home on its own mock cloud (behind a proxy that can drop connections),
// supervisors to start and kill, the mock's admin calls, and the checks made after a run.
#pragma once

#include "drop_proxy.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/job_store.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"

#include <filesystem>
#include <httplib.h>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace jobman::chaos {

namespace fs = std::filesystem;

inline constexpr const char* kZone = "us-central2-b";

// Prints a line to stderr at once, prefixed with the seconds since the program started.
void say(const std::string& line);

// A directory under $TMPDIR, removed by the destructor unless keep() was called.
class ScratchDir {
public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }
  void keep() { keep_ = true; }

private:
  fs::path path_;
  bool keep_ = false;
};

// Writes `text` to `path`.
void write_text(const fs::path& path, const std::string& text);
// The file's contents, or "" when it cannot be read.
std::string read_text(const fs::path& path);

// The checksum an uninterrupted run of systolic-train with `steps` steps prints (computed once per step count).
std::string uninterrupted_checksum(int steps);

using test::kill_processes_of;
using test::processes_of;

// A jobman home on a mock cloud of its own. Commands reach the mock through a DropProxy; admin calls go direct.
class ChaosCloud {
public:
  // `world` is the mock's world description (see support::test_world); `seed` seeds the mock and the proxy.
  ChaosCloud(const fs::path& dir, const std::string& world, std::uint64_t seed);
  ~ChaosCloud();
  ChaosCloud(const ChaosCloud&) = delete;
  ChaosCloud& operator=(const ChaosCloud&) = delete;

  [[nodiscard]] bool started() const { return mock_ && mock_->port() > 0; }
  [[nodiscard]] const fs::path& home() const { return home_; }
  [[nodiscard]] const std::map<std::string, std::string>& env() const { return env_; }
  DropProxy& proxy() { return *proxy_; }

  // Runs jobman with this home's environment.
  test::RunResult jobman(const std::vector<std::string>& args) const;

  // Puts the store on the PostgreSQL server `url` names (JOBMAN_STORE, for every command and supervisor started
  // from now on) instead of the home's SQLite file.
  void use_store(const std::string& url);
  // Starts `jobman daemon`; returns its slot. Thread-safe. With `machine`, it runs in a home of its own named so
  // (as on another machine sharing a PostgreSQL store); a new supervisor of the same machine takes that home over.
  std::size_t start_supervisor(const std::string& tick = "50ms", const std::string& lease_ttl = "2s",
                               const std::string& machine = "");
  // SIGKILLs the supervisor in `slot` and reaps it; false when it was not running.
  bool kill_supervisor(std::size_t slot);
  // When each supervisor killed so far was sent its SIGKILL (ms since the epoch), by process id.
  std::map<pid_t, std::int64_t> killed_at_ms() const;
  // The machine a slot's supervisor runs as ("" for the chaos home).
  std::string machine_of(std::size_t slot) const;
  // The slots of the supervisors still running.
  std::vector<std::size_t> live_supervisors();
  // SIGTERMs every supervisor and waits for each; returns how many did not exit 0.
  int stop_supervisors();
  // Every supervisor's stderr, concatenated.
  std::string supervisor_logs() const;

  // Admin calls to the mock (direct, never through the proxy); each returns the HTTP status (0: no answer).
  nlohmann::json metrics();
  int preempt(const std::string& node);
  int set_faults(double rate, const std::vector<int>& codes, int latency_ms);
  int set_capacity(const std::string& tier, int chips);
  // The mock holds no queued resource, node or worker process.
  bool mock_is_empty();

  // A read-only view of the store (opened on first use, in this thread only).
  store::JobStore& store();

private:
  fs::path dir_;
  fs::path home_;
  std::unique_ptr<test::MockCloudProcess> mock_;
  std::unique_ptr<DropProxy> proxy_;
  std::unique_ptr<httplib::Client> admin_;
  std::mutex admin_mutex_;
  std::map<std::string, std::string> env_;
  mutable std::mutex supervisors_mutex_;
  std::vector<std::unique_ptr<test::LineReadingProcess>> supervisors_;
  std::vector<bool> supervisor_live_;
  std::vector<std::string> supervisor_machine_;
  std::map<pid_t, std::int64_t> killed_at_ms_;
  std::string store_location_;
  std::optional<store::JobStore> store_;
};

// The number of "launched attempt K" events for each attempt K of the job.
std::map<int, int> launches_per_attempt(const std::vector<domain::EventRecord>& events);
// The number of "attempt K started" events for each attempt K of the job.
std::map<int, int> starts_per_attempt(const std::vector<domain::EventRecord>& events);

} // namespace jobman::chaos
