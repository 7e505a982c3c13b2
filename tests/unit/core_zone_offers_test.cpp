// Checking configs against what their zones offer: answers asked of the cloud once a day and kept in the store, the
// problems named at their file, line and key, and the built-in catalog when the cloud cannot be asked.
#include "jobman/config/loader.hpp"
#include "jobman/core/zone_offers.hpp"

#include <gtest/gtest.h>

namespace jobman::core {
namespace core_zone_offers_test {

using nlohmann::json;

constexpr std::int64_t kNow = 1'800'000'000'000;

cloud::HttpResponse reply(int status, const json& body) {
  cloud::HttpResponse response;
  response.status = status;
  response.body = body.dump();
  return response;
}

// A cloud whose zone us-central2-b offers v4-8 and v4-16 with two runtime versions; any other zone is NOT_FOUND.
// Counts the requests it answers; `down` makes every request fail as an unreachable server does.
class FakeCloud {
public:
  FakeCloud() {
    cloud::TpuClientOptions options;
    options.endpoint = "http://127.0.0.1:1/v2/";
    options.sleep = [](std::chrono::milliseconds) {};
    options.jitter = [] { return 0.5; };
    options.retry.max_attempts = 1;
    options.transport = [this](const cloud::HttpRequest& request) {
      ++requests;
      if (down) {
        throw Error("connection refused");
      }
      if (request.url.find("/locations/us-central2-b/") == std::string::npos) {
        return reply(404, {{"error", {{"code", 404}, {"status", "NOT_FOUND"}, {"message", "no such location"}}}});
      }
      if (request.url.find("/acceleratorTypes") != std::string::npos) {
        return reply(200, {{"acceleratorTypes", {{{"type", "v4-8"}}, {{"type", "v4-16"}}}}});
      }
      return reply(200, {{"runtimeVersions", {{{"version", "tpu-ubuntu2204-base"}}, {{"version", "tpu-vm-v4-base"}}}}});
    };
    client = std::make_shared<cloud::TpuClient>(
        std::make_shared<cloud::CachedTokenSource>(cloud::make_static_token_source("t", "test")), options);
  }

  OfferCloud offer() const { return OfferCloud{"http://fake/", "p", client, "", {}}; }

  int requests = 0;
  bool down = false;
  std::shared_ptr<cloud::TpuClient> client;
};

std::vector<config::JobConfig> configs(const std::string& accelerator, const std::string& zone,
                                       const std::string& version = "tpu-ubuntu2204-base") {
  return config::parse_job_configs("job:\n  name: offers\ntpu:\n  accelerator: " + accelerator + "\n  zone: " + zone +
                                       "\n  version: " + version + "\ncommand:\n  cmd: echo\n",
                                   "offers.yaml", {});
}

TEST(ZoneOffers, AnOfferedAcceleratorPassesAndTheAnswersAreKeptForADay) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  auto first = check_zone_offers(store, cloud.offer(), configs("v4-8", "us-central2-b"), kNow);
  EXPECT_TRUE(first.problems.empty());
  EXPECT_EQ(first.source, OfferSource::cloud);
  EXPECT_EQ(cloud.requests, 2) << "one acceleratorTypes.list and one runtimeVersions.list";
  EXPECT_NE(first.note.find("us-central2-b (asked just now)"), std::string::npos) << first.note;

  // Within the day, the store answers; the cloud is not asked.
  auto second = check_zone_offers(store, cloud.offer(), configs("v4-16", "us-central2-b"), kNow + 3'600'000);
  EXPECT_TRUE(second.problems.empty());
  EXPECT_EQ(second.source, OfferSource::cache);
  EXPECT_EQ(cloud.requests, 2);
  EXPECT_NE(second.note.find("its answer of 1h"), std::string::npos) << second.note;

  // After a day, it asks again.
  auto third = check_zone_offers(store, cloud.offer(), configs("v4-8", "us-central2-b"), kNow + kZoneCatalogTtlMs);
  EXPECT_EQ(third.source, OfferSource::cloud);
  EXPECT_EQ(cloud.requests, 4);
  // Another cloud's answers are its own.
  OfferCloud other = cloud.offer();
  other.id = "http://other/";
  check_zone_offers(store, other, configs("v4-8", "us-central2-b"), kNow + kZoneCatalogTtlMs);
  EXPECT_EQ(cloud.requests, 6);
}

TEST(ZoneOffers, AnAcceleratorTheZoneDoesNotOfferIsAProblemAtItsKey) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  const auto check = check_zone_offers(store, cloud.offer(), configs("v4-32", "us-central2-b"), kNow);
  ASSERT_EQ(check.problems.size(), 1U);
  EXPECT_EQ(check.problems[0].format(),
            "offers.yaml:4:16: tpu.accelerator: v4-32 is not offered in us-central2-b (us-central2-b offers v4-8, "
            "v4-16)");
}

TEST(ZoneOffers, WithSeveralCandidatesOnlyNoneOfferedIsAProblem) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  // Every zone and accelerator of the lists is asked about; one candidate offered is enough (the others are
  // refused when asked, and the next is tried).
  auto check = check_zone_offers(store, cloud.offer(), configs("[v4-32, v4-16]", "[us-east1-d, us-central2-b]"), kNow);
  EXPECT_TRUE(check.problems.empty()) << check.problems[0].format();
  EXPECT_NE(check.note.find("us-central2-b"), std::string::npos) << check.note;
  EXPECT_NE(check.note.find("us-east1-d"), std::string::npos) << check.note;
  check = check_zone_offers(store, cloud.offer(), configs("[v4-32, v4-64]", "[us-central2-b, us-east1-d]"), kNow);
  ASSERT_EQ(check.problems.size(), 3U);
  EXPECT_EQ(check.problems[0].format(),
            "offers.yaml:4:16: tpu.accelerator: v4-32 is not offered in us-central2-b (us-central2-b offers v4-8, "
            "v4-16)");
  EXPECT_EQ(check.problems[1].where.key_path, "tpu.zone") << "us-east1-d is no zone of this cloud";
  EXPECT_NE(check.problems[2].format().find("v4-64 is not offered in us-central2-b"), std::string::npos);
}

TEST(ZoneOffers, ARuntimeVersionTheZoneLacksIsAProblemWithTheClosestName) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  const auto check =
      check_zone_offers(store, cloud.offer(), configs("v4-8", "us-central2-b", "tpu-ubuntu2204-bse"), kNow);
  ASSERT_EQ(check.problems.size(), 1U);
  EXPECT_EQ(check.problems[0].where.key_path, "tpu.version");
  EXPECT_EQ(check.problems[0].where.line, 6);
  EXPECT_NE(check.problems[0].format().find("did you mean 'tpu-ubuntu2204-base'?"), std::string::npos)
      << check.problems[0].format();
}

TEST(ZoneOffers, AZoneTheCloudDoesNotKnowIsAProblemAtTheZone) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  const auto check = check_zone_offers(store, cloud.offer(), configs("v4-8", "us-central9-z"), kNow);
  ASSERT_EQ(check.problems.size(), 1U);
  EXPECT_EQ(check.problems[0].where.key_path, "tpu.zone");
  EXPECT_EQ(check.problems[0].where.line, 5);
}

TEST(ZoneOffers, WithoutAnAnswerTheBuiltInCatalogStandsAndTheNoteSaysWhy) {
  FakeCloud cloud;
  cloud.down = true;
  auto store = store::JobStore::open_in_memory();
  const auto check = check_zone_offers(store, cloud.offer(), configs("v4-32", "us-central2-b"), kNow);
  EXPECT_TRUE(check.problems.empty()) << "the loader's built-in catalog already judged v4-32";
  EXPECT_EQ(check.source, OfferSource::built_in);
  EXPECT_NE(check.note.find("connection refused"), std::string::npos) << check.note;
  EXPECT_NE(check.note.find("built-in catalog only"), std::string::npos) << check.note;

  // No client at all (the bundled mock is not running): the same, with the reason given.
  const auto unreachable =
      check_zone_offers(store, OfferCloud{"bundled-mock", "p", nullptr, "the bundled mock cloud is not running", {}},
                        configs("v4-8", "us-central2-b"), kNow);
  EXPECT_EQ(unreachable.source, OfferSource::built_in);
  EXPECT_NE(unreachable.note.find("the bundled mock cloud is not running"), std::string::npos) << unreachable.note;

  // A fresh answer in the store is used even when the cloud is down.
  cloud.down = false;
  check_zone_offers(store, cloud.offer(), configs("v4-8", "us-central2-b"), kNow);
  cloud.down = true;
  const auto cached = check_zone_offers(store, cloud.offer(), configs("v4-32", "us-central2-b"), kNow + 1000);
  EXPECT_EQ(cached.source, OfferSource::cache);
  EXPECT_EQ(cached.problems.size(), 1U);
}

TEST(ZoneOffers, SweepMembersSharingAProblemReportItOnce) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  config::LoadOptions options;
  options.sweep_args = {"vars.lr=1,2,3"};
  const auto swept = config::parse_job_configs("job:\n  name: offers\ntpu:\n  accelerator: v4-32\n  zone: "
                                               "us-central2-b\ncommand:\n  cmd: echo ${vars.lr}\nvars:\n  lr: 0\n",
                                               "offers.yaml", options);
  ASSERT_EQ(swept.size(), 3U);
  EXPECT_EQ(check_zone_offers(store, cloud.offer(), swept, kNow).problems.size(), 1U);
}

} // namespace core_zone_offers_test
} // namespace jobman::core
