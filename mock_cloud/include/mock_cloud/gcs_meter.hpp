// The mock's Cloud Storage as worker hosts read it, metered: jobman-mock-gcs-meter (tools/gcs_meter.cpp), a FUSE
// filesystem over the bucket root in which each host has a directory of its own, through which it reads and writes
// every bucket. What a host moved is counted per bucket and served by its gcsfuse on --prometheus-port.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <sys/types.h>

namespace jobman::mock {

// A running meter, mounted; unmounted and ended when destroyed.
class GcsMeter {
public:
  // Mounts `program` (jobman-mock-gcs-meter) over `buckets` at `mounts`/<this process's pid> (made when missing;
  // the mounts killed mocks left in `mounts` are taken off first). Returns null, with the reason in `why_not`, when
  // this machine cannot (no /dev/fuse to open, the mount refused): the hosts then read the buckets unmetered.
  static std::unique_ptr<GcsMeter> start(const std::filesystem::path& program, const std::filesystem::path& buckets,
                                         const std::filesystem::path& mounts, std::string& why_not);
  ~GcsMeter();
  GcsMeter(const GcsMeter&) = delete;
  GcsMeter& operator=(const GcsMeter&) = delete;

  // The directory a host reads the buckets through: <mounts>/<pid>/<host>, for a host name of letters, digits, '-'
  // and '_'.
  [[nodiscard]] std::filesystem::path host_root(const std::string& host) const { return mount_point_ / host; }

private:
  GcsMeter(std::filesystem::path mount_point, pid_t pid) : mount_point_(std::move(mount_point)), pid_(pid) {}

  std::filesystem::path mount_point_;
  pid_t pid_;
};

} // namespace jobman::mock
