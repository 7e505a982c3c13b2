#include "child.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdexcept>
#include <unistd.h>

namespace jobman::remote::detail {

namespace {

[[noreturn]] void fail(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// The grace between SIGTERM and SIGKILL for a child whose time ran out.
constexpr auto kKillGrace = std::chrono::seconds(5);

} // namespace

util::Child spawn(const std::vector<std::string>& argv, const Environment& environment, bool merge_stderr,
                  bool stdin_pipe) {
  auto child = util::ProcessBuilder(argv)
                   .env(environment)
                   .group(util::ProcessGroup::own)
                   .input(stdin_pipe ? util::Stream::pipe() : util::Stream::null())
                   .output(util::Stream::pipe())
                   .error(merge_stderr ? util::Stream::output() : util::Stream::pipe())
                   .spawn();
  // A program that cannot be run has exited with 127 (exec_error says why): its run reports that status.
  if (child.in_fd >= 0) {
    ::fcntl(child.in_fd, F_SETFL, ::fcntl(child.in_fd, F_GETFL) | O_NONBLOCK);
  }
  return child;
}

std::size_t write_some(int fd, std::string_view data) {
  // SIGPIPE is blocked in this thread around the write; one raised by it is taken back before unblocking.
  sigset_t pipe_only;
  sigset_t old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ssize_t n = 0;
  do {
    n = ::write(fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  const int saved = errno;
  if (n < 0 && saved == EPIPE) {
    const timespec now{0, 0};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (n >= 0) {
    return static_cast<std::size_t>(n);
  }
  if (saved == EAGAIN) {
    return 0;
  }
  return data.size();
}

std::vector<ChildRun> run_all(const std::vector<std::vector<std::string>>& argvs, const Environment& environment,
                              std::chrono::milliseconds timeout, const std::vector<std::string>& inputs) {
  std::vector<util::Child> children;
  std::vector<ChildRun> runs(argvs.size());
  std::vector<std::string_view> pending(argvs.size());
  children.reserve(argvs.size());
  for (std::size_t i = 0; i < argvs.size(); ++i) {
    const bool feed = i < inputs.size();
    children.push_back(spawn(argvs[i], environment, true, feed));
    if (feed) {
      pending[i] = inputs[i];
      if (pending[i].empty()) {
        util::close_fd(children[i].in_fd);
      }
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool terminated = false;
  for (;;) {
    std::vector<pollfd> open;
    std::vector<std::size_t> owner;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].out_fd >= 0) {
        open.push_back({children[i].out_fd, POLLIN, 0});
        owner.push_back(i);
      }
    }
    const std::size_t readers = open.size();
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].in_fd >= 0) {
        open.push_back({children[i].in_fd, POLLOUT, 0});
        owner.push_back(i);
      }
    }
    if (readers == 0) {
      for (auto& child : children) {
        util::close_fd(child.in_fd);
      }
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    const auto limit = terminated ? deadline + kKillGrace : deadline;
    if (now >= limit) {
      // Time is up: SIGTERM to every run still writing; after the grace, SIGKILL and stop reading.
      for (std::size_t i = 0; i < children.size(); ++i) {
        if (children[i].out_fd >= 0) {
          ::kill(-children[i].pid, terminated ? SIGKILL : SIGTERM);
          runs[i].timed_out = true;
          if (terminated) {
            util::close_fd(children[i].out_fd);
            util::close_fd(children[i].in_fd);
          }
        }
      }
      terminated = true;
      continue;
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit - now).count();
    if (::poll(open.data(), open.size(), static_cast<int>(std::clamp<long long>(wait_ms, 1, 60'000))) < 0 &&
        errno != EINTR) {
      fail("poll");
    }
    for (std::size_t k = readers; k < open.size(); ++k) {
      if (open[k].revents == 0) {
        continue;
      }
      auto& child = children[owner[k]];
      auto& rest = pending[owner[k]];
      rest.remove_prefix((open[k].revents & POLLOUT) != 0 ? write_some(child.in_fd, rest) : rest.size());
      if (rest.empty()) {
        util::close_fd(child.in_fd);
      }
    }
    for (std::size_t k = 0; k < readers; ++k) {
      if ((open[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        continue;
      }
      auto& child = children[owner[k]];
      char chunk[8192];
      const ssize_t got = ::read(child.out_fd, chunk, sizeof chunk);
      if (got > 0) {
        runs[owner[k]].output.append(chunk, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        util::close_fd(child.out_fd);
      }
    }
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    runs[i].exit_code = util::wait_exit(children[i].pid);
  }
  return runs;
}

} // namespace jobman::remote::detail
