// The supervisor's judgements: queued-resource states, how an attempt's workers ended, and the budgets.
#include "jobman/config/loader.hpp"
#include "jobman/core/recovery.hpp"

#include <gtest/gtest.h>

namespace jobman::core {
namespace core_recovery_test {

using domain::Phase;
using remote::WorkerStatus;
using remote::WorkloadState;

config::JobConfig job_config(const std::string& recovery, const std::string& job_extra = "") {
  const std::string text = "job:\n  name: t\n" + job_extra +
                           "tpu:\n  accelerator: v4-32\n  zone: us-central2-b\n"
                           "command:\n  cmd: train\n" +
                           recovery;
  return config::parse_job_configs(text, "test.yaml").front();
}

WorkerStatus status(int worker, WorkloadState state, int exit_code = -1) {
  WorkerStatus s;
  s.worker = worker;
  s.state = state;
  s.exit_code = exit_code;
  return s;
}

std::optional<cloud::QueuedResource> resource(cloud::QueuedResourceState state) {
  cloud::QueuedResource qr;
  qr.state = state;
  return qr;
}

TEST(CoreRecovery, QueuedResourceStatesMapToWhatTheJobDoes) {
  using cloud::QueuedResourceState;
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::waiting_for_resources)), SliceVerdict::waiting);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::accepted)), SliceVerdict::waiting);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::creating)), SliceVerdict::waiting);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::provisioning)), SliceVerdict::provisioning);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::active)), SliceVerdict::active);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::suspending)), SliceVerdict::lost);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::suspended)), SliceVerdict::lost);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::failed)), SliceVerdict::lost);
  EXPECT_EQ(judge_slice(resource(QueuedResourceState::deleting)), SliceVerdict::deleting);
  EXPECT_EQ(judge_slice(std::nullopt), SliceVerdict::lost) << "a slice that is gone is a preemption";
  EXPECT_EQ(waiting_phase(SliceVerdict::waiting), Phase::queued);
  EXPECT_EQ(waiting_phase(SliceVerdict::provisioning), Phase::provisioning);
  EXPECT_EQ(waiting_phase(SliceVerdict::active), std::nullopt);
}

std::optional<cloud::Node> node(cloud::NodeState state) {
  cloud::Node n;
  n.state = state;
  return n;
}

// tpu-vm mode: a node PREEMPTED, TERMINATED or gone is a preemption, as a suspended queued resource is.
TEST(CoreRecovery, NodeStatesMapToWhatTheJobDoes) {
  using cloud::NodeState;
  EXPECT_EQ(judge_node(node(NodeState::creating)), SliceVerdict::provisioning);
  EXPECT_EQ(judge_node(node(NodeState::ready)), SliceVerdict::active);
  EXPECT_EQ(judge_node(node(NodeState::preempted)), SliceVerdict::lost);
  EXPECT_EQ(judge_node(node(NodeState::terminated)), SliceVerdict::lost);
  EXPECT_EQ(judge_node(node(NodeState::stopped)), SliceVerdict::lost) << "its workload is gone";
  EXPECT_EQ(judge_node(node(NodeState::deleting)), SliceVerdict::deleting);
  EXPECT_EQ(judge_node(node(NodeState::repairing)), SliceVerdict::provisioning) << "not usable now";
  EXPECT_EQ(judge_node(std::nullopt), SliceVerdict::lost) << "a node that is gone is a preemption";
}

TEST(CoreRecovery, AnAnnouncedMaintenanceIsDueWithinTheLeadOrWhileUnderWay) {
  constexpr std::int64_t now = 1'800'000'000'000;
  constexpr std::int64_t lead = 600'000;
  cloud::UpcomingMaintenance m;
  m.status = "PENDING";
  EXPECT_FALSE(maintenance_due(m, now, lead)) << "no window, nothing to act on";
  m.window_start_ms = now + 2 * lead;
  EXPECT_FALSE(maintenance_due(m, now, lead));
  m.latest_window_start_ms = now + lead / 2;
  EXPECT_TRUE(maintenance_due(m, now, lead)) << "the window may open as early as its latest start";
  m.latest_window_start_ms.reset();
  m.window_start_ms = now + lead;
  EXPECT_TRUE(maintenance_due(m, now, lead));
  m.window_start_ms = now - 1;
  EXPECT_TRUE(maintenance_due(m, now, lead));
  cloud::UpcomingMaintenance ongoing;
  ongoing.status = "ONGOING";
  EXPECT_TRUE(maintenance_due(ongoing, now, lead));
}

TEST(CoreRecovery, SliceViewsCarryTheVerdictTheStateAndTheError) {
  cloud::QueuedResource qr;
  qr.state = cloud::QueuedResourceState::failed;
  qr.failed_error = cloud::RpcStatus{8, "no capacity"};
  const auto failed = view_slice(qr);
  EXPECT_EQ(failed.verdict, SliceVerdict::lost);
  EXPECT_EQ(failed.state, "FAILED");
  EXPECT_EQ(failed.error, "no capacity");
  const auto preempted = view_slice(*node(cloud::NodeState::preempted));
  EXPECT_EQ(preempted.verdict, SliceVerdict::lost);
  EXPECT_EQ(preempted.state, "PREEMPTED");
  EXPECT_EQ(verdict_of(std::optional<SliceView>(preempted)), SliceVerdict::lost);
  EXPECT_EQ(verdict_of(std::optional<SliceView>(view_slice(*node(cloud::NodeState::ready)))), SliceVerdict::active);
  EXPECT_EQ(verdict_of(std::nullopt), SliceVerdict::lost);
}

TEST(CoreRecovery, SuccessIsEveryWorkerExitingZero) {
  const auto recovery = job_config("").recovery;
  const auto v = judge_workers({status(1, WorkloadState::exited, 0), status(0, WorkloadState::exited, 0)}, recovery);
  EXPECT_EQ(v.says, WorkersSay::succeeded);
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.reason, "worker 0 exited 0") << "worker 0's code is the job's";
  EXPECT_EQ(judge_workers({status(0, WorkloadState::exited, 0), status(1, WorkloadState::running)}, recovery).says,
            WorkersSay::running)
      << "a worker a step behind worker 0 still writes its last lines";
  EXPECT_EQ(judge_workers({status(0, WorkloadState::exited, 0), status(1, WorkloadState::starting)}, recovery).says,
            WorkersSay::running);
  EXPECT_EQ(judge_workers({status(0, WorkloadState::running), status(1, WorkloadState::exited, 0)}, recovery).says,
            WorkersSay::running)
      << "another worker's 0 decides nothing";
}

TEST(CoreRecovery, ANonZeroExitAnywhereDecidesAndIsClassified) {
  const auto recovery = job_config("recovery:\n  restart_exit_codes: [42, 75]\n").recovery;
  auto v = judge_workers({status(0, WorkloadState::running), status(3, WorkloadState::exited, 1)}, recovery);
  EXPECT_EQ(v.says, WorkersSay::failed);
  EXPECT_EQ(v.worker, 3);
  EXPECT_EQ(v.exit_code, 1);
  v = judge_workers({status(0, WorkloadState::exited, 0), status(1, WorkloadState::exited, 75)}, recovery);
  EXPECT_EQ(v.says, WorkersSay::restart) << "a failure elsewhere wins over worker 0's success";
  EXPECT_EQ(v.exit_code, 75);
  v = judge_workers({status(0, WorkloadState::exited, 143), status(1, WorkloadState::exited, 1)}, recovery);
  EXPECT_EQ(v.says, WorkersSay::preempted) << "worker 0's code is looked at first";
  EXPECT_EQ(v.worker, 0);
}

TEST(CoreRecovery, LostProcessesAndHostsAreNotFailures) {
  const auto recovery = job_config("").recovery;
  auto v = judge_workers({status(0, WorkloadState::running), status(1, WorkloadState::vanished)}, recovery);
  EXPECT_EQ(v.says, WorkersSay::preempted);
  EXPECT_EQ(v.exit_code, 143);
  v = judge_workers({status(0, WorkloadState::absent)}, recovery);
  EXPECT_EQ(v.says, WorkersSay::preempted) << "a wiped disk";
  auto lost = status(2, WorkloadState::unreachable, 255);
  lost.diagnostic = "Connection closed by remote host.";
  v = judge_workers({status(0, WorkloadState::running), lost}, recovery);
  EXPECT_EQ(v.says, WorkersSay::unreachable);
  EXPECT_EQ(v.exit_code, 255);
  EXPECT_NE(v.reason.find("Connection closed"), std::string::npos);
  EXPECT_EQ(judge_workers({status(0, WorkloadState::running), status(1, WorkloadState::starting)}, recovery).says,
            WorkersSay::running);
}

TEST(CoreRecovery, WithoutWorkerZeroEverySelectedWorkerMustSucceed) {
  const auto recovery = job_config("").recovery;
  EXPECT_EQ(judge_workers({status(1, WorkloadState::exited, 0), status(2, WorkloadState::running)}, recovery).says,
            WorkersSay::running);
  EXPECT_EQ(judge_workers({status(1, WorkloadState::exited, 0), status(2, WorkloadState::exited, 0)}, recovery).says,
            WorkersSay::succeeded);
}

TEST(CoreRecovery, PreemptionsSpendTheirOwnBudget) {
  const auto limited = job_config("recovery:\n  max_preemptions: 2\n  max_failures: 0\n");
  auto c = after_preemption(limited, 0, "slice SUSPENDED");
  EXPECT_EQ(c.to, Phase::recovering);
  EXPECT_EQ(c.add_preemptions, 1);
  EXPECT_EQ(c.add_failures, 0);
  EXPECT_EQ(c.reason, "slice SUSPENDED (preemption 1 of 2)");
  EXPECT_EQ(after_preemption(limited, 1, "x").to, Phase::recovering);
  c = after_preemption(limited, 2, "x");
  EXPECT_EQ(c.to, Phase::failed);
  EXPECT_EQ(c.cleanup_pending, true) << "a failed job's slice is released";
  EXPECT_NE(c.reason.find("preemption budget spent"), std::string::npos);
  EXPECT_EQ(after_preemption(job_config(""), 1000, "x").to, Phase::recovering) << "unlimited by default";
  EXPECT_EQ(after_preemption(job_config("", "  loop: false\n"), 0, "x").to, Phase::failed);
}

TEST(CoreRecovery, FailuresRetryOnTheSameSliceUntilTheBudgetIsSpent) {
  const auto none = job_config("recovery:\n  max_failures: 0\n");
  auto c = after_failure(none, 0, "worker 0 exited 1");
  EXPECT_EQ(c.to, Phase::failed);
  EXPECT_EQ(c.add_failures, 1);
  EXPECT_EQ(c.add_preemptions, 0);
  const auto two = job_config("recovery:\n  max_failures: 2\n");
  EXPECT_EQ(after_failure(two, 0, "x").to, Phase::setup);
  EXPECT_EQ(after_failure(two, 1, "x").to, Phase::setup);
  EXPECT_EQ(after_failure(two, 2, "x").to, Phase::failed);
}

TEST(CoreRecovery, BadHardwareReplacesTheSliceOnItsOwnBudget) {
  const auto defaults = job_config("recovery:\n  max_failures: 0\n  max_preemptions: 0\n");
  EXPECT_EQ(defaults.recovery.max_bad_hardware, 3);
  for (int spent = 0; spent < 3; ++spent) {
    const auto c = after_bad_hardware(defaults, spent, "bad hardware: worker 0 printed \"step=3 loss=nan\"");
    EXPECT_EQ(c.to, Phase::recovering) << spent;
    EXPECT_EQ(c.add_bad_hardware, 1);
    EXPECT_EQ(c.add_failures, 0);
    EXPECT_EQ(c.add_preemptions, 0);
  }
  const auto spent = after_bad_hardware(defaults, 3, "x");
  EXPECT_EQ(spent.to, Phase::failed);
  EXPECT_EQ(spent.cleanup_pending, true);
  EXPECT_NE(spent.reason.find("bad-hardware budget spent (3 bad slice(s) allowed)"), std::string::npos) << spent.reason;
  EXPECT_EQ(after_bad_hardware(job_config("recovery:\n  max_bad_hardware: 0\n"), 0, "x").to, Phase::failed);
}

TEST(CoreRecovery, ANodesHealthNamesBadHardwareOrMaintenance) {
  using cloud::NodeHealth;
  EXPECT_EQ(judge_health(NodeHealth::healthy), NodeTrouble::none);
  EXPECT_EQ(judge_health(NodeHealth::health_unspecified), NodeTrouble::none);
  EXPECT_EQ(judge_health(NodeHealth::timeout), NodeTrouble::bad_hardware);
  EXPECT_EQ(judge_health(NodeHealth::unhealthy_tensorflow), NodeTrouble::bad_hardware);
  EXPECT_EQ(judge_health(NodeHealth::unhealthy_maintenance), NodeTrouble::maintenance);
}

TEST(CoreRecovery, BadHardwarePatternsExpandTheDefaultsWhereTheConfigSaysSo) {
  const auto& builtin = config::default_bad_hardware_patterns();
  EXPECT_EQ(config::bad_hardware_patterns(job_config("").recovery), builtin);
  const auto mine = job_config("recovery:\n  bad_hardware: [default, \"XID [0-9]+\"]\n").recovery;
  auto expected = builtin;
  expected.emplace_back("XID [0-9]+");
  EXPECT_EQ(config::bad_hardware_patterns(mine), expected);
  EXPECT_TRUE(config::bad_hardware_patterns(job_config("recovery:\n  bad_hardware: []\n").recovery).empty());
}

} // namespace core_recovery_test
} // namespace jobman::core
