// `jobman create CONFIG`: record one job per config (or sweep member); --dry-run shows the plan instead.
#include "commands.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"
#include "waiting.hpp"

#include <spdlog/spdlog.h>

namespace jobman::cli {

namespace {

struct CreateOptions {
  ConfigArguments config;
  bool dry_run = false;
  bool json = false;
  bool wait = false;
  bool no_start = false;
};

// Hands the new jobs to a supervisor (see start_supervisor).
void start_driving(Context& ctx, const CreateOptions& options) {
  if (!options.no_start) {
    start_supervisor(ctx);
  }
}

std::string project_for_plan(const config::Settings& settings) {
  if (!settings.project.empty()) {
    return settings.project;
  }
  return settings.cloud == config::CloudKind::mock ? "jobman-mock" : "PROJECT";
}

std::string api_base(const config::Settings& settings) {
  if (!settings.api_endpoint.empty()) {
    return settings.api_endpoint;
  }
  return settings.cloud == config::CloudKind::mock ? "<bundled mock cloud>/v2/" : "https://tpu.googleapis.com/v2/";
}

std::string worker_list(const std::vector<int>& workers) {
  if (workers.empty()) {
    return "-";
  }
  // Contiguous ranges read better than long lists: 0-15.
  std::string out;
  std::size_t i = 0;
  while (i < workers.size()) {
    std::size_t j = i;
    while (j + 1 < workers.size() && workers[j + 1] == workers[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(workers[i]);
    if (j > i) {
      out += "-" + std::to_string(workers[j]);
    }
    i = j + 1;
  }
  return out;
}

int print_dry_run(Context& ctx, const std::vector<config::JobConfig>& configs, bool json) {
  const config::Settings settings = config::load_settings();
  const std::string user = util::current_user();
  const std::string project = project_for_plan(settings);
  if (json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto& c : configs) {
      nlohmann::ordered_json item = nlohmann::ordered_json::parse(config::to_json(c, -1));
      nlohmann::ordered_json entry = {
          {"config", item}, {"plan", nlohmann::ordered_json::parse(core::plan_json(c, project, user).dump())}};
      nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
      for (const auto& w : c.warnings) {
        warnings.push_back(warning_json(w));
      }
      entry["warnings"] = warnings;
      all.push_back(entry);
    }
    *ctx.out << all.dump(2) << '\n';
    return 0;
  }
  auto& out = *ctx.out;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto& c = configs[i];
    const auto plan = core::plan_json(c, project, user);
    out << "# job " << (i + 1) << " of " << configs.size() << ": " << c.job.name << " (dry run: nothing recorded)\n";
    out << "--- resolved config\n" << c.resolved_yaml;
    if (!c.resolved_yaml.empty() && c.resolved_yaml.back() != '\n') {
      out << '\n';
    }
    out << "--- cloud request (job id and attempt shown as 000000-a1)\n";
    out << plan["api"]["method"].get<std::string>() << ' ' << api_base(settings)
        << plan["api"]["url"].get<std::string>() << '\n';
    out << plan["api"]["body"].dump(2) << '\n';
    out << "--- setup steps, in order\n";
    for (const auto& step : core::setup_steps(c)) {
      out << "  workers " << worker_list(step.workers) << "  " << step.module << ": " << step.summary << '\n';
    }
  }
  return 0;
}

int run_create(Context& ctx, const CreateOptions& options) {
  if (options.json) {
    silence_logging();
  }
  const auto configs = load_configs(options.config);
  // Sweep members share their warnings; name each once.
  for (const auto& w : configs.front().warnings) {
    spdlog::warn("{}", format_warning(w));
  }
  const auto offers =
      check_offers(ctx, configs, options.dry_run || options.no_start ? MockStart::never : MockStart::when_autostart);
  if (offers.source == core::OfferSource::built_in) {
    spdlog::warn("{}", offers.note);
  }
  if (options.dry_run) {
    return print_dry_run(ctx, configs, options.json);
  }
  auto& store = ctx.store();
  const auto ids = core::create_jobs(store, configs, store.identity());
  start_driving(ctx, options);
  std::optional<WaitResult> waited;
  if (options.wait) {
    waited = wait_for_jobs(ctx, ids, WaitGoal::finished, std::nullopt);
  }
  const int exit_code = waited ? wait_exit_code(*waited) : 0;
  if (options.json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      nlohmann::ordered_json j = job_json(store.get_job(ids[i]));
      nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
      for (const auto& w : configs[i].warnings) {
        warnings.push_back(warning_json(w));
      }
      j["warnings"] = warnings;
      all.push_back(j);
    }
    *ctx.out << all.dump(2) << '\n';
    return exit_code;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    *ctx.out << util::format_job_id(ids[i]);
    if (waited) {
      const auto& job = waited->jobs.at(ids[i]);
      *ctx.out << ": " << (job ? status_text(*job) : std::string("removed"));
    }
    *ctx.out << '\n';
    spdlog::debug("recorded job {} '{}' ({} in {}, {})", util::format_job_id(ids[i]), configs[i].job.name,
                  configs[i].tpu.accelerator.name, configs[i].tpu.zone, config::to_string(configs[i].tpu.pricing));
  }
  return exit_code;
}

} // namespace

void add_create_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<CreateOptions>();
  auto* cmd =
      app.add_subcommand("create", "Record a job from a config file (one per sweep combination); prints the id(s)");
  add_config_arguments(*cmd, options->config);
  cmd->add_flag("--dry-run", options->dry_run,
                "Print the resolved config, the cloud request and the setup steps; record nothing");
  add_json_flag(*cmd, options->json);
  auto* wait = cmd->add_flag("--wait", options->wait,
                             "Block until the jobs end; exit codes as for 'jobman wait' (0, 4 failed, 5 cancelled)");
  auto* no_start = cmd->add_flag("--no-start", options->no_start,
                                 "Only record the jobs; start no supervisor (a running one still picks them up)");
  wait->excludes(no_start);
  cmd->footer("Examples:\n"
              "  jobman create configs/examples/spot-v4-systolic.yaml\n"
              "  jobman create train.yaml --wait && echo succeeded\n"
              "  jobman create train.yaml --set tpu.zone=us-central2-b --set command.workers=all\n"
              "  jobman create train.yaml --sweep vars.lr=1e-4,3e-4 --sweep vars.bs=32,64   # 4 jobs\n"
              "  jobman create train.yaml --dry-run\n"
              "  id=$(jobman create train.yaml)");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_create(ctx, *options); }; });
}

} // namespace jobman::cli
