// nodes.patch, nodes.getGuestAttributes, operations.cancel and operations.delete in the mock's world, on a fake clock.
#include "mock_cloud/world.hpp"
#include "standalone_world.hpp"

#include <gtest/gtest.h>
#include <set>

namespace world_node_requests_test {

using jobman::mock::World;
using jobman::test::chips_in_use;
using jobman::test::create_node;
using jobman::test::expect_rpc_error;
using jobman::test::kStandaloneStart;
using jobman::test::kStandaloneZone;
using jobman::test::node_body;
using jobman::test::operation;
using jobman::test::standalone_config;
using jobman::test::standalone_state;
using nlohmann::json;

constexpr std::int64_t kT = kStandaloneStart;
constexpr std::int64_t kReady = kT + 10'000;

// The last path segment of an operation's name.
std::string op_id(const json& op) {
  const auto name = op["name"].get<std::string>();
  return name.substr(name.rfind('/') + 1);
}

// A world with READY node "n" (v4-32, four workers, spot).
class MockNodeRequests : public ::testing::Test {
protected:
  World world{standalone_config(), 1, 7};
  void SetUp() override {
    ASSERT_TRUE(create_node(world, "n", node_body("v4-32"), kT).ok());
    ASSERT_EQ(standalone_state(world, "n", kReady), "READY");
  }
  jobman::mock::Reply patch(const std::string& mask, const json& body, std::int64_t now = kReady) {
    return world.patch_node("p", kStandaloneZone, "n", mask, body, now);
  }
  jobman::mock::Reply attributes(const json& body, std::int64_t now = kReady) {
    return world.get_guest_attributes("p", kStandaloneZone, "n", body, now);
  }
};

TEST_F(MockNodeRequests, PatchSetsAndClearsTheMaskedFieldsOnly) {
  auto op = patch("labels,description,tags,network_config.enable_external_ips",
                  {{"labels", {{"team", "infra"}}},
                   {"tags", {"a", "b"}},
                   {"networkConfig", {{"enableExternalIps", false}}},
                   {"metadata", {{"ignored", "not in the mask"}}}});
  ASSERT_TRUE(op.ok()) << op.body.dump();
  EXPECT_TRUE(op.body["done"].get<bool>());
  EXPECT_EQ(op.body["metadata"]["verb"], "update");
  EXPECT_EQ(op.body["response"]["@type"], "type.googleapis.com/google.cloud.tpu.v2.Node");
  auto node = world.get_node("p", kStandaloneZone, "n", kReady).body;
  EXPECT_EQ(op.body["response"]["labels"], node["labels"]);
  EXPECT_EQ(node["labels"], json({{"team", "infra"}}));
  EXPECT_EQ(node["tags"], json({"a", "b"}));
  EXPECT_FALSE(node.contains("description"));
  EXPECT_EQ(node["metadata"], json({{"startup-script", "echo hi"}})); // Not in the mask: unchanged.
  EXPECT_EQ(node["networkConfig"]["enableExternalIps"], false);
  for (const auto& endpoint : node["networkEndpoints"]) {
    EXPECT_FALSE(endpoint.contains("accessConfig")) << endpoint; // No external IPs any more.
  }
  ASSERT_TRUE(patch("metadata,description", {{"description", "trial"}}).ok());
  node = world.get_node("p", kStandaloneZone, "n", kReady).body;
  EXPECT_FALSE(node.contains("metadata")); // In the mask, absent from the body: cleared.
  EXPECT_EQ(node["description"], "trial");
  ASSERT_TRUE(patch("networkConfig.enableExternalIps", {{"networkConfig", {{"enableExternalIps", true}}}}).ok());
  node = world.get_node("p", kStandaloneZone, "n", kReady).body;
  EXPECT_TRUE(node["networkEndpoints"][0].contains("accessConfig"));
}

TEST_F(MockNodeRequests, PatchRefusesBadMasksAndValues) {
  for (const auto* mask : {"", "state", "labels,name", "acceleratorType", "runtime_version", "labels.team"}) {
    expect_rpc_error(patch(mask, {{"labels", {{"a", "b"}}}}), 400, "INVALID_ARGUMENT");
  }
  expect_rpc_error(patch("labels", {{"labels", {{"a", 1}}}}), 400, "INVALID_ARGUMENT");
  expect_rpc_error(patch("tags", {{"tags", "a"}}), 400, "INVALID_ARGUMENT");
  expect_rpc_error(patch("description", {{"description", std::string(513, 'x')}}), 400, "INVALID_ARGUMENT");
  expect_rpc_error(patch("labels", json::array()), 400, "INVALID_ARGUMENT");
  expect_rpc_error(world.patch_node("p", kStandaloneZone, "none", "labels", json::object(), kReady), 404, "NOT_FOUND");
  ASSERT_TRUE(world.delete_node("p", kStandaloneZone, "n", kReady).ok());
  expect_rpc_error(patch("labels", json::object()), 400, "FAILED_PRECONDITION");
  EXPECT_EQ(world.get_node("p", kStandaloneZone, "n", kReady).body["labels"], json({{"team", "ml"}}));
}

TEST_F(MockNodeRequests, GuestAttributesHoldEachWorkersHostKeys) {
  auto all = attributes(json::object());
  ASSERT_TRUE(all.ok()) << all.body.dump();
  ASSERT_EQ(all.body["guestAttributes"].size(), 4U);
  std::set<std::string> keys;
  for (const auto& worker : all.body["guestAttributes"]) {
    EXPECT_EQ(worker["queryPath"], "");
    // Both host keys, then the physical host.
    ASSERT_EQ(worker["queryValue"]["items"].size(), 3U) << worker;
    for (const auto& item : worker["queryValue"]["items"]) {
      if (item["namespace"] == "host") {
        continue;
      }
      EXPECT_EQ(item["namespace"], "hostkeys");
      const auto value = item["value"].get<std::string>();
      EXPECT_EQ(value.rfind(item["key"].get<std::string>() + " AAAA", 0), 0U) << value;
      keys.insert(value);
    }
  }
  EXPECT_EQ(keys.size(), 8U);                                           // Every host has keys of its own.
  EXPECT_EQ(attributes(json::object(), kReady + 5'000).body, all.body); // Generated once per host.
  EXPECT_EQ(attributes(nullptr).body, all.body);                        // An empty body asks for everything.

  auto one = attributes({{"queryPath", "hostkeys/ssh-ed25519"}, {"workerIds", {"2"}}});
  ASSERT_TRUE(one.ok()) << one.body.dump();
  ASSERT_EQ(one.body["guestAttributes"].size(), 1U);
  EXPECT_EQ(one.body["guestAttributes"][0]["queryPath"], "hostkeys/ssh-ed25519");
  const auto& items = one.body["guestAttributes"][0]["queryValue"]["items"];
  ASSERT_EQ(items.size(), 1U);
  EXPECT_EQ(items[0], all.body["guestAttributes"][2]["queryValue"]["items"][1]);
  auto ns = attributes({{"queryPath", "hostkeys/"}, {"workerIds", {"0", "3"}}});
  ASSERT_EQ(ns.body["guestAttributes"][1]["queryValue"]["items"].size(), 2U);
  EXPECT_EQ(ns.body["guestAttributes"][1]["queryValue"]["items"][1],
            all.body["guestAttributes"][3]["queryValue"]["items"][1]);
  auto other = attributes({{"queryPath", "guest-agent/"}});
  EXPECT_EQ(other.body["guestAttributes"][0]["queryValue"], json::object());

  for (const json& bad : {json{{"workerIds", {"4"}}}, json{{"workerIds", {"x"}}}, json{{"workerIds", {0}}},
                          json{{"queryPath", 3}}, json{{"workerIds", "0"}}, json::array()}) {
    expect_rpc_error(attributes(bad), 400, "INVALID_ARGUMENT");
  }
  expect_rpc_error(world.get_guest_attributes("p", kStandaloneZone, "none", json::object(), kReady), 404, "NOT_FOUND");
}

TEST_F(MockNodeRequests, GuestAttributesComeFromTheHostsOfTheCurrentStart) {
  const auto before = attributes(json::object()).body;
  ASSERT_TRUE(world.stop_node("p", kStandaloneZone, "n", kReady).ok());
  expect_rpc_error(attributes(json::object()), 400, "FAILED_PRECONDITION");
  world.tick(kReady + 2'000);
  ASSERT_TRUE(world.start_node("p", kStandaloneZone, "n", kReady + 2'000).ok());
  const auto after = attributes(json::object(), kReady + 12'000);
  ASSERT_TRUE(after.ok()) << after.body.dump();
  EXPECT_NE(after.body, before);
}

TEST_F(MockNodeRequests, CancellingACreateRemovesTheNodeAndFreesItsChips) {
  auto op = create_node(world, "c", node_body("v4-8"), kReady);
  ASSERT_EQ(chips_in_use(world, "spot", kReady), 20);
  auto cancelled = world.cancel_operation("p", kStandaloneZone, op_id(op.body), kReady + 1);
  ASSERT_TRUE(cancelled.ok()) << cancelled.body.dump();
  EXPECT_EQ(cancelled.body, json::object());
  auto ended = operation(world, op.body["name"], kReady + 1);
  EXPECT_TRUE(ended["done"].get<bool>());
  EXPECT_EQ(ended["error"]["code"], 1);
  EXPECT_TRUE(ended["metadata"]["cancelRequested"].get<bool>());
  EXPECT_EQ(standalone_state(world, "c", kReady + 1), "GONE");
  EXPECT_EQ(chips_in_use(world, "spot", kReady + 1), 16);
  expect_rpc_error(world.cancel_operation("p", kStandaloneZone, op_id(op.body), kReady + 2), 400,
                   "FAILED_PRECONDITION");
  expect_rpc_error(world.cancel_operation("p", kStandaloneZone, "operation-none", kReady), 404, "NOT_FOUND");
}

TEST_F(MockNodeRequests, CancellingAQueuedResourceCreateRemovesIt) {
  json qr = {{"tpu",
              {{"nodeSpec",
                {{{"nodeId", "q-node"},
                  {"node", {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
             {"spot", json::object()}};
  auto op = world.create_queued_resource("p", kStandaloneZone, "q", "", qr, kReady);
  ASSERT_TRUE(world.cancel_operation("p", kStandaloneZone, op_id(op.body), kReady + 10).ok());
  EXPECT_EQ(operation(world, op.body["name"], kReady + 10)["error"]["code"], 1);
  EXPECT_EQ(world.get_queued_resource("p", kStandaloneZone, "q", kReady + 10).status, 404);
  EXPECT_EQ(standalone_state(world, "q-node", kReady + 20'000), "GONE");
}

TEST_F(MockNodeRequests, CancellingAStartLeavesTheNodeStopped) {
  ASSERT_TRUE(world.stop_node("p", kStandaloneZone, "n", kReady).ok());
  world.tick(kReady + 2'000);
  auto start = world.start_node("p", kStandaloneZone, "n", kReady + 2'000);
  ASSERT_TRUE(world.cancel_operation("p", kStandaloneZone, op_id(start.body), kReady + 3'000).ok());
  EXPECT_EQ(operation(world, start.body["name"], kReady + 3'000)["error"]["code"], 1);
  EXPECT_EQ(standalone_state(world, "n", kReady + 30'000), "STOPPED");
  EXPECT_EQ(chips_in_use(world, "spot", kReady + 30'000), 0);
}

TEST_F(MockNodeRequests, CancellingADeleteOnlyRecordsTheRequest) {
  auto del = world.delete_node("p", kStandaloneZone, "n", kReady);
  ASSERT_TRUE(world.cancel_operation("p", kStandaloneZone, op_id(del.body), kReady + 1).ok());
  auto running = operation(world, del.body["name"], kReady + 1);
  EXPECT_FALSE(running["done"].get<bool>());
  EXPECT_TRUE(running["metadata"]["cancelRequested"].get<bool>());
  EXPECT_EQ(standalone_state(world, "n", kReady + 3'000), "GONE");
  auto ended = operation(world, del.body["name"], kReady + 3'000);
  EXPECT_TRUE(ended["done"].get<bool>());
  EXPECT_FALSE(ended.contains("error"));
}

TEST_F(MockNodeRequests, DeletedOperationsAreGoneButTheirWorkGoesOn) {
  auto del = world.delete_node("p", kStandaloneZone, "n", kReady);
  auto deleted = world.delete_operation("p", kStandaloneZone, op_id(del.body), kReady + 1);
  ASSERT_TRUE(deleted.ok()) << deleted.body.dump();
  EXPECT_EQ(deleted.body, json::object());
  expect_rpc_error(world.get_operation("p", kStandaloneZone, op_id(del.body), kReady + 1), 404, "NOT_FOUND");
  expect_rpc_error(world.delete_operation("p", kStandaloneZone, op_id(del.body), kReady + 1), 404, "NOT_FOUND");
  // A repeated delete while the node is still DELETING gets an operation of its own.
  auto again = world.delete_node("p", kStandaloneZone, "n", kReady + 2);
  ASSERT_TRUE(again.ok()) << again.body.dump();
  EXPECT_NE(again.body["name"], del.body["name"]);
  EXPECT_EQ(standalone_state(world, "n", kReady + 3'000), "GONE");
  EXPECT_TRUE(operation(world, again.body["name"], kReady + 3'000)["done"].get<bool>());
  const auto listed = world.list_operations("p", kStandaloneZone, 0, "", kReady + 3'000).body["operations"];
  for (const auto& op : listed) {
    EXPECT_NE(op["name"], del.body["name"]);
  }
}

} // namespace world_node_requests_test
