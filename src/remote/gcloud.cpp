#include "jobman/remote/gcloud.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace jobman::remote {

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::vector<std::string> ssh_argv(const SliceTarget& target, int worker, const std::string& command) {
  std::vector<std::string> argv = {target.gcloud, "compute",
                                   "tpus",        "tpu-vm",
                                   "ssh",         target.user.empty() ? target.node : target.user + "@" + target.node};
  argv.push_back("--zone=" + target.zone);
  if (!target.project.empty()) {
    argv.push_back("--project=" + target.project);
  }
  argv.push_back("--worker=" + std::to_string(worker));
  argv.emplace_back("--quiet");
  argv.push_back("--command=" + command);
  return argv;
}

namespace {

// One gcloud child: its pid (also its process group) and the read end of its output pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  WorkerRun run;
};

// Starts `argv` in its own process group with stdout and stderr on one pipe and stdin from /dev/null.
Child spawn(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  Child child;
  child.pid = ::fork();
  if (child.pid < 0) {
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (child.pid == 0) {
    ::setpgid(0, 0);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::dup2(null, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(child.pid, child.pid);
  ::close(fds[1]);
  child.fd = fds[0];
  return child;
}

} // namespace

std::vector<WorkerRun> run_on_workers(const SliceTarget& target, const std::vector<int>& workers,
                                      const std::string& command, std::chrono::milliseconds timeout) {
  std::vector<Child> children;
  children.reserve(workers.size());
  for (int worker : workers) {
    auto child = spawn(ssh_argv(target, worker, command));
    child.run.worker = worker;
    children.push_back(std::move(child));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool terminated = false;
  for (;;) {
    std::vector<pollfd> open;
    for (const auto& child : children) {
      if (child.fd >= 0) {
        open.push_back({child.fd, POLLIN, 0});
      }
    }
    if (open.empty()) {
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline + (terminated ? std::chrono::seconds(5) : std::chrono::seconds(0))) {
      // Time is up: SIGTERM to every run still writing, and after a grace period SIGKILL.
      for (auto& child : children) {
        if (child.fd >= 0) {
          ::kill(-child.pid, terminated ? SIGKILL : SIGTERM);
          child.run.timed_out = true;
        }
      }
      if (terminated) {
        for (auto& child : children) {
          if (child.fd >= 0) {
            ::close(child.fd);
            child.fd = -1;
          }
        }
        break;
      }
      terminated = true;
      continue;
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        (terminated ? deadline + std::chrono::seconds(5) : deadline) - now);
    if (::poll(open.data(), open.size(), static_cast<int>(std::max<long long>(1, wait_ms.count()))) < 0 &&
        errno != EINTR) {
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (auto& child : children) {
      if (child.fd < 0) {
        continue;
      }
      pollfd probe{child.fd, POLLIN, 0};
      if (::poll(&probe, 1, 0) <= 0) {
        continue;
      }
      char chunk[4096];
      const ssize_t got = ::read(child.fd, chunk, sizeof chunk);
      if (got > 0) {
        child.run.output.append(chunk, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(child.fd);
        child.fd = -1;
      }
    }
  }
  std::vector<WorkerRun> runs;
  runs.reserve(children.size());
  for (auto& child : children) {
    int status = 0;
    while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
    child.run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    runs.push_back(std::move(child.run));
  }
  return runs;
}

} // namespace jobman::remote
