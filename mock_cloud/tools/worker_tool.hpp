// What the mock's docker and conda share: their failures, the worker-host check, command lines and files. (They start
// processes with the process module, jobman/util/process.hpp.)
#pragma once

#include <cstddef>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock::tools {

// The tools' short names for the filesystem library and JSON values.
namespace fs = std::filesystem;
using json = nlohmann::json;

// A failure that ends the program: what() goes to stderr as it is, and status() is the exit status.
class Failure : public std::runtime_error {
public:
  // A failure reported with `message` and exit status `status`.
  Failure(const std::string& message, int status) : std::runtime_error(message), status_(status) {}
  // The exit status.
  [[nodiscard]] int status() const { return status_; }

private:
  int status_;
};

// The worker host's sandbox, $MOCK_TPU_WORKER_DIR; fails, in the words of `tool`, when this is not a mock worker host.
fs::path worker_dir(std::string_view tool);

// Runs `tool`'s `command` on a mock worker host and returns its exit status: a Failure is printed to stderr as it
// is, with its status; any other exception as "TOOL: what", with 1.
int run_on_worker_host(std::string_view tool, const std::function<int()>& command);

// ---------------------------------------------------------------------------------------------------------------
// Command lines.

// An option a command takes: its long name, its one-letter form (0 when none) and whether it takes a value.
struct OptionSpec {
  std::string_view name; // Without the dashes.
  char letter;           // The short form, or 0.
  bool takes_value;      // --name VALUE (or --name=VALUE) rather than a switch.
};

// A command line taken apart: the options given, by long name, and the operands.
struct CommandLine {
  std::map<std::string, std::vector<std::string>, std::less<>> options; // Every value in order, by long name.
  std::vector<std::string> operands;                                    // Everything that is not an option.

  // Whether switch `name` was given (and not as --name=false or --name=0).
  [[nodiscard]] bool on(std::string_view name) const;
  // The last value given for `name`, or nothing.
  [[nodiscard]] std::optional<std::string> value(std::string_view name) const;
  // Every value given for `name`.
  [[nodiscard]] std::vector<std::string> values(std::string_view name) const;
};

// Whether the first operand ends the options (everything from it on is an operand: a command and its arguments).
enum class FirstOperand { kEndsOptions, kMixesWithOptions };

// Reads the option word `args[at]` into `line` in a tool's own syntax; takes a value from the words after it by
// advancing `at`, and fails with the tool's usage error on an option it does not know.
using OptionReader = std::function<void(const std::vector<std::string>& args, std::size_t& at, CommandLine& line)>;

// Takes `args` apart: "--" ends the options, any other word with a leading '-' (but "-" alone) goes to `read_option`,
// and the rest are operands.
CommandLine parse_command_line(const std::vector<std::string>& args, FirstOperand first_operand,
                               const OptionReader& read_option);

// ---------------------------------------------------------------------------------------------------------------
// Text, time and files.

// `text` cut at every `separator`.
std::vector<std::string> split(const std::string& text, char separator);

// The clock a time is shown in.
enum class TimeZone { kLocal, kUtc };

// `seconds` since the epoch through strftime's `format`, in `zone`.
std::string format_time(std::time_t seconds, const char* format, TimeZone zone);

// How `write_file` treats what the file already holds.
enum class WriteMode { kReplace, kAppend };

// Writes `content` to `path`; fails, in the words of `tool`, when it cannot.
void write_file(std::string_view tool, const fs::path& path, const std::string& content, WriteMode mode);

// A temporary name beside `path`, private to this process.
fs::path temporary_beside(const fs::path& path);

// Replaces `path` (and makes its directory) with `content` through a rename, so that a reader never sees part of it.
void write_atomic(std::string_view tool, const fs::path& path, const std::string& content);

// The JSON in `path`, or nothing when there is no such file or it is not JSON.
std::optional<json> read_json(const fs::path& path);

} // namespace jobman::mock::tools
