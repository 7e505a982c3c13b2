// A job's account: a history with known durations split into its buckets to the second (lost work from the step
// lines, bad hardware's share, recovering between attempts), a worker's idle time, a resume's gap left out, and the
// chip-hours of the slices while they were up.
#include "jobman/core/goodput.hpp"

#include <gtest/gtest.h>

namespace jobman::core {
namespace core_goodput_test {

using domain::Phase;

constexpr std::int64_t kT0 = 1'700'000'000'000;

std::int64_t at(std::int64_t seconds) {
  return kT0 + seconds * 1000;
}

// A history written as the supervisor writes it: phase changes and attempts.
struct History {
  domain::JobRecord job;
  std::vector<domain::EventRecord> events;
  std::vector<domain::AttemptRecord> attempts;
  std::vector<TaskSpan> tasks;

  explicit History(domain::JobKind kind = domain::JobKind::job) {
    job.id = 7;
    job.kind = kind;
    job.accelerator = "v4-8";
    job.pricing = domain::Pricing::spot;
    job.created_ms = at(0);
    job.phase_since_ms = at(0);
  }
  void phase(std::int64_t seconds, Phase to) {
    domain::EventRecord e;
    e.job_id = job.id;
    e.ts_ms = at(seconds);
    e.kind = "phase";
    e.to = to;
    events.push_back(e);
    job.phase = to;
    job.phase_since_ms = at(seconds);
    if (domain::is_terminal(to)) {
      job.finished_ms = at(seconds);
    }
  }
  domain::AttemptRecord& attempt(std::int64_t started, std::optional<std::int64_t> active) {
    domain::AttemptRecord a;
    a.job_id = job.id;
    a.number = static_cast<int>(attempts.size()) + 1;
    a.queued_resource = "qr-" + std::to_string(a.number);
    a.node = a.queued_resource;
    a.zone = "us-central2-b";
    a.accelerator = "v4-8";
    a.pricing = domain::Pricing::spot;
    a.started_ms = at(started);
    if (active) {
      a.active_ms = at(*active);
    }
    job.attempt = a.number;
    attempts.push_back(a);
    return attempts.back();
  }
  // One step a second: `first` at `from` seconds through `last`.
  static void steps(domain::AttemptRecord& a, std::int64_t first, std::int64_t last, std::int64_t from) {
    for (std::int64_t s = first; s <= last; ++s) {
      a.progress.add(s, at(from + s - first));
    }
  }
  static void end(domain::AttemptRecord& a, std::int64_t ended, domain::AttemptOutcome outcome,
                  std::optional<std::int64_t> released) {
    a.ended_ms = at(ended);
    a.outcome = outcome;
    if (released) {
      a.released_ms = at(*released);
    }
  }
  JobAccount account(std::int64_t now_seconds) const {
    AccountInput input;
    input.job = &job;
    input.events = events;
    input.attempts = attempts;
    input.tasks = tasks;
    input.now_ms = at(now_seconds);
    return core::account(input);
  }
};

std::int64_t seconds(const JobAccount& a, Bucket b) {
  return a.of(b) / 1000;
}

TEST(Goodput, AHistoryWithAPreemptionAndBadHardwareSplitsToTheSecond) {
  History h;
  // Attempt 1: queued 600 s, provisioning 120, setup 90, running 3600 (steps 0-3580), preempted.
  h.phase(5, Phase::queued);
  auto& first = h.attempt(5, 725);
  h.phase(605, Phase::provisioning);
  h.phase(725, Phase::setup);
  h.phase(815, Phase::running);
  History::steps(first, 0, 3580, 825);
  h.phase(4415, Phase::recovering);
  History::end(h.attempts[0], 4415, domain::AttemptOutcome::preempted, 4440);
  h.phase(4445, Phase::pending);
  // Attempt 2 resumes from step 3000: queued 300, provisioning 60, setup 45, running 1715, then bad hardware.
  h.phase(4455, Phase::queued);
  auto& second = h.attempt(4455, 4815);
  h.phase(4755, Phase::provisioning);
  h.phase(4815, Phase::setup);
  h.phase(4860, Phase::running);
  History::steps(second, 3000, 4700, 4870);
  h.phase(6575, Phase::recovering);
  History::end(h.attempts[1], 6575, domain::AttemptOutcome::bad_hardware, 6590);
  h.phase(6595, Phase::pending);
  // Attempt 3 resumes from step 4500 and finishes.
  h.phase(6600, Phase::queued);
  auto& third = h.attempt(6600, 6750);
  h.phase(6700, Phase::provisioning);
  h.phase(6750, Phase::setup);
  h.phase(6790, Phase::running);
  History::steps(third, 4500, 6000, 6795);
  History::end(h.attempts[2], 8300, domain::AttemptOutcome::succeeded, 8330);
  h.phase(8300, Phase::succeeded);

  const auto a = h.account(9000);
  EXPECT_EQ(seconds(a, Bucket::idle), 5);
  EXPECT_EQ(seconds(a, Bucket::queued), 600 + 300 + 100);
  EXPECT_EQ(seconds(a, Bucket::provisioning), 120 + 60 + 50);
  EXPECT_EQ(seconds(a, Bucket::setup), 90 + 45 + 40);
  // Attempt 1 reached step 3000 at 3825 s; everything after it until the preemption was done again.
  EXPECT_EQ(seconds(a, Bucket::lost), 4415 - 3825);
  // Attempt 2 reached step 4500 at 6370 s: the 205 s after it, and the recovering that followed, were bad hardware's.
  EXPECT_EQ(seconds(a, Bucket::bad_hardware), (6575 - 6370) + 20 + 5);
  EXPECT_EQ(seconds(a, Bucket::recovering), 30 + 10);
  EXPECT_EQ(seconds(a, Bucket::productive), (3825 - 815) + (6370 - 4860) + (8300 - 6790));
  EXPECT_EQ(a.wall_ms(), 8300 * 1000);
  EXPECT_EQ(a.lost_steps, (3580 - 3000) + (4700 - 4500));
  ASSERT_TRUE(a.goodput());
  EXPECT_NEAR(*a.goodput(), 6030.0 / 8300.0, 1e-12);
  EXPECT_EQ(a.excluded_ms, 0);
  EXPECT_TRUE(a.notes.empty()) << a.notes.front();

  // The timeline covers the wall time without a gap, and marks the preemption and the bad hardware.
  ASSERT_FALSE(a.timeline.empty());
  EXPECT_EQ(a.timeline.front().from_ms, at(0));
  EXPECT_EQ(a.timeline.back().to_ms, at(8300));
  for (std::size_t i = 1; i < a.timeline.size(); ++i) {
    EXPECT_EQ(a.timeline[i].from_ms, a.timeline[i - 1].to_ms);
  }
  ASSERT_EQ(a.marks.size(), 2U);
  EXPECT_EQ(a.marks[0].what, domain::AttemptOutcome::preempted);
  EXPECT_EQ(a.marks[0].at_ms, at(4415));
  EXPECT_EQ(a.marks[1].what, domain::AttemptOutcome::bad_hardware);

  // Chip-hours: each slice from ACTIVE to its confirmed deletion, 4 chips.
  ASSERT_EQ(a.usage.size(), 1U);
  EXPECT_EQ(a.usage[0].chips, 4);
  EXPECT_FALSE(a.usage[0].estimated);
  EXPECT_NEAR(a.usage[0].chip_hours, 4.0 * ((4440 - 725) + (6590 - 4815) + (8330 - 6750)) / 3600.0, 1e-9);
}

TEST(Goodput, AnUnfinishedJobRunsToNowAndItsSliceIsStillUp) {
  History h;
  h.phase(2, Phase::queued);
  h.attempt(2, 60);
  h.phase(50, Phase::provisioning);
  h.phase(60, Phase::setup);
  h.phase(100, Phase::running);
  const auto a = h.account(1000);
  EXPECT_EQ(seconds(a, Bucket::productive), 900);
  EXPECT_EQ(a.wall_ms(), 1000 * 1000);
  ASSERT_EQ(a.usage.size(), 1U);
  EXPECT_NEAR(a.usage[0].chip_hours, 4.0 * 940 / 3600.0, 1e-9);
}

// A multislice attempt holds every slice of its queued resource, and its record every slice's hosts: its chip-hours
// count them all.
TEST(Goodput, AMultisliceAttemptsChipHoursCountEverySlice) {
  History h;
  h.phase(2, Phase::queued);
  h.attempt(2, 60).hosts = 1; // v4-8 is one host.
  h.phase(60, Phase::setup);
  h.phase(100, Phase::running);
  const auto one = h.account(1000);
  EXPECT_EQ(one.usage[0].slices, 1);
  h.attempts[0].hosts = 3;
  const auto three = h.account(1000);
  ASSERT_EQ(three.usage.size(), 1U);
  EXPECT_EQ(three.usage[0].chips, 4) << "one slice's";
  EXPECT_EQ(three.usage[0].slices, 3);
  EXPECT_NEAR(three.usage[0].chip_hours, 3 * 4.0 * 940 / 3600.0, 1e-9);
  EXPECT_NEAR(three.usage[0].chip_hours, 3 * one.usage[0].chip_hours, 1e-9);
  EXPECT_EQ(three.wall_ms(), one.wall_ms()) << "the time is the job's, however many slices";
}

// A workload that saves on SIGTERM resumes past the last step that came home when the slice cut its last lines: no
// step is known to be done twice, so nothing is lost, and the time after the last reading stays productive.
TEST(Goodput, AResumePastTheLastStepThatCameHomeLosesNothing) {
  History h;
  h.phase(0, Phase::queued);
  auto& first = h.attempt(0, 10);
  h.phase(10, Phase::setup);
  h.phase(20, Phase::running);
  History::steps(first, 0, 100, 20);
  h.phase(130, Phase::recovering);
  History::end(h.attempts[0], 130, domain::AttemptOutcome::preempted, 135);
  h.phase(140, Phase::queued);
  auto& second = h.attempt(140, 150);
  h.phase(150, Phase::setup);
  h.phase(160, Phase::running);
  History::steps(second, 102, 200, 160);
  History::end(h.attempts[1], 260, domain::AttemptOutcome::succeeded, 262);
  h.phase(260, Phase::succeeded);
  const auto a = h.account(300);
  EXPECT_EQ(a.lost_steps, 0);
  EXPECT_EQ(seconds(a, Bucket::lost), 0);
  EXPECT_EQ(seconds(a, Bucket::productive), (130 - 20) + (260 - 160));
  EXPECT_TRUE(a.notes.empty()) << a.notes.front();
}

TEST(Goodput, TheStepsARollbackDoesAgainAreLost) {
  // Steps 0 to 100 from 20 s, one a second; the loss spiked at step 90, and the workload stopped at 100 (t=120). The
  // next attempt, on the same slice, resumed from the checkpoint at step 80: steps 81 to 100 are done again.
  History h;
  h.phase(0, Phase::queued);
  auto& first = h.attempt(0, 10);
  h.phase(10, Phase::setup);
  h.phase(20, Phase::running);
  History::steps(first, 0, 100, 20);
  History::end(h.attempts[0], 121, domain::AttemptOutcome::rolled_back, std::nullopt);
  h.attempts[0].rollback_step = 90;
  h.phase(121, Phase::setup);
  auto& second = h.attempt(121, std::nullopt);
  second.queued_resource = h.attempts[0].queued_resource;
  h.phase(125, Phase::running);
  History::steps(second, 80, 200, 125); // "resumed from step=80" first, as systolic-train prints it.
  History::end(h.attempts[1], 245, domain::AttemptOutcome::succeeded, 250);
  h.phase(245, Phase::succeeded);
  const auto a = h.account(300);
  EXPECT_EQ(a.lost_steps, 100 - 80);
  // The first attempt's running time from step 80 on (t=100 to 121) is lost; the rest of its running is productive.
  EXPECT_EQ(seconds(a, Bucket::lost), 121 - 100);
  EXPECT_EQ(seconds(a, Bucket::productive), (100 - 20) + (245 - 125));
}

TEST(Goodput, TheTimeAJobSatFinishedBeforeAResumeIsLeftOut) {
  History h;
  h.phase(1, Phase::queued);
  h.attempt(1, std::nullopt);
  h.phase(100, Phase::cancelled);
  History::end(h.attempts[0], 100, domain::AttemptOutcome::cancelled, 101);
  h.phase(1100, Phase::pending);
  h.phase(1101, Phase::queued);
  h.attempt(1101, std::nullopt);
  h.phase(1200, Phase::failed);
  const auto a = h.account(5000);
  EXPECT_EQ(a.excluded_ms, 1000 * 1000);
  EXPECT_EQ(seconds(a, Bucket::queued), 99 + 99);
  EXPECT_EQ(seconds(a, Bucket::recovering), 1) << "PENDING after the first attempt";
  EXPECT_EQ(seconds(a, Bucket::idle), 1);
  EXPECT_TRUE(a.usage.empty()) << "no slice ever came up";
}

TEST(Goodput, AWorkersSliceIsProductiveWhileATaskHoldsItAndIdleOtherwise) {
  History h(domain::JobKind::worker);
  h.phase(0, Phase::queued);
  h.attempt(0, 10);
  h.phase(10, Phase::running);
  h.tasks = {{at(100), at(300)}, {at(500), std::nullopt}};
  const auto a = h.account(1010);
  EXPECT_EQ(seconds(a, Bucket::productive), 200 + 510);
  EXPECT_EQ(seconds(a, Bucket::idle), 90 + 200);
  EXPECT_EQ(seconds(a, Bucket::queued), 10);
}

TEST(Goodput, ATaskQueuesWhilePendingAndItsTimeOnTheWorkersSliceIsBorrowed) {
  History h(domain::JobKind::task);
  h.phase(300, Phase::setup);
  auto& attempt = h.attempt(300, std::nullopt);
  attempt.worker_id = 3;
  h.phase(320, Phase::running);
  History::end(h.attempts[0], 920, domain::AttemptOutcome::succeeded, std::nullopt);
  h.phase(920, Phase::succeeded);
  const auto a = h.account(2000);
  EXPECT_EQ(seconds(a, Bucket::queued), 300);
  EXPECT_EQ(seconds(a, Bucket::setup), 20);
  EXPECT_EQ(seconds(a, Bucket::productive), 600);
  ASSERT_EQ(a.usage.size(), 1U);
  EXPECT_TRUE(a.usage[0].borrowed);
  EXPECT_NEAR(a.usage[0].chip_hours, 4.0 * 620 / 3600.0, 1e-9);
}

TEST(Goodput, WithoutStepLinesTheLostTimeIsUnknownAndSaidSo) {
  History h;
  h.phase(0, Phase::queued);
  auto& first = h.attempt(0, 10);
  h.phase(10, Phase::running);
  History::steps(first, 0, 50, 20);
  h.phase(100, Phase::recovering);
  History::end(h.attempts[0], 100, domain::AttemptOutcome::preempted, 110);
  h.phase(110, Phase::queued);
  h.attempt(110, 120);
  h.phase(120, Phase::running);
  History::end(h.attempts[1], 200, domain::AttemptOutcome::failed, 210);
  h.phase(200, Phase::failed);
  const auto a = h.account(300);
  EXPECT_EQ(seconds(a, Bucket::lost), 0);
  EXPECT_EQ(seconds(a, Bucket::productive), 90 + 80);
  ASSERT_EQ(a.notes.size(), 1U);
  EXPECT_NE(a.notes[0].find("lost is not known"), std::string::npos) << a.notes[0];
}

TEST(Goodput, ASliceWhoseDeletionWasNeverConfirmedIsCountedToItsAttemptsEndAndSaidSo) {
  History h;
  h.phase(0, Phase::queued);
  h.attempt(0, 10);
  h.phase(10, Phase::running);
  History::end(h.attempts[0], 70, domain::AttemptOutcome::succeeded, std::nullopt);
  h.phase(70, Phase::succeeded);
  const auto a = h.account(5000);
  ASSERT_EQ(a.usage.size(), 1U);
  EXPECT_TRUE(a.usage[0].estimated);
  EXPECT_NEAR(a.usage[0].chip_hours, 4.0 * 60 / 3600.0, 1e-9);
  EXPECT_FALSE(a.notes.empty());
}

} // namespace core_goodput_test
} // namespace jobman::core
