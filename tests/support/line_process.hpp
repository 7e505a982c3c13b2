// A child process whose standard output is read line by line while it runs.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace jobman::test {

// A running program whose stdout is read line by line as it is written; stderr goes to a file (or is inherited).
// The destructor kills and reaps it if it still runs.
class LineReadingProcess {
public:
  // Starts `argv` (argv[0] is a path); `env` entries are set on top of this process's environment (an empty value
  // unsets the variable). `patience` bounds every single wait on the child.
  LineReadingProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                     const std::filesystem::path& stderr_file = {},
                     std::chrono::milliseconds patience = std::chrono::seconds(60));
  ~LineReadingProcess();
  LineReadingProcess(const LineReadingProcess&) = delete;
  LineReadingProcess& operator=(const LineReadingProcess&) = delete;

  // The next complete stdout line; nothing at the end of the output or when the patience runs out.
  std::optional<std::string> next_line();
  // Reads lines until one starts with `prefix`; returns it, or nothing when the output ended first.
  std::optional<std::string> read_until(const std::string& prefix);
  // Sends `signal` to the child.
  void send(int signal) const;
  // Reads the rest of stdout and reaps the child; returns its exit status (128 + signal when killed), or -1 when it
  // did not end within the patience (it is then killed).
  int finish();
  // The child's process id (-1 once reaped).
  [[nodiscard]] pid_t pid() const { return pid_; }
  // Every stdout line read so far.
  [[nodiscard]] const std::vector<std::string>& lines() const { return lines_; }
  // After finish(): the child was ended by a signal rather than exiting with a status of its own.
  [[nodiscard]] bool killed_by_signal() const { return killed_by_signal_; }

private:
  std::chrono::milliseconds patience_;
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::vector<std::string> lines_;
  bool killed_by_signal_ = false;
};

} // namespace jobman::test
