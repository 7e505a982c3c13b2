// Writing JSON text directly, for output too large to build as a document first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace jobman::util {

// How deeply arrays and objects nest in JSON text (brackets inside strings do not count); counting stops past
// `limit`, which returns limit + 1. The text need not be valid JSON.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit);

// Parses JSON from another process (a server's answer, a request body): discarded (is_discarded()) when it is not
// JSON or nests arrays and objects deeper than `max_depth`, which nlohmann::json's recursive copies, comparisons
// and dumps could not survive.
nlohmann::json parse_json_bounded(std::string_view text, std::size_t max_depth = 128);

// Appends `text` as a JSON string literal (quoted, escaped); invalid UTF-8 becomes U+FFFD.
void append_json_string(std::string& out, std::string_view text);

// Builds one JSON object by appending members in order: {"a":1,"b":"x"}.
class JsonObjectWriter {
public:
  // Starts the object at the end of `out`.
  explicit JsonObjectWriter(std::string& out);
  // A string member.
  JsonObjectWriter& field(std::string_view key, std::string_view value);
  // An integer member.
  JsonObjectWriter& field(std::string_view key, std::int64_t value);
  // A member that is null when the optional is empty.
  JsonObjectWriter& field(std::string_view key, std::optional<std::int64_t> value);
  // A string member that is null when empty.
  JsonObjectWriter& field_or_null(std::string_view key, std::string_view value);
  // Closes the object.
  void close();

private:
  void key(std::string_view name);
  std::string& out_;
  bool first_ = true;
};

} // namespace jobman::util
