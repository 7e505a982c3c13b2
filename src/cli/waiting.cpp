#include "waiting.hpp"

#include "jobman/config/settings.hpp"
#include "jobman/core/daemon.hpp"
#include "jobman/core/mock_cloud.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <thread>

namespace jobman::cli {

namespace {

using domain::Phase;

bool reached(const std::optional<domain::JobRecord>& job, WaitGoal goal) {
  if (!job) {
    return true; // Removed: nothing more will happen to it.
  }
  switch (goal) {
  case WaitGoal::finished:
  case WaitGoal::cancelled:
    // A job being deleted may pass through CANCELLED first: it has finished once it is DELETED.
    return domain::is_terminal(job->phase) &&
           (job->phase == Phase::deleted ||
            (job->desired != domain::DesiredState::remove && job->desired != domain::DesiredState::clean));
  case WaitGoal::deleted: return job->phase == Phase::deleted && !job->cleanup_pending;
  case WaitGoal::removed: return false;
  }
  return false;
}

// Ends the leases of the supervisors whose processes are gone, saying whose, so that the supervisor started next takes
// their jobs over at once.
void end_dead_supervisors(Context& ctx) {
  auto& store = ctx.store();
  try {
    for (const auto& owner : core::end_leases_of_dead_supervisors(store, store.clock_ms())) {
      *ctx.err << "jobman: supervisor " << owner << " is dead (its process is gone); its leases are ended\n";
    }
  } catch (const std::exception& e) {
    *ctx.err << "jobman: warning: cannot end the leases of dead supervisors: " << e.what() << "\n";
  }
}

} // namespace

void start_supervisor(Context& ctx) {
  const auto settings = config::load_settings();
  if (!settings.autostart) {
    return;
  }
  if (settings.cloud == config::CloudKind::mock && settings.api_endpoint.empty()) {
    core::ensure_mock_cloud(settings, *ctx.err);
  }
  // The dead supervisors are looked for once no daemon runs, right before one is started: a daemon seen alive a
  // moment earlier may have been killed since, and its jobs are then said to be taken over.
  core::ensure_daemon(*ctx.err, [&ctx] { end_dead_supervisors(ctx); });
}

namespace {

// keep_jobs_driven's work; `told` keeps a caller that asks again and again (wait) from saying the same thing twice.
void drive_undriven_jobs(Context& ctx, bool& told) {
  if (core::daemon_running()) {
    return;
  }
  end_dead_supervisors(ctx);
  const int undriven = ctx.store().leases().count_undriven_jobs(ctx.store().clock_ms());
  if (undriven == 0) {
    return;
  }
  const std::string them = undriven == 1 ? "it" : "them";
  const std::string jobs =
      (undriven == 1 ? "1 unfinished job has" : std::to_string(undriven) + " unfinished jobs have") +
      " no supervisor driving " + them;
  try {
    if (!config::load_settings().autostart) {
      if (!told) {
        *ctx.err << "jobman: " << jobs << ", and autostart is off: run `jobman daemon` to drive " << them << "\n";
        told = true;
      }
      return;
    }
    *ctx.err << "jobman: " << jobs << "; starting one\n";
    start_supervisor(ctx);
  } catch (const std::exception& e) {
    if (!told) {
      *ctx.err << "jobman: warning: " << e.what() << "\n";
      told = true;
    }
  }
}

} // namespace

void keep_jobs_driven(Context& ctx) {
  bool told = false;
  drive_undriven_jobs(ctx, told);
}

WaitResult wait_for_jobs(Context& ctx, const std::vector<std::int64_t>& ids, WaitGoal goal,
                         std::optional<std::chrono::milliseconds> timeout) {
  const auto start = std::chrono::steady_clock::now();
  const bool progress = util::is_terminal(2);
  auto& store = ctx.store();
  WaitResult result;
  bool daemon_checked = false;
  bool told_undriven = false;
  std::chrono::steady_clock::time_point next_driver_check;
  std::size_t last_width = 0;
  for (;;) {
    std::vector<std::string> waiting;
    for (const auto id : ids) {
      auto job = store.jobs().find(id);
      if (!reached(job, goal)) {
        waiting.push_back(domain::format_job_id(id) + " " + std::string(domain::to_string(job->phase)));
      }
      result.jobs[id] = std::move(job);
    }
    if (waiting.empty()) {
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!daemon_checked) {
      start_supervisor(ctx);
      daemon_checked = true;
      next_driver_check = now + std::chrono::seconds(1);
    } else if (now >= next_driver_check) {
      // The supervisor may die while we wait (kill -9, a crash): a look each second finds its jobs undriven and starts
      // another, which re-attaches to the running workloads. A probe of the lock while one runs: microseconds.
      drive_undriven_jobs(ctx, told_undriven);
      next_driver_check = now + std::chrono::seconds(1);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (timeout && elapsed >= *timeout) {
      result.timed_out = true;
      break;
    }
    if (progress) {
      std::string line = "waiting " +
                         util::format_duration(std::chrono::duration_cast<std::chrono::seconds>(elapsed).count()) +
                         ": " + util::join(waiting, ", ");
      if (line.size() > 100) {
        line = line.substr(0, 97) + "...";
      }
      *ctx.err << '\r' << line << std::string(last_width > line.size() ? last_width - line.size() : 0, ' ')
               << std::flush;
      last_width = line.size();
    }
    // The store is all there is to read; a tenth of a second keeps scripts snappy and costs nothing.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (progress && last_width > 0) {
    *ctx.err << '\r' << std::string(last_width, ' ') << '\r' << std::flush;
  }
  return result;
}

int wait_exit_code(const WaitResult& result) {
  if (result.timed_out) {
    return static_cast<int>(ExitCode::timed_out);
  }
  int code = 0;
  for (const auto& [id, job] : result.jobs) {
    if (job && job->phase == Phase::failed) {
      return static_cast<int>(domain::job_exit::failed);
    }
    if (!job || job->phase == Phase::cancelled || job->phase == Phase::deleted) {
      code = static_cast<int>(domain::job_exit::cancelled);
    }
  }
  return code;
}

} // namespace jobman::cli
