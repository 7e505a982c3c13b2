// `jobman store migrate`'s copy of a SQLite store into a PostgreSQL one: everything, once; again, what changed; never
// over a history of another store's.
#include "jobman/store/attempts.hpp"
#include "jobman/store/copy.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/leases.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "support/postgres_server.hpp"
#include "support/sample_job.hpp"
#include "support/store_backends.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>

namespace jobman::store {
namespace store_copy_test {

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
  for (const auto& job : store.jobs().list(all)) {
    out.push_back(std::to_string(job.id) + " " + job.name + " " + job.user + " " + std::string(to_string(job.phase)) +
                  " " + std::string(to_string(job.desired)) + " " + std::to_string(job.created_ms) + " " +
                  std::to_string(job.updated_ms) + " attempts=" + std::to_string(store.attempts().of(job.id).size()));
    for (const auto& event : store.events().of(job.id)) {
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
  const auto ids = source_.jobs().create({make_job("a"), make_job("b", "bob"), make_job("c")});
  (void)source_.attempts().begin(ids[0], "qr-a-1", "node-a-1", "us-central2-b");
  (void)source_.jobs().set_desired_state(ids[1], domain::DesiredState::stop, "cancelled by bob");
  const auto last = source_.jobs().create({make_job("removed")}).at(0);
  source_.jobs().remove(last);

  auto target = JobStore::open_postgres(url_);
  const auto copy = store::copy_store(source_, target);
  EXPECT_EQ(copy.into, StoreCopy::Into::empty);
  EXPECT_EQ(copy.jobs, 3);
  EXPECT_EQ(contents(target), contents(source_));
  EXPECT_EQ(target.jobs().change_cursor(), source_.jobs().change_cursor());
  EXPECT_EQ(target.jobs().changes_since(0).removed, source_.jobs().changes_since(0).removed);
  // The removed job's id is never given again, here as there.
  EXPECT_EQ(target.jobs().create({make_job("d")}).at(0), last + 1);
}

TEST_F(StoreCopyTest, CopyingAgainWritesNothingThenOnlyWhatChangedSince) {
  const auto ids = source_.jobs().create({make_job("a"), make_job("b"), make_job("c")});
  auto target = JobStore::open_postgres(url_);
  (void)store::copy_store(source_, target);

  const auto again = store::copy_store(source_, target);
  EXPECT_EQ(again.into, StoreCopy::Into::behind);
  EXPECT_EQ(written(again), 0);

  (void)source_.jobs().set_desired_state(ids[0], domain::DesiredState::stop, "cancelled");
  source_.jobs().remove(ids[2]);
  (void)source_.jobs().create({make_job("e")});
  const auto later = store::copy_store(source_, target);
  EXPECT_EQ(later.into, StoreCopy::Into::behind);
  EXPECT_EQ(later.removed, 1);
  EXPECT_GT(written(later), 0);
  EXPECT_EQ(contents(target), contents(source_));
}

TEST_F(StoreCopyTest, AStoreWithAHistoryOfItsOwnIsRefusedAndLeftAsItWas) {
  (void)source_.jobs().create({make_job("mine")});
  auto target = JobStore::open_postgres(url_);
  (void)target.jobs().create({make_job("theirs", "carol")});
  const auto before = contents(target);
  try {
    (void)store::copy_store(source_, target);
    ADD_FAILURE() << "the copy went over another store's history";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds a history of its own"), std::string::npos) << e.what();
  }
  EXPECT_EQ(contents(target), before);
  // Its triggers are on: a change there is numbered as ever.
  const auto cursor = target.jobs().change_cursor();
  (void)target.jobs().create({make_job("more", "carol")});
  EXPECT_GT(target.jobs().change_cursor(), cursor);
}

TEST_F(StoreCopyTest, ACopyInUseSinceKeepsItsOwnChanges) {
  const auto ids = source_.jobs().create({make_job("a")});
  auto target = JobStore::open_postgres(url_);
  (void)store::copy_store(source_, target);
  (void)target.jobs().set_desired_state(ids[0], domain::DesiredState::stop, "cancelled on the lab's store");
  const auto before = contents(target);
  const auto again = store::copy_store(source_, target);
  EXPECT_EQ(again.into, StoreCopy::Into::ahead);
  EXPECT_EQ(written(again), 0);
  EXPECT_EQ(contents(target), before);
}

TEST_F(StoreCopyTest, AStoreAStillRunningSupervisorDrivesIsNotCopied) {
  const auto id = source_.jobs().create({make_job("a")}).at(0);
  ASSERT_TRUE(source_.leases().try_acquire(id, "host-1:4242", 60'000, util::now_ms()));
  auto target = JobStore::open_postgres(url_);
  try {
    (void)store::copy_store(source_, target);
    ADD_FAILURE() << "copied under a running supervisor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host-1:4242"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(contents(target).empty());
}

// A personal store's jobs are its login's; on a lab's store they are recorded as the role the copy connects as (or
// the name given), so that they stay the user's own there. Other users' jobs keep their names.
TEST_F(StoreCopyTest, TheLoginsJobsAreRecordedAsTheIdentityOnTheTarget) {
  const auto login = source_.identity();
  const auto ids = source_.jobs().create({make_job("mine", login), make_job("bobs", "bob")});
  auto target = JobStore::open_postgres(url_);
  ASSERT_NE(target.identity(), login) << "the test's server role is not the login";
  const auto copy = store::copy_store(source_, target);
  EXPECT_EQ(copy.user, target.identity());
  EXPECT_EQ(target.jobs().get(ids[0]).user, target.identity());
  EXPECT_EQ(target.jobs().get(ids[1]).user, "bob");
  EXPECT_EQ(source_.jobs().get(ids[0]).user, login) << "the source is left as it was";

  auto named = JobStore::open_postgres(test::fresh_postgres_url());
  const auto as_carol = store::copy_store(source_, named, "carol");
  EXPECT_EQ(as_carol.user, "carol");
  EXPECT_EQ(named.jobs().get(ids[0]).user, "carol");
  EXPECT_EQ(named.jobs().get(ids[1]).user, "bob");
  // Copying again writes nothing new: the names it wrote are what it would write.
  EXPECT_EQ(written(store::copy_store(source_, named, "carol")), 0);
}

// What `jobman availability` reads of removed jobs' attempts (attempt_history) goes with the store: in the first copy,
// and in a later one after more jobs were removed.
TEST_F(StoreCopyTest, RemovedJobsAttemptsAreCopiedForAvailability) {
  const auto ids = source_.jobs().create({make_job("a"), make_job("b"), make_job("c")});
  for (const auto id : ids) {
    const auto attempt = source_.attempts().begin(id, "qr-" + std::to_string(id), "qr-" + std::to_string(id),
                                                  id == ids[2] ? "us-east1-d" : "us-central2-b");
    source_.attempts().record_slice_active(id, attempt.number, {});
    source_.attempts().end(id, attempt.number,
                           id == ids[1] ? domain::AttemptOutcome::preempted : domain::AttemptOutcome::succeeded,
                           std::nullopt);
  }
  const auto places = [](const JobStore& store) {
    std::vector<std::string> out;
    for (const auto& r : store.attempts().since(0)) {
      out.push_back(r.zone + " " + std::string(domain::to_string(r.outcome)) + " " + std::to_string(r.started_ms) +
                    " " + std::to_string(r.active_ms.value_or(-1)) + " " + std::to_string(r.ended_ms.value_or(-1)));
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  const auto all = places(source_);
  ASSERT_EQ(all.size(), 3U);
  source_.jobs().remove(ids[0]);

  auto target = JobStore::open_postgres(url_);
  (void)store::copy_store(source_, target);
  EXPECT_EQ(places(target), all);

  source_.jobs().remove(ids[1]);
  const auto later = store::copy_store(source_, target);
  EXPECT_EQ(later.into, StoreCopy::Into::behind);
  EXPECT_EQ(later.removed, 1);
  EXPECT_EQ(places(target), all) << "the job removed since is removed there too, its attempts kept";
  EXPECT_EQ(written(store::copy_store(source_, target)), 0);
}

// A job removed on the target and brought back by a later copy (the source still has it) can be removed again: its
// attempts are kept once.
TEST_F(StoreCopyTest, AJobACopyBroughtBackIsRemovedAgainAndCountedOnce) {
  const auto id = source_.jobs().create({make_job("a")}).at(0);
  const auto attempt = source_.attempts().begin(id, "qr-a", "qr-a", "us-central2-b");
  source_.attempts().end(id, attempt.number, domain::AttemptOutcome::timed_out, std::nullopt);
  auto target = JobStore::open_postgres(url_);
  (void)store::copy_store(source_, target);
  target.jobs().remove(id);
  (void)store::copy_store(source_, target);
  ASSERT_TRUE(target.jobs().find(id).has_value()) << "the source still has it";
  target.jobs().remove(id);
  EXPECT_FALSE(target.jobs().find(id).has_value());
  EXPECT_EQ(target.attempts().since(0).size(), 1U);
}

} // namespace store_copy_test
} // namespace jobman::store
