#include "jobman/util/strings.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

namespace jobman::util {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(text.substr(start));
      return out;
    }
    out.emplace_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string join(std::span<const std::string> items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) {
      out += sep;
    }
    out += items[i];
  }
  return out;
}

std::string_view trim(std::string_view text) {
  const auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!text.empty() && is_space(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && is_space(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

std::string to_upper(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    }
  }
  return out;
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment distance with three rolling rows.
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) {
    prev[j] = j;
  }
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::optional<std::string> closest_match(std::string_view word, std::span<const std::string> candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& candidate : candidates) {
    const std::size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  // Close enough: at most a third of the longer word, and at least one character must match.
  if (!best) {
    return std::nullopt;
  }
  const std::size_t longest = std::max(word.size(), best->size());
  const std::size_t limit = std::max<std::size_t>(1, longest / 3);
  if (best_distance == 0 || best_distance > limit) {
    return std::nullopt;
  }
  return best;
}

namespace {
bool glob_class_match(std::string_view pattern, std::size_t& p, char c) {
  // pattern[p] == '['; on return p points past the closing ']'.
  std::size_t i = p + 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool matched = false;
  bool first = true;
  while (i < pattern.size() && (first || pattern[i] != ']')) {
    first = false;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      if (pattern[i] <= c && c <= pattern[i + 2]) {
        matched = true;
      }
      i += 3;
    } else {
      if (pattern[i] == c) {
        matched = true;
      }
      ++i;
    }
  }
  p = i < pattern.size() ? i + 1 : i;
  return matched != negate;
}
} // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star_p = std::string_view::npos;
  std::size_t star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star_p = p++;
      star_t = t;
      continue;
    }
    if (p < pattern.size() && pattern[p] == '?') {
      ++p;
      ++t;
      continue;
    }
    if (p < pattern.size() && pattern[p] == '[' && pattern.find(']', p + 2) != std::string_view::npos) {
      std::size_t next = p;
      if (glob_class_match(pattern, next, text[t])) {
        p = next;
        ++t;
        continue;
      }
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
      continue;
    }
    if (star_p == std::string_view::npos) {
      return false;
    }
    p = star_p + 1;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

std::optional<long long> parse_int(std::string_view text) {
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
  }
  long long value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

std::optional<long long> parse_duration_seconds(std::string_view text) {
  text = trim(text);
  if (text.empty()) {
    return std::nullopt;
  }
  if (auto whole = parse_int(text)) {
    return *whole >= 0 ? whole : std::nullopt;
  }
  long long total = 0;
  std::size_t i = 0;
  bool any = false;
  while (i < text.size()) {
    std::size_t j = i;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') {
      ++j;
    }
    if (j == i || j == text.size()) {
      return std::nullopt;
    }
    const auto number = parse_int(text.substr(i, j - i));
    long long unit = 0;
    switch (text[j]) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    default: return std::nullopt;
    }
    if (!number || *number > std::numeric_limits<long long>::max() / unit / 2) {
      return std::nullopt;
    }
    total += *number * unit;
    any = true;
    i = j + 1;
  }
  return any ? std::optional<long long>(total) : std::nullopt;
}

std::string format_duration(long long seconds) {
  char buf[32];
  if (seconds < 0) {
    seconds = 0;
  }
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%llds", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm", seconds / 60);
  } else if (seconds < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", seconds / 3600, seconds % 3600 / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", seconds / 86400, seconds % 86400 / 3600);
  }
  return buf;
}

namespace {

// The length of the well-formed UTF-8 sequence at the start of `text` and its code point; 0 when it is not one.
std::size_t utf8_sequence(std::string_view text, char32_t& code_point) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  char32_t value = 0;
  char32_t minimum = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    value = lead & 0x1fU;
    minimum = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    value = lead & 0x0fU;
    minimum = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    value = lead & 0x07U;
    minimum = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < length) {
    return 0;
  }
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0U) != 0x80) {
      return 0;
    }
    value = (value << 6) | (byte(i) & 0x3fU);
  }
  if (value < minimum || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) {
    return 0;
  }
  code_point = value;
  return length;
}

// C1 controls (a terminal takes U+009B as CSI) and the bidirectional overrides and isolates, which reorder what
// follows them on the line.
bool escaped_code_point(char32_t c) {
  return (c >= 0x80 && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

} // namespace

std::string escape_controls(std::string_view text, LineBreaks breaks) {
  std::string out;
  out.reserve(text.size());
  char buf[12];
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c >= 0x20 && c != 0x7f) || (breaks == LineBreaks::keep && (c == '\n' || c == '\t'))) {
        out += static_cast<char>(c);
      } else {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
      ++i;
      continue;
    }
    char32_t code_point = 0;
    const auto length = utf8_sequence(text.substr(i), code_point);
    if (length == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    } else if (escaped_code_point(code_point)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(code_point));
      out += buf;
      i += length;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string without_password(std::string_view url) {
  std::string out(url);
  const auto scheme = out.find("://");
  if (scheme == std::string::npos) {
    return out;
  }
  const auto authority = scheme + 3;
  const auto end = out.find_first_of("/?", authority);
  const auto at = out.rfind('@', end == std::string::npos ? out.size() : end);
  if (at != std::string::npos && at > authority) {
    const auto colon = out.find(':', authority);
    if (colon != std::string::npos && colon < at) {
      out.erase(colon, at - colon);
    }
  }
  // A password given as a query parameter.
  for (auto p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    if (p > 0 && (out[p - 1] == '?' || out[p - 1] == '&')) {
      const auto stop = out.find('&', p);
      out.replace(p, (stop == std::string::npos ? out.size() : stop) - p, "password=...");
    }
  }
  return out;
}

} // namespace jobman::util
