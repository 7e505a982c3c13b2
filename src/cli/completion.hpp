// Shell completion scripts generated from the CLI11 definition, so they cannot drift from it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace jobman::cli {

// The bash completion script for `app`.
std::string bash_completion(const CLI::App& app);
// The zsh completion script (#compdef) for `app`.
std::string zsh_completion(const CLI::App& app);
// The fish completion script for `app`.
std::string fish_completion(const CLI::App& app);

} // namespace jobman::cli
