#include "jobman/core/daemon.hpp"

#include "jobman/config/settings.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/util/digest.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace jobman::core {

namespace fs = std::filesystem;

namespace {

// The fields of /proc/PID/stat after the command's closing parenthesis: field 3 (the state) first; empty when the
// process does not exist.
std::vector<std::string> stat_fields(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 > text.size()) {
    return {};
  }
  return util::split(text.substr(paren + 2), ' ');
}

// This machine as lease owners name it: the boot and the pid namespace, as eight hex digits.
const std::string& machine_token() {
  static const std::string token = [] {
    std::string boot;
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::getline(in, boot);
    std::error_code ec;
    const auto pid_namespace = fs::read_symlink("/proc/self/ns/pid", ec).string();
    return util::hex_digits(util::fnv1a(std::string(util::trim(boot)) + "/" + pid_namespace), 8);
  }();
  return token;
}

} // namespace

std::string lease_owner_id() {
  // Field 22 of /proc/self/stat: the start time in clock ticks since boot.
  std::string start = "0";
  if (const auto fields = stat_fields("self"); fields.size() > 19) {
    start = fields[19];
  }
  return util::hostname() + ":" + std::to_string(::getpid()) + ":" + start + ":" + machine_token();
}

bool lease_owner_dead_here(const std::string& owner) {
  const auto fields = util::split(owner, ':');
  if (fields.size() != 4 || fields[0] != util::hostname() || fields[3] != machine_token() ||
      !util::parse_int(fields[1]) || fields[1] == std::to_string(::getpid())) {
    return false;
  }
  const auto stat = stat_fields(fields[1]);
  if (stat.size() <= 19) {
    // Not in /proc: no such process, unless /proc hides other users' (hidepid), which kill(2) still tells apart.
    const auto pid = static_cast<pid_t>(*util::parse_int(fields[1]));
    return ::kill(pid, 0) != 0 && errno == ESRCH;
  }
  // A zombie has ended (its parent has not reaped it yet); a start time of its own is a new process under the pid.
  return stat[0] == "Z" || stat[0] == "X" || stat[19] != fields[2];
}

std::vector<std::string> end_leases_of_dead_supervisors(store::JobStore& store, std::int64_t now_ms) {
  std::vector<std::string> dead;
  for (const auto& owner : store.leases().live_owners(now_ms)) {
    if (lease_owner_dead_here(owner)) {
      if (store.leases().expire_all_of(owner, now_ms) > 0) {
        dead.push_back(owner);
      }
    }
  }
  return dead;
}

namespace {

// "" for the home's own SQLite store, else "-" and store_key().
std::string store_file_suffix() {
  const auto key = store_key(store_location());
  return key.empty() ? "" : "-" + key;
}

} // namespace

fs::path daemon_lock_path() {
  return config::jobman_home() / ("daemon" + store_file_suffix() + ".lock");
}

fs::path daemon_log_path() {
  return config::jobman_home() / ("daemon" + store_file_suffix() + ".log");
}

void rotate_log(const fs::path& log, std::uintmax_t max_bytes, int keep) {
  struct stat ours {};
  struct stat named {};
  const bool have_ours = ::fstat(STDERR_FILENO, &ours) == 0;
  const bool have_named = ::stat(log.c_str(), &named) == 0;
  const bool ours_is_log = have_ours && have_named && ours.st_dev == named.st_dev && ours.st_ino == named.st_ino;
  if (!have_ours || !S_ISREG(ours.st_mode)) {
    return; // Not writing to a file (a terminal, a pipe, the journal): nothing to rotate.
  }
  if (ours_is_log && static_cast<std::uintmax_t>(named.st_size) <= max_bytes) {
    return;
  }
  if (ours_is_log) {
    // One rotator at a time: the others find a new, small log and reopen it.
    const int lock_fd = ::open((log.string() + ".rotate.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
      if (lock_fd >= 0) {
        ::close(lock_fd);
      }
      return;
    }
    struct stat again {};
    if (::stat(log.c_str(), &again) == 0 && again.st_ino == ours.st_ino &&
        static_cast<std::uintmax_t>(again.st_size) > max_bytes) {
      std::error_code ec;
      for (int i = keep - 1; i >= 1; --i) {
        fs::rename(log.string() + "." + std::to_string(i), log.string() + "." + std::to_string(i + 1), ec);
      }
      fs::rename(log, log.string() + ".1", ec);
    }
    ::close(lock_fd);
  }
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
}

DaemonPresence::DaemonPresence() {
  util::ensure_directory(config::jobman_home(), 0700);
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

std::vector<int> daemon_pids() {
  std::vector<int> pids;
  std::error_code ec;
  const auto lock = fs::weakly_canonical(daemon_lock_path(), ec);
  for (const auto& process : fs::directory_iterator("/proc", ec)) {
    const auto pid = util::parse_int(process.path().filename().string());
    if (!pid || *pid == ::getpid()) {
      continue;
    }
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(process.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (fs::read_symlink(fd.path(), link_ec) == lock) {
        pids.push_back(static_cast<int>(*pid));
        break;
      }
    }
  }
  return pids;
}

DaemonStop stop_daemons(std::chrono::milliseconds timeout) {
  DaemonStop stop;
  for (const int pid : daemon_pids()) {
    if (::kill(pid, SIGTERM) == 0) {
      stop.asked.push_back(pid);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    stop.running.clear();
    for (const int pid : stop.asked) {
      const auto fields = stat_fields(std::to_string(pid));
      if (!fields.empty() && fields[0] != "Z" && fields[0] != "X") {
        stop.running.push_back(pid);
      }
    }
    if (stop.running.empty() || std::chrono::steady_clock::now() >= deadline) {
      return stop;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool ensure_daemon(std::ostream& notice, const std::function<void()>& before_start) {
  if (daemon_running()) {
    return false;
  }
  util::ensure_directory(config::jobman_home(), 0700);
  // One starter at a time; a daemon started meanwhile is seen under the lock.
  const int lock_fd = ::open((daemon_lock_path().string() + ".start").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
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
  if (before_start) {
    before_start();
  }
  const auto log_path = daemon_log_path();
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
