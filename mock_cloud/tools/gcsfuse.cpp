// The mock cloud's Cloud Storage FUSE, for worker hosts: `gcsfuse [flags] BUCKET DIR` mounts the mock bucket
// $MOCK_GCS_ROOT/BUCKET at DIR (an empty directory, as gcsfuse requires), `fusermount -u DIR` unmounts it and
// `mountpoint [-q] DIR` tells whether DIR is mounted. One program under three names. A mount is a symbolic link
// in place of the empty directory, on the host's own filesystem: the mount point is the host's and goes with it, and
// the bucket's files are the same files on every worker and survive the slice. On a host without a filesystem of its
// own (the mock runs without namespaces) DIR must lie in the host's sandbox: anywhere else is this machine's. The first
// mount of a bucket records the host's zone beside the buckets (bucket_root.hpp): the mock's Cloud Storage API places a
// bucket the world config does not by it.
#include "mock_cloud/bucket_root.hpp"
#include "mock_cloud/host_filesystem.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The mock's buckets, from the worker's environment.
fs::path bucket_root() {
  const char* root = std::getenv("MOCK_GCS_ROOT");
  if (root == nullptr || *root == '\0') {
    std::cerr << "gcsfuse: MOCK_GCS_ROOT is not set: this gcsfuse only runs on the mock cloud's worker hosts\n";
    std::exit(1);
  }
  return root;
}

// Exits with 1, saying why, unless `dir` is the host's own to change: every path is on a host with a filesystem of its
// own; without one only what lies in the host's sandbox ($MOCK_TPU_WORKER_DIR) is, the rest being this machine's.
void require_host_path(const std::string& tool, const fs::path& dir) {
  const char* own = std::getenv(jobman::mock::kOwnFilesystemVariable);
  if (own != nullptr && std::string(own) == "1") {
    return;
  }
  const char* sandbox = std::getenv("MOCK_TPU_WORKER_DIR");
  if (sandbox == nullptr || *sandbox == '\0') {
    std::cerr << tool << ": MOCK_TPU_WORKER_DIR is not set: this " << tool
              << " only runs on the mock cloud's worker hosts\n";
    std::exit(1);
  }
  // The mount point itself may be a mount (a link into the buckets): only the directory it is in is resolved.
  std::error_code ec;
  const auto absolute = fs::absolute(dir, ec).lexically_normal();
  const auto path = absolute.filename().empty()
                        ? fs::weakly_canonical(absolute, ec)
                        : fs::weakly_canonical(absolute.parent_path(), ec) / absolute.filename();
  const auto rel = path.lexically_relative(fs::weakly_canonical(sandbox, ec));
  if (!rel.empty() && *rel.begin() != "..") {
    return;
  }
  std::cerr << tool << ": mountpoint " << dir.string() << " is outside this worker host's sandbox " << sandbox
            << ": the mock cloud gives its hosts no filesystem of their own here (no namespaces), so its " << tool
            << " mounts only inside the sandbox (under ~, for one), never on this machine\n";
  std::exit(1);
}

// True when `dir` is a mount of a mock bucket.
bool is_mounted(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_symlink(dir, ec)) {
    return false;
  }
  const auto target = fs::read_symlink(dir, ec);
  const auto root = fs::weakly_canonical(bucket_root(), ec);
  return !ec && target.parent_path() == root;
}

// Records the zone of this host ($MOCK_TPU_ZONE) as where `bucket` was first mounted, unless a mount before this one
// did: the record is written whole under a private name, then linked to its own, which fails when it exists (an
// exclusive create, like O_EXCL, that no reader sees half-written). Only warns when it cannot: the mount goes on.
void record_first_mount(const fs::path& root, const std::string& bucket) {
  const char* zone = std::getenv(jobman::mock::kHostZoneVariable);
  const auto record = jobman::mock::first_mount_file(root, bucket);
  std::error_code ec;
  if (zone == nullptr || *zone == '\0' || fs::exists(record, ec)) {
    return;
  }
  // Every account of every host may record a first mount; the sticky bit keeps each from removing another's record.
  if (fs::create_directories(record.parent_path(), ec)) {
    fs::permissions(record.parent_path(), fs::perms::all | fs::perms::sticky_bit, ec);
  }
  const auto draft = record.parent_path() / ("." + bucket + "." + std::to_string(::getpid()));
  const std::string line = std::string(zone) + "\n";
  const int fd = ::open(draft.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool recorded = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  int error = errno;
  if (fd >= 0) {
    ::close(fd);
  }
  if (recorded && ::link(draft.c_str(), record.c_str()) != 0 && errno != EEXIST) {
    recorded = false;
    error = errno;
  }
  if (!recorded) {
    std::cerr << "gcsfuse: warning: cannot record where bucket " << bucket
              << " was first mounted: " << std::strerror(error) << "\n";
  }
  fs::remove(draft, ec);
}

int mount(const std::vector<std::string>& args) {
  // Flags gcsfuse takes with a value; the rest of the flags take none.
  static const std::set<std::string> with_value = {"-o",
                                                   "--dir-mode",
                                                   "--file-mode",
                                                   "--uid",
                                                   "--gid",
                                                   "--only-dir",
                                                   "--key-file",
                                                   "--token-url",
                                                   "--limit-bytes-per-sec",
                                                   "--limit-ops-per-sec",
                                                   "--stat-cache-ttl",
                                                   "--type-cache-ttl",
                                                   "--log-file",
                                                   "--log-format",
                                                   "--temp-dir",
                                                   "--max-conns-per-host",
                                                   "--stat-cache-capacity",
                                                   "--billing-project",
                                                   "--config-file",
                                                   "--app-name",
                                                   "--rename-dir-limit",
                                                   "--kernel-list-cache-ttl-secs",
                                                   "--metadata-cache-ttl-secs"};
  std::vector<std::string> operands;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: gcsfuse [flags] BUCKET MOUNTPOINT  (the mock cloud's stand-in)\n";
      return 0;
    }
    if (arg.rfind('-', 0) == 0) {
      if (with_value.count(arg) > 0) {
        ++i;
      }
      continue;
    }
    operands.push_back(arg);
  }
  if (operands.size() != 2) {
    std::cerr << "gcsfuse: expected BUCKET MOUNTPOINT, got " << operands.size() << " operands\n";
    return 1;
  }
  const auto& bucket = operands[0];
  const fs::path dir = operands[1];
  // No bucket name starts with '.': the bucket root keeps its records under such a name.
  if (bucket.empty() || bucket.find('/') != std::string::npos || bucket.front() == '.') {
    std::cerr << "gcsfuse: invalid bucket name '" << bucket << "'\n";
    return 1;
  }
  require_host_path("gcsfuse", dir);
  std::error_code ec;
  if (is_mounted(dir)) {
    std::cerr << "gcsfuse: Error while mounting gcsfuse: mountpoint " << dir.string() << " is not empty\n";
    return 1;
  }
  if (!fs::is_directory(dir, ec)) {
    std::cerr << "gcsfuse: Error while mounting gcsfuse: mountpoint " << dir.string() << " is not a directory\n";
    return 1;
  }
  if (!fs::is_empty(dir, ec)) {
    std::cerr << "gcsfuse: Error while mounting gcsfuse: mountpoint " << dir.string() << " is not empty\n";
    return 1;
  }
  // Every bucket exists in the mock's Cloud Storage; the first mount creates it, writable by every host's accounts
  // (a bucket has no owner among them).
  const auto root = fs::weakly_canonical(bucket_root(), ec);
  if (fs::create_directories(root / bucket, ec)) {
    fs::permissions(root / bucket, fs::perms::all, ec);
  }
  if (ec) {
    std::cerr << "gcsfuse: cannot create bucket " << bucket << ": " << ec.message() << "\n";
    return 1;
  }
  record_first_mount(root, bucket);
  fs::remove(dir, ec);
  fs::create_directory_symlink(root / bucket, dir, ec);
  if (ec) {
    std::cerr << "gcsfuse: cannot mount " << bucket << " at " << dir.string() << ": " << ec.message() << "\n";
    return 1;
  }
  std::cerr << "File system has been successfully mounted.\n";
  return 0;
}

int unmount(const std::vector<std::string>& args) {
  std::vector<std::string> operands;
  bool unmount_flag = false;
  for (const auto& arg : args) {
    if (arg == "-u" || arg == "-uz" || arg == "-zu") {
      unmount_flag = true;
    } else if (arg.rfind('-', 0) != 0) {
      operands.push_back(arg);
    }
  }
  if (!unmount_flag || operands.size() != 1) {
    std::cerr << "fusermount: expected -u MOUNTPOINT\n";
    return 1;
  }
  const fs::path dir = operands[0];
  require_host_path("fusermount", dir);
  if (!is_mounted(dir)) {
    std::cerr << "fusermount: entry for " << dir.string() << " not found in /etc/mtab\n";
    return 1;
  }
  std::error_code ec;
  fs::remove(dir, ec);
  fs::create_directory(dir, ec);
  return ec ? 1 : 0;
}

int mountpoint(const std::vector<std::string>& args) {
  bool quiet = false;
  std::vector<std::string> operands;
  for (const auto& arg : args) {
    if (arg == "-q" || arg == "--quiet") {
      quiet = true;
    } else if (arg.rfind('-', 0) != 0) {
      operands.push_back(arg);
    }
  }
  if (operands.size() != 1) {
    std::cerr << "mountpoint: bad usage\n";
    return 1;
  }
  const bool mounted = is_mounted(operands[0]);
  if (!quiet) {
    std::cout << operands[0] << (mounted ? " is a mountpoint\n" : " is not a mountpoint\n");
  }
  return mounted ? 0 : 32; // util-linux's status for "not a mountpoint".
}

} // namespace

int main(int argc, char** argv) {
  const std::string name = fs::path(argv[0]).filename().string();
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (name == "fusermount" || name == "fusermount3") {
    return unmount(args);
  }
  if (name == "mountpoint") {
    return mountpoint(args);
  }
  return mount(args);
}
