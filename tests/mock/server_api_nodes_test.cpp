// The TPU v2 methods beyond queued resources, through a jobman-mock-cloud child process: the catalog, standalone
// nodes with their worker hosts, stop and start, patch, guest attributes, and cancelling and deleting operations.
#include "support/mock_cloud.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace server_api_nodes_test {

using jobman::test::eventually;
using nlohmann::json;
using Answer = jobman::test::HttpAnswer;

const std::string kLoc = "projects/p/locations/us-central2-b";
const std::string kBase = "/v2/" + kLoc;
const httplib::Headers kAuth = {{"Authorization", "Bearer test-token"}};

// Every delay one simulated second (1 ms at --time-scale 1000); v4 in us-central2-b, v5litepod in europe-west4-a.
const std::string kWorld = jobman::test::test_world(1, R"(  us-central2-b:
    v4:
      spot: {chips: 64, quota: 128}
      on_demand: {chips: 32, quota: 32}
  europe-west4-a:
    v5litepod:
      spot: {chips: 16}
)");

// Every delay 2500 simulated seconds (2.5 s): long enough to act on an operation while it runs.
const std::string kSlowWorld = jobman::test::test_world(2500, R"(  us-central2-b:
    v4:
      spot: {chips: 64, quota: 128}
)");

class MockServerNodesTest : public ::testing::Test {
protected:
  jobman::test::TempDir dir;
  std::unique_ptr<jobman::test::MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;

  void start(const std::string& world) {
    server = jobman::test::start_test_mock(dir, world, 3);
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
  }
  void SetUp() override { start(kWorld); }

  Answer api(const std::string& method, const std::string& path, const json& body = nullptr) {
    return jobman::test::http_call(*client, method, path, body, kAuth);
  }
  // The admin API's view of worker `w` of node `id`: 200 while its host is up.
  int worker_status(const std::string& id, int w) {
    return jobman::test::http_call(*client, "GET",
                                   "/mock/v1/" + kLoc + "/nodes/" + id + "/workers/" + std::to_string(w), nullptr,
                                   server->admin_headers())
        .status;
  }
  std::string node_state(const std::string& id) {
    auto answer = api("GET", kBase + "/nodes/" + id);
    return answer.status == 200 ? answer.body["state"].get<std::string>() : std::to_string(answer.status);
  }
  json operation(const json& op) {
    const auto name = op["name"].get<std::string>();
    return api("GET", kBase + "/operations/" + name.substr(name.rfind('/') + 1)).body;
  }
  bool op_done(const json& op) {
    return eventually([&] { return operation(op).value("done", false); });
  }
};

void expect_error(const Answer& answer, int code, const std::string& status) {
  EXPECT_EQ(answer.status, code) << answer.text;
  EXPECT_EQ(answer.body["error"]["code"], code) << answer.text;
  EXPECT_EQ(answer.body["error"]["status"], status) << answer.text;
}

TEST_F(MockServerNodesTest, AQueryParameterTheMethodDoesNotBindIsRefusedAndNothingIsCreated) {
  const json body = {{"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}};
  const auto refused = api("POST", kBase + "/nodes?nodeId=strict&requestId=r-1", body);
  expect_error(refused, 400, "INVALID_ARGUMENT");
  EXPECT_NE(refused.body["error"]["message"].get<std::string>().find("\"requestId\""), std::string::npos)
      << refused.text;
  EXPECT_EQ(node_state("strict"), "404");
  expect_error(api("DELETE", kBase + "/nodes/strict?requestId=r-2"), 400, "INVALID_ARGUMENT");
  EXPECT_EQ(api("POST", kBase + "/nodes?nodeId=strict&prettyPrint=false", body).status, 200);
}

TEST_F(MockServerNodesTest, CatalogMethodsAnswerWithTheDocumentedShapes) {
  auto locations = api("GET", "/v2/projects/p/locations?pageSize=1");
  ASSERT_EQ(locations.status, 200) << locations.text;
  ASSERT_EQ(locations.body["locations"].size(), 1U);
  EXPECT_EQ(locations.body["locations"][0]["locationId"], "europe-west4-a");
  auto rest = api("GET", "/v2/projects/p/locations?pageToken=" + locations.body["nextPageToken"].get<std::string>());
  EXPECT_EQ(rest.body["locations"][0]["name"], kLoc);
  auto location = api("GET", kBase);
  ASSERT_EQ(location.status, 200) << location.text;
  EXPECT_EQ(location.body["locationId"], "us-central2-b");
  expect_error(api("GET", "/v2/projects/p/locations/nowhere-9-z"), 404, "NOT_FOUND");

  auto types = api("GET", kBase + "/acceleratorTypes?filter=type%3Dv4-32&fields=acceleratorTypes(type)");
  ASSERT_EQ(types.status, 200) << types.text;
  EXPECT_EQ(types.body, json({{"acceleratorTypes", {{{"type", "v4-32"}}}}}));
  auto type = api("GET", kBase + "/acceleratorTypes/v4-8");
  ASSERT_EQ(type.status, 200) << type.text;
  EXPECT_EQ(type.body["acceleratorConfigs"][0], json({{"type", "V4"}, {"topology", "2x2x1"}}));
  expect_error(api("GET", kBase + "/acceleratorTypes?filter=type%3Dv4-8%20OR%20type%3Dv4-32"), 400, "INVALID_ARGUMENT");
  expect_error(api("GET", kBase + "/acceleratorTypes?orderBy=chips"), 400, "INVALID_ARGUMENT");
  expect_error(api("GET", kBase + "/acceleratorTypes?pageSize=-1"), 400, "INVALID_ARGUMENT");
  expect_error(api("GET", kBase + "/acceleratorTypes/v5litepod-4"), 404, "NOT_FOUND");

  auto versions = api("GET", kBase + "/runtimeVersions?orderBy=version%20desc");
  ASSERT_EQ(versions.status, 200) << versions.text;
  EXPECT_EQ(versions.body["runtimeVersions"][0]["version"], "tpu-vm-base");
  auto version = api("GET", "/v2/projects/p/locations/europe-west4-a/runtimeVersions/v2-alpha-tpuv5-lite");
  ASSERT_EQ(version.status, 200) << version.text;
  EXPECT_EQ(version.body["name"], "projects/p/locations/europe-west4-a/runtimeVersions/v2-alpha-tpuv5-lite");

  auto identity = api("POST", kBase + ":generateServiceIdentity", json::object());
  ASSERT_EQ(identity.status, 200) << identity.text;
  EXPECT_EQ(api("POST", kBase + ":generateServiceIdentity", json::object()).body, identity.body);
  EXPECT_NE(identity.body["identity"]["email"].get<std::string>().find("@cloud-tpu.iam.gserviceaccount.com"),
            std::string::npos);

  auto unauthenticated = jobman::test::http_call(*client, "GET", kBase + "/acceleratorTypes", nullptr, {});
  EXPECT_EQ(unauthenticated.status, 401);
  const auto metrics =
      jobman::test::http_call(*client, "GET", "/mock/v1/metrics", nullptr, server->admin_headers()).body;
  EXPECT_EQ(metrics["requests"]["acceleratorTypes.list"]["200"], 1);
  EXPECT_EQ(metrics["requests"]["locations.generateServiceIdentity"]["200"], 2);
}

TEST_F(MockServerNodesTest, AStandaloneNodeLivesThroughStopStartPatchAndDelete) {
  json body = {{"acceleratorType", "v4-16"},
               {"runtimeVersion", "tpu-ubuntu2204-base"},
               {"schedulingConfig", {{"spot", true}}},
               {"labels", {{"team", "ml"}}}};
  auto created = api("POST", kBase + "/nodes?nodeId=solo", body);
  ASSERT_EQ(created.status, 200) << created.text;
  EXPECT_EQ(created.body["metadata"]["target"], kLoc + "/nodes/solo");
  ASSERT_TRUE(op_done(created.body));
  EXPECT_EQ(operation(created.body)["response"]["state"], "READY");
  EXPECT_EQ(node_state("solo"), "READY");
  EXPECT_EQ(worker_status("solo", 1), 200); // Two hosts, up.
  expect_error(api("POST", kBase + "/nodes?nodeId=solo", body), 409, "ALREADY_EXISTS");
  expect_error(api("POST", kBase + "/nodes?nodeId=other", json{{"acceleratorType", "v4-16"}}), 400, "INVALID_ARGUMENT");

  auto attributes = api("POST", kBase + "/nodes/solo:getGuestAttributes", json{{"queryPath", "hostkeys/"}});
  ASSERT_EQ(attributes.status, 200) << attributes.text;
  EXPECT_EQ(attributes.body["guestAttributes"].size(), 2U);

  auto patched = api("PATCH", kBase + "/nodes/solo?updateMask=labels", json{{"labels", {{"team", "infra"}}}});
  ASSERT_EQ(patched.status, 200) << patched.text;
  EXPECT_EQ(operation(patched.body)["response"]["labels"], json({{"team", "infra"}}));
  expect_error(api("PATCH", kBase + "/nodes/solo?updateMask=state", json::object()), 400, "INVALID_ARGUMENT");

  auto stopped = api("POST", kBase + "/nodes/solo:stop", json::object());
  ASSERT_EQ(stopped.status, 200) << stopped.text;
  ASSERT_TRUE(op_done(stopped.body));
  EXPECT_EQ(node_state("solo"), "STOPPED");
  EXPECT_TRUE(eventually([&] { return worker_status("solo", 0) == 404; })); // Its hosts went with it.
  expect_error(api("POST", kBase + "/nodes/solo:stop", json::object()), 400, "FAILED_PRECONDITION");

  auto started = api("POST", kBase + "/nodes/solo:start", json::object());
  ASSERT_EQ(started.status, 200) << started.text;
  ASSERT_TRUE(op_done(started.body));
  EXPECT_EQ(node_state("solo"), "READY");
  EXPECT_EQ(worker_status("solo", 1), 200);

  auto preempted = jobman::test::http_call(*client, "POST", "/mock/v1/" + kLoc + "/nodes/solo:preempt", json::object(),
                                           server->admin_headers());
  ASSERT_EQ(preempted.status, 200) << preempted.text;
  EXPECT_EQ(node_state("solo"), "PREEMPTED");
  EXPECT_TRUE(eventually([&] { return worker_status("solo", 0) == 404; }));

  auto deleted = api("DELETE", kBase + "/nodes/solo");
  ASSERT_EQ(deleted.status, 200) << deleted.text;
  ASSERT_TRUE(op_done(deleted.body));
  EXPECT_EQ(node_state("solo"), "404");
}

TEST_F(MockServerNodesTest, ACreateWithoutCapacityEndsResourceExhausted) {
  json body = {
      {"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}, {"schedulingConfig", {{"spot", true}}}};
  ASSERT_EQ(api("POST", kBase + "/nodes?nodeId=held", body).status, 200);
  body["acceleratorType"] = "v4-128"; // 64 chips: within the quota of 128, but only 60 of the 64 are free.
  auto created = api("POST", kBase + "/nodes?nodeId=big", body);
  ASSERT_EQ(created.status, 200) << created.text;
  ASSERT_TRUE(op_done(created.body));
  auto ended = operation(created.body);
  EXPECT_EQ(ended["error"]["code"], 8);
  EXPECT_EQ(node_state("big"), "404");
  body["acceleratorType"] = "v4-512"; // 256 chips: past the quota.
  expect_error(api("POST", kBase + "/nodes?nodeId=huge", body), 429, "RESOURCE_EXHAUSTED");
}

TEST_F(MockServerNodesTest, AdminCallsSetHealthFaultAWorkersMachineAndChangeTheFaultyFraction) {
  json body = {
      {"acceleratorType", "v4-32"}, {"runtimeVersion", "tpu-ubuntu2204-base"}, {"schedulingConfig", {{"spot", true}}}};
  auto created = api("POST", kBase + "/nodes?nodeId=h", body);
  ASSERT_EQ(created.status, 200) << created.text;
  ASSERT_TRUE(op_done(created.body));
  const auto admin = [&](const std::string& method, const std::string& path, const json& request) {
    return jobman::test::http_call(*client, method, path, request, server->admin_headers());
  };
  const std::string node = "/mock/v1/" + kLoc + "/nodes/h";

  auto set = admin("POST", node + ":setHealth",
                   {{"health", "UNHEALTHY_MAINTENANCE"}, {"healthDescription", "Host maintenance in progress"}});
  ASSERT_EQ(set.status, 200) << set.text;
  EXPECT_EQ(set.body["health"], "UNHEALTHY_MAINTENANCE");
  auto got = api("GET", kBase + "/nodes/h");
  EXPECT_EQ(got.body["health"], "UNHEALTHY_MAINTENANCE");
  EXPECT_EQ(got.body["healthDescription"], "Host maintenance in progress");
  EXPECT_EQ(api("GET", kBase + "/nodes/h?$alt=json%3Benum-encoding=int").body["health"], 5);
  for (const json& bad : {json{{"health", "SICK"}}, json{{"healthDescription", "no health"}},
                          json{{"health", "TIMEOUT"}, {"healthDescription", 3}}, json{{"health", 1}}}) {
    expect_error(admin("POST", node + ":setHealth", bad), 400, "INVALID_ARGUMENT");
  }
  expect_error(admin("POST", "/mock/v1/" + kLoc + "/nodes/none:setHealth", {{"health", "TIMEOUT"}}), 404, "NOT_FOUND");

  for (const json& bad : {json{{"worker", 4}}, json{{"worker", -1}}, json{{"worker", "1"}}, json::array()}) {
    expect_error(admin("POST", node + ":markFaulty", bad), 400, "INVALID_ARGUMENT");
  }
  auto not_json = client->Post(node + ":markFaulty", server->admin_headers(), "{worker", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  auto marked = admin("POST", node + ":markFaulty", {{"worker", 3}});
  ASSERT_EQ(marked.status, 200) << marked.text;
  auto metrics = admin("GET", "/mock/v1/metrics", nullptr).body;
  ASSERT_EQ(metrics["faultyMachines"].size(), 1U) << metrics.dump();
  EXPECT_EQ(metrics["faultyMachines"][0]["worker"], 3);
  EXPECT_EQ(metrics["faultyNodes"], json::array({kLoc + "/nodes/h"}));
  auto guest = api("POST", kBase + "/nodes/h:getGuestAttributes",
                   json{{"queryPath", "host/physical_host"}, {"workerIds", {"3"}}});
  ASSERT_EQ(guest.status, 200) << guest.text;
  EXPECT_EQ(guest.body["guestAttributes"][0]["queryValue"]["items"][0]["value"],
            metrics["faultyMachines"][0]["physicalHost"]);
  EXPECT_EQ(api("GET", kBase + "/nodes/h").body["health"], "UNHEALTHY_MAINTENANCE") << "a fault leaves health be";

  for (const json& bad : {json{{"faulty_fraction", 2}}, json{{"faulty_fraction", "0.5"}}, json::object()}) {
    expect_error(admin("PUT", "/mock/v1/hardware", bad), 400, "INVALID_ARGUMENT");
  }
  auto fraction = admin("PUT", "/mock/v1/hardware", {{"faulty_fraction", 0.25}});
  ASSERT_EQ(fraction.status, 200) << fraction.text;
  EXPECT_EQ(fraction.body["faulty_fraction"], 0.25);
  EXPECT_EQ(admin("GET", "/mock/v1/metrics", nullptr).body["hardware"]["faulty_fraction"], 0.25);
}

class MockServerSlowNodesTest : public MockServerNodesTest {
protected:
  void SetUp() override { start(kSlowWorld); }
};

TEST_F(MockServerSlowNodesTest, OperationsCanBeCancelledAndDeleted) {
  json body = {
      {"acceleratorType", "v4-8"}, {"runtimeVersion", "tpu-ubuntu2204-base"}, {"schedulingConfig", {{"spot", true}}}};
  auto created = api("POST", kBase + "/nodes?nodeId=c", body);
  ASSERT_EQ(created.status, 200) << created.text;
  const auto name = created.body["name"].get<std::string>();
  const auto path = kBase + "/operations/" + name.substr(name.rfind('/') + 1);
  auto cancelled = api("POST", path + ":cancel", json::object());
  ASSERT_EQ(cancelled.status, 200) << cancelled.text;
  EXPECT_EQ(cancelled.body, json::object());
  auto ended = api("GET", path).body;
  EXPECT_TRUE(ended["done"].get<bool>());
  EXPECT_EQ(ended["error"]["code"], 1);
  EXPECT_EQ(node_state("c"), "404");
  expect_error(api("POST", path + ":cancel", json::object()), 400, "FAILED_PRECONDITION");

  auto deleted = api("DELETE", path);
  ASSERT_EQ(deleted.status, 200) << deleted.text;
  EXPECT_EQ(deleted.body, json::object());
  expect_error(api("GET", path), 404, "NOT_FOUND");
  expect_error(api("DELETE", path), 404, "NOT_FOUND");
  expect_error(api("POST", kBase + "/operations/operation-none:cancel", json::object()), 404, "NOT_FOUND");
  expect_error(api("GET", kBase + "/operations?filter=done%3Dtrue"), 400, "INVALID_ARGUMENT");
}

} // namespace server_api_nodes_test
