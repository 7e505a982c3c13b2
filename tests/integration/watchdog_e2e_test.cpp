// A run that hangs or diverges, end to end on the mock: systolic-train over real ssh, under a real supervisor. A
// workload made to hang (the mock's :injectHang) is found silent past recovery.stall_timeout, its stacks are kept
// (the hanging process with the kernel function it waits in), it is restarted on the same slice and the job ends at
// the uninterrupted checksum. A loss spike (the mock's :injectLossSpike, which corrupts the weights as well as the
// loss) is rolled back to the checkpoint before it; the spike's steps are redone, so the run ends at the
// uninterrupted checksum too. The phase machine's side is told in-process by tests/supervisor/watchdog_test.cpp.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/supervisor_home.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <iostream>

namespace jobman::test {
namespace watchdog_e2e_test {

using domain::AttemptOutcome;

class WatchdogTest : public SupervisorHome {
protected:
  // Where the mock's admin calls find the tests' nodes.
  static std::string location() { return "projects/jobman-mock/locations/" + std::string(kZone); }
};

TEST_F(WatchdogTest, AHangingAttemptIsStoppedWithItsStacksKeptRestartedAndTheJobFinishes) {
  start_daemon();
  const auto id = create(config(training(400, 25), "spot", "v4-8",
                                "recovery:\n  max_failures: 1\n  poll_interval: 1s\n"
                                "  stall_timeout: 3s\n  stall_first_line: 60s\n"));
  ASSERT_TRUE(await_log(id, 1, "step=40 ")) << file_text(worker_log(id, 1, 0));
  const auto hang = inject_hang(*client, *mock, location(), node_of(id));
  ASSERT_EQ(hang.status, 200) << hang.body.dump();
  const auto hung_at = util::now_ms();

  ASSERT_TRUE(eventually([&] { return db().attempts().of(id).size() == 2; }, kPatience)) << job(id).phase_reason;
  const auto found_after_ms = util::now_ms() - hung_at;
  const auto done = wait_for(id, 0, 240);
  EXPECT_EQ(done.failures, 1);
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::stalled);
  EXPECT_EQ(attempts[1].queued_resource, attempts[0].queued_resource) << "restarted on the same slice";
  // Never before the timeout: the event says how long the attempt was silent. (How soon after it, bench/ measures.)
  const auto events = db().events().of(id);
  const auto stall = std::find_if(events.begin(), events.end(), [](const domain::EventRecord& e) {
    return e.kind == "action" && e.message.find("stalled: no worker printed a line for") != std::string::npos;
  });
  ASSERT_NE(stall, events.end());
  const auto data = nlohmann::json::parse(stall->data_json);
  EXPECT_GE(data["silent_seconds"].get<int>(), 3) << stall->message;
  EXPECT_FALSE(data["last_output"].is_null()) << stall->message;
  std::cout << "stall found and the attempt restarted " << found_after_ms << " ms after the hang was injected; "
            << stall->message << std::endl;

  // The stacks show the hanging systolic-train and what it waits in.
  const auto stacks = jm({"logs", std::to_string(id), "--stacks"});
  ASSERT_EQ(stacks.exit_code, 0) << stacks.err;
  EXPECT_NE(stacks.out.find("== worker 0, attempt 1 =="), std::string::npos) << stacks.out;
  bool hanging = false;
  for (const auto& line : util::split(stacks.out, '\n')) {
    const auto words = util::split(line, ' ');
    // PID PPID STATE WCHAN COMMAND...: systolic-train asleep (S) in the kernel, not running.
    if (words.size() >= 5 && line.find("systolic-train") != std::string::npos && words[2] == "S" && words[3] != "0") {
      hanging = true;
    }
  }
  EXPECT_TRUE(hanging) << stacks.out;
  EXPECT_NE(jm({"logs", std::to_string(id), "--stacks", "--attempt", "2"}).exit_code, 0)
      << "the second attempt did not stall";

  EXPECT_EQ(checksums(id, 2, 1), std::vector<std::string>{uninterrupted_checksum(400)});
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

TEST_F(WatchdogTest, ALossSpikeIsRolledBackToTheCheckpointBeforeItAndTheRunEndsAtTheUninterruptedChecksum) {
  start_daemon();
  const auto id = create(config(training(200, 25), "spot", "v4-8",
                                "recovery:\n  poll_interval: 1s\n"
                                "  loss_spike:\n    factor: 3\n    window: 10\n"));
  ASSERT_TRUE(await_log(id, 1, "step=50 ")) << file_text(worker_log(id, 1, 0));
  // One step: a spike of several steps stopped before its last would spike the redone steps too (the mock's fault
  // counts the slice's steps, whichever process computes them).
  const auto spiked = inject_loss_spike(*client, *mock, location(), node_of(id), 20, 1);
  ASSERT_EQ(spiked.status, 200) << spiked.body.dump();

  const auto done = wait_for(id, 0, 240);
  EXPECT_EQ(done.failures, 0);
  EXPECT_EQ(done.preemptions, 0);
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::rolled_back);
  ASSERT_TRUE(attempts[0].rollback_step);
  const auto spike = *attempts[0].rollback_step;
  EXPECT_GT(spike, 50);
  EXPECT_EQ(attempts[1].outcome, AttemptOutcome::succeeded);
  // The second attempt resumed from a checkpoint before the spike, and redid the spiked steps cleanly.
  const auto log = file_text(worker_log(id, 2, 0));
  const auto resumed = log.find("resum");
  ASSERT_NE(resumed, std::string::npos) << log;
  EXPECT_NE(log.find("before step " + std::to_string(spike)), std::string::npos) << log;
  EXPECT_EQ(checksums(id, 2, 1), std::vector<std::string>{uninterrupted_checksum(200)});
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

} // namespace watchdog_e2e_test
} // namespace jobman::test
