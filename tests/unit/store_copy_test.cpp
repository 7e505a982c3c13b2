// `jobman store migrate`'s copy of a SQLite store into a PostgreSQL one: everything, once; again, what changed; never
// over a history of another store's.
#include "jobman/store/job_store.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "support/postgres_server.hpp"
#include "support/sample_job.hpp"
#include "support/store_backends.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace jobman::store {
namespace {

using test::make_job;

std::int64_t written(const StoreCopy& copy) {
  std::int64_t sum = 0;
  for (const auto& [table, rows] : copy.written) {
    sum += rows;
  }
  return sum;
}

// The facts of every job and event, to compare two stores by.
std::vector<std::string> contents(const JobStore& store) {
  std::vector<std::string> out;
  JobFilter all;
  all.include_history = true;
  for (const auto& job : store.list_jobs(all)) {
    out.push_back(std::to_string(job.id) + " " + job.name + " " + job.user + " " + std::string(to_string(job.phase)) +
                  " " + std::string(to_string(job.desired)) + " " + std::to_string(job.created_ms) + " " +
                  std::to_string(job.updated_ms) + " attempts=" + std::to_string(store.attempts(job.id).size()));
    for (const auto& event : store.events(job.id)) {
      out.push_back("  " + std::to_string(event.id) + " " + event.kind + " " + std::to_string(event.ts_ms) + " " +
                    event.message);
    }
  }
  return out;
}

class StoreCopyTest : public testing::Test {
protected:
  void SetUp() override {
    if (!test::postgres_testable()) {
      GTEST_SKIP() << "PostgreSQL 15 is not installed (Debian package postgresql)";
    }
  }
  test::TempDir dir_;
  JobStore source_ = JobStore::open(dir_.path() / "jobman.db");
  std::string url_ = test::fresh_postgres_url();
};

TEST_F(StoreCopyTest, AnEmptyStoreGetsEverythingWithItsIdsAndGoesOnAfterTheHighestIdEverGiven) {
  const auto ids = source_.create_jobs({make_job("a"), make_job("b", "bob"), make_job("c")});
  (void)source_.begin_attempt(ids[0], "qr-a-1", "node-a-1", "us-central2-b");
  (void)source_.set_desired_state(ids[1], domain::DesiredState::stop, "cancelled by bob");
  const auto last = source_.create_jobs({make_job("removed")}).at(0);
  source_.remove_job(last);

  auto target = JobStore::open_postgres(url_);
  const auto copy = source_.copy_into(target);
  EXPECT_EQ(copy.into, StoreCopy::Into::empty);
  EXPECT_EQ(copy.jobs, 3);
  EXPECT_EQ(contents(target), contents(source_));
  EXPECT_EQ(target.change_cursor(), source_.change_cursor());
  EXPECT_EQ(target.job_changes(0).removed, source_.job_changes(0).removed);
  // The removed job's id is never given again, here as there.
  EXPECT_EQ(target.create_jobs({make_job("d")}).at(0), last + 1);
}

TEST_F(StoreCopyTest, CopyingAgainWritesNothingThenOnlyWhatChangedSince) {
  const auto ids = source_.create_jobs({make_job("a"), make_job("b"), make_job("c")});
  auto target = JobStore::open_postgres(url_);
  (void)source_.copy_into(target);

  const auto again = source_.copy_into(target);
  EXPECT_EQ(again.into, StoreCopy::Into::behind);
  EXPECT_EQ(written(again), 0);

  (void)source_.set_desired_state(ids[0], domain::DesiredState::stop, "cancelled");
  source_.remove_job(ids[2]);
  (void)source_.create_jobs({make_job("e")});
  const auto later = source_.copy_into(target);
  EXPECT_EQ(later.into, StoreCopy::Into::behind);
  EXPECT_EQ(later.removed, 1);
  EXPECT_GT(written(later), 0);
  EXPECT_EQ(contents(target), contents(source_));
}

TEST_F(StoreCopyTest, AStoreWithAHistoryOfItsOwnIsRefusedAndLeftAsItWas) {
  (void)source_.create_jobs({make_job("mine")});
  auto target = JobStore::open_postgres(url_);
  (void)target.create_jobs({make_job("theirs", "carol")});
  const auto before = contents(target);
  try {
    (void)source_.copy_into(target);
    ADD_FAILURE() << "the copy went over another store's history";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds a history of its own"), std::string::npos) << e.what();
  }
  EXPECT_EQ(contents(target), before);
  // Its triggers are on: a change there is numbered as ever.
  const auto cursor = target.change_cursor();
  (void)target.create_jobs({make_job("more", "carol")});
  EXPECT_GT(target.change_cursor(), cursor);
}

TEST_F(StoreCopyTest, ACopyInUseSinceKeepsItsOwnChanges) {
  const auto ids = source_.create_jobs({make_job("a")});
  auto target = JobStore::open_postgres(url_);
  (void)source_.copy_into(target);
  (void)target.set_desired_state(ids[0], domain::DesiredState::stop, "cancelled on the lab's store");
  const auto before = contents(target);
  const auto again = source_.copy_into(target);
  EXPECT_EQ(again.into, StoreCopy::Into::ahead);
  EXPECT_EQ(written(again), 0);
  EXPECT_EQ(contents(target), before);
}

TEST_F(StoreCopyTest, AStoreAStillRunningSupervisorDrivesIsNotCopied) {
  const auto id = source_.create_jobs({make_job("a")}).at(0);
  ASSERT_TRUE(source_.try_acquire_lease(id, "host-1:4242", 60'000, util::now_ms()));
  auto target = JobStore::open_postgres(url_);
  try {
    (void)source_.copy_into(target);
    ADD_FAILURE() << "copied under a running supervisor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host-1:4242"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(contents(target).empty());
}

} // namespace
} // namespace jobman::store
