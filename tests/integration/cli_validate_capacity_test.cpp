// `jobman validate` and `create` against a real jobman-mock-cloud whose world has flex-start capacity in one zone and a
// reservation in another: a provisioning model the zone has no capacity tier for, a reservation the zone does not
// have, and reserved capacity where the project has no reservation are refused at their file, line and key (exit 2,
// nothing recorded); what the zones have passes.
#include "support/mock_cloud.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace jobman::test {
namespace cli_validate_capacity_test {

class ValidateCapacityTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    env = mock_home_environment(*mock, dir / "home", dir / "config");
    env["NO_COLOR"] = "1";
  }

  RunResult jm(const std::vector<std::string>& args) { return run_jobman(args, RunOptions{env, "", ""}); }

  // A config file `name` for `accelerator` in `zone` whose tpu section ends with `more` (from line 6 on).
  std::string config(const std::string& name, const std::string& accelerator, const std::string& zone,
                     const std::string& more) {
    return dir
        .write(name, "job:\n  name: capacity\ntpu:\n  accelerator: " + accelerator + "\n  zone: " + zone + "\n" + more +
                         "command:\n  cmd: echo hi\n")
        .string();
  }

  TempDir dir;
  // us-central2-b: v4 with a reservation of 64 chips and best-effort; us-east5-a: v6e flex-start only;
  // europe-west4-a: v6e spot only.
  std::unique_ptr<MockCloudProcess> mock = start_test_mock(
      dir, test_world(2, "  us-central2-b:\n    v4:\n      spot: {chips: 256}\n      on_demand: {chips: 32}\n"
                         "      reserved: {chips: 64, reservation: v4-reservation}\n      best_effort: {quota: 128}\n"
                         "  us-east5-a:\n    v6e:\n      flex_start: {chips: 256}\n"
                         "  europe-west4-a:\n    v6e:\n      spot: {chips: 64}\n"));
  std::map<std::string, std::string> env;
};

TEST_F(ValidateCapacityTest, FlexStartIsRefusedWhereTheZoneHasNoFlexStartCapacity) {
  const std::string flex = "  pricing: flex-start\n  max_run_duration: 3h\n";
  const auto refused = jm({"validate", config("flex.yaml", "v6e-8", "europe-west4-a", flex)});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("flex.yaml:6:12: tpu.pricing: v6e flex-start is not offered in europe-west4-a "
                             "(europe-west4-a has v6e spot only; v6e flex-start is offered in us-east5-a)"),
            std::string::npos)
      << refused.err;
  const auto offered = jm({"validate", config("flex-east.yaml", "v6e-8", "us-east5-a", flex)});
  EXPECT_EQ(offered.exit_code, 0) << offered.out << offered.err;
  const auto best_effort = jm({"validate", config("best.yaml", "v4-8", "us-central2-b", "  pricing: best-effort\n")});
  EXPECT_EQ(best_effort.exit_code, 0) << best_effort.out << best_effort.err;
}

TEST_F(ValidateCapacityTest, AReservationTheZoneDoesNotHaveIsRefusedAndNothingIsRecorded) {
  const auto path =
      config("reserved.yaml", "v4-8", "us-central2-b", "  pricing: reserved\n  reservation: v4-reserve\n");
  const auto refused = jm({"validate", path});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("reserved.yaml:7:16: tpu.reservation: us-central2-b has no reservation 'v4-reserve' "
                             "(reservations.list) (us-central2-b has v4-reservation (v4, 64 chips))"),
            std::string::npos)
      << refused.err;
  const auto created = jm({"create", path});
  EXPECT_EQ(created.exit_code, 2) << created.out << created.err;
  EXPECT_EQ(jm({"list", "--all", "--json"}).out, "[]\n") << "nothing recorded";

  for (const std::string name :
       {"v4-reservation", "projects/jobman-mock/locations/us-central2-b/reservations/v4-reservation"}) {
    const auto ok = jm(
        {"validate", config("ok.yaml", "v4-8", "us-central2-b", "  pricing: reserved\n  reservation: " + name + "\n"),
         "--json"});
    EXPECT_EQ(ok.exit_code, 0) << name << ": " << ok.out << ok.err;
    EXPECT_NE(ok.out.find("reservations asked in us-central2-b"), std::string::npos) << ok.out;
  }
}

TEST_F(ValidateCapacityTest, ReservedCapacityWhereTheProjectHasNoReservationIsRefusedAtPricing) {
  const auto refused = jm({"validate", config("none.yaml", "v6e-8", "europe-west4-a", "  pricing: reserved\n")});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("none.yaml:6:12: tpu.pricing: europe-west4-a has no reservation of the project "
                             "(reservations.list)"),
            std::string::npos)
      << refused.err;
  const auto reserved = jm({"validate", config("v4.yaml", "v4-8", "us-central2-b", "  pricing: reserved\n")});
  EXPECT_EQ(reserved.exit_code, 0) << reserved.out << reserved.err;
}

} // namespace cli_validate_capacity_test
} // namespace jobman::test
