// A set of POSIX extended regular expressions matched against lines of output, case-insensitively: what tells bad
// hardware in a workload's log. glibc's matcher runs in bounded stack on any input, unlike std::regex, so a line of a
// megabyte from a progress bar cannot crash the supervisor; only a line's first kMaxLineBytes are looked at anyway.
#pragma once

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

} // namespace jobman::util
