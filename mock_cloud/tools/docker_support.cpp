// What the mock's docker commands share: its state directories, clocks, ids and processes, command lines, tables
// and --format.
#include "docker.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace jobman::mock::tools::docker {

fs::path state_dir() {
  return worker_dir(kTool) / ".mock" / "docker";
}

fs::path images_dir() {
  return state_dir() / "images";
}

fs::path containers_dir() {
  return state_dir() / "containers";
}

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string rfc3339(std::int64_t seconds) {
  return format_time(seconds, "%Y-%m-%dT%H:%M:%SZ", TimeZone::kUtc);
}

std::string human_duration(std::int64_t seconds) {
  if (seconds < 1) {
    return "Less than a second";
  }
  if (seconds < 60) {
    return std::to_string(seconds) + (seconds == 1 ? " second" : " seconds");
  }
  const auto minutes = seconds / 60;
  if (minutes < 2) {
    return "About a minute";
  }
  if (minutes < 60) {
    return std::to_string(minutes) + " minutes";
  }
  const auto hours = minutes / 60;
  if (hours < 2) {
    return "About an hour";
  }
  if (hours < 48) {
    return std::to_string(hours) + " hours";
  }
  return std::to_string(hours / 24) + " days";
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    text += (i == 0 ? "" : separator) + parts[i];
  }
  return text;
}

bool is_lower_hex(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool write_exclusive(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  const auto temporary = temporary_beside(path);
  write_file(kTool, temporary, content, WriteMode::kReplace);
  const bool created = ::link(temporary.c_str(), path.c_str()) == 0;
  const int error = errno;
  std::error_code ignored;
  fs::remove(temporary, ignored);
  if (!created && error != EEXIST) {
    throw Failure("docker: cannot write " + path.string() + ": " + std::strerror(error), 1);
  }
  return created;
}

std::string stable_hex(const std::string& text) {
  std::string digits;
  for (std::uint64_t salt = 1; salt <= 4; ++salt) {
    std::uint64_t hash = 14695981039346656037ULL ^ (salt * 0x9E3779B97F4A7C15ULL);
    for (const unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ULL;
    }
    std::array<char, 17> part{};
    std::snprintf(part.data(), part.size(), "%016llx", static_cast<unsigned long long>(hash));
    digits += part.data();
  }
  return digits;
}

std::string random_hex() {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::random_device device;
  std::string digits;
  for (int i = 0; i < 64; ++i) {
    digits += kDigits[device() % kDigits.size()];
  }
  return digits;
}

bool await(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return done();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::optional<long long> process_start(pid_t pid) {
  if (pid <= 0) {
    return std::nullopt;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto name_end = stat.rfind(')');
  if (name_end == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream rest(stat.substr(name_end + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) {
    fields.push_back(field);
  }
  // fields[0] is field 3 (the state), so field 22 is fields[19].
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") {
    return std::nullopt;
  }
  return std::strtoll(fields[19].c_str(), nullptr, 10);
}

bool same_process(pid_t pid, long long start) {
  const auto now = process_start(pid);
  return now && *now == start;
}

// ---------------------------------------------------------------------------------------------------------------
// Command lines, tables and --format.

Failure usage_error(const std::string& command, const std::string& message) {
  return {message + "\nSee 'docker " + command + " --help'.", kDockerError};
}

CommandLine parse_args(const std::vector<std::string>& args, std::span<const OptionSpec> specs,
                       const std::string& command, FirstOperand first_operand) {
  const auto read_flag = [&](const std::vector<std::string>& words, std::size_t& i, CommandLine& line) {
    const auto& arg = words[i];
    if (arg.size() > 2 && arg.starts_with("--")) {
      const auto equals = arg.find('=');
      const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
      const auto spec = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == name; });
      if (spec == specs.end()) {
        throw usage_error(command, "unknown flag: --" + name);
      }
      std::string value = "true";
      if (equals != std::string::npos) {
        value = arg.substr(equals + 1);
      } else if (spec->takes_value) {
        if (i + 1 >= words.size()) {
          throw usage_error(command, "flag needs an argument: --" + name);
        }
        value = words[++i];
      }
      line.options[std::string(spec->name)].push_back(value);
      return;
    }
    for (std::size_t j = 1; j < arg.size(); ++j) {
      const char letter = arg[j];
      const auto spec =
          std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.letter == letter; });
      if (spec == specs.end()) {
        throw usage_error(command, std::string("unknown shorthand flag: '") + letter + "' in " + arg);
      }
      if (!spec->takes_value) {
        line.options[std::string(spec->name)].emplace_back("true");
        continue;
      }
      std::string value = arg.substr(j + 1);
      if (value.starts_with('=')) {
        value.erase(0, 1);
      }
      if (value.empty()) {
        if (i + 1 >= words.size()) {
          throw usage_error(command, std::string("flag needs an argument: '") + letter + "' in -" + letter);
        }
        value = words[++i];
      }
      line.options[std::string(spec->name)].push_back(value);
      return;
    }
  };
  return parse_command_line(args, first_operand, read_flag);
}

namespace {

// The number of characters in UTF-8 `text`.
std::size_t display_width(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U; }));
}

} // namespace

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], display_width(row[i]));
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        line += std::string(widths[i] - display_width(row[i]) + 3, ' ');
      }
    }
    std::cout << line << "\n";
  }
}

std::string apply_format(const json& object, const std::string& format) {
  static const std::regex field(R"(\{\{\s*(json\s+)?\.([A-Za-z0-9_.]*)\s*\}\})");
  std::string out;
  std::string literal; // The format without the fields it understood: any "{{" left there is a form it does not.
  auto rest = format.cbegin();
  for (std::sregex_iterator it(format.cbegin(), format.cend(), field), end; it != end; ++it) {
    out.append(rest, (*it)[0].first);
    literal.append(rest, (*it)[0].first);
    rest = (*it)[0].second;
    const json* value = &object;
    for (const auto& key : split((*it)[2].str(), '.')) {
      if (key.empty()) {
        continue;
      }
      value = value->is_object() && value->contains(key) ? &(*value)[key] : nullptr;
      if (value == nullptr) {
        break;
      }
    }
    if (value == nullptr) {
      out += "<no value>";
    } else if ((*it)[1].matched || !(value->is_string())) {
      out += value->dump();
    } else {
      out += value->get<std::string>();
    }
  }
  out.append(rest, format.cend());
  literal.append(rest, format.cend());
  if (literal.find("{{") != std::string::npos) {
    throw Failure("docker: the mock's docker understands only {{.Field}} and {{json .Field}} in --format", 1);
  }
  return out;
}

} // namespace jobman::mock::tools::docker
