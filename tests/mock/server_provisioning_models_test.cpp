// The provisioning models through a jobman-mock-cloud child process: flex-start with its run duration, reservations
// and best-effort under v2alpha1, what v2 says of them, and the requests no model fits.
#include "jobman/util/system.hpp"
#include "support/mock_api_test.hpp"
#include "support/mock_cloud.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace server_provisioning_models_test {

using jobman::test::eventually;
using nlohmann::json;

const std::string kCentral = "projects/p/locations/us-central2-b";
const std::string kEast = "projects/p/locations/us-east5-a";

// v4 in us-central2-b: 16 spot chips that best-effort shares, 8 on-demand, and a reservation of 8 (the project may
// ask for 16 of it); v6e flex-start in us-east5-a.
const std::string kWorld = jobman::test::test_world(1, "  us-central2-b:\n"
                                                       "    v4:\n"
                                                       "      spot: {chips: 16}\n"
                                                       "      on_demand: {chips: 8}\n"
                                                       "      reserved: {chips: 8, quota: 16, reservation: lab-v4}\n"
                                                       "      best_effort: {quota: 16}\n"
                                                       "  us-east5-a:\n"
                                                       "    v6e:\n"
                                                       "      flex_start: {chips: 64}\n");

// A QueuedResource asking for one node `node` of `type`, with `extra` merged in at the top.
json request(const std::string& node, const std::string& type, const json& extra = json::object()) {
  json body = {
      {"tpu",
       {{"nodeSpec",
         {{{"nodeId", node}, {"node", {{"acceleratorType", type}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}}};
  body.update(extra);
  return body;
}

class MockProvisioningModelsTest : public jobman::test::MockApiTest {
protected:
  MockProvisioningModelsTest() : MockApiTest(kWorld) {}

  // The queued resource's state under `version` ("v2" or "v2alpha1").
  std::string state_of(const std::string& loc, const std::string& id, const std::string& version = "v2") {
    return api("GET", "/" + version + "/" + loc + "/queuedResources/" + id).body["state"].value("state", "");
  }

  bool reaches(const std::string& loc, const std::string& id, const std::string& state) {
    return eventually([&] { return state_of(loc, id) == state; }, std::chrono::seconds(20));
  }
};

TEST_F(MockProvisioningModelsTest, AFlexStartRunLastsItsDurationThenTheServiceDeletesItsVmsAndSuspendsIt) {
  // One hour of simulated time: 3.6 s at the test's time scale of 1000.
  auto body =
      request("flex", "v6e-8", {{"provisioningModel", "FLEX_START"}, {"runDuration", {{"maxRunDuration", "3600s"}}}});
  body["tpu"]["nodeSpec"][0]["node"]["runtimeVersion"] = "v2-alpha-tpuv6e";
  const auto created = api("POST", "/v2alpha1/" + kEast + "/queuedResources?queuedResourceId=flex", body);
  ASSERT_EQ(created.status, 200) << created.text;
  ASSERT_TRUE(reaches(kEast, "flex", "ACTIVE"));
  const auto active_ms = jobman::util::now_ms();

  const auto qr = api("GET", "/v2alpha1/" + kEast + "/queuedResources/flex").body;
  EXPECT_EQ(qr["provisioningModel"], "FLEX_START") << qr.dump();
  EXPECT_EQ(qr["runDuration"]["maxRunDuration"], "3600s") << qr.dump();
  const auto ends = jobman::util::parse_utc(qr["runDuration"].value("terminationTime", ""));
  ASSERT_TRUE(ends.has_value()) << qr.dump();
  // An hour after it became ACTIVE, which the test saw a little later; the time is to the second.
  EXPECT_GT(*ends, active_ms + 3600 - 2000);
  EXPECT_LE(*ends, active_ms + 3600 + 1000);
  const auto node = api("GET", "/v2alpha1/" + kEast + "/nodes/flex").body;
  EXPECT_EQ(node["schedulingConfig"]["terminationTimestamp"], qr["runDuration"]["terminationTime"]) << node.dump();
  // v2 has none of it.
  const auto in_v2 = api("GET", "/v2/" + kEast + "/queuedResources/flex").body;
  EXPECT_FALSE(in_v2.contains("provisioningModel") || in_v2.contains("runDuration")) << in_v2.dump();
  EXPECT_FALSE(api("GET", "/v2/" + kEast + "/nodes/flex").body.contains("schedulingConfig"));

  ASSERT_TRUE(reaches(kEast, "flex", "SUSPENDED"));
  EXPECT_GE(jobman::util::now_ms(), *ends);
  EXPECT_EQ(api("GET", "/v2/" + kEast + "/queuedResources/flex").body["state"]["stateInitiator"], "SERVICE");
  EXPECT_EQ(api("GET", "/v2/" + kEast + "/nodes/flex").status, 404) << "its VMs are deleted";

  // Reset, it queues again and runs a whole duration anew.
  ASSERT_EQ(api("POST", "/v2alpha1/" + kEast + "/queuedResources/flex:reset", json::object()).status, 200);
  ASSERT_TRUE(reaches(kEast, "flex", "ACTIVE"));
  const auto again = api("GET", "/v2alpha1/" + kEast + "/queuedResources/flex").body;
  ASSERT_TRUE(again["runDuration"].contains("terminationTime")) << again.dump();
  EXPECT_GT(*jobman::util::parse_utc(again["runDuration"]["terminationTime"].get<std::string>()), *ends);
}

TEST_F(MockProvisioningModelsTest, ARequestNoProvisioningModelFitsIsRefusedAndNothingIsCreated) {
  const auto loc = "/v2alpha1/" + kEast + "/queuedResources?queuedResourceId=";
  const json flex = {{"provisioningModel", "FLEX_START"}};
  // Flex-start without a duration, with one past seven days, or where the zone has none.
  EXPECT_EQ(api("POST", loc + "a", request("a", "v6e-8", flex)).status, 400);
  auto long_run = flex;
  long_run["runDuration"] = {{"maxRunDuration", "604801s"}};
  const auto too_long = api("POST", loc + "b", request("b", "v6e-8", long_run));
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.text.find("7 days"), std::string::npos) << too_long.text;
  auto hour = flex;
  hour["runDuration"] = {{"maxRunDuration", "3600s"}};
  const auto elsewhere =
      api("POST", "/v2alpha1/" + kCentral + "/queuedResources?queuedResourceId=c", request("c", "v4-8", hour));
  EXPECT_EQ(elsewhere.status, 400);
  EXPECT_NE(elsewhere.text.find("flex_start"), std::string::npos) << elsewhere.text;
  // Two tiers at once, an unknown model, and a duration for another model.
  EXPECT_EQ(
      api("POST", loc + "d", request("d", "v6e-8", {{"spot", json::object()}, {"bestEffort", json::object()}})).status,
      400);
  EXPECT_EQ(api("POST", loc + "e", request("e", "v6e-8", {{"provisioningModel", "CHEAP"}})).status, 400);
  EXPECT_EQ(
      api("POST", loc + "f", request("f", "v6e-8", {{"spot", json::object()}, {"runDuration", hour["runDuration"]}}))
          .status,
      400);
  // v2 knows none of v2alpha1's fields, as Google's front end says of an unknown name.
  const auto in_v2 = api("POST", "/v2/" + kEast + "/queuedResources?queuedResourceId=g", request("g", "v6e-8", hour));
  EXPECT_EQ(in_v2.status, 400);
  EXPECT_NE(in_v2.body["error"].value("message", "").find("Unknown name \"provisioningModel\""), std::string::npos)
      << in_v2.text;
  EXPECT_TRUE(api("GET", "/v2/" + kEast + "/queuedResources").body.value("queuedResources", json::array()).empty());
}

TEST_F(MockProvisioningModelsTest, AReservedRequestTakesTheReservationsChipsWhichReservationsListCounts) {
  const auto reservations = "/v2alpha1/" + kCentral + "/reservations";
  const auto listed = api("GET", reservations);
  ASSERT_EQ(listed.status, 200) << listed.text;
  ASSERT_EQ(listed.body["reservations"].size(), 1U) << listed.text;
  const auto& reservation = listed.body["reservations"][0];
  EXPECT_EQ(reservation["name"], kCentral + "/reservations/lab-v4");
  EXPECT_EQ(reservation["standard"]["size"], 8);
  EXPECT_EQ(reservation["standard"]["capacityUnits"], "CHIPS");
  EXPECT_EQ(reservation["standard"]["usage"]["total"], "0");
  EXPECT_EQ(api("GET", "/v2/" + kCentral + "/reservations").status, 404) << "v2 has no reservations.list";

  // As `gcloud alpha ... --reserved` asks (guaranteed.reserved), and by the reservation's id.
  const auto qr = "/v2alpha1/" + kCentral + "/queuedResources?queuedResourceId=";
  ASSERT_EQ(api("POST", qr + "r1", request("r1", "v4-8", {{"guaranteed", {{"reserved", true}}}})).status, 200);
  ASSERT_EQ(api("POST", qr + "r2", request("r2", "v4-8", {{"reservationName", "lab-v4"}})).status, 200);
  const auto wrong = api("POST", qr + "r3", request("r3", "v4-8", {{"reservationName", "someone-elses"}}));
  EXPECT_EQ(wrong.status, 400) << wrong.text;
  ASSERT_TRUE(reaches(kCentral, "r1", "ACTIVE"));
  ASSERT_TRUE(reaches(kCentral, "r2", "ACTIVE"));
  EXPECT_EQ(api("GET", reservations).body["reservations"][0]["standard"]["usage"]["total"], "8");
  const auto r1 = api("GET", "/v2alpha1/" + kCentral + "/queuedResources/r1").body;
  EXPECT_EQ(r1["reservationName"], kCentral + "/reservations/lab-v4") << r1.dump();
  const auto node = api("GET", "/v2alpha1/" + kCentral + "/nodes/r1").body;
  EXPECT_EQ(node["schedulingConfig"]["reserved"], true) << node.dump();
  EXPECT_EQ(node["schedulingConfig"]["reservationName"], kCentral + "/reservations/lab-v4") << node.dump();
  // v2 asks for any of the project's reservations with "-"; the reservation is full, so it waits.
  const auto any = request("r4", "v4-8", {{"reservationName", kCentral + "/reservations/-"}});
  ASSERT_EQ(api("POST", "/v2/" + kCentral + "/queuedResources?queuedResourceId=r4", any).status, 200);
  ASSERT_TRUE(reaches(kCentral, "r4", "WAITING_FOR_RESOURCES"));
  const auto v2_node = api("GET", "/v2/" + kCentral + "/nodes/r1").body;
  EXPECT_EQ(v2_node["schedulingConfig"], json({{"reserved", true}})) << v2_node.dump();
}

TEST_F(MockProvisioningModelsTest, BestEffortRunsOnSpareSpotChipsAndIsPreemptedFirstWhenSpotNeedsThem) {
  const auto qr = "/v2alpha1/" + kCentral + "/queuedResources?queuedResourceId=";
  // All 16 spot chips, best-effort.
  ASSERT_EQ(api("POST", qr + "be", request("be", "v4-32", {{"bestEffort", json::object()}})).status, 200);
  ASSERT_TRUE(reaches(kCentral, "be", "ACTIVE"));
  // A spot request (as `gcloud alpha ... --spot` sends it: STANDARD with a spot tier) needs 4 of them.
  ASSERT_EQ(
      api("POST", qr + "spot", request("spot", "v4-8", {{"provisioningModel", "STANDARD"}, {"spot", json::object()}}))
          .status,
      200);
  ASSERT_TRUE(reaches(kCentral, "be", "SUSPENDED"));
  const auto preempted = api("GET", "/v2/" + kCentral + "/queuedResources/be").body;
  EXPECT_EQ(preempted["state"]["stateInitiator"], "SERVICE");
  EXPECT_EQ(api("GET", "/v2/" + kCentral + "/nodes/be").body["state"], "PREEMPTED");
  ASSERT_TRUE(reaches(kCentral, "spot", "ACTIVE"));
  const auto spot = api("GET", "/v2/" + kCentral + "/queuedResources/spot").body;
  EXPECT_TRUE(spot.contains("spot")) << spot.dump();
  // Best-effort takes what spot leaves: 8 of the 12 chips left.
  ASSERT_EQ(api("POST", qr + "be2", request("be2", "v4-16", {{"bestEffort", json::object()}})).status, 200);
  ASSERT_TRUE(reaches(kCentral, "be2", "ACTIVE"));
  EXPECT_EQ(state_of(kCentral, "spot"), "ACTIVE") << "best-effort never preempts spot";
}

TEST_F(MockProvisioningModelsTest, AV2alpha1MultisliceRequestNamesItsSlicesWithMultiNodeParams) {
  json body = request("unused", "v4-8", {{"spot", json::object()}});
  auto& spec = body["tpu"]["nodeSpec"][0];
  spec.erase("nodeId");
  spec["multiNodeParams"] = {{"nodeCount", 2}, {"nodeIdPrefix", "ms"}, {"workloadType", "THROUGHPUT_OPTIMIZED"}};
  const auto created = api("POST", "/v2alpha1/" + kCentral + "/queuedResources?queuedResourceId=multi", body);
  ASSERT_EQ(created.status, 200) << created.text;
  ASSERT_TRUE(reaches(kCentral, "multi", "ACTIVE"));
  const auto qr = api("GET", "/v2alpha1/" + kCentral + "/queuedResources/multi").body;
  EXPECT_EQ(qr["tpu"]["nodeSpec"][0]["multiNodeParams"]["nodeCount"], 2) << qr.dump();
  EXPECT_EQ(api("GET", "/v2/" + kCentral + "/nodes/ms-1").body["state"], "READY");
  // Under v2 the field is v2's own name.
  const auto in_v2 = api("POST", "/v2/" + kCentral + "/queuedResources?queuedResourceId=x", body);
  EXPECT_EQ(in_v2.status, 400) << in_v2.text;
}

} // namespace server_provisioning_models_test
