// `docker run`: a container is its command run on the host itself, in a process group of its own, with the
// signals docker's sig-proxy forwards.
#include "docker.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <system_error>
#include <termios.h>
#include <unistd.h>

extern char** environ;

namespace {

// The process `docker run` waits for and forwards signals to (0 when none).
volatile std::sig_atomic_t g_container_pid = 0;

} // namespace

// Forwards a signal `docker run` received to its container, as docker's sig-proxy does.
extern "C" void forward_to_container(int signal) {
  const int saved = errno;
  const pid_t pid = g_container_pid;
  if (pid > 0) {
    ::kill(pid, signal);
  }
  errno = saved;
}

namespace jobman::mock::tools::docker {

namespace {

// The flags `docker run` understands.
constexpr std::array kRunFlags = {OptionSpec{"rm", 0, false},
                                  OptionSpec{"name", 0, true},
                                  OptionSpec{"env", 'e', true},
                                  OptionSpec{"env-file", 0, true},
                                  OptionSpec{"volume", 'v', true},
                                  OptionSpec{"workdir", 'w', true},
                                  OptionSpec{"privileged", 0, false},
                                  OptionSpec{"network", 0, true},
                                  OptionSpec{"net", 0, true},
                                  OptionSpec{"init", 0, false},
                                  OptionSpec{"ipc", 0, true},
                                  OptionSpec{"tty", 't', false},
                                  OptionSpec{"interactive", 'i', false},
                                  OptionSpec{"shm-size", 0, true},
                                  OptionSpec{"user", 'u', true},
                                  OptionSpec{"detach", 'd', false},
                                  OptionSpec{"hostname", 'h', true},
                                  OptionSpec{"pull", 0, true},
                                  OptionSpec{"help", 0, false}};

// What `docker run` was asked to do, checked.
struct RunRequest {
  ImageRef image;                         // What to run.
  std::vector<std::string> command;       // The container's command (bash when none is given).
  std::string name;                       // --name, or empty.
  bool auto_remove = false;               // --rm.
  bool interactive = false;               // -i: the container reads docker run's stdin (else /dev/null).
  std::string pull = "missing";           // --pull: missing, always or never.
  fs::path workdir = "/";                 // -w, or docker's default.
  std::optional<std::string> hostname;    // -h, else the short container id.
  std::map<std::string, std::string> env; // The container's environment, but HOSTNAME.
};

// The PATH a container gets when the caller has none: docker's default.
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The variables a container takes from its caller: PATH and HOME, so that the host's tools keep working; the mock's
// MOCK_* (among them the host's marker, by which the mock finds and ends the container's processes); and what tells
// Google's tools where the metadata server and the APIs are (GCE_METADATA_*, CLOUDSDK_*), which a container on a TPU
// VM reaches through the VM's network.
std::map<std::string, std::string> inherited_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) {
      continue;
    }
    const std::string key(text.substr(0, equals));
    if (key == "PATH" || key == "HOME" || key.starts_with("MOCK_") || key.starts_with("GCE_METADATA_") ||
        key.starts_with("CLOUDSDK_")) {
      env[key] = std::string(text.substr(equals + 1));
    }
  }
  env.try_emplace("PATH", kDefaultPath);
  return env;
}

// Adds `K=V` to `env`, or `K` with the caller's value (nothing when the caller has none), as -e and --env-file do.
void add_variable(std::map<std::string, std::string>& env, const std::string& entry) {
  const auto equals = entry.find('=');
  const std::string key = entry.substr(0, equals);
  if (key.empty() || key.find_first_of(" \t") != std::string::npos) {
    throw usage_error("run", "docker: poorly formatted environment: variable '" + key + "' is not valid");
  }
  if (equals != std::string::npos) {
    env[key] = entry.substr(equals + 1);
  } else if (const char* value = std::getenv(key.c_str())) {
    env[key] = value;
  }
}

// Reads an --env-file: one K=V or K a line; blank lines and # comments skipped.
void add_env_file(std::map<std::string, std::string>& env, const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    throw usage_error("run", "docker: open " + file + ": no such file or directory.");
  }
  for (std::string line; std::getline(in, line);) {
    line.erase(0, line.find_first_not_of(" \t"));
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (!line.empty() && line.front() != '#') {
      add_variable(env, line);
    }
  }
}

// `path` without "." and ".." and trailing slashes, to compare mount paths.
std::string normal_path(const fs::path& path) {
  auto text = path.lexically_normal().string();
  while (text.size() > 1 && text.back() == '/') {
    text.pop_back();
  }
  return text;
}

// Checks -v SPEC. The mock's containers see the host's filesystem, so a bind mount at the same path is a no-op
// (whose missing source is created, as docker creates it); anything else cannot be emulated and fails.
void check_volume(const std::string& spec) {
  const auto parts = split(spec, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    throw usage_error("run",
                      "docker: the mock's docker supports only bind mounts at the same path, -v DIR:DIR[:OPTIONS], "
                      "not -v " +
                          spec);
  }
  const fs::path source = parts[0];
  const fs::path target = parts[1];
  if (!source.is_absolute()) {
    throw usage_error("run", "docker: the mock's docker has no named volumes (-v " + spec +
                                 "): bind-mount a host directory at the same path instead");
  }
  if (!target.is_absolute()) {
    throw usage_error("run", "docker: Error response from daemon: invalid volume specification: '" + spec +
                                 "': mount path must be absolute.");
  }
  if (normal_path(source) != normal_path(target)) {
    throw usage_error("run", "docker: Error response from daemon: the mock's docker runs containers on the host's "
                             "filesystem, so a bind mount needs the same path on both sides: -v " +
                                 spec + " would mount " + source.string() + " at a different target path, " +
                                 target.string() + ".");
  }
  std::error_code ec;
  fs::create_directories(source, ec);
}

// Turns `docker run`'s arguments into a checked request; fails as docker fails, with 125.
RunRequest parse_run(const std::vector<std::string>& args) {
  const auto parsed = parse_args(args, kRunFlags, "run", FirstOperand::kEndsOptions);
  if (parsed.on("help")) {
    throw Failure("Usage:  docker run [OPTIONS] IMAGE [COMMAND] [ARG...]  (the mock cloud's docker)", 0);
  }
  if (parsed.on("detach")) {
    throw usage_error("run", "docker: -d/--detach is not supported by the mock's docker: a container runs in the "
                             "foreground of its `docker run` (start `docker run` itself in the background instead)");
  }
  if (parsed.operands.empty()) {
    throw usage_error("run", "docker: 'docker run' requires at least 1 argument.");
  }
  for (const auto* flag : {"network", "net"}) {
    for (const auto& value : parsed.values(flag)) {
      if (value != "host") {
        throw usage_error("run", "docker: --" + std::string(flag) + "=" + value +
                                     " is not supported: the mock's containers share the host's network "
                                     "(use --network=host)");
      }
    }
  }
  for (const auto& value : parsed.values("ipc")) {
    if (value != "host") {
      throw usage_error("run", "docker: --ipc=" + value +
                                   " is not supported: the mock's containers share the host's IPC (use --ipc=host)");
    }
  }
  RunRequest request;
  request.image = image_ref_or_fail(parsed.operands.front(), "docker: ", kDockerError);
  request.command.assign(parsed.operands.begin() + 1, parsed.operands.end());
  if (request.command.empty()) {
    request.command = {"bash"};
  }
  request.name = parsed.value("name").value_or("");
  static const std::regex valid_name("[a-zA-Z0-9][a-zA-Z0-9_.-]+");
  if (parsed.value("name") && !std::regex_match(request.name, valid_name)) {
    throw usage_error("run", "docker: Error response from daemon: Invalid container name (" + request.name +
                                 "), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed.");
  }
  request.auto_remove = parsed.on("rm");
  request.interactive = parsed.on("interactive");
  request.hostname = parsed.value("hostname");
  request.pull = parsed.value("pull").value_or("missing");
  if (request.pull != "missing" && request.pull != "always" && request.pull != "never") {
    throw usage_error("run", "docker: invalid pull option: '" + request.pull +
                                 "': must be one of \"always\", "
                                 "\"missing\" or \"never\"");
  }
  for (const auto& spec : parsed.values("volume")) {
    check_volume(spec);
  }
  if (const auto workdir = parsed.value("workdir")) {
    request.workdir = *workdir;
    if (!request.workdir.is_absolute()) {
      throw usage_error("run", "docker: Error response from daemon: the working directory '" + *workdir +
                                   "' is invalid, it needs to be an absolute path.");
    }
    std::error_code ec;
    if (!fs::is_directory(request.workdir, ec)) {
      throw usage_error("run", "docker: Error response from daemon: workdir " + *workdir +
                                   " does not exist on this mock host (the mock's containers run on the host's "
                                   "filesystem).");
    }
  }
  request.env = inherited_environment();
  for (const auto& file : parsed.values("env-file")) {
    add_env_file(request.env, file);
  }
  for (const auto& entry : parsed.values("env")) {
    add_variable(request.env, entry);
  }
  if (parsed.on("tty")) {
    request.env.try_emplace("TERM", "xterm");
  }
  return request;
}

// Makes sure the image is on the host, pulling it as `docker run` does (progress on stderr).
void ensure_image(const RunRequest& request) {
  const bool present = fs::exists(image_file(request.image));
  if (present && request.pull != "always") {
    return;
  }
  if (!present && request.pull == "never") {
    throw usage_error("run", "docker: Error response from daemon: No such image: " + request.image.familiar() + ".");
  }
  if (!present) {
    std::cerr << "Unable to find image '" << request.image.familiar() << "' locally\n";
  }
  try {
    pull(request.image, std::cerr);
  } catch (const Failure& failure) {
    throw usage_error("run", std::string("docker: ") + failure.what());
  }
}

// Ends the container's remaining processes and gives the terminal back, once its main process has ended.
void after_container(pid_t pid, bool foreground) {
  // A container's processes die with its main process, as they do in a container's PID namespace.
  ::kill(-pid, SIGKILL);
  if (foreground) {
    sigset_t block;
    sigset_t old;
    sigemptyset(&block);
    sigaddset(&block, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &block, &old);
    ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
  }
}

// The signals `docker run` forwards to its container.
constexpr std::array kForwardedSignals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// Runs the container's command as a child process in a process group of its own, records it while it runs,
// forwards the signals docker's sig-proxy forwards, and returns its exit status (128 + signal when killed).
int start_container(Container& c, const RunRequest& request) {
  auto env = request.env;
  env["HOSTNAME"] = request.hostname.value_or(c.id.substr(0, 12));
  std::vector<int> defaults(kForwardedSignals.begin(), kForwardedSignals.end());
  defaults.push_back(SIGPIPE);
  // Held until the record is written: its pid goes into the record before its command runs.
  util::ProcessBuilder process(c.command);
  process.clear_env()
      .env(env)
      .group(util::ProcessGroup::own)
      .held()
      // A container does not inherit its caller's ignored or blocked signals.
      .default_signals(defaults)
      .directory(request.workdir)
      .setup_failure_status(kDockerError);
  if (!request.interactive) {
    process.input(util::Stream::null());
  }
  const bool foreground = ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
  util::Child child;
  try {
    child = process.spawn();
  } catch (const Error& e) {
    throw Failure(std::string("docker: ") + e.what(), kDockerError);
  }
  const pid_t pid = child.pid;
  c.pid = pid;
  c.pid_start = process_start(pid).value_or(0);
  if (!write_exclusive(c.file, to_json(c).dump(2))) {
    // Its gate closed without a go: it ends without running anything.
    util::close_fd(child.gate_fd);
    util::close_fd(child.report_fd);
    ::kill(pid, SIGKILL);
    util::wait_exit(pid);
    throw name_conflict(c.name);
  }

  g_container_pid = pid;
  struct sigaction forward {};
  forward.sa_handler = forward_to_container;
  sigemptyset(&forward.sa_mask);
  for (const int signal : kForwardedSignals) {
    ::sigaction(signal, &forward, nullptr);
  }
  if (foreground) {
    ::tcsetpgrp(STDIN_FILENO, pid);
  }
  const int exec_error = util::release(child);
  const int status = util::wait_exit(pid);
  g_container_pid = 0;
  after_container(pid, foreground);

  const bool exec_failed = exec_error != 0;
  const int code = exec_failed ? (exec_error == ENOENT ? 127 : 126) : status;
  if (auto now = read_container(c.file); now && now->id == c.id) {
    std::error_code ec;
    if (c.auto_remove) {
      fs::remove(c.file, ec);
    } else if (!now->exit_code) {
      now->exit_code = code;
      now->finished = now_seconds();
      write_atomic(kTool, c.file, to_json(*now).dump(2));
    }
  }
  if (exec_failed) {
    throw Failure("docker: Error response from daemon: failed to create task for container: failed to create shim "
                  "task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"" +
                      c.command.front() + "\": " +
                      (exec_error == ENOENT ? std::string("executable file not found in $PATH")
                                            : std::string(std::strerror(exec_error))) +
                      ": unknown.",
                  code);
  }
  return code;
}

} // namespace

int run_command(const std::vector<std::string>& args) {
  const auto request = parse_run(args);
  // A name in use fails before anything is pulled.
  if (!request.name.empty() && fs::exists(containers_dir() / (request.name + ".json"))) {
    throw name_conflict(request.name);
  }
  ensure_image(request);
  Container c;
  c.id = random_hex();
  c.name = request.name;
  c.image = request.image.familiar();
  c.command = request.command;
  c.auto_remove = request.auto_remove;
  c.created = now_seconds();
  c.runner = ::getpid();
  c.runner_start = process_start(c.runner).value_or(0);
  c.file = containers_dir() / ((c.name.empty() ? c.id : c.name) + ".json");
  return start_container(c, request);
}

} // namespace jobman::mock::tools::docker
