// The mock cloud's conda, for worker hosts: environments are recorded under $HOME/miniconda3, commands run in them.
#include "worker_tool.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>
#include <utility>
#include <vector>
#include <yaml-cpp/yaml.h>

namespace jobman::mock::tools {
namespace {

// The name this program reports its failures under.
constexpr std::string_view kTool = "conda";

// The exit status of a command line conda cannot parse, as argparse gives it.
constexpr int kUsageError = 2;

// The version this conda reports.
constexpr const char* kVersion = "24.5.0 (mock)";

// The base prefix: a per-user Miniconda in HOME, so that it goes with the slice as a real one does.
fs::path base_prefix() {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    throw Failure("conda: HOME is not set", 1);
  }
  return fs::path(home) / "miniconda3";
}

// Where named environments live.
fs::path envs_dir() {
  return base_prefix() / "envs";
}

// The prefix of environment `name`.
fs::path prefix_of(const std::string& name) {
  return name == "base" ? base_prefix() : envs_dir() / name;
}

// Whether `prefix` is an environment: the base always is (Miniconda is installed), any other has conda-meta/.
bool is_environment(const fs::path& prefix) {
  std::error_code ec;
  return prefix == base_prefix() || fs::is_directory(prefix / "conda-meta", ec);
}

// The error conda gives for a prefix that is not an environment.
Failure not_an_environment(const fs::path& prefix) {
  return {"EnvironmentLocationNotFound: Not a conda environment: " + prefix.string(), 1};
}

// The current time as conda's history writes it.
std::string timestamp() {
  return format_time(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()), "%Y-%m-%d %H:%M:%S",
                     TimeZone::kLocal);
}

// The JSON object in `path`; an empty one when there is none.
json read_object(const fs::path& path) {
  auto object = read_json(path);
  return object && object->is_object() ? *object : json::object();
}

// ---------------------------------------------------------------------------------------------------------------
// Command lines.

// A usage error of `conda COMMAND`, worded and numbered as argparse words and numbers them.
Failure usage_error(const std::string& command, const std::string& message) {
  return {"usage: conda " + command + " [options]\nconda " + command + ": error: " + message, kUsageError};
}

// Parses the arguments of `conda COMMAND` against `specs`, as argparse does: -n NAME, -nNAME, -n=NAME, --name NAME
// and --name=NAME. Options and operands may mix unless the first operand ends the options (conda run: the command and
// its arguments).
CommandLine parse_options(const std::vector<std::string>& args, std::span<const OptionSpec> specs,
                          const std::string& command, FirstOperand first_operand) {
  const auto read_option = [&](const std::vector<std::string>& words, std::size_t& i, CommandLine& line) {
    const auto& arg = words[i];
    const bool long_form = arg.starts_with("--");
    const auto equals = arg.find('=');
    const std::string name =
        long_form ? arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2) : arg.substr(1, 1);
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) {
      return long_form ? s.name == name : s.letter == name.front();
    });
    if (spec == specs.end()) {
      throw usage_error(command, "unrecognized arguments: " + arg);
    }
    std::string value;
    if (spec->takes_value) {
      if (long_form && equals != std::string::npos) {
        value = arg.substr(equals + 1);
      } else if (!long_form && arg.size() > 2) {
        value = arg.substr(arg[2] == '=' ? 3 : 2);
      } else if (i + 1 < words.size()) {
        value = words[++i];
      } else {
        throw usage_error(command, "argument " + arg + ": expected one argument");
      }
    } else if ((long_form && equals != std::string::npos) || (!long_form && arg.size() > 2)) {
      throw usage_error(command, "argument " + arg + ": ignored explicit argument");
    }
    line.options[std::string(spec->name)].push_back(value);
  };
  return parse_command_line(args, first_operand, read_option);
}

// ---------------------------------------------------------------------------------------------------------------
// Environment files and dependencies.

// A package an environment asks for.
struct Dependency {
  std::string spec;    // As written: "numpy>=1.26", "conda-forge::jax", "jax[tpu]==0.4.30".
  std::string name;    // The package's name: "numpy", "jax".
  std::string manager; // "conda" or "pip".
};

// Takes the package's name out of a conda or pip `spec`.
Dependency parse_dependency(const std::string& spec, const std::string& manager) {
  Dependency dependency{spec, spec, manager};
  if (spec.starts_with("-") || spec.find("://") != std::string::npos) {
    // A pip option (-r FILE, --extra-index-url URL) or a URL: its own name.
    if (const auto egg = spec.find("#egg="); egg != std::string::npos) {
      dependency.name = spec.substr(egg + 5);
    }
    return dependency;
  }
  std::string name = spec;
  if (const auto channel = name.find("::"); manager == "conda" && channel != std::string::npos) {
    name.erase(0, channel + 2);
  }
  dependency.name = name.substr(0, name.find_first_of(manager == "conda" ? " =<>!~[" : " =<>!~[;@"));
  return dependency;
}

// An environment file (environment.yml): its name, channels, dependencies and variables.
struct EnvironmentFile {
  fs::path path;                                // Where it was read from.
  std::optional<std::string> name;              // `name:`.
  std::vector<std::string> channels;            // `channels:`.
  std::vector<Dependency> dependencies;         // `dependencies:`, the `pip:` list's included.
  std::map<std::string, std::string> variables; // `variables:`, set by `conda run`.
};

// The error for a malformed part of `file` at `mark`.
Failure file_error(const fs::path& file, const YAML::Mark& mark, const std::string& message) {
  return {"CondaValueError: invalid environment file " + file.string() + ", line " + std::to_string(mark.line + 1) +
              ": " + message,
          1};
}

// A scalar's text, or the error naming `what` and its place.
std::string scalar_text(const fs::path& file, const YAML::Node& node, const std::string& what) {
  if (!node.IsScalar() || node.Scalar().empty()) {
    throw file_error(file, node.Mark(), what + " must be a non-empty string");
  }
  return node.Scalar();
}

// Reads an environment file; a missing file, bad YAML or a malformed entry fails, naming the file and the line.
EnvironmentFile read_environment_file(const fs::path& file) {
  EnvironmentFile environment;
  environment.path = fs::absolute(file);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    throw Failure("EnvironmentFileNotFound: '" + environment.path.string() + "' file not found", 1);
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::ParserException& error) {
    throw Failure("CondaValueError: invalid YAML in " + file.string() + ", line " +
                      std::to_string(error.mark.line + 1) + ", column " + std::to_string(error.mark.column + 1) + ": " +
                      error.msg,
                  1);
  } catch (const YAML::BadFile&) {
    throw Failure("EnvironmentFileNotFound: '" + environment.path.string() + "' file not found", 1);
  }
  if (root.IsNull()) {
    return environment;
  }
  if (!root.IsMap()) {
    throw file_error(file, root.Mark(), "expected a mapping with name, channels and dependencies");
  }
  if (const auto name = root["name"]; name && !name.IsNull()) {
    environment.name = scalar_text(file, name, "name");
  }
  if (const auto channels = root["channels"]; channels && !channels.IsNull()) {
    if (!channels.IsSequence()) {
      throw file_error(file, channels.Mark(), "channels must be a list");
    }
    for (const auto& channel : channels) {
      environment.channels.push_back(scalar_text(file, channel, "a channel"));
    }
  }
  if (const auto dependencies = root["dependencies"]; dependencies && !dependencies.IsNull()) {
    if (!dependencies.IsSequence()) {
      throw file_error(file, dependencies.Mark(), "dependencies must be a list");
    }
    for (const auto& entry : dependencies) {
      if (entry.IsScalar()) {
        environment.dependencies.push_back(parse_dependency(scalar_text(file, entry, "a dependency"), "conda"));
        continue;
      }
      if (!entry.IsMap() || entry.size() != 1 || !entry["pip"] || !entry["pip"].IsSequence()) {
        throw file_error(file, entry.Mark(), "a dependency must be a package spec or a `pip:` list");
      }
      for (const auto& pip : entry["pip"]) {
        environment.dependencies.push_back(parse_dependency(scalar_text(file, pip, "a pip requirement"), "pip"));
      }
    }
  }
  if (const auto variables = root["variables"]; variables && !variables.IsNull()) {
    if (!variables.IsMap()) {
      throw file_error(file, variables.Mark(), "variables must be a mapping");
    }
    for (const auto& variable : variables) {
      environment.variables[scalar_text(file, variable.first, "a variable's name")] =
          variable.second.IsScalar() ? variable.second.Scalar() : "";
    }
  }
  return environment;
}

// The specs of `dependencies` managed by `manager`.
std::vector<std::string> specs_of(const std::vector<Dependency>& dependencies, const std::string& manager) {
  std::vector<std::string> specs;
  for (const auto& dependency : dependencies) {
    if (dependency.manager == manager) {
      specs.push_back(dependency.spec);
    }
  }
  return specs;
}

// Prints conda's progress up to the solve and fails, as conda and pip fail, when a dependency is missing from the
// mock's channels: any whose name contains "does-not-exist".
void solve(const std::vector<Dependency>& dependencies, const std::vector<std::string>& channels, bool quiet) {
  std::vector<std::string> missing_conda;
  std::vector<std::string> missing_pip;
  for (const auto& dependency : dependencies) {
    if (dependency.name.find("does-not-exist") != std::string::npos) {
      (dependency.manager == "pip" ? missing_pip : missing_conda).push_back(dependency.spec);
    }
  }
  if (!quiet) {
    std::cout << "Channels:\n";
    for (const auto& channel : channels) {
      std::cout << " - " << channel << "\n";
    }
    std::cout << "Platform: linux-64\nCollecting package metadata (repodata.json): done\nSolving environment: "
              << (missing_conda.empty() ? "done" : "failed") << "\n";
  }
  if (!missing_conda.empty()) {
    std::string message = "PackagesNotFoundError: The following packages are not available from current channels:\n\n";
    for (const auto& spec : missing_conda) {
      message += "  - " + spec + "\n";
    }
    message += "\nCurrent channels:\n\n";
    for (const auto& channel : channels) {
      message += "  - " + channel + "\n";
    }
    throw Failure(message, 1);
  }
  if (!missing_pip.empty()) {
    std::string message = "Pip subprocess error:\n";
    for (const auto& spec : missing_pip) {
      message.append("ERROR: Could not find a version that satisfies the requirement ")
          .append(spec)
          .append(" (from versions: none)\nERROR: No matching distribution found for ")
          .append(spec)
          .append("\n");
    }
    throw Failure(message + "\nCondaEnvException: Pip failed", 1);
  }
}

// Prints the rest of conda's progress once the environment is in place.
void print_transaction(const std::vector<Dependency>& dependencies, const std::string& name, bool quiet) {
  if (quiet) {
    return;
  }
  std::cout << "\nDownloading and Extracting Packages: done\nPreparing transaction: done\n"
               "Verifying transaction: done\nExecuting transaction: done\n";
  if (const auto pip = specs_of(dependencies, "pip"); !pip.empty()) {
    std::cout << "Installing pip dependencies: - Ran pip subprocess with arguments:\n";
    for (const auto& spec : pip) {
      std::cout << "  " << spec << "\n";
    }
    std::cout << "done\n";
  }
  std::cout << "#\n# To activate this environment, use\n#\n#     $ conda activate " << name
            << "\n#\n# To deactivate an active environment, use\n#\n#     $ conda deactivate\n\n";
}

// ---------------------------------------------------------------------------------------------------------------
// Environments.

// The record of what an environment holds (conda-meta/jobman-mock.json).
fs::path record_file(const fs::path& prefix) {
  return prefix / "conda-meta" / "jobman-mock.json";
}

// `dependencies` as the record keeps them.
json dependencies_json(const std::vector<Dependency>& dependencies) {
  json list = json::array();
  for (const auto& dependency : dependencies) {
    list.push_back({{"spec", dependency.spec}, {"name", dependency.name}, {"manager", dependency.manager}});
  }
  return list;
}

// An entry of conda-meta/history: when, the command line, and the specs asked for.
std::string history_entry(const std::string& invocation, const std::vector<Dependency>& dependencies) {
  return "==> " + timestamp() + " <==\n# cmd: " + invocation + "\n# conda version: " + kVersion +
         "\n# update specs: " + json(specs_of(dependencies, "conda")).dump() +
         "\n# pip specs: " + json(specs_of(dependencies, "pip")).dump() + "\n";
}

// The host's python3: the first on PATH outside the mock's tools and conda's own environments; nothing if none.
std::optional<fs::path> host_python() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) {
    return std::nullopt;
  }
  std::error_code ec;
  const auto tools = fs::weakly_canonical(fs::read_symlink("/proc/self/exe", ec).parent_path(), ec);
  const auto base = fs::weakly_canonical(base_prefix(), ec);
  for (const auto& entry : split(path, ':')) {
    if (entry.empty()) {
      continue;
    }
    const auto dir = fs::weakly_canonical(entry, ec);
    const auto inside_base = dir.lexically_relative(base);
    if (dir == tools || (!inside_base.empty() && *inside_base.begin() != "..")) {
      continue;
    }
    const auto candidate = fs::path(entry) / "python3";
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

// A directory that is removed when it goes out of scope unless it was kept: an environment being built.
class StagingDir {
public:
  // Creates `path` afresh.
  explicit StagingDir(fs::path path) : path_(std::move(path)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~StagingDir() {
    if (!kept_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  StagingDir(StagingDir&&) = delete;
  StagingDir& operator=(StagingDir&&) = delete;

  // The directory.
  [[nodiscard]] const fs::path& path() const { return path_; }
  // Keeps it: it was renamed into place.
  void keep() { kept_ = true; }

private:
  fs::path path_;
  bool kept_ = false;
};

// What an environment is created from.
struct EnvironmentRequest {
  std::string name;                             // Its name.
  std::vector<std::string> channels;            // Where packages come from ("defaults" when none are given).
  std::vector<Dependency> dependencies;         // What it holds.
  std::map<std::string, std::string> variables; // Set by `conda run`.
  std::string source;                           // The environment file, or empty.
  bool quiet = false;                           // -q: no progress.
};

// Fails unless `name` can name a new environment.
void check_new_name(const std::string& name) {
  if (name.empty() || name.find_first_of("/ :#") != std::string::npos || name.starts_with(".")) {
    throw Failure("CondaValueError: Invalid environment name: '" + name +
                      "'\n  Characters not allowed: ('/', ' ', "
                      "':', '#')",
                  1);
  }
  if (name == "base") {
    throw Failure("CondaValueError: 'base' is a reserved environment name", 1);
  }
}

// Creates the environment: bin/ with python and python3 (the host's, when it has one), conda-meta/history and the
// record. It is built aside and renamed into place, so that a failure leaves nothing behind.
int create_environment(const EnvironmentRequest& request, const std::string& invocation) {
  check_new_name(request.name);
  const auto prefix = prefix_of(request.name);
  std::error_code ec;
  if (fs::exists(prefix, ec)) {
    throw Failure("CondaValueError: prefix already exists: " + prefix.string(), 1);
  }
  solve(request.dependencies, request.channels, request.quiet);

  fs::create_directories(envs_dir());
  StagingDir staging(envs_dir() / ("." + request.name + ".creating-" + std::to_string(::getpid())));
  fs::create_directories(staging.path() / "bin");
  fs::create_directories(staging.path() / "conda-meta");
  if (const auto python = host_python()) {
    fs::create_symlink(*python, staging.path() / "bin" / "python3");
    fs::create_symlink(*python, staging.path() / "bin" / "python");
  }
  write_file(kTool, staging.path() / "conda-meta" / "history", history_entry(invocation, request.dependencies),
             WriteMode::kAppend);
  const auto now = timestamp();
  const json record = {{"name", request.name},
                       {"prefix", prefix.string()},
                       {"channels", request.channels},
                       {"dependencies", dependencies_json(request.dependencies)},
                       {"variables", request.variables},
                       {"source", request.source},
                       {"created", now},
                       {"updated", now}};
  write_atomic(kTool, record_file(staging.path()), record.dump(2) + "\n");
  if (::rename(staging.path().c_str(), prefix.c_str()) != 0) {
    throw Failure("CondaValueError: prefix already exists: " + prefix.string(), 1);
  }
  staging.keep();
  print_transaction(request.dependencies, request.name, request.quiet);
  return 0;
}

// The environment's name from -n, else from the file's `name:`.
std::string environment_name(const CommandLine& options, const EnvironmentFile& file) {
  if (const auto name = options.value("name")) {
    return *name;
  }
  if (file.name) {
    return *file.name;
  }
  throw Failure("CondaValueError: no environment name: give -n NAME or a `name:` in " + file.path.string(), 1);
}

// `conda env create [-f FILE] [-n NAME] [-y] [-q]`.
int env_create(const std::vector<std::string>& args, const std::string& invocation) {
  static constexpr std::array kOptions = {OptionSpec{"file", 'f', true}, OptionSpec{"name", 'n', true},
                                          OptionSpec{"yes", 'y', false}, OptionSpec{"quiet", 'q', false}};
  const auto options = parse_options(args, kOptions, "env create", FirstOperand::kMixesWithOptions);
  if (!options.operands.empty()) {
    throw usage_error("env create", "unrecognized arguments: " + options.operands.front());
  }
  const auto file = read_environment_file(options.value("file").value_or("environment.yml"));
  EnvironmentRequest request;
  request.name = environment_name(options, file);
  request.channels = file.channels.empty() ? std::vector<std::string>{"defaults"} : file.channels;
  request.dependencies = file.dependencies;
  request.variables = file.variables;
  request.source = file.path.string();
  request.quiet = options.on("quiet");
  return create_environment(request, invocation);
}

// `conda create -n NAME [-c CHANNEL]... [-y] [-q] [SPEC...]`.
int create(const std::vector<std::string>& args, const std::string& invocation) {
  static constexpr std::array kOptions = {OptionSpec{"name", 'n', true}, OptionSpec{"channel", 'c', true},
                                          OptionSpec{"yes", 'y', false}, OptionSpec{"quiet", 'q', false}};
  const auto options = parse_options(args, kOptions, "create", FirstOperand::kMixesWithOptions);
  const auto name = options.value("name");
  if (!name) {
    throw usage_error("create", "one of the arguments -n/--name is required");
  }
  EnvironmentRequest request;
  request.name = *name;
  request.channels = options.values("channel");
  if (request.channels.empty()) {
    request.channels = {"defaults"};
  }
  for (const auto& spec : options.operands) {
    request.dependencies.push_back(parse_dependency(spec, "conda"));
  }
  request.quiet = options.on("quiet");
  return create_environment(request, invocation);
}

// `conda env update [-f FILE] [-n NAME] [--prune]`: the environment's recorded dependencies become the file's (with
// --prune) or the file's on top of those it had.
int env_update(const std::vector<std::string>& args, const std::string& invocation) {
  static constexpr std::array kOptions = {OptionSpec{"file", 'f', true}, OptionSpec{"name", 'n', true},
                                          OptionSpec{"prune", 0, false}, OptionSpec{"yes", 'y', false},
                                          OptionSpec{"quiet", 'q', false}};
  const auto options = parse_options(args, kOptions, "env update", FirstOperand::kMixesWithOptions);
  if (!options.operands.empty()) {
    throw usage_error("env update", "unrecognized arguments: " + options.operands.front());
  }
  const auto file = read_environment_file(options.value("file").value_or("environment.yml"));
  const auto name = environment_name(options, file);
  const auto prefix = prefix_of(name);
  if (!is_environment(prefix)) {
    throw not_an_environment(prefix);
  }
  auto record = read_object(record_file(prefix));
  const auto channels =
      file.channels.empty() ? record.value("channels", std::vector<std::string>{"defaults"}) : file.channels;
  solve(file.dependencies, channels, options.on("quiet"));

  std::vector<Dependency> dependencies;
  if (!options.on("prune")) {
    for (const auto& old : record.value("dependencies", json::array())) {
      dependencies.push_back({old.value("spec", ""), old.value("name", ""), old.value("manager", "conda")});
    }
  }
  for (const auto& dependency : file.dependencies) {
    const auto same = std::find_if(dependencies.begin(), dependencies.end(), [&](const Dependency& d) {
      return d.name == dependency.name && d.manager == dependency.manager;
    });
    if (same != dependencies.end()) {
      *same = dependency;
    } else {
      dependencies.push_back(dependency);
    }
  }
  fs::create_directories(prefix / "conda-meta");
  write_file(kTool, prefix / "conda-meta" / "history", history_entry(invocation, file.dependencies),
             WriteMode::kAppend);
  record["name"] = name;
  record["prefix"] = prefix.string();
  record["channels"] = channels;
  record["dependencies"] = dependencies_json(dependencies);
  if (!file.variables.empty() || options.on("prune")) {
    record["variables"] = file.variables;
  }
  record["source"] = file.path.string();
  record["updated"] = timestamp();
  write_atomic(kTool, record_file(prefix), record.dump(2) + "\n");
  print_transaction(file.dependencies, name, options.on("quiet"));
  return 0;
}

// Removes environment `name` (`conda env remove -n NAME`, `conda remove -n NAME --all`).
int remove_environment(const std::optional<std::string>& name, bool quiet) {
  if (!name) {
    throw Failure("CondaValueError: no environment name given: use -n NAME", 1);
  }
  const auto prefix = prefix_of(*name);
  if (*name == "base") {
    throw Failure("CondaEnvironmentError: cannot remove root environment, add -n NAME or -p PREFIX", 1);
  }
  if (!is_environment(prefix)) {
    throw not_an_environment(prefix);
  }
  if (const char* active = std::getenv("CONDA_PREFIX"); active != nullptr && fs::path(active) == prefix) {
    throw Failure("CondaEnvironmentError: Cannot remove current environment. Deactivate and run conda remove again", 1);
  }
  if (!quiet) {
    std::cout << "\nRemove all packages in environment " << prefix.string() << ":\n\n";
  }
  fs::remove_all(prefix);
  return 0;
}

// `conda env remove -n NAME [-y]`.
int env_remove(const std::vector<std::string>& args) {
  static constexpr std::array kOptions = {OptionSpec{"name", 'n', true}, OptionSpec{"yes", 'y', false},
                                          OptionSpec{"quiet", 'q', false}};
  const auto options = parse_options(args, kOptions, "env remove", FirstOperand::kMixesWithOptions);
  if (!options.operands.empty()) {
    throw usage_error("env remove", "unrecognized arguments: " + options.operands.front());
  }
  return remove_environment(options.value("name"), options.on("quiet"));
}

// `conda remove -n NAME --all [-y]`.
int remove(const std::vector<std::string>& args) {
  static constexpr std::array kOptions = {OptionSpec{"name", 'n', true}, OptionSpec{"all", 0, false},
                                          OptionSpec{"yes", 'y', false}, OptionSpec{"quiet", 'q', false}};
  const auto options = parse_options(args, kOptions, "remove", FirstOperand::kMixesWithOptions);
  if (!options.on("all") || !options.operands.empty()) {
    throw usage_error("remove", "the mock's conda removes whole environments only: conda remove -n NAME --all");
  }
  return remove_environment(options.value("name"), options.on("quiet"));
}

// Every environment: the base first, then the named ones by name.
std::vector<std::pair<std::string, fs::path>> environments() {
  std::vector<std::pair<std::string, fs::path>> list = {{"base", base_prefix()}};
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(envs_dir(), ec)) {
    const auto name = entry.path().filename().string();
    if (!name.starts_with(".") && is_environment(entry.path())) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    list.emplace_back(name, prefix_of(name));
  }
  return list;
}

// `conda env list` and `conda info --envs`: the active environment (CONDA_PREFIX's, else the base) is starred.
int list_environments(bool as_json) {
  const auto list = environments();
  if (as_json) {
    json envs = json::array();
    for (const auto& [name, prefix] : list) {
      envs.push_back(prefix.string());
    }
    std::cout << json{{"envs", envs}}.dump(2) << "\n";
    return 0;
  }
  const char* active_variable = std::getenv("CONDA_PREFIX");
  fs::path active = active_variable == nullptr ? fs::path() : fs::path(active_variable);
  if (std::none_of(list.begin(), list.end(), [&](const auto& env) { return env.second == active; })) {
    active = base_prefix();
  }
  std::cout << "# conda environments:\n#\n";
  for (const auto& [name, prefix] : list) {
    std::string line = name;
    line.resize(std::max<std::size_t>(line.size() + 1, 25), ' ');
    std::cout << line << (prefix == active ? "*  " : "   ") << prefix.string() << "\n";
  }
  std::cout << "\n";
  return 0;
}

// `conda env list [--json]`.
int env_list(const std::vector<std::string>& args) {
  static constexpr std::array kOptions = {OptionSpec{"json", 0, false}};
  const auto options = parse_options(args, kOptions, "env list", FirstOperand::kMixesWithOptions);
  return list_environments(options.on("json"));
}

// `conda info [--base | --envs] [--json]`.
int info(const std::vector<std::string>& args) {
  static constexpr std::array kOptions = {OptionSpec{"base", 0, false}, OptionSpec{"envs", 'e', false},
                                          OptionSpec{"json", 0, false}};
  const auto options = parse_options(args, kOptions, "info", FirstOperand::kMixesWithOptions);
  if (options.on("base")) {
    std::cout << base_prefix().string() << "\n";
    return 0;
  }
  if (options.on("envs")) {
    return list_environments(options.on("json"));
  }
  const char* active = std::getenv("CONDA_DEFAULT_ENV");
  if (options.on("json")) {
    std::cout << json{{"conda_version", kVersion},
                      {"root_prefix", base_prefix().string()},
                      {"active_prefix", active == nullptr ? json(nullptr) : json(active)},
                      {"envs_dirs", {envs_dir().string()}},
                      {"platform", "linux-64"}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "\n     active environment : " << (active == nullptr ? "None" : active)
            << "\n       base environment : " << base_prefix().string() << "\n          conda version : " << kVersion
            << "\n       envs directories : " << envs_dir().string() << "\n               platform : linux-64\n\n";
  return 0;
}

// `conda run [--no-capture-output|--live-stream] [-n NAME|-p PREFIX] [--cwd DIR] CMD ARGS...`: execs CMD in the
// environment (its bin/ first on PATH, CONDA_PREFIX, CONDA_DEFAULT_ENV and its variables), so that CMD's signals and
// exit status are its own.
int run(const std::vector<std::string>& args) {
  static constexpr std::array kOptions = {
      OptionSpec{"name", 'n', true},       OptionSpec{"prefix", 'p', true}, OptionSpec{"no-capture-output", 0, false},
      OptionSpec{"live-stream", 0, false}, OptionSpec{"cwd", 0, true},      OptionSpec{"verbose", 'v', false}};
  const auto options = parse_options(args, kOptions, "run", FirstOperand::kEndsOptions);
  const auto name = options.value("name");
  const auto given_prefix = options.value("prefix");
  const fs::path prefix = given_prefix ? fs::absolute(*given_prefix) : prefix_of(name.value_or("base"));
  if (!is_environment(prefix)) {
    throw not_an_environment(prefix);
  }
  if (options.operands.empty()) {
    throw usage_error("run", "the following arguments are required: executable_call");
  }
  if (const auto cwd = options.value("cwd"); cwd && ::chdir(cwd->c_str()) != 0) {
    throw Failure("conda run: cannot change to " + *cwd + ": " + std::strerror(errno), 1);
  }
  const char* path = std::getenv("PATH");
  const std::string bin = (prefix / "bin").string();
  ::setenv("PATH", (path == nullptr || *path == '\0' ? bin : bin + ":" + path).c_str(), 1);
  ::setenv("CONDA_PREFIX", prefix.c_str(), 1);
  ::setenv("CONDA_DEFAULT_ENV", given_prefix ? prefix.c_str() : name.value_or("base").c_str(), 1);
  ::setenv("CONDA_SHLVL", "1", 1);
  const auto variables = read_object(record_file(prefix)).value("variables", json::object());
  if (variables.is_object()) {
    for (const auto& [key, value] : variables.items()) {
      if (value.is_string()) {
        ::setenv(key.c_str(), value.get<std::string>().c_str(), 1);
      }
    }
  }
  std::vector<std::string> argv = options.operands;
  const auto pointers = exec_array(argv);
  std::cout.flush();
  ::execvp(pointers[0], pointers.data());
  const int error = errno;
  throw Failure("conda run: " + argv.front() + ": " + std::strerror(error), error == ENOENT ? 127 : 126);
}

// `conda --help`.
void print_usage() {
  std::cout << "usage: conda COMMAND  (the mock cloud's stand-in on its worker hosts)\n\n"
               "  conda env create -f FILE [-n NAME]   create an environment from an environment file\n"
               "  conda env update -f FILE [-n NAME] [--prune]\n"
               "  conda env remove -n NAME             (also: conda remove -n NAME --all)\n"
               "  conda env list                       (also: conda info --envs)\n"
               "  conda create -n NAME [SPEC...]\n"
               "  conda run -n NAME CMD [ARG...]\n"
               "  conda info [--base | --envs]\n"
               "  conda --version\n";
}

// The error for a subcommand this conda does not have.
Failure unknown_command(const std::string& where, const std::string& command) {
  if (command == "activate" || command == "deactivate" || command == "init") {
    return {where + ": error: '" + command +
                "' is not supported by the mock's conda (it needs conda's shell function): use `conda run -n NAME "
                "CMD`",
            kUsageError};
  }
  return {where + ": error: argument COMMAND: invalid choice: '" + command + "' (the mock's conda has: " +
              (where == "conda env" ? "create, update, remove, list" : "env, create, remove, run, info, --version") +
              ")",
          kUsageError};
}

// Runs `conda ARGS...`; `invocation` is the whole command line, for the history.
int dispatch(std::vector<std::string> args, const std::string& invocation) {
  if (args.empty() || args.front() == "--help" || args.front() == "-h") {
    print_usage();
    return 0;
  }
  if (args.front() == "--version" || args.front() == "-V") {
    std::cout << "conda " << kVersion << "\n";
    return 0;
  }
  const std::string command = args.front();
  args.erase(args.begin());
  if (command == "env") {
    const std::string sub = args.empty() ? "" : args.front();
    if (!args.empty()) {
      args.erase(args.begin());
    }
    if (sub == "create") {
      return env_create(args, invocation);
    }
    if (sub == "update") {
      return env_update(args, invocation);
    }
    if (sub == "remove") {
      return env_remove(args);
    }
    if (sub == "list") {
      return env_list(args);
    }
    throw unknown_command("conda env", sub);
  }
  if (command == "create") {
    return create(args, invocation);
  }
  if (command == "remove" || command == "uninstall") {
    return remove(args);
  }
  if (command == "run") {
    return run(args);
  }
  if (command == "info") {
    return info(args);
  }
  throw unknown_command("conda", command);
}

} // namespace
} // namespace jobman::mock::tools

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::string invocation = "conda";
  for (const auto& arg : args) {
    invocation += " " + arg;
  }
  namespace tools = jobman::mock::tools;
  return tools::run_on_worker_host(tools::kTool, [&] { return tools::dispatch(args, invocation); });
}
