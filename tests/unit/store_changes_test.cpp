// Change numbers for watchers: whatever writes a job row (create, a phase change, a desire, progress, an attempt)
// gives it a new number, a removal leaves one, a watcher that asks again sees only what changed since, a watcher
// behind the removals kept is told to reload, and asking reads indexes, never the whole table.
#include "../../src/store/job_queries.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/sqlite.hpp"
#include "support/sample_job.hpp"
#include "support/store_backends.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>

namespace jobman::store {
namespace store_changes_test {

using domain::Phase;
using test::make_job;

std::vector<std::int64_t> ids_of(const JobChanges& changes) {
  std::vector<std::int64_t> ids;
  for (const auto& job : changes.jobs) {
    ids.push_back(job.id);
  }
  return ids;
}

class StoreChangesTest : public test::StoreBackendTest {};

TEST_P(StoreChangesTest, EveryWriteOfAJobIsSeenOnceByTheNextAsk) {
  auto store = open_store();
  EXPECT_EQ(store.jobs().change_cursor(), 0);
  const auto ids = store.jobs().create({make_job("a"), make_job("b"), make_job("c")});
  auto changes = store.jobs().changes_since(0);
  EXPECT_EQ(ids_of(changes), ids);
  EXPECT_TRUE(changes.removed.empty());
  EXPECT_TRUE(changes.complete);
  EXPECT_EQ(changes.cursor, store.jobs().change_cursor());
  auto cursor = changes.cursor;
  EXPECT_TRUE(store.jobs().changes_since(cursor).jobs.empty()) << "nothing changed";

  // A phase change, then progress, each bring the job back once, as it is now.
  domain::PhaseChange queued;
  queued.to = Phase::queued;
  queued.reason = "asked for a slice";
  ASSERT_TRUE(store.jobs().transition(ids[1], Phase::pending, queued));
  changes = store.jobs().changes_since(cursor);
  ASSERT_EQ(ids_of(changes), std::vector<std::int64_t>{ids[1]});
  EXPECT_EQ(changes.jobs[0].phase, Phase::queued);
  cursor = changes.cursor;
  store.attempts().begin(ids[2], "qr-c", "qr-c", "us-central2-b");
  domain::ProgressSeries series;
  series.add(42, 1'000);
  store.attempts().record_progress({{ids[2], 1, series, 100}});
  store.jobs().set_desired_state(ids[0], domain::DesiredState::stop, "asked");
  changes = store.jobs().changes_since(cursor);
  EXPECT_EQ(ids_of(changes), (std::vector<std::int64_t>{ids[2], ids[0]})) << "in change order, each once";
  ASSERT_TRUE(changes.jobs[0].progress);
  EXPECT_EQ(changes.jobs[0].progress->step, 42);
  cursor = changes.cursor;

  // A removal is its own change.
  store.jobs().remove(ids[1]);
  changes = store.jobs().changes_since(cursor);
  EXPECT_TRUE(changes.jobs.empty());
  EXPECT_EQ(changes.removed, std::vector<std::int64_t>{ids[1]});
  EXPECT_GT(changes.cursor, cursor);
  EXPECT_EQ(changes.cursor, store.jobs().change_cursor());
  // A new job after the removal gets a newer number still.
  const auto d = store.jobs().create({make_job("d")}).front();
  EXPECT_EQ(ids_of(store.jobs().changes_since(changes.cursor)), std::vector<std::int64_t>{d});
}

TEST_P(StoreChangesTest, AListingAndItsCursorComeFromOneSnapshot) {
  auto store = open_store();
  store.jobs().create({make_job("a"), make_job("b")});
  std::vector<std::int64_t> listed;
  JobFilter filter;
  const auto cursor =
      store.jobs().for_each_with_cursor(filter, [&](const domain::JobRecord& job) { listed.push_back(job.id); });
  EXPECT_EQ(listed.size(), 2U);
  EXPECT_EQ(cursor, store.jobs().change_cursor());
  EXPECT_TRUE(store.jobs().changes_since(cursor).jobs.empty());
}

TEST_P(StoreChangesTest, RemovingTheJobChangedLastIsSeenByAWatcherWhoSawThatChange) {
  auto store = open_store();
  const auto ids = store.jobs().create({make_job("a"), make_job("b")});
  store.jobs().set_desired_state(ids[1], domain::DesiredState::stop, "test");
  const auto seen = store.jobs().change_cursor(); // The watcher has seen b's last change, the newest of all.
  store.jobs().remove(ids[1]);
  const auto later = store.jobs().changes_since(seen);
  EXPECT_TRUE(later.complete);
  EXPECT_EQ(later.removed, std::vector<std::int64_t>{ids[1]});
  EXPECT_GT(later.cursor, seen) << "the cursor never goes backwards";
}

TEST_P(StoreChangesTest, AWatcherBehindTheRemovalsKeptIsToldToReload) {
  auto store = open_store();
  std::vector<domain::NewJob> jobs(10'010, make_job("gone"));
  const auto ids = store.jobs().create(jobs);
  const auto before = store.jobs().change_cursor();
  for (std::size_t i = 0; i < 5; ++i) {
    store.jobs().remove(ids[i]);
  }
  const auto recent = store.jobs().changes_since(before);
  EXPECT_TRUE(recent.complete);
  EXPECT_EQ(recent.removed.size(), 5U);
  for (std::size_t i = 5; i < ids.size(); ++i) {
    store.jobs().remove(ids[i]);
  }
  // The oldest removals were dropped: one who saw none of them cannot know them all.
  const auto behind = store.jobs().changes_since(before);
  EXPECT_FALSE(behind.complete);
  EXPECT_EQ(behind.removed.size(), 10'000U);
  // One who saw them is complete.
  EXPECT_TRUE(store.jobs().changes_since(behind.cursor).complete);
  const auto last = store.jobs().create({make_job("new")}).front();
  const auto after = store.jobs().changes_since(behind.cursor);
  EXPECT_TRUE(after.complete);
  EXPECT_EQ(ids_of(after), std::vector<std::int64_t>{last});
}

// Asking what changed reads two indexes whatever the store holds, and the numbers the triggers hand out keep a
// busy table fast to write.
TEST(StoreChanges, AskingReadsIndexesNotTheTable) {
  test::TempDir tmp;
  const auto path = tmp / "jobman.db";
  {
    auto store = JobStore::open(path);
    std::vector<domain::NewJob> jobs(2'000, make_job("j"));
    store.jobs().create(jobs);
  }
  sqlite::Database raw(path.string(), sqlite::OpenMode::read_write_create, 1000);
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    sqlite::Statement explain(raw, "EXPLAIN QUERY PLAN " + queries::job_changes_sql());
    std::string plan;
    while (explain.step()) {
      plan += explain.column_text(3) + "\n";
    }
    EXPECT_NE(plan.find("INDEX jobs_by_change (change_seq>?)"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("SCAN jobs"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("SCAN job_removals"), std::string::npos) << plan;
    raw.execute("ANALYZE");
  }
}

JOBMAN_STORE_BACKENDS(StoreChangesTest);

} // namespace store_changes_test
} // namespace jobman::store
