// Failover end to end on the mock, where only the real mock and processes show it: a zone that does not offer the
// accelerator is a refused candidate, not a failed job; a supervisor killed in the middle of a first-ready race leaves
// the next one to finish it. The rest of failover (queue timeouts, quota, the learned order, spot falling back to
// on-demand, first-ready) is told in-process by tests/supervisor/scenarios_test.cpp.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/rivals.hpp"
#include "support/supervisor_home.hpp"

#include <csignal>
#include <gtest/gtest.h>

namespace jobman::test {
namespace failover_e2e_test {

using domain::Phase;
using nlohmann::json;

class FailoverTest : public SupervisorHome {
protected:
  // A job on v4-8 in `zones` (a YAML list) running `steps` steps, with `extra` YAML under tpu and `recovery`.
  std::string failover_config(const std::string& zones, int steps, const std::string& extra = "",
                              const std::string& recovery = "") {
    static int counter = 0;
    return dir
        .write("failover-" + std::to_string(++counter) + ".yaml",
               "job:\n  name: failover\ntpu:\n  accelerator: v4-8\n  zone: " + zones + "\n  pricing: spot\n" + extra +
                   "gcsfuse:\n  bucket_name: e2e-bucket\n  mount_path: ~/bucket\n"
                   "command:\n  cmd: " +
                   training(steps, 2) + "\nrecovery:\n  max_failures: 0\n" + recovery)
        .string();
  }

  // Sets the mock's v4 spot pool of `zone` to `chips` (and its quota, when given).
  bool set_spot(const std::string& zone, int chips, std::optional<int> quota = std::nullopt) {
    json body = {{"zone", zone}, {"generation", "v4"}, {"tier", "spot"}, {"chips", chips}};
    if (quota) {
      body["quota"] = *quota;
    }
    return http_call(*client, "PUT", "/mock/v1/capacity", body, mock->admin_headers()).status == 200;
  }

  // How many queued resources the mock holds, in any state.
  int queued_resources() {
    int n = 0;
    const auto all = metrics();
    for (const auto& [state, count] : all["queuedResources"].items()) {
      n += count.get<int>();
    }
    return n;
  }

  // The first-ready job with two candidates runs, its rival's deletion confirmed, and the mock holds its slice alone.
  bool race_decided(std::int64_t id) {
    if (!eventually([&] { return job(id).phase == Phase::running; }, kPatience)) {
      ADD_FAILURE() << "not running: " << job(id).phase_reason;
      return false;
    }
    if (!eventually(
            [&] {
              const auto rivals = db().rivals().of(id);
              return rivals.size() == 1 && rivals[0].released_ms.has_value();
            },
            kPatience)) {
      ADD_FAILURE() << "the rival is still held";
      return false;
    }
    EXPECT_EQ(queued_resources(), 1) << metrics().dump();
    return true;
  }

  // The first-ready job with two candidates waits in the queue, both its requests sent and neither up.
  bool both_requested(std::int64_t id) {
    return eventually(
        [&] {
          const auto rivals = db().rivals().of(id);
          return job(id).phase == Phase::queued && rivals.size() == 1 && !rivals[0].create_pending;
        },
        kPatience);
  }

  bool any_event(std::int64_t id, const std::string& text) {
    for (const auto& e : db().events().of(id)) {
      if (e.message.find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
};

TEST_F(FailoverTest, AnAcceleratorTheZoneDoesNotOfferIsARefusedCandidateNotAFailedJob) {
  start_daemon();
  // The mock's us-central2-b offers v4 alone: v5litepod-8 is refused (400), and v4-8 runs.
  const auto path =
      dir.write("refused.yaml", "job:\n  name: refused\ntpu:\n  accelerator: [v5litepod-8, v4-8]\n"
                                "  zone: us-central2-b\n  order: as-written\n"
                                "command:\n  cmd: echo ran-on-$(hostname)\nrecovery:\n  max_failures: 0\n");
  const auto id = create(path.string());
  wait_for(id, 0, 120);
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].accelerator, "v5litepod-8");
  EXPECT_EQ(attempts[0].outcome, domain::AttemptOutcome::refused);
  EXPECT_EQ(attempts[1].accelerator, "v4-8");
  EXPECT_EQ(attempts[1].outcome, domain::AttemptOutcome::succeeded);
  EXPECT_EQ(job(id).failures, 0);
  EXPECT_TRUE(any_event(id, "us-central2-b does not offer v5litepod-8 spot"));

  // Nothing offered anywhere is refused at create, naming each candidate.
  const auto none = dir.write("none.yaml", "job:\n  name: none\ntpu:\n  accelerator: [v5litepod-8, v5p-8]\n"
                                           "  zone: us-central2-b\ncommand:\n  cmd: 'true'\n");
  const auto refused = jm({"create", none.string()});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("none.yaml:4:16: tpu.accelerator: v5p-8 is not offered in us-central2-b"),
            std::string::npos)
      << refused.err;
}

TEST_F(FailoverTest, ASupervisorKilledMidRaceLeavesTheNextOneToFinishIt) {
  ASSERT_TRUE(set_spot("us-central2-b", 0));
  ASSERT_TRUE(set_spot("us-east1-d", 0));
  const auto first = start_daemon();
  const auto id = create(failover_config("[us-central2-b, us-east1-d]", 40, "  strategy: first-ready\n"));
  ASSERT_TRUE(both_requested(id)) << job(id).phase_reason;
  daemons[first]->send(SIGKILL);
  EXPECT_EQ(daemons[first]->finish(), 128 + SIGKILL);
  // Capacity comes to the zone of the rival while nobody watches; the next supervisor sees it up and keeps it.
  ASSERT_TRUE(set_spot("us-east1-d", 64));
  start_daemon();
  wait_for(id, 0, 180);
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 1U);
  EXPECT_EQ(attempts[0].zone, "us-east1-d");
  EXPECT_TRUE(db().rivals().of(id)[0].released_ms);
  EXPECT_EQ(checksums(id, 1, 1), std::vector<std::string>{uninterrupted_checksum(40)});
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

} // namespace failover_e2e_test
} // namespace jobman::test
