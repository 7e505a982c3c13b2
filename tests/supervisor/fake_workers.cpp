#include "fake_workers.hpp"

#include "jobman/util/system.hpp"

#include <algorithm>
#include <fstream>

namespace jobman::test {

void FakeWorkers::set_unreachable(const std::string& node, bool unreachable) {
  const std::lock_guard lock(mutex_);
  if (unreachable) {
    unreachable_.insert(node);
  } else {
    unreachable_.erase(node);
  }
}

void FakeWorkers::fail_next_setup(bool module_failed) {
  const std::lock_guard lock(mutex_);
  setup_failure_ = module_failed;
}

void FakeWorkers::set_preflight(int worker, int code, const std::string& output) {
  const std::lock_guard lock(mutex_);
  preflight_[worker] = {code, output};
}

void FakeWorkers::print(const std::string& job, int attempt, int worker, const std::string& text) {
  const std::lock_guard lock(mutex_);
  workloads_[key(job, attempt)][worker].unstreamed += text;
}

void FakeWorkers::exit(const std::string& job, int attempt, int code, std::optional<int> worker) {
  const std::lock_guard lock(mutex_);
  for (auto& [w, load] : workloads_[key(job, attempt)]) {
    if ((!worker || *worker == w) && load.state == remote::WorkloadState::running) {
      load.state = remote::WorkloadState::exited;
      load.exit_code = code;
    }
  }
}

void FakeWorkers::vanish(const std::string& job, int attempt) {
  const std::lock_guard lock(mutex_);
  for (auto& [w, load] : workloads_[key(job, attempt)]) {
    if (load.state == remote::WorkloadState::running) {
      load.state = remote::WorkloadState::vanished;
    }
  }
}

void FakeWorkers::fail_stream(const std::string& job, int attempt, int worker) {
  const std::lock_guard lock(mutex_);
  stream_failures_.emplace(key(job, attempt), worker);
}

FakeWorkload FakeWorkers::workload(const std::string& job, int attempt, int worker) const {
  const std::lock_guard lock(mutex_);
  const auto it = workloads_.find(key(job, attempt));
  if (it == workloads_.end() || !it->second.contains(worker)) {
    return {};
  }
  return it->second.at(worker);
}

bool FakeWorkers::has_news(const std::string& job, int attempt) const {
  const std::lock_guard lock(mutex_);
  const auto it = workloads_.find(key(job, attempt));
  if (it == workloads_.end()) {
    return true; // Nothing runs: a stream ends at once.
  }
  if (std::any_of(stream_failures_.begin(), stream_failures_.end(),
                  [&](const auto& failure) { return failure.first == it->first; })) {
    return true; // A stream that fails ends at once.
  }
  if (const auto node = node_of_.find(it->first); node != node_of_.end() && unreachable_.contains(node->second)) {
    return true;
  }
  return std::any_of(it->second.begin(), it->second.end(), [](const auto& entry) {
    return entry.second.state != remote::WorkloadState::running || !entry.second.unstreamed.empty();
  });
}

std::vector<std::string> FakeWorkers::take_calls() {
  const std::lock_guard lock(mutex_);
  return std::exchange(calls_, {});
}

std::map<std::string, std::string> FakeWorkers::launch_env(const std::string& job, int attempt) const {
  const std::lock_guard lock(mutex_);
  const auto it = launch_env_.find(key(job, attempt));
  return it == launch_env_.end() ? std::map<std::string, std::string>{} : it->second;
}

int FakeWorkers::launches(const std::string& job, int attempt) const {
  const std::lock_guard lock(mutex_);
  const auto it = launches_.find(key(job, attempt));
  return it == launches_.end() ? 0 : it->second;
}

remote::WorkerStatus FakeWorkers::status(const remote::SliceTarget& target, const std::string& workload,
                                         int worker) const {
  remote::WorkerStatus s;
  s.worker = worker;
  if (unreachable_.contains(target.node)) {
    s.state = remote::WorkloadState::unreachable;
    s.exit_code = 255;
    s.diagnostic = "Connection to " + target.node + " closed by remote host.";
    return s;
  }
  const auto it = workloads_.find(workload);
  if (it == workloads_.end() || !it->second.contains(worker)) {
    s.state = remote::WorkloadState::absent;
    return s;
  }
  const auto& load = it->second.at(worker);
  s.state = load.state;
  s.exit_code = load.exit_code;
  return s;
}

std::vector<remote::WorkerSetup> FakeWorkers::set_up(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                     const remote::SetupPlan& plan, const std::filesystem::path& dir,
                                                     std::chrono::milliseconds) {
  const std::lock_guard lock(mutex_);
  calls_.push_back("setup " + target.node);
  const auto failure = std::exchange(setup_failure_, std::nullopt);
  std::vector<remote::WorkerSetup> results;
  for (const int w : workers) {
    remote::WorkerSetup r;
    r.worker = w;
    if (unreachable_.contains(target.node) || (failure && !*failure && w == 0)) {
      r.exit_code = 255;
      r.error = "could not connect to worker " + std::to_string(w);
    } else {
      r.exit_code = 0;
      for (const auto& module : plan.modules) {
        r.modules.push_back({module, remote::ModuleOutcome::unchanged});
      }
      if (failure && *failure && w == 0) {
        r.modules.push_back({"script", remote::ModuleOutcome::failed});
        r.exit_code = 1;
        r.error = "script failed (exit 1)";
      }
    }
    util::write_file_atomic(dir / ("setup-" + std::to_string(w) + ".log"), r.error + "\n", 0600);
    results.push_back(r);
  }
  return results;
}

std::vector<remote::WorkerRun> FakeWorkers::run(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                const std::string&, std::chrono::milliseconds) {
  const std::lock_guard lock(mutex_);
  calls_.push_back("run " + target.node);
  std::vector<remote::WorkerRun> runs;
  for (const int w : workers) {
    remote::WorkerRun r;
    r.worker = w;
    if (unreachable_.contains(target.node)) {
      r.exit_code = 255;
    } else if (const auto it = preflight_.find(w); it != preflight_.end()) {
      r.exit_code = it->second.first;
      r.output = it->second.second;
    } else {
      r.exit_code = 0;
    }
    runs.push_back(r);
  }
  return runs;
}

std::vector<remote::WorkerStatus> FakeWorkers::launch(const remote::SliceTarget& target,
                                                      const std::vector<int>& workers, const remote::LaunchSpec& spec,
                                                      std::chrono::milliseconds) {
  const std::lock_guard lock(mutex_);
  const auto k = key(spec.id.job_id, spec.id.attempt);
  calls_.push_back("launch " + k);
  launch_env_[k] = spec.extra_env;
  std::vector<remote::WorkerStatus> statuses;
  for (const int w : workers) {
    if (!unreachable_.contains(target.node)) {
      auto& load = workloads_[k][w];
      if (load.state == remote::WorkloadState::absent) {
        load.state = remote::WorkloadState::running;
        node_of_[k] = target.node;
        ++launches_[k];
        auto s = status(target, k, w);
        s.launched = true;
        statuses.push_back(s);
        continue;
      }
    }
    statuses.push_back(status(target, k, w));
  }
  return statuses;
}

std::vector<remote::WorkerStatus> FakeWorkers::query(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                     const remote::WorkloadId& id, std::chrono::milliseconds) {
  const std::lock_guard lock(mutex_);
  const auto k = key(id.job_id, id.attempt);
  calls_.push_back("query " + k);
  std::vector<remote::WorkerStatus> statuses;
  for (const int w : workers) {
    statuses.push_back(status(target, k, w));
  }
  return statuses;
}

std::vector<remote::WorkerStatus> FakeWorkers::stop(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                    const remote::WorkloadId& id, std::chrono::milliseconds,
                                                    std::chrono::milliseconds) {
  const std::lock_guard lock(mutex_);
  const auto k = key(id.job_id, id.attempt);
  calls_.push_back("stop " + k);
  std::vector<remote::WorkerStatus> statuses;
  for (const int w : workers) {
    bool signalled = false;
    if (!unreachable_.contains(target.node)) {
      if (auto& load = workloads_[k][w]; load.state == remote::WorkloadState::running) {
        load.state = remote::WorkloadState::exited;
        load.exit_code = 143;
        signalled = true;
      }
    }
    statuses.push_back(status(target, k, w));
    statuses.back().signalled = signalled;
  }
  return statuses;
}

std::vector<remote::WorkerRun> FakeWorkers::stacks(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                   const remote::WorkloadId& id, std::chrono::milliseconds) {
  const std::lock_guard lock(mutex_);
  const auto k = key(id.job_id, id.attempt);
  calls_.push_back("stacks " + k);
  std::vector<remote::WorkerRun> runs;
  for (const int w : workers) {
    remote::WorkerRun run;
    run.worker = w;
    const auto s = status(target, k, w);
    if (s.state == remote::WorkloadState::unreachable) {
      run.exit_code = 255;
    } else {
      run.exit_code = 0;
      run.output = k + " on worker " + std::to_string(w) + ": " + std::string(remote::to_string(s.state)) + "\n";
    }
    runs.push_back(run);
  }
  return runs;
}

std::vector<remote::StreamEnd> FakeWorkers::stream(const remote::SliceTarget& target, const std::vector<int>& workers,
                                                   const remote::WorkloadId& id, const std::filesystem::path& dir,
                                                   std::stop_token, const remote::LineSink& sink) {
  std::vector<std::pair<int, std::string>> delivered;
  std::vector<remote::StreamEnd> ends;
  {
    const std::lock_guard lock(mutex_);
    const auto k = key(id.job_id, id.attempt);
    calls_.push_back("stream " + k);
    for (const int w : workers) {
      remote::StreamEnd end;
      end.worker = w;
      const auto s = status(target, k, w);
      if (stream_failures_.erase({k, w}) > 0) {
        end.exit_code = 1;
        end.diagnostic = "ERROR: (gcloud.compute.tpus.tpu-vm.ssh) HTTPError 503: Service Unavailable";
      } else if (s.state == remote::WorkloadState::unreachable) {
        end.exit_code = 255;
        end.diagnostic = s.diagnostic;
      } else {
        auto& load = workloads_[k][w];
        end.bytes = load.unstreamed.size();
        delivered.emplace_back(w, std::exchange(load.unstreamed, {}));
        end.exit_code =
            load.state == remote::WorkloadState::running ? 0 : (s.state == remote::WorkloadState::absent ? 1 : 0);
      }
      ends.push_back(end);
    }
  }
  for (const auto& [w, text] : delivered) {
    if (text.empty()) {
      continue;
    }
    std::ofstream(remote::worker_log_path(dir, w), std::ios::app) << text;
    if (sink) {
      sink(w, text);
    }
  }
  return ends;
}

} // namespace jobman::test
