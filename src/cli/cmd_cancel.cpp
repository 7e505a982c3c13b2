// `jobman cancel ID...`: Stop jobs' workloads and stop driving them; the slice is kept.
#include "commands.hpp"

namespace jobman::cli {

void add_cancel_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<RequestCommandOptions>();
  auto* cmd = app.add_subcommand("cancel", "Stop jobs' workloads and stop driving them; the slice is kept");
  add_request_arguments(*cmd, *options, false);
  cmd->footer("Examples:\n"
              "  jobman cancel 000042 000043\n"
              "  jobman list --name 'sweep-*' -q | xargs jobman cancel\n"
              "Safe to repeat. Exit code 3 when an id is not in the store (the other ids are still handled).");
  cmd->callback([&ctx, options] {
    ctx.action = [&ctx, options] { return run_request_command(ctx, *options, core::Request::cancel); };
  });
}

} // namespace jobman::cli
