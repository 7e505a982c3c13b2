#include "support/run.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <sys/syscall.h>
#include <unistd.h>

namespace jobman::test {

std::string jobman_binary() {
  return JOBMAN_BINARY;
}

util::ProcessBuilder child_process(const std::vector<std::string>& argv,
                                   const std::map<std::string, std::string>& changes) {
  util::ProcessBuilder process(argv);
  for (const auto& [key, value] : changes) {
    if (value.empty()) {
      process.unset_env(key);
    } else {
      process.env(key, value);
    }
  }
  return process;
}

RunResult run_program(const std::vector<std::string>& argv, const RunOptions& options) {
  auto process = child_process(argv, options.env);
  process.input(util::Stream::pipe()).output(util::Stream::pipe()).error(util::Stream::pipe());
  if (!options.cwd.empty()) {
    process.directory(options.cwd);
  }
  auto child = process.spawn();

  RunResult result;
  std::size_t input_written = 0;
  int in_fd = child.in_fd;
  if (options.input.empty()) {
    util::close_fd(in_fd);
  }
  const int out_fd = child.out_fd;
  const int err_fd = child.err_fd;
  bool out_open = true;
  bool err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    pollfd fds[3];
    int n = 0;
    if (out_open)
      fds[n++] = {out_fd, POLLIN, 0};
    if (err_open)
      fds[n++] = {err_fd, POLLIN, 0};
    if (in_fd >= 0)
      fds[n++] = {in_fd, POLLOUT, 0};
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0)
        continue;
      if (fds[i].fd == in_fd) {
        const ssize_t w = ::write(in_fd, options.input.data() + input_written, options.input.size() - input_written);
        if (w > 0)
          input_written += static_cast<std::size_t>(w);
        if (w < 0 || input_written == options.input.size()) {
          util::close_fd(in_fd);
        }
        continue;
      }
      const ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        (fds[i].fd == out_fd ? result.out : result.err).append(buf, static_cast<std::size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        if (fds[i].fd == out_fd)
          out_open = false;
        else
          err_open = false;
      }
    }
  }
  util::close_fd(in_fd);
  util::close_fd(child.out_fd);
  util::close_fd(child.err_fd);
  result.exit_code = util::wait_exit(child.pid);
  return result;
}

RunResult run_jobman(const std::vector<std::string>& args, const RunOptions& options) {
  std::vector<std::string> argv{jobman_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  // Tests of the store and the commands start no supervisor or mock cloud unless they ask for one.
  RunOptions with_defaults = options;
  with_defaults.env.emplace("JOBMAN_AUTOSTART", "0");
  return run_program(argv, with_defaults);
}

namespace {

std::string proc_file(const std::string& pid, const char* name) {
  std::ifstream in(std::filesystem::path("/proc") / pid / name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

std::vector<std::string> process_ids() {
  std::vector<std::string> ids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) {
    return ids;
  }
  while (const auto* entry = ::readdir(proc)) {
    const std::string pid = entry->d_name;
    if (!pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos) {
      ids.push_back(pid);
    }
  }
  ::closedir(proc);
  return ids;
}

std::vector<std::pair<int, std::string>> processes_of(const std::filesystem::path& home) {
  std::vector<std::pair<int, std::string>> found;
  const std::string needle = "JOBMAN_HOME=" + home.string();
  for (const auto& pid : process_ids()) {
    const auto environ_text = proc_file(pid, "environ");
    std::string_view rest(environ_text);
    while (!rest.empty()) {
      const auto end = rest.find('\0');
      if (rest.substr(0, end) == needle) {
        auto cmdline = proc_file(pid, "cmdline");
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        found.emplace_back(std::stoi(pid), cmdline);
        break;
      }
      if (end == std::string_view::npos) {
        break;
      }
      rest.remove_prefix(end + 1);
    }
  }
  return found;
}

bool exits_within(int pid, std::chrono::milliseconds patience) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    return true;
  }
  pollfd fds{pidfd, POLLIN, 0};
  int ready = 0;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  do {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    ready = ::poll(&fds, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
  } while (ready < 0 && errno == EINTR);
  ::close(pidfd);
  return ready > 0;
}

void kill_processes_of(const std::filesystem::path& home) {
  std::vector<int> meters;
  for (const auto& [pid, cmdline] : processes_of(home)) {
    // fusermount3 keeping watch over a FUSE mount (the mock's metered buckets) takes the mount off once its server
    // dies: killed with it, it would leave the mount behind in the test's directory.
    if (cmdline.starts_with("fusermount3 ") || cmdline.starts_with("/usr/bin/fusermount3 ")) {
      continue;
    }
    // The mock's gcs meter unmounts and exits when its mock is gone. Killed with the mock, its mount was left to
    // fusermount3's watch, and once (after ExamplesTest.ValidateAsksTheBundledMockAndKnowsItsTiers) stayed in the
    // test's directory: the meter is let go and awaited, so that the directory is removed with nothing mounted in it.
    if (cmdline.find("jobman-mock-gcs-meter ") != std::string::npos) {
      meters.push_back(pid);
      continue;
    }
    ::kill(pid, SIGKILL);
  }
  for (const int pid : meters) {
    if (!exits_within(pid, std::chrono::seconds(10))) {
      ::kill(pid, SIGKILL);
    }
  }
}

} // namespace jobman::test
