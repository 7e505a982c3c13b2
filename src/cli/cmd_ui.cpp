// `jobman ui`: the dashboard on loopback. jobman runs jobman-ui (beside it), which has the web server linked in and
// registers it; so the server's libraries load for `ui` alone, never for a `list` in a script's loop.
#include "commands.hpp"
#include "jobman/cli/app.hpp"
#include "jobman/reporting/dashboard.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace jobman::cli {

namespace {

DashboardServer& registered_server() {
  static DashboardServer server;
  return server;
}

struct UiOptions {
  int port = 0;
  std::string prices;
};

// jobman-ui: $JOBMAN_UI_PROGRAM, or beside this binary (a build tree and an install alike).
std::filesystem::path ui_program() {
  if (auto given = util::getenv_nonempty("JOBMAN_UI_PROGRAM")) {
    return *given;
  }
  return util::executable_dir() / "jobman-ui";
}

// Replaces this process with jobman-ui running the same command; returns only on failure, by throwing.
[[noreturn]] void run_ui_program(const Context& ctx, const UiOptions& options) {
  const auto program = ui_program();
  std::vector<std::string> args{"jobman-ui"};
  if (ctx.verbose) {
    args.emplace_back("--verbose");
  }
  args.insert(args.end(), {"ui", "--port", std::to_string(options.port)});
  if (!options.prices.empty()) {
    args.insert(args.end(), {"--prices", options.prices});
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  ctx.out->flush();
  ::execv(program.c_str(), argv.data());
  const int error = errno;
  if (error == ENOENT) {
    throw Error("the dashboard is not installed: " + program.string() + " does not exist");
  }
  throw Error("cannot run " + program.string() + ": " + std::strerror(error));
}

int run_ui(Context& ctx, const UiOptions& options) {
  const auto& server = dashboard_server();
  if (!server) {
    run_ui_program(ctx, options);
  }
  auto prices =
      config::load_prices(options.prices.empty() ? std::nullopt : std::optional<std::filesystem::path>(options.prices));
  reporting::Dashboard dashboard(ctx.store(), std::move(prices), reporting::new_dashboard_token());
  return server(dashboard, options.port, *ctx.out);
}

} // namespace

void set_dashboard_server(DashboardServer server) {
  registered_server() = std::move(server);
}

const DashboardServer& dashboard_server() {
  return registered_server();
}

void add_ui_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<UiOptions>();
  auto* cmd = app.add_subcommand("ui", "A live dashboard of the store in your browser (read-only, on loopback)");
  cmd->add_option("-p,--port", options->port, "Listen on this port of 127.0.0.1 (default: any free one)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--prices", options->prices,
                  "A price table over the built-in one (default: ~/.config/jobman/prices.yaml when present)")
      ->type_name("FILE");
  cmd->footer(
      "Examples:\n"
      "  jobman ui\n"
      "  jobman ui --port 8470    # then, from a laptop: ssh -L 8470:127.0.0.1:8470 HOST\n"
      "Prints the address to open; it carries a random token that every request must present. The page\n"
      "shows the jobs as `list` does and updates within 2 seconds of a change; a job's panel has its timeline,\n"
      "attempts, events and the end of its logs; below, the report's goodput and cost. It reads the store\n"
      "only, and serves until Ctrl-C.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_ui(ctx, *options); }; });
}

} // namespace jobman::cli
