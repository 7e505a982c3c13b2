// The store's first-ready races: an attempt begun with rivals, a rival that comes up swapping places with the
// attempt's own request, and rivals held (and swept) like any slice until their deletion is confirmed.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/store/rivals.hpp"
#include "jobman/util/error.hpp"
#include "support/sample_job.hpp"
#include "support/store_backends.hpp"

#include <algorithm>
#include <gtest/gtest.h>

namespace jobman::store {
namespace store_rivals_test {

using test::make_job;

domain::Placement place(const std::string& name, const std::string& zone, const std::string& accelerator = "v4-8") {
  return {name, name, zone, accelerator, 1, std::nullopt, domain::Pricing::spot};
}

class StoreRivalsTest : public test::StoreBackendTest {};

TEST_P(StoreRivalsTest, ARaceIsOneAttemptWithItsRivalsHeldBesideIt) {
  auto store = open_store();
  const auto id = store.jobs().create({make_job("a")}).front();
  const auto attempt = store.rivals().begin_race(
      id, place("r-a1", "us-central2-b"), {place("r-a1c2", "us-east1-d"), place("r-a1c3", "europe-west4-a", "v5p-8")});
  EXPECT_EQ(attempt.number, 1);
  EXPECT_TRUE(attempt.create_pending);
  const auto rivals = store.rivals().of(id);
  ASSERT_EQ(rivals.size(), 2U);
  EXPECT_EQ(rivals[0].name, "r-a1c2");
  EXPECT_EQ(rivals[1].accelerator, "v5p-8");
  EXPECT_TRUE(rivals[0].create_pending);
  EXPECT_EQ(rivals[0].outcome, domain::RivalOutcome::racing);
  EXPECT_EQ(rivals[0].attempt, 1);

  // Held, and their zones in use, as the attempt's own slice: no sweep takes them for orphans.
  const auto held = store.attempts().held_slices();
  ASSERT_EQ(held.size(), 3U);
  std::vector<std::string> names;
  for (const auto& h : held) {
    names.push_back(h.queued_resource);
    EXPECT_EQ(h.attempt, 1);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"r-a1", "r-a1c2", "r-a1c3"}));
  const auto zones = store.jobs().zones_in_use();
  EXPECT_NE(std::find(zones.begin(), zones.end(), "europe-west4-a"), zones.end());

  store.rivals().confirm_created(id, "r-a1c2");
  EXPECT_FALSE(store.rivals().of(id)[0].create_pending);
  EXPECT_TRUE(store.rivals().of(id)[1].create_pending);

  // A rival's release is recorded by its name, once.
  store.rivals().end(id, "r-a1c3", domain::RivalOutcome::lost);
  store.rivals().end(id, "r-a1c3", domain::RivalOutcome::outrun);
  EXPECT_EQ(store.rivals().of(id)[1].outcome, domain::RivalOutcome::lost) << "the first reason it left the race stands";
  store.attempts().mark_released(id, "r-a1c3", "deleted");
  EXPECT_TRUE(store.rivals().of(id)[1].released_ms);
  EXPECT_FALSE(store.attempts().of(id)[0].released_ms) << "the attempt's own slice is not the rival";
  EXPECT_EQ(store.attempts().held_slices().size(), 2U);
  EXPECT_NE(store.events().of(id).back().message.find("r-a1c3 released: deleted"), std::string::npos);
}

TEST_P(StoreRivalsTest, TheRivalThatComesUpFirstBecomesTheAttemptsSlice) {
  auto store = open_store();
  const auto id = store.jobs().create({make_job("a")}).front();
  store.rivals().begin_race(id, place("r-a1", "us-central2-b"), {place("r-a1c2", "us-east1-d", "v5litepod-8")});
  store.attempts().confirm_created(id, 1);
  store.rivals().confirm_created(id, "r-a1c2");
  store.rivals().promote(id, 1, "r-a1c2", domain::RivalOutcome::outrun, "r-a1c2 came up first");

  const auto attempt = store.attempts().of(id).front();
  EXPECT_EQ(attempt.queued_resource, "r-a1c2");
  EXPECT_EQ(attempt.node, "r-a1c2");
  EXPECT_EQ(attempt.zone, "us-east1-d");
  EXPECT_EQ(attempt.accelerator, "v5litepod-8");
  EXPECT_FALSE(attempt.create_pending);
  const auto rivals = store.rivals().of(id);
  ASSERT_EQ(rivals.size(), 1U);
  EXPECT_EQ(rivals[0].name, "r-a1") << "the attempt's first request is now the one to delete";
  EXPECT_EQ(rivals[0].zone, "us-central2-b");
  EXPECT_EQ(rivals[0].accelerator, "v4-8");
  EXPECT_EQ(rivals[0].outcome, domain::RivalOutcome::outrun);
  EXPECT_EQ(store.events().of(id).back().message, "r-a1c2 came up first");

  EXPECT_THROW(store.rivals().promote(id, 1, "r-a1c9", domain::RivalOutcome::outrun, "no such rival"), jobman::Error);
  store.attempts().mark_released(id, "r-a1", "deleted");
  EXPECT_FALSE(store.attempts().of(id).front().released_ms)
      << "releasing the outrun request leaves the attempt's slice";
  store.jobs().remove(id);
  EXPECT_TRUE(store.rivals().of(id).empty()) << "a removed job's rivals go with it";
  EXPECT_TRUE(store.attempts().held_slices().empty());
}

JOBMAN_STORE_BACKENDS(StoreRivalsTest);

} // namespace store_rivals_test
} // namespace jobman::store
