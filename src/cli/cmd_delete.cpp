// `jobman delete ID...`: Cancel jobs and delete their queued resources and nodes; the record stays.
#include "commands.hpp"

namespace jobman::cli {

void add_delete_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<RequestCommandOptions>();
  auto* cmd = app.add_subcommand("delete", "Cancel jobs and delete their queued resources and nodes; the record stays");
  add_request_arguments(*cmd, *options, true);
  cmd->footer("Examples:\n"
              "  jobman delete 000042\n"
              "  jobman delete --all-finished\n"
              "Safe to repeat. Exit code 3 when an id is not in the store (the other ids are still handled).");
  cmd->callback([&ctx, options] {
    ctx.action = [&ctx, options] { return run_request_command(ctx, *options, core::Request::remove); };
  });
}

} // namespace jobman::cli
