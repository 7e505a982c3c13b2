#include "jobman/util/line_patterns.hpp"

#include "jobman/util/error.hpp"

#include <charconv>
#include <cstdlib>
#include <regex.h>
#include <vector>

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

namespace {

constexpr int kProgressFlags = REG_EXTENDED | REG_ICASE | REG_NEWLINE;

// Digits only, and a value that fits: a step or a total.
std::optional<std::int64_t> digits(std::string_view text) {
  std::int64_t value = 0;
  if (text.empty() || text.size() > 18) {
    return std::nullopt;
  }
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.front() == '-' || text.front() == '+') {
    return std::nullopt;
  }
  return value;
}

constexpr std::string_view kStepExample = "step=([0-9]+)";
constexpr std::string_view kLossExample = "loss=([-+.0-9e]+|nan|inf)";

} // namespace

namespace detail {

// A compiled pattern whose groups capture a value (`what`, for messages: "the step", "the loss").
struct CapturingPattern {
  regex_t re{};
  CapturingPattern(const std::string& pattern, std::string_view what, std::string_view example) {
    if (const int code = ::regcomp(&re, pattern.c_str(), kProgressFlags); code != 0) {
      std::string why = describe(code, &re);
      ::regfree(&re);
      throw Error("'" + pattern + "' is not a valid extended regular expression: " + why);
    }
    if (re.re_nsub == 0) {
      ::regfree(&re);
      throw Error("'" + pattern + "' has no group to capture " + std::string(what) + ", as in '" +
                  std::string(example) + "'");
    }
  }
  ~CapturingPattern() { ::regfree(&re); }
  CapturingPattern(const CapturingPattern&) = delete;
  CapturingPattern& operator=(const CapturingPattern&) = delete;
  CapturingPattern(CapturingPattern&&) = delete;
  CapturingPattern& operator=(CapturingPattern&&) = delete;

  // Why `pattern` cannot capture (see the constructor); nullopt when it can.
  static std::optional<std::string> check(const std::string& pattern, std::string_view what, std::string_view example) {
    regex_t re{};
    const int code = ::regcomp(&re, pattern.c_str(), kProgressFlags);
    std::optional<std::string> why;
    if (code != 0) {
      why = describe(code, &re);
    } else if (re.re_nsub == 0) {
      why = "it has no group to capture " + std::string(what) + ", as in '" + std::string(example) + "'";
    }
    ::regfree(&re);
    return why;
  }

  // Calls `fn` with the text of each group that took part in the match of `line`, in order, until it returns true;
  // false when the line does not match.
  template <typename Fn> bool each_group(std::string_view line, Fn&& fn) const {
    const std::string text(line.substr(0, LinePatterns::kMaxLineBytes));
    std::vector<regmatch_t> groups(re.re_nsub + 1);
    if (::regexec(&re, text.c_str(), groups.size(), groups.data(), 0) != 0) {
      return false;
    }
    for (std::size_t i = 1; i < groups.size(); ++i) {
      if (groups[i].rm_so < 0) {
        continue;
      }
      if (fn(std::string_view(text).substr(static_cast<std::size_t>(groups[i].rm_so),
                                           static_cast<std::size_t>(groups[i].rm_eo - groups[i].rm_so)))) {
        break;
      }
    }
    return true;
  }
};

} // namespace detail

using detail::CapturingPattern;

struct ProgressPattern::Compiled : CapturingPattern {
  explicit Compiled(const std::string& pattern) : CapturingPattern(pattern, "the step", kStepExample) {}
};

ProgressPattern::ProgressPattern(const std::string& pattern) : compiled_(std::make_unique<Compiled>(pattern)) {}
ProgressPattern::~ProgressPattern() = default;
ProgressPattern::ProgressPattern(ProgressPattern&&) noexcept = default;
ProgressPattern& ProgressPattern::operator=(ProgressPattern&&) noexcept = default;

std::optional<std::string> ProgressPattern::check(const std::string& pattern) {
  return CapturingPattern::check(pattern, "the step", kStepExample);
}

std::optional<ProgressPattern::Reading> ProgressPattern::read(std::string_view line) const {
  std::optional<Reading> reading;
  compiled_->each_group(line, [&](std::string_view group) {
    const auto value = digits(group);
    if (!value) {
      return false;
    }
    if (!reading) {
      reading = Reading{*value, std::nullopt};
      return false;
    }
    reading->total = *value;
    return true;
  });
  return reading;
}

struct LossPattern::Compiled : CapturingPattern {
  explicit Compiled(const std::string& pattern) : CapturingPattern(pattern, "the loss", kLossExample) {}
};

LossPattern::LossPattern(const std::string& pattern) : compiled_(std::make_unique<Compiled>(pattern)) {}
LossPattern::~LossPattern() = default;
LossPattern::LossPattern(LossPattern&&) noexcept = default;
LossPattern& LossPattern::operator=(LossPattern&&) noexcept = default;

std::optional<std::string> LossPattern::check(const std::string& pattern) {
  return CapturingPattern::check(pattern, "the loss", kLossExample);
}

std::optional<double> LossPattern::read(std::string_view line) const {
  std::optional<double> loss;
  compiled_->each_group(line, [&](std::string_view group) {
    // A number as a whole, or nan or inf in any case and sign ("-nan", as printf writes it).
    const std::string text(group);
    if (text.empty() || text.size() > 64) {
      return false;
    }
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) {
      return false;
    }
    loss = value;
    return true;
  });
  return loss;
}

} // namespace jobman::util
