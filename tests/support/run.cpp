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
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace jobman::test {

std::string jobman_binary() {
  return JOBMAN_BINARY;
}

std::vector<std::string> child_environment(const std::map<std::string, std::string>& changes) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto key = std::string(text.substr(0, text.find('=')));
    if (!changes.contains(key)) {
      entries.emplace_back(text);
    }
  }
  for (const auto& [key, value] : changes) {
    if (!value.empty()) {
      entries.push_back(key + "=" + value);
    }
  }
  return entries;
}

std::vector<char*> exec_pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (auto& text : strings) {
    pointers.push_back(text.data());
  }
  pointers.push_back(nullptr);
  return pointers;
}

RunResult run_program(const std::vector<std::string>& argv, const RunOptions& options) {
  // Everything the child needs is made before fork (see child_environment).
  auto environment = child_environment(options.env);
  const auto envp = exec_pointers(environment);
  auto all = argv;
  const auto args = exec_pointers(all);
  int in_pipe[2];
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) {
      ::_exit(127);
    }
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  RunResult result;
  std::size_t input_written = 0;
  int in_fd = in_pipe[1];
  if (options.input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  bool out_open = true;
  bool err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    pollfd fds[3];
    int n = 0;
    if (out_open)
      fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_open)
      fds[n++] = {err_pipe[0], POLLIN, 0};
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
          ::close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      const ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        (fds[i].fd == out_pipe[0] ? result.out : result.err).append(buf, static_cast<std::size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        if (fds[i].fd == out_pipe[0])
          out_open = false;
        else
          err_open = false;
      }
    }
  }
  if (in_fd >= 0)
    ::close(in_fd);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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

void kill_processes_of(const std::filesystem::path& home) {
  for (const auto& [pid, cmdline] : processes_of(home)) {
    ::kill(pid, SIGKILL);
  }
}

} // namespace jobman::test
