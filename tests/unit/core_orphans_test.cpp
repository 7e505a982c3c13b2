// Which resources are orphans (core/orphans.hpp): jobman's labels, no attempt holding their name, this owner's, old
// enough; a queued resource's node is part of it. And the zones a sync or a sweep looks in.
#include "jobman/core/orphans.hpp"
#include "jobman/store/attempts.hpp"
#include "jobman/store/job_store.hpp"
#include "jobman/store/jobs.hpp"
#include "jobman/util/system.hpp"

#include <gtest/gtest.h>

namespace jobman::core {
namespace core_orphans_test {

using cloud::Node;
using cloud::QueuedResource;

constexpr const char* kZone = "us-central2-b";
constexpr std::int64_t kNow = 1'800'000'000'000;
constexpr std::int64_t kHour = 3'600'000;

std::map<std::string, std::string> labels(const std::string& job, const std::string& owner = "alice") {
  return {{"jobman-job-id", job}, {"jobman-owner", owner}, {"jobman-attempt", "2"}, {"team", "ml"}};
}

QueuedResource queued_resource(const std::string& id, std::map<std::string, std::string> node_labels,
                               std::int64_t created_ms = kNow - kHour) {
  QueuedResource qr;
  qr.name = std::string("projects/p/locations/") + kZone + "/queuedResources/" + id;
  qr.create_time = util::format_utc(created_ms);
  qr.state = cloud::QueuedResourceState::active;
  qr.node_ids = {id};
  qr.node_labels = std::move(node_labels);
  return qr;
}

Node node(const std::string& id, std::map<std::string, std::string> node_labels,
          std::int64_t created_ms = kNow - kHour) {
  Node n;
  n.name = std::string("projects/p/locations/") + kZone + "/nodes/" + id;
  n.create_time = util::format_utc(created_ms);
  n.state = cloud::NodeState::ready;
  n.labels = std::move(node_labels);
  return n;
}

store::HeldSlice held(const std::string& queued_resource, const std::string& node) {
  return store::HeldSlice{1, 1, queued_resource, node, kZone};
}

std::vector<std::string> names(const std::vector<Orphan>& orphans) {
  std::vector<std::string> out;
  out.reserve(orphans.size());
  for (const auto& orphan : orphans) {
    out.push_back(std::string(to_string(orphan.kind)) + " " + orphan.name);
  }
  return out;
}

OrphanFilter alices() {
  OrphanFilter filter;
  filter.owners = {"alice"};
  filter.now_ms = kNow;
  return filter;
}

TEST(CoreOrphans, ResourcesNoAttemptHoldsAreOrphansAndHeldOnesAreNot) {
  ZoneListing zone{kZone, {}, {}};
  zone.queued_resources = {queued_resource("live-a1", labels("000001")), queued_resource("done-a1", labels("000002")),
                           queued_resource("foreign", {{"team", "ml"}})};
  // The queued resources' nodes are listed too; a tpu-vm job's node, and a node no one holds.
  zone.nodes = {node("live-a1", labels("000001")), node("done-a1", labels("000002")), node("vm-a1", labels("000003")),
                node("solo-a1", labels("000099"))};
  const std::vector<store::HeldSlice> holding = {held("live-a1", "live-a1"), held("", "vm-a1")};
  const auto orphans = find_orphans({zone}, holding, alices());
  EXPECT_EQ(names(orphans), (std::vector<std::string>{"queued-resource done-a1", "node solo-a1"}))
      << "a queued resource's node is part of it, never listed alone; resources without jobman's labels are not ours";
  ASSERT_EQ(orphans.size(), 2U);
  EXPECT_EQ(orphans[0].zone, kZone);
  EXPECT_EQ(orphans[0].state, "ACTIVE");
  EXPECT_EQ(orphans[0].job_id, 2);
  EXPECT_EQ(orphans[0].owner, "alice");
  EXPECT_EQ(orphans[0].attempt, "2");
  EXPECT_EQ(orphans[0].nodes, std::vector<std::string>{"done-a1"});
  EXPECT_EQ(orphans[0].age_ms(kNow), kHour);
  EXPECT_EQ(orphans[1].state, "READY");
  EXPECT_EQ(orphans[1].job_id, 99);
  EXPECT_TRUE(orphans[1].nodes.empty());

  EXPECT_EQ(
      names(find_orphans({zone}, {}, alices())),
      (std::vector<std::string>{"queued-resource live-a1", "queued-resource done-a1", "node vm-a1", "node solo-a1"}))
      << "with nothing held, every labelled resource is an orphan";
}

TEST(CoreOrphans, ANameHeldInTheStoreIsHeldWhicheverFieldOrZoneNamesIt) {
  ZoneListing zone{kZone, {queued_resource("qr-a1", labels("000001"))}, {node("n-a1", labels("000002"))}};
  zone.queued_resources[0].node_ids = {"qr-a1-node"};
  // A queued resource held through its node's name; a standalone node named by an attempt in another zone.
  std::vector<store::HeldSlice> holding = {held("", "qr-a1-node"), store::HeldSlice{2, 1, "", "n-a1", "elsewhere-a"}};
  EXPECT_TRUE(find_orphans({zone}, holding, alices()).empty());
}

TEST(CoreOrphans, OnlyThisOwnersResourcesUnlessEveryOwnerIsAskedFor) {
  const ZoneListing zone{
      kZone,
      {queued_resource("mine", labels("000001")), queued_resource("theirs", labels("000001", "bob"))},
      {node("their-node", labels("000007", "bob"))}};
  EXPECT_EQ(names(find_orphans({zone}, {}, alices())), std::vector<std::string>{"queued-resource mine"});
  OrphanFilter everyone = alices();
  everyone.owners.clear();
  EXPECT_EQ(names(find_orphans({zone}, {}, everyone)),
            (std::vector<std::string>{"queued-resource mine", "queued-resource theirs", "node their-node"}));
}

// Two stores of one user (a home's SQLite file and a lab's PostgreSQL store) share the project: each store's
// resources are its own to hold, so a sweep of one never takes the other's slices for orphans. A resource made before
// resources named their store is anyone's, as before.
TEST(CoreOrphans, AnotherStoresResourcesAreNotThisStoresOrphans) {
  auto of_store = [](const std::string& job, const std::string& store) {
    auto l = labels(job);
    l["jobman-store"] = store;
    return l;
  };
  const ZoneListing zone{kZone,
                         {queued_resource("ours", of_store("000001", "aaaaaaaaaaaa")),
                          queued_resource("theirs", of_store("000001", "bbbbbbbbbbbb")),
                          queued_resource("older", labels("000002"))},
                         {node("their-node", of_store("000003", "bbbbbbbbbbbb"))}};
  OrphanFilter ours = alices();
  ours.store = "aaaaaaaaaaaa";
  EXPECT_EQ(names(find_orphans({zone}, {}, ours)),
            (std::vector<std::string>{"queued-resource ours", "queued-resource older"}));
  EXPECT_EQ(names(find_orphans({zone}, {}, alices())).size(), 4U) << "no store given: every store's";
}

TEST(CoreOrphans, OlderThanKeepsOnlyResourcesOfAKnownAndGreaterAge) {
  ZoneListing zone{kZone,
                   {queued_resource("old", labels("000001"), kNow - 3 * kHour),
                    queued_resource("young", labels("000002"), kNow - kHour / 2)},
                   {node("undated", labels("000003"))}};
  zone.nodes[0].create_time = "yesterday";
  OrphanFilter filter = alices();
  filter.older_than_ms = kHour;
  EXPECT_EQ(names(find_orphans({zone}, {}, filter)), std::vector<std::string>{"queued-resource old"});
  const auto all = find_orphans({zone}, {}, alices());
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[2].created_ms, std::nullopt);
  EXPECT_EQ(all[2].age_ms(kNow), std::nullopt);
}

TEST(CoreOrphans, ALabelThatIsNoJobIdNamesNoJob) {
  const ZoneListing zone{kZone, {queued_resource("odd", labels("not-a-job"))}, {}};
  const auto orphans = find_orphans({zone}, {}, alices());
  ASSERT_EQ(orphans.size(), 1U);
  EXPECT_EQ(orphans[0].job_id, std::nullopt);
  EXPECT_EQ(describe(orphans[0]), "queued resource odd in us-central2-b");
  EXPECT_FALSE(orphans[0].deleting());
}

TEST(CoreOrphans, ZonesInUseAreEveryJobsAndAttemptsZoneAndTheSettingsZone) {
  auto store = store::JobStore::open_in_memory();
  EXPECT_EQ(zones_in_use(store, ""), std::vector<std::string>{});
  EXPECT_EQ(zones_in_use(store, "us-east5-a"), std::vector<std::string>{"us-east5-a"});
  domain::NewJob job;
  job.name = "j";
  job.user = "alice";
  job.accelerator = "v4-8";
  job.zone = "us-central2-b";
  job.pricing = domain::Pricing::spot;
  job.tpu_name = "j";
  job.hosts = 1;
  const auto ids = store.jobs().create({job, job});
  store.attempts().begin(ids[0], domain::Placement{"q", "q", "europe-west4-a", {}, 0, std::nullopt, {}});
  EXPECT_EQ(zones_in_use(store, "us-central2-b"), (std::vector<std::string>{"europe-west4-a", "us-central2-b"}));
  EXPECT_EQ(zones_in_use(store, "asia-east1-c"),
            (std::vector<std::string>{"asia-east1-c", "europe-west4-a", "us-central2-b"}));
}

} // namespace core_orphans_test
} // namespace jobman::core
