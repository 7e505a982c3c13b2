// Times in the API's RFC 3339 form: parse_utc, the inverse of format_utc, which the mock's validUntilTime and the
// orphans' ages both rely on.
#include "jobman/util/system.hpp"

#include <ctime>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace jobman::util {
namespace util_time_test {

TEST(UtilParseUtc, ReadsWholeAndFractionalSecondsAsUtc) {
  EXPECT_EQ(parse_utc("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_utc("2026-11-22T05:00:47Z"), 1795323647000);
  EXPECT_EQ(parse_utc("2026-11-22T05:00:47.999999999Z"), 1795323647000) << "fractions are dropped";
  EXPECT_EQ(parse_utc("2024-02-29T23:59:59Z"), 1709251199000);
}

TEST(UtilParseUtc, IsTheInverseOfFormatUtcToTheSecond) {
  for (const std::int64_t ms : {0LL, 1'000LL, 1'700'000'000'123LL, 4'102'444'800'000LL}) {
    EXPECT_EQ(parse_utc(format_utc(ms)), ms / 1000 * 1000) << format_utc(ms);
  }
}

// format_utc computes the calendar itself: it must agree with the C library's gmtime, leap days and times before
// 1970 included.
TEST(UtilFormatUtc, AgreesWithGmtimeAndStrftime) {
  const auto reference = [](std::int64_t ms) {
    const std::time_t seconds = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : -((999 - ms) / 1000));
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char buf[64];
    return std::string(buf, std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm));
  };
  std::vector<std::int64_t> cases{0,
                                  999,
                                  1'000,
                                  -1,
                                  -999,
                                  -1'000,
                                  -1'001,
                                  951'782'400'000 /* 2000-02-29 */,
                                  4'107'542'399'999 /* 2100-02-28T23:59:59 */,
                                  253'402'300'799'000 /* 9999-12-31 */};
  std::mt19937_64 random(42);
  std::uniform_int_distribution<std::int64_t> any(-2'208'988'800'000 /* 1900 */, 7'258'118'400'000 /* 2200 */);
  for (int i = 0; i < 20'000; ++i) {
    cases.push_back(any(random));
  }
  for (const auto ms : cases) {
    ASSERT_EQ(format_utc(ms), reference(ms)) << ms;
  }
  EXPECT_EQ(format_utc(1795323647000), "2026-11-22T05:00:47Z");
}

TEST(UtilParseUtc, RefusesAnythingButAUtcTime) {
  for (const char* text :
       {"", "now", "2026-11-22", "2026-11-22 05:00:47Z", "2026-11-22T05:00:47", "2026-11-22T05:00:47+01:00",
        "2026-11-22T05:00:47.Z", "2026-11-22T05:00:47Zjunk", "2026-11-22T05:00:47..5Z"}) {
    EXPECT_EQ(parse_utc(text), std::nullopt) << text;
  }
}

} // namespace util_time_test
} // namespace jobman::util
