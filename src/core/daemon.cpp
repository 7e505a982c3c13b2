#include "jobman/core/daemon.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

namespace jobman::core {

namespace fs = std::filesystem;

std::string lease_owner_id() {
  // Field 22 of /proc/self/stat: the start time in clock ticks since boot.
  std::string start = "0";
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (const auto paren = text.rfind(')'); paren != std::string::npos) {
    const auto fields = util::split(text.substr(paren + 2), ' ');
    if (fields.size() > 19) {
      start = fields[19];
    }
  }
  return util::hostname() + ":" + std::to_string(::getpid()) + ":" + start;
}

fs::path daemon_lock_path() {
  return util::jobman_home() / "daemon.lock";
}

DaemonPresence::DaemonPresence() {
  util::ensure_directory(util::jobman_home(), 0700);
  fd_ = ::open(daemon_lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0 || ::flock(fd_, LOCK_SH) != 0) {
    throw Error("cannot lock " + daemon_lock_path().string() + ": " + std::strerror(errno));
  }
  // The newest daemon's pid, for people and scripts (`kill $(cat daemon.lock)`).
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    spdlog::warn("cannot write the pid into {}", daemon_lock_path().string());
  }
}

DaemonPresence::~DaemonPresence() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

bool daemon_running() {
  const int fd = ::open(daemon_lock_path().c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  // An exclusive lock is refused while any daemon holds its shared one.
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return !free;
}

bool ensure_daemon(std::ostream& notice) {
  if (daemon_running()) {
    return false;
  }
  util::ensure_directory(util::jobman_home(), 0700);
  // One starter at a time; a daemon started meanwhile is seen under the lock.
  const int lock_fd = ::open((util::jobman_home() / "daemon.start.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
    throw Error("cannot start the supervisor: " + std::string(std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{lock_fd};
  if (daemon_running()) {
    return false;
  }
  const auto log_path = util::jobman_home() / "daemon.log";
  const std::string exe = (util::executable_dir() / "jobman").string();
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    throw Error("cannot start the supervisor: " + std::string(std::strerror(errno)));
  }
  try {
    // Detached (its own session, re-parented to init), its output appended to the log. The write end of the ready
    // pipe stays open (without CLOEXEC) into the daemon, which closes it once it holds its lock.
    util::ProcessBuilder({exe, "daemon", "--idle-exit", "600", "--ready-fd", std::to_string(ready[1])})
        .input(util::Stream::null())
        .output(util::Stream::file(log_path, util::FileMode::append))
        .error(util::Stream::output())
        .keep_open(ready[1])
        .spawn_detached();
  } catch (const Error& e) {
    ::close(ready[0]);
    ::close(ready[1]);
    throw Error("cannot start the supervisor: " + std::string(e.what()));
  }
  ::close(ready[1]);
  // Wait until the daemon holds its lock (it closes the pipe) or gives up (exec failed: the pipe closes too).
  char byte = 0;
  while (::read(ready[0], &byte, 1) < 0 && errno == EINTR) {
  }
  ::close(ready[0]);
  if (!daemon_running()) {
    throw Error("the supervisor did not start; see " + log_path.string());
  }
  notice << "jobman: started the supervisor in the background (log: " << log_path.string() << ")\n";
  return true;
}

} // namespace jobman::core
