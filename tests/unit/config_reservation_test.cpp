// tpu.reservation as the loader reads it: a bare name, or a full name that must be one and lie in a zone the job asks
// for a slice in; where it (and tpu.reserved) was given is kept for the checks against the cloud.
#include "jobman/config/loader.hpp"
#include "jobman/util/error.hpp"

#include <gtest/gtest.h>
#include <string>

namespace jobman::config {
namespace config_reservation_test {

// A reserved v4-8 in us-central2-b whose tpu section ends with `more` (from line 7 on).
std::string reserved(const std::string& more) {
  return "job:\n  name: r\ntpu:\n  accelerator: v4-8\n  zone: us-central2-b\n  pricing: reserved\n" + more +
         "command:\n  cmd: echo hi\n";
}

std::string error_of(const std::string& text) {
  try {
    parse_job_configs(text, "reserved.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigReservation, ABareOrFullNameInTheJobsZoneIsTakenAndWhereItWasGivenIsKept) {
  for (const std::string name : {"v4-reservation", "projects/p/locations/us-central2-b/reservations/v4-reservation"}) {
    const auto configs = parse_job_configs(reserved("  reservation: " + name + "\n"), "reserved.yaml");
    ASSERT_EQ(configs.size(), 1U);
    EXPECT_EQ(configs[0].tpu.reservation, name);
    const auto& at = configs[0].tpu.origins.at("reservation");
    EXPECT_EQ(at.line, 7);
    EXPECT_EQ(at.column, 16);
    EXPECT_EQ(at.key_path, "tpu.reservation");
  }
  // Given as gcloud's flag, it is found in tpu.flags.
  const auto flagged =
      parse_job_configs(reserved("  flags: [--reservation=v4-reservation, --reserved]\n"), "reserved.yaml");
  EXPECT_EQ(flagged[0].tpu.reservation, "v4-reservation");
  EXPECT_EQ(flagged[0].tpu.origins.at("reservation").key_path, "tpu.flags");
  EXPECT_EQ(flagged[0].tpu.origins.at("reserved").key_path, "tpu.flags");
  EXPECT_EQ(flagged[0].tpu.origins.at("reserved").line, 7);
}

TEST(ConfigReservation, AFullNameThatIsNoReservationsIsAnErrorAtItsKey) {
  const auto error = error_of(reserved("  reservation: projects/p/reservations/r\n"));
  EXPECT_NE(error.find("reserved.yaml:7:16: tpu.reservation: 'projects/p/reservations/r' is not a reservation's "
                       "name: write NAME, or projects/PROJECT/locations/ZONE/reservations/NAME"),
            std::string::npos)
      << error;
}

TEST(ConfigReservation, AReservationInAnotherZoneIsAnErrorAtItsKey) {
  const auto error = error_of(reserved("  reservation: projects/p/locations/europe-west4-a/reservations/r\n"));
  EXPECT_NE(error.find("reserved.yaml:7:16: tpu.reservation: reservation "
                       "'projects/p/locations/europe-west4-a/reservations/r' is in europe-west4-a, where the job asks "
                       "for no slice (tpu.zone: us-central2-b)"),
            std::string::npos)
      << error;
  // Among several zones, one is enough.
  const auto several = parse_job_configs(
      "job:\n  name: r\ntpu:\n  accelerator: v4-8\n  zone: [us-central2-b, europe-west4-a]\n  pricing: reserved\n"
      "  reservation: projects/p/locations/europe-west4-a/reservations/r\ncommand:\n  cmd: echo hi\n",
      "reserved.yaml");
  EXPECT_EQ(several.size(), 1U);
  // Through tpu.flags, the error is at the flags.
  const auto flagged =
      error_of(reserved("  flags: ['--reservation=projects/p/locations/europe-west4-a/reservations/r']\n"));
  EXPECT_NE(flagged.find("reserved.yaml:7:10: tpu.flags: reservation"), std::string::npos) << flagged;
}

} // namespace config_reservation_test
} // namespace jobman::config
