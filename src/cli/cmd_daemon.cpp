// `jobman daemon`: the supervisor in the foreground, logging to stderr, until SIGTERM or SIGINT.
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/daemon.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/supervisor.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <thread>
#include <unistd.h>

namespace jobman::cli {

namespace {

struct DaemonOptions {
  std::string tick;
  std::string lease_ttl = "15s";
  std::string idle_exit;
  std::string sweep_interval = "1h";
  std::string orphan_grace = "1h";
  int ready_fd = -1;
  std::vector<std::string> jobs;
};

// A duration argument in seconds ("30s", "2m", "1.5" is not accepted) or milliseconds with an "ms" suffix.
std::chrono::milliseconds duration_argument(const std::string& text, const char* option) {
  if (text.ends_with("ms")) {
    if (auto ms = util::parse_int(std::string_view(text).substr(0, text.size() - 2)); ms && *ms >= 0) {
      return std::chrono::milliseconds(*ms);
    }
  } else if (auto seconds = util::parse_duration_seconds(text); seconds && *seconds >= 0) {
    return std::chrono::milliseconds(*seconds * 1000);
  }
  throw UsageError(std::string(option) + ": '" + text + "' is not a duration (500ms, 30s, 5m)");
}

int run_daemon(const DaemonOptions& options) {
  core::SupervisorOptions supervisor;
  if (!options.tick.empty()) {
    supervisor.tick = duration_argument(options.tick, "--tick");
  }
  supervisor.lease_ttl = duration_argument(options.lease_ttl, "--lease-ttl");
  if (supervisor.lease_ttl < std::chrono::milliseconds(200)) {
    throw UsageError("--lease-ttl: must be at least 200ms");
  }
  if (!options.idle_exit.empty()) {
    supervisor.idle_exit = duration_argument(options.idle_exit, "--idle-exit");
  }
  supervisor.sweep_interval = duration_argument(options.sweep_interval, "--sweep-interval");
  supervisor.orphan_grace = duration_argument(options.orphan_grace, "--orphan-grace");
  for (const auto& text : options.jobs) {
    supervisor.only.push_back(parse_job_id_argument(text));
  }
  // SIGTERM and SIGINT are taken by one thread that asks the loop to stop; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const core::DaemonPresence presence;
  if (options.ready_fd >= 0) {
    ::close(options.ready_fd); // Tells the starter that this daemon is there.
  }
  auto access = core::connect_cloud(config::load_settings(), std::cerr);
  core::Supervisor loop(access, core::store_location(), supervisor);
  std::stop_source stop;
  // Waits for the signals a fifth of a second at a time, so that it also ends when the loop ends by itself.
  // A daemon started in the background writes its log itself: it is rotated at 10 MiB, three old files kept.
  const bool own_log = options.ready_fd >= 0;
  std::jthread waiter([&stop, signals, own_log](const std::stop_token& done) {
    const timespec period{0, 200'000'000};
    int rounds = 0;
    while (!done.stop_requested()) {
      if (own_log && rounds++ % 50 == 0) {
        core::rotate_log(core::daemon_log_path(), std::uintmax_t{10} << 20, 3);
      }
      const int received = sigtimedwait(&signals, nullptr, &period);
      if (received == SIGTERM || received == SIGINT) {
        spdlog::info("received {}; stopping", received == SIGTERM ? "SIGTERM" : "SIGINT");
        stop.request_stop();
        return;
      }
    }
  });
  loop.run(stop.get_token());
  if (!loop.settled()) {
    // Threads still run an abandoned operation: the process ends here, as a kill would end it (the supervisor is
    // built to survive that), rather than destroy the logger and libcurl under them.
    waiter.request_stop();
    waiter.join();
    spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& logger) { logger->flush(); });
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}

// `jobman daemon stop`: the supervisors of this home's store end; their workloads keep running.
int run_daemon_stop(Context& ctx, const std::string& timeout_text) {
  const auto timeout = duration_argument(timeout_text, "--timeout");
  const auto store = util::without_password(core::store_location());
  const auto stop = core::stop_daemons(timeout);
  if (stop.asked.empty()) {
    *ctx.out << "no supervisor of " << store << " runs in " << config::jobman_home().string() << '\n';
    return 0;
  }
  for (const int pid : stop.asked) {
    const bool running = std::find(stop.running.begin(), stop.running.end(), pid) != stop.running.end();
    *ctx.out << "supervisor " << pid << (running ? ": still running after " + timeout_text : ": stopped") << '\n';
  }
  if (!stop.running.empty()) {
    throw Error(std::to_string(stop.running.size()) + " supervisor(s) of " + store + " did not stop within " +
                timeout_text + "; `kill -9` ends one at once (its jobs are taken over by the next supervisor)");
  }
  return 0;
}

} // namespace

void add_daemon_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<DaemonOptions>();
  auto* cmd = app.add_subcommand("daemon", "Run the supervisor in the foreground: drive every job it can lease");
  cmd->add_option("--tick", options->tick,
                  "How often the cloud is observed (default: poll_interval, divided by the mock's time scale)");
  cmd->add_option("--lease-ttl", options->lease_ttl,
                  "A job whose driver stops renewing its lease for this long is taken over (default 15s)");
  cmd->add_option("--idle-exit", options->idle_exit, "Exit after this long with no job to drive (default: never)");
  cmd->add_option("--sweep-interval", options->sweep_interval,
                  "How often resources left behind are swept, the first time at start (default 1h; 0: never)");
  cmd->add_option("--orphan-grace", options->orphan_grace,
                  "A sweep deletes only resources left behind for longer than this (default 1h)");
  cmd->add_option("--job", options->jobs, "Drive only these jobs (repeatable; such a daemon does not sweep)");
  cmd->add_option("--ready-fd", options->ready_fd, "Close this descriptor once running (used by create)")->group("");
  cmd->footer("Examples:\n"
              "  jobman daemon                       # what create and resume start in the background\n"
              "  systemctl --user enable --now jobman   # with scripts/jobman.service installed\n"
              "Logs go to stderr. SIGTERM or SIGINT stops it; workloads keep running and the next supervisor\n"
              "re-attaches to them. Several daemons may run: each job is driven by the one holding its lease.\n"
              "Each sweep deletes this user's queued resources and nodes that carry jobman's labels but that no\n"
              "job in the store holds (see 'jobman sync'), and logs each deletion.");
  auto stop_timeout = std::make_shared<std::string>("30s");
  auto* stop = cmd->add_subcommand("stop", "Stop this home's supervisors of the store; workloads keep running");
  stop->add_option("--timeout", *stop_timeout, "How long to wait for them to end (default 30s)");
  stop->footer("Examples:\n"
               "  jobman daemon stop                  # before `jobman store migrate`, say\n"
               "  JOBMAN_STORE=postgresql://alice@db.lab.org/jobman jobman daemon stop\n"
               "Each supervisor gets SIGTERM: it lets its leases go and leaves the workloads running. The next\n"
               "command that finds jobs nobody drives (list, show, logs, wait) starts a new one, which re-attaches.\n"
               "Exit 1 when one is still running after --timeout.");
  stop->callback(
      [&ctx, stop_timeout] { ctx.action = [&ctx, stop_timeout] { return run_daemon_stop(ctx, *stop_timeout); }; });
  cmd->callback([&ctx, options, stop] {
    if (stop->parsed()) {
      return;
    }
    ctx.daemon = true;
    ctx.action = [options] { return run_daemon(*options); };
  });
}

} // namespace jobman::cli
