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

std::unique_ptr<GcsMeter> GcsMeter::start(const std::filesystem::path& program, const std::filesystem::path& buckets,
                                          const std::filesystem::path& mount_point, std::string& why_not) {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    why_not = std::string("cannot open /dev/fuse: ") + std::strerror(errno);
    return nullptr;
  }
  std::error_code ec;
  if (!std::filesystem::exists(program, ec)) {
    why_not = program.string() + " is missing";
    return nullptr;
  }
  static_cast<void>(::umount2(mount_point.c_str(), MNT_DETACH)); // A predecessor's, if it left one.
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
}

} // namespace jobman::mock
