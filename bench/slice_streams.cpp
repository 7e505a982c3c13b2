// bench/slice_streams [ACCELERATOR] [JOBS] [TRANSPORT] [SECONDS]: JOBS jobs (default 1) of ACCELERATOR (default
// v6e-256, 64 hosts) on a mock cloud at time scale 1000, driven by one `jobman daemon --tick 100ms` over TRANSPORT
// (ssh, the default, or gcloud: Google's /usr/bin/gcloud). Each job mounts a bucket at /mnt/bucket and then prints
// a line every 100 ms on every host, from one process (perl) as a training program would: a shell loop starting a
// `sleep` per line would cost the 64 hosts more CPU than the machine has, and slow the very setup measured. Times SETUP
// -> RUNNING of every job from the store's events, then, for SECONDS (default 20) while every host streams, samples
// once a second the proportional set size (PSS, from /proc/PID/smaps_rollup) of the supervisor and every process
// working for it: its descendants (the ssh or gcloud clients) and the shared ssh connections' masters, which OpenSSH
// detaches from it. Also the CPU those processes used over the window. Last line: transport=.. jobs=.. hosts=..
// setup_to_running_p50_ms=.. setup_to_running_max_ms=.. setup_cpu_machine_s=.. setup_cpu_supervisor_s=..
// pss_peak_mib=.. pss_median_mib=.. processes=.. cpu_share=.. pss_per_host_kib=.. cpu_per_host_ms_per_s=..
// SLICE_STREAMS_KEEP=DIR keeps the supervisor's log and the attempts' logs there.
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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using jobman::bench::cpu_seconds;
using jobman::bench::median;
using jobman::bench::proc_text;
using jobman::domain::Phase;

// The pid in $JOBMAN_HOME/daemon.lock.
pid_t daemon_pid(const fs::path& home) {
  const auto text = proc_text(home / "daemon.lock");
  return text.empty() ? 0 : static_cast<pid_t>(std::stol(text));
}

// Every process's parent, from /proc.
std::map<pid_t, pid_t> parents() {
  std::map<pid_t, pid_t> out;
  for (const auto& id : jobman::test::process_ids()) {
    const auto text = proc_text("/proc/" + id + "/stat");
    const auto paren = text.rfind(')');
    if (paren == std::string::npos) {
      continue;
    }
    const auto fields = jobman::util::split(text.substr(paren + 2), ' ');
    if (fields.size() > 1) {
      out[static_cast<pid_t>(std::stol(id))] = static_cast<pid_t>(std::stol(fields[1]));
    }
  }
  return out;
}

// The supervisor and the processes working for it: its descendants, and the ssh connection masters whose command
// line names the home's socket directory (OpenSSH detaches them from the ssh that started them).
std::set<pid_t> working_for(pid_t daemon, const fs::path& home) {
  std::set<pid_t> out = {daemon};
  const auto family = parents();
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, parent] : family) {
      if (out.count(parent) != 0 && out.insert(pid).second) {
        grew = true;
      }
    }
  }
  const auto sockets = (home / "cm").string();
  for (const auto& [pid, parent] : family) {
    if (proc_text("/proc/" + std::to_string(pid) + "/cmdline").find(sockets) != std::string::npos) {
      out.insert(pid);
    }
  }
  return out;
}

// The CPU time every process of the machine has used since boot (user, nice, system, irq, softirq), in seconds.
double machine_cpu_seconds() {
  const auto fields = jobman::util::split(proc_text("/proc/stat").substr(0, 200), ' ');
  double ticks = 0;
  // "cpu  user nice system idle iowait irq softirq ...": the split keeps the empty field after "cpu".
  for (const std::size_t i : {2U, 3U, 4U, 7U, 8U}) {
    ticks += i < fields.size() ? std::stod(fields[i]) : 0;
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// utime + stime of a process and of the children it has waited for, in seconds.
double cpu_with_children_seconds(pid_t pid) {
  const auto text = proc_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) {
    return 0;
  }
  const auto fields = jobman::util::split(text.substr(paren + 2), ' ');
  double ticks = 0;
  for (const std::size_t i : {11U, 12U, 13U, 14U}) {
    ticks += std::stod(fields[i]);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Pss of one process in KiB (0 when it is gone).
long pss_kib(pid_t pid) {
  const auto text = proc_text("/proc/" + std::to_string(pid) + "/smaps_rollup");
  const auto at = text.find("\nPss:");
  return at == std::string::npos ? 0 : std::stol(text.substr(at + 5));
}

} // namespace

int main(int argc, char** argv) {
  const std::string accelerator = argc > 1 ? argv[1] : "v6e-256";
  const int jobs = argc > 2 ? std::max(1, static_cast<int>(std::strtol(argv[2], nullptr, 10))) : 1;
  const std::string transport = argc > 3 ? argv[3] : "ssh";
  const int seconds = argc > 4 ? std::max(1, static_cast<int>(std::strtol(argv[4], nullptr, 10))) : 20;
  const auto generation = accelerator.substr(0, accelerator.find('-'));
  const int chips = std::stoi(accelerator.substr(accelerator.find('-') + 1));
  jobman::test::TempDir dir;
  auto mock = jobman::test::start_test_mock(
      dir,
      jobman::test::test_world(1, "  us-east1-d:\n    " + generation +
                                      ":\n      spot: {chips: " + std::to_string(chips * jobs) + "}\n"),
      1, {"--write-service-account-key", (dir / "mock-key.json").string()});
  if (mock->port() <= 0) {
    std::fprintf(stderr, "slice_streams: the mock did not start: %s\n", mock->first_line().c_str());
    return 1;
  }
  const auto home = dir / "jobman";
  auto env = jobman::test::mock_home_environment(*mock, home, dir / "config");
  env["HOME"] = (dir / "user-home").string();
  env["JOBMAN_TRANSPORT"] = transport;
  env["JOBMAN_MOCK_SERVICE_ACCOUNT_KEY"] = (dir / "mock-key.json").string(); // What gcloud logs in with.
  const auto config = dir.write(
      "job.yaml", "job:\n  name: streams\ntpu:\n  accelerator: " + accelerator +
                      "\n  zone: us-east1-d\n  pricing: spot\ngcsfuse:\n  bucket_name: bench-data\n  mount_path: "
                      "/mnt/bucket\ncommand:\n  cmd: |\n    exec perl -e '$| = 1; for (my $i = 1;; ++$i) { print "
                      "\"line=$i\\n\"; select(undef, undef, undef, 0.1) }'\n");
  jobman::test::LineReadingProcess daemon({jobman::test::jobman_binary(), "daemon", "--tick", "100ms"}, env,
                                          dir / "daemon.log");
  std::vector<std::int64_t> ids;
  for (int j = 0; j < jobs; ++j) {
    const auto created = jobman::test::run_jobman({"create", config.string()}, {env, "", ""});
    if (created.exit_code != 0) {
      std::fprintf(stderr, "slice_streams: create failed: %s\n", created.err.c_str());
      return 1;
    }
    ids.push_back(std::stoll(created.out));
  }
  auto store = jobman::store::JobStore::open(home / "jobman.db");
  // The CPU spent from the first SETUP until every job is RUNNING: the whole machine's (the mock's hosts, their sshd
  // and scripts included) and the supervisor's side (the daemon with the clients it has reaped, and the connection
  // masters).
  double machine_at_setup = -1;
  double supervisor_at_setup = -1;
  const auto supervisor_side = [&] {
    const pid_t daemon_now = daemon_pid(home);
    double cpu = daemon_now > 0 ? cpu_with_children_seconds(daemon_now) : 0;
    for (const auto pid : working_for(daemon_now, home)) {
      if (pid != daemon_now && parents()[pid] == 1) {
        cpu += cpu_seconds(pid); // A connection master, detached from the ssh that started it.
      }
    }
    return cpu;
  };
  const bool all_running = jobman::test::eventually(
      [&] {
        bool running = true;
        for (const auto id : ids) {
          const auto phase = store.jobs().get(id, true).phase;
          if (phase != Phase::running) {
            running = false;
          }
          if (machine_at_setup < 0 && phase != Phase::queued && phase != Phase::pending &&
              phase != Phase::provisioning) {
            machine_at_setup = machine_cpu_seconds();
            supervisor_at_setup = supervisor_side();
          }
        }
        return running;
      },
      std::chrono::minutes(10));
  const double setup_machine_cpu = machine_cpu_seconds() - machine_at_setup;
  const double setup_supervisor_cpu = supervisor_side() - supervisor_at_setup;
  if (!all_running) {
    std::fprintf(stderr, "slice_streams: not every job got to RUNNING; see %s\n", (dir / "daemon.log").c_str());
    return 1;
  }
  std::vector<double> setup_ms;
  int hosts = 0;
  for (const auto id : ids) {
    std::int64_t setup_at = 0;
    std::int64_t running_at = 0;
    for (const auto& event : store.events().of(id)) {
      if (event.kind == "phase" && event.to == Phase::setup) {
        setup_at = event.ts_ms;
      } else if (event.kind == "phase" && event.to == Phase::running) {
        running_at = event.ts_ms;
      }
    }
    setup_ms.push_back(static_cast<double>(running_at - setup_at));
    hosts += store.jobs().get(id, true).hosts;
  }
  // Every host's stream has its first lines home before the window opens.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const pid_t supervisor = daemon_pid(home);
  std::vector<double> pss_mib;
  std::map<pid_t, double> cpu_at_start;
  for (const auto pid : working_for(supervisor, home)) {
    cpu_at_start[pid] = cpu_seconds(pid);
  }
  std::map<pid_t, double> cpu_last = cpu_at_start;
  std::size_t processes = 0;
  for (int s = 0; s < seconds; ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    long total = 0;
    const auto now = working_for(supervisor, home);
    processes = std::max(processes, now.size());
    for (const auto pid : now) {
      total += pss_kib(pid);
      cpu_last[pid] = cpu_seconds(pid);
    }
    pss_mib.push_back(static_cast<double>(total) / 1024.0);
  }
  double cpu = 0;
  for (const auto& [pid, last] : cpu_last) {
    const auto start = cpu_at_start.find(pid);
    cpu += last - (start == cpu_at_start.end() ? 0.0 : start->second);
  }
  if (const char* keep = std::getenv("SLICE_STREAMS_KEEP")) {
    // The supervisor's log and every attempt's logs, for a look at where the time went.
    std::error_code ec;
    fs::create_directories(keep, ec);
    fs::copy(dir / "daemon.log", fs::path(keep) / "daemon.log", fs::copy_options::overwrite_existing, ec);
    fs::copy(home / "jobs", fs::path(keep) / "jobs", fs::copy_options::recursive | fs::copy_options::overwrite_existing,
             ec);
  }
  for (const auto id : ids) {
    jobman::test::run_jobman({"delete", std::to_string(id)}, {env, "", ""});
  }
  const double peak = *std::max_element(pss_mib.begin(), pss_mib.end());
  std::printf("transport=%s jobs=%d hosts=%d setup_to_running_p50_ms=%.0f setup_to_running_max_ms=%.0f "
              "setup_cpu_machine_s=%.1f setup_cpu_supervisor_s=%.1f "
              "pss_peak_mib=%.1f pss_median_mib=%.1f processes=%zu cpu_share=%.3f pss_per_host_kib=%.0f "
              "cpu_per_host_ms_per_s=%.2f\n",
              transport.c_str(), jobs, hosts, median(setup_ms), *std::max_element(setup_ms.begin(), setup_ms.end()),
              setup_machine_cpu, setup_supervisor_cpu, peak, median(pss_mib), processes, cpu / seconds,
              peak * 1024.0 / hosts, cpu * 1000.0 / seconds / hosts);
  return 0;
}
