// What the mock's docker and conda share.
#include "worker_tool.hpp"

#include <array>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace jobman::mock::tools {

fs::path worker_dir(std::string_view tool) {
  const char* dir = std::getenv("MOCK_TPU_WORKER_DIR");
  if (dir == nullptr || *dir == '\0') {
    const std::string name(tool);
    throw Failure(
        name + ": MOCK_TPU_WORKER_DIR is not set: this " + name + " only runs on the mock cloud's worker hosts", 1);
  }
  return dir;
}

int run_on_worker_host(std::string_view tool, const std::function<int()>& command) {
  try {
    worker_dir(tool);
    return command();
  } catch (const Failure& failure) {
    std::cout.flush();
    std::cerr << failure.what() << "\n";
    return failure.status();
  } catch (const std::exception& error) {
    std::cout.flush();
    std::cerr << tool << ": " << error.what() << "\n";
    return 1;
  }
}

bool CommandLine::on(std::string_view name) const {
  const auto it = options.find(name);
  return it != options.end() && it->second.back() != "false" && it->second.back() != "0";
}

std::optional<std::string> CommandLine::value(std::string_view name) const {
  const auto it = options.find(name);
  return it == options.end() ? std::nullopt : std::optional<std::string>(it->second.back());
}

std::vector<std::string> CommandLine::values(std::string_view name) const {
  const auto it = options.find(name);
  return it == options.end() ? std::vector<std::string>{} : it->second;
}

CommandLine parse_command_line(const std::vector<std::string>& args, FirstOperand first_operand,
                               const OptionReader& read_option) {
  CommandLine line;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (arg == "--") {
      line.operands.insert(line.operands.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      read_option(args, i, line);
      continue;
    }
    if (first_operand == FirstOperand::kEndsOptions) {
      line.operands.insert(line.operands.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    line.operands.push_back(arg);
  }
  return line;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) {
      return parts;
    }
    start = end + 1;
  }
}

std::string format_time(std::time_t seconds, const char* format, TimeZone zone) {
  std::tm parts{};
  if (zone == TimeZone::kUtc) {
    ::gmtime_r(&seconds, &parts);
  } else {
    ::localtime_r(&seconds, &parts);
  }
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), format, &parts);
  return text.data();
}

void write_file(std::string_view tool, const fs::path& path, const std::string& content, WriteMode mode) {
  std::ofstream out(path, mode == WriteMode::kAppend ? std::ios::app : std::ios::trunc);
  out << content;
  if (!out.flush()) {
    throw Failure(std::string(tool) + ": cannot write " + path.string(), 1);
  }
}

fs::path temporary_beside(const fs::path& path) {
  return path.parent_path() / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()));
}

void write_atomic(std::string_view tool, const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  const auto temporary = temporary_beside(path);
  write_file(tool, temporary, content, WriteMode::kReplace);
  fs::rename(temporary, path);
}

std::optional<json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) {
    return std::nullopt;
  }
  json value = json::parse(in, nullptr, false);
  if (value.is_discarded()) {
    return std::nullopt;
  }
  return value;
}

} // namespace jobman::mock::tools
