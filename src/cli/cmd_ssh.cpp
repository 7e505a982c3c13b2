// `jobman ssh ID`: a shell (or one command) on a worker of the job's slice, with the worker's JOBMAN_* variables;
// jobman becomes ssh (or gcloud's ssh).
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/cloud.hpp"
#include "jobman/core/worker_shell.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"

#include <cstring>
#include <map>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace jobman::cli {

namespace {

// Replaces this process with `argv` (found on PATH), with `environment` added to its environment, so that the
// terminal, the signals and the exit code are its. Returns only by throwing.
[[noreturn]] void replace_process(const std::vector<std::string>& argv,
                                  const std::map<std::string, std::string>& environment) {
  const int error = util::ProcessBuilder(argv).env(environment).exec();
  throw Error("cannot run " + argv[0] + ": " + std::strerror(error) +
              (argv[0] == "ssh" ? "; install OpenSSH's client"
                                : "; install the Google Cloud CLI, or name it with 'gcloud' in the settings"));
}

} // namespace

int run_ssh(Context& ctx, const SshOptions& options) {
  const std::int64_t id = parse_job_id_argument(options.id);
  auto& store = ctx.store();
  const auto job = store.jobs().get(id, true);
  if (options.worker < 0 || options.worker >= job.hosts) {
    throw UsageError("--worker " + std::to_string(options.worker) + ": job " + domain::format_job_id(id) +
                     (job.hosts == 1 ? " has only worker 0" : " has workers 0 to " + std::to_string(job.hosts - 1)));
  }
  const auto attempt = core::live_attempt(store, job);
  const auto config = core::recorded_config(job);
  const auto access = core::connect_cloud(config::load_settings(), *ctx.err);
  const auto argv = core::worker_shell_argv(access, config, attempt, options.worker, util::join(options.command, " "),
                                            ::isatty(STDIN_FILENO) != 0 && ::isatty(STDOUT_FILENO) != 0);
  spdlog::debug("running {}", util::join(argv, " "));
  ctx.out->flush();
  ctx.err->flush();
  spdlog::default_logger()->flush();
  replace_process(argv, access.gcloud_env);
}

void add_ssh_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<SshOptions>();
  auto* cmd = app.add_subcommand("ssh", "Open a shell on a worker of a job's slice, or run a command there");
  cmd->add_option("ID", options->id, "Job id (000042 or 42)")->required();
  cmd->add_option("--worker", options->worker, "Which worker host of the slice (default 0)")->type_name("N");
  cmd->add_option("COMMAND", options->command,
                  "A command to run instead of the shell, after --; its words are joined with spaces");
  cmd->footer("Examples:\n"
              "  jobman ssh 42\n"
              "  jobman ssh 42 --worker 3\n"
              "  jobman ssh 42 -- df -h /mnt/bucket\n"
              "  jobman ssh 42 --worker 1 -- 'ps aux | grep train'\n"
              "Connects with ssh (or 'gcloud compute tpus tpu-vm ssh' with 'transport: gcloud' in the settings) to\n"
              "the node of the job's current attempt, over the connection jobman already holds to that host. The\n"
              "shell or command has the worker's JOBMAN_* variables once the command was launched there; a shell\n"
              "gets a terminal when jobman runs in one. The exit code is the command's (255 when the host cannot be\n"
              "reached); 1 when the job has no slice, 3 when there is no such job.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_ssh(ctx, *options); }; });
}

} // namespace jobman::cli
