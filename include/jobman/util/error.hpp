// Errors and exit codes shared by every layer.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace jobman {

// Process exit codes that any layer may give; with domain::job_exit, the table documented in README.md ("Exit codes").
enum class ExitCode : int {
  ok = 0,    // Success.
  error = 1, // Any runtime failure (I/O, database, cloud).
  usage = 2, // Bad command line, bad config or bad settings.
  // 3 to 5 speak of jobs: domain::job_exit (jobman/domain/job.hpp).
  timed_out = 124,   // `wait --timeout` expired.
  interrupted = 130, // SIGINT.
};

// Base of jobman's exceptions: a message for the user and the exit code it maps to.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message, ExitCode code = ExitCode::error)
      : std::runtime_error(message), code_(code) {}
  // The exit code the top level returns for this error.
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

private:
  ExitCode code_;
};

// A malformed command line or argument (exit 2).
class UsageError : public Error {
public:
  explicit UsageError(const std::string& message) : Error(message, ExitCode::usage) {}
};

// Where in an input a problem is: file, 1-based line and column (0 when unknown), key path.
struct SourceLocation {
  std::string file;     // Path as the user gave it, or "--set"/"--sweep"/"settings".
  int line = 0;         // 1-based; 0 when the location has no line (e.g. a command-line override).
  int column = 0;       // 1-based; 0 when unknown.
  std::string key_path; // Dotted key path, e.g. "tpu.accelerator"; may be empty for the document.
};

// One problem found in a config, with an optional hint ("did you mean 'zone'?").
struct Diagnostic {
  SourceLocation where;
  std::string message;
  std::string hint;
  // "file:line:col: key.path: message (hint)", the form editors can jump to.
  [[nodiscard]] std::string format() const;
};

// A config or settings file that cannot be used (exit 2). Carries every problem found.
class ConfigError : public Error {
public:
  explicit ConfigError(std::vector<Diagnostic> diagnostics);
  // The problems, in document order.
  [[nodiscard]] const std::vector<Diagnostic>& diagnostics() const noexcept { return diagnostics_; }

private:
  std::vector<Diagnostic> diagnostics_;
};

} // namespace jobman
