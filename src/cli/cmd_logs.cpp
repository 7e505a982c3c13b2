// `jobman logs ID`: the output a job's workers sent home (or their setup logs), once or followed as it grows.
#include "commands.hpp"
#include "jobman/config/settings.hpp"
#include "jobman/core/daemon.hpp"
#include "jobman/core/job_logs.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/domain/job.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "waiting.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string_view>
#include <sys/signalfd.h>
#include <unistd.h>

namespace jobman::cli {

namespace {

// SIGINT as a readable descriptor for the length of a scope: blocked, and delivered through a signalfd, so that a
// follower polls for it with its files and ends with exit code 130.
class InterruptSignal {
public:
  InterruptSignal() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    if (::sigprocmask(SIG_BLOCK, &signals_, &previous_) != 0) {
      throw Error(std::string("sigprocmask: ") + std::strerror(errno));
    }
    fd_ = ::signalfd(-1, &signals_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) {
      const int error = errno;
      ::sigprocmask(SIG_SETMASK, &previous_, nullptr);
      throw Error(std::string("signalfd: ") + std::strerror(error));
    }
  }
  InterruptSignal(const InterruptSignal&) = delete;
  InterruptSignal& operator=(const InterruptSignal&) = delete;
  ~InterruptSignal() {
    // Take a pending SIGINT, which has been answered, before unblocking it: it must not end the process.
    signalfd_siginfo info{};
    while (::read(fd_, &info, sizeof info) > 0) {
    }
    ::close(fd_);
    ::sigprocmask(SIG_SETMASK, &previous_, nullptr);
  }
  // Readable once SIGINT has arrived.
  [[nodiscard]] int fd() const { return fd_; }

private:
  sigset_t signals_{};
  sigset_t previous_{};
  int fd_ = -1;
};

// The workers whose logs are printed, in order.
std::vector<int> chosen_workers(const LogsOptions& options, const domain::JobRecord& job) {
  const std::string name = domain::format_job_id(job.id);
  std::vector<int> candidates; // The setup runs on every host, the command on those the config selects.
  const auto config = core::recorded_config(job);
  if (options.setup || config.command.workers.all) {
    for (int w = 0; w < job.hosts; ++w) {
      candidates.push_back(w);
    }
  } else {
    candidates = config.command.workers.indices;
    std::sort(candidates.begin(), candidates.end());
  }
  if (candidates.empty()) {
    throw Error("job " + name + " has no workers");
  }
  if (options.worker == "all") {
    return candidates;
  }
  if (options.worker.empty()) {
    return {candidates.front()};
  }
  const auto worker = util::parse_int(options.worker);
  if (!worker || *worker < 0 || *worker >= job.hosts) {
    throw UsageError("--worker " + options.worker + ": job " + name +
                     (job.hosts == 1 ? " has only worker 0" : " has workers 0 to " + std::to_string(job.hosts - 1)) +
                     " (or give 'all')");
  }
  if (std::find(candidates.begin(), candidates.end(), *worker) == candidates.end()) {
    std::vector<std::string> listed;
    listed.reserve(candidates.size());
    for (const int w : candidates) {
      listed.push_back(std::to_string(w));
    }
    throw UsageError("--worker " + options.worker + ": worker " + options.worker + " of job " + name +
                     " does not run the command (command.workers: " + util::join(listed, ", ") +
                     "); --setup shows its setup log");
  }
  return {static_cast<int>(*worker)};
}

// The pid of this home's running supervisor, as its daemon.lock holds it ("" without one).
std::string local_daemon_pid() {
  std::ifstream in(core::daemon_lock_path());
  std::string pid;
  in >> pid;
  return pid;
}

// Where the logs of `attempt` are when this machine has none: a job's output streams to the machine whose supervisor
// drives the attempt, which on a lab's shared store may be another one. The supervisor that last took the job up
// says so in an event ("driven by supervisor HOST:PID:START"); nullopt when no event names one, or when it names
// this home's own supervisor (whose logs of the attempt are yet to come).
std::optional<std::string> logs_elsewhere(const store::JobStore& store, std::int64_t id, int attempt) {
  if (!store.on_postgres() || std::filesystem::exists(core::attempt_directory(id, attempt))) {
    return std::nullopt;
  }
  constexpr std::string_view kDriven = "driven by supervisor ";
  std::optional<std::string> owner;
  for (const auto& e : store.events().of(id)) {
    if (e.kind == "action" && e.message.starts_with(kDriven)) {
      owner = e.message.substr(kDriven.size());
    }
  }
  const auto fields = owner ? util::split(*owner, ':') : std::vector<std::string>{};
  if (fields.size() < 2 || (fields[0] == util::hostname() && fields[1] == local_daemon_pid())) {
    return std::nullopt;
  }
  const auto& host = fields[0];
  const std::string job = domain::format_job_id(id);
  return "job " + job + "'s attempt " + std::to_string(attempt) + " has no logs on this machine: they stream to " +
         "the machine of the supervisor that drives it (" + *owner + "), into its JOBMAN_HOME's " +
         core::jobs_root(core::store_location()).lexically_relative(config::jobman_home()).string() + "/" + job +
         "; run `jobman logs " + job + "` on " + host;
}

// Whether any worker of the selected attempt has a log of the selected kind on this machine: once the command (or the
// setup) has begun, every worker has one, perhaps still empty.
bool attempt_has_logs(const core::LogSelection& selection, int hosts) {
  const auto dir = core::attempt_directory(selection.job_id, selection.attempt);
  std::error_code error;
  for (int w = 0; w < std::max(hosts, 1); ++w) {
    if (std::filesystem::exists(core::log_path(dir, selection.kind, w), error)) {
      return true;
    }
  }
  return false;
}

// Where a job that has not begun its command (or setup) is, in words: why it has no logs yet.
std::string_view why_no_logs_yet(domain::Phase phase, core::LogKind kind) {
  using domain::Phase;
  switch (phase) {
  case Phase::pending: return "it has not asked for a slice yet";
  case Phase::queued: return "its slice is queued, waiting for capacity";
  case Phase::provisioning: return "its slice is being provisioned";
  case Phase::setup:
    return kind == core::LogKind::setup ? "its setup is about to begin" : "its workers are being set up";
  case Phase::running: return "its command is being launched";
  case Phase::recovering: return "it is getting a new slice after losing the last one";
  default: return "it has ended";
  }
}

// The error for a job whose selected attempt left no logs on this machine, naming its phase and why.
Error no_logs_error(const domain::JobRecord& job, const core::LogSelection& selection) {
  // "job 000042", or "worker 000003" for `jobman worker logs`.
  const std::string record = std::string(domain::to_string(job.kind)) + " " + domain::format_job_id(job.id);
  const std::string phase(domain::to_string(job.phase));
  const bool setup = selection.kind == core::LogKind::setup;
  const std::string what = setup ? "setup logs" : "logs";
  const std::string why = "(`jobman show " + domain::format_job_id(job.id) + " --events` says why)";
  if (selection.attempt < job.attempt) {
    return Error(record + "'s attempt " + std::to_string(selection.attempt) + " has no " + what +
                 ": it ended before its " + (setup ? "setup" : "command") + " began " + why);
  }
  if (domain::is_terminal(job.phase)) {
    return Error(record + " has no " + what + ": it ended " + phase + " before its " + (setup ? "setup" : "command") +
                 " began " + why);
  }
  return Error(record + " has no " + what + " yet: it is " + phase + ", " +
               std::string(why_no_logs_yet(job.phase, selection.kind)) + "; `jobman logs " +
               domain::format_job_id(job.id) + " -f` waits for them");
}

} // namespace

// `logs --stacks`: the stacks kept when an attempt stalled (recovery.stall_timeout), of the attempt asked for or the
// newest that has them, worker by worker.
int print_stacks(Context& ctx, const LogsOptions& options, const domain::JobRecord& job) {
  const std::string name = domain::format_job_id(job.id);
  if (options.follow || options.setup) {
    throw UsageError(std::string("--stacks cannot be given with ") + (options.follow ? "--follow" : "--setup"));
  }
  LogsOptions every = options;
  if (every.worker.empty()) {
    every.worker = "all";
  }
  const auto workers = chosen_workers(every, job);
  const auto has_stacks = [&](int attempt) {
    return std::any_of(workers.begin(), workers.end(), [&](int w) {
      return std::filesystem::exists(core::stacks_path(core::attempt_directory(job.id, attempt), w));
    });
  };
  std::optional<int> attempt = options.attempt;
  if (!attempt) {
    for (int a = job.attempt; a >= 1 && !attempt; --a) {
      if (has_stacks(a)) {
        attempt = a;
      }
    }
  }
  if (!attempt || !has_stacks(*attempt)) {
    throw Error("job " + name + (attempt ? "'s attempt " + std::to_string(*attempt) : std::string()) +
                " has no stacks on this machine: they are kept when an attempt stalls (recovery.stall_timeout)");
  }
  const auto dir = core::attempt_directory(job.id, *attempt);
  bool first = true;
  for (const int w : workers) {
    const auto path = core::stacks_path(dir, w);
    if (!std::filesystem::exists(path)) {
      continue;
    }
    const auto text = util::read_file(path);
    *ctx.out << (first ? "" : "\n") << "== worker " << w << ", attempt " << *attempt << " ==\n" << text;
    if (!text.empty() && text.back() != '\n') {
      *ctx.out << '\n';
    }
    first = false;
  }
  return 0;
}

int run_logs(Context& ctx, const LogsOptions& options) {
  const std::int64_t id = parse_job_id_argument(options.id);
  auto& store = ctx.store();
  keep_jobs_driven(ctx);
  const auto job = store.jobs().get(id, true);
  if (options.stacks) {
    if (options.attempt && (*options.attempt < 1 || *options.attempt > job.attempt)) {
      throw UsageError("--attempt " + std::to_string(*options.attempt) + ": job " + domain::format_job_id(id) +
                       " has attempts 1 to " + std::to_string(std::max(1, job.attempt)));
    }
    return print_stacks(ctx, options, job);
  }
  const std::string name = domain::format_job_id(id);
  const std::string phase(domain::to_string(job.phase));
  // Following a job that has not started waits for its first attempt.
  const bool wait_for_start = options.follow && !domain::is_terminal(job.phase);
  if (job.attempt < 1 && (!wait_for_start || options.attempt)) {
    throw Error("job " + name + " has not started (" + phase + "), so it has no logs yet");
  }
  if (options.attempt && (*options.attempt < 1 || *options.attempt > job.attempt)) {
    throw UsageError("--attempt " + std::to_string(*options.attempt) + ": job " + name +
                     (job.attempt == 1 ? " has only attempt 1" : " has attempts 1 to " + std::to_string(job.attempt)));
  }
  core::LogSelection selection;
  selection.job_id = id;
  selection.attempt = options.attempt.value_or(job.attempt);
  selection.kind = options.setup ? core::LogKind::setup : core::LogKind::worker;
  selection.workers = chosen_workers(options, job);
  // `--worker all` promises every line its worker, however many workers there are.
  selection.prefix = options.worker == "all" ? core::WorkerPrefix::always : core::WorkerPrefix::when_several;
  // Worker output is the workload's to choose: on a terminal its escape sequences could retitle the window, clear the
  // screen or overwrite lines, so they are shown, not obeyed. A file or a pipe gets the bytes as written.
  const bool terminal = ctx.out == &std::cout && util::is_terminal(1);
  selection.controls = terminal && !options.raw ? core::LogControls::escape : core::LogControls::pass;
  const auto elsewhere = job.attempt >= 1 ? logs_elsewhere(store, id, selection.attempt) : std::nullopt;
  if (!options.follow) {
    if (elsewhere) {
      throw Error(*elsewhere);
    }
    if (!attempt_has_logs(selection, job.hosts)) {
      throw no_logs_error(job, selection);
    }
    const bool over = selection.attempt < job.attempt || domain::is_terminal(job.phase);
    core::print_logs(selection, over ? core::LogState::final : core::LogState::growing, *ctx.out);
    return 0;
  }
  const InterruptSignal interrupt;
  if (elsewhere) {
    *ctx.err << "jobman: " << *elsewhere << "; following here in case this machine's supervisor takes it over"
             << std::endl;
  }
  if (job.attempt < 1) {
    *ctx.err << "jobman: job " << name << " has not started yet (" << phase << "); waiting for its first attempt"
             << std::endl;
  } else if (!elsewhere && !attempt_has_logs(selection, job.hosts)) {
    if (domain::is_terminal(job.phase) && selection.attempt == job.attempt) {
      throw no_logs_error(job, selection); // Nothing will come.
    }
    if (!domain::is_terminal(job.phase)) {
      *ctx.err << "jobman: job " << name << " has no " << (options.setup ? "setup logs" : "logs") << " yet (" << phase
               << "); waiting for them" << std::endl;
    }
  }
  const auto end = core::follow_logs(store, selection, *ctx.out, *ctx.err, interrupt.fd());
  return static_cast<int>(end == core::FollowEnd::interrupted ? ExitCode::interrupted : ExitCode::ok);
}

void add_logs_command(CLI::App& app, Context& ctx) {
  auto options = std::make_shared<LogsOptions>();
  auto* cmd = app.add_subcommand("logs", "Print a job's output as its workers wrote it; -f follows it");
  cmd->add_option("ID", options->id, "Job id (000042 or 42)")->required();
  cmd->add_flag("-f,--follow", options->follow,
                "Keep printing lines as they arrive, on into later attempts, until the job has finished");
  cmd->add_option("--worker", options->worker,
                  "Which worker: an index, or 'all' (each line then starts with [w<N>]). Default 0, the worker whose "
                  "exit code decides the job's outcome")
      ->type_name("N|all");
  cmd->add_option("--attempt", options->attempt, "Which attempt (1, 2, ...); default the current one")->type_name("K");
  cmd->add_flag("--setup", options->setup, "Print the setup logs (ssh, gcsfuse, environment) instead of the output");
  cmd->add_flag("--stacks", options->stacks,
                "Print what each worker's processes were doing when the attempt stalled (recovery.stall_timeout): "
                "state, wait channel, command line, Python stacks where py-spy is installed; default the newest "
                "attempt that has them, every worker");
  cmd->add_flag("--raw", options->raw,
                "On a terminal too, write control characters as they are instead of escaping them (\\x1b)");
  cmd->footer("Examples:\n"
              "  jobman logs 42\n"
              "  jobman logs 42 -f\n"
              "  jobman logs 42 --worker all --attempt 1\n"
              "  jobman logs 42 --setup --worker 3\n"
              "  jobman logs 42 --stacks\n"
              "Reads $JOBMAN_HOME/jobs/<id>/attempt-<n>/: whole lines only, bytes as the workers wrote them; on a\n"
              "terminal, control characters (escape sequences, carriage returns) are shown as \\xNN unless --raw.\n"
              "Exit code 1 when the job has no logs yet, its command not begun (-f waits for them), 3 when\n"
              "there is no such job, 130 when interrupted.");
  cmd->callback([&ctx, options] { ctx.action = [&ctx, options] { return run_logs(ctx, *options); }; });
}

} // namespace jobman::cli
