#include "jobman/util/json_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace jobman::util {

namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  std::uint32_t min = 0;
  std::uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    min = 0x80;
    code = lead & 0x1FU;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    min = 0x800;
    code = lead & 0x0FU;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    min = 0x10000;
    code = lead & 0x07U;
  } else {
    return 0;
  }
  if (i + length > text.size()) {
    return 0;
  }
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0U) != 0x80U) {
      return 0;
    }
    code = (code << 6U) | (byte(i + k) & 0x3FU);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
    return 0;
  }
  return length;
}

} // namespace

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i; // The escaped character, whatever it is.
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) {
        return limit + 1;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_json_bounded(std::string_view text, std::size_t max_depth) {
  if (json_nesting_depth(text, max_depth) > max_depth) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return nlohmann::json::parse(text, nullptr, false);
}

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    // A run of printable ASCII that needs no escape goes in at once.
    std::size_t plain = i;
    while (plain < text.size()) {
      const auto p = static_cast<unsigned char>(text[plain]);
      if (p < 0x20 || p >= 0x7f || p == '"' || p == '\\') {
        break;
      }
      ++plain;
    }
    if (plain > i) {
      out.append(text.data() + i, plain - i);
      i = plain;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t length = utf8_sequence_length(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20 || c == 0x7f) {
        out += "\\u00";
        out += kHex[c >> 4U];
        out += kHex[c & 0xFU];
      } else {
        out += static_cast<char>(c);
      }
    }
    ++i;
  }
  out += '"';
}

JsonObjectWriter::JsonObjectWriter(std::string& out) : out_(out) {
  out_ += '{';
}

std::string& JsonObjectWriter::member(std::string_view name) {
  if (!first_) {
    out_ += ',';
  }
  first_ = false;
  append_json_string(out_, name);
  out_ += ':';
  return out_;
}

JsonObjectWriter& JsonObjectWriter::field(std::string_view name, std::string_view value) {
  member(name);
  append_json_string(out_, value);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::field(std::string_view name, std::int64_t value) {
  member(name);
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, end);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::field(std::string_view name, std::optional<std::int64_t> value) {
  if (!value) {
    member(name);
    out_ += "null";
    return *this;
  }
  return field(name, *value);
}

JsonObjectWriter& JsonObjectWriter::field_or_null(std::string_view name, std::string_view value) {
  if (value.empty()) {
    member(name);
    out_ += "null";
    return *this;
  }
  return field(name, value);
}

JsonObjectWriter& JsonObjectWriter::number(std::string_view name, double value) {
  member(name);
  append_json_number(out_, value);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::number(std::string_view name, std::optional<double> value) {
  return value ? number(name, *value) : null(name);
}

JsonObjectWriter& JsonObjectWriter::flag(std::string_view name, bool value) {
  member(name);
  out_ += value ? "true" : "false";
  return *this;
}

JsonObjectWriter& JsonObjectWriter::null(std::string_view name) {
  member(name);
  out_ += "null";
  return *this;
}

JsonObjectWriter& JsonObjectWriter::raw(std::string_view name, std::string_view json) {
  member(name);
  out_ += json;
  return *this;
}

void append_json_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  const std::string_view text(buf, static_cast<std::size_t>(end - buf));
  out += text;
  if (text.find_first_of(".eE") == std::string_view::npos) {
    out += ".0";
  }
}

void JsonObjectWriter::close() {
  out_ += '}';
}

} // namespace jobman::util
