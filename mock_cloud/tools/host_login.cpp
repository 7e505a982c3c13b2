// jobman-mock-host-login: how the mock's gcloud enters a worker host. It moves the command onto the host's own
// filesystem (mock_cloud/host_filesystem.hpp: the host's root as /, this machine's system directories read-only,
// /home/USER the host's home, the mock's directories bound back at their paths), then execs the command there:
//
//   jobman-mock-host-login --root DIR --home-source DIR --user USER [--keep DIR]... [--keep-read-only DIR]...
//                          [--hostname NAME] -- PROGRAM [ARG...]
//   jobman-mock-host-login --root DIR --homes DIR [--accounts DIR] [--every-user] [--hostname NAME] [--keep DIR]...
//                          [--keep-read-only DIR]... -- PROGRAM [ARG...]
//   jobman-mock-host-login --probe
//
// Every descendant of the command, however it detaches, stays on that filesystem, so a workload launched under setsid
// and nohup keeps the host's /mnt and home after its ssh session ends, and finds there what an earlier session made.
//
// The second form is how the host's sshd starts: /home is the host's directory of homes, /etc/passwd, group and
// shadow are the host's own accounts (--accounts), and every id is mapped so that sshd can switch to them.
//
// --probe enters a host made of temporary directories and checks that files written at /home/USER/... and /mnt/...
// land in them and that /usr cannot be written: exit 0 when this machine can give hosts filesystems of their own,
// else 1 with the reason on stderr.
//
// A program of its own, rather than a hook between fork and exec in jobman's process module: it runs after exec, in
// a fresh single-threaded process, so it may allocate and report errors freely, and the process module keeps its
// async-signal-safe contract. Setup failures exit 255, as ssh does when it cannot open a session.
#include "mock_cloud/host_filesystem.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int kSetupFailure = 255;

// Creates `path` as a file; false, with the reason on stderr, when it cannot.
bool create_file(const char* path) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "cannot create %s on the probe's host: %s\n", path, std::strerror(errno));
    return false;
  }
  ::close(fd);
  return true;
}

// In the probe's child, on the host: the files land, and /usr cannot be written.
bool probe_on_host() {
  if (!create_file("/home/jobman-probe/probe") || !create_file("/mnt/probe")) {
    return false;
  }
  if (::mkdir("/usr/jobman-probe", 0700) == 0) {
    ::rmdir("/usr/jobman-probe");
    std::fprintf(stderr, "the probe's host could write this machine's /usr\n");
    return false;
  }
  return true;
}

// --probe: a host made of a temporary directory, entered in a child, and its files found where they belong.
int probe() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/jobman-mock-probe-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "cannot create a directory in %s: %s\n", pattern.c_str(), std::strerror(errno));
    return 1;
  }
  const fs::path dir = pattern;
  std::error_code ec;
  fs::create_directory(dir / "root", ec);
  fs::create_directory(dir / "home", ec);
  bool seen = false;
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      jobman::mock::HostFilesystem host;
      host.root = dir / "root";
      host.home_source = dir / "home";
      host.user = "jobman-probe";
      jobman::mock::enter_host_filesystem(host);
      ::_exit(probe_on_host() ? 0 : 1);
    } catch (const jobman::mock::HostEntryError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      ::_exit(1);
    }
  }
  int status = 0;
  if (child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    seen = fs::exists(dir / "home" / "probe", ec) && fs::exists(dir / "root" / "mnt" / "probe", ec);
    if (!seen) {
      std::fprintf(stderr, "files written on the probe's host did not land in its directories\n");
    }
  }
  fs::remove_all(dir, ec);
  return seen ? 0 : 1;
}

int usage() {
  std::fprintf(stderr, "usage: jobman-mock-host-login --root DIR (--home-source DIR --user USER | --homes DIR "
                       "[--accounts DIR] [--every-user]) [--hostname NAME] [--keep DIR]... [--keep-read-only DIR]... "
                       "-- PROGRAM [ARG...]\n       jobman-mock-host-login --probe\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--probe") {
    return probe();
  }
  jobman::mock::HostFilesystem host;
  std::size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--every-user") {
      host.every_user = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      return usage();
    }
    if (args[i] == "--root") {
      host.root = args[++i];
    } else if (args[i] == "--home-source") {
      host.home_source = args[++i];
    } else if (args[i] == "--user") {
      host.user = args[++i];
    } else if (args[i] == "--homes") {
      host.homes = args[++i];
    } else if (args[i] == "--accounts") {
      host.accounts = args[++i];
    } else if (args[i] == "--gcs") {
      host.gcs = args[++i];
    } else if (args[i] == "--sandbox") {
      host.sandbox = args[++i];
    } else if (args[i] == "--hostname") {
      host.hostname = args[++i];
    } else if (args[i] == "--keep") {
      host.keep.emplace_back(args[++i]);
    } else if (args[i] == "--keep-read-only") {
      host.keep_read_only.emplace_back(args[++i]);
    } else {
      return usage();
    }
  }
  const bool one_home = !host.home_source.empty() && !host.user.empty();
  if (host.root.empty() || one_home == !host.homes.empty() || i + 1 >= args.size()) {
    return usage();
  }
  const pid_t parent = ::getppid();
  try {
    jobman::mock::enter_host_filesystem(host);
  } catch (const jobman::mock::HostEntryError& e) {
    std::fprintf(stderr, "jobman-mock-host-login: %s\n", e.what());
    return kSetupFailure;
  }
  // A host's sshd goes with the mock that started it, however the mock ends (SIGKILL too): its connections drop as
  // the hosts lose power. (sshd's process titles overwrite the environment that marks a host's processes, so the
  // mock's reaper could not find it.) Set last: a change of credentials would clear it.
  if (!host.homes.empty() && (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)) {
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
