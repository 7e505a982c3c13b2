// The TPU API's JSON as typed structs: field names and enum strings from the discovery document.
#include "jobman/cloud/tpu_client.hpp"
#include "jobman/util/system.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace jobman::cloud {
namespace cloud_tpu_types_test {

using nlohmann::json;

json discovery() {
  // The project's copy (the client-library tests serve it too), so that a clone on its own runs this test.
  std::ifstream in(std::string(JOBMAN_SOURCE_DIR) + "/tests/clients/tpu-v2-discovery.json");
  EXPECT_TRUE(in) << "cannot read the discovery document";
  return json::parse(in);
}

template <typename Enum> void expect_same_enum(const json& expected, int count, const std::string& what) {
  ASSERT_EQ(static_cast<int>(expected.size()), count) << what;
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(to_string(static_cast<Enum>(i)), expected[static_cast<std::size_t>(i)].get<std::string>()) << what;
  }
}

TEST(CloudTpuTypes, EnumStringsAreTheDiscoveryDocuments) {
  const auto schemas = discovery()["schemas"];
  expect_same_enum<QueuedResourceState>(schemas["QueuedResourceState"]["properties"]["state"]["enum"], 10,
                                        "QueuedResourceState.state");
  expect_same_enum<StateInitiator>(schemas["QueuedResourceState"]["properties"]["stateInitiator"]["enum"], 3,
                                   "QueuedResourceState.stateInitiator");
  expect_same_enum<NodeState>(schemas["Node"]["properties"]["state"]["enum"], 16, "Node.state");
  expect_same_enum<NodeHealth>(schemas["Node"]["properties"]["health"]["enum"], 5, "Node.health");
}

TEST(CloudTpuTypes, ParsesAQueuedResourceWithItsStateFailureAndNodeSpec) {
  const auto qr = parse_queued_resource(json::parse(R"({
    "name": "projects/p/locations/us-central2-b/queuedResources/run-1",
    "createTime": "2026-01-02T03:04:05Z",
    "spot": {},
    "tpu": {"nodeSpec": [{"parent": "projects/p/locations/us-central2-b", "nodeId": "run-1-node",
                          "node": {"acceleratorType": "v4-32", "labels": {"jobman-owner": "alice", "n": 1}}}]},
    "state": {"state": "FAILED", "stateInitiator": "SERVICE",
              "failedData": {"error": {"code": 8, "message": "validUntilDuration passed"}}}
  })"));
  EXPECT_EQ(qr.name, "projects/p/locations/us-central2-b/queuedResources/run-1");
  EXPECT_EQ(qr.create_time, "2026-01-02T03:04:05Z");
  EXPECT_TRUE(qr.spot);
  EXPECT_EQ(qr.state, QueuedResourceState::failed);
  EXPECT_EQ(qr.state_initiator, StateInitiator::service);
  ASSERT_TRUE(qr.failed_error);
  EXPECT_EQ(qr.failed_error->code, 8);
  EXPECT_EQ(qr.failed_error->message, "validUntilDuration passed");
  EXPECT_EQ(qr.node_ids, std::vector<std::string>{"run-1-node"});
  EXPECT_EQ(qr.node_labels, (std::map<std::string, std::string>{{"jobman-owner", "alice"}})) << "strings only";
  EXPECT_EQ(qr.raw["tpu"]["nodeSpec"][0]["node"]["acceleratorType"], "v4-32");

  const auto waiting = parse_queued_resource(json::parse(R"({"name":"x","state":{"state":"WAITING_FOR_RESOURCES"}})"));
  EXPECT_EQ(waiting.state, QueuedResourceState::waiting_for_resources);
  EXPECT_FALSE(waiting.failed_error);
  EXPECT_FALSE(waiting.spot);
  EXPECT_EQ(parse_queued_resource(json::parse(R"({"state":{"state":"SOMETHING_NEW"}})")).state,
            QueuedResourceState::state_unspecified);
}

TEST(CloudTpuTypes, ParsesTheMaintenanceANodeAnnounces) {
  const auto node = parse_node(json::parse(R"({
    "name": "projects/p/locations/z/nodes/n", "state": "READY", "health": "HEALTHY",
    "upcomingMaintenance": {"type": "SCHEDULED", "canReschedule": true, "maintenanceStatus": "PENDING",
                            "windowStartTime": "2026-01-02T03:04:05Z", "windowEndTime": "2026-01-02T04:04:05Z",
                            "latestWindowStartTime": "2026-01-02T03:30:00Z"}
  })"));
  ASSERT_TRUE(node.upcoming_maintenance);
  const auto& m = *node.upcoming_maintenance;
  EXPECT_EQ(m.type, "SCHEDULED");
  EXPECT_TRUE(m.can_reschedule);
  EXPECT_EQ(m.status, "PENDING");
  EXPECT_EQ(m.window_start_ms, util::parse_utc("2026-01-02T03:04:05Z"));
  EXPECT_EQ(*m.window_end_ms - *m.window_start_ms, 3'600'000);
  EXPECT_EQ(m.latest_window_start_ms, util::parse_utc("2026-01-02T03:30:00Z"));
  EXPECT_FALSE(parse_node(json::parse(R"({"name": "n", "state": "READY"})")).upcoming_maintenance);
  const auto odd = parse_node(json::parse(R"({"upcomingMaintenance": {"windowStartTime": "soon"}})"));
  ASSERT_TRUE(odd.upcoming_maintenance);
  EXPECT_FALSE(odd.upcoming_maintenance->window_start_ms) << "a time that does not parse is no time";
}

TEST(CloudTpuTypes, ParsesANodeWithEndpointsAndLabels) {
  const auto node = parse_node(json::parse(R"({
    "name": "projects/p/locations/z/nodes/n", "state": "PREEMPTED", "health": "UNHEALTHY_MAINTENANCE",
    "acceleratorType": "v4-16", "createTime": "2026-01-02T03:04:05.123Z",
    "queuedResource": "projects/p/locations/z/queuedResources/q",
    "networkEndpoints": [{"ipAddress": "10.1.0.2", "port": 8470, "accessConfig": {"externalIp": "34.1.2.3"}},
                         {"ipAddress": "10.1.0.3"}],
    "labels": {"jobman-job": "000042", "team": "ml"}
  })"));
  EXPECT_EQ(node.state, NodeState::preempted);
  EXPECT_EQ(node.health, NodeHealth::unhealthy_maintenance);
  EXPECT_EQ(node.accelerator_type, "v4-16");
  EXPECT_EQ(node.create_time, "2026-01-02T03:04:05.123Z");
  EXPECT_EQ(node.queued_resource, "projects/p/locations/z/queuedResources/q");
  ASSERT_EQ(node.network_endpoints.size(), 2U);
  EXPECT_EQ(node.network_endpoints[0].ip_address, "10.1.0.2");
  EXPECT_EQ(node.network_endpoints[0].external_ip, "34.1.2.3");
  EXPECT_EQ(node.network_endpoints[1].external_ip, "");
  EXPECT_EQ(node.labels.at("jobman-job"), "000042");
  EXPECT_EQ(node.labels.size(), 2U);
}

TEST(CloudTpuTypes, ParsesOperationsDoneWithAResponseOrAnError) {
  const auto ok = parse_operation(json::parse(
      R"({"name":"projects/p/locations/z/operations/o1","done":true,"metadata":{"verb":"create"},
          "response":{"@type":"type.googleapis.com/google.cloud.tpu.v2.QueuedResource","name":"q"}})"));
  EXPECT_TRUE(ok.done);
  EXPECT_FALSE(ok.error);
  EXPECT_EQ(ok.response["name"], "q");
  EXPECT_EQ(ok.metadata["verb"], "create");
  const auto failed = parse_operation(json::parse(R"({"name":"o2","done":true,"error":{"code":10,"message":"gone"}})"));
  ASSERT_TRUE(failed.error);
  EXPECT_EQ(failed.error->code, 10);
  EXPECT_EQ(failed.error->message, "gone");
  EXPECT_FALSE(parse_operation(json::parse(R"({"name":"o3"})")).done);
}

TEST(CloudTpuEndpoint, DefaultsToGoogleAndAddsTheApiVersionToAnOverride) {
  ::unsetenv("JOBMAN_API_ENDPOINT");
  EXPECT_EQ(resolve_tpu_endpoint(""), "https://tpu.googleapis.com/v2/");
  EXPECT_EQ(resolve_tpu_endpoint("http://127.0.0.1:8471"), "http://127.0.0.1:8471/v2/");
  EXPECT_EQ(resolve_tpu_endpoint("https://tpu.example.com/v2/"), "https://tpu.example.com/v2/");
  ::setenv("JOBMAN_API_ENDPOINT", "http://localhost:1/", 1);
  EXPECT_EQ(resolve_tpu_endpoint("http://127.0.0.1:8471"), "http://localhost:1/v2/");
  ::unsetenv("JOBMAN_API_ENDPOINT");
}

// Cloud Storage beside a TPU API on this machine's loopback is that server's: nothing goes to Google for a mock.
TEST(CloudTpuEndpoint, CloudStorageIsGooglesUnlessTheTpuApiIsOnLoopback) {
  EXPECT_EQ(resolve_storage_endpoint("https://tpu.googleapis.com/v2/"), kDefaultStorageEndpoint);
  EXPECT_EQ(resolve_storage_endpoint("https://tpu.example.com/v2/"), kDefaultStorageEndpoint);
  EXPECT_EQ(resolve_storage_endpoint("http://127.0.0.1:8471/v2/"), "http://127.0.0.1:8471/storage/v1/");
  EXPECT_EQ(resolve_storage_endpoint("http://localhost:1/v2/"), "http://localhost:1/storage/v1/");
  EXPECT_EQ(resolve_storage_endpoint("http://127.0.0.1:8471"), "http://127.0.0.1:8471/storage/v1/");
  EXPECT_EQ(resolve_storage_endpoint("http://[::1]:80/v2/"), "http://[::1]:80/storage/v1/");
  EXPECT_EQ(resolve_storage_endpoint("http://127.evil.example/v2/"), kDefaultStorageEndpoint);
  EXPECT_EQ(resolve_storage_endpoint("http://localhost.example/v2/"), kDefaultStorageEndpoint);
}

} // namespace cloud_tpu_types_test
} // namespace jobman::cloud
