#include "mock_cloud/host_filesystem.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

// The new mount API (open_tree and move_mount since Linux 5.2, mount_setattr since 5.12), called through syscall(2)
// so that a C library without its wrappers builds too. The numbers are the same on every architecture.
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

namespace jobman::mock {

namespace fs = std::filesystem;

namespace {

constexpr unsigned kOpenTreeClone = 1;        // OPEN_TREE_CLONE: a detached copy of the mount tree.
constexpr unsigned kRecursive = 0x8000;       // AT_RECURSIVE: with every mount under it.
constexpr unsigned kMoveFromEmptyPath = 0x4;  // MOVE_MOUNT_F_EMPTY_PATH: the source is the descriptor itself.
constexpr unsigned kMoveToEmptyPath = 0x40;   // MOVE_MOUNT_T_EMPTY_PATH: the target is the descriptor itself.
constexpr std::uint64_t kMountReadOnly = 0x1; // MOUNT_ATTR_RDONLY.

// struct mount_attr, the argument of mount_setattr(2).
struct MountAttributes {
  std::uint64_t attr_set = 0;    // Flags to set.
  std::uint64_t attr_clr = 0;    // Flags to clear.
  std::uint64_t propagation = 0; // Propagation type to set, 0 for none.
  std::uint64_t userns_fd = 0;   // A user namespace for an id-mapped mount (unused).
};

[[noreturn]] void fail(const std::string& what) {
  throw HostEntryError(what + ": " + std::strerror(errno));
}

// A file descriptor of this process, closed when it goes.
class Descriptor {
public:
  explicit Descriptor(int fd = -1) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Descriptor(Descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  // The descriptor's number.
  [[nodiscard]] int get() const { return fd_; }
  // Its /proc/self/fd path: the very file, whatever is mounted over its path since it was opened.
  [[nodiscard]] std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
  int fd_;
};

// Opens `path` (a directory or, with `Kind::any`, a file) as a path descriptor; its last component may not be a
// symbolic link, so a host that replaced a directory of its sandbox with a link cannot send a mount elsewhere.
enum class Kind { directory, any };
Descriptor open_path(const fs::path& path, Kind kind = Kind::directory) {
  const int flags = O_PATH | O_NOFOLLOW | O_CLOEXEC | (kind == Kind::directory ? O_DIRECTORY : 0);
  Descriptor fd(::open(path.c_str(), flags));
  if (fd.get() < 0) {
    fail("cannot open " + path.string());
  }
  return fd;
}

// Whether directory_beneath makes the directories that are missing.
enum class Missing { create, fail };

// The directory `relative` under the directory `base`, walked one component at a time and never through a symbolic
// link (what a host left in its own root cannot redirect a mount), made with `mode` where missing when asked. A walk
// enters whatever is mounted on the way.
Descriptor directory_beneath(const Descriptor& base, const fs::path& relative, mode_t mode, Missing missing,
                             const std::string& shown) {
  Descriptor current(::fcntl(base.get(), F_DUPFD_CLOEXEC, 0));
  if (current.get() < 0) {
    fail("cannot open " + shown);
  }
  for (const auto& part : relative) {
    const auto name = part.string();
    if (name.empty() || name == "." || name == "/") {
      continue;
    }
    if (name == "..") {
      errno = EINVAL;
      fail("cannot open " + shown);
    }
    if (missing == Missing::create) {
      if (::mkdirat(current.get(), name.c_str(), mode) == 0) {
        // The mode as asked, whatever the umask: a host's /tmp is 1777.
        ::fchmodat(current.get(), name.c_str(), mode, 0);
      } else if (errno != EEXIST) {
        fail("cannot create " + shown);
      }
    }
    Descriptor next(::openat(current.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      fail("cannot open " + shown + " (a directory is needed there, not a symbolic link)");
    }
    current = std::move(next);
  }
  return current;
}

// Whether a bind mount may be written through.
enum class Access { read_write, read_only };

// Mounts a copy of the mount tree at `source` (a directory or file, with every mount under it) on `target`,
// read-only throughout when asked. Needs Linux 5.12 (open_tree, move_mount, mount_setattr).
void bind(const Descriptor& source, const Descriptor& target, Access access, const std::string& shown) {
  Descriptor tree(static_cast<int>(
      ::syscall(SYS_open_tree, source.get(), "", kOpenTreeClone | kRecursive | AT_EMPTY_PATH | O_CLOEXEC)));
  if (tree.get() < 0) {
    fail("cannot copy the mounts of " + shown);
  }
  if (access == Access::read_only) {
    MountAttributes attributes;
    attributes.attr_set = kMountReadOnly;
    if (::syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH | kRecursive, &attributes, sizeof attributes) != 0) {
      fail("cannot make " + shown + " read-only");
    }
  }
  if (::syscall(SYS_move_mount, tree.get(), "", target.get(), "", kMoveFromEmptyPath | kMoveToEmptyPath) != 0) {
    fail("cannot mount " + shown);
  }
}

// Writes `text` to the /proc file `path` (uid_map, gid_map, setgroups).
void write_proc(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    const int saved = errno;
    if (fd >= 0) {
      ::close(fd);
    }
    errno = saved;
    fail(std::string("cannot write ") + path);
  }
  ::close(fd);
}

// In a user namespace just made, maps `uid` and `gid` (this process's in the namespace it came from) to themselves.
void map_to_self(uid_t uid, gid_t gid) {
  write_proc("/proc/self/setgroups", "deny");
  write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n");
  write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
}

// Writes `text` to the /proc file `path` without throwing (in a forked child); true when it was all written.
bool write_proc_quietly(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  const bool written = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) {
    ::close(fd);
  }
  return written;
}

// Root moves this process into a new user (and mount) namespace that maps every uid and gid to itself, so that a
// server there (sshd) can switch to any of the host's accounts, which are the same ids on this machine. Mapping more
// than one's own id takes CAP_SETUID in the namespace the new one comes from, which a process loses by entering the
// new one: a child left behind writes the maps. 0, or the errno of what failed.
int unshare_mapping_every_id() {
  std::array<int, 2> go{};
  if (::pipe2(go.data(), O_CLOEXEC) != 0) {
    return errno;
  }
  const pid_t self = ::getpid();
  const pid_t helper = ::fork();
  if (helper < 0) {
    const int saved = errno;
    ::close(go[0]);
    ::close(go[1]);
    return saved;
  }
  if (helper == 0) {
    ::close(go[1]);
    char entered = 0;
    if (::read(go[0], &entered, 1) != 1) {
      ::_exit(1);
    }
    const auto proc = "/proc/" + std::to_string(self);
    const bool mapped = write_proc_quietly(proc + "/uid_map", "0 0 4294967295\n") &&
                        write_proc_quietly(proc + "/gid_map", "0 0 4294967295\n");
    ::_exit(mapped ? 0 : 1);
  }
  ::close(go[0]);
  const int entered = ::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : errno;
  if (entered == 0) {
    const char signal = 1;
    static_cast<void>(::write(go[1], &signal, 1));
  }
  ::close(go[1]);
  int status = 0;
  while (::waitpid(helper, &status, 0) < 0 && errno == EINTR) {
  }
  if (entered != 0) {
    return entered;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EPERM;
}

// Makes `name` in the host's root the symbolic link `target` (as this machine's /bin -> usr/bin), replacing a link
// or an empty directory the host left there.
void link_beneath(const Descriptor& root, const std::string& name, const fs::path& target) {
  std::array<char, 4096> buffer{};
  const auto length = ::readlinkat(root.get(), name.c_str(), buffer.data(), buffer.size());
  if (length >= 0 && std::string(buffer.data(), static_cast<std::size_t>(length)) == target.string()) {
    return;
  }
  if (::unlinkat(root.get(), name.c_str(), 0) != 0) {
    ::unlinkat(root.get(), name.c_str(), AT_REMOVEDIR);
  }
  if (::symlinkat(target.c_str(), root.get(), name.c_str()) != 0 && errno != EEXIST) {
    fail("cannot link /" + name);
  }
}

// True when `path` is `dir` or lies under it (both absolute and normal).
bool within(const fs::path& path, const fs::path& dir) {
  const auto rel = path.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// A directory the host needs from this machine, bound back at its own path.
struct KeptDirectory {
  fs::path path; // Absolute and normal.
  Access access; // Whether the host may write there.
};

// Binds each kept directory under `dir` (the host's / or its /home, which is `dir_path` on the host) at its path.
void bind_kept(const Descriptor& dir, const fs::path& dir_path, const std::vector<KeptDirectory>& kept) {
  for (const auto& keep : kept) {
    if (!within(keep.path, dir_path)) {
      continue;
    }
    const auto target = directory_beneath(dir, keep.path.lexically_relative(dir_path), 0755, Missing::create,
                                          keep.path.string() + " on the host");
    bind(open_path(keep.path), target, keep.access, keep.path.string());
  }
}

} // namespace

bool is_system_directory(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kSystem = {"bin",    "boot", "etc", "lib", "lib32", "lib64",
                                                               "libx32", "sbin", "usr", "var", "nix",   "snap"};
  return std::find(kSystem.begin(), kSystem.end(), name) != kSystem.end();
}

bool valid_host_user(std::string_view user) {
  return !user.empty() && user.size() <= 64 && user.front() != '-' && user.front() != '.' &&
         std::all_of(user.begin(), user.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-';
         });
}

void enter_host_filesystem(const HostFilesystem& host) {
  if (host.homes.empty() && !valid_host_user(host.user)) {
    errno = EINVAL;
    fail("'" + host.user + "' is not a user name");
  }
  std::vector<KeptDirectory> kept;
  for (const auto& dir : host.keep) {
    kept.push_back({fs::absolute(dir).lexically_normal(), Access::read_write});
  }
  for (const auto& dir : host.keep_read_only) {
    kept.push_back({fs::absolute(dir).lexically_normal(), Access::read_only});
  }
  // Outer directories first, so that one kept inside another is bound over it, not under it.
  std::sort(kept.begin(), kept.end(), [](const KeptDirectory& a, const KeptDirectory& b) { return a.path < b.path; });
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (uid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) {
      fail("cannot make a mount namespace");
    }
  } else {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      fail("cannot make a user and mount namespace");
    }
    map_to_self(uid, gid);
  }
  // Nothing mounted here reaches this machine's namespace, whatever propagation / has (systemd makes it shared).
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    fail("cannot make the mounts private");
  }

  // The host's root, a mount of its own (pivot_root needs one), on which the rest is built.
  const auto root_dir = open_path(host.root);
  bind(root_dir, root_dir, Access::read_write, "the host's root " + host.root.string());
  const auto root = open_path(host.root);
  const auto beneath = [&root](const std::string& name, mode_t mode) {
    return directory_beneath(root, name, mode, Missing::create, "/" + name + " on the host");
  };
  // The directories every machine has at the top, the host's own from the start.
  for (const auto& [name, mode] : std::array<std::pair<const char*, mode_t>, 7>{{{"tmp", 01777},
                                                                                 {"mnt", 0755},
                                                                                 {"srv", 0755},
                                                                                 {"opt", 0755},
                                                                                 {"media", 0755},
                                                                                 {"run", 0755},
                                                                                 {"root", 0700}}}) {
    beneath(name, mode);
  }
  for (const auto& [source, name] : {std::pair{host.gcs, "mock-gcs"}, std::pair{host.sandbox, "mock-host"}}) {
    if (!source.empty()) {
      const auto run = directory_beneath(root, "run", 0, Missing::fail, "/run on the host");
      bind(open_path(source),
           directory_beneath(run, name, 0755, Missing::create, std::string("/run/") + name + " on the host"),
           Access::read_write, source.string());
    }
  }
  // This machine's system directories, read-only; the links among them (/bin -> usr/bin) as they are here.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/", ec)) {
    const auto name = entry.path().filename().string();
    if (!is_system_directory(name)) {
      continue;
    }
    if (entry.is_symlink(ec)) {
      link_beneath(root, name, fs::read_symlink(entry.path(), ec));
    } else if (entry.is_directory(ec)) {
      bind(open_path(entry.path()), beneath(name, 0755), Access::read_only, entry.path().string());
    }
  }
  // /dev, with /dev/shm the host's own (a directory of its root that /dev then covers); /proc, with the kernel's
  // settings read-only; /sys read-only.
  const auto dev_mount_point = beneath("dev", 0755);
  const auto own_shm = directory_beneath(dev_mount_point, "shm", 01777, Missing::create, "/dev/shm on the host");
  bind(open_path("/dev"), dev_mount_point, Access::read_write, "/dev");
  if (::access("/dev/shm", F_OK) == 0) {
    bind(own_shm, directory_beneath(root, "dev/shm", 0, Missing::fail, "/dev/shm on the host"), Access::read_write,
         "the host's /dev/shm");
  }
  bind(open_path("/proc"), beneath("proc", 0555), Access::read_write, "/proc");
  bind(open_path("/proc/sys"), directory_beneath(root, "proc/sys", 0, Missing::fail, "/proc/sys on the host"),
       Access::read_only, "/proc/sys");
  if (::access("/proc/sysrq-trigger", F_OK) == 0) {
    const auto proc = directory_beneath(root, "proc", 0, Missing::fail, "/proc on the host");
    Descriptor trigger(::openat(proc.get(), "sysrq-trigger", O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (trigger.get() < 0) {
      fail("cannot open /proc/sysrq-trigger on the host");
    }
    bind(open_path("/proc/sysrq-trigger", Kind::any), trigger, Access::read_only, "/proc/sysrq-trigger");
  }
  bind(open_path("/sys"), beneath("sys", 0755), Access::read_only, "/sys");

  // /home: the host's directory of homes, or a fresh tmpfs holding /home/USER alone; with the kept directories that
  // lie under /home either way.
  const auto home_mount_point = beneath("home", 0755);
  if (!host.homes.empty()) {
    bind(open_path(host.homes), home_mount_point, Access::read_write, "the host's homes " + host.homes.string());
  } else if (::mount("tmpfs", home_mount_point.path().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") != 0) {
    fail("cannot mount a tmpfs on /home");
  }
  const auto homes = directory_beneath(root, "home", 0755, Missing::fail, "/home on the host");
  bind_kept(homes, "/home", kept);
  if (host.homes.empty()) {
    bind(open_path(host.home_source),
         directory_beneath(homes, host.user, 0755, Missing::create, "/home/" + host.user + " on the host"),
         Access::read_write, "the host's home " + host.home_source.string());
  }
  // The host's accounts over this machine's.
  if (!host.accounts.empty()) {
    const auto etc = directory_beneath(root, "etc", 0, Missing::fail, "/etc on the host");
    for (const char* name : {"passwd", "group", "shadow"}) {
      const auto own = host.accounts / name;
      Descriptor target(::openat(etc.get(), name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (target.get() < 0 || ::access(own.c_str(), F_OK) != 0) {
        continue;
      }
      bind(open_path(own, Kind::any), target, Access::read_only, own.string());
    }
  }
  // The other kept directories, at their paths; those under /proc, /dev and /sys are this machine's already.
  std::vector<KeptDirectory> elsewhere;
  std::copy_if(kept.begin(), kept.end(), std::back_inserter(elsewhere), [](const KeptDirectory& keep) {
    return !within(keep.path, "/home") && !within(keep.path, "/proc") && !within(keep.path, "/dev") &&
           !within(keep.path, "/sys");
  });
  bind_kept(root, "/", elsewhere);

  // The host's root becomes /, and this machine's / goes.
  if (::fchdir(root.get()) != 0) {
    fail("cannot enter the host's root");
  }
  if (::syscall(SYS_pivot_root, ".", ".") == 0) {
    if (::umount2(".", MNT_DETACH) != 0) {
      fail("cannot detach this machine's root");
    }
  } else if (errno == EINVAL) {
    // This machine's / is the initial ramfs, which cannot be pivoted away from: the host's root is moved over it.
    if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0 || ::chroot(".") != 0) {
      fail("cannot make the host's root /");
    }
  } else {
    fail("cannot make the host's root /");
  }
  if (::chdir("/") != 0) {
    fail("cannot enter /");
  }
  // Root gets a user namespace of its own last: the mounts made above are locked in it (none can be made writable,
  // moved or unmounted) and this machine's processes, with their /proc/PID/root, are out of its reach. Where this
  // machine has no user namespaces for root, the mounts stay read-only but unlocked.
  if (uid == 0 && host.every_user) {
    if (const int failed = unshare_mapping_every_id(); failed != 0) {
      errno = failed;
      fail("cannot make a user namespace mapping every id");
    }
  } else if (uid == 0) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) {
      map_to_self(uid, gid);
    } else if (errno != EPERM && errno != EINVAL && errno != ENOSPC && errno != EUSERS) {
      fail("cannot make a user namespace");
    }
  }
  if (!host.hostname.empty()) {
    if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(host.hostname.data(), host.hostname.size()) != 0) {
      fail("cannot name the host " + host.hostname);
    }
  }
  ::setenv(kOwnFilesystemVariable, "1", 1);
  const auto home = host.homes.empty() ? "/home/" + host.user : std::string("/");
  if (::chdir(home.c_str()) != 0) {
    fail("cannot enter " + home);
  }
}

} // namespace jobman::mock
