// Bad hardware end to end on the mock: a slice whose workers print NaN losses, or that fails the preflight, is
// replaced, and the job resumes from its checkpoint on its own budget; the machine is remembered, and a later slice on
// it is rejected before setup.
#include "support/supervisor_home.hpp"

#include <algorithm>
#include <cstdio>
#include <gtest/gtest.h>

namespace jobman::test {
namespace {

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

  std::vector<std::string> outcomes(std::int64_t id) {
    std::vector<std::string> out;
    for (const auto& a : db().attempts(id)) {
      out.push_back(a.outcome);
    }
    return out;
  }
};

TEST_F(BadHardwareTest, ANanLineEndsTheAttemptAtOnceWhileItsWorkloadStillRuns) {
  start_daemon();
  // The first attempt prints a NaN loss and would then hang for ten minutes; the second trains.
  const auto id =
      create(config("if [ \"$JOBMAN_ATTEMPT\" = 1 ]; then echo 'step=1 loss=nan'; sleep 600; fi; " + training(60, 2),
                    "spot", "v4-8", "recovery:\n  max_failures: 0\n"));
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.attempt, 2);
  EXPECT_EQ(done.bad_hardware, 1);
  EXPECT_EQ(done.failures, 0);
  EXPECT_EQ(done.preemptions, 0);
  const auto attempts = db().attempts(id);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].outcome, "bad-hardware");
  EXPECT_EQ(attempts[0].exit_code, 143) << "the hanging workload was stopped, not waited for";
  EXPECT_NE(attempts[0].queued_resource, attempts[1].queued_resource) << "a new slice";
  const auto findings = db().bad_hardware_of(id);
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].signal, "output");
  EXPECT_EQ(findings[0].detail, "step=1 loss=nan");
  EXPECT_EQ(findings[0].node, attempts[0].node);
  EXPECT_EQ(checksums(id, 2, 1), std::vector<std::string>{uninterrupted_checksum(60)});

  const auto shown = jm({"show", std::to_string(id)});
  EXPECT_NE(shown.out.find("bad hardware 1)"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("\nBad hardware\n"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("from its output: step=1 loss=nan"), std::string::npos) << shown.out;
  const auto as_json = json::parse(jm({"show", std::to_string(id), "--json"}).out);
  EXPECT_EQ(as_json["bad_hardware"], 1);
  EXPECT_EQ(as_json["bad_hardware_findings"][0]["signal"], "output");
  EXPECT_EQ(as_json["attempts"][0]["outcome"], "bad-hardware");
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(BadHardwareTest, AFaultySliceMidRunIsReplacedAndTrainingResumesWithTheUninterruptedChecksum) {
  start_daemon();
  const auto id = create(config(training(300, 10), "spot", "v4-16", "recovery:\n  max_failures: 0\n"));
  ASSERT_TRUE(eventually([&] { return job(id).phase == Phase::running; }, kPatience)) << job(id).phase_reason;
  ASSERT_TRUE(await_log(id, 1, "step=60 "));
  ASSERT_TRUE(mark_faulty(node_of(id)));

  const auto done = wait_for(id, 0, 180);
  EXPECT_EQ(done.bad_hardware, 1);
  EXPECT_EQ(done.failures, 0);
  const auto attempts = db().attempts(id);
  ASSERT_GE(attempts.size(), 2U);
  EXPECT_EQ(attempts.front().outcome, "bad-hardware");
  EXPECT_EQ(attempts.back().outcome, "succeeded");
  const int last = attempts.back().number;
  EXPECT_NE(file_text(worker_log(id, last, 0)).find("resumed from step="), std::string::npos);
  const auto expected = uninterrupted_checksum(300);
  EXPECT_EQ(checksums(id, last, 2), (std::vector<std::string>{expected, expected}));
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(BadHardwareTest, WithNoBadHardwareBudgetTheJobFailsWithoutSpendingItsFailures) {
  start_daemon();
  const auto id = create(config("echo 'step=4 loss=inf'; exit 1", "spot", "v4-8",
                                "recovery:\n  max_failures: 2\n  max_bad_hardware: 0\n"));
  const auto done = wait_for(id, 4);
  EXPECT_EQ(done.phase, Phase::failed);
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.failures, 0);
  EXPECT_EQ(done.bad_hardware, 1);
  EXPECT_NE(done.phase_reason.find("bad-hardware budget spent"), std::string::npos) << done.phase_reason;
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << "the bad slice is released";
}

TEST_F(BadHardwareTest, PatternsOfTheConfigReplaceTheDefaults) {
  start_daemon();
  // With bad_hardware: [] a NaN loss is the job's own failure; with a pattern of its own, its line is bad hardware.
  const auto plain = create(
      config("echo 'step=4 loss=nan'; exit 1", "spot", "v4-8", "recovery:\n  max_failures: 0\n  bad_hardware: []\n"));
  const auto custom = create(config("echo 'XID 79: GPU has fallen off the bus'; exit 1", "spot", "v4-8",
                                    "recovery:\n  max_failures: 0\n  max_bad_hardware: 0\n"
                                    "  bad_hardware: ['XID [0-9]+']\n"));
  const auto a = wait_for(plain, 4);
  EXPECT_EQ(a.failures, 1);
  EXPECT_EQ(a.bad_hardware, 0);
  const auto b = wait_for(custom, 4);
  EXPECT_EQ(b.failures, 0);
  EXPECT_EQ(b.bad_hardware, 1);
  EXPECT_EQ(db().bad_hardware_of(custom).at(0).detail, "XID 79: GPU has fallen off the bus");
}

TEST_F(BadHardwareTest, AFailedPreflightReplacesTheSliceBeforeAnythingIsLaunched) {
  ASSERT_TRUE(set_faulty_fraction(1)); // The first slice's machine is faulty.
  start_daemon();
  // The preflight is the mock's known-answer run on the systolic array (tpu.preflight follows tpu.pricing).
  const auto id = create(config(training(40, 2), "spot\n  preflight: systolic-train --selftest", "v4-8",
                                "recovery:\n  max_failures: 0\n"));
  ASSERT_TRUE(eventually(
      [&] {
        const auto attempts = db().attempts(id);
        return !attempts.empty() && attempts.front().active_ms.has_value();
      },
      kPatience));
  ASSERT_TRUE(set_faulty_fraction(0)); // The next slice is on a new, healthy machine.

  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.bad_hardware, 1);
  EXPECT_EQ(done.failures, 0);
  const auto attempts = db().attempts(id);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].outcome, "bad-hardware");
  EXPECT_FALSE(fs::exists(worker_log(id, 1, 0))) << "nothing was launched on the bad slice";
  EXPECT_NE(file_text(worker_log(id, 1, 0).parent_path() / "preflight-0.log").find("selftest failed"),
            std::string::npos);
  const auto findings = db().bad_hardware_of(id);
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].signal, "preflight");
  ASSERT_EQ(attempts[0].physical_hosts.size(), 1U);
  EXPECT_FALSE(attempts[0].physical_hosts[0].empty()) << "the mock publishes host/physical_host";
  EXPECT_EQ(findings[0].physical_host, attempts[0].physical_hosts[0]);
  EXPECT_NE(attempts[1].physical_hosts, attempts[0].physical_hosts);
  EXPECT_EQ(checksums(id, 2, 1), std::vector<std::string>{uninterrupted_checksum(40)});
}

TEST_F(BadHardwareTest, ANewSliceOnAMachineFoundBadIsRejectedBeforeSetup) {
  // A zone of one machine: once its slice is found bad, the next lands on the same machine.
  ASSERT_TRUE(set_capacity(4, 0));
  start_daemon();
  const auto id =
      create(config("if [ \"$JOBMAN_ATTEMPT\" = 1 ]; then echo 'step=1 loss=nan'; sleep 600; fi; " + training(40, 2),
                    "spot", "v4-8", "recovery:\n  max_failures: 0\n  backoff: {initial: 1s, max: 2s}\n"));
  ASSERT_TRUE(eventually(
      [&] {
        const auto outcomes_now = outcomes(id);
        return std::count(outcomes_now.begin(), outcomes_now.end(), "rejected") >= 2;
      },
      kPatience))
      << job(id).phase_reason;
  const auto bad = db().attempts(id).front();
  ASSERT_EQ(bad.outcome, "bad-hardware");
  ASSERT_EQ(bad.physical_hosts.size(), 1U);
  for (const auto& a : db().attempts(id)) {
    if (a.outcome == "rejected") {
      EXPECT_EQ(a.physical_hosts, bad.physical_hosts);
      EXPECT_FALSE(fs::exists(worker_log(id, a.number, 0).parent_path())) << "never set up: attempt " << a.number;
    }
  }
  EXPECT_EQ(job(id).bad_hardware, 1) << "a rejection spends no budget";
  const auto shown = jm({"show", std::to_string(id), "--events"});
  EXPECT_NE(shown.out.find("landed on machine " + bad.physical_hosts[0]), std::string::npos) << shown.out;
  char padded[16];
  std::snprintf(padded, sizeof padded, "%06lld", static_cast<long long>(id));
  EXPECT_NE(shown.out.find(std::string("found bad by job ") + padded), std::string::npos);

  // Room for a second machine: the next slice lands on it and the job finishes there.
  ASSERT_TRUE(set_capacity(8, 0));
  const auto done = wait_for(id, 0, 120);
  EXPECT_EQ(done.bad_hardware, 1);
  const auto last = db().attempts(id).back();
  EXPECT_NE(last.physical_hosts, bad.physical_hosts);
  EXPECT_EQ(checksums(id, last.number, 1), std::vector<std::string>{uninterrupted_checksum(40)});
}

TEST_F(BadHardwareTest, AnUnhealthyNodeIsBadHardwareAndOneUnderMaintenanceIsLeftBeforeIt) {
  start_daemon();
  const auto set_health = [&](const std::string& node, const std::string& health) {
    return http_call(*client, "POST", std::string(kLocation) + "/nodes/" + node + ":setHealth",
                     json{{"health", health}, {"healthDescription", "seen by the test"}}, mock->admin_headers())
               .status == 200;
  };
  // Steps of 30 ms: the second attempt still trains for seconds after it resumes, wherever the first one stopped.
  const auto id = create(config(training(300, 30), "spot", "v4-8", "recovery:\n  max_failures: 0\n"));
  ASSERT_TRUE(await_log(id, 1, "step=40 "));
  ASSERT_TRUE(set_health(node_of(id), "UNHEALTHY_TENSORFLOW"));
  ASSERT_TRUE(eventually([&] { return job(id).attempt == 2 && job(id).phase == Phase::running; }, kPatience))
      << job(id).phase_reason;
  ASSERT_TRUE(await_log(id, 2, "\nstep=")) << "a step after the resume";
  ASSERT_TRUE(set_health(node_of(id), "UNHEALTHY_MAINTENANCE"));

  const auto done = wait_for(id, 0, 180);
  EXPECT_EQ(done.bad_hardware, 1);
  EXPECT_EQ(done.preemptions, 1) << "a maintenance is left as a preemption";
  EXPECT_EQ(done.failures, 0);
  EXPECT_EQ(outcomes(id), (std::vector<std::string>{"bad-hardware", "preempted", "succeeded"}));
  const auto findings = db().bad_hardware_of(id);
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].signal, "health");
  EXPECT_EQ(findings[0].worker, -1);
  EXPECT_EQ(findings[0].detail, "UNHEALTHY_TENSORFLOW (seen by the test)");
  EXPECT_NE(file_text(worker_log(id, 2, 0)).find("terminated at step="), std::string::npos)
      << "the workload had its SIGTERM (and a checkpoint) before the slice went";
  EXPECT_NE(file_text(worker_log(id, 3, 0)).find("resumed from step="), std::string::npos);
  EXPECT_EQ(checksums(id, 3, 1), std::vector<std::string>{uninterrupted_checksum(300)});
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
  EXPECT_EQ(outcomes(id), (std::vector<std::string>{"preempted", "succeeded"}));
  bool said = false;
  for (const auto& e : db().events(id)) {
    said = said || (e.message.find("node " + node + " is announcing a SCHEDULED maintenance whose window opens") !=
                        std::string::npos &&
                    e.message.find("leaving it before the maintenance") != std::string::npos);
  }
  EXPECT_TRUE(said);
  EXPECT_NE(file_text(worker_log(id, 1, 0)).find("terminated at step="), std::string::npos)
      << "the workload had its SIGTERM (and a checkpoint) before the window";
  EXPECT_EQ(checksums(id, 2, 1), std::vector<std::string>{uninterrupted_checksum(300)});
}

} // namespace
} // namespace jobman::test
