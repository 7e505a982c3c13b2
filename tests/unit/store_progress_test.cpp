// Training progress in the store: an attempt's series and the job's latest step written in one batch, an old
// attempt's late batch never overwriting the job's current step, and the range reads `report` makes.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "support/sample_job.hpp"
#include "support/store_backends.hpp"

#include <gtest/gtest.h>

namespace jobman::store {
namespace store_progress_test {

using test::make_job;

domain::ProgressSeries series_of(std::int64_t first, std::int64_t last, std::int64_t from_ms) {
  domain::ProgressSeries series;
  for (std::int64_t s = first; s <= last; ++s) {
    series.add(s, from_ms + (s - first) * 1000);
  }
  return series;
}

class StoreProgressTest : public test::StoreBackendTest {};

TEST_P(StoreProgressTest, ABatchRecordsEachAttemptsSeriesAndTheJobsLatestStep) {
  auto store = open_store();
  const auto ids = store.jobs().create({make_job("a"), make_job("b")});
  store.attempts().begin(ids[0], "qr-a", "qr-a", "us-central2-b");
  store.attempts().begin(ids[1], "qr-b", "qr-b", "us-central2-b");
  EXPECT_FALSE(store.jobs().get(ids[0]).progress);

  const auto a = series_of(0, 120, 5'000);
  store.attempts().record_progress({{ids[0], 1, a, 2000}, {ids[1], 1, series_of(7, 9, 1'000), std::nullopt}});
  const auto job = store.jobs().get(ids[0]);
  ASSERT_TRUE(job.progress);
  EXPECT_EQ(job.progress->step, 120);
  EXPECT_EQ(job.progress->at_ms, 5'000 + 120'000);
  EXPECT_EQ(job.step_total, 2000);
  EXPECT_EQ(store.attempts().of(ids[0])[0].progress.points(), a.points());
  EXPECT_EQ(store.jobs().get(ids[1]).progress->step, 9);
  EXPECT_FALSE(store.jobs().get(ids[1]).step_total);

  // A later batch without a total keeps the one known.
  store.attempts().record_progress({{ids[0], 1, series_of(0, 130, 5'000), std::nullopt}});
  EXPECT_EQ(store.jobs().get(ids[0]).step_total, 2000);
  EXPECT_EQ(store.jobs().get(ids[0]).progress->step, 130);
}

TEST_P(StoreProgressTest, AnEarlierAttemptsLateBatchLeavesTheJobsStepAlone) {
  auto store = open_store();
  const auto id = store.jobs().create({make_job("a")}).front();
  store.attempts().begin(id, "qr-1", "qr-1", "us-central2-b");
  store.attempts().end(id, 1, domain::AttemptOutcome::preempted, std::nullopt);
  store.attempts().begin(id, "qr-2", "qr-2", "us-central2-b");
  store.attempts().record_progress({{id, 2, series_of(300, 310, 90'000), std::nullopt}});
  store.attempts().record_progress({{id, 1, series_of(0, 400, 1'000), std::nullopt}});
  EXPECT_EQ(store.jobs().get(id).progress->step, 310);
  const auto attempts = store.attempts().of(id);
  EXPECT_EQ(attempts[0].progress.latest()->step, 400) << "the attempt's own series is kept";
  EXPECT_EQ(attempts[1].progress.first()->step, 300);
}

TEST_P(StoreProgressTest, TheRangeReadsBringEveryPhaseChangeAndAttemptOfTheJobsInRange) {
  auto store = open_store();
  const auto ids = store.jobs().create({make_job("a"), make_job("b"), make_job("c")});
  for (const auto id : ids) {
    store.attempts().begin(id, "qr-" + std::to_string(id), "n", "us-central2-b");
    domain::PhaseChange change;
    change.to = domain::Phase::queued;
    ASSERT_TRUE(store.jobs().transition(id, std::nullopt, change));
    store.events().append(id, "observation", "not a phase change");
  }
  std::vector<std::int64_t> seen;
  store.events().for_each_phase_change(ids[1], ids[2], [&](const domain::EventRecord& e) {
    EXPECT_EQ(e.kind, "phase");
    EXPECT_EQ(e.to, domain::Phase::queued);
    seen.push_back(e.job_id);
  });
  EXPECT_EQ(seen, (std::vector<std::int64_t>{ids[1], ids[2]}));
  seen.clear();
  store.attempts().for_each(ids[0], ids[1], [&](const domain::AttemptRecord& a) { seen.push_back(a.job_id); });
  EXPECT_EQ(seen, (std::vector<std::int64_t>{ids[0], ids[1]}));
}

TEST_P(StoreProgressTest, AWorkersAccountReadsTheAttemptsOfTheTasksThatBorrowedItsSlice) {
  auto store = open_store();
  auto worker = make_job("w");
  worker.kind = domain::JobKind::worker;
  auto task = make_job("t");
  task.kind = domain::JobKind::task;
  const auto ids = store.jobs().create({worker, task, make_job("other")});
  domain::Placement borrowed{"qr-w", "qr-w", "us-central2-b", "v4-8", 1, ids[0], domain::Pricing::spot};
  store.attempts().begin(ids[1], borrowed);
  store.attempts().begin(ids[2], "qr-o", "qr-o", "us-central2-b");
  const auto on_worker = store.attempts().on_worker(ids[0]);
  ASSERT_EQ(on_worker.size(), 1U);
  EXPECT_EQ(on_worker[0].job_id, ids[1]);
  EXPECT_TRUE(store.attempts().on_worker(ids[2]).empty());
}

JOBMAN_STORE_BACKENDS(StoreProgressTest);

} // namespace store_progress_test
} // namespace jobman::store
