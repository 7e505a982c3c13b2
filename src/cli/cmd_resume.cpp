// `jobman resume ID...`: Drive stopped or failed jobs again (desired state: run).
#include "commands.hpp"

namespace jobman::cli {

void add_resume_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<RequestCommandOptions>();
  auto* cmd = app.add_subcommand("resume", "Drive stopped or failed jobs again (desired state: run)");
  add_request_arguments(*cmd, *options, false);
  cmd->footer("Examples:\n"
              "  jobman resume 000042\n"
              "  jobman list --status FAILED -q | xargs jobman resume\n"
              "Safe to repeat. Exit code 3 when an id is not in the store (the other ids are still handled).");
  cmd->callback([&ctx, options] {
    ctx.action = [&ctx, options] { return run_request_command(ctx, *options, core::Request::resume); };
  });
}

} // namespace jobman::cli
