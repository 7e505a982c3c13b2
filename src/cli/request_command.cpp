// What resume, cancel, delete and clean share: several ids, --all-finished, one outcome line per job.
#include "commands.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "output.hpp"
#include "waiting.hpp"

namespace jobman::cli {

void add_request_arguments(CLI::App& command, RequestCommandOptions& options, bool with_all_finished) {
  auto* ids = command.add_option("ID", options.ids, "Job ids (000042 or 42)");
  if (with_all_finished) {
    auto* all = command.add_flag("--all-finished", options.all_finished,
                                 "Every job that has finished (SUCCEEDED, FAILED, CANCELLED, DELETED)");
    ids->excludes(all);
    all->excludes(ids);
  } else {
    ids->required();
  }
  add_json_flag(command, options.json);
  if (command.get_name() != "resume") {
    command.add_flag("--no-wait", options.no_wait,
                     "Return once the request is recorded; the supervisor carries it out (default: wait for the "
                     "cloud to confirm)");
  }
}

void add_pool_selection(CLI::App& command, PoolSelectOptions& options, domain::JobKind kind, bool with_wait) {
  const bool task = kind == domain::JobKind::task;
  const std::string plural = task ? "Tasks" : "Workers";
  command.add_option(task ? "TASK" : "WORKER", options.selection.refs,
                     plural + ": a name, an index from `jobman status` (#), or an id (000042)");
  command.add_flag("--all", options.selection.all,
                   "Every " + std::string(task ? "task" : "worker") + " `jobman status` shows");
  command.add_option("-a,--accelerator", options.selection.accelerator,
                     plural + (task ? " for" : " on") + " this accelerator (v4-8)");
  command.add_option("-z,--zone", options.selection.zone,
                     plural + (task ? " for" : " in") + " this zone (us-central2-b)");
  if (task) {
    command.add_option("-p,--pattern", options.selection.pattern, "Tasks whose name matches this glob ('llama3*s50*')");
  }
  add_json_flag(command, options.request.json);
  if (with_wait) {
    command.add_flag("--no-wait", options.request.no_wait,
                     task ? "Return once the request is recorded; the supervisor stops a running task"
                          : "Return once the request is recorded; the supervisor carries it out");
  }
}

std::vector<std::int64_t> pool_selected_ids(Context& ctx, domain::JobKind kind, const core::Selection& selection) {
  std::vector<std::int64_t> ids;
  for (const auto& job : core::select_records(ctx.store(), kind, selection)) {
    ids.push_back(job.id);
  }
  if (ids.empty()) {
    *ctx.err << "jobman: no " << domain::to_string(kind) << " matches\n";
  }
  return ids;
}

void add_pool_request(CLI::App& parent, Context& ctx, domain::JobKind kind, const std::string& name,
                      const std::string& description, core::Request request, const std::string& footer) {
  auto options = std::make_shared<PoolSelectOptions>();
  auto* cmd = parent.add_subcommand(name, description);
  add_pool_selection(*cmd, *options, kind, request != core::Request::resume);
  cmd->footer(footer);
  cmd->callback([&ctx, options, request, kind] {
    ctx.action = [&ctx, options, request, kind] {
      if (options->request.json) {
        silence_logging();
      }
      return run_requests(ctx, pool_selected_ids(ctx, kind, options->selection), options->request, request, true);
    };
  });
}

int run_request_command(Context& ctx, const RequestCommandOptions& options, core::Request request) {
  if (options.json) {
    silence_logging();
  }
  // Parse every id first so that a typo changes nothing.
  std::vector<std::int64_t> ids;
  for (const auto& text : options.ids) {
    ids.push_back(parse_job_id_argument(text));
  }
  auto& store = ctx.store();
  if (options.all_finished) {
    store::JobFilter filter;
    filter.include_history = true;
    filter.phases = {domain::Phase::succeeded, domain::Phase::failed, domain::Phase::cancelled, domain::Phase::deleted};
    store.jobs().for_each(filter, [&](const domain::JobRecord& job) { ids.push_back(job.id); });
  } else if (ids.empty()) {
    throw UsageError(std::string(core::to_string(request)) + ": give job ids or --all-finished");
  }
  return run_requests(ctx, ids, options, request, options.all_finished);
}

int run_requests(Context& ctx, const std::vector<std::int64_t>& ids, const RequestCommandOptions& options,
                 core::Request request, bool ids_known) {
  auto& store = ctx.store();
  int exit_code = 0;
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  std::vector<core::RequestOutcome> outcomes;
  // Keep going: one bad id must not leave the others undone. The worst code wins.
  const auto report = [&](std::int64_t id, const Error& e) {
    *ctx.err << "jobman: error: " << util::escape_controls(e.what(), util::LineBreaks::keep) << '\n';
    if (options.json) {
      results.push_back({{"id", id}, {"request", std::string(core::to_string(request))}, {"error", e.what()}});
    }
    const int code = static_cast<int>(e.code());
    if (exit_code == 0 || code == static_cast<int>(ExitCode::error)) {
      exit_code = code;
    }
  };
  for (const auto id : ids) {
    try {
      outcomes.push_back(core::apply_request(store, id, request));
    } catch (const domain::NoSuchJobError& e) {
      if (!ids_known) {
        report(id, e);
        continue;
      }
      // Listed a moment ago and removed since (a supervisor or another clean finished it): nothing is left to do.
      outcomes.push_back(core::RequestOutcome{id, false, true, "removed", ""});
    } catch (const Error& e) {
      report(id, e);
    }
  }
  // What is left is the supervisor's: make sure one runs, then wait for the cloud to confirm.
  std::vector<std::int64_t> pending;
  for (const auto& outcome : outcomes) {
    if (!outcome.done) {
      pending.push_back(outcome.id);
    }
  }
  if (!pending.empty()) {
    start_supervisor(ctx);
  }
  if (!pending.empty() && !options.no_wait && request != core::Request::resume) {
    const WaitGoal goal = request == core::Request::cancel   ? WaitGoal::cancelled
                          : request == core::Request::remove ? WaitGoal::deleted
                                                             : WaitGoal::removed;
    const auto waited = wait_for_jobs(ctx, pending, goal, std::nullopt);
    for (auto& outcome : outcomes) {
      const auto found = waited.jobs.find(outcome.id);
      if (found == waited.jobs.end()) {
        continue;
      }
      outcome.done = true;
      outcome.status = found->second ? std::string(domain::to_string(found->second->phase)) : std::string();
      outcome.message = found->second ? util::to_lower(outcome.status) : std::string("removed");
    }
  }
  for (const auto& outcome : outcomes) {
    if (options.json) {
      results.push_back({{"id", outcome.id},
                         {"request", std::string(core::to_string(request))},
                         {"changed", outcome.changed},
                         {"done", outcome.done},
                         {"message", outcome.message},
                         {"status", reporting::text_or_null(outcome.status)}});
    } else {
      *ctx.out << domain::format_job_id(outcome.id) << ": " << outcome.message << '\n';
    }
  }
  if (options.json) {
    *ctx.out << results.dump(2) << '\n';
  }
  return exit_code;
}

} // namespace jobman::cli
