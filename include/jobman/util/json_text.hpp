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

// Appends `value` as a JSON number in the shortest text that reads back as it, with ".0" on a whole number so that
// it reads as a float; "null" when it is not finite.
void append_json_number(std::string& out, double value);

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
  // A number member, in the shortest text that reads back as `value` ("1.5", "48.0"); null when not finite.
  JsonObjectWriter& number(std::string_view key, double value);
  // A number member that is null when the optional is empty.
  JsonObjectWriter& number(std::string_view key, std::optional<double> value);
  // A true or false member (named apart from field: a string literal would convert to bool before string_view).
  JsonObjectWriter& flag(std::string_view key, bool value);
  // A null member.
  JsonObjectWriter& null(std::string_view key);
  // A member whose value is JSON text written elsewhere (an array, an object).
  JsonObjectWriter& raw(std::string_view key, std::string_view json);
  // A member's key alone: its value is for the caller to append to the text next (a nested object or array, written
  // in place rather than built apart and copied in).
  std::string& member(std::string_view key);
  // Closes the object.
  void close();

private:
  std::string& out_;
  bool first_ = true;
};

} // namespace jobman::util
