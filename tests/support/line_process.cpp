#include "support/line_process.hpp"

#include "support/run.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace jobman::test {

LineReadingProcess::LineReadingProcess(const std::vector<std::string>& argv,
                                       const std::map<std::string, std::string>& env,
                                       const std::filesystem::path& stderr_file, std::chrono::milliseconds patience)
    : patience_(patience) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> all = argv;
  const auto args = exec_pointers(all);
  // Everything the child needs is made before fork (see child_environment).
  auto environment = child_environment(env);
  const auto envp = exec_pointers(environment);
  pid_ = ::fork();
  if (pid_ < 0) {
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    ::dup2(fds[1], 1);
    if (!stderr_file.empty()) {
      const int err = ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (err >= 0) {
        ::dup2(err, 2);
      }
    }
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  out_ = fds[0];
}

LineReadingProcess::~LineReadingProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) {
    ::close(out_);
  }
}

std::optional<std::string> LineReadingProcess::next_line() {
  const auto deadline = std::chrono::steady_clock::now() + patience_;
  while (true) {
    if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      lines_.push_back(line);
      return line;
    }
    if (out_ < 0) {
      return std::nullopt;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return std::nullopt;
    }
    pollfd fds{out_, POLLIN, 0};
    const int ready = ::poll(&fds, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready <= 0) {
      return std::nullopt;
    }
    char chunk[4096];
    const ssize_t got = ::read(out_, chunk, sizeof chunk);
    if (got > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      ::close(out_);
      out_ = -1;
    }
  }
}

std::optional<std::string> LineReadingProcess::read_until(const std::string& prefix) {
  while (auto line = next_line()) {
    if (line->starts_with(prefix)) {
      return line;
    }
  }
  return std::nullopt;
}

void LineReadingProcess::send(int signal) const {
  ::kill(pid_, signal);
}

int LineReadingProcess::finish() {
  while (next_line()) {
  }
  if (out_ >= 0) {
    ::kill(pid_, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  const bool timed_out = out_ >= 0;
  pid_ = -1;
  if (timed_out) {
    return -1;
  }
  killed_by_signal_ = WIFSIGNALED(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace jobman::test
