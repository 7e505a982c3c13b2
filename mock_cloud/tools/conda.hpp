// What the mock's conda commands share (conda.cpp, conda_support.cpp): where environments live, command lines,
// environment files and the solve.
#pragma once

#include "worker_tool.hpp"

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::mock::tools::conda {

// The name this program reports its failures under.
inline constexpr std::string_view kTool = "conda";

// The exit status of a command line conda cannot parse, as argparse gives it.
inline constexpr int kUsageError = 2;

// The version this conda reports.
inline constexpr const char* kVersion = "24.5.0 (mock)";

// ---------------------------------------------------------------------------------------------------------------
// Where environments live.

// The base prefix: a per-user Miniconda in HOME, so that it goes with the slice as a real one does.
fs::path base_prefix();

// Where named environments live.
fs::path envs_dir();

// The prefix of environment `name`.
fs::path prefix_of(const std::string& name);

// Whether `prefix` is an environment: the base always is (Miniconda is installed), any other has conda-meta/.
bool is_environment(const fs::path& prefix);

// The error conda gives for a prefix that is not an environment.
Failure not_an_environment(const fs::path& prefix);

// The current time as conda's history writes it.
std::string timestamp();

// The JSON object in `path`; an empty one when there is none.
json read_object(const fs::path& path);

// ---------------------------------------------------------------------------------------------------------------
// Command lines.

// A usage error of `conda COMMAND`, worded and numbered as argparse words and numbers them.
Failure usage_error(const std::string& command, const std::string& message);

// Parses the arguments of `conda COMMAND` against `specs`, as argparse does: -n NAME, -nNAME, -n=NAME, --name NAME
// and --name=NAME. Options and operands may mix unless the first operand ends the options (conda run: the command and
// its arguments).
CommandLine parse_options(const std::vector<std::string>& args, std::span<const OptionSpec> specs,
                          const std::string& command, FirstOperand first_operand);

// ---------------------------------------------------------------------------------------------------------------
// Environment files and dependencies.

// A package an environment asks for.
struct Dependency {
  std::string spec;    // As written: "numpy>=1.26", "conda-forge::jax", "jax[tpu]==0.4.30".
  std::string name;    // The package's name: "numpy", "jax".
  std::string manager; // "conda" or "pip".
};

// Takes the package's name out of a conda or pip `spec`.
Dependency parse_dependency(const std::string& spec, const std::string& manager);

// An environment file (environment.yml): its name, channels, dependencies and variables.
struct EnvironmentFile {
  fs::path path;                                // Where it was read from.
  std::optional<std::string> name;              // `name:`.
  std::vector<std::string> channels;            // `channels:`.
  std::vector<Dependency> dependencies;         // `dependencies:`, the `pip:` list's included.
  std::map<std::string, std::string> variables; // `variables:`, set by `conda run`.
};

// Reads an environment file; a missing file, bad YAML or a malformed entry fails, naming the file and the line.
EnvironmentFile read_environment_file(const fs::path& file);

// The specs of `dependencies` managed by `manager`.
std::vector<std::string> specs_of(const std::vector<Dependency>& dependencies, const std::string& manager);

// Prints conda's progress up to the solve and fails, as conda and pip fail, when a dependency is missing from the
// mock's channels: any whose name contains "does-not-exist".
void solve(const std::vector<Dependency>& dependencies, const std::vector<std::string>& channels, bool quiet);

// Prints the rest of conda's progress once the environment is in place.
void print_transaction(const std::vector<Dependency>& dependencies, const std::string& name, bool quiet);

} // namespace jobman::mock::tools::conda
