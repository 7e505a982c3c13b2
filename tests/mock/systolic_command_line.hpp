// systolic-train's command line as the tests read it: argv and an environment of their own.
#pragma once

#include "systolic/train.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace jobman::test {

// Parses `args` (without the program's name) with `env` as the whole environment.
inline systolic::ParsedCommandLine parse_systolic_command_line(std::vector<std::string> args,
                                                               const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), "systolic-train");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& arg : args) {
    argv.push_back(arg.c_str());
  }
  return systolic::parse_command_line(static_cast<int>(argv.size()), argv.data(),
                                      [&env](const std::string& name) -> std::optional<std::string> {
                                        const auto it = env.find(name);
                                        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
                                      });
}

} // namespace jobman::test
