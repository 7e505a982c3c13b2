#include "jobman/cli/app.hpp"

#include "commands.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"

#include <CLI/CLI.hpp>
#include <csignal>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace jobman::cli {

namespace {

void setup_logging(bool verbose, bool daemon) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      util::color_enabled(2) ? spdlog::color_mode::automatic : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("jobman", sink);
  if (daemon) {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$: %v");
    logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  } else if (verbose) {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%P] %^%l%$: %v");
    logger->set_level(spdlog::level::debug);
  } else {
    logger->set_pattern("jobman: %^%l%$: %v");
    logger->set_level(spdlog::level::info);
  }
  spdlog::set_default_logger(logger);
}

int report(std::ostream& err, const std::string& message, ExitCode code) {
  err << "jobman: error: " << message << '\n';
  return static_cast<int>(code);
}

} // namespace

void silence_logging() {
  spdlog::set_level(spdlog::level::off);
}

CLI::Option* add_json_flag(CLI::App& command, bool& json) {
  return command.add_flag("--json", json, "Print machine-readable JSON on stdout (see docs/JSON.md); no logging");
}

void build_app(CLI::App& app, Context& ctx) {
  app.description("jobman: run ML training jobs on Cloud TPU queued resources (or the bundled mock cloud)");
  app.name("jobman");
  app.set_version_flag("--version", std::string("jobman ") + JOBMAN_VERSION, "Print the version and exit");
  app.add_flag("-v,--verbose", ctx.verbose, "Log debug detail with timestamps and pid to stderr");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer("Examples:\n"
             "  jobman create configs/examples/spot-v4-systolic.yaml\n"
             "  jobman list\n"
             "  jobman show 000042\n"
             "  jobman logs -f 000042\n"
             "  jobman cancel 000042\n"
             "\n"
             "Exit codes: 0 ok, 1 error, 2 usage or config error, 3 no such job, 4 job failed,\n"
             "5 cancelled, 124 timed out, 130 interrupted. Run 'jobman COMMAND --help' for a command.");
  add_create_command(app, ctx);
  add_validate_command(app, ctx);
  add_list_command(app, ctx);
  add_show_command(app, ctx);
  add_logs_command(app, ctx);
  add_ssh_command(app, ctx);
  add_resume_command(app, ctx);
  add_cancel_command(app, ctx);
  add_delete_command(app, ctx);
  add_clean_command(app, ctx);
  add_settings_command(app, ctx);
  add_completion_command(app, ctx);
  add_daemon_command(app, ctx);
  add_wait_command(app, ctx);
}

int run(int argc, char** argv) {
  Context ctx;
  ctx.color = util::color_enabled(1);
  CLI::App app;
  try {
    build_app(app, ctx);
  } catch (const CLI::Error& e) {
    return report(std::cerr, std::string("internal: ") + e.what(), ExitCode::error);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << '\n';
    return 0;
  } catch (const CLI::ParseError& e) {
    // Find the subcommand that was being parsed, so the hint points at its help.
    std::string where = "jobman";
    for (const auto* sub : app.get_subcommands()) {
      where += " " + sub->get_name();
    }
    std::cerr << "jobman: error: " << e.what() << "\n"
              << "Run '" << where << " --help' for usage.\n";
    return static_cast<int>(ExitCode::usage);
  } catch (const Error& e) {
    return report(std::cerr, e.what(), e.code());
  }
  setup_logging(ctx.verbose, ctx.daemon);
  if (!ctx.action) {
    return report(std::cerr, "no command given; run 'jobman --help'", ExitCode::usage);
  }
  try {
    return ctx.action();
  } catch (const Error& e) {
    return report(std::cerr, e.what(), e.code());
  } catch (const std::exception& e) {
    return report(std::cerr, e.what(), ExitCode::error);
  }
}

} // namespace jobman::cli
