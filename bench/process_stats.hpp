// What the benchmarks read of a running process: its CPU time and its memory from /proc, a daemon's counters from
// its log.
#pragma once

#include "jobman/util/strings.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <unistd.h>

namespace jobman::bench {

// A small file's text ("" when it cannot be read).
inline std::string proc_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// utime + stime of a process, in seconds.
inline double cpu_seconds(pid_t pid) {
  const auto text = proc_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) {
    return 0;
  }
  const auto fields = util::split(text.substr(paren + 2), ' ');
  return (std::stod(fields[11]) + std::stod(fields[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A field of /proc/PID/status in KiB (VmHWM, VmRSS).
inline long status_kib(pid_t pid, const std::string& field) {
  std::istringstream in(proc_text("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(field + ":")) {
      return std::stol(line.substr(field.size() + 1));
    }
  }
  return 0;
}

// The counters `jobman daemon` writes to its log as it stops ("supervisor stats: ticks=.. list_calls=.. ..."), the
// last such line of `log_file`; a counter missing is 0.
inline std::map<std::string, double> daemon_stats(const std::filesystem::path& log_file) {
  const auto log = proc_text(log_file);
  const auto at = log.rfind("supervisor stats:");
  std::map<std::string, double> stats;
  if (at != std::string::npos) {
    std::istringstream words(log.substr(at, log.find('\n', at) - at));
    std::string word;
    while (words >> word) {
      if (const auto eq = word.find('='); eq != std::string::npos) {
        stats[word.substr(0, eq)] = std::stod(word.substr(eq + 1));
      }
    }
  }
  return stats;
}

} // namespace jobman::bench
