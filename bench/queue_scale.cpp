// bench/queue_scale [TASKS] [WORKERS] [RUN_TASKS] [TICK] [TASK_SECONDS]: the task queue at scale.
//
// 1. `jobman status` over a store of WORKERS workers serving (each with a task) and TASKS queued tasks, built through
//    the store API: whole processes (fork, exec, read stdout, wait), median of 21 after a warm-up, with a supervisor
//    present (this process holds the daemon lock, as `jobman daemon` does), as for list_scale.
// 2. Live, on a mock cloud at time scale 1000: WORKERS workers started with `jobman worker start` and one
//    `jobman daemon --tick TICK` (default 1s); once they serve, RUN_TASKS tasks (`sleep TASK_SECONDS`, default 2) are
//    queued at once, a backlog. From the store afterwards: for every run, how long after it could start (queued, and
//    its worker free) its worker claimed it, in ticks; and for every worker, the share of its serving time (from its
//    first task's claim to its last task's end) that a task held it. Also the daemon's CPU share and peak RSS.
// QUEUE_SCALE_KEEP=1 keeps a copy of the status store for profiling.
// Last line: tasks=.. workers=.. status_ms=.. status_json_ms=.. tick_ms=.. claim_p50_ticks=.. claim_p99_ticks=..
// claim_max_ticks=.. busy_min=.. busy_median=.. cpu_share=.. peak_rss_mib=..
#include "jobman/config/loader.hpp"
#include "jobman/config/task_script.hpp"
#include "jobman/config/worker_config.hpp"
#include "jobman/core/daemon.hpp"
#include "jobman/core/pool.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "process_stats.hpp"
#include "stats.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using jobman::bench::cpu_seconds;
using jobman::bench::median;
using jobman::bench::proc_text;
using jobman::bench::quantile;
using jobman::domain::JobKind;
using jobman::domain::Phase;

constexpr const char* kZone = "us-central2-b";

// One whole `jobman ARGS` process with `home` (autostart off); returns wall milliseconds and the bytes it printed.
double time_run(const fs::path& home, const std::vector<std::string>& args, std::size_t& bytes) {
  const auto start = std::chrono::steady_clock::now();
  auto child = jobman::util::ProcessBuilder({jobman::test::jobman_binary()})
                   .args(args)
                   .env("JOBMAN_HOME", home.string())
                   .env("JOBMAN_AUTOSTART", "0")
                   .output(jobman::util::Stream::pipe())
                   .error(jobman::util::Stream::null())
                   .spawn();
  char buf[1 << 16];
  bytes = 0;
  ssize_t r = 0;
  while ((r = ::read(child.out_fd, buf, sizeof buf)) > 0) {
    bytes += static_cast<std::size_t>(r);
  }
  jobman::util::close_fd(child.out_fd);
  if (const int status = jobman::util::wait_exit(child.pid); status != 0) {
    std::fprintf(stderr, "queue_scale: jobman %s exited with status %d\n", jobman::util::join(args, " ").c_str(),
                 status);
    std::exit(1);
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// "50ms", "1s" or "2" (seconds), as `jobman daemon --tick` takes it, in milliseconds.
double tick_milliseconds(const std::string& text) {
  const double number = std::atof(text.c_str());
  return text.ends_with("ms") ? number : number * 1000;
}

// Part 1's store: `workers` workers serving, each holding one of the `tasks` tasks; the rest queued.
void build_store(const jobman::test::TempDir& dir, const fs::path& home, int tasks, int workers) {
  auto store = jobman::store::JobStore::open(home / "jobman.db");
  jobman::config::LoadOptions load;
  load.zone_optional = true;
  const auto script = dir.write("task.sh", "#!/bin/bash\n#JOBMAN --accelerator=v4-8\n#JOBMAN --max-retries=2\n"
                                           "python train.py --lr 3e-4 --steps 2000\n");
  const auto request = jobman::config::read_task_script(script.string());
  jobman::core::TaskToSubmit task;
  task.config = jobman::config::parse_job_configs(request.config_yaml, script.string(), load).front();
  std::vector<jobman::config::JobConfig> worker_configs;
  for (int w = 0; w < workers; ++w) {
    jobman::config::WorkerFlags flags;
    flags.name = "v4-8-us-central2-b-" + std::to_string(w + 1);
    flags.accelerator = "v4-8";
    flags.zone = kZone;
    worker_configs.push_back(
        jobman::config::parse_job_configs(jobman::config::worker_config_yaml(flags), "worker", {}).front());
  }
  const auto worker_ids = jobman::core::start_workers(store, worker_configs, "bench");
  for (int done = 0; done < tasks;) {
    std::vector<jobman::core::TaskToSubmit> batch;
    for (int i = 0; i < 1000 && done < tasks; ++i, ++done) {
      task.config.job.name = "sweep-lr3e-4-run-" + std::to_string(done);
      batch.push_back(task);
    }
    jobman::core::submit_tasks(store, batch, "bench");
  }
  for (const auto id : worker_ids) {
    const auto name = "v4-8-us-central2-b-" + std::to_string(id) + "-a1";
    store.attempts().begin(id, jobman::domain::Placement{name, name, kZone, "v4-8", 1, std::nullopt, {}});
    jobman::domain::PhaseChange running;
    running.to = Phase::running;
    running.reason = "set up on 1 host(s); taking tasks";
    store.jobs().transition(id, std::nullopt, running);
    store.events().record_observation(id, "ACTIVE", name + " is ACTIVE", "");
    jobman::store::WorkerOffer offer;
    offer.worker_id = id;
    offer.accelerator = "v4-8";
    offer.zone = kZone;
    offer.pricing = jobman::domain::Pricing::spot;
    offer.placement = store.attempts().of(id).back().placement();
    if (const auto claimed = store.queue().claim(offer, "bench", 15'000, jobman::util::now_ms())) {
      store.jobs().transition(*claimed, Phase::setup, running);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  const int tasks = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10'000;
  const int workers = argc > 2 ? std::max(1, std::atoi(argv[2])) : 50;
  const int run_tasks = argc > 3 ? std::max(0, std::atoi(argv[3])) : 500;
  const std::string tick = argc > 4 ? argv[4] : "1s";
  const std::string task_seconds = argc > 5 ? argv[5] : "2";
  jobman::test::TempDir dir;

  // ---- 1. status over a big queue ----
  const fs::path big = dir / "status-home";
  const auto build_start = std::chrono::steady_clock::now();
  build_store(dir, big, tasks, workers);
  std::fprintf(stderr, "built a store of %d workers and %d tasks in %.1f s\n", workers, tasks,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count());
  std::vector<double> status_ms;
  std::vector<double> json_ms;
  std::size_t status_bytes = 0;
  std::size_t json_bytes = 0;
  {
    ::setenv("JOBMAN_HOME", big.c_str(), 1);
    const jobman::core::DaemonPresence daemon; // A supervisor runs: status only probes its lock.
    time_run(big, {"status"}, status_bytes);
    for (int i = 0; i < 21; ++i) {
      status_ms.push_back(time_run(big, {"status"}, status_bytes));
    }
    for (int i = 0; i < 7; ++i) {
      json_ms.push_back(time_run(big, {"status", "--json"}, json_bytes));
    }
    ::unsetenv("JOBMAN_HOME");
  }
  std::printf("status: %zu bytes, median %.2f ms (min %.2f, max %.2f); status --json: %zu bytes, median %.1f ms\n",
              status_bytes, median(status_ms), *std::min_element(status_ms.begin(), status_ms.end()),
              *std::max_element(status_ms.begin(), status_ms.end()), json_bytes, median(json_ms));
  if (std::getenv("QUEUE_SCALE_KEEP") != nullptr) {
    const fs::path kept = fs::temp_directory_path() / ("queue-scale-home-" + std::to_string(::getpid()));
    fs::copy(big, kept, fs::copy_options::recursive);
    std::fprintf(stderr, "kept the status store: JOBMAN_HOME=%s\n", kept.c_str());
  }
  if (run_tasks == 0) {
    std::printf("tasks=%d workers=%d status_ms=%.2f status_json_ms=%.1f\n", tasks, workers, median(status_ms),
                median(json_ms));
    return 0;
  }

  // ---- 2. the live queue on the mock ----
  auto mock = jobman::test::start_test_mock(
      dir, jobman::test::test_world(2, std::string("  ") + kZone + ":\n    v4:\n      spot: {chips: " +
                                           std::to_string(workers * 4 + 8) + "}\n"));
  if (mock->port() <= 0) {
    std::fprintf(stderr, "queue_scale: the mock did not start: %s\n", mock->first_line().c_str());
    return 1;
  }
  const fs::path home = dir / "home";
  const auto env = jobman::test::mock_home_environment(*mock, home, dir / "config");
  const jobman::test::RunOptions options{env, "", ""};
  jobman::test::LineReadingProcess daemon({jobman::test::jobman_binary(), "daemon", "--tick", tick}, env,
                                          dir / "daemon.log", std::chrono::seconds(120));
  for (int w = 0; w < workers; ++w) {
    const auto started = jobman::test::run_jobman({"worker", "start", "-a", "v4-8", "-z", kZone}, options);
    if (started.exit_code != 0) {
      std::fprintf(stderr, "queue_scale: worker start failed: %s\n", started.err.c_str());
      return 1;
    }
  }
  auto store = jobman::store::JobStore::open(home / "jobman.db");
  const auto serving = [&] {
    jobman::store::JobFilter filter;
    filter.kinds = {JobKind::worker};
    filter.phases = {Phase::running};
    return static_cast<int>(store.jobs().list(filter).size());
  };
  if (!jobman::test::eventually([&] { return serving() == workers; }, std::chrono::minutes(30))) {
    std::fprintf(stderr, "queue_scale: only %d of %d workers serve; see %s\n", serving(), workers,
                 (dir / "daemon.log").c_str());
    return 1;
  }
  const pid_t pid = static_cast<pid_t>(std::stol(proc_text(home / "daemon.lock")));
  std::string values;
  for (int i = 0; i < run_tasks; ++i) {
    values += (i == 0 ? "" : ",") + std::to_string(i);
  }
  const auto config =
      dir.write("task.yaml", "job:\n  name: short\ntpu:\n  accelerator: v4-8\n  zone: " + std::string(kZone) +
                                 "\ncommand:\n  cmd: sleep " + task_seconds + "\nvars:\n  i: 0\n");
  const double cpu_before = cpu_seconds(pid);
  const auto window_start = std::chrono::steady_clock::now();
  const auto submitted =
      jobman::test::run_jobman({"task", "submit", config.string(), "--sweep", "vars.i=" + values}, options);
  if (submitted.exit_code != 0) {
    std::fprintf(stderr, "queue_scale: submit failed: %s\n", submitted.err.c_str());
    return 1;
  }
  const auto finished = [&] {
    jobman::store::JobFilter filter;
    filter.kinds = {JobKind::task};
    filter.phases = {Phase::succeeded};
    return static_cast<int>(store.jobs().list(filter).size());
  };
  if (!jobman::test::eventually([&] { return finished() == run_tasks; }, std::chrono::minutes(60))) {
    std::fprintf(stderr, "queue_scale: %d of %d tasks succeeded; see %s\n", finished(), run_tasks,
                 (dir / "daemon.log").c_str());
    return 1;
  }
  const double window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
  const double cpu_share = (cpu_seconds(pid) - cpu_before) / window_s;
  const long peak_kib = jobman::bench::status_kib(pid, "VmHWM");

  // Every run, by worker, in order: when it could have started (queued, its worker free), when it did, when it ended.
  struct Run {
    std::int64_t queued = 0;
    std::int64_t claimed = 0;
    std::int64_t ended = 0;
  };
  std::map<std::int64_t, std::vector<Run>> by_worker;
  jobman::store::JobFilter all_tasks;
  all_tasks.kinds = {JobKind::task};
  for (const auto& t : store.jobs().list(all_tasks)) {
    for (const auto& a : store.attempts().of(t.id)) {
      if (a.worker_id && a.ended_ms) {
        by_worker[*a.worker_id].push_back({t.created_ms, a.started_ms, *a.ended_ms});
      }
    }
  }
  const double tick_ms = tick_milliseconds(tick);
  std::vector<double> claim_ticks;
  std::vector<double> busy;
  for (auto& [worker, runs] : by_worker) {
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.claimed < b.claimed; });
    std::int64_t free_since = 0;
    std::int64_t held = 0;
    for (const auto& run : runs) {
      const auto eligible = std::max(run.queued, free_since);
      claim_ticks.push_back(static_cast<double>(std::max<std::int64_t>(0, run.claimed - eligible)) / tick_ms);
      held += run.ended - run.claimed;
      free_since = run.ended;
    }
    const auto span = runs.back().ended - runs.front().claimed;
    busy.push_back(span > 0 ? static_cast<double>(held) / static_cast<double>(span) : 1.0);
  }
  std::sort(claim_ticks.begin(), claim_ticks.end());
  std::sort(busy.begin(), busy.end());
  daemon.send(SIGTERM);
  daemon.finish();
  std::printf("live: %d tasks of %s s on %d workers in %.1f s; %zu workers ran tasks\n", run_tasks,
              task_seconds.c_str(), workers, window_s, by_worker.size());
  std::printf("tasks=%d workers=%d status_ms=%.2f status_json_ms=%.1f tick_ms=%.0f claim_p50_ticks=%.2f "
              "claim_p99_ticks=%.2f claim_max_ticks=%.2f busy_min=%.3f busy_median=%.3f cpu_share=%.3f "
              "peak_rss_mib=%.1f\n",
              tasks, workers, median(status_ms), median(json_ms), tick_ms, median(claim_ticks),
              quantile(claim_ticks, 0.99), claim_ticks.empty() ? 0.0 : claim_ticks.back(),
              busy.empty() ? 0.0 : busy.front(), median(busy), cpu_share, static_cast<double>(peak_kib) / 1024.0);
  return 0;
}
