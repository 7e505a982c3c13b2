// `jobman wait ID...`: block until jobs end; the exit code says how they ended.
#include "commands.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/strings.hpp"
#include "output.hpp"
#include "waiting.hpp"

namespace jobman::cli {

namespace {

struct WaitOptions {
  std::vector<std::string> ids;
  std::string timeout;
  bool json = false;
};

int run_wait(Context& ctx, const WaitOptions& options) {
  if (options.json) {
    silence_logging();
  }
  std::optional<std::chrono::milliseconds> timeout;
  if (!options.timeout.empty()) {
    const auto seconds = util::parse_duration_seconds(options.timeout);
    if (!seconds || *seconds < 0) {
      throw UsageError("--timeout: '" + options.timeout + "' is not a duration (90, 30s, 5m, 2h)");
    }
    timeout = std::chrono::milliseconds(*seconds * 1000);
  }
  std::vector<std::int64_t> ids;
  for (const auto& text : options.ids) {
    ids.push_back(parse_job_id_argument(text));
  }
  for (const auto id : ids) {
    (void)ctx.store().jobs().get(id); // Exit 3 for an unknown id before waiting for the others.
  }
  const auto result = wait_for_jobs(ctx, ids, WaitGoal::finished, timeout);
  if (options.json) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto id : ids) {
      const auto& job = result.jobs.at(id);
      all.push_back(job ? job_json(*job)
                        : nlohmann::ordered_json{{"id", domain::format_job_id(id)}, {"removed", true}});
    }
    *ctx.out << all.dump(2) << '\n';
  } else {
    for (const auto id : ids) {
      const auto& job = result.jobs.at(id);
      std::string text = job ? status_text(*job) : std::string("removed");
      if (job && job->exit_code) {
        text += " (exit code " + std::to_string(*job->exit_code) + ")";
      }
      *ctx.out << domain::format_job_id(id) << ": " << text << '\n';
    }
  }
  return wait_exit_code(result);
}

} // namespace

void add_wait_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<WaitOptions>();
  auto* cmd = app.add_subcommand("wait", "Block until jobs end; the exit code says how they ended");
  cmd->add_option("ID", options->ids, "Job ids (000042 or 42)")->required();
  cmd->add_option("--timeout", options->timeout, "Give up after this long (90, 30s, 5m, 2h): exit 124");
  add_json_flag(*cmd, options->json);
  cmd->footer("Examples:\n"
              "  jobman wait 000042\n"
              "  jobman wait $(jobman create sweep.yaml) --timeout 6h && echo all succeeded\n"
              "Exit codes: 0 all SUCCEEDED, 4 one FAILED, 5 one CANCELLED or DELETED, 124 timed out,\n"
              "3 no such job. Starts the supervisor when none is running.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_wait(ctx, *options); }; });
}

} // namespace jobman::cli
