// jobman-mock-gcs-meter: the mock's Cloud Storage as its worker hosts read it, metered. A FUSE filesystem over the
// bucket root, started by jobman-mock-cloud before any host, in which /HOST/... is the bucket root itself, for every
// HOST (a name the mock gives each worker host): a host sees its own directory at MOCK_GCS_ROOT, so every byte it reads
// from or writes to a bucket crosses this process and is counted against (HOST, bucket), as a real gcsfuse counts what
// its mount moves. /HOST/.gcs-meter (bucket_root.hpp) is the counters of that host, as text, for its gcsfuse's
// metrics endpoint.
//
//   jobman-mock-gcs-meter SOURCE MOUNTPOINT READY_FD
//
// SOURCE is the bucket root, MOUNTPOINT an empty directory; once mounted, one byte is written to READY_FD and it is
// closed. The mount is made with auto_unmount: it goes with this process, however that ends, and this process goes with
// the one that started it.
#define FUSE_USE_VERSION 312

#include "mock_cloud/bucket_root.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <map>
#include <memory>
#include <mutex>
#include <poll.h>
#include <sstream>
#include <string>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace {

// What a host moved to and from one bucket.
struct Counters {
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
  std::map<std::string, std::uint64_t> fs_ops;      // By gcsfuse's fs_op names: ReadFile, WriteFile, ...
  std::map<std::string, std::uint64_t> gcs_methods; // By gcsfuse's gcs_method names: NewReader, ListObjects, ...
  std::map<std::string, std::uint64_t> readers;     // opened, closed.
};

int source_fd = -1;
std::mutex counters_mutex;
std::map<std::pair<std::string, std::string>, Counters> counters; // By (host, bucket).

// A path of the mount, split: "/HOST/bucket/a/b" is host "HOST", relative path "bucket/a/b" (of the source), bucket
// "bucket". The mount's own root has an empty host; a host's directory has the relative path ".".
struct Where {
  std::string host;
  std::string rel = ".";
  std::string bucket; // Empty outside a bucket (a host's directory, the records under '.').
  bool meter = false; // The host's counters file.
};

Where where(const char* path) {
  Where w;
  std::string p(path);
  while (!p.empty() && p.front() == '/') {
    p.erase(0, 1);
  }
  const auto slash = p.find('/');
  w.host = p.substr(0, slash);
  if (slash != std::string::npos && slash + 1 < p.size()) {
    w.rel = p.substr(slash + 1);
    const auto name = w.rel.substr(0, w.rel.find('/'));
    if (w.rel == jobman::mock::kMeterFile) {
      w.meter = true;
    } else if (!name.empty() && name.front() != '.') {
      w.bucket = name;
    }
  }
  return w;
}

// Counts one filesystem operation (and the Cloud Storage request it stands for, when it is one) against the bucket.
void count(const Where& w, const char* fs_op, const char* gcs_method = nullptr) {
  if (w.bucket.empty()) {
    return;
  }
  std::lock_guard lock(counters_mutex);
  auto& c = counters[{w.host, w.bucket}];
  ++c.fs_ops[fs_op];
  if (gcs_method != nullptr) {
    ++c.gcs_methods[gcs_method];
  }
}

// The counters of `host`, one "BUCKET\tKEY\tVALUE" line each.
std::string meter_text(const std::string& host) {
  std::ostringstream out;
  std::lock_guard lock(counters_mutex);
  for (const auto& [key, c] : counters) {
    if (key.first != host) {
      continue;
    }
    const auto& bucket = key.second;
    out << bucket << "\tread_bytes\t" << c.read_bytes << "\n" << bucket << "\twrite_bytes\t" << c.write_bytes << "\n";
    for (const auto& [name, n] : c.fs_ops) {
      out << bucket << "\tfs_op/" << name << "\t" << n << "\n";
    }
    for (const auto& [name, n] : c.gcs_methods) {
      out << bucket << "\tgcs_method/" << name << "\t" << n << "\n";
    }
    for (const auto& [name, n] : c.readers) {
      out << bucket << "\treader/" << name << "\t" << n << "\n";
    }
  }
  return out.str();
}

// An open file: a file of the source, or a snapshot of a host's counters.
struct Handle {
  int fd = -1;
  Where w;
  std::string text;  // The counters, for the meter file.
  bool read = false; // A reader was opened on it.
  bool written = false;
};

Handle* handle_of(const fuse_file_info* fi) {
  return reinterpret_cast<Handle*>(fi->fh); // NOLINT(performance-no-int-to-ptr): libfuse keeps the pointer as fh.
}

int error() {
  return -errno;
}

// Makes what the caller created theirs: this process runs as root, the caller as a host's account.
void give_to_caller(const std::string& rel) {
  const auto* context = fuse_get_context();
  static_cast<void>(::fchownat(source_fd, rel.c_str(), context->uid, context->gid, AT_SYMLINK_NOFOLLOW));
}

void* meter_init(fuse_conn_info* /*conn*/, fuse_config* cfg) {
  // Every host sees the others' writes at once: nothing is cached in the kernel past an open.
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->kernel_cache = 0;
  return nullptr;
}

int meter_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  const auto w = where(path);
  if (w.host.empty()) {
    return ::fstat(source_fd, st) == 0 ? 0 : error();
  }
  if (w.meter) {
    std::memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    return 0;
  }
  if (fi != nullptr && handle_of(fi)->fd >= 0) {
    return ::fstat(handle_of(fi)->fd, st) == 0 ? 0 : error();
  }
  count(w, "GetInodeAttributes", "StatObject");
  return ::fstatat(source_fd, w.rel.c_str(), st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) == 0 ? 0 : error();
}

int meter_readlink(const char* path, char* buf, size_t size) {
  const auto w = where(path);
  const auto n = ::readlinkat(source_fd, w.rel.c_str(), buf, size - 1);
  if (n < 0) {
    return error();
  }
  buf[n] = '\0';
  count(w, "ReadSymlink");
  return 0;
}

int meter_mkdir(const char* path, mode_t mode) {
  const auto w = where(path);
  if (::mkdirat(source_fd, w.rel.c_str(), mode) != 0) {
    return error();
  }
  give_to_caller(w.rel);
  count(w, "MkDir", "CreateObject");
  return 0;
}

int meter_unlink(const char* path) {
  const auto w = where(path);
  count(w, "Unlink", "DeleteObject");
  return ::unlinkat(source_fd, w.rel.c_str(), 0) == 0 ? 0 : error();
}

int meter_rmdir(const char* path) {
  const auto w = where(path);
  count(w, "RmDir", "DeleteObject");
  return ::unlinkat(source_fd, w.rel.c_str(), AT_REMOVEDIR) == 0 ? 0 : error();
}

int meter_symlink(const char* target, const char* path) {
  const auto w = where(path);
  if (::symlinkat(target, source_fd, w.rel.c_str()) != 0) {
    return error();
  }
  give_to_caller(w.rel);
  count(w, "CreateSymlink", "CreateObject");
  return 0;
}

int meter_rename(const char* from, const char* to, unsigned int flags) {
  const auto a = where(from);
  const auto b = where(to);
  if (a.host != b.host) {
    return -EXDEV;
  }
  count(a, "Rename", "CopyObject");
  count(a, "Rename", "DeleteObject");
  return ::renameat2(source_fd, a.rel.c_str(), source_fd, b.rel.c_str(), flags) == 0 ? 0 : error();
}

int meter_link(const char* from, const char* to) {
  const auto a = where(from);
  const auto b = where(to);
  count(b, "CreateLink", "CopyObject");
  return ::linkat(source_fd, a.rel.c_str(), source_fd, b.rel.c_str(), 0) == 0 ? 0 : error();
}

int meter_chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  const auto w = where(path);
  count(w, "SetInodeAttributes");
  if (fi != nullptr && handle_of(fi)->fd >= 0) {
    return ::fchmod(handle_of(fi)->fd, mode) == 0 ? 0 : error();
  }
  return ::fchmodat(source_fd, w.rel.c_str(), mode, 0) == 0 ? 0 : error();
}

int meter_chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
  const auto w = where(path);
  count(w, "SetInodeAttributes");
  if (fi != nullptr && handle_of(fi)->fd >= 0) {
    return ::fchown(handle_of(fi)->fd, uid, gid) == 0 ? 0 : error();
  }
  return ::fchownat(source_fd, w.rel.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : error();
}

int meter_truncate(const char* path, off_t size, fuse_file_info* fi) {
  const auto w = where(path);
  count(w, "SetInodeAttributes");
  if (fi != nullptr && handle_of(fi)->fd >= 0) {
    return ::ftruncate(handle_of(fi)->fd, size) == 0 ? 0 : error();
  }
  const int fd = ::openat(source_fd, w.rel.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return error();
  }
  const int rc = ::ftruncate(fd, size) == 0 ? 0 : error();
  ::close(fd);
  return rc;
}

int meter_utimens(const char* path, const struct timespec tv[2], fuse_file_info* fi) {
  const auto w = where(path);
  count(w, "SetInodeAttributes");
  if (fi != nullptr && handle_of(fi)->fd >= 0) {
    return ::futimens(handle_of(fi)->fd, tv) == 0 ? 0 : error();
  }
  return ::utimensat(source_fd, w.rel.c_str(), tv, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : error();
}

int open_handle(const char* path, fuse_file_info* fi, int fd) {
  auto handle = std::make_unique<Handle>();
  handle->fd = fd;
  handle->w = where(path);
  fi->fh = reinterpret_cast<std::uint64_t>(handle.release());
  return 0;
}

int meter_open(const char* path, fuse_file_info* fi) {
  const auto w = where(path);
  if (w.meter) {
    auto handle = std::make_unique<Handle>();
    handle->w = w;
    handle->text = meter_text(w.host);
    fi->direct_io = 1; // Its size is unknown to stat: every read comes here.
    fi->fh = reinterpret_cast<std::uint64_t>(handle.release());
    return 0;
  }
  const int fd = ::openat(source_fd, w.rel.c_str(), (fi->flags & ~O_NOFOLLOW) | O_CLOEXEC);
  if (fd < 0) {
    return error();
  }
  count(w, "OpenFile");
  return open_handle(path, fi, fd);
}

int meter_create(const char* path, mode_t mode, fuse_file_info* fi) {
  const auto w = where(path);
  const int fd = ::openat(source_fd, w.rel.c_str(), fi->flags | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) {
    return error();
  }
  give_to_caller(w.rel);
  count(w, "CreateFile");
  return open_handle(path, fi, fd);
}

int meter_read(const char* /*path*/, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  auto* handle = handle_of(fi);
  if (handle->fd < 0) {
    if (static_cast<std::size_t>(offset) >= handle->text.size()) {
      return 0;
    }
    const auto n = std::min(size, handle->text.size() - static_cast<std::size_t>(offset));
    handle->text.copy(buf, n, static_cast<std::size_t>(offset));
    return static_cast<int>(n);
  }
  const auto n = ::pread(handle->fd, buf, size, offset);
  if (n < 0) {
    return error();
  }
  if (!handle->w.bucket.empty()) {
    std::lock_guard lock(counters_mutex);
    auto& c = counters[{handle->w.host, handle->w.bucket}];
    c.read_bytes += static_cast<std::uint64_t>(n);
    ++c.fs_ops["ReadFile"];
    if (!handle->read) {
      ++c.gcs_methods["NewReader"];
      ++c.readers["opened"];
    }
  }
  handle->read = true;
  return static_cast<int>(n);
}

int meter_write(const char* /*path*/, const char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  auto* handle = handle_of(fi);
  if (handle->fd < 0) {
    return -EBADF;
  }
  const auto n = ::pwrite(handle->fd, buf, size, offset);
  if (n < 0) {
    return error();
  }
  handle->written = true;
  if (!handle->w.bucket.empty()) {
    std::lock_guard lock(counters_mutex);
    auto& c = counters[{handle->w.host, handle->w.bucket}];
    c.write_bytes += static_cast<std::uint64_t>(n);
    ++c.fs_ops["WriteFile"];
  }
  return static_cast<int>(n);
}

int meter_statfs(const char* /*path*/, struct statvfs* st) {
  return ::fstatvfs(source_fd, st) == 0 ? 0 : error();
}

int meter_flush(const char* /*path*/, fuse_file_info* fi) {
  count(handle_of(fi)->w, "FlushFile");
  return 0;
}

int meter_release(const char* /*path*/, fuse_file_info* fi) {
  std::unique_ptr<Handle> handle(handle_of(fi));
  if (handle->fd >= 0) {
    ::close(handle->fd);
  }
  if (handle->written) {
    count(handle->w, "ReleaseFileHandle", "CreateObject"); // gcsfuse uploads a written file when it is closed.
  } else {
    count(handle->w, "ReleaseFileHandle");
  }
  if (handle->read && !handle->w.bucket.empty()) {
    std::lock_guard lock(counters_mutex);
    ++counters[{handle->w.host, handle->w.bucket}].readers["closed"];
  }
  return 0;
}

int meter_fsync(const char* /*path*/, int datasync, fuse_file_info* fi) {
  auto* handle = handle_of(fi);
  count(handle->w, "SyncFile");
  if (handle->fd < 0) {
    return 0;
  }
  return (datasync != 0 ? ::fdatasync(handle->fd) : ::fsync(handle->fd)) == 0 ? 0 : error();
}

int meter_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t /*offset*/, fuse_file_info* /*fi*/,
                  fuse_readdir_flags /*flags*/) {
  const auto w = where(path);
  if (w.host.empty()) {
    fill(buf, ".", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
    fill(buf, "..", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
    return 0; // The mount's root lists no host: each finds its own by name.
  }
  const int fd = ::openat(source_fd, w.rel.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return error();
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return error();
  }
  count(w, "ReadDir", "ListObjects");
  while (const dirent* entry = ::readdir(dir)) {
    struct stat st {};
    st.st_ino = entry->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(entry->d_type));
    if (fill(buf, entry->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) {
      break;
    }
  }
  ::closedir(dir);
  return 0;
}

int meter_access(const char* /*path*/, int /*mask*/) {
  return 0; // The kernel checks the modes (default_permissions).
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: jobman-mock-gcs-meter SOURCE MOUNTPOINT READY_FD\n");
    return 2;
  }
  source_fd = ::open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (source_fd < 0) {
    std::fprintf(stderr, "jobman-mock-gcs-meter: cannot open %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  const int ready_fd = static_cast<int>(std::strtol(argv[3], nullptr, 10));
  fuse_operations ops{};
  ops.init = meter_init;
  ops.getattr = meter_getattr;
  ops.readlink = meter_readlink;
  ops.mkdir = meter_mkdir;
  ops.unlink = meter_unlink;
  ops.rmdir = meter_rmdir;
  ops.symlink = meter_symlink;
  ops.rename = meter_rename;
  ops.link = meter_link;
  ops.chmod = meter_chmod;
  ops.chown = meter_chown;
  ops.truncate = meter_truncate;
  ops.utimens = meter_utimens;
  ops.open = meter_open;
  ops.create = meter_create;
  ops.read = meter_read;
  ops.write = meter_write;
  ops.statfs = meter_statfs;
  ops.flush = meter_flush;
  ops.release = meter_release;
  ops.fsync = meter_fsync;
  ops.readdir = meter_readdir;
  ops.access = meter_access;
  char program[] = "jobman-mock-gcs-meter";
  char dash_o[] = "-o";
  char options[] = "allow_other,default_permissions,auto_unmount,fsname=jobman-mock-gcs,subtype=gcs-meter";
  char* fuse_argv[] = {program, dash_o, options, nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
  fuse* f = fuse_new(&args, &ops, sizeof ops, nullptr);
  fuse_opt_free_args(&args);
  if (f == nullptr) {
    return 1;
  }
  if (fuse_mount(f, argv[2]) != 0) {
    fuse_destroy(f);
    return 1;
  }
  if (fuse_set_signal_handlers(fuse_get_session(f)) != 0) {
    fuse_unmount(f);
    fuse_destroy(f);
    return 1;
  }
  // The mount goes with the mock that started it, however the mock ends. This process takes it off itself before it
  // goes (auto_unmount's watcher alone races whoever next looks at the directory, which then finds a mount whose
  // server is gone), and auto_unmount is what takes it off when this process is killed.
  const auto parent = static_cast<int>(::syscall(SYS_pidfd_open, ::getppid(), 0));
  if (parent >= 0) {
    std::thread([parent, mount_point = std::string(argv[2])] {
      pollfd gone{parent, POLLIN, 0};
      while (::poll(&gone, 1, -1) < 0 && errno == EINTR) {
      }
      static_cast<void>(::umount2(mount_point.c_str(), MNT_DETACH));
      ::_exit(0);
    }).detach();
  }
  const char ready = 1;
  static_cast<void>(::write(ready_fd, &ready, 1));
  ::close(ready_fd);
  fuse_loop_config* config = fuse_loop_cfg_create();
  const int rc = fuse_loop_mt(f, config);
  fuse_loop_cfg_destroy(config);
  fuse_remove_signal_handlers(fuse_get_session(f));
  fuse_unmount(f);
  fuse_destroy(f);
  return rc == 0 ? 0 : 1;
}
