#include "jobman/util/process.hpp"

#include "jobman/util/error.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <spawn.h>
#include <stdexcept>
#include <string_view>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ; // NOLINT(readability-redundant-declaration): the child's environment replaces it before exec.

namespace jobman::util {

namespace detail {

// One standard stream as the child sets it up: what to open (a path, with its flags) or which descriptor to take.
struct StreamPlan {
  Stream::Kind kind = Stream::Kind::inherit;
  std::string path; // For null and file.
  int flags = 0;
  mode_t permissions = 0600;
  int fd = -1; // For descriptor; for pipe, the child's end once the pipe is made.
};

// Everything the child needs, made before fork (see the comment in process.hpp): after fork the child only reads it.
struct ProcessPlan {
  ProcessPlan(const ProcessBuilder& builder, bool pipes_allowed);

  std::vector<char*> argv; // Pointing into the builder's arguments: a plan lives only while its builder does.
  std::vector<std::string> env_text;
  std::vector<char*> envp; // Empty: this process's environment.
  std::string program;
  bool search_path = false;
  std::string directory;
  std::array<StreamPlan, 3> streams;
  ProcessGroup group;
  bool controlling_terminal;
  std::vector<int> keep_open;
  int parent_death_signal;
  std::vector<int> default_signals;
  bool reset_signals;
  int setup_failure_status;
};

} // namespace detail

namespace {

using Plan = detail::ProcessPlan;

[[noreturn]] void fail(const char* what, int error) {
  throw Error(std::string(what) + ": " + std::strerror(error));
}

// What kept a child from running its program: an errno, and whether it was the exec itself.
struct Failure {
  int error = 0;
  bool exec = false;
};

// Moves `fd` to a number above the standard streams (as a close-on-exec copy), so that setting up stdin, stdout and
// stderr cannot overwrite it. Async-signal-safe.
int above_standard(int fd) noexcept {
  if (fd < 0 || fd > STDERR_FILENO) {
    return fd;
  }
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  return moved < 0 ? fd : moved;
}

// In the child (or, for exec(), this process): its process group or session, and the parent-death signal.
// Async-signal-safe.
Failure enter_group(const Plan& plan, pid_t parent) noexcept {
  if (plan.group == ProcessGroup::own) {
    ::setpgid(0, 0);
  } else if (plan.group == ProcessGroup::new_session) {
    ::setsid();
  }
  if (plan.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, plan.parent_death_signal);
    // The parent may have ended before the signal was asked for.
    if (::getppid() != parent) {
      return {ESRCH, false};
    }
  }
  return {};
}

// In the child (or, for exec(), this process): the signals, the standard streams, the descriptors kept, the
// directory, then the program. Returns only when something failed. Async-signal-safe.
Failure become(const Plan& plan) noexcept {
  if (plan.reset_signals) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    for (const int signal : plan.default_signals) {
      ::sigaction(signal, &default_action, nullptr);
    }
  }
  // A thread that waits for signals (the daemon's, with sigwait) blocks them; a program must not inherit that, or
  // a SIGTERM meant to stop it (and, through the mock's ssh, its workload) would wait forever.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  std::array<int, 3> source = {-1, -1, -1};
  std::array<bool, 3> opened = {false, false, false};
  for (std::size_t i = 0; i < source.size(); ++i) {
    const auto& stream = plan.streams[i];
    switch (stream.kind) {
    case Stream::Kind::inherit:
    case Stream::Kind::output: break;
    case Stream::Kind::pipe:
    case Stream::Kind::descriptor: source[i] = stream.fd; break;
    case Stream::Kind::null:
    case Stream::Kind::file:
      source[i] = ::open(stream.path.c_str(), stream.flags | O_CLOEXEC, stream.permissions);
      if (source[i] < 0) {
        return {errno, false};
      }
      opened[i] = true;
      break;
    }
  }
  // A source that is itself a standard stream's number (this process's were closed) is moved out of the way first.
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] >= 0 && source[i] != static_cast<int>(i)) {
      source[i] = above_standard(source[i]);
    }
  }
  for (std::size_t i = 0; i < source.size(); ++i) {
    const int target = static_cast<int>(i);
    if (source[i] == target) {
      // dup2 onto itself would leave close-on-exec set.
      if (::fcntl(target, F_SETFD, 0) != 0) {
        return {errno, false};
      }
    } else if (source[i] >= 0) {
      if (::dup2(source[i], target) < 0) {
        return {errno, false};
      }
      if (opened[i]) {
        ::close(source[i]);
      }
    }
  }
  if (plan.streams[STDERR_FILENO].kind == Stream::Kind::output && ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) {
    return {errno, false};
  }
  if (plan.controlling_terminal && ::ioctl(STDIN_FILENO, TIOCSCTTY, 0) != 0) {
    return {errno, false};
  }
  for (const int fd : plan.keep_open) {
    if (::fcntl(fd, F_SETFD, 0) != 0) {
      return {errno, false};
    }
  }
  if (!plan.directory.empty() && ::chdir(plan.directory.c_str()) != 0) {
    return {errno, false};
  }
  // With an environment of its own, environ is replaced so that execvp also looks the program up on its PATH.
  if (!plan.envp.empty()) {
    environ = const_cast<char**>(plan.envp.data()); // NOLINT: environ's type predates const.
  }
  if (plan.search_path) {
    ::execvp(plan.program.c_str(), plan.argv.data());
  } else {
    ::execv(plan.program.c_str(), plan.argv.data());
  }
  return {errno, true};
}

// The file posix_spawn runs for the plan: its program when that names a path, else the program found in the
// directories of the child's PATH (its own environment's, else this process's). Empty when there is none (or no
// PATH): the fork path then runs execvp's lookup and reports what it found.
std::string program_file(const Plan& plan) {
  if (!plan.search_path) {
    return plan.program;
  }
  std::optional<std::string_view> path;
  if (plan.envp.empty()) {
    if (const char* value = ::getenv("PATH"); value != nullptr) {
      path = value;
    }
  } else {
    for (const char* entry : plan.envp) {
      if (entry != nullptr && std::string_view(entry).starts_with("PATH=")) {
        path = std::string_view(entry).substr(5);
      }
    }
  }
  return path ? find_in_path(plan.program, *path) : std::string();
}

// Starts the plan's child with posix_spawn, which shares this process's memory with the child until its exec instead
// of copying the page tables as fork does: a large, multi-threaded parent (the daemon, starting an ssh per worker)
// pays for a fork in copy-on-write faults and cross-CPU TLB flushes in both processes. Only for the plans it can carry
// out: no parent-death signal, terminal, descriptor kept or held start, and no source of a standard stream that is
// itself one. Returns the child's pid once its program runs, or nullopt (nothing started) when the plan needs the
// fork path or posix_spawn failed: the fork path then starts it, or reports why it cannot run.
std::optional<pid_t> spawn_quickly(const Plan& plan) {
  if (plan.parent_death_signal != 0 || plan.controlling_terminal || !plan.keep_open.empty()) {
    return std::nullopt;
  }
  for (const auto& stream : plan.streams) {
    if ((stream.kind == Stream::Kind::pipe || stream.kind == Stream::Kind::descriptor) && stream.fd <= STDERR_FILENO) {
      return std::nullopt;
    }
  }
  const auto file = program_file(plan);
  if (file.empty()) {
    return std::nullopt;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  if (::posix_spawn_file_actions_init(&actions) != 0) {
    return std::nullopt;
  }
  if (::posix_spawnattr_init(&attributes) != 0) {
    ::posix_spawn_file_actions_destroy(&actions);
    return std::nullopt;
  }
  int error = 0;
  const auto check = [&error](int result) {
    if (error == 0) {
      error = result;
    }
  };
  for (std::size_t i = 0; i < plan.streams.size(); ++i) {
    const auto& stream = plan.streams[i];
    const int target = static_cast<int>(i);
    switch (stream.kind) {
    case Stream::Kind::inherit:
    case Stream::Kind::output: break;
    case Stream::Kind::pipe:
    case Stream::Kind::descriptor: check(::posix_spawn_file_actions_adddup2(&actions, stream.fd, target)); break;
    case Stream::Kind::null:
    case Stream::Kind::file:
      check(
          ::posix_spawn_file_actions_addopen(&actions, target, stream.path.c_str(), stream.flags, stream.permissions));
      break;
    }
  }
  if (plan.streams[STDERR_FILENO].kind == Stream::Kind::output) {
    check(::posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO));
  }
  if (!plan.directory.empty()) {
    check(::posix_spawn_file_actions_addchdir_np(&actions, plan.directory.c_str()));
  }
  // As in become(): no signal blocked, and the plan's signals at their default disposition.
  short flags = POSIX_SPAWN_SETSIGMASK;
  sigset_t none;
  sigemptyset(&none);
  check(::posix_spawnattr_setsigmask(&attributes, &none));
  if (plan.reset_signals) {
    sigset_t defaults;
    sigemptyset(&defaults);
    for (const int signal : plan.default_signals) {
      sigaddset(&defaults, signal);
    }
    check(::posix_spawnattr_setsigdefault(&attributes, &defaults));
    flags |= POSIX_SPAWN_SETSIGDEF;
  }
  if (plan.group == ProcessGroup::own) {
    flags |= POSIX_SPAWN_SETPGROUP;
    check(::posix_spawnattr_setpgroup(&attributes, 0));
  } else if (plan.group == ProcessGroup::new_session) {
    flags |= POSIX_SPAWN_SETSID;
  }
  check(::posix_spawnattr_setflags(&attributes, flags));
  pid_t pid = -1;
  if (error == 0) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): posix_spawn's signature predates const.
    error = ::posix_spawn(&pid, file.c_str(), &actions, &attributes, plan.argv.data(),
                          plan.envp.empty() ? environ : const_cast<char**>(plan.envp.data()));
  }
  ::posix_spawnattr_destroy(&attributes);
  ::posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return std::nullopt;
  }
  return pid;
}

// Reads the errno a child reports when it fails before its program runs; 0 when the report closed (at its exec).
int read_report(int fd) {
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(fd, &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  return got == static_cast<ssize_t>(sizeof error) ? error : 0;
}

// Closes every open descriptor of `fds`.
template <std::size_t N> void close_all(std::array<int, N>& fds) {
  for (int& fd : fds) {
    close_fd(fd);
  }
}

} // namespace

Stream Stream::file(const std::filesystem::path& path, FileMode mode, unsigned permissions) {
  Stream stream(Kind::file);
  stream.path_ = path.string();
  stream.mode_ = mode;
  stream.permissions_ = permissions;
  return stream;
}

Stream Stream::descriptor(int fd) {
  Stream stream(Kind::descriptor);
  stream.fd_ = fd;
  return stream;
}

ProcessBuilder::ProcessBuilder(std::vector<std::string> argv) : argv_(std::move(argv)) {
  if (argv_.empty()) {
    throw std::invalid_argument("a process needs at least its program in argv");
  }
}

ProcessBuilder& ProcessBuilder::program(std::string program) {
  program_ = std::move(program);
  return *this;
}

ProcessBuilder& ProcessBuilder::args(const std::vector<std::string>& more) {
  argv_.insert(argv_.end(), more.begin(), more.end());
  return *this;
}

ProcessBuilder& ProcessBuilder::env(const std::string& name, const std::string& value) {
  env_.emplace_back(name, value);
  return *this;
}

ProcessBuilder& ProcessBuilder::env(const std::vector<std::pair<std::string, std::string>>& variables) {
  env_.insert(env_.end(), variables.begin(), variables.end());
  return *this;
}

ProcessBuilder& ProcessBuilder::env(const std::map<std::string, std::string>& variables) {
  env_.insert(env_.end(), variables.begin(), variables.end());
  return *this;
}

ProcessBuilder& ProcessBuilder::unset_env(const std::string& name) {
  unset_.push_back(name);
  return *this;
}

ProcessBuilder& ProcessBuilder::clear_env() {
  clear_env_ = true;
  return *this;
}

ProcessBuilder& ProcessBuilder::directory(std::filesystem::path dir) {
  directory_ = std::move(dir);
  return *this;
}

ProcessBuilder& ProcessBuilder::input(Stream stream) {
  if (stream.kind() == Stream::Kind::output) {
    throw std::invalid_argument("stdin cannot go where stdout goes");
  }
  input_ = std::move(stream);
  return *this;
}

ProcessBuilder& ProcessBuilder::output(Stream stream) {
  if (stream.kind() == Stream::Kind::output) {
    throw std::invalid_argument("stdout cannot go where stdout goes");
  }
  output_ = std::move(stream);
  return *this;
}

ProcessBuilder& ProcessBuilder::error(Stream stream) {
  error_ = std::move(stream);
  return *this;
}

ProcessBuilder& ProcessBuilder::group(ProcessGroup group) {
  group_ = group;
  return *this;
}

ProcessBuilder& ProcessBuilder::controlling_terminal() {
  controlling_terminal_ = true;
  return *this;
}

ProcessBuilder& ProcessBuilder::keep_open(int fd) {
  keep_open_.push_back(fd);
  return *this;
}

ProcessBuilder& ProcessBuilder::parent_death_signal(int signal) {
  parent_death_signal_ = signal;
  return *this;
}

ProcessBuilder& ProcessBuilder::default_signals(std::vector<int> signals) {
  default_signals_ = std::move(signals);
  reset_signals_ = true;
  return *this;
}

ProcessBuilder& ProcessBuilder::setup_failure_status(int status) {
  setup_failure_status_ = status;
  return *this;
}

ProcessBuilder& ProcessBuilder::held() {
  held_ = true;
  return *this;
}

namespace {

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

} // namespace

detail::ProcessPlan::ProcessPlan(const ProcessBuilder& builder, bool pipes_allowed)
    : program(builder.program_.empty() ? builder.argv_.front() : builder.program_),
      directory(builder.directory_.string()), group(builder.group_),
      controlling_terminal(builder.controlling_terminal_), keep_open(builder.keep_open_),
      parent_death_signal(builder.parent_death_signal_), default_signals(builder.default_signals_),
      reset_signals(builder.reset_signals_), setup_failure_status(builder.setup_failure_status_) {
  argv.reserve(builder.argv_.size() + 1);
  for (const auto& arg : builder.argv_) {
    argv.push_back(const_cast<char*>(arg.c_str())); // NOLINT: exec's signature predates const.
  }
  argv.push_back(nullptr);
  search_path = program.find('/') == std::string::npos;
  if (builder.clear_env_ || !builder.env_.empty() || !builder.unset_.empty()) {
    // The variables set, in the order first set, each with its last value.
    std::vector<std::string> names;
    std::vector<std::string> values;
    for (const auto& [name, value] : builder.env_) {
      const auto at = std::find(names.begin(), names.end(), name);
      if (at == names.end()) {
        names.push_back(name);
        values.push_back(value);
      } else {
        values[static_cast<std::size_t>(at - names.begin())] = value;
      }
    }
    // This process's variables are pointed at, not copied: a thousand children started at once (one per streamed
    // worker) would otherwise each hold a copy of the whole environment. glibc never frees a variable's text while
    // the process runs (setenv and unsetenv leave the old one in place), so the pointers stay valid.
    if (!builder.clear_env_) {
      for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string_view text(*entry);
        const auto name = text.substr(0, text.find('='));
        if (!contains(names, name) && !contains(builder.unset_, name)) {
          envp.push_back(*entry);
        }
      }
    }
    env_text.reserve(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      env_text.push_back(names[i] + "=" + values[i]);
    }
    for (auto& entry : env_text) {
      envp.push_back(entry.data());
    }
    envp.push_back(nullptr);
  }
  const std::array<const Stream*, 3> given = {&builder.input_, &builder.output_, &builder.error_};
  for (std::size_t i = 0; i < given.size(); ++i) {
    const Stream& stream = *given[i];
    auto& out = streams[i];
    out.kind = stream.kind();
    switch (stream.kind()) {
    case Stream::Kind::inherit:
    case Stream::Kind::output: break;
    case Stream::Kind::null:
      out.path = "/dev/null";
      out.flags = i == STDIN_FILENO ? O_RDONLY : O_WRONLY;
      break;
    case Stream::Kind::file:
      out.path = stream.path();
      out.flags =
          i == STDIN_FILENO ? O_RDONLY : O_WRONLY | O_CREAT | (stream.mode() == FileMode::append ? O_APPEND : O_TRUNC);
      out.permissions = static_cast<mode_t>(stream.permissions());
      break;
    case Stream::Kind::descriptor: out.fd = stream.fd(); break;
    case Stream::Kind::pipe:
      if (!pipes_allowed) {
        throw std::invalid_argument("a detached child or exec cannot have a pipe as a standard stream");
      }
      break;
    }
  }
}

Child ProcessBuilder::spawn() const {
  Plan plan(*this, true);

  // fds[2 * i] and fds[2 * i + 1]: the pipe of stream i (read end, write end); then the report and the gate.
  std::array<int, 10> fds{};
  fds.fill(-1);
  constexpr std::size_t kReport = 6;
  constexpr std::size_t kGate = 8;
  const auto make_pipe = [&fds](std::size_t at) {
    if (::pipe2(&fds[at], O_CLOEXEC) != 0) {
      const int error = errno;
      close_all(fds);
      fail("pipe", error);
    }
  };
  for (std::size_t i = 0; i < 3; ++i) {
    if (plan.streams[i].kind == Stream::Kind::pipe) {
      make_pipe(2 * i);
      // The child reads its stdin and writes the others.
      plan.streams[i].fd = fds[2 * i + (i == STDIN_FILENO ? 0 : 1)];
    }
  }
  // The child of `pid`, with this process's ends of its pipes (the child's ends closed here).
  const auto child_of = [&plan, &fds](pid_t pid) {
    Child child;
    child.pid = pid;
    for (std::size_t i = 0; i < 3; ++i) {
      if (plan.streams[i].kind == Stream::Kind::pipe) {
        const std::size_t mine = 2 * i + (i == STDIN_FILENO ? 1 : 0);
        const std::size_t theirs = 2 * i + (i == STDIN_FILENO ? 0 : 1);
        close_fd(fds[theirs]);
        (i == STDIN_FILENO ? child.in_fd : i == STDOUT_FILENO ? child.out_fd : child.err_fd) = fds[mine];
      }
    }
    return child;
  };
  if (!held_) {
    if (const auto quick = spawn_quickly(plan)) {
      return child_of(*quick);
    }
  }
  make_pipe(kReport);
  if (held_) {
    make_pipe(kGate);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    close_all(fds);
    fail("fork", error);
  }
  if (pid == 0) {
    const int report = above_standard(fds[kReport + 1]);
    const int gate = above_standard(fds[kGate]);
    Failure failure = enter_group(plan, parent);
    if (failure.error == 0 && gate >= 0) {
      // Held: wait for the parent's go; a gate closed without one ends the child.
      ::close(fds[kGate + 1]);
      char go = 0;
      ssize_t got = 0;
      do {
        got = ::read(gate, &go, 1);
      } while (got < 0 && errno == EINTR);
      if (got != 1) {
        ::_exit(plan.setup_failure_status);
      }
    }
    if (failure.error == 0) {
      failure = become(plan);
    }
    (void)!::write(report, &failure.error, sizeof failure.error);
    ::_exit(failure.exec ? 127 : plan.setup_failure_status);
  }
  if (group_ == ProcessGroup::own) {
    // Also here, so that the group exists when spawn returns, whichever process runs first.
    ::setpgid(pid, pid);
  }
  Child child = child_of(pid);
  close_fd(fds[kReport + 1]);
  if (held_) {
    close_fd(fds[kGate]);
    child.gate_fd = fds[kGate + 1];
    child.report_fd = fds[kReport];
    return child;
  }
  child.exec_error = read_report(fds[kReport]);
  close_fd(fds[kReport]);
  return child;
}

pid_t ProcessBuilder::spawn_detached() const {
  if (held_) {
    throw std::invalid_argument("a detached child cannot be held");
  }
  const Plan plan(*this, false);

  std::array<int, 2> pid_pipe{-1, -1};
  if (::pipe2(pid_pipe.data(), O_CLOEXEC) != 0) {
    fail("pipe", errno);
  }
  const pid_t first = ::fork();
  if (first < 0) {
    const int error = errno;
    close_all(pid_pipe);
    fail("fork", error);
  }
  if (first == 0) {
    // First child: a new session, then the program as its child, so that it is nobody's zombie.
    ::setsid();
    const pid_t program = ::fork();
    if (program != 0) {
      const long value = program;
      (void)!::write(pid_pipe[1], &value, sizeof value);
      ::_exit(program > 0 ? 0 : 1);
    }
    const Failure failure = become(plan);
    ::_exit(failure.exec ? 127 : plan.setup_failure_status);
  }
  close_fd(pid_pipe[1]);
  long program = 0;
  ssize_t got = 0;
  do {
    got = ::read(pid_pipe[0], &program, sizeof program);
  } while (got < 0 && errno == EINTR);
  close_fd(pid_pipe[0]);
  wait_exit(first);
  return got == static_cast<ssize_t>(sizeof program) && program > 0 ? static_cast<pid_t>(program) : -1;
}

int ProcessBuilder::exec() const {
  if (held_) {
    throw std::invalid_argument("exec cannot be held");
  }
  const Plan plan(*this, false);
  char** const saved = environ;
  Failure failure = enter_group(plan, ::getppid());
  if (failure.error == 0) {
    failure = become(plan);
  }
  environ = saved;
  return failure.error;
}

int release(Child& child) {
  if (child.gate_fd >= 0) {
    (void)!::write(child.gate_fd, "x", 1);
    close_fd(child.gate_fd);
  }
  if (child.report_fd >= 0) {
    child.exec_error = read_report(child.report_fd);
    close_fd(child.report_fd);
  }
  return child.exec_error;
}

ExitStatus wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return {};
    }
  }
  if (WIFSIGNALED(status)) {
    return {128 + WTERMSIG(status), true};
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, false};
}

int wait_exit(pid_t pid) {
  return wait_child(pid).code;
}

std::string find_in_path(const std::string& program, std::string_view path) {
  std::size_t from = 0;
  for (;;) {
    const auto colon = path.find(':', from);
    const auto dir = path.substr(from, colon == std::string_view::npos ? std::string_view::npos : colon - from);
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + program;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) {
      return "";
    }
    from = colon + 1;
  }
}

void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

} // namespace jobman::util
