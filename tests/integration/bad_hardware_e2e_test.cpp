// Bad hardware end to end on the mock: a faulty slice mid-run is replaced and training resumes from its checkpoint with
// the uninterrupted run's checksum, and a node that announces a maintenance is left before its window opens. NaN
// lines, preflights, node health, the config's patterns and the budget are told in-process by tests/supervisor/.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "support/supervisor_home.hpp"

#include <algorithm>
#include <cstdio>
#include <gtest/gtest.h>

namespace jobman::test {
namespace bad_hardware_e2e_test {

namespace fs = std::filesystem;
using domain::Phase;
using nlohmann::json;

class BadHardwareTest : public SupervisorHome {
protected:
  // The mock's admin call that turns a node's MXUs faulty (every worker's, unless `worker` is given).
  bool mark_faulty(const std::string& node, std::optional<int> worker = std::nullopt) {
    json body = json::object();
    if (worker) {
      body["worker"] = *worker;
    }
    return http_call(*client, "POST", std::string(kLocation) + "/nodes/" + node + ":markFaulty", body,
                     mock->admin_headers())
               .status == 200;
  }

  // Sets the mock's v4 pools of the zone to `spot` and `on_demand` chips: its fleet is their hosts.
  bool set_capacity(int spot, int on_demand) {
    for (const auto& [tier, chips] : {std::pair{"spot", spot}, std::pair{"on_demand", on_demand}}) {
      const json body = {{"zone", kZone}, {"generation", "v4"}, {"tier", tier}, {"chips", chips}};
      if (http_call(*client, "PUT", "/mock/v1/capacity", body, mock->admin_headers()).status != 200) {
        return false;
      }
    }
    return true;
  }

  bool set_faulty_fraction(double fraction) {
    return http_call(*client, "PUT", "/mock/v1/hardware", json{{"faulty_fraction", fraction}}, mock->admin_headers())
               .status == 200;
  }

  std::vector<domain::AttemptOutcome> outcomes(std::int64_t id) {
    std::vector<domain::AttemptOutcome> out;
    for (const auto& a : db().attempts().of(id)) {
      out.push_back(a.outcome);
    }
    return out;
  }
};

TEST_F(BadHardwareTest, AFaultySliceMidRunIsReplacedAndTrainingResumesWithTheUninterruptedChecksum) {
  start_daemon();
  const auto id = create(config(training(300, 10), "spot", "v4-16", "recovery:\n  max_failures: 0\n"));
  ASSERT_TRUE(eventually([&] { return job(id).phase == Phase::running; }, kPatience)) << job(id).phase_reason;
  ASSERT_TRUE(await_log(id, 1, "step=60 "));
  ASSERT_TRUE(mark_faulty(node_of(id)));

  const auto done = wait_for(id, 0, 180);
  EXPECT_EQ(done.bad_hardware, 1);
  EXPECT_EQ(done.failures, 0);
  const auto attempts = db().attempts().of(id);
  ASSERT_GE(attempts.size(), 2U);
  EXPECT_EQ(attempts.front().outcome, domain::AttemptOutcome::bad_hardware);
  EXPECT_EQ(attempts.back().outcome, domain::AttemptOutcome::succeeded);
  const int last = attempts.back().number;
  EXPECT_NE(file_text(worker_log(id, last, 0)).find("resumed from step="), std::string::npos);
  const auto expected = uninterrupted_checksum(300);
  EXPECT_EQ(checksums(id, last, 2), (std::vector<std::string>{expected, expected}));
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(BadHardwareTest, ANodeThatAnnouncesAMaintenanceIsLeftBeforeItsWindowOpens) {
  start_daemon();
  // A lead of 3 hours: 10.8 s on the mock (time scale 1000), time to stop the workload under a sanitizer.
  // Steps of 30 ms: the workload is still running when the supervisor's next listing of the zone's nodes sees the
  // announcement, however loaded the machine.
  const auto id =
      create(config(training(300, 30), "ondemand", "v4-8", "recovery:\n  max_failures: 0\n  maintenance_lead: 3h\n"));
  ASSERT_TRUE(await_log(id, 1, "step=40 "));
  // The window opens in 2 hours (simulated), within the lead.
  const auto node = node_of(id);
  const auto announced = http_call(*client, "POST", std::string(kLocation) + "/nodes/" + node + ":scheduleMaintenance",
                                   json{{"in", 7200}}, mock->admin_headers());
  ASSERT_EQ(announced.status, 200) << announced.body.dump();
  ASSERT_EQ(announced.body["upcomingMaintenance"]["maintenanceStatus"], "PENDING");

  const auto done = wait_for(id, 0, 180);
  EXPECT_EQ(done.preemptions, 1) << "leaving before a maintenance is a preemption";
  EXPECT_EQ(done.failures, 0);
  EXPECT_EQ(outcomes(id), (std::vector<domain::AttemptOutcome>{domain::AttemptOutcome::preempted,
                                                               domain::AttemptOutcome::succeeded}));
  bool said = false;
  for (const auto& e : db().events().of(id)) {
    said = said || (e.message.find("node " + node + " is announcing a SCHEDULED maintenance whose window opens") !=
                        std::string::npos &&
                    e.message.find("leaving it before the maintenance") != std::string::npos);
  }
  EXPECT_TRUE(said);
  EXPECT_NE(file_text(worker_log(id, 1, 0)).find("terminated at step="), std::string::npos)
      << "the workload had its SIGTERM (and a checkpoint) before the window";
  EXPECT_EQ(checksums(id, 2, 1), std::vector<std::string>{uninterrupted_checksum(300)});
}

} // namespace bad_hardware_e2e_test
} // namespace jobman::test
