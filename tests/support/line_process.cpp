#include "support/line_process.hpp"

#include "support/run.hpp"

#include <cerrno>
#include <csignal>
#include <poll.h>
#include <unistd.h>

namespace jobman::test {

LineReadingProcess::LineReadingProcess(const std::vector<std::string>& argv,
                                       const std::map<std::string, std::string>& env,
                                       const std::filesystem::path& stderr_file, std::chrono::milliseconds patience)
    : patience_(patience) {
  auto process = child_process(argv, env);
  process.output(util::Stream::pipe());
  if (!stderr_file.empty()) {
    process.error(util::Stream::file(stderr_file, util::FileMode::append, 0644));
  }
  const auto child = process.spawn();
  pid_ = child.pid;
  out_ = child.out_fd;
}

LineReadingProcess::~LineReadingProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    util::wait_exit(pid_);
  }
  util::close_fd(out_);
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
      util::close_fd(out_);
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
  const auto status = util::wait_child(pid_);
  const bool timed_out = out_ >= 0;
  pid_ = -1;
  if (timed_out) {
    return -1;
  }
  killed_by_signal_ = status.signaled;
  return status.code;
}

} // namespace jobman::test
