// Multislice end to end on the mock: one job on two v4-16 slices (four hosts) of one queued resource, whose
// systolic-train all-reduces its gradients between the slices through the coordinator jobman names. One slice is
// preempted mid-run; the job is recovered as one (both slices asked for again, one preemption) and ends with every
// worker's checksum equal to the single-process run's. Every worker's JOBMAN_* and MEGASCALE_* variables are checked.
// The phase machine's side is told in-process by tests/supervisor/.
#include "jobman/core/slice_hosts.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "support/supervisor_home.hpp"

#include <gtest/gtest.h>
#include <map>

namespace jobman::test {
namespace multislice_e2e_test {

using domain::AttemptOutcome;

// The variables a worker's log shows, from the `env` the command prints before training.
std::map<std::string, std::string> variables_in(const std::string& log) {
  std::map<std::string, std::string> out;
  for (const auto& line : util::split(log, '\n')) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && (line.starts_with("JOBMAN_") || line.starts_with("MEGASCALE_"))) {
      out[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return out;
}

class MultisliceTest : public SupervisorHome {
protected:
  // A job on `slices` v4-16 slices in us-central2-b that prints its variables, then trains `steps` steps of `step_ms`.
  std::string multislice_config(int slices, int steps, int step_ms) {
    return dir
        .write("multislice.yaml",
               "job:\n  name: e2e-multislice\ntpu:\n  accelerator: v4-16\n  slices: " + std::to_string(slices) +
                   "\n  zone: " + std::string(kZone) +
                   "\n  pricing: spot\n"
                   "gcsfuse:\n  bucket_name: e2e-bucket\n  mount_path: ~/bucket\n"
                   "command:\n  cmd: |\n    env | grep -E '^(JOBMAN|MEGASCALE)_' | sort\n    " +
                   training(steps, step_ms) + "\n  workers: all\nrecovery:\n  max_failures: 0\n  max_preemptions: 2\n")
        .string();
  }
};

TEST_F(MultisliceTest, TwoSlicesPreemptedMidRunRecoverAsOneAndReachTheSingleProcessChecksum) {
  start_daemon();
  const auto id = create(multislice_config(2, 300, 30));
  EXPECT_EQ(job(id).hosts, 4);
  ASSERT_TRUE(await_log(id, 1, "step=60 ")) << file_text(worker_log(id, 1, 0));
  // Slice 1's node is preempted: the queued resource holds both slices, and both are lost with it.
  const auto node = node_of(id);
  ASSERT_TRUE(preempt(node + "-1"));

  ASSERT_TRUE(eventually([&] { return db().attempts().of(id).size() == 2 && job(id).phase == domain::Phase::running; },
                         kPatience))
      << job(id).phase_reason;
  const auto coordinator = job(id).host0_ip;
  const auto done = wait_for(id, 0, 240);
  EXPECT_EQ(done.preemptions, 1) << "one preemption, counted once for both slices";
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::preempted);
  EXPECT_EQ(attempts[1].outcome, AttemptOutcome::succeeded);
  EXPECT_EQ(attempts[1].hosts, 4);
  EXPECT_NE(file_text(worker_log(id, 2, 0)).find("resumed from step="), std::string::npos)
      << file_text(worker_log(id, 2, 0));

  // Every worker of both slices trained to the checksum of one process running all 300 steps alone.
  const auto expected = uninterrupted_checksum(300);
  EXPECT_EQ(checksums(id, 2, 4), std::vector<std::string>(4, expected));

  // Each worker knew its place: numbered across the slices, slice 0's hosts first, all meeting at slice 0's worker 0.
  const auto hosts = core::load_slice_hosts(worker_log(id, 2, 0).parent_path());
  ASSERT_TRUE(hosts);
  ASSERT_EQ(hosts->hosts.size(), 4U);
  EXPECT_FALSE(coordinator.empty());
  for (int w = 0; w < 4; ++w) {
    auto vars = variables_in(file_text(worker_log(id, 2, w)));
    EXPECT_EQ(vars["JOBMAN_WORKER_ID"], std::to_string(w)) << w;
    EXPECT_EQ(vars["JOBMAN_NUM_WORKERS"], "4") << w;
    EXPECT_EQ(vars["JOBMAN_SLICE_ID"], std::to_string(w / 2)) << w;
    EXPECT_EQ(vars["JOBMAN_NUM_SLICES"], "2") << w;
    EXPECT_EQ(vars["MEGASCALE_SLICE_ID"], std::to_string(w / 2)) << w;
    EXPECT_EQ(vars["MEGASCALE_NUM_SLICES"], "2") << w;
    EXPECT_EQ(vars["MEGASCALE_COORDINATOR_ADDRESS"], coordinator) << w;
    EXPECT_EQ(vars["MEGASCALE_PORT"], "8081") << w;
    EXPECT_EQ(hosts->hosts[static_cast<std::size_t>(w)].node, node_of(id) + "-" + std::to_string(w / 2)) << w;
  }
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

} // namespace multislice_e2e_test
} // namespace jobman::test
