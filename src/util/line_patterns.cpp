#include "jobman/util/line_patterns.hpp"

#include "jobman/util/error.hpp"

#include <regex.h>

namespace jobman::util {

namespace {

constexpr int kFlags = REG_EXTENDED | REG_ICASE | REG_NOSUB | REG_NEWLINE;

std::string describe(int code, const regex_t* re) {
  char text[256];
  ::regerror(code, re, text, sizeof text);
  return text;
}

} // namespace

struct LinePatterns::Compiled {
  regex_t re{};
  explicit Compiled(const std::string& pattern) {
    if (const int code = ::regcomp(&re, pattern.c_str(), kFlags); code != 0) {
      std::string why = describe(code, &re);
      ::regfree(&re);
      throw Error("'" + pattern + "' is not a valid extended regular expression: " + why);
    }
  }
  ~Compiled() { ::regfree(&re); }
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  Compiled(Compiled&&) = delete;
  Compiled& operator=(Compiled&&) = delete;
};

LinePatterns::LinePatterns(const std::vector<std::string>& patterns) {
  compiled_.reserve(patterns.size());
  for (const auto& pattern : patterns) {
    compiled_.push_back(std::make_unique<Compiled>(pattern));
  }
}

LinePatterns::~LinePatterns() = default;
LinePatterns::LinePatterns(LinePatterns&&) noexcept = default;
LinePatterns& LinePatterns::operator=(LinePatterns&&) noexcept = default;

std::optional<std::string> LinePatterns::check(const std::string& pattern) {
  regex_t re{};
  const int code = ::regcomp(&re, pattern.c_str(), kFlags);
  std::optional<std::string> why;
  if (code != 0) {
    why = describe(code, &re);
  }
  ::regfree(&re);
  return why;
}

std::optional<std::size_t> LinePatterns::match(std::string_view line) const {
  if (compiled_.empty()) {
    return std::nullopt;
  }
  // regexec reads a NUL-terminated string: a copy of the part looked at, with any NUL in it ending it early.
  const std::string text(line.substr(0, kMaxLineBytes));
  for (std::size_t i = 0; i < compiled_.size(); ++i) {
    if (::regexec(&compiled_[i]->re, text.c_str(), 0, nullptr, 0) == 0) {
      return i;
    }
  }
  return std::nullopt;
}

std::optional<std::string> LinePatterns::first_match(std::string_view text) const {
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    if (match(line)) {
      return std::string(line);
    }
    if (end == std::string_view::npos) {
      break;
    }
    text.remove_prefix(end + 1);
  }
  return std::nullopt;
}

bool LinePatterns::empty() const {
  return compiled_.empty();
}

} // namespace jobman::util
