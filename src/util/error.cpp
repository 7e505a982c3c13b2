#include "jobman/util/error.hpp"

namespace jobman {

std::string Diagnostic::format() const {
  std::string out = where.file.empty() ? std::string("<config>") : where.file;
  if (where.line > 0) {
    out += ":" + std::to_string(where.line);
    if (where.column > 0) {
      out += ":" + std::to_string(where.column);
    }
  }
  out += ": ";
  if (!where.key_path.empty()) {
    out += where.key_path + ": ";
  }
  out += message;
  if (!hint.empty()) {
    out += " (" + hint + ")";
  }
  return out;
}

namespace {
std::string join_diagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) {
    if (!out.empty()) {
      out += '\n';
    }
    out += d.format();
  }
  return out;
}
} // namespace

ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : Error(join_diagnostics(diagnostics), ExitCode::usage), diagnostics_(std::move(diagnostics)) {}

} // namespace jobman
