#include "jobman/util/system.hpp"

#include "jobman/util/error.hpp"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <pwd.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace jobman::util {

std::optional<std::string> getenv_nonempty(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

std::string current_user() {
  if (auto user = getenv_nonempty("USER")) {
    return *user;
  }
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_name != nullptr) {
    return pw->pw_name;
  }
  return "uid" + std::to_string(getuid());
}

std::string hostname() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) {
    return "";
  }
  return host;
}

std::filesystem::path home_dir() {
  if (auto home = getenv_nonempty("HOME")) {
    return *home;
  }
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  return "/";
}

std::filesystem::path expand_user(const std::string& path) {
  if (path == "~") {
    return home_dir();
  }
  if (path.rfind("~/", 0) == 0) {
    return home_dir() / path.substr(2);
  }
  return path;
}

void ensure_directory(const std::filesystem::path& dir, unsigned mode) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    if (dir.has_parent_path() && dir.parent_path() != dir && !std::filesystem::is_directory(dir.parent_path(), ec)) {
      // Missing parents get the same mode: a private directory's new parents (JOBMAN_HOME/jobs/ID) are private too.
      ensure_directory(dir.parent_path(), mode);
    }
    if (::mkdir(dir.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
      throw Error("cannot create directory " + dir.string() + ": " + std::strerror(errno));
    }
  }
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw Error("cannot create directory " + dir.string() + ": a file of that name is in the way");
  }
  // An existing directory of ours that is more open than asked (made by hand, or under a loose umask) is closed.
  const auto wanted = static_cast<mode_t>(mode) & 07777;
  if (info.st_uid == ::geteuid() && (info.st_mode & 07777 & ~wanted) != 0) {
    ::chmod(dir.c_str(), info.st_mode & wanted);
  }
}

std::filesystem::path executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path();
}

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error("cannot read " + path.string() + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read " + path.string() + ": " + std::strerror(errno));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    throw Error("cannot read " + path.string() + ": " + std::strerror(errno));
  }
  return buffer.str();
}

std::optional<FileTail> read_file_tail(const std::filesystem::path& path, std::uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  if (end < 0) {
    return std::nullopt;
  }
  FileTail tail;
  tail.size = static_cast<std::uint64_t>(end);
  const std::uint64_t from = tail.size > max_bytes ? tail.size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(from));
  tail.text.resize(static_cast<std::size_t>(tail.size - from));
  in.read(tail.text.data(), static_cast<std::streamsize>(tail.text.size()));
  tail.text.resize(static_cast<std::size_t>(in.gcount()));
  return tail;
}

void write_file_atomic(const std::filesystem::path& path, const std::string& content, unsigned mode) {
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) {
    throw Error("cannot write " + path.string() + ": " + std::strerror(errno));
  }
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      const int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write " + path.string() + ": " + std::strerror(saved));
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path.string() + ": " + std::strerror(saved));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path.string() + ": " + std::strerror(saved));
  }
}

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {
std::string format_tm(std::int64_t epoch_ms, bool utc, const char* pattern) {
  const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  if (utc) {
    gmtime_r(&seconds, &tm);
  } else {
    localtime_r(&seconds, &tm);
  }
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof buf, pattern, &tm);
  return std::string(buf, n);
}
} // namespace

std::string format_utc(std::int64_t epoch_ms) {
  // From the civil calendar directly: gmtime and strftime cost a microsecond, and a report writes 200,000 of these.
  using namespace std::chrono;
  const sys_seconds at{seconds{epoch_ms >= 0 ? epoch_ms / 1000 : -((999 - epoch_ms) / 1000)}};
  const auto day = floor<days>(at);
  const year_month_day date{day};
  const hh_mm_ss<seconds> time{at - day};
  const int year = static_cast<int>(date.year());
  if (year < 0 || year > 9999) {
    return format_tm(epoch_ms, true, "%Y-%m-%dT%H:%M:%SZ");
  }
  std::string text = "0000-00-00T00:00:00Z";
  const auto put = [&text](std::size_t at_index, unsigned value, std::size_t digits) {
    for (std::size_t k = digits; k > 0; --k) {
      text[at_index + k - 1] = static_cast<char>('0' + value % 10);
      value /= 10;
    }
  };
  put(0, static_cast<unsigned>(year), 4);
  put(5, static_cast<unsigned>(date.month()), 2);
  put(8, static_cast<unsigned>(date.day()), 2);
  put(11, static_cast<unsigned>(time.hours().count()), 2);
  put(14, static_cast<unsigned>(time.minutes().count()), 2);
  put(17, static_cast<unsigned>(time.seconds().count()), 2);
  return text;
}

std::optional<std::int64_t> parse_utc(std::string_view text) {
  const std::string copy(text);
  std::tm tm{};
  const char* rest = ::strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) {
    return std::nullopt;
  }
  if (*rest == '.') {
    ++rest;
    if (*rest < '0' || *rest > '9') {
      return std::nullopt;
    }
    while (*rest >= '0' && *rest <= '9') {
      ++rest;
    }
  }
  if (std::strcmp(rest, "Z") != 0) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(::timegm(&tm)) * 1000;
}

std::string format_local(std::int64_t epoch_ms) {
  return format_tm(epoch_ms, false, "%Y-%m-%d %H:%M:%S");
}

bool is_terminal(int fd) {
  return ::isatty(fd) == 1;
}

bool color_enabled(int fd) {
  if (std::getenv("NO_COLOR") != nullptr) {
    return false;
  }
  if (const char* term = std::getenv("TERM"); term != nullptr && std::strcmp(term, "dumb") == 0) {
    return false;
  }
  return is_terminal(fd);
}

} // namespace jobman::util
