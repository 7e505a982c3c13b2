#include "jobman/util/strings.hpp"

#include <gtest/gtest.h>

namespace jobman::util {
namespace {

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

TEST(Strings, JobIdsArePaddedAndParsed) {
  EXPECT_EQ(format_job_id(42), "000042");
  EXPECT_EQ(format_job_id(1234567), "1234567");
  EXPECT_EQ(parse_job_id("000042"), 42);
  EXPECT_EQ(parse_job_id("42"), 42);
  EXPECT_EQ(parse_job_id("0"), std::nullopt);
  EXPECT_EQ(parse_job_id("-4"), std::nullopt);
  EXPECT_EQ(parse_job_id("4x"), std::nullopt);
  EXPECT_EQ(parse_job_id(""), std::nullopt);
}

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(trim("  x y \n"), "x y");
}

} // namespace
} // namespace jobman::util
