// The provisioning models end to end on the mock, through v2alpha1: a flex-start job whose training outlasts its run
// duration stops ahead of each run's end, checkpoints and runs again until it succeeds with the uninterrupted run's
// checksum, spending no budget; a reserved job runs in its reservation, and a best-effort job preempted for spot
// capacity recovers like a spot job. The deadline's rules are told in-process by tests/supervisor/.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/util/system.hpp"
#include "support/supervisor_home.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace jobman::test {
namespace provisioning_e2e_test {

using domain::AttemptOutcome;
using domain::Phase;
using nlohmann::json;

// us-central2-b's v4 in every provisioning model: spot, on-demand, a reservation, best-effort and flex-start.
constexpr const char* kWorld = "  us-central2-b:\n    v4:\n"
                               "      spot: {chips: 64}\n"
                               "      on_demand: {chips: 32}\n"
                               "      reserved: {chips: 16, reservation: lab-reservation}\n"
                               "      best_effort: {quota: 32}\n"
                               "      flex_start: {chips: 32, quota: 32}\n";

class ProvisioningTest : public SupervisorHome {
protected:
  ProvisioningTest() : SupervisorHome(kWorld) {}

  // A job on a v4-8 in us-central2-b at `pricing`, with `tpu_extra` and `recovery` keys (max_failures is 0), running
  // `command`.
  std::string job_config(const std::string& pricing, const std::string& tpu_extra, const std::string& recovery,
                         const std::string& command) {
    static int counter = 0;
    return dir
        .write("provisioning-" + std::to_string(++counter) + ".yaml",
               "job:\n  name: e2e\ntpu:\n  accelerator: v4-8\n  zone: " + std::string(kZone) +
                   "\n  pricing: " + pricing + "\n" + tpu_extra +
                   "gcsfuse:\n  bucket_name: e2e-bucket\n  mount_path: ~/bucket\n"
                   "command:\n  cmd: |\n    " +
                   command + "\n  workers: all\nrecovery:\n  max_failures: 0\n" + recovery)
        .string();
  }

  std::vector<AttemptOutcome> outcomes(std::int64_t id) {
    std::vector<AttemptOutcome> out;
    for (const auto& a : db().attempts().of(id)) {
      out.push_back(a.outcome);
    }
    return out;
  }
};

TEST_F(ProvisioningTest, AFlexStartJobThatOutlastsItsRunDurationSucceedsOverSeveralRunsSpendingNoBudget) {
  start_daemon();
  // Runs of 5 hours, left 2 hours ahead of their end: 18 s and 7.2 s on the mock (time scale 1000), time to stop the
  // workload under a sanitizer. 400 steps of 30 ms outlast the ~9 s each run leaves for training. No preemption is
  // allowed: a run's end must spend no budget.
  const auto id = create(job_config("flex-start", "  max_run_duration: 5h\n",
                                    "  max_preemptions: 0\n  deadline_lead: 2h\n", training(400, 30)));
  const auto done = wait_for(id, 0, 240);
  EXPECT_EQ(done.preemptions, 0);
  EXPECT_EQ(done.failures, 0);
  const auto attempts = db().attempts().of(id);
  ASSERT_GE(attempts.size(), 2U) << "the training outlasts one run";
  for (std::size_t i = 0; i + 1 < attempts.size(); ++i) {
    EXPECT_EQ(attempts[i].outcome, AttemptOutcome::run_ended) << "attempt " << attempts[i].number;
    EXPECT_EQ(attempts[i].pricing, domain::Pricing::flex_start);
    EXPECT_NE(file_text(worker_log(id, attempts[i].number, 0)).find("terminated at step="), std::string::npos)
        << "attempt " << attempts[i].number << " had its SIGTERM and checkpointed";
  }
  EXPECT_EQ(attempts.back().outcome, AttemptOutcome::succeeded);
  EXPECT_NE(file_text(worker_log(id, attempts.back().number, 0)).find("resumed from step="), std::string::npos);
  // Each run's workload stopped before the deadline the API gave for its slice.
  int stops = 0;
  for (const auto& e : db().events().of(id)) {
    if (e.kind != "action" || e.message.find("stopping the workload") == std::string::npos) {
      continue;
    }
    const auto data = json::parse(e.data_json);
    const auto deadline = util::parse_utc(data.value("termination_time", ""));
    ASSERT_TRUE(deadline) << e.data_json;
    const auto& stopped = attempts.at(data.value("attempt", 0) - 1);
    ASSERT_TRUE(stopped.ended_ms);
    EXPECT_LT(*stopped.ended_ms, *deadline) << "attempt " << stopped.number << " ended before its run's end";
    // The last run's training may end on its own just as its stop begins: judged by its exit, it succeeded.
    stops += stopped.outcome == AttemptOutcome::run_ended ? 1 : 0;
  }
  EXPECT_EQ(stops, static_cast<int>(attempts.size()) - 1);
  EXPECT_EQ(checksums(id, attempts.back().number, 1), std::vector<std::string>{uninterrupted_checksum(400)});
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(ProvisioningTest, AReservedJobAndABestEffortJobPreemptedOnceBothSucceedWithTheUninterruptedChecksum) {
  start_daemon();
  const auto reserved =
      create(job_config("reserved", "  reservation: lab-reservation\n", "  max_preemptions: 0\n", training(300, 20)));
  const auto best = create(job_config("best-effort", "", "  max_preemptions: 1\n", training(300, 20)));
  ASSERT_TRUE(await_log(best, 1, "step=60 "));
  // The reserved slice holds 4 of the reservation's chips while it runs, as reservations.list tells.
  const auto listed = http_call(*client, "GET", "/v2alpha1/projects/jobman-mock/locations/us-central2-b/reservations",
                                nullptr, {{"Authorization", "Bearer test-token"}});
  ASSERT_EQ(listed.status, 200) << listed.body.dump();
  ASSERT_EQ(listed.body["reservations"].size(), 1U) << listed.body.dump();
  EXPECT_EQ(listed.body["reservations"][0]["standard"]["usage"]["total"], "4");
  ASSERT_TRUE(preempt(node_of(best)));

  const auto reserved_done = wait_for(reserved, 0, 180);
  EXPECT_EQ(reserved_done.preemptions, 0);
  EXPECT_EQ(outcomes(reserved), std::vector<AttemptOutcome>{AttemptOutcome::succeeded});
  EXPECT_EQ(db().attempts().of(reserved).front().pricing, domain::Pricing::reserved);
  EXPECT_EQ(checksums(reserved, 1, 1), std::vector<std::string>{uninterrupted_checksum(300)});

  const auto best_done = wait_for(best, 0, 180);
  EXPECT_EQ(best_done.preemptions, 1) << "a best-effort preemption is a preemption";
  EXPECT_EQ(outcomes(best), (std::vector<AttemptOutcome>{AttemptOutcome::preempted, AttemptOutcome::succeeded}));
  EXPECT_EQ(checksums(best, 2, 1), std::vector<std::string>{uninterrupted_checksum(300)});
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

} // namespace provisioning_e2e_test
} // namespace jobman::test
