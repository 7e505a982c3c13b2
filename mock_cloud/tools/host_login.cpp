// jobman-mock-host-login: how the mock's gcloud enters a worker host. It gives the command a mount namespace of its
// own in which /home is a fresh tmpfs and /home/USER is the host's sandbox home, then execs the command there:
//
//   jobman-mock-host-login --home-source DIR --user USER [--keep DIR]... -- PROGRAM [ARG...]
//   jobman-mock-host-login --probe
//
// Every descendant of the command, however it detaches, stays in that namespace, so a workload launched under
// setsid and nohup keeps its home after its ssh session ends. Other hosts' homes and this machine's /home are not
// visible there; the mock's own directories under /home that a host needs (its sandbox, the buckets, the tools) are
// bound back at their own paths (--keep). As root only the mount namespace is new; any other user gets a user
// namespace too, mapping its own uid and gid to themselves, so the command runs as that user, without privileges.
//
// --probe makes the same namespace with a temporary directory as the home and checks that a file written at
// /home/USER/... lands in it: exit 0 when this machine supports per-host homes, else 1 with the reason on stderr.
//
// A program of its own, rather than a hook between fork and exec in jobman's process module: it runs after exec, in
// a fresh single-threaded process, so it may allocate and report errors freely, and the process module keeps its
// async-signal-safe contract. Setup failures exit 255, as ssh does when it cannot open a session.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sched.h>
#include <string>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int kSetupFailure = 255;

// A setup step that failed: its description and errno.
struct LoginError {
  std::string what;
};

[[noreturn]] void fail(const std::string& what) {
  throw LoginError{what + ": " + std::strerror(errno)};
}

// Writes `text` to the /proc file `path` (uid_map, gid_map, setgroups).
void write_proc(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    fail(std::string("cannot write ") + path);
  }
  ::close(fd);
}

// A user name that is one path component: letters, digits, '.', '_' and '-', not starting with '-' or '.'.
bool valid_user(const std::string& user) {
  if (user.empty() || user.size() > 64 || user.front() == '-' || user.front() == '.') {
    return false;
  }
  for (char c : user) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

// Creates `dir` and its missing parents (mode 0755) inside the fresh /home.
void make_dirs(const fs::path& dir) {
  std::string path;
  for (const auto& part : dir) {
    if (part == "/") {
      path = "/";
      continue;
    }
    path += (path.size() > 1 ? "/" : "") + part.string();
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      fail("cannot create " + path);
    }
  }
}

// Binds the directory open as `fd` at `target`.
void bind_fd(int fd, const fs::path& target) {
  const auto source = "/proc/self/fd/" + std::to_string(fd);
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    fail("cannot bind a directory at " + target.string());
  }
}

// Opens `dir` (which must be a directory) as a path descriptor that survives the mounts over /home.
int open_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fail("cannot open " + dir.string());
  }
  return fd;
}

// True when `path` is /home or lies under it.
bool under_home(const fs::path& path) {
  const auto text = path.lexically_normal().string();
  return text == "/home" || text.starts_with("/home/");
}

// Enters a new mount namespace (and, unless root, a user namespace mapping this user to itself) in which /home is a
// fresh tmpfs, the `keep` directories are bound back at their paths and /home/USER is `home_source`.
void enter(const fs::path& home_source, const std::string& user, const std::vector<fs::path>& keep) {
  if (!valid_user(user)) {
    errno = EINVAL;
    fail("'" + user + "' is not a user name");
  }
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
    write_proc("/proc/self/setgroups", "deny");
    write_proc("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n");
    write_proc("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
  }
  // Nothing mounted here reaches this machine's namespace, whatever propagation / has (systemd makes it shared).
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    fail("cannot make the mounts private");
  }
  const int home_fd = open_dir(home_source);
  std::vector<std::pair<int, fs::path>> kept;
  for (const auto& dir : keep) {
    if (under_home(dir)) {
      kept.emplace_back(open_dir(dir), dir.lexically_normal());
    }
  }
  if (::mount("tmpfs", "/home", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") != 0) {
    fail("cannot mount a tmpfs on /home");
  }
  for (const auto& [fd, dir] : kept) {
    make_dirs(dir);
    bind_fd(fd, dir);
    ::close(fd);
  }
  const fs::path home = fs::path("/home") / user;
  make_dirs(home);
  bind_fd(home_fd, home);
  ::close(home_fd);
  if (::chdir(home.c_str()) != 0) {
    fail("cannot enter " + home.string());
  }
}

// --probe: the namespace with a temporary home, and a file written through /home/USER found in it.
int probe() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/jobman-mock-probe-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "cannot create a directory in %s: %s\n", pattern.c_str(), std::strerror(errno));
    return 1;
  }
  const fs::path source = pattern;
  bool seen = false;
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      enter(source, "jobman-probe", {});
      const int fd = ::open("/home/jobman-probe/probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      ::_exit(fd >= 0 ? 0 : 1);
    } catch (const LoginError& e) {
      std::fprintf(stderr, "%s\n", e.what.c_str());
      ::_exit(1);
    }
  }
  int status = 0;
  if (child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::error_code ec;
    seen = fs::exists(source / "probe", ec);
    if (!seen) {
      std::fprintf(stderr, "a file written at /home/jobman-probe did not land in the host's directory\n");
    }
  }
  std::error_code ec;
  fs::remove_all(source, ec);
  return seen ? 0 : 1;
}

int usage() {
  std::fprintf(stderr, "usage: jobman-mock-host-login --home-source DIR --user USER [--keep DIR]... -- PROGRAM "
                       "[ARG...]\n       jobman-mock-host-login --probe\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--probe") {
    return probe();
  }
  fs::path home_source;
  std::string user;
  std::vector<fs::path> keep;
  std::size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    if (i + 1 >= args.size()) {
      return usage();
    }
    if (args[i] == "--home-source") {
      home_source = args[++i];
    } else if (args[i] == "--user") {
      user = args[++i];
    } else if (args[i] == "--keep") {
      keep.emplace_back(args[++i]);
    } else {
      return usage();
    }
  }
  if (home_source.empty() || user.empty() || i + 1 >= args.size()) {
    return usage();
  }
  try {
    enter(home_source, user, keep);
  } catch (const LoginError& e) {
    std::fprintf(stderr, "jobman-mock-host-login: %s\n", e.what.c_str());
    return kSetupFailure;
  }
  std::vector<char*> command;
  for (std::size_t k = i + 1; k < args.size(); ++k) {
    command.push_back(argv[k + 1]);
  }
  command.push_back(nullptr);
  ::execvp(command[0], command.data());
  std::fprintf(stderr, "jobman-mock-host-login: cannot run %s: %s\n", command[0], std::strerror(errno));
  return 127;
}
