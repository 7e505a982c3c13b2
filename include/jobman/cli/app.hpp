// The command line: parses argv into a command, runs it, maps errors to exit codes.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

namespace jobman::reporting {
class Dashboard;
} // namespace jobman::reporting

namespace jobman::cli {

// A parsed command line: what it asks for, decided before anything runs or is printed.
class CommandLine {
public:
  // What parsing decided.
  enum class Outcome {
    run,   // A command to execute().
    print, // Help or the version: text() goes to stdout, exit 0.
    error, // Bad arguments or an internal error: text() goes to stderr, exit exit_code().
  };

  // Parses argv (argv[0] is the program's name). Never throws: bad arguments are an `error` outcome.
  CommandLine(int argc, const char* const* argv);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // What parsing decided.
  [[nodiscard]] Outcome outcome() const;
  // The help or version text (print), or the message and hint, newline-terminated (error); empty for run.
  [[nodiscard]] const std::string& text() const;
  // The exit code for print and error outcomes (see README.md, "Exit codes").
  [[nodiscard]] int exit_code() const;
  // The subcommand path that was parsed, e.g. "jobman create"; "jobman" when none was.
  [[nodiscard]] const std::string& command() const;
  // Runs the parsed command (outcome run) and returns its exit code; errors are reported on stderr.
  int execute();

private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs jobman with the process's arguments; returns the exit code (see README.md, "Exit codes").
int run(int argc, char** argv);

// Serves `dashboard` on 127.0.0.1:`port` (0: any free port) until SIGINT or SIGTERM, printing its URL on `out` once
// it listens; returns the exit code. jobman-ui registers its server here; without one, `jobman ui` runs jobman-ui.
using DashboardServer = std::function<int(reporting::Dashboard& dashboard, int port, std::ostream& out)>;
void set_dashboard_server(DashboardServer server);
// The server registered, or an empty function.
const DashboardServer& dashboard_server();

} // namespace jobman::cli
