// Times in the API's RFC 3339 form: parse_utc, the inverse of format_utc, which the mock's validUntilTime and the
// orphans' ages both rely on.
#include "jobman/util/system.hpp"

#include <gtest/gtest.h>

namespace jobman::util {
namespace {

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

TEST(UtilParseUtc, RefusesAnythingButAUtcTime) {
  for (const char* text :
       {"", "now", "2026-11-22", "2026-11-22 05:00:47Z", "2026-11-22T05:00:47", "2026-11-22T05:00:47+01:00",
        "2026-11-22T05:00:47.Z", "2026-11-22T05:00:47Zjunk", "2026-11-22T05:00:47..5Z"}) {
    EXPECT_EQ(parse_utc(text), std::nullopt) << text;
  }
}

} // namespace
} // namespace jobman::util
