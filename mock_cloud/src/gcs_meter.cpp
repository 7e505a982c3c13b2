#include "mock_cloud/gcs_meter.hpp"

#include "jobman/util/process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/mount.h>
#include <unistd.h>

namespace jobman::mock {

namespace {

// The mounts of mocks that were killed before they could unmount: their directories are named by their pids. Only
// an empty directory is removed, so a mount that will not come off keeps the buckets behind it.
void take_off_orphans(const std::filesystem::path& mounts) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(mounts, ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name.size() > 9) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (::kill(pid, 0) == 0 || errno != ESRCH) {
      continue; // Its mock runs.
    }
    static_cast<void>(::umount2(entry.path().c_str(), MNT_DETACH));
    static_cast<void>(::rmdir(entry.path().c_str()));
  }
}

} // namespace

std::unique_ptr<GcsMeter> GcsMeter::start(const std::filesystem::path& program, const std::filesystem::path& buckets,
                                          const std::filesystem::path& mounts, std::string& why_not) {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    why_not = std::string("cannot open /dev/fuse: ") + std::strerror(errno);
    return nullptr;
  }
  std::error_code ec;
  if (!std::filesystem::exists(program, ec)) {
    why_not = program.string() + " is missing";
    return nullptr;
  }
  take_off_orphans(mounts);
  // A directory of this mock's own: a mock started on the same state directory while another still runs (or ends)
  // mounts beside it, and neither's unmount can take the other's mount.
  const auto mount_point = mounts / std::to_string(::getpid());
  std::filesystem::create_directories(mount_point, ec);
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    why_not = std::string("cannot make a pipe: ") + std::strerror(errno);
    return nullptr;
  }
  util::Child child;
  try {
    child = util::ProcessBuilder({program.string(), buckets.string(), mount_point.string(), std::to_string(ready[1])})
                .keep_open(ready[1])
                // Out of the mock's process group: a kill of the group ends the mock, and the meter (which follows
                // its parent out) is left to take its mount with it.
                .group(util::ProcessGroup::new_session)
                .input(util::Stream::null())
                .spawn();
  } catch (const std::exception& e) {
    why_not = e.what();
  }
  ::close(ready[1]);
  if (child.pid < 0 || child.exec_error != 0) {
    ::close(ready[0]);
    if (child.pid > 0) {
      util::wait_exit(child.pid);
    }
    if (why_not.empty()) {
      why_not = "cannot run " + program.string() + ": " + std::strerror(child.exec_error);
    }
    return nullptr;
  }
  // One byte once mounted; the end of the pipe, with nothing, when it could not mount.
  char byte = 0;
  ssize_t n = -1;
  pollfd wait{ready[0], POLLIN, 0};
  int polled = 0;
  do {
    polled = ::poll(&wait, 1, 10'000);
  } while (polled < 0 && errno == EINTR);
  if (polled > 0) {
    n = ::read(ready[0], &byte, 1);
  } else {
    ::kill(child.pid, SIGKILL); // Ten seconds without a mount: it is stuck.
  }
  ::close(ready[0]);
  if (n != 1) {
    const int status = util::wait_exit(child.pid);
    why_not = program.filename().string() + " could not mount at " + mount_point.string() + " (exit " +
              std::to_string(status) + ")";
    return nullptr;
  }
  return std::unique_ptr<GcsMeter>(new GcsMeter(mount_point, child.pid));
}

GcsMeter::~GcsMeter() {
  // The mount first, so that nothing waits on a filesystem whose server is gone; then the server.
  static_cast<void>(::umount2(mount_point_.c_str(), MNT_DETACH));
  ::kill(pid_, SIGKILL);
  util::wait_exit(pid_);
  static_cast<void>(::rmdir(mount_point_.c_str()));
}

} // namespace jobman::mock
