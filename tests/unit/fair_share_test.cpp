// Fair share of a lab's chips: tiers, the arithmetic of shares and caps, and the store applying them inside the
// transactions that hand chips out (a worker's claim of a task, a job's new slice), on both backends.
#include "jobman/core/fair_share.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/queue.hpp"
#include "jobman/store/shares.hpp"
#include "jobman/util/system.hpp"
#include "support/store_backends.hpp"

#include <gtest/gtest.h>

namespace jobman::core {
namespace fair_share_test {

using domain::JobKind;
using domain::NewJob;
using domain::Phase;
using domain::Pricing;
using store::SliceUse;

TEST(FairShareTiers, ATierIsAGenerationAndAPricingWithTheGenerationsAliases) {
  std::string why;
  EXPECT_EQ(parse_tier("v4:spot", &why), (Tier{"v4", Pricing::spot}));
  EXPECT_EQ(parse_tier("v5e:ondemand", &why), (Tier{"v5litepod", Pricing::ondemand}));
  EXPECT_EQ(parse_tier("v5e:on-demand", &why), (Tier{"v5litepod", Pricing::ondemand}))
      << "kept by the name jobman gives it";
  EXPECT_EQ(parse_tier("v4:spot", &why)->label(), "v4 spot");
  EXPECT_FALSE(parse_tier("v4", &why));
  EXPECT_NE(why.find("GENERATION:PRICING"), std::string::npos) << why;
  EXPECT_FALSE(parse_tier("v9:spot", &why));
  EXPECT_NE(why.find("'v9' is not a TPU generation: v2, v3, v4"), std::string::npos) << why;
  EXPECT_FALSE(parse_tier("v4:cheap", &why));
  EXPECT_NE(why.find("'cheap' is not a pricing"), std::string::npos) << why;
  const auto v4_32 = tier_of("v4-32", Pricing::spot);
  ASSERT_TRUE(v4_32);
  EXPECT_EQ(v4_32->first, (Tier{"v4", Pricing::spot}));
  EXPECT_EQ(v4_32->second, 16) << "v4 sizes count TensorCores, two a chip";
  EXPECT_EQ(tier_of("v5litepod-16", Pricing::ondemand)->second, 16);
  EXPECT_FALSE(tier_of("v99-8", Pricing::spot));
}

SliceUse use(const std::string& user, JobKind kind, const std::string& accelerator, int count,
             Pricing pricing = Pricing::spot) {
  return SliceUse{user, kind, accelerator, pricing, count};
}

TEST(FairShareArithmetic, JobsAndTasksCountAgainstTheirUserAndJobsAndWorkersAgainstTheLab) {
  // alice: two v4-32 jobs (32 chips) and a task on a v4-8 worker (4); bob: one task on a v4-8 worker (4); two v4-8
  // workers (8) and an on-demand v4-8 job of bob's (4, another tier).
  const ChipsInFlight chips({use("alice", JobKind::job, "v4-32", 2), use("alice", JobKind::task, "v4-8", 1),
                             use("bob", JobKind::task, "v4-8", 1), use("lab", JobKind::worker, "v4-8", 2),
                             use("bob", JobKind::job, "v4-8", 1, Pricing::ondemand)});
  const Tier spot{"v4", Pricing::spot};
  EXPECT_EQ(chips.of("alice", spot), 36);
  EXPECT_EQ(chips.of("bob", spot), 4);
  EXPECT_EQ(chips.of("lab", spot), 0) << "a worker's slice is nobody's until a task runs on it";
  EXPECT_EQ(chips.of_lab(spot), 40) << "jobs' and workers' slices; a task borrows chips the lab holds already";
  EXPECT_EQ(chips.of("bob", Tier{"v4", Pricing::ondemand}), 4);
  EXPECT_EQ(chips.of_lab(Tier{"v4", Pricing::ondemand}), 4);
}

TEST(FairShareArithmetic, AShareOfOnesOwnOverridesEveryUsersAndTheCapHoldsJobsAndWorkersNotTasks) {
  ShareLimits limits;
  const Tier spot{"v4", Pricing::spot};
  limits.every_user[spot] = 8;
  limits.per_user[{"alice", spot}] = 16;
  limits.lab_cap[spot] = 20;
  const FairShare share(limits);
  ASSERT_TRUE(share.limits_anything());
  const std::vector<SliceUse> in_flight = {use("alice", JobKind::job, "v4-16", 1), use("bob", JobKind::job, "v4-8", 2)};
  // alice holds 8 of her own 16; bob 8 of everyone's 8; the lab 16 of 20.
  EXPECT_EQ(share.refusal(in_flight, "alice", JobKind::task, "v4-8", Pricing::spot), "");
  EXPECT_EQ(share.refusal(in_flight, "bob", JobKind::task, "v4-8", Pricing::spot),
            "bob holds 8 of their 8 v4 spot chips");
  EXPECT_EQ(share.refusal(in_flight, "carol", JobKind::task, "v4-8", Pricing::spot), "");
  EXPECT_EQ(share.refusal(in_flight, "alice", JobKind::job, "v4-16", Pricing::spot),
            "the lab holds 16 of its 20 v4 spot chips");
  EXPECT_EQ(share.refusal(in_flight, "alice", JobKind::job, "v4-8", Pricing::spot), "")
      << "16 + 4 is the cap, not over";
  EXPECT_EQ(share.refusal(in_flight, "carol", JobKind::worker, "v4-16", Pricing::spot),
            "the lab holds 16 of its 20 v4 spot chips")
      << "a worker's slice counts against the lab's cap";
  EXPECT_EQ(share.refusal(in_flight, "carol", JobKind::worker, "v4-8", Pricing::ondemand), "") << "another tier";
  EXPECT_EQ(share.refusal(in_flight, "carol", JobKind::job, "v4-32", Pricing::spot),
            "carol may hold 8 v4 spot chips, and v4-32 has 16");
  EXPECT_FALSE(FairShare(ShareLimits{}).limits_anything());
}

TEST(FairShareArithmetic, UsersClaimAWorkerFewestChipsFirstAndThoseAtTheirShareNotAtAll) {
  ShareLimits limits;
  limits.every_user[Tier{"v4", Pricing::spot}] = 8;
  const FairShare share(limits);
  const std::vector<SliceUse> in_flight = {use("alice", JobKind::task, "v4-8", 1), use("bob", JobKind::task, "v4-8", 2),
                                           use("dan", JobKind::task, "v4-8", 1)};
  // Queue order alice, bob, carol, dan: carol holds nothing, alice and dan 4 each (alice queued first), bob his 8.
  EXPECT_EQ(share.claim_order(in_flight, {"alice", "bob", "carol", "dan"}, "v4-8", Pricing::spot),
            (std::vector<std::string>{"carol", "alice", "dan"}));
  // Without limits, still fewest chips first.
  EXPECT_EQ(FairShare(ShareLimits{}).claim_order(in_flight, {"bob", "alice", "carol"}, "v4-8", Pricing::spot),
            (std::vector<std::string>{"carol", "alice", "bob"}));
}

NewJob record(JobKind kind, const std::string& name, const std::string& user, const std::string& accelerator = "v4-8",
              int priority = 0) {
  NewJob job;
  job.kind = kind;
  job.name = name;
  job.user = user;
  job.accelerator = accelerator;
  job.zone = kind == JobKind::task ? "" : "us-central2-b";
  job.pricing = kind == JobKind::task ? std::nullopt : std::optional<Pricing>(Pricing::spot);
  job.tpu_name = name;
  job.hosts = 1;
  job.priority = priority;
  job.max_failures = 3;
  job.config_yaml = "name: " + name + "\n";
  return job;
}

store::WorkerOffer offer(std::int64_t id) {
  store::WorkerOffer o;
  o.worker_id = id;
  o.accelerator = "v4-8";
  o.zone = "us-central2-b";
  o.pricing = Pricing::spot;
  o.placement = domain::Placement{
      "w-" + std::to_string(id), "w-" + std::to_string(id), "us-central2-b", "v4-8", 1, std::nullopt, Pricing::spot};
  return o;
}

constexpr std::int64_t kTtl = 15'000;

class FairShareStoreTest : public test::StoreBackendTest {
protected:
  // A job or worker that asked for its slice (PROVISIONING, its attempt open).
  static void request_slice(store::JobStore& store, std::int64_t id) {
    (void)store.attempts().begin(
        id,
        domain::Placement{
            "qr-" + std::to_string(id), "qr-" + std::to_string(id), "us-central2-b", {}, 0, std::nullopt, {}},
        true);
    domain::PhaseChange c;
    c.to = Phase::provisioning;
    c.reason = "requested";
    ASSERT_TRUE(store.jobs().transition(id, std::nullopt, c));
  }
  static void finish(store::JobStore& store, std::int64_t id) {
    domain::PhaseChange done;
    done.to = Phase::succeeded;
    done.reason = "done";
    done.release_worker = true;
    ASSERT_TRUE(store.jobs().transition(id, std::nullopt, done));
    store.attempts().end(id, store.jobs().get(id).attempt, domain::AttemptOutcome::succeeded, 0);
  }
  // A finished job or worker whose slice is gone, as the supervisor records it once a listing shows so.
  static void release(store::JobStore& store, std::int64_t id) {
    finish(store, id);
    store.attempts().mark_released(id, "qr-" + std::to_string(id), "deleted");
  }
};

TEST_P(FairShareStoreTest, SlicesInFlightAreThoseHeldOrAskedForUntilReleased) {
  auto store = open_store();
  const auto ids = store.jobs().create(
      {record(JobKind::job, "running", "alice", "v4-32"), record(JobKind::job, "waiting", "alice"),
       record(JobKind::worker, "w", "ops"), record(JobKind::task, "t", "bob"), record(JobKind::job, "done", "bob"),
       record(JobKind::job, "tearing-down", "carol"), record(JobKind::task, "t2", "bob")});
  request_slice(store, ids[0]);
  request_slice(store, ids[2]);
  request_slice(store, ids[4]);
  release(store, ids[4]);
  request_slice(store, ids[5]);
  finish(store, ids[5]); // Its slice is being deleted: it still counts.
  ASSERT_EQ(store.queue().claim(offer(ids[2]), "sup", kTtl, util::now_ms()), ids[3]);
  const auto in_flight = store.shares().in_flight();
  ASSERT_EQ(in_flight.size(), 4U);
  EXPECT_EQ(in_flight[0].user, "alice");
  EXPECT_EQ(in_flight[0].kind, JobKind::job);
  EXPECT_EQ(in_flight[0].accelerator, "v4-32");
  EXPECT_EQ(in_flight[0].pricing, Pricing::spot);
  EXPECT_EQ(in_flight[1].user, "bob");
  EXPECT_EQ(in_flight[1].kind, JobKind::task);
  EXPECT_EQ(in_flight[1].accelerator, "v4-8") << "the worker's slice, which the task borrows";
  EXPECT_EQ(in_flight[1].pricing, Pricing::spot);
  EXPECT_EQ(in_flight[1].count, 1) << "t2 waits in the queue";
  EXPECT_EQ(in_flight[2].user, "carol");
  EXPECT_EQ(in_flight[3].user, "ops");
  EXPECT_EQ(in_flight[3].kind, JobKind::worker);
  // A job resumed on its kept slice names it in two attempts: one slice.
  (void)store.attempts().begin(ids[0], store.attempts().of(ids[0]).back().placement());
  EXPECT_EQ(store.shares().in_flight()[0].count, 1);
}

TEST_P(FairShareStoreTest, AUserAtTheirShareWaitsAndAnotherUsersTaskTakesTheWorkerTheirOwnByPriority) {
  auto store = open_store();
  ASSERT_TRUE(set_share_limit(store, "*", Tier{"v4", Pricing::spot}, 4)); // One v4-8 each.
  auto share = std::make_shared<const FairShare>(read_share_limits(store));
  store.shares().set_policy(share);
  const auto workers = store.jobs().create({record(JobKind::worker, "w1", "ops"), record(JobKind::worker, "w2", "ops"),
                                            record(JobKind::worker, "w3", "ops")});
  for (const auto w : workers) {
    request_slice(store, w);
  }
  // alice queued first, and her second task has the highest priority of all; bob's comes last.
  const auto tasks =
      store.jobs().create({record(JobKind::task, "a1", "alice"), record(JobKind::task, "a2", "alice", "v4-8", 9),
                           record(JobKind::task, "b1", "bob")});
  const auto now = util::now_ms();
  EXPECT_EQ(store.queue().claim(offer(workers[0]), "sup", kTtl, now), tasks[1]) << "alice's own by priority";
  EXPECT_EQ(store.queue().claim(offer(workers[1]), "sup", kTtl, now), tasks[2])
      << "alice holds her 4 chips: bob's task goes first though queued last";
  EXPECT_FALSE(store.queue().claim(offer(workers[2]), "sup", kTtl, now)) << "alice's a1 waits in the queue";
  EXPECT_EQ(store.jobs().get(tasks[0]).phase, Phase::pending);
  EXPECT_EQ(share_wait_of_task(*share, ChipsInFlight(store.shares().in_flight()), store.jobs().get(tasks[0]),
                               store.jobs().list({})),
            "alice holds 4 of their 4 v4 spot chips");

  // Her running task ends: her next one takes the free worker.
  finish(store, tasks[1]);
  EXPECT_EQ(store.queue().claim(offer(workers[2]), "sup", kTtl, now), tasks[0]);
  // The share raised: nothing waits for it any more.
  ASSERT_TRUE(set_share_limit(store, "alice", Tier{"v4", Pricing::spot}, 8));
  EXPECT_EQ(read_share_limits(store).share_of("alice", Tier{"v4", Pricing::spot}), 8);
  EXPECT_EQ(read_share_limits(store).share_of("bob", Tier{"v4", Pricing::spot}), 4);
  EXPECT_FALSE(set_share_limit(store, "alice", Tier{"v4", Pricing::spot}, 8)) << "unchanged";
}

TEST_P(FairShareStoreTest, WithoutLimitsUsersStillTakeTurnsFewestChipsFirst) {
  auto store = open_store();
  store.shares().set_policy(std::make_shared<const FairShare>(read_share_limits(store)));
  const auto workers =
      store.jobs().create({record(JobKind::worker, "w1", "ops"), record(JobKind::worker, "w2", "ops")});
  for (const auto w : workers) {
    request_slice(store, w);
  }
  const auto tasks = store.jobs().create(
      {record(JobKind::task, "a1", "alice"), record(JobKind::task, "a2", "alice"), record(JobKind::task, "b1", "bob")});
  const auto now = util::now_ms();
  EXPECT_EQ(store.queue().claim(offer(workers[0]), "sup", kTtl, now), tasks[0]) << "both hold nothing: queue order";
  EXPECT_EQ(store.queue().claim(offer(workers[1]), "sup", kTtl, now), tasks[2]) << "bob holds fewer chips than alice";
}

TEST_P(FairShareStoreTest, ANewSliceBeyondTheLabsCapIsRefusedWhereTheAttemptWouldBeRecorded) {
  auto store = open_store();
  ASSERT_TRUE(set_share_limit(store, "", Tier{"v4", Pricing::spot}, 8));
  store.shares().set_policy(std::make_shared<const FairShare>(read_share_limits(store)));
  const auto ids = store.jobs().create({record(JobKind::job, "first", "alice"), record(JobKind::worker, "w", "ops"),
                                        record(JobKind::job, "third", "bob")});
  request_slice(store, ids[0]);
  request_slice(store, ids[1]);
  try {
    (void)store.attempts().begin(ids[2], domain::Placement{"qr", "qr", "us-central2-b", {}, 0, std::nullopt, {}}, true);
    ADD_FAILURE() << "a third v4-8 went over the cap of 8 chips";
  } catch (const store::ShareExceededError& e) {
    EXPECT_STREQ(e.what(), "the lab holds 8 of its 8 v4 spot chips");
  }
  EXPECT_TRUE(store.attempts().of(ids[2]).empty()) << "nothing recorded, nothing to ask the cloud for";
  EXPECT_EQ(store.jobs().get(ids[2]).attempt, 0);
  // The first job's slice is released: room for the third.
  release(store, ids[0]);
  request_slice(store, ids[2]);
  EXPECT_EQ(store.attempts().of(ids[2]).size(), 1U);
  // Removing the cap; a setting that is not there is not removed twice.
  EXPECT_TRUE(set_share_limit(store, "", Tier{"v4", Pricing::spot}, std::nullopt));
  EXPECT_FALSE(set_share_limit(store, "", Tier{"v4", Pricing::spot}, std::nullopt));
  EXPECT_TRUE(read_share_limits(store).empty());
}

JOBMAN_STORE_BACKENDS(FairShareStoreTest);

} // namespace fair_share_test
} // namespace jobman::core
