#include "jobman/util/json_text.hpp"

#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>

namespace jobman::util {
namespace util_json_text_test {

std::string as_json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

TEST(JsonText, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(as_json_string("plain"), "\"plain\"");
  EXPECT_EQ(as_json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(as_json_string("line\nnext\ttab"), "\"line\\nnext\\ttab\"");
  EXPECT_EQ(as_json_string(std::string("\x1b[31m", 5)), "\"\\u001b[31m\"");
  EXPECT_EQ(as_json_string(std::string("\0", 1)), "\"\\u0000\"");
}

TEST(JsonText, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(as_json_string("naïve ✓ 🚀"), "\"naïve ✓ 🚀\"");
  EXPECT_EQ(as_json_string("bad\xff"), "\"bad\\ufffd\"");
  EXPECT_EQ(as_json_string("\xc3"), "\"\\ufffd\"") << "a truncated sequence";
  EXPECT_EQ(as_json_string("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"") << "a UTF-16 surrogate is not UTF-8";
  EXPECT_EQ(as_json_string("\xc0\xaf"), "\"\\ufffd\\ufffd\"") << "an overlong encoding";
}

TEST(JsonText, EveryByteStringRoundTripsThroughAJsonParser) {
  std::string all;
  for (int c = 1; c < 128; ++c) {
    all += static_cast<char>(c);
  }
  const auto parsed = nlohmann::json::parse(as_json_string(all));
  EXPECT_EQ(parsed.get<std::string>(), all);
}

TEST(JsonText, ObjectWriterWritesMembersInOrderWithNulls) {
  std::string out;
  JsonObjectWriter w(out);
  w.field("id", std::int64_t{42}).field("name", "x").field_or_null("ip", "").field("exit", std::nullopt);
  w.close();
  EXPECT_EQ(out, R"({"id":42,"name":"x","ip":null,"exit":null})");
}

TEST(JsonText, NumbersAreTheShortestTextThatReadsBackAndStayFloats) {
  std::string out;
  JsonObjectWriter w(out);
  w.number("a", 1.5)
      .number("b", 48.0)
      .number("c", 0.1 + 0.2)
      .number("d", std::optional<double>())
      .number("e", std::numeric_limits<double>::infinity())
      .flag("f", true)
      .null("g")
      .raw("h", "[1,2]");
  w.close();
  EXPECT_EQ(out, R"({"a":1.5,"b":48.0,"c":0.30000000000000004,"d":null,"e":null,"f":true,"g":null,"h":[1,2]})");
  const auto parsed = nlohmann::json::parse(out);
  EXPECT_EQ(parsed["c"].get<double>(), 0.1 + 0.2);
  EXPECT_TRUE(parsed["b"].is_number_float());
}

} // namespace util_json_text_test
} // namespace jobman::util
