// build_report over more jobs than one chunk: a thread accounts each chunk while the next is read, so the rows must
// still come one per job in id order with the accounts a job's own `show` gives, the totals must add up, a worker's
// tasks must count on it, and a failing row sink must end the report with its error.
#include "jobman/reporting/report.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/system.hpp"
#include "support/report_history.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <stdexcept>
#include <string>
#include <vector>

namespace jobman::reporting {
namespace reporting_report_test {

using domain::JobKind;

// More than two chunks of 2,048: the thread has chunks queued while the store is read.
constexpr int kJobs = 5'000;

// The store the tests share (built once: it takes seconds under the sanitizers); they only read it.
struct History {
  test::TempDir dir;
  store::JobStore db = store::JobStore::open(dir / "jobman.db");
  config::PriceTable prices = config::load_prices();
  test::ReportHistory added = test::add_report_history(db, kJobs);
  std::int64_t now = util::now_ms() + 60'000;

  // The account `show` gives the job, read on its own.
  core::JobAccount own_account(std::int64_t id) const {
    return account_of(db, db.jobs().get(id), db.attempts().of(id), now);
  }
};

class ReportChunksTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() { history = new History(); }
  static void TearDownTestSuite() {
    delete history;
    history = nullptr;
  }
  static History* history;
  const store::JobStore& db = history->db;
  const config::PriceTable& prices = history->prices;
  const std::vector<std::int64_t>& ids = history->added.jobs;
  const std::int64_t worker = history->added.worker;
  const std::int64_t now = history->now;

  static ReportSelection everything() {
    ReportSelection selection;
    selection.since_ms = 0; // Everything, finished or not.
    return selection;
  }
  core::JobAccount own_account(std::int64_t id) const { return history->own_account(id); }
};

History* ReportChunksTest::history = nullptr;

void expect_same_account(const core::JobAccount& got, const core::JobAccount& want, std::int64_t id) {
  EXPECT_EQ(got.ms, want.ms) << "job " << id;
  EXPECT_EQ(got.lost_steps, want.lost_steps) << "job " << id;
  ASSERT_EQ(got.usage.size(), want.usage.size()) << "job " << id;
  for (std::size_t u = 0; u < got.usage.size(); ++u) {
    EXPECT_DOUBLE_EQ(got.usage[u].chip_hours, want.usage[u].chip_hours) << "job " << id;
    EXPECT_EQ(got.usage[u].borrowed, want.usage[u].borrowed) << "job " << id;
  }
}

TEST_F(ReportChunksTest, RowsComeOncePerJobInIdOrderWithTheAccountsEachJobHasOnItsOwn) {
  std::vector<std::int64_t> seen;
  core::BucketTimes job_ms{};
  double cost = 0;
  const auto report = build_report(db, everything(), prices, now, [&](const ReportRow& row) {
    seen.push_back(row.job.id);
    if (row.job.kind != JobKind::task) {
      for (std::size_t b = 0; b < core::kBucketCount; ++b) {
        job_ms[b] += row.account.ms[b];
      }
    }
    cost += row.cost.amount;
    // Every 50th row is checked against the job read on its own, and the worker always (its tasks' time).
    if (row.job.id % 50 == 0 || row.job.id == worker) {
      expect_same_account(row.account, own_account(row.job.id), row.job.id);
    }
  });

  std::vector<std::int64_t> all{worker};
  all.insert(all.end(), ids.begin(), ids.end());
  EXPECT_EQ(seen, all) << "one row per job, ascending ids";
  EXPECT_EQ(report.jobs, all.size());
  EXPECT_TRUE(report.rows.empty()) << "rows went to the sink";
  EXPECT_EQ(report.ms, job_ms) << "the totals are the jobs' and the worker's, a task's time being inside its worker's";
  EXPECT_NEAR(report.cost, cost, 1e-6);
  EXPECT_GT(report.cost, 0.0);

  const auto pool = own_account(worker);
  EXPECT_GT(pool.of(core::Bucket::productive), 0) << "the tasks' time counts as the worker's productive time";
}

TEST_F(ReportChunksTest, KeptRowsAreTheSinksAndOnlyTheNewestKeepTheirTimelines) {
  auto selection = everything();
  selection.detailed_rows = 100;
  const auto kept = build_report(db, selection, prices, now);
  ASSERT_EQ(kept.rows.size(), static_cast<std::size_t>(kJobs) + 1);
  std::size_t with_timeline = 0;
  for (std::size_t k = 0; k < kept.rows.size(); ++k) {
    const auto& row = kept.rows[k];
    if (k > 0) {
      EXPECT_LT(kept.rows[k - 1].job.id, row.job.id);
    }
    with_timeline += row.account.timeline.empty() ? 0 : 1;
    if (k + 100 < kept.rows.size()) {
      EXPECT_TRUE(row.account.timeline.empty()) << "job " << row.job.id << " is not among the newest 100";
      EXPECT_TRUE(row.attempts.empty()) << "job " << row.job.id;
    } else {
      EXPECT_EQ(row.attempts.size(), db.attempts().of(row.job.id).size()) << "job " << row.job.id;
    }
  }
  EXPECT_EQ(with_timeline, 100u);

  const auto streamed = build_report(db, everything(), prices, now, [](const ReportRow&) {});
  EXPECT_EQ(streamed.ms, kept.ms);
  EXPECT_EQ(streamed.jobs, kept.jobs);
  EXPECT_EQ(streamed.unfinished, kept.unfinished);
  EXPECT_NEAR(streamed.cost, kept.cost, 1e-6);
  ASSERT_EQ(streamed.by_zone.size(), kept.by_zone.size());
  EXPECT_EQ(streamed.by_zone.begin()->second.attempts, kept.by_zone.begin()->second.attempts);
  EXPECT_EQ(streamed.by_zone.begin()->second.preemptions, kept.by_zone.begin()->second.preemptions);
  EXPECT_GT(kept.by_zone.begin()->second.preemptions, 0);
}

TEST_F(ReportChunksTest, ASinkThatThrowsEndsTheReportWithItsError) {
  for (const std::size_t fail_at : {std::size_t{10}, std::size_t{3'000}, std::size_t{kJobs}}) {
    std::size_t rows = 0;
    EXPECT_THROW(build_report(db, everything(), prices, now,
                              [&](const ReportRow&) {
                                if (++rows == fail_at) {
                                  throw std::runtime_error("disk full");
                                }
                              }),
                 std::runtime_error)
        << "failing at row " << fail_at;
    EXPECT_EQ(rows, fail_at) << "no row after the failing one";
  }
}

} // namespace reporting_report_test
} // namespace jobman::reporting
