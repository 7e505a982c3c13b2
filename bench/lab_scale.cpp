// bench/lab_scale [RUNNING] [WAITING] [WORKERS] [TASKS] [PREEMPTIONS] [TICK]: a lab's queue on one PostgreSQL store
// (a private server started here), driven by two `jobman daemon`s with homes of their own, as two machines would.
// The live records (defaults: 10,000 together):
//   RUNNING jobs (400) running `sleep` on spot v4-8 slices in us-central2-b, their output streamed home;
//   WAITING jobs (1,600) whose queued resources wait for spot capacity in europe-west4-b, which has none;
//   WORKERS workers (20) on v6e-1 slices in us-east1-d, each running a task (`sleep`);
//   TASKS tasks (7,980) in all, the workers' included: the rest wait in the store's queue.
// Once all of it is in place, it preempts PREEMPTIONS (10) running slices, one every 3 s, waits until every job runs
// again, and samples each daemon's CPU time over that window and its peak RSS (VmHWM) at the end. The API figures
// are the daemons' own counters over their whole lives, printed when they stop, summed over both. Last line:
// live=.. zones=.. tick_ms=.. driven_a=.. driven_b=.. cpu_a=.. cpu_b=.. rss_a_mib=.. rss_b_mib=.. lists_per_tick=..
// requests_per_tick=.. transitions_per_tick=.. setup_s=..
#include "jobman/core/daemon.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/util/system.hpp"
#include "process_stats.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/postgres_server.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using jobman::bench::cpu_seconds;
using jobman::bench::daemon_stats;
using jobman::bench::proc_text;
using jobman::bench::status_kib;
using jobman::domain::JobKind;
using jobman::domain::Phase;

constexpr const char* kRunningZone = "us-central2-b";
constexpr const char* kWaitingZone = "europe-west4-b";
constexpr const char* kWorkerZone = "us-east1-d";

int arg(int argc, char** argv, int index, int fallback) {
  return argc > index ? std::max(0, std::atoi(argv[index])) : fallback;
}

int count(const jobman::store::JobStore& store, std::vector<JobKind> kinds, std::vector<Phase> phases) {
  jobman::store::JobFilter filter;
  filter.kinds = std::move(kinds);
  filter.phases = std::move(phases);
  return static_cast<int>(store.jobs().list(filter).size());
}

} // namespace

int main(int argc, char** argv) {
  const int running_jobs = arg(argc, argv, 1, 400);
  const int waiting_jobs = arg(argc, argv, 2, 1'600);
  const int workers = arg(argc, argv, 3, 20);
  const int tasks = std::max(arg(argc, argv, 4, 7'980), workers);
  const int preemptions = arg(argc, argv, 5, 10);
  const std::string tick = argc > 6 ? argv[6] : "1s";
  jobman::test::TempDir dir;

  std::unique_ptr<jobman::test::PostgresServer> server;
  try {
    server = std::make_unique<jobman::test::PostgresServer>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lab_scale: the PostgreSQL server did not start: %s\n", e.what());
    return 1;
  }
  const auto url = server->admin_url(server->create_database());

  const std::string world = std::string("  ") + kRunningZone +
                            ":\n    v4:\n      spot: {chips: " + std::to_string(running_jobs * 4 + 64) + "}\n  " +
                            kWaitingZone + ":\n    v5litepod:\n      spot: {chips: 0, quota: 100000}\n  " +
                            kWorkerZone + ":\n    v6e:\n      spot: {chips: " + std::to_string(workers + 8) + "}\n";
  auto mock = jobman::test::start_test_mock(dir, jobman::test::test_world(2, world));
  if (mock->port() <= 0) {
    std::fprintf(stderr, "lab_scale: the mock did not start: %s\n", mock->first_line().c_str());
    return 1;
  }
  httplib::Client admin("127.0.0.1", mock->port());
  auto env = jobman::test::mock_home_environment(*mock, dir / "machine-a", dir / "config");
  env["JOBMAN_STORE"] = url;
  const jobman::test::RunOptions options{env, "", ""};
  auto store = jobman::store::JobStore::open_location(url);

  // The two supervisors first, as a lab runs them: the work arrives while they run.
  std::array<std::unique_ptr<jobman::test::LineReadingProcess>, 2> daemons;
  const std::array<std::string, 2> machines{"machine-a", "machine-b"};
  for (std::size_t m = 0; m < daemons.size(); ++m) {
    auto daemon_env = env;
    daemon_env["JOBMAN_HOME"] = (dir / machines[m]).string();
    daemons[m] = std::make_unique<jobman::test::LineReadingProcess>(
        std::vector<std::string>{jobman::test::jobman_binary(), "daemon", "--tick", tick}, daemon_env,
        dir / (machines[m] + ".log"), std::chrono::seconds(120));
  }
  std::array<pid_t, 2> pids{};
  for (std::size_t m = 0; m < daemons.size(); ++m) {
    // The lab store's supervisor lock in that machine's home (daemon-KEY.lock: a store other than the home's own).
    ::setenv("JOBMAN_HOME", (dir / machines[m]).c_str(), 1);
    ::setenv("JOBMAN_STORE", url.c_str(), 1);
    const auto lock = jobman::core::daemon_lock_path();
    if (!jobman::test::eventually([&] { return !proc_text(lock).empty(); }, std::chrono::seconds(60))) {
      std::fprintf(stderr, "lab_scale: %s's daemon did not start; see %s.log\n", machines[m].c_str(),
                   (dir / machines[m]).c_str());
      return 1;
    }
    pids[m] = static_cast<pid_t>(std::stol(proc_text(lock)));
  }

  const auto start = std::chrono::steady_clock::now();
  bool failed = false;
  const auto submit = [&](const std::vector<std::string>& args) {
    const auto done = jobman::test::run_jobman(args, options);
    if (done.exit_code != 0) {
      std::fprintf(stderr, "lab_scale: jobman %s failed: %s\n", args.front().c_str(), done.err.c_str());
      failed = true;
    }
  };
  // N copies of a config in sweeps of at most 1,000 (the most one sweep may hold).
  const auto submit_many = [&](const std::vector<std::string>& command, const std::string& config, int n) {
    for (int first = 0; first < n && !failed; first += 1'000) {
      std::string values;
      for (int i = first; i < std::min(n, first + 1'000); ++i) {
        values += (i == first ? "" : ",") + std::to_string(i);
      }
      auto args = command;
      args.insert(args.end(), {config, "--sweep", "vars.i=" + values});
      submit(args);
    }
  };
  const auto job_config = [&](const std::string& name, const char* accelerator, const char* zone) {
    return dir
        .write(name + ".yaml", "job:\n  name: " + name + "\ntpu:\n  accelerator: " + accelerator + "\n  zone: " + zone +
                                   "\n  pricing: spot\ncommand:\n  cmd: sleep 100000\nvars:\n  i: 0\n")
        .string();
  };
  submit_many({"create"}, job_config("running", "v4-8", kRunningZone), running_jobs);
  submit_many({"create"}, job_config("waiting", "v5litepod-1", kWaitingZone), waiting_jobs);
  for (int w = 0; w < workers && !failed; ++w) {
    submit({"worker", "start", "-a", "v6e-1", "-z", kWorkerZone});
  }
  submit_many({"task", "submit"}, job_config("task", "v6e-1", kWorkerZone), tasks);
  if (failed) {
    return 1; // The daemons, the mock and the server stop as their owners go out of scope.
  }
  const std::function<bool()> in_place = [&] {
    return count(store, {JobKind::job}, {Phase::running}) == running_jobs &&
           count(store, {JobKind::worker}, {Phase::running}) == workers &&
           count(store, {JobKind::task}, {Phase::running}) == workers;
  };
  if (!jobman::test::eventually(in_place, std::chrono::minutes(60))) {
    std::fprintf(stderr, "lab_scale: not all in place after an hour: %d jobs, %d workers and %d tasks running\n",
                 count(store, {JobKind::job}, {Phase::running}), count(store, {JobKind::worker}, {Phase::running}),
                 count(store, {JobKind::task}, {Phase::running}));
    return 1;
  }
  const double setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int live = count(
      store, {}, {Phase::pending, Phase::queued, Phase::provisioning, Phase::setup, Phase::running, Phase::recovering});
  std::printf("in place after %.1f s: %d live records\n", setup_s, live);

  // Steady state with preemptions, one every 3 s on a random running job.
  std::array<double, 2> cpu_before{};
  for (std::size_t m = 0; m < pids.size(); ++m) {
    cpu_before[m] = cpu_seconds(pids[m]);
  }
  const auto window_start = std::chrono::steady_clock::now();
  std::mt19937 random(11);
  for (int p = 0; p < preemptions; ++p) {
    jobman::store::JobFilter filter;
    filter.kinds = {JobKind::job};
    filter.phases = {Phase::running};
    const auto candidates = store.jobs().list(filter);
    if (candidates.empty()) {
      break;
    }
    const auto& job = candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(random)];
    const auto node = store.attempts().of(job.id).back().node;
    jobman::test::http_call(admin, "POST",
                            "/mock/v1/projects/jobman-mock/locations/" + job.zone + "/nodes/" + node + ":preempt",
                            nlohmann::json::object(), mock->admin_headers());
    std::this_thread::sleep_for(std::chrono::seconds(3));
  }
  if (!jobman::test::eventually([&] { return count(store, {JobKind::job}, {Phase::running}) == running_jobs; },
                                std::chrono::minutes(10))) {
    std::fprintf(stderr, "lab_scale: %d of %d jobs running after the preemptions\n",
                 count(store, {JobKind::job}, {Phase::running}), running_jobs);
  }
  const double window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
  std::array<double, 2> cpu{};
  std::array<double, 2> rss_mib{};
  std::array<int, 2> driven{};
  for (std::size_t m = 0; m < pids.size(); ++m) {
    cpu[m] = (cpu_seconds(pids[m]) - cpu_before[m]) / window_s;
    rss_mib[m] = static_cast<double>(status_kib(pids[m], "VmHWM")) / 1024.0;
  }
  for (const auto& job : store.leases().jobs_to_drive(false)) {
    if (const auto lease = store.leases().of(job.id)) {
      // An owner is host:pid:start.
      for (std::size_t m = 0; m < pids.size(); ++m) {
        if (lease->owner.find(":" + std::to_string(pids[m]) + ":") != std::string::npos) {
          ++driven[m];
        }
      }
    }
  }

  double ticks = 0;
  double lists = 0;
  double requests = 0;
  double transitions = 0;
  double tick_ms = 0;
  for (std::size_t m = 0; m < daemons.size(); ++m) {
    daemons[m]->send(SIGTERM);
    daemons[m]->finish();
    auto stats = daemon_stats(dir / (machines[m] + ".log"));
    ticks = std::max(ticks, stats["ticks"]);
    lists += stats["list_calls"];
    requests += stats["list_calls"] + stats["get_calls"] + stats["mutations"];
    transitions += stats["transitions"];
    tick_ms = std::max(tick_ms, stats["tick_ms"]);
    std::printf("%s: %.0f ticks, %.0f list calls, %.0f GETs, %.0f creates/deletes, %.0f transitions\n",
                machines[m].c_str(), stats["ticks"], stats["list_calls"], stats["get_calls"], stats["mutations"],
                stats["transitions"]);
  }
  ticks = std::max(1.0, ticks);
  std::printf("live=%d zones=3 tick_ms=%.0f driven_a=%d driven_b=%d cpu_a=%.3f cpu_b=%.3f rss_a_mib=%.1f "
              "rss_b_mib=%.1f lists_per_tick=%.2f requests_per_tick=%.2f transitions_per_tick=%.2f setup_s=%.1f\n",
              live, tick_ms, driven[0], driven[1], cpu[0], cpu[1], rss_mib[0], rss_mib[1], lists / ticks,
              requests / ticks, transitions / ticks, setup_s);
  return 0;
}
