#include "jobman/remote/workload.hpp"

#include "child.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sstream>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace jobman::remote {

namespace {

// The workload's directory as shell text that expands to an absolute path on the worker.
std::string remote_dir_expr(const WorkloadId& id) {
  return "\"$HOME\"/" + shell_quote(remote_workload_dir(id));
}

// Shell function printing "jobman-state STATE [VALUE]" for the workload in $d. A pid counts as alive only when its
// start time is the recorded one (so a reused pid is not mistaken for the workload) and it is not a zombie.
constexpr const char* kStateFunctions = R"sh(
jobman_alive() {
  [ -n "${pid:-}" ] || return 1
  s=
  read -r s 2> /dev/null < "/proc/$pid/stat" || return 1
  set -- ${s##*) }
  [ "${20:-}" = "$start" ] && [ "$1" != Z ]
}
jobman_exited() {
  rc=
  read -r rc < "$d/exit_code"
  echo "jobman-state exited $rc"
}
jobman_state() {
  if [ ! -d "$d" ]; then echo "jobman-state absent"; return; fi
  if [ -f "$d/exit_code" ]; then jobman_exited; return; fi
  if [ ! -f "$d/pid" ]; then echo "jobman-state starting"; return; fi
  read -r pid start < "$d/pid"
  if jobman_alive; then echo "jobman-state running $pid"; return; fi
  if [ -f "$d/exit_code" ]; then jobman_exited; return; fi
  echo "jobman-state vanished $pid"
}
)sh";

// The workload's wrapper, in a session of its own: records its pid and start time (the fields after the command's
// name in /proc/PID/stat, which may itself hold spaces and parentheses, are read without starting a program), then
// closes its stdout, which tells the launch it may report the workload running; then runs run.sh with output appended
// to output.log and records its exit status atomically. It leads its session, so its pid is also the process group's,
// and it outlives a SIGTERM to the group so that the status is always written.
constexpr const char* kWrapper = R"sh(trap : TERM INT HUP
d=$1
read -r s < /proc/$$/stat
set -- ${s##*) }
echo "$$ ${20}" > "$d/pid.tmp" && mv "$d/pid.tmp" "$d/pid"
exec > /dev/null
bash "$d/run.sh" >> "$d/output.log" 2>&1 < /dev/null
rc=$?
echo "$rc" > "$d/exit_code.tmp" && mv "$d/exit_code.tmp" "$d/exit_code")sh";

// The lines around run.sh's exports: a shell opened on the worker later (jobman ssh) reads its variables between them.
constexpr const char* kVariablesBegin = "# jobman: variables";
constexpr const char* kVariablesEnd = "# jobman: end of variables";

// The last line of every run.sh: a launch that did not read it got a cut-off script and starts nothing.
constexpr const char* kEndOfScript = "# jobman: end of run.sh";

// run.sh: the contract's variables, the home directory, then the command. A signal to the group ends the script
// once its current command has ended (a training program gets to save its checkpoint first).
std::string run_script(const LaunchSpec& spec, int worker) {
  std::string script = "#!/bin/bash\ntrap 'exit 143' TERM\ntrap 'exit 129' HUP\ntrap 'exit 130' INT\n";
  script += kVariablesBegin;
  script += '\n';
  for (const auto& [name, value] : workload_environment(spec, worker)) {
    script += "export " + name + "=" + shell_quote(value) + "\n";
  }
  script += kVariablesEnd;
  script += '\n';
  script += "cd \"$HOME\" || exit 1\n";
  script += spec.command;
  if (!spec.command.ends_with('\n')) {
    script += '\n';
  }
  // The launch starts the workload only once this line arrived: a launcher cut off while sending the script (its
  // supervisor killed) leaves no workload behind, rather than a truncated one that ends at once with status 0.
  script += kEndOfScript;
  script += '\n';
  return script;
}

std::string launch_script(const LaunchSpec& spec, int worker) {
  std::string s = "d=" + remote_dir_expr(spec.id) + "\n";
  s += kStateFunctions;
  // run.sh arrives on stdin, so that the command and its variables appear in no process's arguments. It is read
  // whole into a directory of its own, and that directory becomes the workload's in one rename only if the script
  // arrived to its last line: of two launches, or a launch whose sender died, at most one workload starts, and
  // never one from part of a script. The directory is named by this shell's pid, which no other launch running on
  // the worker has. Each program started costs a worker tens of milliseconds of CPU on a small VM: what the shell
  // can do itself (the parent directory's name, the script's last line) it does.
  s += "t=\"$d.launch.$$\"\n";
  s += "mkdir -p -m 700 \"$t\" || exit 1\n";
  s += "(umask 077 && cat > \"$t/run.sh\") || { rm -rf \"$t\"; exit 1; }\n";
  s += "last=; while IFS= read -r line; do last=$line; done < \"$t/run.sh\"\n";
  s += "if [ \"$last\" != " + shell_quote(kEndOfScript) +
       " ]; then rm -rf \"$t\"; echo \"jobman: the script did not arrive whole\" >&2; exit 1; fi\n";
  if (spec.docker) {
    s += "printf '%s\\n' " + shell_quote(container_name(spec.id, worker)) + " > \"$t/container\"\n";
  }
  s += ": > \"$t/output.log\"\n";
  s += "if [ ! -e \"$d\" ] && mv -T \"$t\" \"$d\" 2>/dev/null; then\n";
  s += "  cd \"$HOME\" || exit 1\n";
  // setsid forks (-f) and returns at once; reading the wrapper's stdout to its end waits until the wrapper has
  // recorded its pid, so that the state reported is "running", without polling for the file. Nothing of the
  // workload holds this session's output open. A setsid without -f (an old util-linux) fails at once: the launch says
  // so rather than leave a workload that never starts.
  s += "  if ! started=$(setsid -f bash -c " + shell_quote(kWrapper) +
       " jobman-workload \"$d\" < /dev/null 2> /dev/null); then\n";
  s += "    rm -rf \"$d\"; echo \"jobman: setsid -f could not start the workload\" >&2; exit 1\n  fi\n";
  s += "  echo jobman-launched\n";
  s += "else\n  rm -rf \"$t\"\nfi\n";
  s += "jobman_state\n";
  return s;
}

std::string query_script(const WorkloadId& id) {
  return "d=" + remote_dir_expr(id) + "\n" + kStateFunctions + "jobman_state\n";
}

std::string stop_script(const WorkloadId& id, std::chrono::milliseconds grace) {
  const auto grace_ms = std::max<long long>(0, grace.count());
  std::string s = "d=" + remote_dir_expr(id) + "\n";
  s += kStateFunctions;
  s += R"sh(if [ -f "$d/pid" ] && [ ! -f "$d/exit_code" ]; then
  read -r pid start < "$d/pid"
  if jobman_alive; then
    c=
    if [ -f "$d/container" ]; then
      c=$(cat "$d/container"); D=docker; docker info > /dev/null 2>&1 || D="sudo -n docker"
)sh";
  s += "      $D stop -t " + std::to_string((grace_ms + 999) / 1000) + " \"$c\" > /dev/null 2>&1 &\n";
  s += "    fi\n";
  s += "    kill -TERM -- \"-$pid\" 2>/dev/null && echo jobman-signalled\n";
  s += "    end=$(( $(date +%s%3N) + " + std::to_string(grace_ms) + " ))\n";
  s += R"sh(    while jobman_alive && [ "$(date +%s%3N)" -lt "$end" ]; do sleep 0.05; done
    if jobman_alive; then
      kill -KILL -- "-$pid" 2>/dev/null
      if [ -n "$c" ]; then $D rm -f "$c" > /dev/null 2>&1; fi
      if [ ! -f "$d/exit_code" ]; then echo 137 > "$d/exit_code.tmp" && mv "$d/exit_code.tmp" "$d/exit_code"; fi
      echo jobman-killed
    fi
    wait
  fi
fi
jobman_state
)sh";
  return s;
}

// Streams output.log from byte `offset` (0-based): following it while the workload runs, to its end otherwise.
// Exit 3 when there is no workload.
std::string attach_script(const WorkloadId& id, std::uint64_t offset) {
  const std::string from = "+" + std::to_string(offset + 1);
  std::string s = "d=" + remote_dir_expr(id) + "\n";
  s += kStateFunctions;
  s += "[ -f \"$d/output.log\" ] || { echo \"jobman: no workload in $d\" >&2; exit 3; }\n";
  s += "i=0; while [ ! -f \"$d/pid\" ] && [ ! -f \"$d/exit_code\" ] && [ $i -lt 200 ]; do sleep 0.05; "
       "i=$((i+1)); done\n";
  s += "pid=; start=; [ -f \"$d/pid\" ] && read -r pid start < \"$d/pid\"\n";
  s += "if [ ! -f \"$d/exit_code\" ] && jobman_alive; then exec tail -c " + from +
       " --pid=\"$pid\" -s 0.2 -f \"$d/output.log\"; fi\n";
  s += "exec tail -c " + from + " \"$d/output.log\"\n";
  return s;
}

// Reads the last "jobman-state" line of a worker's run into a status.
WorkerStatus parse_status(const WorkerRun& run) {
  WorkerStatus status;
  status.worker = run.worker;
  status.launched = run.output.find("jobman-launched\n") != std::string::npos;
  status.signalled = run.output.find("jobman-signalled\n") != std::string::npos;
  const auto at = run.output.rfind("jobman-state ");
  if (run.exit_code != 0 || at == std::string::npos) {
    status.state = WorkloadState::unreachable;
    status.exit_code = run.exit_code;
    status.diagnostic = util::trim(run.output);
    if (run.timed_out) {
      status.diagnostic = "timed out" + (status.diagnostic.empty() ? "" : ": " + status.diagnostic);
    }
    return status;
  }
  std::istringstream line(run.output.substr(at + 13, run.output.find('\n', at) - at - 13));
  std::string state;
  long long value = 0;
  line >> state >> value;
  if (state == "absent") {
    status.state = WorkloadState::absent;
  } else if (state == "starting") {
    status.state = WorkloadState::starting;
  } else if (state == "running") {
    status.state = WorkloadState::running;
    status.pid = value;
  } else if (state == "exited") {
    status.state = WorkloadState::exited;
    status.exit_code = static_cast<int>(value);
  } else {
    status.state = WorkloadState::vanished;
    status.pid = value;
  }
  return status;
}

std::vector<WorkerStatus> parse_all(const std::vector<WorkerRun>& runs) {
  std::vector<WorkerStatus> out;
  out.reserve(runs.size());
  for (const auto& run : runs) {
    out.push_back(parse_status(run));
  }
  return out;
}

void check_id(const WorkloadId& id) {
  const bool safe = !id.job_id.empty() && std::all_of(id.job_id.begin(), id.job_id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
  if (!safe || id.job_id.find("..") != std::string::npos || id.attempt < 1) {
    throw Error("invalid workload id '" + id.job_id + "' attempt " + std::to_string(id.attempt));
  }
}

} // namespace

std::string remote_workload_dir(const WorkloadId& id) {
  return ".jobman/jobs/" + id.job_id + "/attempt-" + std::to_string(id.attempt);
}

std::string container_name(const WorkloadId& id, int worker) {
  return "jobman-" + id.job_id + "-" + std::to_string(id.attempt) + "-w" + std::to_string(worker);
}

std::map<std::string, std::string> workload_environment(const LaunchSpec& spec, int worker) {
  std::map<std::string, std::string> env = spec.extra_env;
  env["JOBMAN_JOB_ID"] = spec.id.job_id;
  env["JOBMAN_ATTEMPT"] = std::to_string(spec.id.attempt);
  env["JOBMAN_RESUME"] = spec.id.attempt > 1 ? "1" : "0";
  env["JOBMAN_WORKER_ID"] = std::to_string(worker);
  env["JOBMAN_NUM_WORKERS"] = std::to_string(spec.num_workers);
  env["JOBMAN_TPU_NAME"] = spec.tpu_name;
  env["JOBMAN_ZONE"] = spec.zone;
  env["JOBMAN_ACCELERATOR"] = spec.accelerator;
  const int slices = std::max(1, spec.num_slices);
  const int per_slice = std::max(1, spec.num_workers / slices);
  env["JOBMAN_SLICE_ID"] = std::to_string(worker / per_slice);
  env["JOBMAN_NUM_SLICES"] = std::to_string(slices);
  if (slices > 1) {
    env["MEGASCALE_NUM_SLICES"] = std::to_string(slices);
    env["MEGASCALE_SLICE_ID"] = std::to_string(worker / per_slice);
    env["MEGASCALE_COORDINATOR_ADDRESS"] = spec.coordinator;
    env["MEGASCALE_PORT"] = std::to_string(kMegascalePort);
  }
  if (spec.docker) {
    env["JOBMAN_CONTAINER"] = container_name(spec.id, worker);
  }
  return env;
}

std::string workload_variables_script(const WorkloadId& id) {
  check_id(id);
  return "f=" + remote_dir_expr(id) + "/run.sh; if [ -r \"$f\" ]; then eval \"$(sed -n '/^" +
         std::string(kVariablesBegin) + "$/,/^" + kVariablesEnd + "$/p' \"$f\")\"; fi; unset f; ";
}

std::string to_string(WorkloadState state) {
  switch (state) {
  case WorkloadState::absent: return "absent";
  case WorkloadState::starting: return "starting";
  case WorkloadState::running: return "running";
  case WorkloadState::exited: return "exited";
  case WorkloadState::vanished: return "vanished";
  case WorkloadState::unreachable: return "unreachable";
  }
  return "unknown";
}

std::vector<WorkerStatus> launch(const SliceTarget& target, const std::vector<int>& workers, const LaunchSpec& spec,
                                 std::chrono::milliseconds timeout) {
  check_id(spec.id);
  for (const auto& [name, value] : spec.extra_env) {
    const bool shell_name = !name.empty() && std::isdigit(static_cast<unsigned char>(name[0])) == 0 &&
                            std::all_of(name.begin(), name.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
                            });
    if (!shell_name) {
      throw Error("invalid environment variable name '" + name + "'");
    }
  }
  return parse_all(run_on_workers(
      target, workers, [&](int worker) { return launch_script(spec, worker); }, timeout,
      [&](int worker) { return run_script(spec, worker); }));
}

std::vector<WorkerStatus> query(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                                std::chrono::milliseconds timeout) {
  check_id(id);
  return parse_all(run_on_workers(target, workers, query_script(id), timeout));
}

std::vector<WorkerStatus> stop(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                               std::chrono::milliseconds grace, std::chrono::milliseconds timeout) {
  check_id(id);
  return parse_all(run_on_workers(target, workers, stop_script(id, grace), timeout + grace));
}

namespace {

// The workload's session is its process tree: setsid made the launched process its leader, so every process it
// started (and did not move to a session of its own) has the leader's pid as its session id (field 6 of
// /proc/PID/stat, the 4th after the command's closing parenthesis).
std::string stacks_script(const WorkloadId& id) {
  std::string s = "d=" + remote_dir_expr(id) + "\n";
  s += R"sh([ -f "$d/pid" ] || { echo "jobman: no workload in $d"; exit 3; }
read -r pid start < "$d/pid"
echo "# the workload's processes (session $pid) on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# PID PPID STATE WCHAN COMMAND"
found=
for f in /proc/[0-9]*/stat; do
  s=$(cat "$f" 2>/dev/null) || continue
  p=${s%% *}
  rest=${s##*) }
  set -- $rest
  [ "$4" = "$pid" ] || continue
  w=$(cat "/proc/$p/wchan" 2>/dev/null)
  c=$(tr '\0\n' '  ' < "/proc/$p/cmdline" 2>/dev/null)
  echo "$p $2 $1 ${w:-0} $c"
  found="$found $p"
done
[ -n "$found" ] || echo "(no process left in the session)"
for p in $found; do
  k=$(cat "/proc/$p/stack" 2>/dev/null) && [ -n "$k" ] && printf '\n# kernel stack of %s\n%s\n' "$p" "$k"
done
if command -v py-spy > /dev/null 2>&1; then
  for p in $found; do
    case "$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)" in
    *python*)
      printf '\n# py-spy dump --pid %s\n' "$p"
      py-spy dump --pid "$p" 2>&1 || sudo -n py-spy dump --pid "$p" 2>&1
      ;;
    esac
  done
else
  printf '\n# py-spy is not installed on this worker: no Python stacks\n'
fi
exit 0
)sh";
  return s;
}

} // namespace

std::vector<WorkerRun> stacks(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                              std::chrono::milliseconds timeout) {
  check_id(id);
  return run_on_workers(target, workers, stacks_script(id), timeout);
}

std::filesystem::path worker_log_path(const std::filesystem::path& attempt_dir, int worker) {
  return attempt_dir / ("worker-" + std::to_string(worker) + ".log");
}

namespace {

// One worker's stream: the ssh child, the local log it appends to, and the bytes not yet written (a line without
// its newline).
struct Stream {
  StreamEnd end;
  int log_fd = -1;
  util::Child child;
  std::string pending;
};

// Writes all of `data` to `fd`; throws naming `path` on failure.
void write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      throw Error("cannot write " + path.string() + ": " + std::strerror(errno));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// An eventfd closed when it goes out of scope.
struct EventFd {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  EventFd() = default;
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;
  ~EventFd() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

} // namespace

std::vector<StreamEnd> attach(const SliceTarget& target, const std::vector<int>& workers, const WorkloadId& id,
                              const std::filesystem::path& attempt_dir, const std::stop_token& stop,
                              const LineSink& on_lines) {
  check_id(id);
  std::vector<Stream> streams(workers.size());
  auto release = [&] {
    for (auto& stream : streams) {
      if (stream.child.pid > 0) {
        ::kill(-stream.child.pid, SIGTERM);
        util::close_fd(stream.child.out_fd);
        util::close_fd(stream.child.err_fd);
        util::wait_exit(stream.child.pid);
        stream.child.pid = -1;
      }
      util::close_fd(stream.log_fd);
    }
  };
  try {
    for (std::size_t i = 0; i < workers.size(); ++i) {
      auto& stream = streams[i];
      stream.end.worker = workers[i];
      const auto path = worker_log_path(attempt_dir, workers[i]);
      stream.log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (stream.log_fd < 0) {
        throw Error("cannot open " + path.string() + ": " + std::strerror(errno));
      }
      if (::flock(stream.log_fd, LOCK_EX | LOCK_NB) != 0) {
        throw Error(path.string() + " is already being streamed by another process");
      }
      struct stat info {};
      ::fstat(stream.log_fd, &info);
      const auto offset = static_cast<std::uint64_t>(info.st_size);
      stream.child = detail::spawn(ssh_argv(target, workers[i], attach_script(id, offset)), target.environment, false);
    }
  } catch (...) {
    release();
    throw;
  }

  // Declared before the callback, so that the callback is gone before the descriptor is closed.
  const EventFd wake;
  std::stop_callback on_stop(stop, [&wake] {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto ignored = ::write(wake.fd, &one, sizeof one);
  });
  bool cancelled = stop.stop_requested();
  try {
    while (!cancelled) {
      std::vector<pollfd> fds = {{wake.fd, POLLIN, 0}};
      std::vector<std::pair<std::size_t, bool>> owner = {{0, false}};
      for (std::size_t i = 0; i < streams.size(); ++i) {
        if (streams[i].child.out_fd >= 0) {
          fds.push_back({streams[i].child.out_fd, POLLIN, 0});
          owner.emplace_back(i, true);
        }
        if (streams[i].child.err_fd >= 0) {
          fds.push_back({streams[i].child.err_fd, POLLIN, 0});
          owner.emplace_back(i, false);
        }
      }
      if (fds.size() == 1) {
        break;
      }
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
        throw Error(std::string("poll: ") + std::strerror(errno));
      }
      if (fds[0].revents != 0) {
        cancelled = true;
        break;
      }
      for (std::size_t k = 1; k < fds.size(); ++k) {
        if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
          continue;
        }
        auto& stream = streams[owner[k].first];
        int& fd = owner[k].second ? stream.child.out_fd : stream.child.err_fd;
        char chunk[16384];
        const ssize_t got = ::read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) {
          continue;
        }
        if (got <= 0) {
          util::close_fd(fd);
          continue;
        }
        if (!owner[k].second) {
          stream.end.diagnostic.append(chunk, static_cast<std::size_t>(got));
          continue;
        }
        stream.pending.append(chunk, static_cast<std::size_t>(got));
        const auto last = stream.pending.rfind('\n');
        if (last != std::string::npos) {
          const auto lines = std::string_view(stream.pending).substr(0, last + 1);
          write_all(stream.log_fd, lines, worker_log_path(attempt_dir, stream.end.worker));
          if (on_lines) {
            on_lines(stream.end.worker, lines);
          }
          stream.end.bytes += last + 1;
          stream.pending.erase(0, last + 1);
        }
      }
    }
    for (auto& stream : streams) {
      if (cancelled) {
        ::kill(-stream.child.pid, SIGTERM);
        util::close_fd(stream.child.out_fd);
        util::close_fd(stream.child.err_fd);
        stream.end.cancelled = true;
      }
      stream.end.exit_code = util::wait_exit(stream.child.pid);
      stream.child.pid = -1;
      // A last line without its newline is kept only when the workload has ended and everything arrived; otherwise
      // the next attach fetches it whole.
      if (!cancelled && stream.end.exit_code == 0 && !stream.pending.empty()) {
        write_all(stream.log_fd, stream.pending, worker_log_path(attempt_dir, stream.end.worker));
        if (on_lines) {
          on_lines(stream.end.worker, stream.pending);
        }
        stream.end.bytes += stream.pending.size();
      }
      stream.end.diagnostic = std::string(util::trim(stream.end.diagnostic));
    }
  } catch (...) {
    release();
    throw;
  }
  std::vector<StreamEnd> ends;
  ends.reserve(streams.size());
  for (auto& stream : streams) {
    util::close_fd(stream.log_fd);
    ends.push_back(std::move(stream.end));
  }
  return ends;
}

} // namespace jobman::remote
