#include "jobman/util/strings.hpp"

#include <gtest/gtest.h>

namespace jobman::util {
namespace util_strings_test {

TEST(Strings, ClosestMatchSuggestsTypos) {
  const std::vector<std::string> keys{"accelerator", "zone", "name", "version", "pricing"};
  EXPECT_EQ(closest_match("acelerator", keys), "accelerator");
  EXPECT_EQ(closest_match("zoen", keys), "zone");
  EXPECT_EQ(closest_match("completely-different", keys), std::nullopt);
  EXPECT_EQ(closest_match("zone", keys), std::nullopt) << "an exact match is not a suggestion";
}

TEST(Strings, GlobMatchesLikeTheShell) {
  EXPECT_TRUE(glob_match("train-*", "train-lr0.1"));
  EXPECT_TRUE(glob_match("*-v4-?", "job-v4-8"));
  EXPECT_TRUE(glob_match("[ab]x*", "bxyz"));
  EXPECT_FALSE(glob_match("[!ab]x*", "bxyz"));
  EXPECT_FALSE(glob_match("train-*", "eval-1"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("a*b", "acd"));
}

TEST(Strings, DurationsParseAndFormat) {
  EXPECT_EQ(parse_duration_seconds("90"), 90);
  EXPECT_EQ(parse_duration_seconds("90s"), 90);
  EXPECT_EQ(parse_duration_seconds("5m"), 300);
  EXPECT_EQ(parse_duration_seconds("1h30m"), 5400);
  EXPECT_EQ(parse_duration_seconds("2d"), 172800);
  EXPECT_EQ(parse_duration_seconds("5x"), std::nullopt);
  EXPECT_EQ(parse_duration_seconds("m5"), std::nullopt);
  EXPECT_EQ(parse_duration_seconds("-3"), std::nullopt);
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(3 * 60 + 5), "3m");
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60), "2h05m");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600), "3d04h");
}

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(trim("  x y \n"), "x y");
}

TEST(Strings, ToLowerChangesAsciiLettersOnly) {
  EXPECT_EQ(to_lower("Content-Type"), "content-type");
  EXPECT_EQ(to_lower("UNLIMITED"), "unlimited");
  EXPECT_EQ(to_lower("already lower, 0-9_@[`{"), "already lower, 0-9_@[`{");
  EXPECT_EQ(to_lower(""), "");
  // Bytes past ASCII (here "ÉTÉ" in UTF-8) are kept as they are.
  EXPECT_EQ(to_lower("\xc3\x89T\xc3\x89"), "\xc3\x89t\xc3\x89");
}

TEST(EscapeControls, ControlCharactersBecomeVisibleAndTextStays) {
  EXPECT_EQ(escape_controls("\x1b]0;pwned\x07", LineBreaks::keep), "\\x1b]0;pwned\\x07");
  EXPECT_EQ(escape_controls("\x1b[2J\x1b[31mred", LineBreaks::keep), "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(escape_controls("secret\roverwritten\x08\x7f", LineBreaks::keep), "secret\\x0doverwritten\\x08\\x7f");
  EXPECT_EQ(escape_controls("a\nb\tc", LineBreaks::keep), "a\nb\tc");
  EXPECT_EQ(escape_controls("a\nb\tc", LineBreaks::escape), "a\\x0ab\\x09c");
  // C1 controls as UTF-8 (U+009B is CSI) and as raw bytes, which are not UTF-8.
  EXPECT_EQ(escape_controls("\xc2\x9b"
                            "6n \x9b"
                            "6n \xc2\x85",
                            LineBreaks::keep),
            "\\u009b6n \\x9b6n \\u0085");
  // Bidirectional overrides reorder what follows; other text, accents and symbols stay.
  EXPECT_EQ(escape_controls("a\xe2\x80\xae"
                            "b",
                            LineBreaks::keep),
            "a\\u202eb");
  EXPECT_EQ(escape_controls("ünïcødé ✓ 日本 \xf0\x9f\x98\x80", LineBreaks::keep), "ünïcødé ✓ 日本 \xf0\x9f\x98\x80");
  // Malformed UTF-8: a lone continuation byte, an overlong '/', a surrogate, a truncated sequence.
  EXPECT_EQ(escape_controls("\x80 \xc0\xaf \xed\xa0\x80 \xe2\x9c", LineBreaks::keep),
            "\\x80 \\xc0\\xaf \\xed\\xa0\\x80 \\xe2\\x9c");
}

} // namespace util_strings_test
} // namespace jobman::util
