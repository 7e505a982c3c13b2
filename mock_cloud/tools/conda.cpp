// The mock cloud's conda, for worker hosts: environments are recorded under $HOME/miniconda3, commands run in them.
// What its commands share (prefixes, command lines, environment files, the solve) is in conda_support.cpp.
#include "conda.hpp"

#include "jobman/util/process.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <unistd.h>
#include <utility>
#include <vector>

namespace jobman::mock::tools::conda {
namespace {

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

// Runs `argv` with its output discarded; true when it exits 0.
bool run_quietly(const std::vector<std::string>& argv) {
  util::ProcessBuilder process(argv);
  process.input(util::Stream::null()).output(util::Stream::null()).error(util::Stream::null());
  auto child = process.spawn();
  return child.exec_error == 0 && util::wait_exit(child.pid) == 0;
}

// The environment's Python: a venv of the host's python3 made by the mock's python3 (tools/python3), with the mock's
// pip, which records the `pip:` dependencies as installed (their metadata, not their code), so that `pip show` in
// the environment finds what the file asked for. Without the mock's python3, bin/python and python3 are links to the
// host's.
void make_python(const fs::path& prefix, const fs::path& host, const std::vector<Dependency>& dependencies) {
  std::error_code ec;
  const auto standin = fs::read_symlink("/proc/self/exe", ec).parent_path() / "python3";
  if (ec || !fs::exists(standin, ec)) {
    fs::create_symlink(host, prefix / "bin" / "python3");
    fs::create_symlink(host, prefix / "bin" / "python");
    return;
  }
  if (!run_quietly({standin.string(), "-m", "venv", prefix.string()})) {
    throw Failure("CondaEnvException: cannot make the environment's Python in " + prefix.string(), 1);
  }
  const auto pip = specs_of(dependencies, "pip");
  if (pip.empty()) {
    return;
  }
  std::vector<std::string> install = {(prefix / "bin" / "python").string(), "-m", "pip", "install", "--quiet"};
  install.insert(install.end(), pip.begin(), pip.end());
  if (!run_quietly(install)) {
    throw Failure("Pip subprocess error:\nERROR: the mock's pip could not record " + pip.front() +
                      "\nCondaEnvException: Pip failed",
                  1);
  }
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
    make_python(staging.path(), *python, request.dependencies);
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
  util::ProcessBuilder process(options.operands);
  process.env("PATH", path == nullptr || *path == '\0' ? bin : bin + ":" + path)
      .env("CONDA_PREFIX", prefix.string())
      .env("CONDA_DEFAULT_ENV", given_prefix ? prefix.string() : name.value_or("base"))
      .env("CONDA_SHLVL", "1");
  const auto variables = read_object(record_file(prefix)).value("variables", json::object());
  if (variables.is_object()) {
    for (const auto& [key, value] : variables.items()) {
      // A name no environment can hold is left out, as setenv refuses it.
      if (value.is_string() && !key.empty() && key.find('=') == std::string::npos) {
        process.env(key, value.get<std::string>());
      }
    }
  }
  std::cout.flush();
  // The command is looked up on the environment's PATH.
  const int error = process.exec();
  throw Failure("conda run: " + options.operands.front() + ": " + std::strerror(error), error == ENOENT ? 127 : 126);
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
} // namespace jobman::mock::tools::conda

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::string invocation = "conda";
  for (const auto& arg : args) {
    invocation += " " + arg;
  }
  namespace conda = jobman::mock::tools::conda;
  return jobman::mock::tools::run_on_worker_host(conda::kTool, [&] { return conda::dispatch(args, invocation); });
}
