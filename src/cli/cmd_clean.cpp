// `jobman clean ID...`: Delete jobs, then remove their local directories and records.
#include "commands.hpp"

namespace jobman::cli {

void add_clean_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<RequestCommandOptions>();
  auto* cmd = app.add_subcommand("clean", "Delete jobs, then remove their local directories and records");
  add_request_arguments(*cmd, *options, true);
  cmd->footer("Examples:\n"
              "  jobman clean 000042\n"
              "  jobman clean --all-finished\n"
              "Safe to repeat. Exit code 3 when an id is not in the store (the other ids are still handled).\n"
              "What `jobman availability` learnt of the jobs' attempts stays in the store.");
  cmd->callback([&ctx, options] {
    ctx.action = [&ctx, options] { return run_request_command(ctx, *options, core::Request::clean); };
  });
}

} // namespace jobman::cli
