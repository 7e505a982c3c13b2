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

#include <algorithm>
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
  const auto config = core::recorded_config(job);
  const int slices = std::max(1, config.tpu.slices);
  int worker = options.worker;
  if (options.slice) {
    // --slice S --worker W: worker W of slice S, whose hosts come after those of the slices before it.
    if (*options.slice < 0 || *options.slice >= slices) {
      throw UsageError("--slice " + std::to_string(*options.slice) + ": job " + domain::format_job_id(id) +
                       (slices == 1 ? " has only slice 0" : " has slices 0 to " + std::to_string(slices - 1)));
    }
    const int per_slice = job.hosts / slices;
    if (worker < 0 || worker >= per_slice) {
      throw UsageError("--worker " + std::to_string(worker) + " --slice " + std::to_string(*options.slice) +
                       ": each slice of job " + domain::format_job_id(id) +
                       (per_slice == 1 ? " has only worker 0" : " has workers 0 to " + std::to_string(per_slice - 1)));
    }
    worker += *options.slice * per_slice;
  }
  if (worker < 0 || worker >= job.hosts) {
    throw UsageError("--worker " + std::to_string(worker) + ": job " + domain::format_job_id(id) +
                     (job.hosts == 1 ? " has only worker 0" : " has workers 0 to " + std::to_string(job.hosts - 1)) +
                     (slices > 1 ? " across its " + std::to_string(slices) + " slices" : std::string()));
  }
  const auto attempt = core::live_attempt(store, job);
  const auto access = core::connect_cloud(config::load_settings(), *ctx.err);
  const auto argv = core::worker_shell_argv(access, config, attempt, worker, util::join(options.command, " "),
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
  cmd->add_option("--worker", options->worker,
                  "Which worker host (default 0); of a multislice job, counted across its slices, slice 0's first")
      ->type_name("N");
  cmd->add_option("--slice", options->slice,
                  "A multislice job's slice: --worker then counts the hosts of that slice (default worker 0)")
      ->type_name("S");
  cmd->add_option("COMMAND", options->command,
                  "A command to run instead of the shell, after --; its words are joined with spaces");
  cmd->footer("Examples:\n"
              "  jobman ssh 42\n"
              "  jobman ssh 42 --worker 3\n"
              "  jobman ssh 42 -- df -h /mnt/bucket\n"
              "  jobman ssh 42 --worker 1 -- 'ps aux | grep train'\n"
              "  jobman ssh 42 --slice 1 --worker 0     (a multislice job: slice 1's first host)\n"
              "Connects with ssh (or 'gcloud compute tpus tpu-vm ssh' with 'transport: gcloud' in the settings) to\n"
              "the node of the job's current attempt, over the connection jobman already holds to that host. The\n"
              "shell or command has the worker's JOBMAN_* variables once the command was launched there; a shell\n"
              "gets a terminal when jobman runs in one. The exit code is the command's (255 when the host cannot be\n"
              "reached); 1 when the job has no slice, 3 when there is no such job.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_ssh(ctx, *options); }; });
}

} // namespace jobman::cli
