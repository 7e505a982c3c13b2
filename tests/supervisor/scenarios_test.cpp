// The supervisor's phase machine through whole stories the phase table cannot tell in one event: a supervisor that
// takes over, races between zones, failover, pools of workers and their tasks, a lost lease, and what users ask for.
// In-process, on the fakes (tests/supervisor/rig.hpp).
#include "jobman/config/loader.hpp"
#include "jobman/core/availability.hpp"
#include "jobman/core/data_locality.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/pool.hpp"
#include "jobman/core/slice_hosts.hpp"
#include "jobman/core/worker_shell.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/store/zone_catalogs.hpp"
#include "jobman/util/system.hpp"
#include "rig.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>

namespace jobman::test {
namespace scenarios_test {

using domain::DesiredState;
using domain::Phase;

constexpr const char* kZoneA = "us-central2-b";
constexpr const char* kZoneB = "us-east1-d";

std::string job_yaml(const std::string& tpu_extra = "", const std::string& extra = "", const std::string& zone = kZoneA,
                     const std::string& pricing = "spot") {
  return "job:\n  name: story\ntpu:\n  accelerator: v4-8\n  zone: " + zone + "\n  pricing: " + pricing + "\n" +
         tpu_extra + "command:\n  cmd: train\n  workers: all\n" + extra;
}

std::vector<std::string> without_ids(const std::vector<std::string>& calls) {
  std::vector<std::string> out;
  for (const auto& call : calls) {
    out.push_back(call.substr(0, call.find('/')));
  }
  return out;
}

class SupervisorStory : public ::testing::Test {
protected:
  Phase phase(std::int64_t id) { return r.job(id).phase; }
  bool reaches(std::int64_t id, Phase p, int limit = 50) {
    return r.tick_until([&] { return phase(id) == p; }, limit);
  }
  void exit_with(std::int64_t id, int code) { r.workers->exit(Rig::wid(id), r.job(id).attempt, code); }

  Rig r;
};

TEST_F(SupervisorStory, ASupervisorTakingOverReattachesWithoutLaunchingAgain) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.restart_supervisor();
  r.tick();
  EXPECT_EQ(phase(id), Phase::running);
  exit_with(id, 0);
  ASSERT_TRUE(reaches(id, Phase::succeeded)) << r.job(id).phase_reason;
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 1), 1) << "the workload ran once, across both supervisors";
  EXPECT_EQ(r.attempts(id).size(), 1U);
  EXPECT_EQ(without_ids(r.slices->mutations()),
            (std::vector<std::string>{"create qr us-central2-b", "delete qr us-central2-b"}));
}

TEST_F(SupervisorStory, ASupervisorTakingOverAfterTheWorkloadEndedRecordsHowItEnded) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml("", "recovery:\n  max_failures: 0\n")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  exit_with(id, 3); // While no supervisor watches.
  r.restart_supervisor();
  ASSERT_TRUE(reaches(id, Phase::failed));
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::failed);
  EXPECT_EQ(r.attempts(id).front().exit_code, 3);
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 1), 1);
}

TEST_F(SupervisorStory, FirstReadyKeepsTheFirstSliceUpAndDeletesTheOtherRequest) {
  r.slices->set_capacity(kZoneB, true);
  const auto id =
      r.create(job_yaml("  strategy: first-ready\n  order: as-written\n", "", "[us-central2-b, us-east1-d]")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  EXPECT_EQ(r.attempts(id).back().zone, kZoneB);
  ASSERT_TRUE(r.tick_until([&] { return r.slices->slices().size() == 1; }));
  EXPECT_EQ(r.slices->slices().front().zone, kZoneB);
  EXPECT_EQ(without_ids(r.slices->mutations()),
            (std::vector<std::string>{"create qr us-central2-b", "create qr us-east1-d", "delete qr us-central2-b"}));
}

// A race asks its candidates at once, so one on another continent from the data is held out of it: it is asked only
// once the race of the rest is given up, and the event says why.
TEST_F(SupervisorStory, FirstReadyAsksAZoneOnAnotherContinentFromTheDataOnlyOnceTheRestIsGivenUp) {
  constexpr const char* kNear = "europe-west4-a";
  config::Settings google;
  google.cloud = config::CloudKind::google;
  r.store.zone_catalogs().put_bucket(
      {core::bucket_cache_id(google), "eu-data", "EUROPE-WEST4", "region", "STANDARD", r.host->now_ms()});
  r.slices->set_capacity(kZoneA, true); // Room only on the other continent.
  const auto id =
      r.create(job_yaml("  strategy: first-ready\n  order: as-written\n  queue_timeout: 60s\n",
                        "gcsfuse:\n  bucket_name: eu-data\n  mount_path: ~/data\n", "[us-central2-b, europe-west4-a]"))
          .front();
  ASSERT_TRUE(reaches(id, Phase::queued));
  r.advance(30);
  r.tick();
  EXPECT_EQ(without_ids(r.slices->mutations()), (std::vector<std::string>{"create qr europe-west4-a"}))
      << "within the near zone's queue timeout, nothing is asked of the far one";
  bool said = false;
  for (const auto& e : r.events(id, "action")) {
    said =
        said || e.find("v4-8 spot in us-central2-b held back, on another continent from the data") != std::string::npos;
  }
  EXPECT_TRUE(said);
  ASSERT_TRUE(reaches(id, Phase::running, 100)) << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id).front().zone, kNear);
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::timed_out);
  EXPECT_EQ(r.attempts(id).back().zone, kZoneA) << "given up near the data, the job takes the far zone";
}

// With every candidate refused by the API, a race that held one back asks it before the job fails.
TEST_F(SupervisorStory, ARaceThatHeldAZoneBackAsksItBeforeTheJobFailsAsRefusedEverywhere) {
  config::Settings google;
  google.cloud = config::CloudKind::google;
  r.store.zone_catalogs().put_bucket(
      {core::bucket_cache_id(google), "eu-data", "EUROPE-WEST4", "region", "STANDARD", r.host->now_ms()});
  // Europe refuses its own request and the race's; us-central2-b refuses the one request it gets.
  r.slices->fail_next("create qr europe-west4-a", 404, "v4-8 is not offered in europe-west4-a");
  r.slices->fail_next("create qr europe-west4-a", 404, "v4-8 is not offered in europe-west4-a");
  r.slices->fail_next("create qr us-central2-b", 404, "v4-8 is not offered in us-central2-b");
  const auto id =
      r.create(job_yaml("  strategy: first-ready\n  order: as-written\n",
                        "gcsfuse:\n  bucket_name: eu-data\n  mount_path: ~/data\n", "[us-central2-b, europe-west4-a]"))
          .front();
  ASSERT_TRUE(reaches(id, Phase::failed, 200)) << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  std::vector<std::string> asked = without_ids(r.slices->mutations());
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "create qr us-central2-b"), 1) << "asked once, after the rest";
  EXPECT_EQ(asked.front(), "create qr europe-west4-a");
  EXPECT_NE(r.job(id).phase_reason.find("refused every candidate"), std::string::npos) << r.job(id).phase_reason;
}

TEST_F(SupervisorStory, AZoneWithoutCapacityIsLeftAfterItsQueueTimeoutForTheNext) {
  r.slices->set_capacity(kZoneB, true);
  const auto id =
      r.create(job_yaml("  queue_timeout: 60s\n  order: as-written\n", "", "[us-central2-b, us-east1-d]")).front();
  ASSERT_TRUE(reaches(id, Phase::queued));
  EXPECT_EQ(r.attempts(id).back().zone, kZoneA);
  r.advance(30);
  r.tick();
  EXPECT_EQ(r.attempts(id).size(), 1U) << "within its queue timeout the request waits";
  ASSERT_TRUE(reaches(id, Phase::running, 100)) << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::timed_out);
  EXPECT_EQ(r.attempts(id).back().zone, kZoneB);
  EXPECT_EQ(r.job(id).failures, 0);
  EXPECT_EQ(r.job(id).preemptions, 0);

  // What the two requests taught, as `jobman availability` reads it: zone A gave up its one request, zone B came up.
  const auto stats = core::availability(r.store.attempts().since(0), r.host->now_ms());
  const auto in = [&](const char* zone) {
    return std::find_if(stats.begin(), stats.end(), [&](const auto& s) { return s.zone == zone; });
  };
  ASSERT_NE(in(kZoneA), stats.end());
  EXPECT_EQ(in(kZoneA)->requests, 1);
  EXPECT_EQ(in(kZoneA)->came_up, 0);
  EXPECT_EQ(in(kZoneA)->gave_up, 1);
  ASSERT_NE(in(kZoneB), stats.end());
  EXPECT_EQ(in(kZoneB)->came_up, 1);
  // And the next job that orders its zones by what was learned asks zone B first, though A is written first.
  const auto next =
      r.create(job_yaml("  queue_timeout: 60s\n  order: learned\n", "", "[us-central2-b, us-east1-d]")).front();
  ASSERT_TRUE(reaches(next, Phase::running)) << r.job(next).phase_reason;
  ASSERT_EQ(r.attempts(next).size(), 1U);
  EXPECT_EQ(r.attempts(next).front().zone, kZoneB);
}

TEST_F(SupervisorStory, AZoneThatRefusesForQuotaIsAFailedCandidateAndTheNextIsAsked) {
  r.slices->set_capacity(kZoneA, true);
  r.slices->set_capacity(kZoneB, true);
  r.slices->fail_next("create qr us-central2-b", 429, "Quota exceeded");
  const auto id = r.create(job_yaml("  order: as-written\n", "", "[us-central2-b, us-east1-d]")).front();
  ASSERT_TRUE(reaches(id, Phase::running, 100));
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::quota);
  EXPECT_EQ(r.attempts(id).back().zone, kZoneB);
}

TEST_F(SupervisorStory, SpotFallsBackToOnDemandAfterThePreemptionsAllowed) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml("", "recovery:\n  fallback:\n    after_preemptions: 1\n")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  EXPECT_TRUE(r.slices->slices().front().spot);
  r.slices->preempt(r.slice_of(id));
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).preemptions == 1 && phase(id) == Phase::running; }));
  ASSERT_EQ(r.slices->slices().size(), 1U);
  EXPECT_FALSE(r.slices->slices().front().spot) << "the new slice is on-demand";
  EXPECT_EQ(r.attempts(id).back().pricing, domain::Pricing::ondemand);
}

TEST_F(SupervisorStory, AWorkerWithAFailedPreflightReplacesItsSliceBeforeLaunching) {
  r.slices->set_capacity(kZoneA, true);
  r.workers->set_preflight(0, 1, "tpu check failed\n");
  const auto id = r.create(job_yaml("  preflight: check-tpu\n")).front();
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).bad_hardware == 1; }));
  r.workers->set_preflight(0, 0, "");
  ASSERT_TRUE(reaches(id, Phase::running));
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::bad_hardware);
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 1), 0) << "nothing was launched on the bad slice";
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 2), 1);
}

TEST_F(SupervisorStory, ANewSliceOnAMachineFoundBadIsRejectedBeforeSetup) {
  r.slices->set_capacity(kZoneA, true);
  // The first slice runs on machine-7, which prints a NaN loss; the second lands on machine-7 again; the third not.
  r.slices->set_next_physical_hosts({{"machine-7"}, {"machine-7"}, {"machine-8"}});
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.workers->print(Rig::wid(id), 1, 0, "step=3 loss=nan\n");
  ASSERT_TRUE(r.tick_until([&] { return r.attempts(id).size() == 3 && phase(id) == Phase::running; }, 100));
  const auto attempts = r.attempts(id);
  EXPECT_EQ(attempts[0].outcome, domain::AttemptOutcome::bad_hardware);
  EXPECT_EQ(attempts[1].outcome, domain::AttemptOutcome::rejected);
  EXPECT_EQ(r.job(id).bad_hardware, 1) << "a rejected slice spends no budget";
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 2), 0) << "nothing ran on the rejected slice";
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 3), 1);
}

TEST_F(SupervisorStory, CancelStopsTheWorkloadKeepsTheSliceAndResumeReusesIt) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.request(id, DesiredState::stop);
  ASSERT_TRUE(reaches(id, Phase::cancelled)) << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  EXPECT_EQ(r.workers->workload(Rig::wid(id), 1, 0).state, remote::WorkloadState::exited);
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::cancelled);
  EXPECT_EQ(r.slices->slices().size(), 1U) << "cancel keeps the slice";
  EXPECT_FALSE(core::apply_request(r.store, id, core::Request::cancel).changed) << "a second cancel changes nothing";
  r.request(id, DesiredState::run);
  ASSERT_TRUE(reaches(id, Phase::running));
  EXPECT_EQ(without_ids(r.slices->mutations()), std::vector<std::string>{"create qr us-central2-b"})
      << "resume reused the kept slice";

  // Delete: DELETED only once the cloud has confirmed the slice gone, however many tries that takes.
  r.slices->fail_next("delete qr", 503, "backend unavailable");
  r.request(id, DesiredState::remove);
  ASSERT_TRUE(r.tick_until([&] { return r.slices->mutations().size() >= 2; }));
  EXPECT_NE(phase(id), Phase::deleted) << "the first delete was refused";
  EXPECT_EQ(r.slices->slices().size(), 1U);
  ASSERT_TRUE(reaches(id, Phase::deleted, 100)) << r.job(id).phase_reason;
  EXPECT_TRUE(r.slices->slices().empty());
  EXPECT_EQ(r.workers->workload(Rig::wid(id), 2, 0).state, remote::WorkloadState::exited);
  EXPECT_FALSE(core::apply_request(r.store, id, core::Request::remove).changed) << "a second delete changes nothing";

  // Clean: the slice released, the record and the job's directory gone; a second clean finds no such job (exit 3).
  const auto other = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(other, Phase::running));
  ASSERT_TRUE(std::filesystem::is_directory(core::job_directory(other))) << "its logs are there";
  r.request(other, DesiredState::clean);
  ASSERT_TRUE(r.tick_until([&] { return !r.store.jobs().find(other).has_value(); }));
  EXPECT_TRUE(r.slices->slices().empty());
  EXPECT_FALSE(std::filesystem::exists(core::job_directory(other)));
  try {
    core::apply_request(r.store, other, core::Request::clean);
    ADD_FAILURE() << "a second clean of a removed job";
  } catch (const domain::NoSuchJobError& e) {
    EXPECT_EQ(e.code(), domain::job_exit::no_such_job);
  }
}

TEST_F(SupervisorStory, ANodeCreatedDirectlyIsKeptByCancelReusedByResumeAndReleasedByDelete) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml("  allocation_mode: tpu-vm\n")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.request(id, DesiredState::stop);
  ASSERT_TRUE(reaches(id, Phase::cancelled));
  EXPECT_EQ(r.slices->slices().size(), 1U) << "cancel keeps the node";
  EXPECT_EQ(r.workers->workload(Rig::wid(id), 1, 0).state, remote::WorkloadState::exited) << "cancel stops it";
  EXPECT_EQ(r.job(id).phase_reason, "cancelled by the user; slice " + r.slice_of(id) + " kept");
  r.request(id, DesiredState::run);
  ASSERT_TRUE(reaches(id, Phase::running));
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 2), 1);
  // `jobman ssh` goes to the node the current attempt runs on: the kept one.
  const auto live = core::live_attempt(r.store, r.job(id));
  EXPECT_EQ(live.number, 2);
  EXPECT_EQ(live.node, r.node_of(id));
  r.request(id, DesiredState::remove);
  ASSERT_TRUE(reaches(id, Phase::deleted));
  EXPECT_EQ(without_ids(r.slices->mutations()),
            (std::vector<std::string>{"create node us-central2-b", "delete node us-central2-b"}));

  // Clean of a job on a node created directly: the node deleted and the record gone.
  const auto other = r.create(job_yaml("  allocation_mode: tpu-vm\n")).front();
  ASSERT_TRUE(reaches(other, Phase::running));
  r.request(other, DesiredState::clean);
  ASSERT_TRUE(r.tick_until([&] { return !r.store.jobs().find(other).has_value(); }));
  EXPECT_TRUE(r.slices->slices().empty());
  EXPECT_EQ(without_ids(r.slices->mutations()).back(), "delete node us-central2-b");
}

TEST_F(SupervisorStory, ANodeCreateThatFailsForCapacityIsAskedAgainUntilThereIsCapacity) {
  const auto id = r.create(job_yaml("  allocation_mode: tpu-vm\n")).front();
  ASSERT_TRUE(r.tick_until([&] { return !r.slices->slices().empty(); }));
  r.slices->fail(r.slice_of(id), 8, "There is no more capacity in the zone");
  ASSERT_TRUE(reaches(id, Phase::queued));
  EXPECT_NE(r.job(id).phase_reason.find("waiting for capacity"), std::string::npos) << r.job(id).phase_reason;
  r.slices->set_capacity(kZoneA, true);
  ASSERT_TRUE(reaches(id, Phase::running, 200));
  EXPECT_EQ(r.attempts(id).size(), 1U) << "the same attempt asks again";
  EXPECT_EQ(r.job(id).failures, 0);
}

TEST_F(SupervisorStory, AWorkerBehindWorkerZeroFinishesBeforeTheJobSucceeds) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml().replace(job_yaml().find("v4-8"), 4, "v4-32")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  ASSERT_EQ(r.attempts(id).back().hosts, 4);
  r.workers->exit(Rig::wid(id), 1, 0, 0);
  for (int i = 0; i < 5; ++i) {
    r.advance(1);
    r.tick();
  }
  EXPECT_EQ(phase(id), Phase::running) << "workers 1 to 3 still run";
  exit_with(id, 0);
  ASSERT_TRUE(reaches(id, Phase::succeeded));
}

// Worker 1's stream fails at once (gcloud's HTTP 503) while its workload runs on: the stream's end is not the
// workload's, so worker 0 finishing does not end the job either.
TEST_F(SupervisorStory, AWorkerWhoseStreamFailsAtOnceStillFinishesBeforeTheJobSucceeds) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml().replace(job_yaml().find("v4-8"), 4, "v4-32")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.workers->fail_stream(Rig::wid(id), 1, 1);
  r.workers->exit(Rig::wid(id), 1, 0, 0);
  for (int i = 0; i < 5; ++i) {
    r.advance(1);
    r.tick();
  }
  EXPECT_EQ(phase(id), Phase::running) << r.job(id).phase_reason;
  EXPECT_EQ(r.workers->workload(Rig::wid(id), 1, 1).state, remote::WorkloadState::running);
  r.workers->print(Rig::wid(id), 1, 1, "step=400 loss=0.1\n");
  exit_with(id, 0);
  ASSERT_TRUE(reaches(id, Phase::succeeded)) << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id).size(), 1U);
  EXPECT_EQ(r.workers->launches(Rig::wid(id), 1), 4) << "launched once on each worker, never again";
  std::ifstream log(remote::worker_log_path(core::attempt_directory(id, 1), 1));
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("step=400 loss=0.1\n"), std::string::npos) << "worker 1's output came home after all: " << text;
}

TEST_F(SupervisorStory, FirstReadyWithCapacityEverywhereLeavesExactlyOneSlice) {
  r.slices->set_capacity(kZoneA, true);
  r.slices->set_capacity(kZoneB, true);
  const auto id = r.create(job_yaml("  strategy: first-ready\n", "", "[us-central2-b, us-east1-d]")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  const auto released = [&] {
    const auto rivals = r.store.rivals().of(id);
    return !rivals.empty() &&
           std::all_of(rivals.begin(), rivals.end(), [](const auto& rival) { return rival.released_ms.has_value(); });
  };
  ASSERT_TRUE(r.tick_until(released));
  ASSERT_EQ(r.slices->slices().size(), 1U);
  EXPECT_EQ(r.slices->slices().front().id, r.slice_of(id));
}

TEST_F(SupervisorStory, CancellingARaceDeletesTheRivalsAndKeepsTheJobsOwnRequest) {
  const auto id = r.create(job_yaml("  strategy: first-ready\n", "", "[us-central2-b, us-east1-d]")).front();
  ASSERT_TRUE(r.tick_until([&] { return r.slices->slices().size() == 2; }));
  r.request(id, DesiredState::stop);
  ASSERT_TRUE(reaches(id, Phase::cancelled));
  ASSERT_TRUE(r.tick_until([&] { return r.slices->slices().size() == 1; }));
  EXPECT_EQ(r.slices->slices().front().id, r.slice_of(id));
  const auto rivals = r.store.rivals().of(id);
  ASSERT_EQ(rivals.size(), 1U);
  EXPECT_EQ(rivals[0].outcome, domain::RivalOutcome::abandoned);
  r.request(id, DesiredState::remove);
  ASSERT_TRUE(r.tick_until([&] { return r.slices->slices().empty(); }));
}

TEST_F(SupervisorStory, AnIdleWorkerReleasesItsSliceAndAQueuedTaskBringsANewOne) {
  r.slices->set_capacity(kZoneA, true);
  const auto worker_config = r.dir.write("worker.yaml", job_yaml("  idle_release: 10m\n"));
  const auto worker = core::start_workers(r.store, config::load_job_configs(worker_config.string()), "alice").front();
  const auto idle = [&] {
    const auto w = r.job(worker);
    return w.phase == Phase::pending && w.phase_reason.starts_with("idle: no task for 10m");
  };
  ASSERT_TRUE(r.tick_until(idle, 100, 10)) << r.job(worker).phase_reason;
  EXPECT_EQ(r.attempts(worker).front().outcome, domain::AttemptOutcome::idle);
  ASSERT_TRUE(r.tick_until([&] { return r.slices->slices().empty(); }));
  const auto task_config = r.dir.write("task.yaml", job_yaml());
  const auto task =
      core::submit_tasks(r.store, {{config::load_job_configs(task_config.string()).front(), "", std::nullopt, 0}},
                         "alice")
          .front();
  ASSERT_TRUE(reaches(task, Phase::running));
  const auto slices = r.attempts(worker);
  ASSERT_EQ(slices.size(), 2U);
  EXPECT_EQ(r.attempts(task).front().queued_resource, slices[1].queued_resource);
  exit_with(task, 0);
  ASSERT_TRUE(reaches(task, Phase::succeeded));
  ASSERT_TRUE(r.tick_until(idle, 100, 10)) << r.job(worker).phase_reason;
  ASSERT_TRUE(r.tick_until([&] { return r.slices->slices().empty(); }));
}

TEST_F(SupervisorStory, ACleanupThatFailsIsRetriedAndNeverChangesTheTerminalPhase) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.slices->fail_next("delete qr", 403, "Permission 'tpu.queuedResources.delete' denied");
  exit_with(id, 0);
  ASSERT_TRUE(reaches(id, Phase::succeeded));
  EXPECT_TRUE(r.job(id).cleanup_pending);
  EXPECT_FALSE(r.events(id, "error").empty());
  ASSERT_TRUE(r.tick_until([&] { return !r.job(id).cleanup_pending; }, 200, 5));
  EXPECT_TRUE(r.slices->slices().empty());
  EXPECT_EQ(phase(id), Phase::succeeded);
  EXPECT_FALSE(r.job(id).cleanup_pending);
}

TEST_F(SupervisorStory, ACreateThatFailsIsRetriedWithoutADuplicate) {
  r.slices->set_capacity(kZoneA, true);
  r.slices->fail_next("create qr", 503, "unavailable");
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running, 200));
  EXPECT_EQ(r.slices->slices().size(), 1U);
  EXPECT_EQ(r.attempts(id).size(), 1U);
}

TEST_F(SupervisorStory, ALostLeaseLeavesTheResultOfTheOperationInFlightUnrecorded) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  exit_with(id, 0);
  // Another supervisor takes the job while this one asks the workers how the workload ended.
  r.host->on_dispatch = [&](std::int64_t busy) { r.host->lose_lease(busy); };
  r.advance(1);
  r.tick();
  EXPECT_EQ(phase(id), Phase::running) << "this supervisor records nothing of a job another holds";
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::none);
  EXPECT_EQ(r.host->driven().count(id), 0U);
  EXPECT_EQ(r.slices->slices().size(), 1U) << "nor does it release the slice";
}

TEST_F(SupervisorStory, ASupervisorWhoseLeaseWasTakenUnbeknownToItWritesNothingMoreForTheJob) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  exit_with(id, 0);
  // While this supervisor asks the workers how the workload ended, it stalls past its lease and another takes the job;
  // no renewal has told it yet. The store refuses what it would record.
  const std::string other = "another:2:1:00000000";
  r.host->on_dispatch = [&](std::int64_t busy) {
    ASSERT_TRUE(r.store.leases().try_acquire(busy, other, 60'000, r.host->now_ms() + 3'600'000));
  };
  r.advance(1);
  r.tick();
  EXPECT_EQ(phase(id), Phase::running) << "no phase written for a job another holds";
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::none);
  EXPECT_FALSE(r.attempts(id).front().ended_ms.has_value());
  EXPECT_EQ(r.host->leases_taken(), std::vector<std::int64_t>{id});
  EXPECT_EQ(r.host->driven().count(id), 0U) << "let go";
  EXPECT_EQ(r.store.leases().of(id)->owner, other) << "without giving up the other's lease";
  EXPECT_EQ(r.slices->slices().size(), 1U) << "nor its slice";
}

TEST_F(SupervisorStory, ANodeCreatedDirectlyIsReplacedWhenPreempted) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml("  allocation_mode: tpu-vm\n")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.slices->preempt(r.slice_of(id));
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).preemptions == 1 && phase(id) == Phase::running; }));
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::preempted);
  EXPECT_EQ(without_ids(r.slices->mutations()),
            (std::vector<std::string>{"create node us-central2-b", "delete node us-central2-b",
                                      "create node us-central2-b"}));
}

TEST_F(SupervisorStory, AWorkerRunsItsQueueOneTaskAtATimeAndRetriesAFailedOne) {
  r.slices->set_capacity(kZoneA, true);
  const auto worker_config = r.dir.write("worker.yaml", job_yaml("", "recovery:\n  max_failures: 1\n"));
  const auto worker = core::start_workers(r.store, config::load_job_configs(worker_config.string()), "alice").front();
  const auto task_config = r.dir.write("task.yaml", job_yaml("", "recovery:\n  max_failures: 1\n"));
  std::vector<core::TaskToSubmit> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.push_back({config::load_job_configs(task_config.string()).front(), kZoneA, std::nullopt, 0});
  }
  const auto ids = core::submit_tasks(r.store, tasks, "alice");
  ASSERT_TRUE(reaches(worker, Phase::running));
  ASSERT_TRUE(reaches(ids[0], Phase::running));
  EXPECT_EQ(phase(ids[1]), Phase::pending) << "one task at a time";
  exit_with(ids[0], 3);
  ASSERT_TRUE(r.tick_until([&] { return r.job(ids[0]).failures == 1; }));
  ASSERT_TRUE(r.tick_until([&] { return phase(ids[0]) == Phase::running || phase(ids[1]) == Phase::running; }));
  for (int round = 0; round < 4; ++round) {
    for (const auto id : ids) {
      if (phase(id) == Phase::running) {
        exit_with(id, 0);
      }
    }
    r.advance(1);
    r.tick();
  }
  ASSERT_TRUE(r.tick_until([&] { return phase(ids[0]) == Phase::succeeded && phase(ids[1]) == Phase::succeeded; }));
  EXPECT_EQ(r.attempts(ids[0]).size(), 2U);
  EXPECT_EQ(phase(worker), Phase::running);
  EXPECT_EQ(without_ids(r.slices->mutations()), std::vector<std::string>{"create qr us-central2-b"})
      << "every task borrowed the worker's one slice";
}

// Who may log in to a slice's hosts is decided as Google's guest agent decides it: jobman's key in the node's ssh-keys
// (added at create), or else added by a patch of the node's metadata; OS Login's account when OS Login is on.
TEST_F(SupervisorStory, ANodeWithoutJobmansKeyGetsItByAPatchBeforeSetup) {
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::queued));
  const auto slice = r.slices->slices().front();
  EXPECT_NE(slice.metadata.count("ssh-keys"), 0U) << "the create request carries jobman's key";
  r.slices->set_metadata(slice.id, {{"startup-script", "true"}}); // Someone replaced the node's metadata.
  r.slices->grant(slice.id);
  ASSERT_TRUE(reaches(id, Phase::running));
  const auto patched = r.slices->slice(slice.id)->metadata;
  EXPECT_EQ(patched.at("startup-script"), "true") << "the rest of the metadata is kept";
  const auto entry = core::ssh_keys_entry(core::default_ssh_identity(), util::current_user());
  EXPECT_EQ(patched.at("ssh-keys"), entry);
  EXPECT_EQ(without_ids(r.slices->mutations()),
            (std::vector<std::string>{"create qr us-central2-b", "patch node us-central2-b"}));
  const auto said = r.events(id, "observation");
  EXPECT_TRUE(std::any_of(said.begin(), said.end(),
                          [](const std::string& m) { return m.find("added jobman's SSH key") != std::string::npos; }));
}

TEST_F(SupervisorStory, AKeyInTheProjectsMetadataNeedsNoPatchUnlessTheNodeBlocksIt) {
  const auto entry = core::ssh_keys_entry(core::default_ssh_identity(), util::current_user());
  r.slices->set_project_metadata({{"ssh-keys", "someone:ssh-ed25519 AAAA someone\n" + entry}});
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::queued));
  const auto slice = r.slices->slices().front();
  r.slices->set_metadata(slice.id, {});
  r.slices->grant(slice.id);
  ASSERT_TRUE(reaches(id, Phase::running));
  EXPECT_EQ(without_ids(r.slices->mutations()), std::vector<std::string>{"create qr us-central2-b"});

  const auto blocked = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(blocked, Phase::queued));
  const auto second = r.slices->slices().back();
  r.slices->set_metadata(second.id, {{"block-project-ssh-keys", "TRUE"}});
  r.slices->grant(second.id);
  ASSERT_TRUE(reaches(blocked, Phase::running));
  EXPECT_EQ(r.slices->slice(second.id)->metadata.at("ssh-keys"), entry);
}

TEST_F(SupervisorStory, WithOsLoginTheHostsAreReachedAsTheAccountItGives) {
  r.slices->set_capacity(kZoneA, true);
  r.slices->set_project_metadata({{"enable-oslogin", "TRUE"}});
  r.slices->set_os_login_user(core::ssh_public_key(core::default_ssh_identity()), "sa_1234567890");
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  const auto hosts = core::load_slice_hosts(core::attempt_directory(id, 1));
  ASSERT_TRUE(hosts.has_value());
  EXPECT_EQ(hosts->user, "sa_1234567890");
  EXPECT_EQ(without_ids(r.slices->mutations()), std::vector<std::string>{"create qr us-central2-b"})
      << "OS Login decides: the node's ssh-keys are not patched";

  // A node that turns OS Login off for itself goes by its ssh-keys, which the create filled.
  const auto own = r.create(job_yaml("  metadata:\n    enable-oslogin: 'FALSE'\n")).front();
  ASSERT_TRUE(reaches(own, Phase::running));
  EXPECT_EQ(core::load_slice_hosts(core::attempt_directory(own, 1))->user, "");
}

TEST_F(SupervisorStory, OsLoginRefusingTheKeyIsSaidWhileTheJobWaits) {
  r.slices->set_capacity(kZoneA, true);
  r.slices->set_project_metadata({{"enable-oslogin", "true"}});
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).phase_reason.find("OS Login") != std::string::npos; }))
      << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  EXPECT_TRUE(phase(id) == Phase::queued || phase(id) == Phase::provisioning) << domain::to_string(phase(id));
  r.slices->set_os_login_user(core::ssh_public_key(core::default_ssh_identity()), "alice_example_com");
  ASSERT_TRUE(reaches(id, Phase::running));
}

TEST_F(SupervisorStory, ASliceWhoseHostsNeverPublishTheirKeysIsReplaced) {
  const auto id = r.create(job_yaml()).front();
  ASSERT_TRUE(reaches(id, Phase::queued));
  const auto first = r.slices->slices().front().id;
  r.slices->set_silent_hosts(first, 1);
  r.slices->grant(first);
  r.tick();
  r.tick();
  EXPECT_EQ(r.job(id).phase_reason.find("SSH host keys"), std::string::npos) << "hosts take a moment to boot";
  r.advance(core::supervision::kHostKeyLateSeconds);
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).phase_reason.find("1 of its hosts") != std::string::npos; }))
      << r.job(id).phase_reason;
  r.advance(core::supervision::kHostKeySeconds / 2);
  r.tick();
  EXPECT_EQ(r.attempts(id).size(), 1U) << "within the bound the hosts may still boot";
  r.slices->set_capacity(kZoneA, true);
  r.advance(core::supervision::kHostKeySeconds / 2);
  ASSERT_TRUE(reaches(id, Phase::running, 100)) << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  ASSERT_EQ(r.attempts(id).size(), 2U);
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::rejected);
  EXPECT_EQ(r.job(id).failures, 0) << "the job never ran on it";
}

// A flex-start job: each slice runs for tpu.max_run_duration. recovery.deadline_lead ahead of its end the workload is
// stopped (it checkpoints on SIGTERM), the attempt ends as run-ended, the cloud ends the run, and a new slice is asked
// for; no budget is spent.
TEST_F(SupervisorStory, AFlexStartRunIsStoppedAheadOfItsEndAndTheJobRunsAgainWithoutSpendingBudget) {
  r.slices->set_capacity(kZoneA, true);
  const auto id =
      r.create(job_yaml("  max_run_duration: 1h\n", "recovery:\n  deadline_lead: 5m\n", kZoneA, "flex-start")).front();
  ASSERT_TRUE(reaches(id, Phase::running)) << r.job(id).phase_reason;
  const auto first = r.slices->slices().front();
  EXPECT_EQ(first.request.value("provisioningModel", ""), "FLEX_START");
  EXPECT_EQ(first.request["runDuration"].value("maxRunDuration", ""), "3600s");
  EXPECT_FALSE(first.request.contains("spot"));
  EXPECT_TRUE(cloud::needs_v2alpha1(first.request));
  ASSERT_TRUE(first.termination_ms);
  const auto calls = r.slices->take_calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "list qr us-central2-b v2alpha1"), calls.end())
      << "only v2alpha1 tells when the run ends";

  // Until the lead, the workload runs.
  r.advance(3600 - 6 * 60);
  r.tick();
  r.tick();
  EXPECT_EQ(phase(id), Phase::running);
  EXPECT_EQ(r.workers->workload(Rig::wid(id), 1, 0).state, remote::WorkloadState::running);

  // Within it, the workload is stopped and the attempt ends as run-ended, before the termination time.
  ASSERT_TRUE(r.tick_until([&] { return phase(id) == Phase::recovering; }, 120)) << r.job(id).phase_reason;
  EXPECT_EQ(r.workers->workload(Rig::wid(id), 1, 0).exit_code, 143) << "stopped by SIGTERM";
  const auto ended = r.attempts(id).front();
  EXPECT_EQ(ended.outcome, domain::AttemptOutcome::run_ended);
  ASSERT_TRUE(ended.ended_ms);
  EXPECT_LE(*ended.ended_ms, *first.termination_ms - 4LL * 60 * 1000);
  EXPECT_NE(r.job(id).phase_reason.find("run 1, no limit"), std::string::npos) << r.job(id).phase_reason;

  // The cloud ends the run: jobman waits for it rather than deleting the slice early.
  r.tick();
  EXPECT_EQ(without_ids(r.slices->mutations()), (std::vector<std::string>{"create qr us-central2-b"}));
  r.host->advance_ms(*first.termination_ms - r.host->now_ms());
  r.slices->end_run(first.id);
  ASSERT_TRUE(r.tick_until([&] { return phase(id) == Phase::running && r.job(id).attempt == 2; }, 50))
      << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  EXPECT_EQ(
      without_ids(r.slices->mutations()),
      (std::vector<std::string>{"create qr us-central2-b", "delete qr us-central2-b", "create qr us-central2-b"}));
  EXPECT_EQ(r.job(id).preemptions, 0);
  EXPECT_EQ(r.job(id).failures, 0);

  // The second run ends as the cloud ends it, unwatched (the supervisor was away during the lead): still run-ended.
  const auto second = r.slices->slices().back();
  ASSERT_TRUE(second.termination_ms);
  r.restart_supervisor();
  r.host->advance_ms(*second.termination_ms - r.host->now_ms());
  r.slices->end_run(second.id);
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).attempt == 3; }, 50)) << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id)[1].outcome, domain::AttemptOutcome::run_ended);
  EXPECT_EQ(r.job(id).preemptions, 0);
}

// A workload that finishes on its own just as the deadline's stop begins (its last step done within the lead) is
// judged by its exit: the job succeeds, and no run is asked for to redo nothing.
TEST_F(SupervisorStory, AFlexStartWorkloadThatEndsOnItsOwnAsTheDeadlineStopBeginsSucceeds) {
  r.slices->set_capacity(kZoneA, true);
  const auto id =
      r.create(job_yaml("  max_run_duration: 1h\n", "recovery:\n  deadline_lead: 5m\n", kZoneA, "flex-start")).front();
  ASSERT_TRUE(reaches(id, Phase::running)) << r.job(id).phase_reason;
  r.advance(3600 - 5 * 60 + 1);
  r.workers->exit(Rig::wid(id), 1, 0);
  ASSERT_TRUE(r.tick_until([&] { return r.attempts(id).front().ended_ms.has_value(); }, 120)) << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::succeeded) << r.job(id).phase_reason;
  ASSERT_TRUE(r.tick_until([&] { return phase(id) == Phase::succeeded; }, 120))
      << domain::to_string(phase(id)) << ": " << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id).size(), 1U);
  EXPECT_EQ(r.job(id).failures, 0);
}

TEST_F(SupervisorStory, AFlexStartJobFailsOnceItsMaxRunsHaveEnded) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml("  max_run_duration: 10m\n", "recovery:\n  deadline_lead: 1m\n  max_runs: 1\n",
                                    kZoneA, "flex-start"))
                      .front();
  ASSERT_TRUE(reaches(id, Phase::running));
  ASSERT_TRUE(r.tick_until([&] { return phase(id) == Phase::failed; }, 700, 1)) << r.job(id).phase_reason;
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::run_ended);
  EXPECT_NE(r.job(id).phase_reason.find("recovery.max_runs allows 1 run"), std::string::npos) << r.job(id).phase_reason;
  EXPECT_EQ(r.job(id).preemptions, 0);
  ASSERT_TRUE(r.tick_until([&] { return r.slices->slices().empty(); })) << "the slice is released";
}

// A flex-start slice lost well before its run's end is a preemption like any other.
TEST_F(SupervisorStory, AFlexStartSliceLostBeforeItsRunEndsIsAPreemption) {
  r.slices->set_capacity(kZoneA, true);
  const auto id = r.create(job_yaml("  max_run_duration: 2h\n", "", kZoneA, "flex-start")).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  r.slices->preempt(r.slice_of(id));
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).preemptions == 1; }));
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::preempted);
}

// Reserved and best-effort requests say so in the body the client sends through v2alpha1.
TEST_F(SupervisorStory, ReservedAndBestEffortRequestsAskForTheirTiers) {
  r.slices->set_capacity(kZoneA, true);
  const auto reserved = r.create(job_yaml("  reservation: v4-reservation\n", "", kZoneA, "reserved")).front();
  const auto best = r.create(job_yaml("", "", kZoneA, "best-effort")).front();
  ASSERT_TRUE(reaches(reserved, Phase::running));
  ASSERT_TRUE(reaches(best, Phase::running));
  const auto body_of = [&](std::int64_t id) { return r.slices->slice(r.slice_of(id))->request; };
  EXPECT_EQ(body_of(reserved)["guaranteed"], (nlohmann::json{{"reserved", true}}));
  EXPECT_EQ(body_of(reserved).value("reservationName", ""),
            body_of(reserved)["tpu"]["nodeSpec"][0].value("parent", "") + "/reservations/v4-reservation");
  EXPECT_TRUE(body_of(best).contains("bestEffort"));
  EXPECT_TRUE(cloud::needs_v2alpha1(body_of(reserved)));
  EXPECT_TRUE(cloud::needs_v2alpha1(body_of(best)));
  // A best-effort slice taken back is a preemption, spending that budget.
  r.slices->preempt(r.slice_of(best));
  ASSERT_TRUE(r.tick_until([&] { return r.job(best).preemptions == 1; }));
  EXPECT_EQ(r.attempts(best).front().outcome, domain::AttemptOutcome::preempted);
}

// tpu.pricing as a list fails over between provisioning models: a flex-start request refused, the spot one comes up.
TEST_F(SupervisorStory, APricingListFailsOverFromOneProvisioningModelToTheNext) {
  r.slices->set_capacity(kZoneA, true);
  r.slices->fail_next("create qr us-central2-b", 400, "no flex-start capacity for v4 here");
  const auto id =
      r.create(job_yaml("  max_run_duration: 3h\n  order: as-written\n", "", kZoneA, "[flex-start, spot]")).front();
  ASSERT_TRUE(reaches(id, Phase::running)) << r.job(id).phase_reason;
  const auto attempts = r.attempts(id);
  ASSERT_EQ(attempts.size(), 2U);
  EXPECT_EQ(attempts[0].pricing, domain::Pricing::flex_start);
  EXPECT_EQ(attempts[0].outcome, domain::AttemptOutcome::refused);
  EXPECT_EQ(attempts[1].pricing, domain::Pricing::spot);
  const auto body = r.slices->slice(r.slice_of(id))->request;
  EXPECT_TRUE(body.contains("spot"));
  EXPECT_FALSE(body.contains("runDuration")) << "the spot request has no run duration";
}

TEST_F(SupervisorStory, AMultisliceJobRunsOnEverySlicesHostsAndIsRecoveredAsOne) {
  r.slices->set_capacity(kZoneA, true);
  const auto yaml = "job:\n  name: story\ntpu:\n  accelerator: v4-16\n  slices: 2\n  zone: " + std::string(kZoneA) +
                    "\n  pricing: spot\ncommand:\n  cmd: train\n  workers: all\n";
  const auto id = r.create(yaml).front();
  ASSERT_TRUE(reaches(id, Phase::running));
  // One queued resource asks for both slices; its nodes are named after the prefix, as the TPU API names them.
  const auto first = r.slices->slices().front();
  const auto& spec = first.request["tpu"]["nodeSpec"][0];
  EXPECT_FALSE(spec.contains("nodeId")) << spec.dump();
  EXPECT_EQ(spec["multisliceParams"], (nlohmann::json{{"nodeCount", 2}, {"nodeIdPrefix", first.node_id}}));
  EXPECT_EQ(r.job(id).hosts, 4);
  EXPECT_EQ(r.attempts(id).front().hosts, 4);
  // Every host of both slices is known, numbered slice after slice, each with its own node and index there.
  const auto hosts = core::load_slice_hosts(core::attempt_directory(id, 1));
  ASSERT_TRUE(hosts);
  ASSERT_EQ(hosts->hosts.size(), 4U);
  for (int w = 0; w < 4; ++w) {
    const auto& host = hosts->hosts[static_cast<std::size_t>(w)];
    EXPECT_EQ(host.node, first.node_id + "-" + std::to_string(w / 2)) << w;
    EXPECT_EQ(host.node_worker, w % 2) << w;
    EXPECT_EQ(host.address, "127.0." + std::to_string(w / 2) + "." + std::to_string(w % 2 + 2)) << w;
  }
  EXPECT_EQ(r.job(id).host0_ip, "127.0.0.2") << "slice 0's worker 0: the multislice coordinator";
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(r.workers->workload(Rig::wid(id), 1, w).state, remote::WorkloadState::running) << w;
  }

  // A preemption of the slices ends the attempt on all of them: one preemption, and both slices asked for again.
  r.slices->preempt(first.id);
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).preemptions == 1 && phase(id) == Phase::running; }));
  EXPECT_EQ(r.attempts(id).front().outcome, domain::AttemptOutcome::preempted);
  ASSERT_EQ(r.slices->slices().size(), 1U);
  const auto second = r.slices->slices().front();
  EXPECT_NE(second.id, first.id);
  EXPECT_EQ(second.node_count, 2);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(r.workers->workload(Rig::wid(id), 2, w).state, remote::WorkloadState::running) << w;
  }

  // Trouble on one slice's node ends the attempt on every slice, and a new pair of slices replaces them.
  r.slices->set_node_health(second.id, second.node_id + "-1", cloud::NodeHealth::unhealthy_tensorflow);
  ASSERT_TRUE(r.tick_until([&] { return r.attempts(id).size() == 3 && phase(id) == Phase::running; }, 100));
  EXPECT_EQ(r.attempts(id)[1].outcome, domain::AttemptOutcome::bad_hardware);
  EXPECT_EQ(r.job(id).preemptions, 1);
  for (int w = 0; w < 4; ++w) {
    EXPECT_NE(r.workers->workload(Rig::wid(id), 2, w).state, remote::WorkloadState::running) << w;
  }
  exit_with(id, 0);
  ASSERT_TRUE(reaches(id, Phase::succeeded));
}

} // namespace scenarios_test
} // namespace jobman::test
