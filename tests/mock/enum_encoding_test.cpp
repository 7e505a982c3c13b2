// Google's `$alt=json;enum-encoding=int`: the replies' enums as the numbers of the TPU v2 protos.
#include "mock_cloud/enum_encoding.hpp"

#include <gtest/gtest.h>

namespace jobman::mock {
namespace enum_encoding_test {

using nlohmann::json;

TEST(EnumEncoding, OnlyTheEnumEncodingOptionAsksForNumbers) {
  EXPECT_TRUE(wants_enum_numbers("json;enum-encoding=int"));
  EXPECT_TRUE(wants_enum_numbers("json;enum-encoding=int;other"));
  EXPECT_FALSE(wants_enum_numbers("json"));
  EXPECT_FALSE(wants_enum_numbers(""));
  EXPECT_FALSE(wants_enum_numbers("json;enum-encoding=string"));
  EXPECT_FALSE(wants_enum_numbers("json;enum-encoding=integer"));
}

TEST(EnumEncoding, QueuedResourcesAndTheirNodesGetTheirProtoNumbers) {
  json qr = {{"name", "projects/p/locations/z/queuedResources/q"},
             {"state", {{"state", "WAITING_FOR_RESOURCES"}, {"stateInitiator", "SERVICE"}}},
             {"tpu", {{"nodeSpec", json::array({{{"node", {{"acceleratorType", "v4-8"}, {"state", "READY"}}}}})}}}};
  encode_enums_as_numbers("queuedResources.get", qr);
  EXPECT_EQ(qr["state"]["state"], 9);
  EXPECT_EQ(qr["state"]["stateInitiator"], 2);
  EXPECT_EQ(qr["tpu"]["nodeSpec"][0]["node"]["state"], 2);
  EXPECT_EQ(qr["tpu"]["nodeSpec"][0]["node"]["acceleratorType"], "v4-8"); // A string field, not an enum.
  EXPECT_EQ(qr["name"], "projects/p/locations/z/queuedResources/q");

  json nodes = {{"nodes", json::array({{{"state", "PREEMPTED"},
                                        {"health", "UNHEALTHY_MAINTENANCE"},
                                        {"apiVersion", "V2"},
                                        {"symptoms", json::array({{{"symptomType", "OUT_OF_MEMORY"}}})},
                                        {"acceleratorConfig", {{"type", "V5LITE_POD"}, {"topology", "4x4"}}}}})}};
  encode_enums_as_numbers("nodes.list", nodes);
  const json& node = nodes["nodes"][0];
  EXPECT_EQ(node["state"], 11); // The numbering has gaps: STOPPED is 8, no 7.
  EXPECT_EQ(node["health"], 5);
  EXPECT_EQ(node["apiVersion"], 4);
  EXPECT_EQ(node["symptoms"][0]["symptomType"], 2);
  EXPECT_EQ(node["acceleratorConfig"]["type"], 9);
  EXPECT_EQ(node["acceleratorConfig"]["topology"], "4x4");
}

TEST(EnumEncoding, AnOperationsResponseIsEncodedByTheMessageItsTypeNames) {
  json op = {{"name", "projects/p/locations/z/operations/o"},
             {"done", true},
             {"metadata", {{"@type", "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata"}, {"verb", "create"}}},
             {"response",
              {{"@type", "type.googleapis.com/google.cloud.tpu.v2.QueuedResource"}, {"state", {{"state", "ACTIVE"}}}}}};
  json listed = {{"operations", json::array({op})}};
  encode_enums_as_numbers("queuedResources.create", op);
  EXPECT_EQ(op["response"]["state"]["state"], 6);
  EXPECT_EQ(op["metadata"]["verb"], "create");
  encode_enums_as_numbers("operations.list", listed);
  EXPECT_EQ(listed["operations"][0]["response"]["state"]["state"], 6);
}

TEST(EnumEncoding, UnknownValuesAndMethodsAreLeftAlone) {
  json node = {{"state", "SOMETHING_NEW"}, {"health", "HEALTHY"}};
  encode_enums_as_numbers("nodes.get", node);
  EXPECT_EQ(node["state"], "SOMETHING_NEW");
  EXPECT_EQ(node["health"], 1);
  json runtime = {{"name", "projects/p/locations/z/runtimeVersions/v"}, {"version", "v"}};
  const json before = runtime;
  encode_enums_as_numbers("runtimeVersions.get", runtime);
  EXPECT_EQ(runtime, before);
}

} // namespace enum_encoding_test
} // namespace jobman::mock
