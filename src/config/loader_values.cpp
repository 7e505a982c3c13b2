// Typed values out of YAML nodes (string, bool, integer, duration, number) and the checks on single values: labels,
// network tags, variable names.
#include "loader_parts.hpp"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace jobman::config::detail {

namespace {

std::string range_text(long long min, long long max) {
  if (max == LLONG_MAX || max == INT_MAX) {
    return "must be at least " + std::to_string(min);
  }
  return "must be between " + std::to_string(min) + " and " + std::to_string(max);
}

// The patterns labels and tags are checked against, each compiled once.
const std::regex& label_key_form() {
  static const std::regex pattern("[a-z][a-z0-9_-]{0,62}");
  return pattern;
}

const std::regex& label_value_form() {
  static const std::regex pattern("[a-z0-9_-]{0,63}");
  return pattern;
}

const std::regex& tag_form() {
  static const std::regex pattern("[a-z]([-a-z0-9]{0,61}[a-z0-9])?");
  return pattern;
}

} // namespace

// ---- Typed values ----

std::optional<std::string> as_string(Problems& p, const Node& node, const std::string& path) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (!node.is_scalar()) {
    p.error(node.origin, path, "expected a string, got " + detail::describe_kind(node));
    return std::nullopt;
  }
  return node.text;
}

std::optional<bool> as_bool(Problems& p, const Node& node, const std::string& path) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (node.is_scalar()) {
    const std::string word = util::to_lower(node.text);
    if (word == "true" || word == "yes" || word == "on") {
      return true;
    }
    if (word == "false" || word == "no" || word == "off") {
      return false;
    }
    // The Python jobman tests its flags for truth, so 0 and 1 work there as false and true.
    if (const auto number = util::parse_int(node.text)) {
      return *number != 0;
    }
  }
  p.error(node.origin, path, "expected true or false, got " + detail::describe_kind(node));
  return std::nullopt;
}

std::optional<long long> as_int(Problems& p, const Node& node, const std::string& path, long long min, long long max) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (!node.is_scalar()) {
    p.error(node.origin, path, "expected an integer, got " + detail::describe_kind(node));
    return std::nullopt;
  }
  const auto value = util::parse_int(node.text);
  if (!value) {
    const std::string_view digits = std::string_view(node.text).substr(node.text.starts_with('-') ? 1 : 0);
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
      p.error(node.origin, path, "integer out of range: " + node.text, range_text(min, max));
    } else {
      p.error(node.origin, path, "expected an integer, got '" + node.text + "'");
    }
    return std::nullopt;
  }
  if (*value < min || *value > max) {
    p.error(node.origin, path, range_text(min, max) + ", got " + node.text);
    return std::nullopt;
  }
  return value;
}

std::optional<long long> as_duration(Problems& p, const Node& node, const std::string& path, long long min_seconds) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (!node.is_scalar()) {
    p.error(node.origin, path, "expected a duration such as 30s or 5m, got " + detail::describe_kind(node));
    return std::nullopt;
  }
  const auto seconds = util::parse_duration_seconds(node.text);
  if (!seconds) {
    p.error(node.origin, path, "'" + node.text + "' is not a duration",
            "write e.g. 30s, 5m, 1h30m, or a number of seconds");
    return std::nullopt;
  }
  if (*seconds < min_seconds) {
    p.error(node.origin, path, "must be at least " + std::to_string(min_seconds) + "s, got '" + node.text + "'");
    return std::nullopt;
  }
  return seconds;
}

std::optional<double> as_double(Problems& p, const Node& node, const std::string& path, double min) {
  if (node.unresolved) {
    return std::nullopt;
  }
  if (node.is_scalar() && !node.text.empty()) {
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(node.text.c_str(), &end);
    if (errno == 0 && end == node.text.c_str() + node.text.size() && std::isfinite(value)) {
      if (value < min) {
        p.error(node.origin, path, "must be at least " + std::to_string(static_cast<int>(min)) + ", got " + node.text);
        return std::nullopt;
      }
      return value;
    }
  }
  p.error(node.origin, path, "expected a number, got " + detail::describe_kind(node));
  return std::nullopt;
}

// ---- Checks on single values ----

const std::regex& variable_name_form() {
  static const std::regex pattern("[A-Za-z_][A-Za-z0-9_-]*");
  return pattern;
}

bool matches(const std::string& text, const std::regex& pattern) {
  return std::regex_match(text, pattern);
}

void check_label(Problems& p, const Origin& key_at, const Origin& value_at, const std::string& path,
                 const std::string& key, const std::string& value) {
  if (!matches(key, label_key_form())) {
    p.error(key_at, path, "label key '" + key + "' is not valid",
            "label keys start with a lowercase letter and use lowercase letters, digits, '_' and '-', "
            "at most 63 characters");
  }
  if (!matches(value, label_value_form())) {
    p.error(value_at, path, "label value '" + value + "' is not valid",
            "label values use lowercase letters, digits, '_' and '-', at most 63 characters");
  }
}

void check_tag(Problems& p, const Origin& at, const std::string& path, const std::string& tag) {
  if (!matches(tag, tag_form())) {
    p.error(at, path, "network tag '" + tag + "' is not valid",
            "tags start with a lowercase letter and use lowercase letters, digits and '-', at most 63 characters");
  }
}

std::string hosts_text(int hosts) {
  return hosts == 1 ? "1 host: 0" : std::to_string(hosts) + " hosts: 0-" + std::to_string(hosts - 1);
}

} // namespace jobman::config::detail
