#include "mock_cloud/workload_reaper.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "mock_cloud/worker_hosts.hpp"

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>
#include <unistd.h>

namespace jobman::mock {

int start_workload_reaper(const std::string& marker_prefix, const std::filesystem::path& scratch_dir) {
  std::vector<std::string> argv = {"jobman-mock-cloud", kReapWorkloadsOption, marker_prefix};
  if (!scratch_dir.empty()) {
    argv.push_back(scratch_dir.string());
  }
  // /proc/self/exe is this program even when its file was replaced or removed since it started.
  auto child = util::ProcessBuilder(argv)
                   .program("/proc/self/exe")
                   .input(util::Stream::pipe())
                   .output(util::Stream::null())
                   .group(util::ProcessGroup::new_session)
                   .spawn();
  if (child.exec_error != 0) {
    util::close_fd(child.in_fd);
    util::wait_exit(child.pid);
    throw Error("cannot start the mock's reaper: " + std::string(std::strerror(child.exec_error)));
  }
  return child.in_fd;
}

int reap_workloads(const std::string& marker_prefix, const std::filesystem::path& scratch_dir) {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    std::signal(signal, SIG_IGN);
  }
  std::array<char, 64> buffer{};
  for (;;) {
    const auto n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
    if (n == 0 || (n < 0 && errno != EINTR)) {
      break;
    }
  }
  // The mock is gone: its hosts lose power at once. A process forked meanwhile is found by the next look.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto pids = find_marked_processes(marker_prefix);
    if (pids.empty() || std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    for (pid_t pid : pids) {
      ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!scratch_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir, ec);
  }
  return 0;
}

} // namespace jobman::mock
