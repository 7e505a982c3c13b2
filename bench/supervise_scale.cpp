// bench/supervise_scale [N] [PREEMPTIONS] [TICK]: N spot jobs (default 200) spread over 4 zones of a mock cloud at
// time scale 1000, driven by one `jobman daemon --tick TICK` (default 1s). Once every job runs, it preempts
// PREEMPTIONS running slices (default 20) one by one through the mock's admin API and times, from the store's
// events, how long the supervisor took to notice (RUNNING -> RECOVERING) and to have the job running again.
// Meanwhile it samples the daemon's CPU time and peak RSS. Prints the API requests per tick (from the daemon's own
// counters), the CPU share, the peak RSS, and the latencies' median and p99. Last line:
// jobs=.. zones=.. tick_ms=.. lists_per_tick=.. requests_per_tick=.. transitions_per_tick=.. cpu_share=..
// steady_cpu_share=.. peak_rss_mib=.. detect_p50_ms=.. detect_p99_ms=.. running_p50_ms=.. running_p99_ms=..
//
// Before the preemptions, with every job running and nothing happening, the daemon's CPU share is sampled over
// SUPERVISE_SCALE_STEADY seconds (default 60) after SUPERVISE_SCALE_SETTLE seconds (default 20): the steady state,
// where a per-attempt cost of the supervisor shows and recoveries do not blur it.
//
// SUPERVISE_SCALE_JOBMAN=PATH runs another build's `jobman` (for `create` and the daemon) in place of this build's,
// to compare builds on one machine: the store and the configs are then that build's own.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "process_stats.hpp"
#include "stats.hpp"
#include "support/line_process.hpp"
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sqlite3.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using jobman::bench::cpu_seconds;
using jobman::bench::median;
using jobman::bench::proc_text;
using jobman::bench::quantile;
using jobman::bench::status_kib;
using jobman::domain::Phase;

struct Zone {
  const char* name;
  const char* generation;
  const char* accelerator;
};

constexpr Zone kZones[] = {{"us-central2-b", "v4", "v4-8"},
                           {"us-central1-a", "v5litepod", "v5litepod-1"},
                           {"europe-west4-b", "v5litepod", "v5litepod-1"},
                           {"us-east1-d", "v6e", "v6e-1"}};

// The pid in $JOBMAN_HOME/daemon.lock.
pid_t daemon_pid(const fs::path& home) {
  const auto text = proc_text(home / "daemon.lock");
  return text.empty() ? 0 : static_cast<pid_t>(std::stol(text));
}

bool wait_for(const std::function<bool()>& check, std::chrono::seconds limit) {
  return jobman::test::eventually(check, std::chrono::milliseconds(limit));
}

// How many jobs of the store at `db_path` are RUNNING, read with SQLite alone (-1 when it cannot be read).
int count_running(const fs::path& db_path) {
  sqlite3* db = nullptr;
  int count = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM jobs WHERE phase = 'RUNNING'", -1, &statement, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW) {
      count = sqlite3_column_int(statement, 0);
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return count;
}

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::max(1, std::atoi(value)) : fallback;
}

// The daemon's share of a core over `window` seconds, after `settle` seconds.
double steady_share(pid_t pid, int settle, int window) {
  std::this_thread::sleep_for(std::chrono::seconds(settle));
  const double before = cpu_seconds(pid);
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(window));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return (cpu_seconds(pid) - before) / seconds;
}

} // namespace

int main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::max(4, std::atoi(argv[1])) : 200;
  const int preemptions = argc > 2 ? std::max(0, std::atoi(argv[2])) : 20;
  const std::string tick = argc > 3 ? argv[3] : "1s";
  const char* other = std::getenv("SUPERVISE_SCALE_JOBMAN");
  const std::string jobman = other != nullptr && *other != '\0' ? other : jobman::test::jobman_binary();
  std::printf("jobman: %s\n", jobman.c_str());
  jobman::test::TempDir dir;
  std::string zones;
  for (const auto& z : kZones) {
    zones += std::string("  ") + z.name + ":\n    " + z.generation +
             ":\n      spot: {chips: " + std::to_string(jobs * 4) + "}\n";
  }
  auto mock = jobman::test::start_test_mock(dir, jobman::test::test_world(2, zones));
  if (mock->port() <= 0) {
    std::fprintf(stderr, "supervise_scale: the mock did not start: %s\n", mock->first_line().c_str());
    return 1;
  }
  httplib::Client admin("127.0.0.1", mock->port());
  const fs::path home = dir / "home";
  const auto env = jobman::test::mock_home_environment(*mock, home, dir / "config");
  jobman::test::RunOptions options{env, "", ""};

  // N jobs: one sweep per zone.
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t z = 0; z < std::size(kZones); ++z) {
    const int count = jobs / 4 + (static_cast<int>(z) < jobs % 4 ? 1 : 0);
    std::string values;
    for (int i = 0; i < count; ++i) {
      values += (i == 0 ? "" : ",") + std::to_string(i);
    }
    const auto config = dir.write(
        "zone-" + std::to_string(z) + ".yaml",
        std::string("job:\n  name: scale-") + std::to_string(z) + "\ntpu:\n  accelerator: " + kZones[z].accelerator +
            "\n  zone: " + kZones[z].name + "\n  pricing: spot\ncommand:\n  cmd: sleep 100000\nvars:\n  i: 0\n");
    const auto created =
        jobman::test::run_program({jobman, "create", config.string(), "--sweep", "vars.i=" + values}, options);
    if (created.exit_code != 0) {
      std::fprintf(stderr, "supervise_scale: create failed: %s\n", created.err.c_str());
      return 1;
    }
  }
  jobman::test::LineReadingProcess daemon({jobman, "daemon", "--tick", tick}, env, dir / "daemon.log",
                                          std::chrono::seconds(120));
  // Counted with SQLite alone, which never migrates the store: another build's stays its own.
  const auto running = [&] { return count_running(home / "jobman.db"); };
  if (!wait_for([&] { return running() == jobs; }, std::chrono::seconds(1800))) {
    std::fprintf(stderr, "supervise_scale: only %d of %d jobs are running; see %s\n", running(), jobs,
                 (dir / "daemon.log").c_str());
    return 1;
  }
  const pid_t pid = daemon_pid(home);
  std::printf("all %d jobs RUNNING after %.1f s\n", jobs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  const int settle = env_int("SUPERVISE_SCALE_SETTLE", 20);
  const int steady_window = env_int("SUPERVISE_SCALE_STEADY", 60);
  const double steady = steady_share(pid, settle, steady_window);
  const int still = running();
  std::printf("steady state: %.2f%% of a core over %d s (after %d s), %d of %d jobs running\n", 100 * steady,
              steady_window, settle, still, jobs);
  if (jobman != jobman::test::jobman_binary()) {
    // Another build: its steady state only (the preemptions read this build's store).
    daemon.send(SIGTERM);
    daemon.finish();
    std::printf("jobs=%d steady_cpu_share=%.4f steady_s=%d running=%d\n", jobs, steady, steady_window, still);
    return still == jobs ? 0 : 1;
  }
  auto store = jobman::store::JobStore::open(home / "jobman.db");

  // Steady state with preemptions: one every two seconds on a random running job.
  const double cpu_before = cpu_seconds(pid);
  const auto window_start = std::chrono::steady_clock::now();
  std::mt19937 random(7);
  std::vector<std::pair<std::int64_t, std::int64_t>> preempted; // job id, time (ms since epoch)
  for (int p = 0; p < preemptions; ++p) {
    jobman::store::JobFilter filter;
    filter.phases = {Phase::running};
    const auto candidates = store.jobs().list(filter);
    if (candidates.empty()) {
      break;
    }
    const auto& job = candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(random)];
    const auto node = store.attempts().of(job.id).back().node;
    const auto at = jobman::util::now_ms();
    const auto reply = jobman::test::http_call(
        admin, "POST", "/mock/v1/projects/jobman-mock/locations/" + job.zone + "/nodes/" + node + ":preempt",
        nlohmann::json::object(), mock->admin_headers());
    if (reply.status == 200) {
      preempted.emplace_back(job.id, at);
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  if (!wait_for([&] { return running() == jobs; }, std::chrono::seconds(600))) {
    std::fprintf(stderr, "supervise_scale: %d of %d jobs running after the preemptions\n", running(), jobs);
  }
  const double window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
  const double cpu_share = (cpu_seconds(pid) - cpu_before) / window_s;
  const long peak_kib = status_kib(pid, "VmHWM");

  std::vector<double> detect_ms;
  std::vector<double> running_ms;
  for (const auto& [id, at] : preempted) {
    std::int64_t detected = 0;
    std::int64_t again = 0;
    for (const auto& e : store.events().of(id)) {
      if (e.ts_ms < at || e.kind != "phase") {
        continue;
      }
      if (detected == 0 && e.to == Phase::recovering) {
        detected = e.ts_ms;
      } else if (detected != 0 && e.to == Phase::running) {
        again = e.ts_ms;
        break;
      }
    }
    if (detected != 0) {
      detect_ms.push_back(static_cast<double>(detected - at));
    }
    if (again != 0) {
      running_ms.push_back(static_cast<double>(again - at));
    }
  }
  std::sort(detect_ms.begin(), detect_ms.end());
  std::sort(running_ms.begin(), running_ms.end());

  // The daemon prints its counters when it stops.
  daemon.send(SIGTERM);
  daemon.finish();
  auto stats = jobman::bench::daemon_stats(dir / "daemon.log");

  const double ticks = std::max(1.0, stats["ticks"]);
  const double requests = stats["list_calls"] + stats["get_calls"] + stats["mutations"];
  std::printf("daemon: %.0f ticks, %.0f list calls, %.0f per-job GETs, %.0f creates/deletes, %.0f transitions\n",
              stats["ticks"], stats["list_calls"], stats["get_calls"], stats["mutations"], stats["transitions"]);
  std::printf("preemptions: %zu, detected %zu, running again %zu\n", preempted.size(), detect_ms.size(),
              running_ms.size());
  std::printf("jobs=%d zones=%zu tick_ms=%.0f lists_per_tick=%.2f requests_per_tick=%.2f transitions_per_tick=%.2f "
              "cpu_share=%.3f steady_cpu_share=%.4f peak_rss_mib=%.1f detect_p50_ms=%.0f detect_p99_ms=%.0f "
              "running_p50_ms=%.0f "
              "running_p99_ms=%.0f\n",
              jobs, std::size(kZones), stats["tick_ms"], stats["list_calls"] / ticks, requests / ticks,
              stats["transitions"] / ticks, cpu_share, steady, static_cast<double>(peak_kib) / 1024.0,
              median(detect_ms), quantile(detect_ms, 0.99), median(running_ms), quantile(running_ms, 0.99));
  return 0;
}
