// Headless Chromium driven through the Chrome DevTools Protocol over a pipe (--remote-debugging-pipe), for tests that
// check what a web page rendered: open a URL, evaluate JavaScript in the page, wait for it to change, take
// screenshots, and list the problems (console errors, uncaught exceptions, failed requests) the page had.
//
// The browser reads commands on its descriptor 3 and writes replies and events on its descriptor 4, each message a
// JSON object followed by a NUL byte. Everything is read on the calling thread, only while a call waits for
// something, each wait with a deadline: no call hangs, and a browser that dies makes the next call throw.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace jobman::test {

// One headless Chromium with one page, started by the constructor and closed by the destructor.
class HeadlessBrowser {
public:
  // Starts `chromium` (the JOBMAN_CHROMIUM environment variable, else chromium on PATH) headless, with a private
  // profile in a temporary directory, at this window size, and attaches to its one page target.
  // Throws std::runtime_error with a clear message (and the tail of chromium's output) when it cannot.
  explicit HeadlessBrowser(int width = 1400, int height = 900);
  // Closes the browser (Browser.close), waits for it to exit (SIGKILL to its process group after 5 s) and removes
  // the temporary directory.
  ~HeadlessBrowser();
  HeadlessBrowser(const HeadlessBrowser&) = delete;
  HeadlessBrowser& operator=(const HeadlessBrowser&) = delete;

  // Whether a chromium program can be found: JOBMAN_CHROMIUM (a path, or a name looked up on PATH) or chromium on
  // PATH, executable.
  static bool available();

  // Navigates to `url` and returns once its load event fired; throws on a navigation error (a file or host that is
  // not there, say) or when it does not load within `timeout`. A navigation within the document (a new #fragment)
  // fires no load event and returns once it is done.
  void open(const std::string& url, std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Evaluates `expression` in the page (Runtime.evaluate with returnByValue and awaitPromise) and returns its value
  // as JSON: null for undefined, a string for values JSON cannot hold (NaN, Infinity, -0, a BigInt). Throws
  // std::runtime_error with the exception's description when it throws.
  nlohmann::json evaluate(const std::string& expression);

  // Evaluates `expression` (a boolean JS expression) every 50 ms until it is true or `timeout` passes; returns whether
  // it became true. An evaluation that throws counts as false (what it looks at may not be there yet).
  bool wait_until(const std::string& expression, std::chrono::milliseconds timeout);

  // Writes a PNG screenshot of the viewport (or, with full_page, of the whole page's width and height) to `path`.
  void screenshot(const std::filesystem::path& path, bool full_page = false);

  // The problems seen so far, one text line each: console errors and warnings (Runtime.consoleAPICalled), uncaught
  // exceptions (Runtime.exceptionThrown), requests that failed (Network.loadingFailed, cancelled ones left out) and
  // HTTP responses with a status of 400 or more (Network.responseReceived).
  [[nodiscard]] std::vector<std::string> problems() const { return problems_; }

private:
  using Clock = std::chrono::steady_clock;

  // Forks and execs the browser with its pipes on descriptors 3 and 4 and its output in the log.
  void launch(const std::string& program, int width, int height);
  // Finds the page target, attaches to it and sets up its session (domains enabled, viewport).
  void attach(int width, int height, Clock::time_point start_deadline);
  // Ends the browser and removes the temporary directory; safe to call more than once.
  void shutdown() noexcept;

  // Sends a command, on the page's session unless `browser_level`; returns its id.
  std::int64_t send(const std::string& method, const nlohmann::json& params, bool browser_level,
                    Clock::time_point deadline);
  // Reads messages until the reply to command `id` arrives (returned whole) or `deadline` passes (nothing).
  std::optional<nlohmann::json> await_reply(std::int64_t id, Clock::time_point deadline);
  // Sends a command and returns its result; throws when it fails or gets no reply by `deadline`.
  nlohmann::json call(const std::string& method, const nlohmann::json& params, Clock::time_point deadline,
                      bool browser_level = false);
  // Reads and handles messages until `done()` holds (true) or `deadline` passes (false). Throws when the browser
  // closed its end of the pipe.
  bool read_until(const std::function<bool()>& done, Clock::time_point deadline);
  // Handles one message: the reply awaited is kept, other replies (to commands given up on) are dropped, and the
  // events that matter are noted.
  void handle(const nlohmann::json& message);
  // Writes all of `data` to the browser's command pipe by `deadline`.
  void write_all(const std::string& data, Clock::time_point deadline);

  // How the browser ended ("it exited with status 1", say), or that it still runs.
  [[nodiscard]] std::string how_it_ended() const;
  // Throws std::runtime_error with `what` and the tail of chromium's output.
  [[noreturn]] void fail(const std::string& what) const;

  std::filesystem::path dir_; // The temporary directory: the profile and chromium's output.
  pid_t pid_ = -1;
  int command_fd_ = -1; // Written by this process, read by the browser as its descriptor 3.
  int reply_fd_ = -1;   // Written by the browser as its descriptor 4, read by this process.
  std::string session_; // The page's session id.
  int width_ = 0;
  int height_ = 0;
  std::int64_t next_id_ = 0;
  std::string input_;         // Bytes read and not yet handled.
  std::size_t scanned_ = 0;   // How much of input_ is known to hold no NUL.
  std::int64_t awaited_ = -1; // The id whose reply await_reply waits for.
  std::optional<nlohmann::json> reply_;
  std::vector<std::string> loads_;              // The loader ids of the documents whose load event fired.
  std::map<std::string, std::string> requests_; // The URL of each request still under way, by request id.
  std::vector<std::string> problems_;
};

} // namespace jobman::test
