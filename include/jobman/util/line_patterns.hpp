// A set of POSIX extended regular expressions matched against lines of output, case-insensitively: what tells bad
// hardware in a workload's log. glibc's matcher runs in bounded stack on any input, unlike std::regex, so a line of a
// megabyte from a progress bar cannot crash the supervisor; only a line's first kMaxLineBytes are looked at anyway.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobman::util {

class LinePatterns {
public:
  // How much of a line is matched.
  static constexpr std::size_t kMaxLineBytes = 8192;

  // Compiles every pattern; throws jobman::Error naming the first that is not a valid extended regular expression.
  explicit LinePatterns(const std::vector<std::string>& patterns);
  ~LinePatterns();
  LinePatterns(const LinePatterns&) = delete;
  LinePatterns& operator=(const LinePatterns&) = delete;
  LinePatterns(LinePatterns&&) noexcept;
  LinePatterns& operator=(LinePatterns&&) noexcept;

  // Why `pattern` is not a valid extended regular expression; nullopt when it is.
  static std::optional<std::string> check(const std::string& pattern);

  // The index of the first pattern that matches somewhere in `line`, if any.
  [[nodiscard]] std::optional<std::size_t> match(std::string_view line) const;

  // The first line of `text` (lines end at '\n') that a pattern matches, without its newline.
  [[nodiscard]] std::optional<std::string> first_match(std::string_view text) const;

  [[nodiscard]] bool empty() const;

private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// Training progress in a line of output: an extended regular expression (matched case-insensitively, as LinePatterns)
// whose first group that captures digits gives the step, and a later group that captures digits, if any, the total.
// "step[[:space:]]*[=:][[:space:]]*([0-9]+)" reads "step=611 loss=2.3"; with "(/([0-9]+))?" after it, "step=611/2000"
// too. Bounded as LinePatterns is: only a line's first LinePatterns::kMaxLineBytes are looked at.
class ProgressPattern {
public:
  struct Reading {
    std::int64_t step = 0;
    std::optional<std::int64_t> total;
  };

  // Throws jobman::Error when `pattern` is not valid (see check()).
  explicit ProgressPattern(const std::string& pattern);
  ~ProgressPattern();
  ProgressPattern(const ProgressPattern&) = delete;
  ProgressPattern& operator=(const ProgressPattern&) = delete;
  ProgressPattern(ProgressPattern&&) noexcept;
  ProgressPattern& operator=(ProgressPattern&&) noexcept;

  // Why `pattern` cannot read progress (not a valid extended regular expression, or no group to capture the step);
  // nullopt when it can.
  static std::optional<std::string> check(const std::string& pattern);

  // What `line` says of the progress, if anything.
  [[nodiscard]] std::optional<Reading> read(std::string_view line) const;

  // Calls `fn` with each reading in `text` (lines end at '\n'), in order.
  template <typename Fn> void each(std::string_view text, Fn&& fn) const {
    while (!text.empty()) {
      const auto end = text.find('\n');
      if (auto reading = read(text.substr(0, end))) {
        fn(*reading);
      }
      if (end == std::string_view::npos) {
        break;
      }
      text.remove_prefix(end + 1);
    }
  }

private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

// The loss in a line of output: an extended regular expression (matched case-insensitively) whose first group that
// captures a number as a whole (strtod's: "2.31", "1e-3", "nan", "-inf") gives the loss. Bounded as LinePatterns is.
class LossPattern {
public:
  // Throws jobman::Error when `pattern` is not valid (see check()).
  explicit LossPattern(const std::string& pattern);
  ~LossPattern();
  LossPattern(const LossPattern&) = delete;
  LossPattern& operator=(const LossPattern&) = delete;
  LossPattern(LossPattern&&) noexcept;
  LossPattern& operator=(LossPattern&&) noexcept;

  // Why `pattern` cannot read a loss (not a valid extended regular expression, or no group); nullopt when it can.
  static std::optional<std::string> check(const std::string& pattern);

  // The loss `line` gives, if any.
  [[nodiscard]] std::optional<double> read(std::string_view line) const;

private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

} // namespace jobman::util
