// What the mock's conda commands share: where environments live, command lines, environment files and the solve.
#include "conda.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <system_error>
#include <yaml-cpp/yaml.h>

namespace jobman::mock::tools::conda {

fs::path base_prefix() {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    throw Failure("conda: HOME is not set", 1);
  }
  return fs::path(home) / "miniconda3";
}

fs::path envs_dir() {
  return base_prefix() / "envs";
}

fs::path prefix_of(const std::string& name) {
  return name == "base" ? base_prefix() : envs_dir() / name;
}

bool is_environment(const fs::path& prefix) {
  std::error_code ec;
  return prefix == base_prefix() || fs::is_directory(prefix / "conda-meta", ec);
}

Failure not_an_environment(const fs::path& prefix) {
  return {"EnvironmentLocationNotFound: Not a conda environment: " + prefix.string(), 1};
}

std::string timestamp() {
  return format_time(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()), "%Y-%m-%d %H:%M:%S",
                     TimeZone::kLocal);
}

json read_object(const fs::path& path) {
  auto object = read_json(path);
  return object && object->is_object() ? *object : json::object();
}

// ---------------------------------------------------------------------------------------------------------------
// Command lines.

Failure usage_error(const std::string& command, const std::string& message) {
  return {"usage: conda " + command + " [options]\nconda " + command + ": error: " + message, kUsageError};
}

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

namespace {

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

} // namespace

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

std::vector<std::string> specs_of(const std::vector<Dependency>& dependencies, const std::string& manager) {
  std::vector<std::string> specs;
  for (const auto& dependency : dependencies) {
    if (dependency.manager == manager) {
      specs.push_back(dependency.spec);
    }
  }
  return specs;
}

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

} // namespace jobman::mock::tools::conda
