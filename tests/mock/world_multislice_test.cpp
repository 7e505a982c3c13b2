// Multislice queued resources (tpu.nodeSpec[0].multisliceParams): nodeCount nodes named <nodeIdPrefix>-<index>,
// provisioned, counted, preempted and deleted together, driven by a fake clock.
#include "mock_cloud/world.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace world_multislice_test {

using jobman::mock::DelayDistribution;
using jobman::mock::MockConfig;
using jobman::mock::PoolConfig;
using jobman::mock::Reply;
using jobman::mock::Tier;
using jobman::mock::World;
using nlohmann::json;

constexpr std::int64_t kStart = 1'800'000'000'000;
// Created at kStart: CREATING for 1 s, then PROVISIONING for 10 s.
constexpr std::int64_t kActive = kStart + 11'000;
const std::string kProject = "p";
const std::string kZone = "us-central2-b";

// Fixed delays: creating 1 s, provisioning 10 s, suspending 2 s, deleting 3 s; 16 spot v4 chips, a quota of 12.
MockConfig test_config() {
  MockConfig config;
  jobman::mock::ZoneConfig zone;
  zone.name = kZone;
  zone.pools["v4"][Tier::spot] = PoolConfig{16, 12, {}};
  config.zones.push_back(zone);
  config.provisioning["default"] = DelayDistribution{DelayDistribution::Kind::fixed, 10, 0};
  config.creating_seconds = 1;
  config.suspending_seconds = 2;
  config.deleting_seconds = 3;
  return config;
}

// A spot v4-8 queued resource whose nodeSpec carries `params` as multisliceParams.
json multislice_request(const json& params) {
  return {{"tpu",
           {{"nodeSpec",
             {{{"parent", "projects/p/locations/" + kZone},
               {"multisliceParams", params},
               {"node", {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
          {"spot", json::object()}};
}

Reply create(World& world, const std::string& id, const json& params, std::int64_t now = kStart) {
  return world.create_queued_resource(kProject, kZone, id, "", multislice_request(params), now);
}

std::string qr_state(World& world, const std::string& id, std::int64_t now) {
  auto reply = world.get_queued_resource(kProject, kZone, id, now);
  return reply.ok() ? reply.body["state"]["state"].get<std::string>() : "GONE";
}

std::string node_state(World& world, const std::string& id, std::int64_t now) {
  auto reply = world.get_node(kProject, kZone, id, now);
  return reply.ok() ? reply.body["state"].get<std::string>() : "GONE";
}

// The spot v4 chips of the zone held now (the metrics' capacity.inUse).
int chips_in_use(World& world, std::int64_t now) {
  const auto metrics = world.metrics(now);
  for (const auto& pool : metrics["capacity"]) {
    if (pool["generation"] == "v4" && pool["tier"] == "spot") {
      return pool["inUse"].get<int>();
    }
  }
  return -1;
}

TEST(MockMultislice, NodeCountNodesNamedPrefixIndexAreProvisionedTogether) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "ms", {{"nodeCount", 3}, {"nodeIdPrefix", "slice"}}).ok());
  EXPECT_EQ(qr_state(world, "ms", kStart + 1'000), "PROVISIONING");
  for (const char* node : {"slice-0", "slice-1", "slice-2"}) {
    EXPECT_EQ(node_state(world, node, kStart + 1'000), "CREATING") << node;
  }
  EXPECT_EQ(qr_state(world, "ms", kActive), "ACTIVE");
  const auto nodes = world.list_nodes(kProject, kZone, 0, "", kActive).body["nodes"];
  ASSERT_EQ(nodes.size(), 3U) << nodes.dump();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i]["name"], "projects/p/locations/us-central2-b/nodes/slice-" + std::to_string(i));
    EXPECT_EQ(nodes[i]["state"], "READY");
    EXPECT_EQ(nodes[i]["multisliceNode"], true);
    EXPECT_EQ(nodes[i]["queuedResource"], "projects/p/locations/us-central2-b/queuedResources/ms");
    EXPECT_EQ(nodes[i]["acceleratorType"], "v4-8");
  }
  // The request is echoed as sent: multisliceParams, no nodeId.
  const auto qr = world.get_queued_resource(kProject, kZone, "ms", kActive).body;
  const auto& spec = qr["tpu"]["nodeSpec"];
  ASSERT_EQ(spec.size(), 1U);
  EXPECT_EQ(spec[0]["multisliceParams"], json({{"nodeCount", 3}, {"nodeIdPrefix", "slice"}}));
  EXPECT_FALSE(spec[0].contains("nodeId"));
  EXPECT_EQ(chips_in_use(world, kActive), 12);
}

TEST(MockMultislice, ThePrefixDefaultsToTheQueuedResourceIdAndSingleNodesAreNotMultislice) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "group", {{"nodeCount", "2"}}).ok()); // int32 as a decimal string, as JSON allows.
  EXPECT_EQ(node_state(world, "group-0", kActive), "READY");
  EXPECT_EQ(node_state(world, "group-1", kActive), "READY");
  EXPECT_EQ(world.get_queued_resource(kProject, kZone, "group", kActive).body["tpu"]["nodeSpec"][0]["multisliceParams"],
            json({{"nodeCount", 2}}));
  auto single = multislice_request({});
  single["tpu"]["nodeSpec"][0].erase("multisliceParams");
  single["tpu"]["nodeSpec"][0]["nodeId"] = "one";
  ASSERT_TRUE(world.create_queued_resource(kProject, kZone, "single", "", single, kActive).ok());
  const auto node = world.get_node(kProject, kZone, "one", kActive + 11'000).body;
  EXPECT_EQ(node["state"], "READY");
  EXPECT_FALSE(node.contains("multisliceNode"));
}

TEST(MockMultislice, BadRequestsAreRefused) {
  World world(test_config(), 1, 7);
  for (const json& params : {json({{"nodeCount", 1}}), json({{"nodeCount", 0}}), json({{"nodeIdPrefix", "x"}}),
                             json({{"nodeCount", "two"}}), json({{"nodeCount", 2}, {"nodeIdPrefix", "Bad_Prefix"}}),
                             json({{"nodeCount", 2}, {"nodeIdPrefix", 7}}), json("2")}) {
    const auto reply = create(world, "bad", params);
    EXPECT_EQ(reply.status, 400) << params.dump() << " " << reply.body.dump();
  }
  auto both = multislice_request({{"nodeCount", 2}});
  both["tpu"]["nodeSpec"][0]["nodeId"] = "n";
  EXPECT_EQ(world.create_queued_resource(kProject, kZone, "both", "", both, kStart).status, 400);
  auto neither = multislice_request({});
  neither["tpu"]["nodeSpec"][0].erase("multisliceParams");
  const auto missing = world.create_queued_resource(kProject, kZone, "neither", "", neither, kStart);
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body["error"]["message"].get<std::string>().find("multisliceParams"), std::string::npos);
}

TEST(MockMultislice, QuotaAndCapacityCountEverySlice) {
  World world(test_config(), 1, 7);
  // Four v4-8 slices are 16 chips: past the quota of 12.
  const auto over = create(world, "big", {{"nodeCount", 4}});
  EXPECT_EQ(over.status, 429) << over.body.dump();
  ASSERT_TRUE(create(world, "ms", {{"nodeCount", 2}, {"nodeIdPrefix", "ms"}}).ok());
  // 8 of the quota's 12 chips are held: another two slices are refused.
  EXPECT_EQ(create(world, "more", {{"nodeCount", 2}}, kStart + 100).status, 429);
  // The names a multislice request asks for are taken, by another queued resource and by nodes.create alike.
  auto clash = multislice_request({});
  clash["tpu"]["nodeSpec"][0].erase("multisliceParams");
  clash["tpu"]["nodeSpec"][0]["nodeId"] = "ms-1";
  EXPECT_EQ(world.create_queued_resource(kProject, kZone, "clash", "", clash, kStart + 100).status, 409);
  const json node = {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}};
  EXPECT_EQ(world.create_node(kProject, kZone, "ms-0", node, kStart + 100).status, 409);
  EXPECT_EQ(chips_in_use(world, kActive), 8);
}

TEST(MockMultislice, SlicesArePreemptedTogetherAndDeletedTogether) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "ms", {{"nodeCount", 2}, {"nodeIdPrefix", "ms"}}).ok());
  ASSERT_EQ(qr_state(world, "ms", kActive), "ACTIVE");
  ASSERT_TRUE(world.preempt_node(kProject, kZone, "ms-1", kActive).ok());
  EXPECT_EQ(node_state(world, "ms-0", kActive), "PREEMPTED");
  EXPECT_EQ(node_state(world, "ms-1", kActive), "PREEMPTED");
  EXPECT_EQ(qr_state(world, "ms", kActive + 2'000), "SUSPENDED");
  EXPECT_EQ(chips_in_use(world, kActive + 2'000), 0);

  // A reset brings both back; a forced delete takes both away.
  ASSERT_TRUE(world.reset_queued_resource(kProject, kZone, "ms", kActive + 2'000).ok());
  EXPECT_EQ(node_state(world, "ms-0", kActive + 2'000), "CREATING");
  EXPECT_EQ(qr_state(world, "ms", kActive + 12'000), "ACTIVE");
  EXPECT_EQ(node_state(world, "ms-1", kActive + 12'000), "READY");
  EXPECT_EQ(world.delete_queued_resource(kProject, kZone, "ms", false, "", kActive + 12'000).status, 400);
  ASSERT_TRUE(world.delete_queued_resource(kProject, kZone, "ms", true, "", kActive + 12'000).ok());
  EXPECT_EQ(node_state(world, "ms-0", kActive + 12'000), "DELETING");
  EXPECT_EQ(node_state(world, "ms-1", kActive + 12'000), "DELETING");
  EXPECT_EQ(qr_state(world, "ms", kActive + 15'000), "GONE");
  EXPECT_EQ(node_state(world, "ms-0", kActive + 15'000), "GONE");
  EXPECT_EQ(node_state(world, "ms-1", kActive + 15'000), "GONE");
  EXPECT_EQ(chips_in_use(world, kActive + 15'000), 0);
}

TEST(MockMultislice, DeletingOneNodeSuspendsTheResourceAndEndsItsOtherSlices) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "ms", {{"nodeCount", 2}, {"nodeIdPrefix", "ms"}}).ok());
  ASSERT_EQ(qr_state(world, "ms", kActive), "ACTIVE");
  ASSERT_TRUE(world.delete_node(kProject, kZone, "ms-0", kActive).ok());
  EXPECT_EQ(node_state(world, "ms-1", kActive), "TERMINATED");
  EXPECT_EQ(qr_state(world, "ms", kActive), "SUSPENDING");
  EXPECT_EQ(node_state(world, "ms-0", kActive + 3'000), "GONE");
  EXPECT_EQ(qr_state(world, "ms", kActive + 3'000), "SUSPENDED");
  EXPECT_EQ(chips_in_use(world, kActive + 3'000), 0);
  // The reset asks for both names again.
  ASSERT_TRUE(world.reset_queued_resource(kProject, kZone, "ms", kActive + 3'000).ok());
  EXPECT_EQ(qr_state(world, "ms", kActive + 13'000), "ACTIVE");
  EXPECT_EQ(node_state(world, "ms-0", kActive + 13'000), "READY");
  EXPECT_EQ(node_state(world, "ms-1", kActive + 13'000), "READY");
}

TEST(MockMultislice, ARestartedWorldKeepsEverySlice) {
  jobman::test::TempDir dir;
  const auto db = dir / "state.db";
  {
    World before(test_config(), 1, 7);
    before.attach_store(db, kStart);
    ASSERT_TRUE(create(before, "ms", {{"nodeCount", 2}, {"nodeIdPrefix", "ms"}}).ok());
    ASSERT_EQ(qr_state(before, "ms", kActive), "ACTIVE");
  }
  World restarted(test_config(), 1, 7);
  restarted.attach_store(db, kActive);
  EXPECT_EQ(restarted.get_node(kProject, kZone, "ms-1", kActive).body["multisliceNode"], true);
  EXPECT_EQ(chips_in_use(restarted, kActive), 8);
  ASSERT_TRUE(restarted.delete_queued_resource(kProject, kZone, "ms", true, "", kActive).ok());
  EXPECT_EQ(node_state(restarted, "ms-0", kActive + 3'000), "GONE");
  EXPECT_EQ(node_state(restarted, "ms-1", kActive + 3'000), "GONE");
}

} // namespace world_multislice_test
