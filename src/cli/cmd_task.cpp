// `jobman task ...`: jobman-lite's task commands. A task is a script with #JOBMAN headers (or a config) queued for a
// worker whose accelerator (and zone and pricing, when the task names them) match; it runs on every host of the
// worker's slice, or on host 0 when the script fans out itself.
#include "commands.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/config/task_script.hpp"
#include "jobman/core/pool.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"
#include "waiting.hpp"

#include <algorithm>
#include <map>
#include <spdlog/spdlog.h>

namespace jobman::cli {

namespace {

struct SubmitOptions {
  ConfigArguments config; // The script or config, --set and --sweep (configs only).
  config::TaskOverrides overrides;
  bool json = false;
};

// The warnings about a script: the headers', then the loader's about the document made from them, each moved to the
// header or flag that gave its key (the document's own lines mean nothing to the user), without saying twice what
// the headers said.
std::vector<config::ConfigWarning> script_warnings(const config::TaskRequest& request,
                                                   const std::vector<config::ConfigWarning>& loaded) {
  static const std::map<std::string, std::string> header_of = {
      {"tpu.accelerator", "accelerator"}, {"tpu.zone", "zone"}, {"tpu.version", "tpu-version"},
      {"tpu.pricing", "pricing"},         {"job.name", "name"}, {"recovery.max_failures", "max-retries"}};
  auto warnings = request.warnings;
  for (auto w : loaded) {
    const auto header = header_of.find(w.where.key_path);
    const auto origin = header == header_of.end() ? request.origins.end() : request.origins.find(header->second);
    if (origin != request.origins.end()) {
      const bool said = std::any_of(warnings.begin(), warnings.end(), [&](const auto& earlier) {
        return earlier.where.line == origin->second.line && earlier.where.file == origin->second.file;
      });
      if (said) {
        continue;
      }
      w.where = origin->second;
    } else {
      w.where = SourceLocation{request.script_path, 0, 0, w.where.key_path};
    }
    warnings.push_back(std::move(w));
  }
  return warnings;
}

// The tasks a script or a config gives, with what each asks of a worker.
std::vector<core::TaskToSubmit> tasks_of(const SubmitOptions& options) {
  std::vector<core::TaskToSubmit> tasks;
  const auto& path = options.config.path;
  if (config::is_task_script(path)) {
    if (!options.config.set_overrides.empty() || !options.config.sweeps.empty()) {
      throw UsageError(path + ": --set and --sweep apply to a config, not to a script (#JOBMAN headers set a script)");
    }
    auto request = config::read_task_script(path, options.overrides);
    config::LoadOptions load;
    load.default_zone = request.zone;
    load.zone_optional = true; // No zone: a worker in any zone.
    auto configs = config::parse_job_configs(request.config_yaml, path, load);
    auto& config = configs.front();
    config.source_path = path;
    config.warnings = script_warnings(request, config.warnings);
    core::TaskToSubmit task;
    task.config = std::move(config);
    task.zone = request.zone;
    task.pricing = request.pricing;
    task.priority = request.priority;
    tasks.push_back(std::move(task));
    return tasks;
  }
  // A config: the flags are --set overrides, so that every value is checked where the config's are.
  ConfigArguments arguments = options.config;
  const auto& o = options.overrides;
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::optional<std::string>>>{{"job.name", o.name},
                                                                       {"tpu.accelerator", o.accelerator},
                                                                       {"tpu.zone", o.zone},
                                                                       {"tpu.version", o.tpu_version},
                                                                       {"tpu.pricing", o.pricing}}) {
    if (value) {
      arguments.set_overrides.push_back(key);
      arguments.set_overrides.back().append("=").append(*value);
    }
  }
  if (o.max_retries) {
    arguments.set_overrides.push_back("recovery.max_failures=" + std::to_string(*o.max_retries));
  }
  for (auto& config : load_configs(arguments)) {
    core::TaskToSubmit task;
    // A config names its zone (or takes the settings'); it asks for a pricing only when --pricing says so.
    task.zone = config.tpu.zone;
    task.pricing = o.pricing ? std::optional<domain::Pricing>(config.tpu.pricing) : std::nullopt;
    task.priority = o.priority.value_or(0);
    task.config = std::move(config);
    tasks.push_back(std::move(task));
  }
  return tasks;
}

int run_submit(Context& ctx, const SubmitOptions& options) {
  if (options.json) {
    silence_logging();
  }
  const auto tasks = tasks_of(options);
  for (const auto& w : tasks.front().config.warnings) {
    spdlog::warn("{}", format_warning(w));
  }
  auto& store = ctx.store();
  const auto ids = core::submit_tasks(store, tasks, store.identity());
  start_supervisor(ctx);
  if (options.json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      nlohmann::ordered_json j = job_json(store.jobs().get(ids[i]));
      nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
      for (const auto& w : tasks[i].config.warnings) {
        warnings.push_back(warning_json(w));
      }
      j["warnings"] = warnings;
      all.push_back(j);
    }
    *ctx.out << all.dump(2) << '\n';
    return 0;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto& task = tasks[i];
    *ctx.out << "Submitted task " << domain::format_job_id(ids[i]) << " (" << printable(task.config.job.name) << ")\n"
             << "  Accelerator : " << task.config.tpu.accelerator.name << '\n'
             << "  Zone        : " << (task.zone.empty() ? std::string("any") : task.zone) << '\n'
             << "  Max retries : " << task.config.recovery.max_failures << '\n';
    if (task.pricing) {
      *ctx.out << "  Pricing     : " << domain::to_string(*task.pricing) << '\n';
    }
    if (task.priority != 0) {
      *ctx.out << "  Priority    : " << task.priority << '\n';
    }
  }
  return 0;
}

void add_submit(CLI::App& task, Context& ctx) {
  auto options = std::make_shared<SubmitOptions>();
  auto* cmd = task.add_subcommand("submit", "Queue a script with #JOBMAN headers (or a config) for a matching worker");
  add_config_arguments(*cmd, options->config);
  cmd->add_option("--name", options->overrides.name, "Task name (overrides #JOBMAN --name)");
  cmd->add_option("--accelerator", options->overrides.accelerator, "Override #JOBMAN --accelerator");
  cmd->add_option("--zone", options->overrides.zone, "Override #JOBMAN --zone (no zone: a worker in any zone)");
  cmd->add_option("--tpu-version", options->overrides.tpu_version, "Override #JOBMAN --tpu-version");
  cmd->add_option("--max-retries", options->overrides.max_retries,
                  "Failures retried before the task is FAILED (overrides #JOBMAN --max-retries; default 3)");
  cmd->add_option("--pricing", options->overrides.pricing,
                  "Run only on workers of this pricing: spot, preemptible or standard (default any)")
      ->check(pricing_check());
  cmd->add_option("--priority", options->overrides.priority, "Higher runs first (default 0); FIFO within a priority");
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman task submit train.sh\n"
              "  jobman task submit train.sh --name=run-1 --accelerator=v4-8 --zone=us-central2-b\n"
              "  jobman task submit eval.yaml --sweep vars.ckpt=100,200,300\n"
              "Headers, as jobman-lite reads them:\n"
              "  #JOBMAN --accelerator=v4-8    #JOBMAN --zone=us-central2-b    #JOBMAN --name=my-task\n"
              "  #JOBMAN --max-retries=3       #JOBMAN --pricing=spot          #JOBMAN --tpu-version=...\n"
              "  #JOBMAN --mail-user=you@example.com   #JOBMAN --mail-type=BEGIN,END,FAIL\n"
              "  #JOBMAN --priority=10 and #JOBMAN --hosts=all|0 are jobman's.\n"
              "The script is frozen at submit. It runs on every host of the worker's slice with JOBMAN_TASK_ID,\n"
              "JOBMAN_TPU_NAME, JOBMAN_ZONE, JOBMAN_NUM_WORKERS, JOBMAN_WORKER_ID and JOBMAN_RESUME (1 after an\n"
              "interruption); a script that fans out itself (gcloud ... --worker=all) runs on host 0 only.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_submit(ctx, *options); }; });
}

} // namespace

void add_task_command(CLI::App& app, Context& ctx) {
  auto* task = app.add_subcommand("task", "Tasks: scripts or configs queued for workers (jobman-lite)");
  task->require_subcommand(1);
  // Set before the subcommands are added: those without examples of their own show these.
  task->footer("Examples:\n"
               "  jobman task submit train.sh\n"
               "  jobman task submit eval.yaml --sweep vars.ckpt=100,200,300\n"
               "  jobman task show 3 --events\n"
               "  jobman task pause -p 'llama3*'\n"
               "  jobman task requeue 3\n"
               "  jobman task delete --all\n"
               "A task is named by its name, its index in `jobman status` or its id; `jobman status` shows the\n"
               "queue, and workers (`jobman worker start`) run it. Run 'jobman task COMMAND --help' for a command.");
  add_submit(*task, ctx);
  add_pool_request(
      *task, ctx, domain::JobKind::task, "pause",
      "Hold tasks back: a running one is stopped, a queued one is not taken", core::Request::cancel,
      "Examples:\n  jobman task pause 3\n  jobman task pause --all\n  jobman task pause -p 'llama3*s50*3e-4*'\n"
      "`jobman task requeue` puts them back in the queue.");
  add_pool_request(*task, ctx, domain::JobKind::task, "requeue",
                   "Put tasks back in the queue (paused, failed or finished ones)", core::Request::resume,
                   "Examples:\n  jobman task requeue 3\n  jobman task requeue -a v4-128 -z us-central2-b\n"
                   "A failed task starts with its retries reset.");
  add_pool_request(*task, ctx, domain::JobKind::task, "delete",
                   "Delete tasks: a running one is stopped; the record stays, DELETED", core::Request::remove,
                   "Examples:\n  jobman task delete 3\n  jobman task delete --all");
  {
    auto options = std::make_shared<ShowOptions>();
    auto* cmd = task->add_subcommand("show", "Show one task: its status, worker, attempts and events");
    cmd->add_option("TASK", options->id, "A name, an index from `jobman status`, or an id")->required();
    cmd->add_flag("-e,--events", options->events, "The whole event timeline");
    cmd->add_flag("-c,--config", options->config, "The task's config (its script is in command.cmd)");
    add_json_flag(*cmd, options->json);
    cmd->callback([&ctx, options] {
      ctx.action = [&ctx, options] {
        core::Selection selection;
        selection.refs = {options->id};
        ShowOptions resolved = *options;
        resolved.id =
            domain::format_job_id(core::select_records(ctx.store(), domain::JobKind::task, selection).front().id);
        return run_show(ctx, resolved);
      };
    });
  }
}

} // namespace jobman::cli
