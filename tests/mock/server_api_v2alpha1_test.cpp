// The mock's v2alpha1, through a jobman-mock-cloud child process: the same world as v2, in v2alpha1's field names,
// and reservations.list, which v2 lacks. The provisioning models v2alpha1 adds: server_provisioning_models_test.cpp.
#include "mock_cloud/api_version.hpp"
#include "support/mock_api_test.hpp"
#include "support/mock_cloud.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace server_api_v2alpha1_test {

using jobman::test::eventually;
using nlohmann::json;

const std::string kLoc = "projects/p/locations/us-central2-b";
const std::string kV2 = "/v2/" + kLoc;
const std::string kAlpha = "/v2alpha1/" + kLoc;

const std::string kWorld = jobman::test::test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 64}\n");

class MockServerV2alpha1Test : public jobman::test::MockApiTest {
protected:
  MockServerV2alpha1Test() : MockApiTest(kWorld) {}

  // Creates a spot multislice queued resource of two v4-16 slices, ms-0 and ms-1, and waits until it is ACTIVE.
  void create_multislice() {
    const json body = {{"tpu",
                        {{"nodeSpec",
                          {{{"parent", kLoc},
                            {"multisliceParams", {{"nodeCount", 2}, {"nodeIdPrefix", "ms"}}},
                            {"node", {{"acceleratorType", "v4-16"}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                       {"spot", json::object()}};
    const auto created = api("POST", kV2 + "/queuedResources?queuedResourceId=multi", body);
    ASSERT_EQ(created.status, 200) << created.text;
    ASSERT_TRUE(
        eventually([&] { return api("GET", kV2 + "/queuedResources/multi").body["state"]["state"] == "ACTIVE"; },
                   std::chrono::seconds(20)));
  }
};

TEST_F(MockServerV2alpha1Test, AQueuedResourceAndItsNodesReadInV2alpha1sFieldNames) {
  create_multislice();
  const auto qr = api("GET", kAlpha + "/queuedResources/multi?alt=json");
  ASSERT_EQ(qr.status, 200) << qr.text;
  const auto& spec = qr.body["tpu"]["nodeSpec"][0];
  EXPECT_EQ(spec["multiNodeParams"], json({{"nodeCount", 2}, {"nodeIdPrefix", "ms"}})) << qr.text;
  EXPECT_FALSE(spec.contains("multisliceParams")) << qr.text;
  EXPECT_EQ(qr.body["state"]["state"], "ACTIVE");
  // The same resource under v2 keeps v2's name for it.
  EXPECT_TRUE(api("GET", kV2 + "/queuedResources/multi").body["tpu"]["nodeSpec"][0].contains("multisliceParams"));

  const auto node = api("GET", kAlpha + "/nodes/ms-1");
  ASSERT_EQ(node.status, 200) << node.text;
  EXPECT_EQ(node.body["apiVersion"], "V2_ALPHA1");
  EXPECT_EQ(node.body["state"], "READY");
  EXPECT_EQ(node.body["networkEndpoints"].size(), 2U);
  EXPECT_EQ(api("GET", kV2 + "/nodes/ms-1").body["apiVersion"], "V2");
}

TEST_F(MockServerV2alpha1Test, GuestAttributesAndAMetadataPatchAnswerUnderV2alpha1) {
  create_multislice();
  // gcloud asks for every worker with an empty worker id.
  const auto attributes =
      api("POST", kAlpha + "/nodes/ms-0:getGuestAttributes", json{{"queryPath", ""}, {"workerIds", {""}}});
  ASSERT_EQ(attributes.status, 200) << attributes.text;
  ASSERT_EQ(attributes.body["guestAttributes"].size(), 2U) << attributes.text;
  bool has_host_key = false;
  for (const auto& item : attributes.body["guestAttributes"][1]["queryValue"]["items"]) {
    has_host_key = has_host_key || (item["namespace"] == "hostkeys" && item["key"] == "ssh-ed25519");
  }
  EXPECT_TRUE(has_host_key) << attributes.text;

  const auto patched = api("PATCH", kAlpha + "/nodes/ms-0?updateMask=metadata",
                           json{{"metadata", {{"ssh-keys", "alice:ssh-ed25519 AAAA alice"}}}});
  ASSERT_EQ(patched.status, 200) << patched.text;
  EXPECT_EQ(patched.body["metadata"]["@type"], "type.googleapis.com/google.cloud.tpu.v2alpha1.OperationMetadata");
  const auto name = patched.body["name"].get<std::string>();
  const auto operation = api("GET", kAlpha + "/operations/" + name.substr(name.rfind('/') + 1));
  ASSERT_EQ(operation.status, 200) << operation.text;
  EXPECT_TRUE(operation.body.value("done", false)) << operation.text;
  EXPECT_EQ(operation.body["response"]["@type"], "type.googleapis.com/google.cloud.tpu.v2alpha1.Node");
  EXPECT_EQ(operation.body["response"]["apiVersion"], "V2_ALPHA1");
  EXPECT_EQ(operation.body["response"]["metadata"]["ssh-keys"], "alice:ssh-ed25519 AAAA alice");
  // The world is one: v2 sees the change.
  EXPECT_EQ(api("GET", kV2 + "/nodes/ms-0").body["metadata"]["ssh-keys"], "alice:ssh-ed25519 AAAA alice");
}

TEST_F(MockServerV2alpha1Test, OnlyReservationsListIsV2alpha1sOwnAndAMissingResourceIsNotFoundInBoth) {
  EXPECT_EQ(api("GET", kAlpha + "/reservations").status, 200);
  const auto in_v2 = api("GET", kV2 + "/reservations");
  EXPECT_EQ(in_v2.status, 404) << in_v2.text;
  EXPECT_EQ(in_v2.body["error"]["status"], "NOT_FOUND") << in_v2.text;
  EXPECT_EQ(api("GET", kAlpha + "/nodes/missing").status, 404);
  EXPECT_EQ(api("GET", kAlpha + "/queuedResources").status, 200);
  // The version gate comes first, but a served method still needs a credential.
  EXPECT_EQ(jobman::test::http_call(*client, "GET", kV2 + "/reservations", nullptr, {}).status, 404);
  EXPECT_EQ(jobman::test::http_call(*client, "GET", kAlpha + "/nodes/missing", nullptr, {}).status, 401);
}

TEST(ApiVersion, ARequestPathNamesItsVersion) {
  using jobman::mock::ApiVersion;
  EXPECT_EQ(jobman::mock::api_version_of("/v2alpha1/projects/p"), ApiVersion::v2alpha1);
  EXPECT_EQ(jobman::mock::api_version_of("/v2/projects/p"), ApiVersion::v2);
  EXPECT_TRUE(jobman::mock::serves_method(ApiVersion::v2, "queuedResources.create"));
  EXPECT_TRUE(jobman::mock::serves_method(ApiVersion::v2alpha1, "queuedResources.create"));
  EXPECT_TRUE(jobman::mock::serves_method(ApiVersion::v2alpha1, "reservations.list"));
  EXPECT_FALSE(jobman::mock::serves_method(ApiVersion::v2, "reservations.list"));
  // A user's metadata and labels are left as they are, whatever their keys.
  json node = {{"apiVersion", "V2"}, {"metadata", {{"multisliceParams", "x"}}}, {"labels", {{"apiVersion", "V2"}}}};
  jobman::mock::reply_in_version(ApiVersion::v2alpha1, "nodes.get", node);
  EXPECT_EQ(node, json({{"apiVersion", "V2_ALPHA1"},
                        {"metadata", {{"multisliceParams", "x"}}},
                        {"labels", {{"apiVersion", "V2"}}}}));
}

} // namespace server_api_v2alpha1_test
