// bench/remote_ops [ACCELERATOR] [RUNS]: on one mock slice (default v4-32, 4 hosts), times the remote layer's
// operations over OpenSSH on every host at once (one shared connection per host): a full setup (ssh identity, gcsfuse
// mount, conda environment) and a second setup that finds nothing to do, launch, query, stop, and how long a line
// written on a worker takes to reach the local log while attached. Last line: hosts=.. setup_first_ms=..
// setup_again_ms=.. launch_ms=.. query_ms=.. stop_ms=.. line_lag_p50_ms=.. line_lag_p99_ms=..
#include "jobman/config/loader.hpp"
#include "jobman/remote/setup.hpp"
#include "jobman/remote/workload.hpp"
#include "jobman/util/system.hpp"
#include "stats.hpp"
#include "support/mock_slice.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr auto kStep = std::chrono::minutes(5);

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

using jobman::bench::median;
using jobman::bench::quantile;

// Realtime clock in microseconds, as the workload's `date +%s%6N` prints it.
long long now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

int main(int argc, char** argv) {
  const std::string accelerator = argc > 1 ? argv[1] : "v4-32";
  const int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  jobman::test::TempDir dir;
  jobman::test::MockSlice slice(dir, accelerator);
  if (!slice.ready()) {
    std::fprintf(stderr, "remote_ops: the mock slice did not come up: %s\n", slice.server().first_line().c_str());
    return 1;
  }
  const auto target = slice.target();
  std::vector<int> workers;
  for (int w = 0; !slice.worker_dir(w).empty(); ++w) {
    workers.push_back(w);
  }
  fs::create_directories(dir / "state" / "buckets" / "data");
  dir.write("id_bench", "-----BEGIN OPENSSH PRIVATE KEY-----\nbench\n-----END OPENSSH PRIVATE KEY-----\n");
  dir.write("id_bench.pub", "ssh-ed25519 AAAAbench bench@example\n");
  dir.write("env.yaml", "name: bench\ndependencies:\n  - python=3.10\n");
  dir.write("job.yaml", "job:\n  name: bench\n  env_type: conda\ntpu:\n  accelerator: " + accelerator +
                            "\n  name: b\n  zone: us-central2-b\n  version: tpu-ubuntu2204-base\n"
                            "gcsfuse:\n  bucket_name: data\n  mount_path: ~/bucket\n"
                            "ssh:\n  identities:\n    - private_key: " +
                            (dir / "id_bench").string() + "\n      public_key: " + (dir / "id_bench.pub").string() +
                            "\n      config_entry: \"Host 10.*\"\n"
                            "conda:\n  name: bench\n  config_file: env.yaml\n"
                            "command:\n  cmd: true\n");
  const auto config = jobman::config::load_job_configs((dir / "job.yaml").string()).at(0);
  const auto plan = jobman::remote::plan_setup(config);

  std::vector<double> setup_first;
  std::vector<double> setup_again;
  std::vector<double> launch;
  std::vector<double> query;
  std::vector<double> stop;
  std::vector<double> lags;
  for (int run = 0; run < runs; ++run) {
    const auto attempt_dir = dir / "jobs" / std::to_string(run);
    // A fresh slice state for the first setup: what the previous run installed is removed.
    jobman::remote::run_on_workers(
        target, workers, "fusermount -u ~/bucket 2>/dev/null; rm -rf ~/.ssh ~/.jobman ~/miniconda3 ~/bucket", kStep);
    auto start = Clock::now();
    for (const auto& worker : jobman::remote::run_setup(target, workers, plan, attempt_dir, kStep)) {
      if (!worker.ok() || !worker.changed()) {
        std::fprintf(stderr, "remote_ops: setup on worker %d: %s\n", worker.worker, worker.error.c_str());
        return 1;
      }
    }
    setup_first.push_back(ms_since(start));
    start = Clock::now();
    for (const auto& worker : jobman::remote::run_setup(target, workers, plan, attempt_dir, kStep)) {
      if (!worker.ok() || worker.changed()) {
        std::fprintf(stderr, "remote_ops: second setup on worker %d changed something\n", worker.worker);
        return 1;
      }
    }
    setup_again.push_back(ms_since(start));

    jobman::remote::LaunchSpec spec;
    spec.id = {"bench", run + 1};
    spec.num_workers = static_cast<int>(workers.size());
    // Every 20 ms, worker 0's realtime clock in microseconds; the other workers wait.
    spec.command = "[ \"$JOBMAN_WORKER_ID\" = 0 ] || exec sleep 600\nwhile true; do date +%s%6N; sleep 0.02; done";
    start = Clock::now();
    jobman::remote::launch(target, workers, spec, kStep);
    launch.push_back(ms_since(start));
    start = Clock::now();
    jobman::remote::query(target, workers, spec.id, kStep);
    query.push_back(ms_since(start));

    // Attach worker 0 for a second and measure how late each line arrives in the local log.
    std::stop_source stopper;
    // Lines written before the stream was up are backlog, not latency: only later ones count.
    const long long counted_from = now_us() + 300'000;
    std::thread watcher([&] { jobman::remote::attach(target, {0}, spec.id, attempt_dir, stopper.get_token()); });
    const auto log = jobman::remote::worker_log_path(attempt_dir, 0);
    std::size_t read_upto = 0;
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (Clock::now() < until) {
      std::ifstream in(log);
      in.seekg(static_cast<std::streamoff>(read_upto));
      std::string line;
      while (std::getline(in, line)) {
        if (in.eof()) {
          break;
        }
        read_upto += line.size() + 1;
        if (const long long written = std::atoll(line.c_str()); written >= counted_from) {
          lags.push_back(static_cast<double>(now_us() - written) / 1000.0);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stopper.request_stop();
    watcher.join();

    start = Clock::now();
    jobman::remote::stop(target, workers, spec.id, std::chrono::seconds(5), kStep);
    stop.push_back(ms_since(start));
  }
  std::sort(lags.begin(), lags.end());
  std::printf("hosts=%zu setup_first_ms=%.0f setup_again_ms=%.0f launch_ms=%.0f query_ms=%.0f stop_ms=%.0f "
              "line_lag_p50_ms=%.1f line_lag_p99_ms=%.1f\n",
              workers.size(), median(setup_first), median(setup_again), median(launch), median(query), median(stop),
              quantile(lags, 0.5), quantile(lags, 0.99));
  return 0;
}
