// `jobman worker ...`: jobman-lite's worker commands. A worker keeps one slice, sets every host up once, and runs the
// tasks of the queue that match it, one at a time; a preempted worker gets a new slice as a job does.
#include "commands.hpp"
#include "jobman/config/accelerator.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/config/worker_config.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/orphans.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/core/pool.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/reporting/json.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"
#include "waiting.hpp"

#include <spdlog/spdlog.h>
#include <sstream>
#include <tuple>

namespace jobman::cli {

namespace {

struct StartOptions {
  config::WorkerFlags flags;
  std::string startup_script_path;
  std::string config_path;
  bool json = false;
};

// The one worker a command about one worker names.
std::string one_worker(Context& ctx, const std::string& ref) {
  core::Selection selection;
  selection.refs = {ref};
  return domain::format_job_id(core::select_records(ctx.store(), domain::JobKind::worker, selection).front().id);
}

config::JobConfig worker_config(const StartOptions& options) {
  const auto settings = config::load_settings();
  config::LoadOptions load;
  load.default_zone = settings.zone;
  if (!options.flags.idle_release.empty() && !util::parse_duration_seconds(options.flags.idle_release)) {
    throw UsageError("--idle-release " + options.flags.idle_release + ": expected a duration (90s, 30m, 2h)");
  }
  if (!options.config_path.empty()) {
    // A config whose tpu section is the slice and whose setup sections (ssh, gcsfuse, the environment, setup.script)
    // run once on every host; the flags given win over its values.
    for (const auto& [flag, key, value] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"--accelerator", "tpu.accelerator", options.flags.accelerator},
             {"--zone", "tpu.zone", options.flags.zone},
             {"--tpu-name", "job.name", options.flags.name}, // A worker's name is its slices' name, as in jobman-lite.
             {"--tpu-name", "tpu.name", options.flags.name},
             // By the name jobman gives it (jobman-lite's "standard" is on-demand).
             {"--pricing", "tpu.pricing", options.flags.pricing ? domain::to_string(*options.flags.pricing) : ""},
             {"--allocation-mode", "tpu.allocation_mode", options.flags.allocation_mode},
             {"--version", "tpu.version", options.flags.version},
             {"--ssh-user", "job.remote_user", options.flags.ssh_user},
             {"--idle-release", "tpu.idle_release", options.flags.idle_release}}) {
      if (!value.empty()) {
        load.set_overrides.push_back(key);
        load.set_overrides.back().append("=").append(value);
      }
    }
    auto configs = config::load_job_configs(options.config_path, load);
    if (configs.size() != 1) {
      throw UsageError("--config " + options.config_path + ": a worker takes one config, not a sweep of " +
                       std::to_string(configs.size()));
    }
    return std::move(configs.front());
  }
  if (options.flags.accelerator.empty() || options.flags.zone.empty()) {
    throw UsageError("worker start: give --accelerator and --zone (or --config FILE)");
  }
  if (!config::find_accelerator(options.flags.accelerator)) {
    throw UsageError("--accelerator " + options.flags.accelerator + ": not an accelerator jobman knows (v4-8, " +
                     "v5litepod-16, v6e-32, ...)");
  }
  auto flags = options.flags;
  if (!options.startup_script_path.empty()) {
    flags.startup_script = std::filesystem::absolute(options.startup_script_path).lexically_normal().string();
  }
  auto configs = config::parse_job_configs(config::worker_config_yaml(flags), "worker start flags", load);
  return std::move(configs.front());
}

int run_start(Context& ctx, StartOptions options) {
  if (options.json) {
    silence_logging();
  }
  auto& store = ctx.store();
  if (options.flags.name.empty() && options.config_path.empty()) {
    options.flags.name = core::next_worker_name(store, options.flags.accelerator, options.flags.zone);
  }
  const auto config = worker_config(options);
  for (const auto& w : config.warnings) {
    spdlog::warn("{}", format_warning(w));
  }
  const auto offers = check_offers(ctx, {config}, MockStart::when_autostart);
  if (offers.source == core::OfferSource::built_in) {
    spdlog::warn("{}", offers.note);
  }
  const auto id = core::start_workers(store, {config}, store.identity()).front();
  start_supervisor(ctx);
  const auto job = store.jobs().get(id);
  if (options.json) {
    *ctx.out << job_json(job).dump(2) << '\n';
    return 0;
  }
  *ctx.out << "Worker " << domain::format_job_id(id) << " '" << printable(job.name) << "' started\n"
           << "  Accelerator : " << job.accelerator << '\n'
           << "  Zone        : " << job.zone << '\n'
           << "  Pricing     : " << domain::to_string(config.tpu.pricing) << '\n'
           << "  Mode        : " << config::to_string(config.tpu.allocation_mode) << '\n';
  if (config.setup) {
    *ctx.out << "  Setup       : "
             << (options.startup_script_path.empty() ? "setup.script of the config" : options.startup_script_path)
             << '\n';
  }
  *ctx.out << "Follow it with: jobman status   (or jobman worker logs " << domain::format_job_id(id) << " -f)\n";
  return 0;
}

void add_start(CLI::App& worker, Context& ctx) {
  auto options = std::make_shared<StartOptions>();
  auto* cmd = worker.add_subcommand("start", "Start a worker: request its slice, set every host up once, take tasks");
  cmd->add_option("-a,--accelerator", options->flags.accelerator, "TPU accelerator type (v4-8)");
  cmd->add_option("-z,--zone", options->flags.zone, "Zone (us-central2-b)");
  cmd->add_option("-n,--tpu-name", options->flags.name,
                  "The worker's name, also its slices' name prefix (default <accelerator>-<zone>-<n>)");
  // pricing_check refuses a spelling parse_pricing does not accept before the value is read.
  cmd->add_option_function<std::string>(
         "-p,--pricing", [options](const std::string& value) { options->flags.pricing = domain::parse_pricing(value); },
         "spot (default), preemptible or standard (on demand)")
      ->check(pricing_check());
  cmd->add_option("-m,--allocation-mode", options->flags.allocation_mode, "queued-resources (default) or tpu-vm")
      ->check(CLI::IsMember({"queued-resources", "tpu-vm"}));
  cmd->add_option("-s,--startup-script", options->startup_script_path,
                  "A script run once on every host of each slice the worker gets, before it takes tasks")
      ->check(CLI::ExistingFile);
  cmd->add_option("-u,--ssh-user", options->flags.ssh_user, "The user on the hosts (default gcloud's)");
  cmd->add_option("--version", options->flags.version, "The TPU runtime version (default the accelerator's)");
  cmd->add_option("--config", options->config_path,
                  "A config whose tpu section is the slice and whose setup sections run once on every host")
      ->check(CLI::ExistingFile);
  cmd->add_option("--idle-release", options->flags.idle_release,
                  "Release the slice after this long without a task (30m, 2h); a task queued for the worker brings "
                  "a new one. Default: keep it");
  cmd->add_option("--max-setup-failures", options->flags.max_setup_failures,
                  "Setup failures retried (with backoff) before the worker ends FAILED (default 5)");
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman worker start -a v4-8 -z us-central2-b\n"
              "  jobman worker start -a v6e-128 -z us-east5-b -s scripts/setup/bootstrap.sh\n"
              "  jobman worker start -a v4-8 -z us-central2-b -p standard -n eval-pool-1\n"
              "  jobman worker start -a v5litepod-16 -z us-west4-a --idle-release 30m\n"
              "  jobman worker start --config worker.yaml\n"
              "A supervisor (jobman daemon) drives the worker; no tmux session is needed, and it survives the\n"
              "login node's restarts. A preempted worker gets a new slice; its task goes back to the queue's head.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_start(ctx, *options); }; });
}

int run_reboot(Context& ctx, const PoolSelectOptions& options) {
  if (options.request.json) {
    silence_logging();
  }
  const auto ids = pool_selected_ids(ctx, domain::JobKind::worker, options.selection);
  // Stopped (its task back in the queue, its slice kept), then resumed on the same slice: set up again from scratch.
  RequestCommandOptions stop = options.request;
  stop.no_wait = false;
  std::ostringstream quiet;
  std::ostream* out = ctx.out;
  ctx.out = &quiet;
  int stopped = 0;
  try {
    stopped = run_requests(ctx, ids, stop, core::Request::cancel, true);
  } catch (...) {
    ctx.out = out;
    throw;
  }
  ctx.out = out;
  if (stopped != 0) {
    *ctx.out << quiet.str();
    return stopped;
  }
  return run_requests(ctx, ids, options.request, core::Request::resume, true);
}

void add_reboot(CLI::App& worker, Context& ctx) {
  auto options = std::make_shared<PoolSelectOptions>();
  auto* cmd = worker.add_subcommand("reboot", "Set workers up again on their slices: stop, then resume");
  add_pool_selection(*cmd, *options, domain::JobKind::worker, false);
  cmd->footer("Examples:\n"
              "  jobman worker reboot my-worker\n"
              "  jobman worker reboot --all\n"
              "A worker's running task goes back to the head of the queue first.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_reboot(ctx, *options); }; });
}

void add_one_worker_commands(CLI::App& worker, Context& ctx) {
  {
    auto options = std::make_shared<ShowOptions>();
    auto* cmd = worker.add_subcommand("show", "Show one worker: its slice, its task, its attempts and events");
    cmd->add_option("WORKER", options->id, "A name, an index from `jobman status`, or an id")->required();
    cmd->add_flag("-e,--events", options->events, "The whole event timeline");
    cmd->add_flag("-c,--config", options->config, "The worker's config");
    add_json_flag(*cmd, options->json);
    cmd->callback([&ctx, options] {
      ctx.action = [&ctx, options] {
        ShowOptions resolved = *options;
        resolved.id = one_worker(ctx, options->id);
        return run_show(ctx, resolved);
      };
    });
  }
  {
    auto options = std::make_shared<LogsOptions>();
    auto* cmd = worker.add_subcommand("logs", "Print a worker's setup output (its startup script's); -f follows it");
    cmd->add_option("WORKER", options->id, "A name, an index from `jobman status`, or an id")->required();
    cmd->add_flag("-f,--follow", options->follow, "Keep printing lines as they arrive");
    cmd->add_option("--worker", options->worker, "Which host: an index, or 'all' (default 0)")->type_name("N|all");
    cmd->callback([&ctx, options] {
      ctx.action = [&ctx, options] {
        LogsOptions resolved = *options;
        resolved.id = one_worker(ctx, options->id);
        resolved.setup = true;
        return run_logs(ctx, resolved);
      };
    });
  }
  {
    auto options = std::make_shared<SshOptions>();
    auto* cmd = worker.add_subcommand("ssh", "Open a shell on a host of a worker's slice, or run a command");
    cmd->add_option("WORKER", options->id, "A name, an index from `jobman status`, or an id")->required();
    cmd->add_option("-w,--worker-index,--worker", options->worker, "Which host of the slice (default 0)")
        ->type_name("N");
    cmd->add_option("COMMAND", options->command, "A command to run instead of the shell, after --");
    cmd->callback([&ctx, options] {
      ctx.action = [&ctx, options] {
        SshOptions resolved = *options;
        resolved.id = one_worker(ctx, options->id);
        return run_ssh(ctx, resolved);
      };
    });
  }
}

// One worker's slice as the cloud has it now.
struct SyncedWorker {
  domain::JobRecord job;
  std::string slice;      // Its open slice's name (a queued resource's node has the same); empty when it holds none.
  bool node_only = false; // The slice is a node created directly (tpu-vm mode).
  std::string zone;
  std::string qr;   // The queued resource's state; "-" in tpu-vm mode or without a slice; "gone" when not listed.
  std::string node; // The node's state; "-" without a slice; "gone" when not listed.
  bool changed = false;
};

std::string listed_state(const std::vector<core::ZoneListing>& listings, const std::string& zone,
                         const std::string& name, bool node) {
  const auto is_it = [&](const std::string& full) { return core::resource_name_id(full) == name; };
  for (const auto& listing : listings) {
    if (listing.zone != zone) {
      continue;
    }
    if (node) {
      for (const auto& n : listing.nodes) {
        if (is_it(n.name)) {
          return cloud::to_string(n.state);
        }
      }
    } else {
      for (const auto& q : listing.queued_resources) {
        if (is_it(q.name)) {
          return cloud::to_string(q.state);
        }
      }
    }
  }
  return "gone";
}

// `worker sync`: one listing per zone of the selected workers; what it says of each worker's slice is recorded (the
// QR and VM columns of `status`, and an event when it changed), jobman's resources that no worker or job holds are
// counted, and a supervisor is started to act on the news.
int run_worker_sync(Context& ctx, PoolSelectOptions options) {
  if (options.request.json) {
    silence_logging();
  }
  if (options.selection.refs.empty()) {
    options.selection.all = true;
  }
  auto& store = ctx.store();
  std::vector<SyncedWorker> workers;
  std::vector<std::string> zones;
  for (const auto& job : core::select_records(store, domain::JobKind::worker, options.selection)) {
    SyncedWorker w{job, "", false, job.zone, "-", "-", false};
    const auto attempts = store.attempts().of(job.id);
    for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
      if (it->holds_slice() && !it->released_ms) {
        w.slice = it->slice_name();
        w.node_only = it->node_only();
        w.zone = it->zone;
        break;
      }
    }
    zones.push_back(w.zone);
    workers.push_back(std::move(w));
  }
  std::sort(zones.begin(), zones.end());
  zones.erase(std::unique(zones.begin(), zones.end()), zones.end());
  const auto settings = config::load_settings();
  const auto access = core::connect_cloud(settings, *ctx.err);
  std::vector<core::ZoneListing> listings;
  listings.reserve(zones.size());
  for (const auto& zone : zones) {
    listings.push_back(core::list_zone(access, zone));
  }
  for (auto& w : workers) {
    if (w.slice.empty()) {
      continue;
    }
    const bool node_only = w.node_only;
    w.node = listed_state(listings, w.zone, w.slice, true);
    w.qr = node_only ? "-" : listed_state(listings, w.zone, w.slice, false);
    const auto& state = node_only ? w.node : w.qr;
    if (state != w.job.slice_state) {
      w.changed = true;
      const nlohmann::json data = {{node_only ? "node" : "queued_resource", w.slice}, {"state", state}};
      store.events().record_observation(w.job.id, state, "worker sync: " + w.slice + " is " + state, data.dump());
    }
  }
  core::OrphanFilter filter;
  filter.owners = {core::owner_label_value(store.identity())};
  filter.now_ms = util::now_ms();
  const auto orphans = core::find_orphans(listings, store.attempts().held_slices(), filter);
  keep_jobs_driven(ctx);
  if (options.request.json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& w : workers) {
      rows.push_back({{"id", w.job.id},
                      {"name", w.job.name},
                      {"phase", domain::to_string(w.job.phase)},
                      {"zone", w.zone},
                      {"slice", reporting::text_or_null(w.slice)},
                      {"qr", w.qr},
                      {"vm", w.node},
                      {"changed", w.changed}});
    }
    nlohmann::ordered_json out = {{"zones", zones}, {"workers", rows}, {"orphans", orphans.size()}};
    *ctx.out << out.dump(2) << '\n';
    return 0;
  }
  Table table({"WORKER", "ZONE", "PHASE", "SLICE", "QR", "VM"});
  for (const auto& w : workers) {
    table.add_row({printable(w.job.name), w.zone, status_text(w.job), w.slice.empty() ? "-" : printable(w.slice),
                   printable(w.qr) + (w.changed ? " (new)" : ""), printable(w.node)});
  }
  table.print(*ctx.out, ctx.color);
  *ctx.err << "Listed " << util::join(zones, ", ") << "; " << workers.size() << " worker(s).";
  if (!orphans.empty()) {
    *ctx.err << " " << orphans.size() << " resource(s) of yours that no worker or job holds: see `jobman sync`.";
  }
  *ctx.err << '\n';
  return 0;
}

void add_worker_sync(CLI::App& worker, Context& ctx) {
  auto options = std::make_shared<PoolSelectOptions>();
  auto* cmd = worker.add_subcommand(
      "sync", "Ask the cloud now how every worker's slice stands, and record it (one listing per zone)");
  add_pool_selection(*cmd, *options, domain::JobKind::worker, false);
  cmd->footer("Examples:\n  jobman worker sync\n  jobman worker sync -z us-central2-b\n"
              "The store already holds the workers (no tmux sessions or registry to rebuild); sync refreshes what\n"
              "`jobman status` shows of their slices without waiting for the supervisor's next listing, and names\n"
              "resources of yours that nothing holds (`jobman sync --delete` deletes them).");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_worker_sync(ctx, *options); }; });
}

} // namespace

void add_worker_command(CLI::App& app, Context& ctx) {
  auto* worker = app.add_subcommand("worker", "Workers: slices kept alive that run the queue's tasks (jobman-lite)");
  worker->require_subcommand(1);
  // Set before the subcommands are added: those without examples of their own show these.
  worker->footer("Examples:\n"
                 "  jobman worker start -a v4-8 -z us-central2-b -s setup.sh\n"
                 "  jobman worker show my-worker --events\n"
                 "  jobman worker logs my-worker -f\n"
                 "  jobman worker ssh my-worker -w 1 -- df -h\n"
                 "  jobman worker stop my-worker      # its task back to the queue, the slice kept\n"
                 "  jobman worker resume --all\n"
                 "  jobman worker reboot my-worker\n"
                 "  jobman worker delete -a v4-8 -z us-central2-b\n"
                 "  jobman worker sync\n"
                 "A worker is named by its name, its index in `jobman status` or its id. Tasks for the workers are\n"
                 "queued with `jobman task submit`. Run 'jobman worker COMMAND --help' for a command.");
  add_start(*worker, ctx);
  add_pool_request(*worker, ctx, domain::JobKind::worker, "stop",
                   "Stop workers: their tasks go back to the queue, their slices are kept", core::Request::cancel,
                   "Examples:\n  jobman worker stop my-worker\n  jobman worker stop --all\n"
                   "  jobman worker stop -a v4-16 -z us-central2-b\nResume them with `jobman worker resume`.");
  add_pool_request(*worker, ctx, domain::JobKind::worker, "resume",
                   "Resume stopped workers on their kept slices (or new ones)", core::Request::resume,
                   "Examples:\n  jobman worker resume my-worker\n  jobman worker resume -a v4-16");
  add_reboot(*worker, ctx);
  add_pool_request(*worker, ctx, domain::JobKind::worker, "delete",
                   "Delete workers: their tasks go back to the queue, their slices are released", core::Request::remove,
                   "Examples:\n  jobman worker delete my-worker\n  jobman worker delete --all\n"
                   "Waits until the cloud confirms every slice gone (--no-wait returns at once).");
  add_one_worker_commands(*worker, ctx);
  add_worker_sync(*worker, ctx);
}

} // namespace jobman::cli
