// For JSON documents built member by member (`j["key"] = value`, in the order docs/JSON.md gives), as `show`, `status`
// and the reports build theirs: what may be absent becomes null. Output too large to build as a document first (a
// report's rows, `list --json`) is written as text instead (util::JsonObjectWriter).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace jobman::reporting {

// `value` as JSON, or null when there is none.
template <typename T> nlohmann::ordered_json json_or_null(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

// `text` as JSON, or null when it is empty.
inline nlohmann::ordered_json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

} // namespace jobman::reporting
