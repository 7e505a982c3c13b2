// `jobman create CONFIG`: record one job per config (or sweep member); --dry-run shows the plan instead.
#include "commands.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/checkpoint_paths.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/plan.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "output.hpp"
#include "waiting.hpp"

#include <csignal>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace jobman::cli {

namespace {

struct CreateOptions {
  ConfigArguments config;
  bool dry_run = false;
  bool json = false;
  bool wait = false;
  bool no_start = false;
};

// What SIGINT writes on stderr while an ExitOnInterrupt lives: set before the handler is installed, only read by it.
std::string interrupt_message; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

// While it lives, SIGINT writes a message on stderr and ends the process with exit code 130, at once: `create
// --wait` only reads the store while it waits, so nothing is left to undo, and the jobs go on under the supervisor.
class ExitOnInterrupt {
public:
  explicit ExitOnInterrupt(std::string message) {
    interrupt_message = std::move(message);
    struct sigaction action {};
    action.sa_handler = &on_interrupt;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_);
  }
  ExitOnInterrupt(const ExitOnInterrupt&) = delete;
  ExitOnInterrupt& operator=(const ExitOnInterrupt&) = delete;
  ~ExitOnInterrupt() { ::sigaction(SIGINT, &previous_, nullptr); }

private:
  // Async-signal-safe: write(2) and _exit(2) only.
  static void on_interrupt(int /*signal*/) {
    const char* data = interrupt_message.data();
    std::size_t left = interrupt_message.size();
    while (left > 0) {
      const ssize_t wrote = ::write(STDERR_FILENO, data, left);
      if (wrote <= 0) {
        break;
      }
      data += wrote;
      left -= static_cast<std::size_t>(wrote);
    }
    ::_exit(static_cast<int>(ExitCode::interrupted));
  }

  struct sigaction previous_ {};
};

// What `create --wait` says when it is interrupted: the jobs keep running, and how to follow them.
std::string interrupted_wait_message(const std::vector<std::int64_t>& ids) {
  std::vector<std::string> names;
  names.reserve(ids.size());
  for (const auto id : ids) {
    names.push_back(domain::format_job_id(id));
  }
  const bool one = names.size() == 1;
  // A progress line may be on the terminal: start on a line of its own.
  return std::string(util::is_terminal(2) ? "\n" : "") + "jobman: interrupted; " + (one ? "job " : "jobs ") +
         util::join(names, ", ") + (one ? " keeps" : " keep") + " running under the supervisor. Follow " +
         (one ? "it" : "them") + " with `jobman wait " + util::join(names, " ") + "` or `jobman logs " + names.front() +
         " -f`; `jobman cancel " + util::join(names, " ") + "` stops " + (one ? "it" : "them") + ".\n";
}

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

// The base URL of the TPU API `version` ("v2", "v2alpha1") the request goes to.
std::string api_base(const config::Settings& settings, const std::string& version) {
  std::string root = settings.api_endpoint;
  if (root.empty()) {
    root = settings.cloud == config::CloudKind::mock ? "<bundled mock cloud>" : "https://tpu.googleapis.com";
  }
  while (!root.empty() && root.back() == '/') {
    root.pop_back();
  }
  if (root.ends_with("/v2")) {
    root.resize(root.size() - 3);
  }
  return root + "/" + version + "/";
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
    out << plan["api"]["method"].get<std::string>() << ' '
        << api_base(settings, plan["api"]["version"].get<std::string>()) << plan["api"]["url"].get<std::string>()
        << '\n';
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
      check_offers(ctx, configs, options.dry_run || options.no_start ? MockStart::never : MockStart::when_autostart,
                   options.config.strict_locality);
  if (offers.source == core::OfferSource::built_in) {
    spdlog::warn("{}", offers.note);
  }
  if (options.dry_run) {
    return print_dry_run(ctx, configs, options.json);
  }
  auto& store = ctx.store();
  // A checkpoint directory another job wrote to: the new job would resume that job's run.
  for (const auto& warning : core::shared_checkpoint_warnings(store, configs)) {
    spdlog::warn("{}", warning);
  }
  const auto ids = core::create_jobs(store, configs, store.identity());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    spdlog::debug("recorded job {} '{}' ({} in {}, {})", domain::format_job_id(ids[i]), configs[i].job.name,
                  configs[i].tpu.accelerator.name, configs[i].tpu.zone, domain::to_string(configs[i].tpu.pricing));
  }
  std::optional<ExitOnInterrupt> interrupt;
  if (options.wait) {
    interrupt.emplace(interrupted_wait_message(ids));
  }
  // The ids go out as soon as they are recorded, whatever follows: a script has them while the jobs run.
  if (!options.json) {
    for (const auto id : ids) {
      *ctx.out << domain::format_job_id(id) << '\n';
    }
    ctx.out->flush();
  }
  start_driving(ctx, options);
  std::optional<WaitResult> waited;
  if (options.wait) {
    waited = wait_for_jobs(ctx, ids, WaitGoal::finished, std::nullopt);
  }
  interrupt.reset();
  const int exit_code = waited ? wait_exit_code(*waited) : 0;
  if (options.json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      nlohmann::ordered_json j = job_json(store.jobs().get(ids[i]));
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
  if (waited) {
    // How each job ended, for people: stdout keeps the ids alone.
    for (const auto id : ids) {
      const auto& job = waited->jobs.at(id);
      *ctx.err << domain::format_job_id(id) << ": " << (job ? status_text(*job) : std::string("removed")) << '\n';
    }
  }
  return exit_code;
}

} // namespace

void add_create_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<CreateOptions>();
  auto* cmd =
      app.add_subcommand("create", "Record a job from a config file (one per sweep combination); prints the id(s)");
  add_config_arguments(*cmd, options->config);
  add_locality_flag(*cmd, options->config);
  cmd->add_flag("--dry-run", options->dry_run,
                "Print the resolved config, the cloud request and the setup steps; record nothing");
  add_json_flag(*cmd, options->json);
  auto* wait = cmd->add_flag("--wait", options->wait,
                             "Print the ids, then block until the jobs end and say how on stderr; exit codes as for "
                             "'jobman wait' (0, 4 failed, 5 cancelled, 130 interrupted: the jobs keep running)");
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
