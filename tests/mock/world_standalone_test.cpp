// Standalone nodes (nodes.create) in the mock's world, on a fake clock: creation, capacity and quota, preemption,
// maintenance, deletion, stop and start, and a restart of the world.
#include "mock_cloud/world.hpp"
#include "mock_cloud/world_store.hpp"
#include "standalone_world.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace world_standalone_test {

using jobman::mock::World;
using jobman::test::chips_in_use;
using jobman::test::create_node;
using jobman::test::expect_rpc_error;
using jobman::test::kStandaloneStart;
using jobman::test::kStandaloneZone;
using jobman::test::node_body;
using jobman::test::operation;
using jobman::test::RecordingListener;
using jobman::test::standalone_config;
using jobman::test::standalone_state;
using nlohmann::json;

constexpr std::int64_t kT = kStandaloneStart;
const std::string kNodes = "projects/p/locations/us-central2-b/nodes/";

TEST(MockStandaloneNode, CreateWalksCreatingToReadyAndEndsTheOperationWithTheNode) {
  World world(standalone_config(), 1, 7);
  RecordingListener listener;
  world.set_listener(&listener);
  auto op = create_node(world, "solo", node_body("v4-32"), kT);
  ASSERT_TRUE(op.ok()) << op.body.dump();
  EXPECT_FALSE(op.body["done"].get<bool>());
  EXPECT_EQ(op.body["metadata"]["verb"], "create");
  EXPECT_EQ(op.body["metadata"]["target"], kNodes + "solo");
  EXPECT_EQ(standalone_state(world, "solo", kT), "CREATING");
  EXPECT_EQ(chips_in_use(world, "spot", kT), 16); // Held from the start: there is no queue.
  EXPECT_TRUE(listener.events.empty());
  EXPECT_EQ(standalone_state(world, "solo", kT + 9'999), "CREATING");

  auto node = world.get_node("p", kStandaloneZone, "solo", kT + 10'000).body;
  EXPECT_EQ(node["state"], "READY");
  EXPECT_EQ(node["health"], "HEALTHY");
  EXPECT_EQ(node["schedulingConfig"], json({{"spot", true}}));
  EXPECT_FALSE(node.contains("queuedResource"));
  EXPECT_EQ(node["acceleratorConfig"], json({{"type", "V4"}, {"topology", "2x2x4"}}));
  EXPECT_EQ(node["labels"], json({{"team", "ml"}}));
  EXPECT_EQ(node["networkEndpoints"].size(), 4U);
  EXPECT_EQ(listener.events, std::vector<std::string>{"ready " + kNodes + "solo 4"});
  auto done = operation(world, op.body["name"], kT + 10'000);
  EXPECT_TRUE(done["done"].get<bool>());
  EXPECT_EQ(done["response"]["@type"], "type.googleapis.com/google.cloud.tpu.v2.Node");
  EXPECT_EQ(done["response"]["state"], "READY");
  EXPECT_EQ(done["response"]["name"], kNodes + "solo");
  // It is listed with the queued resources' nodes.
  auto list = world.list_nodes("p", kStandaloneZone, 0, "", kT + 10'000);
  ASSERT_EQ(list.body["nodes"].size(), 1U);
}

TEST(MockStandaloneNode, OnDemandAndPreemptibleUseTheirPools) {
  World world(standalone_config(), 1, 7);
  ASSERT_TRUE(create_node(world, "od", node_body("v4-8", ""), kT).ok());
  ASSERT_TRUE(create_node(world, "pre", node_body("v4-16", "preemptible"), kT).ok());
  EXPECT_EQ(chips_in_use(world, "on_demand", kT), 4);
  EXPECT_EQ(chips_in_use(world, "spot", kT), 8);
  world.tick(kT + 10'000);
  EXPECT_FALSE(world.get_node("p", kStandaloneZone, "od", kT + 10'000).body.contains("schedulingConfig"));
  EXPECT_EQ(world.get_node("p", kStandaloneZone, "pre", kT + 10'000).body["schedulingConfig"],
            json({{"preemptible", true}}));
}

TEST(MockStandaloneNode, ACreateWithoutCapacityFailsWithResourceExhaustedAndLeavesNoNode) {
  World world(standalone_config(), 1, 7);
  ASSERT_TRUE(create_node(world, "big", node_body("v4-128"), kT).ok()); // 64 chips: the whole spot pool.
  auto op = create_node(world, "late", node_body("v4-8"), kT + 100);    // Within the quota of 128.
  ASSERT_TRUE(op.ok()) << op.body.dump();
  EXPECT_EQ(standalone_state(world, "late", kT + 100), "CREATING");
  EXPECT_EQ(chips_in_use(world, "spot", kT + 100), 64);
  EXPECT_EQ(standalone_state(world, "late", kT + 1'100), "GONE");
  auto failed = operation(world, op.body["name"], kT + 1'100);
  EXPECT_TRUE(failed["done"].get<bool>());
  EXPECT_EQ(failed["error"]["code"], 8);
  EXPECT_NE(failed["error"]["message"].get<std::string>().find("no more capacity"), std::string::npos);
  EXPECT_FALSE(failed.contains("response"));
  EXPECT_EQ(chips_in_use(world, "spot", kT + 1'100), 64);
}

TEST(MockStandaloneNode, QuotaCountsStandaloneNodesAndQueuedResources) {
  World world(standalone_config(), 1, 7);
  ASSERT_TRUE(create_node(world, "a", node_body("v4-32", ""), kT).ok()); // 16 of the 32 on-demand chips of quota.
  json qr = {{"tpu",
              {{"nodeSpec",
                {{{"nodeId", "q-node"},
                  {"node", {{"acceleratorType", "v4-32"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
             {"guaranteed", json::object()}};
  ASSERT_TRUE(world.create_queued_resource("p", kStandaloneZone, "q", "", qr, kT).ok());
  expect_rpc_error(create_node(world, "b", node_body("v4-8", ""), kT), 429, "RESOURCE_EXHAUSTED");
}

TEST(MockStandaloneNode, BadRequestsAndConflicts) {
  World world(standalone_config(), 1, 7);
  auto bad = [&](const std::string& id, const json& body) {
    expect_rpc_error(create_node(world, id, body, kT), 400, "INVALID_ARGUMENT");
  };
  bad("", node_body("v4-8"));
  bad("Bad_Id", node_body("v4-8"));
  bad("x", json::array());
  bad("x", {{"runtimeVersion", "tpu-ubuntu2204-base"}});
  bad("x", node_body("v4-12"));
  bad("x", node_body("v5p-8")); // Not offered in the zone.
  json no_runtime = node_body("v4-8");
  no_runtime.erase("runtimeVersion");
  bad("x", no_runtime);
  json both = node_body("v4-8");
  both["schedulingConfig"]["preemptible"] = true;
  bad("x", both);
  json not_bool = node_body("v4-8");
  not_bool["schedulingConfig"]["spot"] = "yes";
  bad("x", not_bool);
  json bad_config = {{"acceleratorConfig", {{"type", "V4"}, {"topology", "3x3x3"}}},
                     {"runtimeVersion", "tpu-ubuntu2204-base"}};
  bad("x", bad_config);
  expect_rpc_error(world.create_node("p", "nowhere-1-a", "x", node_body("v4-8"), kT), 404, "NOT_FOUND");

  // acceleratorConfig instead of acceleratorType.
  json by_config = {{"acceleratorConfig", {{"type", "V4"}, {"topology", "2x2x2"}}},
                    {"runtimeVersion", "tpu-ubuntu2204-base"}};
  ASSERT_TRUE(create_node(world, "cfg", by_config, kT).ok());
  EXPECT_EQ(world.get_node("p", kStandaloneZone, "cfg", kT).body["acceleratorType"], "v4-16");

  expect_rpc_error(create_node(world, "cfg", node_body("v4-8"), kT), 409, "ALREADY_EXISTS");
  json qr = {
      {"tpu",
       {{"nodeSpec",
         {{{"nodeId", "taken"}, {"node", {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
      {"spot", json::object()}};
  ASSERT_TRUE(world.create_queued_resource("p", kStandaloneZone, "q", "", qr, kT).ok());
  // The queued resource is still CREATING: its node does not exist yet, but the id is taken.
  expect_rpc_error(create_node(world, "taken", node_body("v4-8"), kT), 409, "ALREADY_EXISTS");
  // Also once nodes.delete took the queued resource's node: a reset would bring it back.
  world.tick(kT + 20'000);
  ASSERT_TRUE(world.delete_node("p", kStandaloneZone, "taken", kT + 20'000).ok());
  ASSERT_EQ(standalone_state(world, "taken", kT + 30'000), "GONE");
  expect_rpc_error(create_node(world, "taken", node_body("v4-8"), kT + 30'000), 409, "ALREADY_EXISTS");
  qr["tpu"]["nodeSpec"][0]["nodeId"] = "cfg";
  expect_rpc_error(world.create_queued_resource("p", kStandaloneZone, "q2", "", qr, kT + 30'000), 409,
                   "ALREADY_EXISTS");
}

TEST(MockStandaloneNode, PreemptionLeavesAPreemptedNodeUntilDeleted) {
  World world(standalone_config(), 1, 7);
  RecordingListener listener;
  world.set_listener(&listener);
  ASSERT_TRUE(create_node(world, "s", node_body("v4-8"), kT).ok());
  world.tick(kT + 10'000);
  auto preempted = world.preempt_node("p", kStandaloneZone, "s", kT + 11'000);
  ASSERT_TRUE(preempted.ok()) << preempted.body.dump();
  EXPECT_EQ(preempted.body["state"], "PREEMPTED");
  EXPECT_EQ(listener.events.back(), "lost " + kNodes + "s");
  EXPECT_EQ(chips_in_use(world, "spot", kT + 11'000), 0);
  EXPECT_EQ(standalone_state(world, "s", kT + 500'000), "PREEMPTED");
  expect_rpc_error(world.preempt_node("p", kStandaloneZone, "s", kT + 500'000), 400, "FAILED_PRECONDITION");

  auto deleted = world.delete_node("p", kStandaloneZone, "s", kT + 500'000);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(standalone_state(world, "s", kT + 500'000), "DELETING");
  EXPECT_EQ(standalone_state(world, "s", kT + 503'000), "GONE");
  EXPECT_EQ(operation(world, deleted.body["name"], kT + 503'000)["response"]["@type"],
            "type.googleapis.com/google.protobuf.Empty");
}

TEST(MockStandaloneNode, RandomPreemptionAndMaintenanceTakeNodesBack) {
  World world(standalone_config(600, 900), 1, 3);
  ASSERT_TRUE(create_node(world, "spot", node_body("v4-8"), kT).ok());
  ASSERT_TRUE(create_node(world, "od", node_body("v4-8", ""), kT).ok());
  const std::int64_t day = kT + 24 * 3'600'000LL;
  EXPECT_EQ(standalone_state(world, "spot", day), "PREEMPTED");
  EXPECT_EQ(standalone_state(world, "od", day), "TERMINATED");
  EXPECT_EQ(chips_in_use(world, "spot", day), 0);
  EXPECT_EQ(chips_in_use(world, "on_demand", day), 0);
}

TEST(MockStandaloneNode, DeletingWhileCreatingEndsTheCreateWithAnErrorAndFreesTheChips) {
  World world(standalone_config(), 1, 7);
  auto op = create_node(world, "d", node_body("v4-8"), kT);
  ASSERT_TRUE(world.delete_node("p", kStandaloneZone, "d", kT + 1'000).ok());
  EXPECT_EQ(chips_in_use(world, "spot", kT + 1'000), 4);
  EXPECT_EQ(standalone_state(world, "d", kT + 4'000), "GONE");
  EXPECT_EQ(chips_in_use(world, "spot", kT + 4'000), 0);
  EXPECT_EQ(operation(world, op.body["name"], kT + 4'000)["error"]["code"], 10);
}

TEST(MockStandaloneNode, StopAndStartBringFreshHosts) {
  World world(standalone_config(), 1, 7);
  RecordingListener listener;
  world.set_listener(&listener);
  ASSERT_TRUE(create_node(world, "n", node_body("v4-8", ""), kT).ok());
  expect_rpc_error(world.stop_node("p", kStandaloneZone, "n", kT), 400, "FAILED_PRECONDITION"); // CREATING.
  world.tick(kT + 10'000);
  expect_rpc_error(world.start_node("p", kStandaloneZone, "n", kT + 10'000), 400, "FAILED_PRECONDITION"); // READY.

  auto stop = world.stop_node("p", kStandaloneZone, "n", kT + 10'000);
  ASSERT_TRUE(stop.ok()) << stop.body.dump();
  EXPECT_EQ(stop.body["metadata"]["verb"], "stop");
  EXPECT_EQ(listener.events.back(), "lost " + kNodes + "n");
  EXPECT_EQ(standalone_state(world, "n", kT + 10'000), "STOPPING");
  EXPECT_FALSE(world.get_node("p", kStandaloneZone, "n", kT + 10'000).body.contains("health"));
  EXPECT_EQ(standalone_state(world, "n", kT + 12'000), "STOPPED");
  EXPECT_EQ(operation(world, stop.body["name"], kT + 12'000)["response"]["state"], "STOPPED");
  EXPECT_EQ(chips_in_use(world, "on_demand", kT + 12'000), 0);
  expect_rpc_error(world.stop_node("p", kStandaloneZone, "n", kT + 12'000), 400, "FAILED_PRECONDITION");

  auto start = world.start_node("p", kStandaloneZone, "n", kT + 13'000);
  ASSERT_TRUE(start.ok()) << start.body.dump();
  EXPECT_EQ(standalone_state(world, "n", kT + 13'000), "STARTING");
  EXPECT_EQ(chips_in_use(world, "on_demand", kT + 13'000), 4);
  EXPECT_EQ(standalone_state(world, "n", kT + 23'000), "READY");
  EXPECT_EQ(operation(world, start.body["name"], kT + 23'000)["response"]["state"], "READY");
  ASSERT_EQ(listener.incarnations.size(), 2U);
  EXPECT_NE(listener.incarnations[0], listener.incarnations[1]); // Fresh hosts, not the stopped ones.
  EXPECT_EQ(world.get_node("p", kStandaloneZone, "n", kT + 23'000).body["id"], listener.incarnations[0]);
}

TEST(MockStandaloneNode, AStartWithoutCapacityFailsAndTheNodeStaysStopped) {
  World world(standalone_config(), 1, 7);
  ASSERT_TRUE(create_node(world, "n", node_body("v4-8", ""), kT).ok());
  world.tick(kT + 10'000);
  ASSERT_TRUE(world.stop_node("p", kStandaloneZone, "n", kT + 10'000).ok());
  world.tick(kT + 12'000);
  ASSERT_TRUE(world.set_capacity(kStandaloneZone, "v4", jobman::mock::Tier::on_demand, 0, 32, kT + 12'000).ok());
  auto start = world.start_node("p", kStandaloneZone, "n", kT + 13'000);
  ASSERT_TRUE(start.ok());
  EXPECT_TRUE(start.body["done"].get<bool>());
  EXPECT_EQ(start.body["error"]["code"], 8);
  EXPECT_EQ(standalone_state(world, "n", kT + 30'000), "STOPPED");
}

TEST(MockStandaloneNode, NodesOfQueuedResourcesCannotBeStoppedOrStarted) {
  World world(standalone_config(), 1, 7);
  json qr = {{"tpu",
              {{"nodeSpec",
                {{{"nodeId", "q-node"},
                  {"node", {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
             {"spot", json::object()}};
  ASSERT_TRUE(world.create_queued_resource("p", kStandaloneZone, "q", "", qr, kT).ok());
  world.tick(kT + 20'000);
  ASSERT_EQ(standalone_state(world, "q-node", kT + 20'000), "READY");
  expect_rpc_error(world.stop_node("p", kStandaloneZone, "q-node", kT + 20'000), 400, "FAILED_PRECONDITION");
  expect_rpc_error(world.start_node("p", kStandaloneZone, "q-node", kT + 20'000), 400, "FAILED_PRECONDITION");
  expect_rpc_error(world.stop_node("p", kStandaloneZone, "none", kT + 20'000), 404, "NOT_FOUND");
  expect_rpc_error(world.start_node("p", kStandaloneZone, "none", kT + 20'000), 404, "NOT_FOUND");
}

TEST(MockStandaloneNode, ARestartedWorldKeepsStandaloneNodesAndTheirChips) {
  jobman::test::TempDir dir;
  const auto db = dir / "state.db";
  World uninterrupted(standalone_config(600, 900), 1, 11);
  auto script = [](World& world) {
    ASSERT_TRUE(create_node(world, "a", node_body("v4-32"), kT).ok());
    ASSERT_TRUE(create_node(world, "b", node_body("v4-8", ""), kT).ok());
    ASSERT_TRUE(create_node(world, "c", node_body("v4-8", "preemptible"), kT).ok());
    world.tick(kT + 10'000);
    ASSERT_TRUE(world.stop_node("p", kStandaloneZone, "b", kT + 11'000).ok());
    world.tick(kT + 20'000);
  };
  script(uninterrupted);
  {
    World before(standalone_config(600, 900), 1, 11);
    before.attach_store(db, kT);
    script(before);
  }
  World restarted(standalone_config(600, 900), 1, 99);
  restarted.attach_store(db, kT + 20'000);
  EXPECT_EQ(restarted.snapshot(), uninterrupted.snapshot());
  EXPECT_EQ(chips_in_use(restarted, "spot", kT + 20'000), chips_in_use(uninterrupted, "spot", kT + 20'000));
  EXPECT_EQ(standalone_state(restarted, "b", kT + 20'000), "STOPPED");
  // The same draws: preemptions and maintenance come at the same times.
  const std::int64_t later = kT + 6 * 3'600'000LL;
  EXPECT_EQ(restarted.list_nodes("p", kStandaloneZone, 0, "", later).body,
            uninterrupted.list_nodes("p", kStandaloneZone, 0, "", later).body);
}

} // namespace world_standalone_test
