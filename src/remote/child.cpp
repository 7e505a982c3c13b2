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
                              std::chrono::milliseconds timeout, const std::vector<std::string>& inputs,
                              std::size_t limit) {
  using Clock = std::chrono::steady_clock;
  // One child's course: its time, whether it was told to stop, and what is left to feed it.
  struct Course {
    util::Child child;
    bool terminated = false;
    Clock::time_point deadline;
    std::string_view pending;
  };
  std::vector<Course> courses(argvs.size());
  std::vector<ChildRun> runs(argvs.size());
  const std::size_t at_once = limit == 0 ? argvs.size() : limit;
  std::size_t next = 0;    // The next child to start.
  std::size_t reading = 0; // Children started whose output is still open.
  for (;;) {
    while (next < argvs.size() && reading < at_once) {
      auto& course = courses[next];
      const bool feed = next < inputs.size();
      course.child = spawn(argvs[next], environment, true, feed);
      course.deadline = Clock::now() + timeout;
      if (feed) {
        course.pending = inputs[next];
        if (course.pending.empty()) {
          util::close_fd(course.child.in_fd);
        }
      }
      ++next;
      ++reading;
    }
    if (reading == 0) {
      break;
    }
    std::vector<pollfd> open;
    std::vector<std::size_t> owner;
    for (std::size_t i = 0; i < next; ++i) {
      if (courses[i].child.out_fd >= 0) {
        open.push_back({courses[i].child.out_fd, POLLIN, 0});
        owner.push_back(i);
      }
    }
    const std::size_t readers = open.size();
    for (std::size_t i = 0; i < next; ++i) {
      if (courses[i].child.in_fd >= 0 && courses[i].child.out_fd >= 0) {
        open.push_back({courses[i].child.in_fd, POLLOUT, 0});
        owner.push_back(i);
      }
    }
    // A child whose time is up gets SIGTERM to its group; after the grace, SIGKILL, and it is no longer read.
    const auto now = Clock::now();
    auto soonest = Clock::time_point::max();
    for (std::size_t k = 0; k < readers; ++k) {
      auto& course = courses[owner[k]];
      const auto limit_at = course.terminated ? course.deadline + kKillGrace : course.deadline;
      if (now >= limit_at) {
        ::kill(-course.child.pid, course.terminated ? SIGKILL : SIGTERM);
        runs[owner[k]].timed_out = true;
        if (course.terminated) {
          util::close_fd(course.child.out_fd);
          util::close_fd(course.child.in_fd);
          --reading;
        }
        course.terminated = true;
        soonest = now;
      } else {
        soonest = std::min(soonest, limit_at);
      }
    }
    if (soonest <= now) {
      continue;
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(soonest - now).count();
    if (::poll(open.data(), open.size(), static_cast<int>(std::clamp<long long>(wait_ms, 1, 60'000))) < 0 &&
        errno != EINTR) {
      fail("poll");
    }
    for (std::size_t k = readers; k < open.size(); ++k) {
      if (open[k].revents == 0) {
        continue;
      }
      auto& course = courses[owner[k]];
      course.pending.remove_prefix((open[k].revents & POLLOUT) != 0 ? write_some(course.child.in_fd, course.pending)
                                                                    : course.pending.size());
      if (course.pending.empty()) {
        util::close_fd(course.child.in_fd);
      }
    }
    for (std::size_t k = 0; k < readers; ++k) {
      if ((open[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        continue;
      }
      auto& course = courses[owner[k]];
      char chunk[8192];
      const ssize_t got = ::read(course.child.out_fd, chunk, sizeof chunk);
      if (got > 0) {
        runs[owner[k]].output.append(chunk, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        util::close_fd(course.child.out_fd);
        util::close_fd(course.child.in_fd);
        --reading;
      }
    }
  }
  for (std::size_t i = 0; i < courses.size(); ++i) {
    runs[i].exit_code = util::wait_exit(courses[i].child.pid);
  }
  return runs;
}

} // namespace jobman::remote::detail
