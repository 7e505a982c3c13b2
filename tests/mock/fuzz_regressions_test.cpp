// Bugs the fuzz target tests/fuzz/mock_request_fuzz.cpp found in the mock cloud's request handling; each test is
// named after its bug, and the input that found it is in tests/fuzz/corpus/mock_request/.
#include "jobman/util/base64url.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/json_text.hpp"
#include "mock_cloud/config.hpp"
#include "mock_cloud/jwt.hpp"
#include "mock_cloud/world.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace jobman::mock {
namespace fuzz_regressions_test {

using nlohmann::json;

constexpr std::int64_t kStart = 1'800'000'000'000;

MockConfig one_zone() {
  MockConfig config;
  ZoneConfig zone;
  zone.name = "us-central2-b";
  zone.pools["v4"][Tier::spot] = PoolConfig{64, 64, {}};
  zone.pools["v4"][Tier::on_demand] = PoolConfig{64, 64, {}};
  config.zones.push_back(zone);
  return config;
}

json request(const json& node) {
  return {{"tpu", {{"nodeSpec", {{{"nodeId", "n"}, {"node", node}}}}}}};
}

TEST(MockFuzzRegressions, AnErrorQuotingBytesThatAreNotUtf8IsStillJson) {
  // A zone or id with a byte that is not UTF-8 (%FF in the URL) was quoted into the error message, and sending the
  // reply threw nlohmann::json's type_error: the server answered 500 instead of 404.
  World world(one_zone(), 1, 1);
  const auto reply = world.get_queued_resource("p",
                                               "us-central2-\xa6"
                                               "b",
                                               "x", kStart);
  EXPECT_EQ(reply.status, 404);
  EXPECT_NO_THROW((void)reply.body.dump());
  EXPECT_NE(reply.body["error"]["message"].get<std::string>().find("us-central2-\xef\xbf\xbd"
                                                                   "b"),
            std::string::npos);
  EXPECT_NO_THROW((void)error_reply(400, "id '\xff\xfe'").body.dump());
}

TEST(MockFuzzRegressions, CreatingInAProjectThatIsNotUtf8IsRefused) {
  // The resource would be named after the project: every later listing and snapshot of it would throw.
  World world(one_zone(), 1, 1);
  const auto reply =
      world.create_queued_resource("p\xff", "us-central2-b", "qr", "", request({{"acceleratorType", "v4-8"}}), kStart);
  EXPECT_EQ(reply.status, 400);
  EXPECT_NO_THROW((void)reply.body.dump());
  EXPECT_NO_THROW((void)world.snapshot().dump());
}

TEST(MockFuzzRegressions, ASchedulingConfigSpotThatIsNotABooleanIsA400NotATypeError) {
  // json::value("spot", false) threw type_error for "spot": "yes"; the server answered 500.
  World world(one_zone(), 1, 1);
  for (const json& spot : {json("yes"), json(1), json::object(), json(nullptr)}) {
    const auto reply = world.create_queued_resource(
        "p", "us-central2-b", "qr", "", request({{"acceleratorType", "v4-8"}, {"schedulingConfig", {{"spot", spot}}}}),
        kStart);
    EXPECT_EQ(reply.status, 400) << spot.dump();
  }
  const auto ok = world.create_queued_resource(
      "p", "us-central2-b", "qr", "", request({{"acceleratorType", "v4-8"}, {"schedulingConfig", {{"spot", true}}}}),
      kStart);
  EXPECT_EQ(ok.status, 200) << ok.body.dump();
}

TEST(MockFuzzRegressions, AWorldDescriptionWithAListWhereANameBelongsIsAConfigErrorNotAYamlException) {
  // yaml-cpp's conversion of a non-scalar key or distribution threw YAML::TypedBadConversion out of the parser.
  for (const std::string& text :
       std::vector<std::string>{"zones:\n  [a, b]:\n    v4: {spot: {chips: 8}}\n",
                                "zones: {z: {v4: {spot: {chips: 8}}}}\nprovisioning:\n  v4: {distribution: [fixed]}\n",
                                "zones: {z: {v4: {spot: {chips: 8}}}}\nlifecycle: {[creating]: 5s}\n"}) {
    try {
      (void)parse_mock_config(text, "world.yaml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      ASSERT_FALSE(e.diagnostics().empty());
      EXPECT_EQ(e.diagnostics()[0].where.file, "world.yaml");
    }
  }
}

TEST(MockFuzzRegressions, ADeeplyNestedBodyOrTokenIsRefusedNotAStackOverflow) {
  // The create route parsed any depth, and World copied the body into the resource recursively: 200,000 nested
  // arrays in one request overflowed the mock's stack. Routes and the JWT parser now read JSON at most 128 deep.
  const std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  EXPECT_TRUE(util::parse_json_bounded(R"({"tpu": {}, "x": )" + deep + "}").is_discarded());
  const std::string claims = util::base64url_encode(R"({"iss": )" + deep + "}");
  EXPECT_FALSE(parse_jwt(util::base64url_encode(R"({"alg": "RS256"})") + "." + claims + ".c2ln"));
}

} // namespace fuzz_regressions_test
} // namespace jobman::mock
