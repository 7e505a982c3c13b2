// The supervisor's phase machine, row by row: a job is brought to a phase on the fake cloud, then the zone's listing
// and the workers say something; each row expects the phase the job reaches, how its first attempt ended, the budget
// it spent and the calls that changed the cloud. Every row runs in-process in milliseconds (tests/supervisor/rig.hpp).
#include "jobman/store/attempts.hpp"
#include "jobman/util/strings.hpp"
#include "rig.hpp"

#include <gtest/gtest.h>

// Each row names only what it expects; the rest keep the defaults of Row's members. GCC 12 warns of every member a
// designated initializer leaves out, defaults or not.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace jobman::test {
namespace phase_table_test {

using cloud::NodeHealth;
using cloud::QueuedResourceState;
using domain::Phase;

constexpr const char* kZoneA = "us-central2-b";
constexpr const char* kZoneB = "us-east1-d";

// A job on a v4-8 in zone A; `extra` is appended (it may add sections, or keys under recovery: or tpu: written as
// "recovery:\n  KEY: VALUE").
std::string job_yaml(const std::string& pricing = "spot", const std::string& extra = "") {
  return "job:\n  name: table\n"
         "tpu:\n  accelerator: v4-8\n  zone: " +
         std::string(kZoneA) + "\n  pricing: " + pricing +
         "\n"
         "command:\n  cmd: train\n  workers: all\n" +
         extra;
}

// Where a row brings its job before the event.
enum class Start {
  queued,  // Its queued resource waits for capacity (QUEUED).
  running, // Its workload runs on an ACTIVE slice (RUNNING).
};

struct Row {
  std::string name;
  std::string config; // The job's YAML.
  Start start = Start::running;
  std::function<void(Rig&, std::int64_t)> event;                 // What the listing says and the workers report.
  int ticks = 3;                                                 // Ticks (one second apart) after the event.
  Phase phase = Phase::running;                                  // The phase then.
  domain::AttemptOutcome outcome = domain::AttemptOutcome::none; // How attempt 1 ended (none: it has not).
  int preemptions = 0;                                           // Budget spent.
  int failures = 0;
  int bad_hardware = 0;
  std::vector<std::string> mutations; // Creates and deletes after the event ("delete qr ZONE").
};

std::ostream& operator<<(std::ostream& out, const Row& row) {
  return out << row.name;
}

// "delete qr us-central2-b/jobman-..." without the resource id.
std::vector<std::string> without_ids(const std::vector<std::string>& calls) {
  std::vector<std::string> out;
  for (const auto& call : calls) {
    out.push_back(call.substr(0, call.find('/')));
  }
  return out;
}

// The rows' shared moves.
void preempt(Rig& r, std::int64_t id) {
  r.slices->preempt(r.slice_of(id));
}
// A SCHEDULED maintenance whose window opens `seconds` from the rig's now.
cloud::UpcomingMaintenance maintenance_in(Rig& r, std::int64_t seconds) {
  cloud::UpcomingMaintenance m;
  m.type = "SCHEDULED";
  m.status = "PENDING";
  m.window_start_ms = r.host->now_ms() + seconds * 1000;
  return m;
}
void exit_with(Rig& r, std::int64_t id, int code) {
  r.workers->exit(Rig::wid(id), r.job(id).attempt, code);
}

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      {.name = "RunningExitsZeroSucceedsAndReleasesTheSlice",
       .config = job_yaml("on-demand"),
       .event = [](Rig& r, std::int64_t id) { exit_with(r, id, 0); },
       .phase = Phase::succeeded,
       .outcome = domain::AttemptOutcome::succeeded,
       .mutations = {"delete qr us-central2-b"}},
      {.name = "RunningPreemptedRecoversOnANewSlice",
       .config = job_yaml(),
       .event = preempt,
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::preempted,
       .preemptions = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "RunningExits143IsAPreemption",
       .config = job_yaml(),
       .event = [](Rig& r, std::int64_t id) { exit_with(r, id, 143); },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::preempted,
       .preemptions = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "RunningFailsWithoutBudgetFails",
       .config = job_yaml(),
       .event = [](Rig& r, std::int64_t id) { exit_with(r, id, 1); },
       .phase = Phase::failed,
       .outcome = domain::AttemptOutcome::failed,
       .failures = 1,
       .mutations = {"delete qr us-central2-b"}},
      {.name = "RunningFailsWithBudgetRunsAgainOnTheSameSlice",
       .config = job_yaml("spot", "recovery:\n  max_failures: 2\n"),
       .event = [](Rig& r, std::int64_t id) { exit_with(r, id, 1); },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::failed,
       .failures = 1},
      {.name = "RunningRestartCodeRunsAgainWithoutSpendingBudget",
       .config = job_yaml(),
       .event = [](Rig& r, std::int64_t id) { exit_with(r, id, 42); },
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::restart},
      {.name = "RunningWorkloadVanishedIsAPreemption",
       .config = job_yaml(),
       .event = [](Rig& r, std::int64_t id) { r.workers->vanish(Rig::wid(id), r.job(id).attempt); },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::preempted,
       .preemptions = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "QueuedGrantedRunsTheWorkload",
       .config = job_yaml(),
       .start = Start::queued,
       .event = [](Rig& r, std::int64_t id) { r.slices->grant(r.slice_of(id)); },
       .phase = Phase::running},
      {.name = "QueuedSliceFailedIsLostAndAskedForAgain",
       .config = job_yaml(),
       .start = Start::queued,
       .event = [](Rig& r, std::int64_t id) { r.slices->fail(r.slice_of(id), 8, "no capacity"); },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::preempted,
       .preemptions = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "RunningNodeTimeoutIsBadHardware",
       .config = job_yaml(),
       .event = [](Rig& r, std::int64_t id) { r.slices->set_health(r.slice_of(id), NodeHealth::timeout); },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::bad_hardware,
       .bad_hardware = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "RunningNodeUnderMaintenanceIsAPreemption",
       .config = job_yaml(),
       .event = [](Rig& r,
                   std::int64_t id) { r.slices->set_health(r.slice_of(id), NodeHealth::unhealthy_maintenance); },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::preempted,
       .preemptions = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "RunningNanLineIsBadHardware",
       .config = job_yaml(),
       .event = [](Rig& r,
                   std::int64_t id) { r.workers->print(Rig::wid(id), r.job(id).attempt, 0, "step=7 loss=nan\n"); },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::bad_hardware,
       .bad_hardware = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "RunningNanLineWithoutBadHardwareBudgetFailsWithoutSpendingFailures",
       .config = job_yaml("spot", "recovery:\n  max_failures: 2\n  max_bad_hardware: 0\n"),
       .event = [](Rig& r,
                   std::int64_t id) { r.workers->print(Rig::wid(id), r.job(id).attempt, 0, "step=4 loss=inf\n"); },
       .phase = Phase::failed,
       .outcome = domain::AttemptOutcome::bad_hardware,
       .bad_hardware = 1,
       .mutations = {"delete qr us-central2-b"}},
      {.name = "RunningNanLineWithTheChecksOffIsNotBadHardware",
       .config = job_yaml("spot", "recovery:\n  bad_hardware: []\n"),
       .event = [](Rig& r,
                   std::int64_t id) { r.workers->print(Rig::wid(id), r.job(id).attempt, 0, "step=4 loss=nan\n"); },
       .phase = Phase::running},
      {.name = "RunningLineOfAPatternOfTheConfigIsBadHardware",
       .config = job_yaml("spot", "recovery:\n  max_bad_hardware: 0\n  bad_hardware: ['XID [0-9]+']\n"),
       .event =
           [](Rig& r, std::int64_t id) {
             r.workers->print(Rig::wid(id), r.job(id).attempt, 0, "XID 79: GPU has fallen off the bus\n");
           },
       .phase = Phase::failed,
       .outcome = domain::AttemptOutcome::bad_hardware,
       .bad_hardware = 1,
       .mutations = {"delete qr us-central2-b"}},
      {.name = "RunningMaintenanceAnnouncedWithinTheLeadIsLeftAsAPreemption",
       .config = job_yaml("spot", "recovery:\n  maintenance_lead: 3h\n"),
       .event =
           [](Rig& r, std::int64_t id) {
             r.slices->set_health(r.slice_of(id), NodeHealth::healthy, maintenance_in(r, 7200));
           },
       .ticks = 15,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::preempted,
       .preemptions = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
      {.name = "RunningMaintenanceAnnouncedBeyondTheLeadIsKept",
       .config = job_yaml("spot", "recovery:\n  maintenance_lead: 1h\n"),
       .event =
           [](Rig& r, std::int64_t id) {
             r.slices->set_health(r.slice_of(id), NodeHealth::healthy, maintenance_in(r, 7200));
           },
       .phase = Phase::running},
      {.name = "RunningWorkersUnreachableWhileTheSliceIsActiveThreeTimesIsAPreemption",
       .config = job_yaml(),
       .event = [](Rig& r, std::int64_t id) { r.workers->set_unreachable(r.node_of(id), true); },
       .ticks = 120,
       .phase = Phase::running,
       .outcome = domain::AttemptOutcome::preempted,
       .preemptions = 1,
       .mutations = {"delete qr us-central2-b", "create qr us-central2-b"}},
  };
  return table;
}

class PhaseTable : public ::testing::TestWithParam<Row> {};

TEST_P(PhaseTable, Row) {
  const Row& row = GetParam();
  Rig r;
  r.slices->set_capacity(kZoneA, row.start == Start::running);
  const auto id = r.create(row.config).front();
  const Phase start = row.start == Start::running ? Phase::running : Phase::queued;
  ASSERT_TRUE(r.tick_until([&] { return r.job(id).phase == start; })) << domain::to_string(r.job(id).phase);
  if (row.start == Start::queued) {
    r.slices->set_capacity(kZoneA, true); // A new request after the event is granted.
  }
  const auto before = r.slices->mutations().size();
  row.event(r, id);
  for (int i = 0; i < row.ticks; ++i) {
    r.advance(1);
    r.tick();
  }
  // Any backoff the event led to has passed by now.
  const auto job = r.job(id);
  EXPECT_EQ(domain::to_string(job.phase), domain::to_string(row.phase)) << job.phase_reason;
  const auto attempts = r.attempts(id);
  ASSERT_FALSE(attempts.empty());
  EXPECT_EQ(attempts.front().outcome, row.outcome);
  EXPECT_EQ(job.preemptions, row.preemptions);
  EXPECT_EQ(job.failures, row.failures);
  EXPECT_EQ(job.bad_hardware, row.bad_hardware);
  const auto all = r.slices->mutations();
  EXPECT_EQ(without_ids({all.begin() + static_cast<std::ptrdiff_t>(before), all.end()}), row.mutations);
}

INSTANTIATE_TEST_SUITE_P(Supervisor, PhaseTable, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& row) { return row.param.name; });

} // namespace phase_table_test
} // namespace jobman::test
