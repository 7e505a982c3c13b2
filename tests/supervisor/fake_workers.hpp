// The workers of the fake slices, in memory: each workload's state on each worker, the output it has printed and
// not yet streamed home, and whether a node's workers can be reached. A record of every call is kept.
#pragma once

#include "operations.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace jobman::test {

// One workload on one worker.
struct FakeWorkload {
  remote::WorkloadState state = remote::WorkloadState::absent;
  int exit_code = -1;
  std::string unstreamed; // Output printed and not yet streamed home.
};

// WorkerOps over FakeWorkloads. Calls are recorded as "setup NODE", "run NODE", "launch JOB/ATTEMPT",
// "query JOB/ATTEMPT", "stop JOB/ATTEMPT", "stream JOB/ATTEMPT", "stacks JOB/ATTEMPT".
class FakeWorkers final : public core::supervision::WorkerOps {
public:
  // ---- what the test sets ----
  // The workers of `node` cannot be reached (ssh exits 255) until set back.
  void set_unreachable(const std::string& node, bool unreachable);
  // The next setup on any node fails: in a module of the config (`module_failed`), or by a lost connection.
  void fail_next_setup(bool module_failed);
  // The preflight exits with `code` on `worker` from now on (0 to pass again).
  void set_preflight(int worker, int code, const std::string& output);
  // The workload of job `job`, attempt `attempt` prints `text` on `worker`.
  void print(const std::string& job, int attempt, int worker, const std::string& text);
  // It exits with `code` on `worker`, or on every worker it runs on when `worker` is nullopt.
  void exit(const std::string& job, int attempt, int code, std::optional<int> worker = std::nullopt);
  // Its process vanishes on every worker (the host rebooted).
  void vanish(const std::string& job, int attempt);
  // The next stream of it fails at once on `worker`, as gcloud does on an HTTP 503 (exit 1, no output), while the
  // workload runs on.
  void fail_stream(const std::string& job, int attempt, int worker);

  // ---- what the test reads ----
  [[nodiscard]] FakeWorkload workload(const std::string& job, int attempt, int worker) const;
  // Whether a stream of this workload would return now: it ended everywhere, a worker cannot be reached, or it has
  // output not yet streamed home.
  [[nodiscard]] bool has_news(const std::string& job, int attempt) const;
  // The calls so far, in order, and then forgets them.
  std::vector<std::string> take_calls();
  // The variables jobman added to the workload's environment at its last launch (LaunchSpec::extra_env).
  [[nodiscard]] std::map<std::string, std::string> launch_env(const std::string& job, int attempt) const;
  // How many times the workload was launched on some worker.
  [[nodiscard]] int launches(const std::string& job, int attempt) const;

  // ---- WorkerOps ----
  std::vector<remote::WorkerSetup> set_up(const remote::SliceTarget& target, const std::vector<int>& workers,
                                          const remote::SetupPlan& plan, const std::filesystem::path& dir,
                                          std::chrono::milliseconds timeout) override;
  std::vector<remote::WorkerRun> run(const remote::SliceTarget& target, const std::vector<int>& workers,
                                     const std::string& command, std::chrono::milliseconds timeout) override;
  std::vector<remote::WorkerStatus> launch(const remote::SliceTarget& target, const std::vector<int>& workers,
                                           const remote::LaunchSpec& spec, std::chrono::milliseconds timeout) override;
  std::vector<remote::WorkerStatus> query(const remote::SliceTarget& target, const std::vector<int>& workers,
                                          const remote::WorkloadId& id, std::chrono::milliseconds timeout) override;
  std::vector<remote::WorkerStatus> stop(const remote::SliceTarget& target, const std::vector<int>& workers,
                                         const remote::WorkloadId& id, std::chrono::milliseconds grace,
                                         std::chrono::milliseconds timeout) override;
  // Each reachable worker's report names the workload and the worker: "JOB/ATTEMPT on worker W: ...".
  std::vector<remote::WorkerRun> stacks(const remote::SliceTarget& target, const std::vector<int>& workers,
                                        const remote::WorkloadId& id, std::chrono::milliseconds timeout) override;
  std::vector<remote::StreamEnd> stream(const remote::SliceTarget& target, const std::vector<int>& workers,
                                        const remote::WorkloadId& id, const std::filesystem::path& dir,
                                        std::stop_token stop, const remote::LineSink& sink) override;

private:
  static std::string key(const std::string& job, int attempt) { return job + "/" + std::to_string(attempt); }
  [[nodiscard]] remote::WorkerStatus status(const remote::SliceTarget& target, const std::string& workload,
                                            int worker) const;

  mutable std::mutex mutex_;
  std::map<std::string, std::map<int, FakeWorkload>> workloads_; // By key(), then by worker.
  std::map<std::string, std::string> node_of_;                   // The node each workload was launched on.
  std::map<std::string, int> launches_;
  std::map<std::string, std::map<std::string, std::string>> launch_env_;
  std::set<std::string> unreachable_;
  std::optional<bool> setup_failure_; // The next setup's: a module failed (true) or the connection (false).
  std::map<int, std::pair<int, std::string>> preflight_;
  std::set<std::pair<std::string, int>> stream_failures_; // By key(), then worker: the next stream fails there.
  std::vector<std::string> calls_;
};

} // namespace jobman::test
