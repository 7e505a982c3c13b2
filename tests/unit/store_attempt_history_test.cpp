// What `clean` keeps of a job: removing it leaves what `jobman availability` and the learned ranking of candidates
// read of its attempts (attempt_history, schema 19), on both backends, and nothing else of the job.
#include "../../src/store/schema.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/core/availability.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "support/sample_job.hpp"
#include "support/store_backends.hpp"

#include <algorithm>
#include <gtest/gtest.h>

namespace jobman::store {
namespace store_attempt_history_test {

using test::make_job;

// One attempt to record: where its slice is asked for, whether it comes up, and how it ends (none leaves it open).
struct Planned {
  std::string zone;
  std::string accelerator;
  domain::Pricing pricing = domain::Pricing::spot;
  bool came_up = false;
  domain::AttemptOutcome outcome = domain::AttemptOutcome::none;
};

// Records `attempts` as job `id`'s, one after the other, as a supervisor does.
void record(JobStore& store, std::int64_t id, const std::vector<Planned>& attempts) {
  for (const auto& a : attempts) {
    domain::Placement where;
    where.queued_resource = "qr-" + std::to_string(id) + "-" + a.zone;
    where.node = where.queued_resource;
    where.zone = a.zone;
    where.accelerator = a.accelerator;
    where.hosts = 2;
    where.pricing = a.pricing;
    const auto attempt = store.attempts().begin(id, where, true);
    store.attempts().confirm_created(id, attempt.number);
    if (a.came_up) {
      store.attempts().record_slice_active(id, attempt.number, {"b1/s1/h" + std::to_string(id), "b1/s1/h9"});
    }
    if (a.outcome != domain::AttemptOutcome::none) {
      store.attempts().end(id, attempt.number, a.outcome,
                           a.outcome == domain::AttemptOutcome::succeeded ? std::optional<int>(0) : std::nullopt);
    }
  }
}

// The records as text, sorted (attempts begun in the same millisecond have no order of their own).
std::vector<std::string> as_text(const std::vector<PlaceRecord>& records) {
  std::vector<std::string> out;
  for (const auto& r : records) {
    out.push_back(r.zone + " " + r.accelerator + " " + domain::to_string(r.pricing) + " '" +
                  std::string(domain::to_string(r.outcome)) + "' " + std::to_string(r.started_ms) + " " +
                  (r.active_ms ? std::to_string(*r.active_ms) : "-") + " " +
                  (r.ended_ms ? std::to_string(*r.ended_ms) : "-"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The figures `jobman availability` prints, one line per place.
std::vector<std::string> as_text(const std::vector<core::PlaceStats>& stats) {
  std::vector<std::string> out;
  for (const auto& s : stats) {
    out.push_back(s.zone + " " + s.accelerator + " " + domain::to_string(s.pricing) +
                  " requests=" + std::to_string(s.requests) + " up=" + std::to_string(s.came_up) +
                  " waiting=" + std::to_string(s.waiting_now) + " gave_up=" + std::to_string(s.gave_up) +
                  " median=" + (s.median_wait_seconds ? std::to_string(*s.median_wait_seconds) : "-") +
                  " p90=" + (s.p90_wait_seconds ? std::to_string(*s.p90_wait_seconds) : "-") +
                  " running_h=" + std::to_string(s.running_hours) + " preemptions=" + std::to_string(s.preemptions) +
                  " failures=" + std::to_string(s.failures) + " bad=" + std::to_string(s.bad_hardware));
  }
  return out;
}

// What the supervisor ranks a job's candidates by (JobDriver::choose_candidates with `order: learned`): each
// candidate's history, one query per candidate, then rank_candidates. Returns the order and why.
std::string learned_ranking(const JobStore& store, std::int64_t since_ms, std::int64_t now_ms) {
  const auto config = config::parse_job_configs("job:\n  name: f\ntpu:\n  accelerator: v4-8\n"
                                                "  zone: [us-central2-b, us-east1-d, europe-west4-a]\n"
                                                "command:\n  cmd: train\n",
                                                "f.yaml")
                          .front();
  const auto candidates = config::candidates(config, domain::Pricing::spot);
  std::vector<PlaceRecord> history;
  for (const auto& c : candidates) {
    auto some = store.attempts().since(since_ms, c.zone, c.accelerator.name);
    history.insert(history.end(), some.begin(), some.end());
  }
  std::string why;
  std::string order;
  for (const auto& c : core::rank_candidates(candidates, core::availability(history, now_ms), &why)) {
    order += c.zone + " ";
  }
  return order + "| " + why;
}

class StoreAttemptHistoryTest : public test::StoreBackendTest {};

TEST_P(StoreAttemptHistoryTest, RemovingJobsLeavesTheAvailabilityAndTheLearnedRankingAsTheyWere) {
  auto store = open_store();
  auto worker = make_job("w");
  worker.kind = domain::JobKind::worker;
  auto task = make_job("t");
  task.kind = domain::JobKind::task;
  const auto ids = store.jobs().create(
      {make_job("a"), make_job("b"), make_job("c"), make_job("d", "bob"), make_job("e"), worker, task});
  // a and b: preempted, then up again in us-east1-d; one had bad hardware.
  record(store, ids[0],
         {{"us-east1-d", "v4-8", domain::Pricing::spot, true, domain::AttemptOutcome::preempted},
          {"us-east1-d", "v4-8", domain::Pricing::spot, true, domain::AttemptOutcome::succeeded}});
  record(store, ids[1],
         {{"us-east1-d", "v4-8", domain::Pricing::spot, true, domain::AttemptOutcome::bad_hardware},
          {"us-east1-d", "v4-8", domain::Pricing::spot, true, domain::AttemptOutcome::failed}});
  // c: waited out and refused for quota in us-central2-b, then fell back to on-demand there.
  record(store, ids[2],
         {{"us-central2-b", "v4-8", domain::Pricing::spot, false, domain::AttemptOutcome::timed_out},
          {"us-central2-b", "v4-8", domain::Pricing::spot, false, domain::AttemptOutcome::quota},
          {"us-central2-b", "v4-8", domain::Pricing::ondemand, true, domain::AttemptOutcome::succeeded}});
  // d (bob's): a v4-16 up in us-central2-b, cancelled.
  record(store, ids[3], {{"us-central2-b", "v4-16", domain::Pricing::spot, true, domain::AttemptOutcome::cancelled}});
  // e: still waiting in us-central2-b (not removed).
  record(store, ids[4], {{"us-central2-b", "v4-8", domain::Pricing::spot, false, domain::AttemptOutcome::none}});
  // The worker's own slice, and the task's attempt on it, which borrows it and never counts as a request.
  record(store, ids[5], {{"us-east1-d", "v4-8", domain::Pricing::spot, true, domain::AttemptOutcome::succeeded}});
  domain::Placement on_worker{"qr-w", "qr-w", "us-east1-d", "v4-8", 2, ids[5], domain::Pricing::spot};
  const auto task_attempt = store.attempts().begin(ids[6], on_worker);
  store.attempts().end(ids[6], task_attempt.number, domain::AttemptOutcome::succeeded, 0);

  const std::int64_t now = store.clock_ms() + 60'000;
  const auto records = store.attempts().since(0);
  const auto stats = core::availability(records, now);
  const auto ranking = learned_ranking(store, 0, now);
  ASSERT_EQ(records.size(), 10U) << "every attempt but the task's";
  ASSERT_EQ(stats.size(), 4U);
  EXPECT_EQ(ranking.substr(0, ranking.find('|')), "us-east1-d europe-west4-a us-central2-b ") << ranking;

  // `clean` of the finished jobs, the task and its worker; e stays.
  for (const auto i : {0, 1, 2, 3, 5, 6}) {
    store.jobs().remove(ids[static_cast<std::size_t>(i)]);
  }
  EXPECT_FALSE(store.jobs().remove_if_present(ids[0])) << "a second remover finds it gone and changes nothing";

  EXPECT_EQ(as_text(store.attempts().since(0)), as_text(records));
  EXPECT_EQ(as_text(core::availability(store.attempts().since(0), now)), as_text(stats));
  EXPECT_EQ(learned_ranking(store, 0, now), ranking);
  for (const auto& [zone, accelerator] : std::vector<std::pair<std::string, std::string>>{
           {"us-east1-d", "v4-8"}, {"us-central2-b", "v4-8"}, {"us-central2-b", "v4-16"}, {"", "v4-16"}}) {
    std::vector<PlaceRecord> live;
    std::copy_if(records.begin(), records.end(), std::back_inserter(live), [&](const PlaceRecord& r) {
      return (zone.empty() || r.zone == zone) && r.accelerator == accelerator;
    });
    EXPECT_EQ(as_text(store.attempts().since(0, zone, accelerator)), as_text(live)) << zone << " " << accelerator;
  }
  const auto latest = std::max_element(records.begin(), records.end(), [](const auto& x, const auto& y) {
                        return x.started_ms < y.started_ms;
                      })->started_ms;
  EXPECT_TRUE(store.attempts().since(latest + 1).empty()) << "the window applies to the kept attempts too";

  // Nothing else of a removed job is left, and its id is never given again.
  for (const auto i : {0, 1, 2, 3, 5, 6}) {
    const auto id = ids[static_cast<std::size_t>(i)];
    EXPECT_FALSE(store.jobs().find(id, true).has_value());
    EXPECT_TRUE(store.attempts().of(id).empty());
    EXPECT_TRUE(store.events().of(id).empty());
  }
  EXPECT_EQ(store.attempts().of(ids[4]).size(), 1U);
  EXPECT_GT(store.jobs().create({make_job("f")}).front(), ids.back());
}

TEST_P(StoreAttemptHistoryTest, ARequestOfARemovedJobNoLongerWaits) {
  auto store = open_store();
  const auto id = store.jobs().create({make_job("a")}).front();
  record(store, id, {{"us-central2-b", "v4-8", domain::Pricing::spot, false, domain::AttemptOutcome::none}});
  const std::int64_t now = store.clock_ms() + 60'000;
  ASSERT_EQ(core::availability(store.attempts().since(0), now).front().waiting_now, 1);

  store.jobs().remove(id);
  const auto records = store.attempts().since(0);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_TRUE(records[0].ended_ms.has_value()) << "the request ended with its job";
  const auto stats = core::availability(records, now);
  ASSERT_EQ(stats.size(), 1U);
  EXPECT_EQ(stats[0].requests, 1);
  EXPECT_EQ(stats[0].waiting_now, 0);
  EXPECT_EQ(stats[0].gave_up, 1);
}

JOBMAN_STORE_BACKENDS(StoreAttemptHistoryTest);

// A PostgreSQL store of schema 18 (before attempt_history) is brought to the latest version when opened, and keeps
// removed jobs' attempts from then on.
TEST(StoreAttemptHistorySchema, APostgresStoreOfTheVersionBeforeIsMigrated) {
  if (!test::postgres_testable()) {
    GTEST_SKIP() << "PostgreSQL 15 is not installed (Debian package postgresql)";
  }
  const auto url = test::fresh_postgres_url();
  std::string ddl(schema::postgres_baseline());
  for (const auto& step : schema::migrations()) {
    if (step.version > schema::postgres_baseline_version && step.version <= 18) {
      ddl += step.postgres_sql;
    }
  }
  ddl += "CREATE TABLE jobman_schema (version BIGINT NOT NULL); INSERT INTO jobman_schema VALUES (18);";
  test::run_sql(url, ddl);

  auto store = JobStore::open_postgres(url);
  EXPECT_EQ(store.schema_version(), JobStore::current_schema_version());
  const auto id = store.jobs().create({make_job("a")}).front();
  record(store, id, {{"us-central2-b", "v4-8", domain::Pricing::spot, true, domain::AttemptOutcome::succeeded}});
  store.jobs().remove(id);
  EXPECT_EQ(store.attempts().since(0).size(), 1U);
}

} // namespace store_attempt_history_test
} // namespace jobman::store
