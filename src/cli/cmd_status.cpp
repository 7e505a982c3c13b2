// `jobman status`: jobman-lite's two tables, workers and tasks, read from the store alone (no cloud call).
#include "commands.hpp"
#include "jobman/core/fair_share.hpp"
#include "jobman/core/pool.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"
#include "waiting.hpp"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace jobman::cli {

namespace {

struct StatusOptions {
  std::string user;
  std::string accelerator;
  std::string zone;
  bool live_only = false;
  bool workers_only = false;
  bool task_only = false;
  bool all_tasks = false;
  bool json = false;
};

// The queued tasks the table shows by default: the next to run. The rest are counted.
constexpr std::size_t kQueueHead = 50;

using domain::Phase;

// What a worker is doing, in jobman-lite's PROCESS column: READY (serving, idle) or BUSY (running a task) while its
// slice is up; IDLE with its slice released for want of tasks (tpu.idle_release); STOPPED once stopped with its slice
// kept; otherwise its phase.
std::string process_text(const domain::JobRecord& worker, bool busy) {
  if (core::idle_released(worker)) {
    return "IDLE";
  }
  if (worker.desired != domain::DesiredState::run && !domain::is_terminal(worker.phase)) {
    return status_text(worker);
  }
  switch (worker.phase) {
  case Phase::running: return busy ? "BUSY" : "READY";
  case Phase::cancelled: return "STOPPED";
  default: return std::string(domain::to_string(worker.phase));
  }
}

// The slice's state as the last listing saw it: its queued resource (QR) and, once set up, its node (VM).
std::string qr_text(const domain::JobRecord& worker) {
  return worker.slice_state.empty() ? "-" : printable(worker.slice_state);
}
std::string vm_text(const domain::JobRecord& worker) {
  // A slice reaches SETUP only once its node is READY; after that a listing that drops it says so.
  if ((worker.phase == Phase::setup || worker.phase == Phase::running) && worker.slice_state == "ACTIVE") {
    return "READY";
  }
  return "-";
}

// A task's status: PAUSED for a task held back (a paused task is a cancelled job), else its phase and request.
std::string task_status(const domain::JobRecord& task) {
  if (task.phase == Phase::cancelled) {
    return "PAUSED";
  }
  if (task.phase == Phase::pending && task.desired == domain::DesiredState::run) {
    return task.attempt > 0 ? "QUEUED(again)" : "QUEUED";
  }
  return status_text(task);
}

// A worker's row: its record and `#`, what it is doing (PROCESS) and the task it holds.
struct WorkerRow {
  std::size_t index = 0;
  domain::JobRecord worker;
  std::string process;
  std::optional<std::int64_t> task_id;
};

// A task's row: its record and `#`, its status, the name of the worker holding it, and why it waits.
struct TaskRow {
  std::size_t index = 0;
  domain::JobRecord task;
  std::string status;
  std::optional<std::string> worker_name; // The worker holding it, when it is among the workers read.
  std::string waiting_for;                // Why the fair share holds it back; "" when it does not.
};

// What `status` prints, read before anything is printed: the rows each table shows.
struct StatusView {
  std::optional<std::vector<WorkerRow>> workers; // Not with --task-only.
  std::optional<std::vector<TaskRow>> tasks;     // Not with --workers-only.
  std::int64_t queued_hidden = 0;                // Queued tasks beyond the queue's head, counted only.
  bool waiting_column = false;                   // Some task waits for the fair share: the table says why.
};

// Reads the workers and the tasks the options select (`user`: user_filter's answer), each with its `#`.
StatusView gather_status(const store::JobStore& store, const StatusOptions& options, const std::string& user) {
  StatusView view;
  const auto workers = core::status_records(store, domain::JobKind::worker);
  // Each task with its `#`. The table shows the queue's head only, unless asked for every task, filtered, or --json.
  std::vector<std::pair<std::size_t, domain::JobRecord>> tasks;
  if (!options.workers_only) {
    if (!options.all_tasks && !options.json && options.accelerator.empty() && options.zone.empty() && user.empty()) {
      auto board = store.queue().board(kQueueHead, util::now_ms());
      tasks = std::move(board.shown);
      view.queued_hidden = board.queued - board.queued_shown;
    } else {
      auto all = core::status_records(store, domain::JobKind::task);
      tasks.reserve(all.size());
      for (std::size_t i = 0; i < all.size(); ++i) {
        tasks.emplace_back(i + 1, std::move(all[i]));
      }
    }
  }
  std::map<std::int64_t, std::int64_t> task_of_worker;
  std::map<std::int64_t, const domain::JobRecord*> worker_by_id;
  for (const auto& [index, task] : tasks) {
    if (task.worker_id) {
      task_of_worker[*task.worker_id] = task.id;
    }
  }
  for (const auto& worker : workers) {
    worker_by_id[worker.id] = &worker;
  }
  const auto wanted = [&](const domain::JobRecord& r) {
    return (options.accelerator.empty() || r.accelerator == options.accelerator) &&
           (options.zone.empty() || r.zone == options.zone) && (user.empty() || r.user == user);
  };
  if (!options.task_only) {
    view.workers.emplace();
    for (std::size_t i = 0; i < workers.size(); ++i) {
      const auto& w = workers[i];
      if (!wanted(w) || (options.live_only && w.slice_state != "ACTIVE")) {
        continue;
      }
      const auto task = task_of_worker.find(w.id);
      const bool busy = task != task_of_worker.end();
      view.workers->push_back(
          {i + 1, w, process_text(w, busy), busy ? std::optional<std::int64_t>(task->second) : std::nullopt});
    }
  }
  if (!options.workers_only) {
    // Why queued tasks wait, where the fair share holds them back (read only when a share or cap is set).
    std::map<std::int64_t, std::string> share_waits;
    if (const core::FairShare share(core::read_share_limits(store)); share.limits_anything()) {
      const core::ChipsInFlight chips(store.shares().in_flight());
      for (const auto& [index, t] : tasks) {
        if (t.phase == Phase::pending && t.desired == domain::DesiredState::run && !t.worker_id) {
          if (auto why = core::share_wait_of_task(share, chips, t, workers); !why.empty()) {
            share_waits.emplace(t.id, std::move(why));
          }
        }
      }
    }
    view.waiting_column = !share_waits.empty();
    view.tasks.emplace();
    for (auto& [index, t] : tasks) {
      if (!wanted(t)) {
        continue;
      }
      TaskRow row;
      row.index = index;
      row.status = task_status(t);
      if (t.worker_id) {
        if (const auto found = worker_by_id.find(*t.worker_id); found != worker_by_id.end()) {
          row.worker_name = found->second->name;
        }
      }
      if (const auto why = share_waits.find(t.id); why != share_waits.end()) {
        row.waiting_for = why->second;
      }
      row.task = std::move(t);
      view.tasks->push_back(std::move(row));
    }
  }
  return view;
}

// `status` for people: the workers' table, then the tasks'.
void print_status(std::ostream& out, const StatusView& view, bool color) {
  if (view.workers) {
    Table table({"#", "WORKER", "ACCELERATOR", "ZONE", "PROCESS", "VM", "QR", "TASK"});
    for (const auto& row : *view.workers) {
      const auto& w = row.worker;
      table.add_row({std::to_string(row.index), printable(w.name), w.accelerator, w.zone, row.process, vm_text(w),
                     qr_text(w), row.task_id ? domain::format_job_id(*row.task_id) : "-"},
                    phase_color(w.phase), 4);
    }
    out << "=== Workers ===\n";
    if (table.size() == 0) {
      out << "  (none)\n";
    } else {
      table.print(out, color);
    }
  }
  if (view.tasks) {
    std::vector<std::string> header = {"#", "ID", "NAME", "STATUS", "RETRY", "ACCELERATOR", "ZONE", "WORKER"};
    if (view.waiting_column) {
      header.emplace_back("WAITING FOR");
    }
    Table table(header);
    for (const auto& row : *view.tasks) {
      const auto& t = row.task;
      std::string worker = "-";
      if (t.worker_id) {
        worker = row.worker_name ? printable(*row.worker_name) : domain::format_job_id(*t.worker_id);
      }
      std::vector<std::string> cells = {std::to_string(row.index),
                                        domain::format_job_id(t.id),
                                        printable(t.name),
                                        row.status,
                                        std::to_string(t.failures) + "/" + std::to_string(t.max_failures),
                                        t.accelerator,
                                        t.zone.empty() ? "any" : t.zone,
                                        worker};
      if (view.waiting_column) {
        cells.push_back(printable(row.waiting_for));
      }
      table.add_row(std::move(cells), phase_color(t.phase), 3);
    }
    out << (view.workers ? "\n" : "") << "=== Tasks ===\n";
    if (table.size() == 0 && view.queued_hidden == 0) {
      out << "  (empty)\n";
    } else {
      table.print(out, color);
    }
    if (view.queued_hidden > 0) {
      out << "  ... and " << view.queued_hidden << " more queued after these " << kQueueHead
          << " (jobman status --all-tasks lists every task)\n";
    }
  }
}

// `status --json` (docs/JSON.md): {workers, tasks}, each row the job object and what the table adds to it.
nlohmann::ordered_json status_json(const StatusView& view) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (view.workers) {
    j["workers"] = nlohmann::ordered_json::array();
    for (const auto& row : *view.workers) {
      auto worker = job_json(row.worker);
      worker["index"] = row.index;
      worker["process"] = row.process;
      worker["slice_state"] = text_or_null(row.worker.slice_state);
      worker["task_id"] = json_or_null(row.task_id);
      j["workers"].push_back(std::move(worker));
    }
  }
  if (view.tasks) {
    j["tasks"] = nlohmann::ordered_json::array();
    for (const auto& row : *view.tasks) {
      auto task = job_json(row.task);
      task["index"] = row.index;
      task["task_status"] = row.status;
      task["retries"] = row.task.failures;
      task["max_retries"] = row.task.max_failures;
      task["priority"] = row.task.priority;
      task["worker_id"] = json_or_null(row.task.worker_id);
      task["waiting_for"] = text_or_null(row.waiting_for);
      j["tasks"].push_back(std::move(task));
    }
  }
  return j;
}

int run_status(Context& ctx, const StatusOptions& options) {
  if (options.workers_only && options.task_only) {
    throw UsageError("--workers-only and --task-only cannot be used together");
  }
  if (options.json) {
    silence_logging();
  }
  const auto& store = ctx.store();
  const std::string user = user_filter(store, options.user);
  keep_jobs_driven(ctx);
  const auto view = gather_status(store, options, user);
  if (options.json) {
    *ctx.out << status_json(view).dump(2) << '\n';
  } else {
    print_status(*ctx.out, view, ctx.color);
  }
  return 0;
}

} // namespace

void add_status_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<StatusOptions>();
  auto* cmd = app.add_subcommand("status", "Show the workers and the task queue (jobman-lite's status)");
  cmd->add_option("-u,--user", options->user, kUserOptionHelp)->type_name("USER|all");
  cmd->add_option("-a,--accelerator", options->accelerator, "Only workers and tasks on this accelerator");
  cmd->add_option("-z,--zone", options->zone, "Only workers and tasks in this zone");
  cmd->add_flag("--live-only,--lo", options->live_only, "Only workers whose queued resource is ACTIVE");
  cmd->add_flag("--workers-only,--wo", options->workers_only, "Only the worker table");
  cmd->add_flag("--task-only,--to", options->task_only, "Only the task table");
  cmd->add_flag("--all-tasks", options->all_tasks,
                "Every queued task (by default the table shows the next 50 to run and counts the rest)");
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman status\n"
              "  jobman status -a v4-8 --task-only\n"
              "  watch -n 5 jobman status\n"
              "Reads the local store only: no cloud call, no daemon round trip. VM and QR are the slice's states\n"
              "as the supervisor's last listing saw them. Shows unfinished workers and tasks and those finished in\n"
              "the last 24 hours, but of the queue only the next 50 to run (--all-tasks: all of it; --json and the\n"
              "-a/-z filters always list every task); # is the index the worker and task commands take.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_status(ctx, *options); }; });
}

} // namespace jobman::cli
