// --set overrides and sweeps: command-line values read as YAML, put at dotted key paths, and the swept keys of the
// sweep section and of --sweep.
#include "loader_parts.hpp"
#include "schema.hpp"

namespace jobman::config::detail {

namespace {

// Parses a command-line value as YAML; text that does not read as a value (or reads as a block mapping,
// as in "echo a: b") is taken as a plain string.
Node parse_argument_value(const std::string& text, const Origin& origin, const std::string& path,
                          std::vector<Diagnostic>& errors) {
  std::vector<Diagnostic> parse_errors;
  Node value = detail::parse_yaml(text, origin.file, parse_errors);
  const std::string_view trimmed = util::trim(text);
  const bool flow = !trimmed.empty() && (trimmed.front() == '[' || trimmed.front() == '{' || trimmed.front() == '"' ||
                                         trimmed.front() == '\'');
  if (!parse_errors.empty() && flow) {
    std::string message = parse_errors.front().message;
    errors.push_back(detail::make_diagnostic(origin, path, "cannot read the value '" + text + "': " + message));
  } else if (!parse_errors.empty() || (value.is_mapping() && !flow) ||
             value.is_sequence() != (flow && trimmed.front() == '[')) {
    value = detail::make_scalar(text, origin);
  }
  detail::set_origin(value, origin);
  return value;
}

// "key.path" and the value text of a "key.path=value" argument; nullopt (reported) when malformed.
std::optional<std::pair<std::string, std::string>> split_argument(const std::string& arg, const Origin& origin,
                                                                  const std::string& example,
                                                                  std::vector<Diagnostic>& errors) {
  const auto eq = arg.find('=');
  const std::string path = eq == std::string::npos ? "" : std::string(util::trim(arg.substr(0, eq)));
  bool valid = !path.empty();
  for (const auto& part : util::split(path, '.')) {
    valid = valid && !part.empty();
  }
  if (eq == std::string::npos || !valid) {
    errors.push_back(detail::make_diagnostic(origin, "", "'" + arg + "' is not of the form key.path=value",
                                             "e.g. " + origin.file + " " + example));
    return std::nullopt;
  }
  return std::pair(path, arg.substr(eq + 1));
}

void add_axis(std::vector<SweepAxis>& axes, SweepAxis axis, const std::string& shown_path, Problems& p, bool replace) {
  if (auto problem = detail::check_key_path(axis.path)) {
    p.error(axis.origin, shown_path, problem->message, problem->hint);
    return;
  }
  if (axis.values.empty()) {
    p.error(axis.origin, shown_path, "empty list of values", "a sweep needs at least one value");
    return;
  }
  for (auto& existing : axes) {
    if (existing.path == axis.path) {
      if (!replace) {
        p.error(axis.origin, shown_path, "swept twice");
      } else {
        existing = std::move(axis);
      }
      return;
    }
  }
  axes.push_back(std::move(axis));
}

void flatten_sweep(const Node& node, const std::string& prefix, std::vector<SweepAxis>& axes, Problems& p) {
  for (const auto& entry : node.entries) {
    const std::string path = join_path(prefix, entry.key);
    const std::string shown = "sweep." + path;
    if (entry.value.is_mapping()) {
      flatten_sweep(entry.value, path, axes, p);
    } else if (entry.value.is_sequence()) {
      add_axis(axes, SweepAxis{path, entry.value.items, entry.key_origin}, shown, p, false);
    } else {
      p.error(entry.value.origin, shown, "expected a list of values, got " + detail::describe_kind(entry.value),
              "e.g. vars.lr: [0.1, 0.01]");
    }
  }
}

} // namespace

bool set_path(Node& root, const std::string& path, Node value, const Origin& origin, std::vector<Diagnostic>& errors) {
  const auto parts = util::split(path, '.');
  Node* current = &root;
  std::string walked;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (current->is_null()) {
      *current = detail::make_mapping(origin);
    }
    Node* next = nullptr;
    if (current->is_mapping()) {
      Entry* entry = current->find(part);
      if (entry == nullptr) {
        current->entries.push_back(Entry{part, origin, Node{Node::Kind::null, {}, {}, {}, origin, false}});
        entry = &current->entries.back();
      }
      next = &entry->value;
    } else if (current->is_sequence() && is_list_index(part) && std::stoul(part) < current->items.size()) {
      next = &current->items[std::stoul(part)];
    } else {
      errors.push_back(detail::make_diagnostic(origin, path,
                                               "cannot set this key: " + walked + " is " +
                                                   detail::describe_kind(*current) + ", not a mapping"));
      return false;
    }
    walked = join_path(walked, part);
    if (last) {
      *next = std::move(value);
      return true;
    }
    current = next;
  }
  return true;
}

void apply_set_overrides(Node& root, const std::vector<std::string>& overrides, std::vector<Diagnostic>& errors) {
  const Origin origin{"--set", 0, 0};
  for (const auto& arg : overrides) {
    const auto parsed = split_argument(arg, origin, "tpu.zone=us-central2-b", errors);
    if (!parsed) {
      continue;
    }
    const auto& [path, text] = *parsed;
    // A key the file does not know is a warning (the Python jobman ignores it); one typed on the command line is
    // jobman's own and cannot have meant anything else, so it is an error.
    if (auto problem = detail::check_key_path(path);
        problem && (problem->message == "unknown key" || problem->message == "unknown section")) {
      errors.push_back(detail::make_diagnostic(origin, path, problem->message, problem->hint));
      continue;
    }
    set_path(root, path, parse_argument_value(text, origin, path, errors), origin, errors);
  }
}

std::vector<SweepAxis> collect_sweeps(Node& root, const std::vector<std::string>& args, Problems& p) {
  std::vector<SweepAxis> axes;
  if (const Entry* entry = root.find("sweep")) {
    if (entry->value.is_mapping()) {
      flatten_sweep(entry->value, "", axes, p);
    } else if (!entry->value.is_null()) {
      p.error(entry->value.origin, "sweep",
              "expected a mapping from key paths to lists of values, got " + detail::describe_kind(entry->value),
              "e.g. sweep: {vars.lr: [0.1, 0.01]}");
    }
    root.erase("sweep");
  }
  const Origin origin{"--sweep", 0, 0};
  for (const auto& arg : args) {
    const auto parsed = split_argument(arg, origin, "vars.lr=0.1,0.01", p.errors);
    if (!parsed) {
      continue;
    }
    const auto& [path, text] = *parsed;
    SweepAxis axis{path, {}, origin};
    const std::string_view trimmed = util::trim(text);
    if (trimmed.starts_with('[')) {
      Node list = parse_argument_value(std::string(trimmed), origin, path, p.errors);
      if (list.is_sequence()) {
        axis.values = list.items;
      }
    } else if (!trimmed.empty()) {
      for (const auto& item : util::split(text, ',')) {
        axis.values.push_back(parse_argument_value(std::string(util::trim(item)), origin, path, p.errors));
      }
    }
    add_axis(axes, std::move(axis), path, p, true);
  }
  return axes;
}

} // namespace jobman::config::detail
