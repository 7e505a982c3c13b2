#include "support/browser.hpp"

#include "jobman/util/base64url.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <pthread.h>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace jobman::test {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Generous: chromium is several processes, which a loaded two-core test machine with sanitizer builds starts slowly.
constexpr milliseconds kStartTimeout = std::chrono::seconds(30);
constexpr milliseconds kCommandTimeout = std::chrono::seconds(30);
constexpr milliseconds kCloseTimeout = std::chrono::seconds(5);
constexpr milliseconds kWaitInterval{50};
// How much of chromium's output an exception message quotes.
constexpr std::size_t kLogTail = 3000;

// Whether `path` is an executable regular file.
bool executable(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The chromium program to run, as a path: JOBMAN_CHROMIUM (a path, or a name looked up on PATH), else chromium on
// PATH; "" when there is none.
std::string find_program() {
  const char* configured = std::getenv("JOBMAN_CHROMIUM");
  const std::string name = configured != nullptr && *configured != '\0' ? configured : "chromium";
  if (name.find('/') != std::string::npos) {
    return executable(name) ? name : "";
  }
  const char* path = std::getenv("PATH");
  const std::string directories = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= directories.size()) {
    auto end = directories.find(':', start);
    if (end == std::string::npos) {
      end = directories.size();
    }
    const std::string directory = directories.substr(start, end - start);
    const std::string candidate = (directory.empty() ? std::string(".") : directory) + "/" + name;
    if (executable(candidate)) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

// Milliseconds from now until `deadline`, rounded up; 0 once it passed, at most a day (poll takes an int).
int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 24LL * 3600 * 1000));
}

// "within N ms", for the message of a wait that ran out.
std::string within(milliseconds timeout) {
  return "within " + std::to_string(timeout.count()) + " ms";
}

// The member `key` of `object`; null when `object` is no object or has no such member.
const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json none;
  if (!object.is_object()) {
    return none;
  }
  const auto it = object.find(key);
  return it == object.end() ? none : *it;
}

// The string member `key` of `object`; "" when it is missing or not a string.
std::string string_at(const nlohmann::json& object, const char* key) {
  const auto& value = member(object, key);
  return value.is_string() ? value.get<std::string>() : "";
}

// The first line of `text`.
std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// A RemoteObject (a console argument, a thrown value) as text: a string as itself, another value as JSON, an object
// by its description (an Error's is its message and stack).
std::string remote_text(const nlohmann::json& object) {
  const auto& value = member(object, "value");
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (object.is_object() && object.contains("value")) {
    return value.dump();
  }
  for (const char* key : {"unserializableValue", "description", "type"}) {
    auto text = string_at(object, key);
    if (!text.empty()) {
      return text;
    }
  }
  return "?";
}

// " (url:line)" for a script location with a 0-based line number; "" when there is no url.
std::string location(const std::string& url, const nlohmann::json& line) {
  if (url.empty()) {
    return "";
  }
  return " (" + url + (line.is_number_integer() ? ":" + std::to_string(line.get<long long>() + 1) : "") + ")";
}

// The text of a CDP ExceptionDetails: the thrown value's description (an Error's message and stack), else its text.
std::string exception_text(const nlohmann::json& details) {
  const auto& exception = member(details, "exception");
  return exception.is_object() ? remote_text(exception) : string_at(details, "text");
}

// A protocol error reply as text: its message and data.
std::string protocol_error(const nlohmann::json& error) {
  auto text = string_at(error, "message");
  const auto data = string_at(error, "data");
  if (!data.empty()) {
    text += " (" + data + ")";
  }
  return text.empty() ? error.dump() : text;
}

// Standard base64 (with '+', '/' and '=' padding) decoded; nothing when it is not base64.
std::optional<std::string> base64_decode(std::string text) {
  while (!text.empty() && text.back() == '=') {
    text.pop_back();
  }
  for (char& c : text) {
    if (c == '+') {
      c = '-';
    } else if (c == '/') {
      c = '_';
    } else if (c == '-' || c == '_') {
      return std::nullopt;
    }
  }
  return util::base64url_decode(text);
}

// Blocks SIGPIPE in this thread while it lives, and takes a SIGPIPE a write raised meanwhile: a write to the pipe of
// a browser that has exited then fails with EPIPE rather than ending the test process.
class SigpipeBlocked {
public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{};
      ::sigtimedwait(&pipe_, nullptr, &now);
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

private:
  sigset_t pipe_{};
  sigset_t previous_{};
  bool was_pending_ = false;
};

// Closes `fd` if open and sets it to -1.
void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

// In the forked child: sets up the browser's process and descriptors (stdin from `in`, stdout and stderr to `log`,
// `commands` as 3 and `replies` as 4, nothing else open) and execs `program`. Reports the errno of what failed on
// `report` and exits. Async-signal-safe: the test process has threads, and one may have held a lock at the fork.
[[noreturn]] void become_browser(const char* program, char* const* argv, pid_t parent, int in, int log, int commands,
                                 int replies, int report) {
  int error = 0;
  // Its own process group, so that a SIGKILL to the group also ends the renderers and helpers it started; and the
  // browser ends with the test process, even one that crashed.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {
    ::_exit(127);
  }
  // Default dispositions (an ignored signal stays ignored across exec) and no signal blocked.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal = 1; signal < NSIG; ++signal) {
    ::sigaction(signal, &default_action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Every source moves above 4 first, so that placing one on 0 to 4 cannot overwrite another.
  const std::array<int, 5> sources = {in, log, log, commands, replies};
  std::array<int, 5> moved{};
  const int report_fd = ::fcntl(report, F_DUPFD_CLOEXEC, 5);
  if (report_fd < 0) {
    error = errno;
  }
  for (std::size_t i = 0; i < sources.size() && error == 0; ++i) {
    moved[i] = ::fcntl(sources[i], F_DUPFD_CLOEXEC, 5);
    if (moved[i] < 0) {
      error = errno;
    }
  }
  for (std::size_t i = 0; i < moved.size() && error == 0; ++i) {
    if (::dup2(moved[i], static_cast<int>(i)) < 0) { // dup2 leaves the new descriptor open across exec.
      error = errno;
    }
  }
  if (error == 0) {
    // Nothing else of the test process reaches the browser, close-on-exec or not.
    if (report_fd > 5) {
      ::close_range(5, static_cast<unsigned>(report_fd) - 1, 0);
    }
    ::close_range(static_cast<unsigned>(report_fd) + 1, ~0U, 0);
    ::execv(program, argv);
    error = errno;
  }
  (void)!::write(report_fd >= 0 ? report_fd : report, &error, sizeof error);
  ::_exit(127);
}

} // namespace

HeadlessBrowser::HeadlessBrowser(int width, int height) : width_(width), height_(height) {
  const auto program = find_program();
  if (program.empty()) {
    throw std::runtime_error("HeadlessBrowser: no chromium to run: install Debian's chromium package (chromium on "
                             "PATH) or set JOBMAN_CHROMIUM to a Chromium program");
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "jobman-chromium-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error(std::string("HeadlessBrowser: mkdtemp: ") + std::strerror(errno));
  }
  dir_ = pattern;
  try {
    const auto start_deadline = Clock::now() + kStartTimeout;
    launch(program, width, height);
    attach(width, height, start_deadline);
  } catch (...) {
    shutdown();
    throw;
  }
}

HeadlessBrowser::~HeadlessBrowser() {
  shutdown();
}

bool HeadlessBrowser::available() {
  return !find_program().empty();
}

void HeadlessBrowser::launch(const std::string& program, int width, int height) {
  const std::vector<std::string> args = {program,
                                         "--headless",
                                         "--no-sandbox",
                                         "--disable-gpu",
                                         "--remote-debugging-pipe",
                                         "--no-first-run",
                                         "--no-default-browser-check",
                                         "--disable-extensions",
                                         "--disable-background-networking",
                                         "--disable-component-update",
                                         "--disable-sync",
                                         "--hide-scrollbars",
                                         "--mute-audio",
                                         "--user-data-dir=" + (dir_ / "profile").string(),
                                         "--window-size=" + std::to_string(width) + "," + std::to_string(height),
                                         "about:blank"};
  std::vector<char*> argv;
  for (const auto& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str())); // NOLINT: exec's signature predates const.
  }
  argv.push_back(nullptr);
  const auto log_path = dir_ / "chromium.log";

  // Every descriptor is made close-on-exec: the child places the ones the browser gets on 0 to 4 itself.
  std::array<int, 2> commands{-1, -1};
  std::array<int, 2> replies{-1, -1};
  std::array<int, 2> report{-1, -1};
  int in = -1;
  int log = -1;
  const auto close_all = [&] {
    for (auto* pair : {&commands, &replies, &report}) {
      close_fd((*pair)[0]);
      close_fd((*pair)[1]);
    }
    close_fd(in);
    close_fd(log);
  };
  if (::pipe2(commands.data(), O_CLOEXEC) != 0 || ::pipe2(replies.data(), O_CLOEXEC) != 0 ||
      ::pipe2(report.data(), O_CLOEXEC) != 0) {
    const int error = errno;
    close_all();
    fail(std::string("pipe: ") + std::strerror(error));
  }
  in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (in < 0 || log < 0) {
    const int error = errno;
    close_all();
    fail("cannot open /dev/null or " + log_path.string() + ": " + std::strerror(error));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    close_all();
    fail(std::string("fork: ") + std::strerror(error));
  }
  if (pid == 0) {
    become_browser(program.c_str(), argv.data(), parent, in, log, commands[0], replies[1], report[1]);
  }
  pid_ = pid;
  // Also here, so that the group exists before the first kill, whichever process runs first.
  ::setpgid(pid, pid);
  command_fd_ = std::exchange(commands[1], -1);
  reply_fd_ = std::exchange(replies[0], -1);
  close_fd(report[1]);
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  close_all();
  if (got == static_cast<ssize_t>(sizeof error) && error != 0) {
    fail("cannot run " + program + ": " + std::strerror(error));
  }
  // Commands are written without blocking, so that a browser that stops reading cannot hold a write past its
  // deadline.
  ::fcntl(command_fd_, F_SETFL, ::fcntl(command_fd_, F_GETFL) | O_NONBLOCK);
}

void HeadlessBrowser::attach(int width, int height, Clock::time_point start_deadline) {
  // The page target (the about:blank tab) may show up a moment after the browser first answers.
  std::string target;
  const auto first =
      await_reply(send("Target.getTargets", nlohmann::json::object(), true, start_deadline), start_deadline);
  if (!first) {
    fail("chromium did not answer on the DevTools pipe " + within(kStartTimeout) + " of its start");
  }
  while (target.empty()) {
    const auto targets = call("Target.getTargets", nlohmann::json::object(), start_deadline, true);
    for (const auto& info : member(targets, "targetInfos")) {
      if (string_at(info, "type") == "page") {
        target = string_at(info, "targetId");
        break;
      }
    }
    if (target.empty()) {
      if (Clock::now() >= start_deadline) {
        fail("chromium has no page target " + within(kStartTimeout) + " of its start");
      }
      std::this_thread::sleep_for(kWaitInterval);
    }
  }
  const auto deadline = [] { return Clock::now() + kCommandTimeout; };
  const auto attached =
      call("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, deadline(), /*browser_level=*/true);
  session_ = string_at(attached, "sessionId");
  if (session_.empty()) {
    fail("Target.attachToTarget gave no sessionId: " + attached.dump());
  }
  call("Page.enable", nlohmann::json::object(), deadline());
  // Page.lifecycleEvent carries the loader id of the document whose load event fired, which open() waits for.
  call("Page.setLifecycleEventsEnabled", {{"enabled", true}}, deadline());
  call("Runtime.enable", nlohmann::json::object(), deadline());
  call("Network.enable", nlohmann::json::object(), deadline());
  call("Emulation.setDeviceMetricsOverride",
       {{"width", width}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}}, deadline());
}

void HeadlessBrowser::shutdown() noexcept {
  const pid_t pid = pid_;
  if (pid > 0) {
    const auto deadline = Clock::now() + kCloseTimeout;
    if (command_fd_ >= 0 && reply_fd_ >= 0) {
      try {
        // The browser closes its end of the reply pipe as it exits: read until then (its reply and last events
        // included, so that it never blocks writing them).
        send("Browser.close", nlohmann::json::object(), true, deadline);
        read_until([] { return false; }, deadline);
      } catch (const std::exception&) {
        // It had exited, or has now.
      }
    }
    close_fd(command_fd_);
    close_fd(reply_fd_);
    int status = 0;
    pid_t reaped = 0;
    while ((reaped = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Whatever of its group is left (all of it when it did not exit in time) is killed: no renderer outlives a test.
    ::kill(-pid, SIGKILL);
    if (reaped == 0) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1;
  }
  close_fd(command_fd_);
  close_fd(reply_fd_);
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }
}

void HeadlessBrowser::open(const std::string& url, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  loads_.clear();
  const auto result = call("Page.navigate", {{"url", url}}, deadline);
  const auto error = string_at(result, "errorText");
  if (!error.empty()) {
    throw std::runtime_error("HeadlessBrowser: cannot open " + url + ": " + error);
  }
  // A navigation within the document has no loader (and fires no load event).
  const auto loader = string_at(result, "loaderId");
  if (loader.empty()) {
    return;
  }
  const auto loaded = [&] { return std::find(loads_.begin(), loads_.end(), loader) != loads_.end(); };
  if (!read_until(loaded, deadline)) {
    fail("the load event of " + url + " did not fire " + within(timeout));
  }
}

nlohmann::json HeadlessBrowser::evaluate(const std::string& expression) {
  const auto result =
      call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}},
           Clock::now() + kCommandTimeout);
  const auto& details = member(result, "exceptionDetails");
  if (details.is_object()) {
    throw std::runtime_error(exception_text(details));
  }
  const auto& value = member(result, "result");
  if (value.is_object() && value.contains("value")) {
    return value["value"];
  }
  const auto unserializable = string_at(value, "unserializableValue");
  return unserializable.empty() ? nlohmann::json() : nlohmann::json(unserializable);
}

bool HeadlessBrowser::wait_until(const std::string& expression, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const auto id =
        send("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, false,
             deadline);
    const auto reply = await_reply(id, deadline);
    if (!reply) {
      return false;
    }
    const auto& error = member(*reply, "error");
    if (!error.is_null()) {
      throw std::runtime_error("HeadlessBrowser: Runtime.evaluate failed: " + protocol_error(error));
    }
    const auto& result = member(*reply, "result");
    const auto& value = member(member(result, "result"), "value");
    if (member(result, "exceptionDetails").is_null() && value.is_boolean() && value.get<bool>()) {
      return true;
    }
    const auto next = Clock::now() + kWaitInterval;
    if (next >= deadline) {
      return false;
    }
    // The pause handles events as they come, so that none waits in the pipe.
    read_until([] { return false; }, next);
  }
}

void HeadlessBrowser::screenshot(const std::filesystem::path& path, bool full_page) {
  const auto deadline = Clock::now() + kCommandTimeout;
  nlohmann::json params = {{"format", "png"}};
  if (full_page) {
    const auto metrics = call("Page.getLayoutMetrics", nlohmann::json::object(), deadline);
    const auto& size = member(metrics, "cssContentSize");
    const auto extent = [&size](const char* key, int fallback) {
      const auto& value = member(size, key);
      return value.is_number() ? std::ceil(value.get<double>()) : fallback;
    };
    params["captureBeyondViewport"] = true;
    params["clip"] = {
        {"x", 0}, {"y", 0}, {"width", extent("width", width_)}, {"height", extent("height", height_)}, {"scale", 1}};
  }
  const auto result = call("Page.captureScreenshot", params, deadline);
  const auto png = base64_decode(string_at(result, "data"));
  if (!png || png->empty()) {
    throw std::runtime_error("HeadlessBrowser: Page.captureScreenshot gave no base64 PNG");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(png->data(), static_cast<std::streamsize>(png->size()));
  out.close();
  if (!out) {
    throw std::runtime_error("HeadlessBrowser: cannot write " + path.string());
  }
}

std::int64_t HeadlessBrowser::send(const std::string& method, const nlohmann::json& params, bool browser_level,
                                   Clock::time_point deadline) {
  const std::int64_t id = ++next_id_;
  nlohmann::json message = {{"id", id}, {"method", method}, {"params", params}};
  if (!browser_level) {
    message["sessionId"] = session_;
  }
  write_all(message.dump() + '\0', deadline);
  return id;
}

std::optional<nlohmann::json> HeadlessBrowser::await_reply(std::int64_t id, Clock::time_point deadline) {
  awaited_ = id;
  reply_.reset();
  read_until([this] { return reply_.has_value(); }, deadline);
  awaited_ = -1;
  return std::exchange(reply_, std::nullopt);
}

nlohmann::json HeadlessBrowser::call(const std::string& method, const nlohmann::json& params,
                                     Clock::time_point deadline, bool browser_level) {
  const auto timeout = std::chrono::ceil<milliseconds>(deadline - Clock::now());
  const auto id = send(method, params, browser_level, deadline);
  const auto reply = await_reply(id, deadline);
  if (!reply) {
    fail("no reply to " + method + " " + within(timeout));
  }
  const auto& error = member(*reply, "error");
  if (!error.is_null()) {
    throw std::runtime_error("HeadlessBrowser: " + method + " failed: " + protocol_error(error));
  }
  return member(*reply, "result");
}

bool HeadlessBrowser::read_until(const std::function<bool()>& done, Clock::time_point deadline) {
  std::array<char, 65536> chunk{};
  while (true) {
    for (auto end = input_.find('\0', scanned_); end != std::string::npos; end = input_.find('\0', scanned_)) {
      auto message = nlohmann::json::parse(input_.begin(), input_.begin() + static_cast<std::ptrdiff_t>(end), nullptr,
                                           /*allow_exceptions=*/false);
      input_.erase(0, end + 1);
      scanned_ = 0;
      if (message.is_discarded()) {
        fail("chromium sent a message that is not JSON");
      }
      handle(message);
    }
    scanned_ = input_.size();
    if (done()) {
      return true;
    }
    const int left = milliseconds_until(deadline);
    if (left == 0) {
      return false;
    }
    if (reply_fd_ < 0) {
      fail("chromium closed its end of the DevTools pipe (" + how_it_ended() + ")");
    }
    pollfd readable{reply_fd_, POLLIN, 0};
    const int ready = ::poll(&readable, 1, left);
    if (ready < 0 && errno != EINTR) {
      fail(std::string("poll: ") + std::strerror(errno));
    }
    if (ready <= 0) {
      continue;
    }
    const ssize_t got = ::read(reply_fd_, chunk.data(), chunk.size());
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (got < 0) {
      fail(std::string("reading chromium's replies: ") + std::strerror(errno));
    }
    if (got == 0) {
      close_fd(reply_fd_); // Checked above on this and every later read.
      continue;
    }
    input_.append(chunk.data(), static_cast<std::size_t>(got));
  }
}

void HeadlessBrowser::handle(const nlohmann::json& message) {
  const auto& id = member(message, "id");
  if (!id.is_null()) {
    if (id.is_number_integer() && id.get<std::int64_t>() == awaited_) {
      reply_ = message;
    }
    return;
  }
  const auto method = string_at(message, "method");
  const auto& params = member(message, "params");
  if (method == "Page.lifecycleEvent") {
    if (string_at(params, "name") == "load") {
      loads_.push_back(string_at(params, "loaderId"));
    }
  } else if (method == "Runtime.consoleAPICalled") {
    const auto type = string_at(params, "type");
    if (type == "error" || type == "warning") {
      std::string text;
      for (const auto& argument : member(params, "args")) {
        text += (text.empty() ? "" : " ") + remote_text(argument);
      }
      const auto& frames = member(member(params, "stackTrace"), "callFrames");
      if (frames.is_array() && !frames.empty()) {
        text += location(string_at(frames.front(), "url"), member(frames.front(), "lineNumber"));
      }
      problems_.push_back("console." + std::string(type == "error" ? "error" : "warn") + ": " + text);
    }
  } else if (method == "Runtime.exceptionThrown") {
    const auto& details = member(params, "exceptionDetails");
    auto url = string_at(details, "url");
    problems_.push_back("uncaught exception: " + first_line(exception_text(details)) +
                        location(url, member(details, "lineNumber")));
  } else if (method == "Network.requestWillBeSent") {
    requests_[string_at(params, "requestId")] = string_at(member(params, "request"), "url");
  } else if (method == "Network.loadingFinished") {
    requests_.erase(string_at(params, "requestId"));
  } else if (method == "Network.loadingFailed") {
    const auto request = requests_.find(string_at(params, "requestId"));
    const auto url = request == requests_.end() ? std::string("(unknown URL)") : request->second;
    if (request != requests_.end()) {
      requests_.erase(request);
    }
    // A cancelled request (a navigation away, an image replaced before it loaded) is no fault of the page.
    const auto& canceled = member(params, "canceled");
    if (!(canceled.is_boolean() && canceled.get<bool>())) {
      problems_.push_back("request failed: " + string_at(params, "errorText") + " " + url);
    }
  } else if (method == "Network.responseReceived") {
    const auto& response = member(params, "response");
    const auto& status = member(response, "status");
    if (status.is_number() && status.get<double>() >= 400) {
      problems_.push_back("HTTP " + std::to_string(static_cast<int>(status.get<double>())) + " " +
                          string_at(response, "statusText") + ": " + string_at(response, "url"));
    }
  }
}

void HeadlessBrowser::write_all(const std::string& data, Clock::time_point deadline) {
  const SigpipeBlocked blocked;
  std::size_t written = 0;
  while (written < data.size()) {
    const ssize_t put = ::write(command_fd_, data.data() + written, data.size() - written);
    if (put > 0) {
      written += static_cast<std::size_t>(put);
      continue;
    }
    if (put < 0 && errno == EINTR) {
      continue;
    }
    if (put < 0 && errno == EAGAIN) {
      const int left = milliseconds_until(deadline);
      if (left == 0) {
        fail("chromium did not read its commands (the pipe stayed full)");
      }
      pollfd writable{command_fd_, POLLOUT, 0};
      ::poll(&writable, 1, left);
      continue;
    }
    if (put < 0 && errno == EPIPE) {
      fail("chromium closed its end of the DevTools pipe (" + how_it_ended() + ")");
    }
    fail(std::string("writing to chromium: ") + std::strerror(errno));
  }
}

std::string HeadlessBrowser::how_it_ended() const {
  // Looked at without reaping it (shutdown() does), for half a second: a pipe closes a moment before its exit.
  for (int tries = 0; tries < 25 && pid_ > 0; ++tries) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
      return info.si_code == CLD_EXITED ? "it exited with status " + std::to_string(info.si_status)
                                        : "it was killed by signal " + std::to_string(info.si_status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "it is still running";
}

void HeadlessBrowser::fail(const std::string& what) const {
  std::string message = "HeadlessBrowser: " + what;
  const auto log_path = dir_ / "chromium.log";
  // Without its complaints about D-Bus (there is none in a container), which fill its output on every start.
  std::string log;
  std::istringstream lines(file_text(log_path));
  for (std::string line; std::getline(lines, line);) {
    if (line.find(":ERROR:dbus/") == std::string::npos) {
      log += line + "\n";
    }
  }
  if (log.size() > kLogTail) {
    log = log.substr(log.size() - kLogTail);
    log = log.substr(std::min(log.size(), log.find('\n') + 1)); // From a line's start.
  }
  message += log.empty() ? "\n(chromium wrote no output)" : "\nthe end of chromium's output:\n" + log;
  throw std::runtime_error(message);
}

} // namespace jobman::test
