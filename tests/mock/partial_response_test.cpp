// Google's partial-response `fields` selection, as the mock applies it to /v2 replies.
#include "mock_cloud/partial_response.hpp"

#include <gtest/gtest.h>

namespace partial_response_test {

using jobman::mock::select_fields;
using nlohmann::json;

const json kList = json::parse(R"({
  "queuedResources": [
    {"name": "a", "state": {"state": "ACTIVE", "stateInitiator": "USER"},
     "tpu": {"nodeSpec": [{"nodeId": "n1", "node": {"acceleratorType": "v4-8", "labels": {"x": "1"}}}]}},
    {"name": "b", "state": {"state": "SUSPENDED", "stateInitiator": "SERVICE"}}
  ],
  "nextPageToken": "t"
})");

TEST(PartialResponse, KeepsTopLevelMembers) {
  EXPECT_EQ(select_fields(kList, "nextPageToken"), json({{"nextPageToken", "t"}}));
}

TEST(PartialResponse, SubSelectionAppliesToEveryArrayElement) {
  auto out = select_fields(kList, "queuedResources(name,state/state),nextPageToken");
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, json::parse(R"({"queuedResources": [{"name": "a", "state": {"state": "ACTIVE"}},
                                                      {"name": "b", "state": {"state": "SUSPENDED"}}],
                                  "nextPageToken": "t"})"));
}

TEST(PartialResponse, PathsGoDownThroughArraysAndNestedParentheses) {
  auto out = select_fields(kList, "queuedResources/tpu/nodeSpec(nodeId,node(acceleratorType))");
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["queuedResources"][0],
            json::parse(R"({"tpu": {"nodeSpec": [{"nodeId": "n1", "node": {"acceleratorType": "v4-8"}}]}})"));
  EXPECT_EQ((*out)["queuedResources"][1], json::object()) << "absent members stay absent";
}

TEST(PartialResponse, StarKeepsEverythingAndSpacesAreAllowed) {
  EXPECT_EQ(select_fields(kList, "*"), kList);
  EXPECT_EQ(select_fields(kList, "queuedResources(*)"), json({{"queuedResources", kList["queuedResources"]}}));
  EXPECT_EQ(select_fields(kList, "nextPageToken, queuedResources(name)"),
            json::parse(R"({"nextPageToken": "t", "queuedResources": [{"name": "a"}, {"name": "b"}]})"));
}

TEST(PartialResponse, MalformedSelectionsAreRefused) {
  for (const auto* bad : {"", ",", "a(", "a(b", "a)", "a//b", "a/", "(a)", "a(b)c", "a b"}) {
    EXPECT_FALSE(select_fields(kList, bad)) << bad;
  }
}

} // namespace partial_response_test
