// Section: one mapping of the document, its unknown keys reported, its values handed out typed; and the dotted key
// paths messages name.
#include "loader_parts.hpp"
#include "schema.hpp"

#include <algorithm>

namespace jobman::config::detail {

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

Section::Section(Problems& p, const Node* node, std::string path, Origin anchor, std::string_view schema_name)
    : p_(p), path_(std::move(path)), anchor_(std::move(anchor)) {
  if (node == nullptr || node->is_null()) {
    return;
  }
  if (!node->is_mapping()) {
    if (!node->unresolved) {
      p_.error(node->origin, path_, "expected a mapping of keys, got " + detail::describe_kind(*node));
    }
    broken_ = true;
    return;
  }
  node_ = node;
  const auto keys = detail::known_keys(schema_name);
  // The Python jobman reads keys by name and never looks at the others, so a key unknown in one of its sections is
  // ignored with a warning, not refused; jobman's own sections (recovery, setup, notify) have no such users to follow.
  const bool strict =
      schema_name.starts_with("recovery") || schema_name == "setup" || schema_name.starts_with("notify");
  for (const auto& entry : node->entries) {
    if (std::find(keys.begin(), keys.end(), entry.key) == keys.end()) {
      if (strict) {
        p_.error(entry.key_origin, join_path(path_, entry.key), "unknown key", detail::suggestion(entry.key, keys));
      } else {
        const auto close = util::closest_match(entry.key, keys);
        p_.warn(entry.key_origin, join_path(path_, entry.key),
                "unknown key, ignored as the Python jobman ignores it" +
                    (close ? " (did you mean '" + *close + "'?)" : std::string()));
      }
    }
  }
}

const Node* Section::get(const std::string& key, Presence presence) const {
  const Entry* entry = node_ == nullptr ? nullptr : node_->find(key);
  if (entry == nullptr && presence == Presence::required) {
    missing(key);
  }
  return entry == nullptr ? nullptr : &entry->value;
}

void Section::missing(const std::string& key, std::string hint) const {
  if (broken_) {
    return;
  }
  // An unknown key is only a warning; when it is the missing key misspelt, the error says so.
  if (hint.empty() && node_ != nullptr) {
    const std::vector<std::string> wanted = {key};
    for (const auto& entry : node_->entries) {
      if (entry.key != key && util::closest_match(entry.key, wanted)) {
        hint = "is '" + entry.key + "' on line " + std::to_string(entry.key_origin.line) + " a misspelling?";
        break;
      }
    }
  }
  p_.error(anchor_, path(key), "required key is missing", std::move(hint));
}

const Origin& Section::origin(const std::string& key) const {
  const Node* value = get(key);
  return value == nullptr ? anchor_ : value->origin;
}

std::optional<std::string> Section::str(const std::string& key, Presence presence) const {
  const Node* value = get(key, presence);
  if (value == nullptr) {
    return std::nullopt;
  }
  if (value->is_null()) {
    if (presence == Presence::required) {
      p_.error(value->origin, path(key), "required value is null");
    }
    return std::nullopt;
  }
  auto text = as_string(p_, *value, path(key));
  if (text && presence == Presence::required && util::trim(*text).empty()) {
    p_.error(value->origin, path(key), "must not be empty");
    return std::nullopt;
  }
  return text;
}

std::optional<bool> Section::boolean(const std::string& key) const {
  const Node* value = get(key);
  return value == nullptr || value->is_null() ? std::nullopt : as_bool(p_, *value, path(key));
}

std::optional<long long> Section::integer(const std::string& key, long long min, long long max) const {
  const Node* value = get(key);
  return value == nullptr || value->is_null() ? std::nullopt : as_int(p_, *value, path(key), min, max);
}

std::optional<long long> Section::duration(const std::string& key, long long min_seconds) const {
  const Node* value = get(key);
  return value == nullptr || value->is_null() ? std::nullopt : as_duration(p_, *value, path(key), min_seconds);
}

std::vector<std::string> Section::str_list(const std::string& key) const {
  std::vector<std::string> out;
  const Node* value = get(key);
  if (value == nullptr || value->is_null() || value->unresolved) {
    return out;
  }
  if (!value->is_sequence()) {
    p_.error(value->origin, path(key), "expected a list of strings, got " + detail::describe_kind(*value));
    return out;
  }
  for (std::size_t i = 0; i < value->items.size(); ++i) {
    if (auto text = as_string(p_, value->items[i], path(key) + "[" + std::to_string(i) + "]")) {
      out.push_back(*text);
    }
  }
  return out;
}

std::map<std::string, std::string> Section::str_map(const std::string& key) const {
  std::map<std::string, std::string> out;
  const Node* value = get(key);
  if (value == nullptr || value->is_null() || value->unresolved) {
    return out;
  }
  if (!value->is_mapping()) {
    p_.error(value->origin, path(key), "expected a mapping of names to values, got " + detail::describe_kind(*value));
    return out;
  }
  for (const auto& entry : value->entries) {
    const std::string entry_path = join_path(path(key), entry.key);
    if (entry.value.is_null()) {
      p_.error(entry.value.origin, entry_path, "expected a value, got null");
    } else if (auto text = as_string(p_, entry.value, entry_path)) {
      out[entry.key] = *text;
    }
  }
  return out;
}

} // namespace jobman::config::detail
