// Checking configs against what their zones offer: answers asked of the cloud once a day and kept in the store, the
// problems named at their file, line and key, and the built-in catalog when the cloud cannot be asked.
#include "jobman/config/loader.hpp"
#include "jobman/core/zone_offers.hpp"

#include <gtest/gtest.h>
#include <map>
#include <set>
#include <string>

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

// A cloud whose zone us-central2-b offers v4-8 and v4-16 and has the reservation v4-reservation (64 v4 chips),
// us-east5-a offers v6e-8 and v4-8 and has v6e-reservation (V6E chips), and europe-west4-a offers v6e-8 and has no
// reservation; each has two runtime versions, and any other zone is NOT_FOUND. Counts the requests it answers (and
// the reservations.list ones); `down` makes every request fail as an unreachable server does, `no_v2alpha1` answers
// every v2alpha1 request 404 as an endpoint without that version does.
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
      const json not_found = {{"error", {{"code", 404}, {"status", "NOT_FOUND"}, {"message", "no such location"}}}};
      if (request.url.find("/reservations") != std::string::npos) {
        ++reservation_requests;
        if (no_v2alpha1 || request.url.find("/v2alpha1/") == std::string::npos) {
          return reply(404, {{"error", {{"code", 404}, {"status", "NOT_FOUND"}, {"message", "Not Found"}}}});
        }
      }
      std::string zone;
      for (const char* known : {"us-central2-b", "us-east5-a", "europe-west4-a"}) {
        if (request.url.find(std::string("/locations/") + known + "/") != std::string::npos) {
          zone = known;
        }
      }
      if (zone.empty()) {
        return reply(404, not_found);
      }
      if (request.url.find("/reservations") != std::string::npos) {
        const auto reservation = [&](const std::string& id, const std::string& type) {
          return json{{"name", "projects/p/locations/" + zone + "/reservations/" + id},
                      {"standard", {{"size", 64}, {"resourceType", type}, {"usage", {{"total", "8"}}}}},
                      {"state", "ACTIVE"}};
        };
        if (zone == "us-central2-b") {
          return reply(200, {{"reservations", {reservation("v4-reservation", "V4")}}});
        }
        if (zone == "us-east5-a") {
          return reply(200, {{"reservations", {reservation("v6e-reservation", "V6E")}}});
        }
        return reply(200, json::object());
      }
      if (request.url.find("/acceleratorTypes") != std::string::npos) {
        if (zone == "us-central2-b") {
          return reply(200, {{"acceleratorTypes", {{{"type", "v4-8"}}, {{"type", "v4-16"}}}}});
        }
        if (zone == "us-east5-a") {
          return reply(200, {{"acceleratorTypes", {{{"type", "v6e-8"}}, {{"type", "v4-8"}}}}});
        }
        return reply(200, {{"acceleratorTypes", {{{"type", "v6e-8"}}}}});
      }
      return reply(200, {{"runtimeVersions", {{{"version", "tpu-ubuntu2204-base"}}, {{"version", "tpu-vm-v4-base"}}}}});
    };
    client = std::make_shared<cloud::TpuClient>(
        std::make_shared<cloud::CachedTokenSource>(cloud::make_static_token_source("t", "test")), options);
  }

  OfferCloud offer() const { return OfferCloud{"http://fake/", "p", client, "", {}, {}}; }

  int requests = 0;
  int reservation_requests = 0;
  bool down = false;
  bool no_v2alpha1 = false;
  std::shared_ptr<cloud::TpuClient> client;
};

// A config of `accelerator` in `zone`; `more` is further lines of its tpu section (from line 7 on).
std::vector<config::JobConfig> configs(const std::string& accelerator, const std::string& zone,
                                       const std::string& version = "tpu-ubuntu2204-base",
                                       const std::string& more = "") {
  return config::parse_job_configs("job:\n  name: offers\ntpu:\n  accelerator: " + accelerator + "\n  zone: " + zone +
                                       "\n  version: " + version + "\n" + more + "command:\n  cmd: echo\n",
                                   "offers.yaml", {});
}

// The tiers a mock's world says each zone has: us-east5-a v6e flex-start only, europe-west4-a v6e spot only,
// us-central2-b v4 spot, on-demand, reserved and best-effort, us-east1-d v4 spot and on-demand.
std::map<std::string, std::map<std::string, std::set<std::string>>> mock_tiers() {
  return {{"us-east5-a", {{"v6e", {"flex_start"}}}},
          {"europe-west4-a", {{"v6e", {"spot"}}}},
          {"us-central2-b", {{"v4", {"spot", "on_demand", "reserved", "best_effort"}}}},
          {"asia-northeast1-b", {{"v6e", {"flex_start"}}}}};
}

// The one problem of `check`, formatted; "(none)" or "(N problems)" otherwise.
std::string only_problem(const OfferCheck& check) {
  if (check.problems.size() != 1) {
    std::string all = "(" + std::to_string(check.problems.size()) + " problems)";
    for (const auto& p : check.problems) {
      all += "\n" + p.format();
    }
    return check.problems.empty() ? "(none)" : all;
  }
  return check.problems[0].format();
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
  const auto unreachable = check_zone_offers(
      store, OfferCloud{"bundled-mock", "p", nullptr, "the bundled mock cloud is not running", {}, {}},
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

// Flex-start capacity exists in few zones: where a mock's world says the zone has none of the generation, the config
// is refused at tpu.pricing, naming the zones that have it.
TEST(ZoneOffers, FlexStartWhereTheZoneHasNoFlexStartCapacityIsAProblemAtPricing) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  auto offer = cloud.offer();
  offer.tiers = mock_tiers();
  const std::string flex = "  pricing: flex-start\n  max_run_duration: 3h\n";
  const auto refused =
      check_zone_offers(store, offer, configs("v6e-8", "europe-west4-a", "tpu-ubuntu2204-base", flex), kNow);
  EXPECT_EQ(only_problem(refused),
            "offers.yaml:7:12: tpu.pricing: v6e flex-start is not offered in europe-west4-a (europe-west4-a has v6e "
            "spot only; v6e flex-start is offered in asia-northeast1-b, us-east5-a)");
  const auto offered =
      check_zone_offers(store, offer, configs("v6e-8", "us-east5-a", "tpu-ubuntu2204-base", flex), kNow);
  EXPECT_TRUE(offered.problems.empty()) << only_problem(offered);
  // With several zones, one that has it is enough: the others are refused when asked.
  const auto either = check_zone_offers(
      store, offer, configs("v6e-8", "[europe-west4-a, us-east5-a]", "tpu-ubuntu2204-base", flex), kNow);
  EXPECT_TRUE(either.problems.empty()) << only_problem(either);
}

// Each provisioning model draws on its own pool; best-effort has a quota of its own and runs on spot's chips.
TEST(ZoneOffers, EachProvisioningModelIsCheckedAgainstItsOwnTier) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  auto offer = cloud.offer();
  offer.tiers = mock_tiers();
  for (const char* pricing : {"spot", "preemptible", "ondemand", "best-effort"}) {
    const auto check = check_zone_offers(
        store, offer,
        configs("v4-8", "us-central2-b", "tpu-ubuntu2204-base", "  pricing: " + std::string(pricing) + "\n"), kNow);
    EXPECT_TRUE(check.problems.empty()) << pricing << ": " << only_problem(check);
  }
  offer.tiers["us-central2-b"]["v4"] = {"spot", "on_demand"};
  const auto no_best_effort = check_zone_offers(
      store, offer, configs("v4-8", "us-central2-b", "tpu-ubuntu2204-base", "  pricing: best-effort\n"), kNow);
  EXPECT_EQ(only_problem(no_best_effort), "offers.yaml:7:12: tpu.pricing: v4 best-effort is not offered in "
                                          "us-central2-b (us-central2-b has v4 on-demand and spot only)");
  offer.tiers["us-central2-b"]["v4"] = {"best_effort", "on_demand"};
  const auto no_spot = check_zone_offers(
      store, offer, configs("v4-8", "us-central2-b", "tpu-ubuntu2204-base", "  pricing: best-effort\n"), kNow);
  EXPECT_NE(only_problem(no_spot).find("best-effort runs on the spot pool's chips"), std::string::npos)
      << only_problem(no_spot);
  offer.tiers["us-central2-b"]["v4"] = {"on_demand"};
  const auto no_preemptible = check_zone_offers(
      store, offer, configs("v4-8", "us-central2-b", "tpu-ubuntu2204-base", "  pricing: preemptible\n"), kNow);
  EXPECT_NE(only_problem(no_preemptible).find("tpu.pricing: v4 spot is not offered in us-central2-b"),
            std::string::npos)
      << only_problem(no_preemptible);
  EXPECT_EQ(cloud.reservation_requests, 0) << "reservations are asked only for a config that needs one";
}

// tpu.slices: the slices of a multislice config together need that many times the accelerator's chips, which must fit
// in what the zone has of the tier (best-effort: the spot pool's chips) and in the project's quota there; one slice is
// left to the cloud, as before.
TEST(ZoneOffers, SlicesThatTogetherNeedMoreChipsThanTheZoneOrTheQuotaHoldAreAProblemAtSlices) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  auto offer = cloud.offer();
  offer.tiers = mock_tiers();
  offer.capacity["us-central2-b"]["v4"] = {{"spot", {32, 24}}, {"on_demand", {16, 16}}, {"best_effort", {0, 64}}};
  const auto check = [&](const std::string& more) {
    return check_zone_offers(store, offer, configs("v4-16", "us-central2-b", "tpu-ubuntu2204-base", more), kNow);
  };
  // v4-16 is 8 chips: three slices fit the spot quota of 24, four do not.
  EXPECT_TRUE(check("  slices: 3\n").problems.empty()) << only_problem(check("  slices: 3\n"));
  EXPECT_EQ(only_problem(check("  slices: 4\n")),
            "offers.yaml:7:11: tpu.slices: 4 slices of v4-16 are 32 chips, more than the project's quota of v4 spot "
            "in us-central2-b (24 chips) (at most 3 slices of v4-16 fit: ask for fewer slices, or for more quota)");
  EXPECT_EQ(only_problem(check("  slices: 5\n")),
            "offers.yaml:7:11: tpu.slices: 5 slices of v4-16 are 40 chips, more than us-central2-b has of v4 spot (32 "
            "chips) (at most 4 slices of v4-16 fit: ask for fewer slices, or pick a zone with more v4 chips)");
  EXPECT_EQ(only_problem(check("  pricing: ondemand\n  slices: 3\n")),
            "offers.yaml:8:11: tpu.slices: 3 slices of v4-16 are 24 chips, more than us-central2-b has of v4 "
            "on-demand (16 chips) (at most 2 slices of v4-16 fit: ask for fewer slices, or pick a zone with more v4 "
            "chips)");
  // Best-effort runs on the spot pool's chips, with a quota of its own.
  EXPECT_TRUE(check("  pricing: best-effort\n  slices: 4\n").problems.empty());
  EXPECT_NE(only_problem(check("  pricing: best-effort\n  slices: 5\n"))
                .find("more than us-central2-b has of v4 best-effort (32 chips, the spot pool's)"),
            std::string::npos)
      << only_problem(check("  pricing: best-effort\n  slices: 5\n"));
  // A pool drained for now (0 chips) sets no bound: a request waits for it. Nor does a zone the cloud says nothing of.
  offer.capacity["us-central2-b"]["v4"]["spot"] = {0, 0};
  EXPECT_TRUE(check("  slices: 8\n").problems.empty()) << only_problem(check("  slices: 8\n"));
  offer.capacity.clear();
  EXPECT_TRUE(check("  slices: 64\n").problems.empty());
  // One slice bigger than the pool is the cloud's to judge, as it always was.
  offer.capacity["us-central2-b"]["v4"] = {{"spot", {4, 4}}};
  EXPECT_TRUE(check("").problems.empty()) << only_problem(check(""));
  EXPECT_NE(only_problem(check("  slices: 2\n")).find("not one slice of v4-16 fits"), std::string::npos)
      << only_problem(check("  slices: 2\n"));
}

// tpu.reservation, by its bare id or its full name, must be one the zone has (reservations.list, through v2alpha1).
TEST(ZoneOffers, AReservationTheZoneDoesNotHaveIsAProblemAtTheReservation) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  const auto with = [&](const std::string& reservation, const std::string& accelerator = "v4-8",
                        const std::string& zone = "us-central2-b") {
    return check_zone_offers(
        store, cloud.offer(),
        configs(accelerator, zone, "tpu-ubuntu2204-base", "  pricing: reserved\n  reservation: " + reservation + "\n"),
        kNow);
  };
  EXPECT_EQ(only_problem(with("v4-reservatoin")),
            "offers.yaml:8:16: tpu.reservation: us-central2-b has no reservation 'v4-reservatoin' (reservations.list) "
            "(us-central2-b has v4-reservation (v4, 64 chips))");
  EXPECT_EQ(cloud.reservation_requests, 1);
  EXPECT_EQ(only_problem(with("v4-reservation")), "(none)");
  EXPECT_EQ(only_problem(with("projects/p/locations/us-central2-b/reservations/v4-reservation")), "(none)");
  EXPECT_NE(only_problem(with("projects/p/locations/us-central2-b/reservations/gone"))
                .find("tpu.reservation: us-central2-b has no reservation 'gone'"),
            std::string::npos);
  EXPECT_EQ(only_problem(with("projects/p/locations/us-central2-b/reservations/-")), "(none)")
      << "any of the project's";
  // Another project's reservation (shared with this one) is not in this project's listing: not judged.
  EXPECT_EQ(only_problem(with("projects/other/locations/us-central2-b/reservations/theirs")), "(none)");
  // A reservation of another generation cannot hold the slice.
  EXPECT_EQ(only_problem(with("v6e-reservation", "v4-8", "us-east5-a")),
            "offers.yaml:8:16: tpu.reservation: reservation 'v6e-reservation' in us-east5-a holds no v4 chips "
            "(v6e-reservation holds V6E chips; `jobman reservations` lists the project's reservations)");
  EXPECT_EQ(cloud.reservation_requests, 7) << "asked every time: what a zone has changes";
}

// Reserved capacity without a reservation named needs the zone to have one of the project's, of the generation.
TEST(ZoneOffers, ReservedPricingWhereTheProjectHasNoReservationIsAProblemAtPricing) {
  FakeCloud cloud;
  auto store = store::JobStore::open_in_memory();
  auto offer = cloud.offer();
  offer.tiers = mock_tiers();
  const auto none = check_zone_offers(
      store, offer, configs("v6e-8", "europe-west4-a", "tpu-ubuntu2204-base", "  pricing: reserved\n"), kNow);
  EXPECT_EQ(only_problem(none),
            "offers.yaml:7:12: tpu.pricing: europe-west4-a has no reservation of the project (reservations.list) "
            "(reserved capacity comes only from a reservation: pick a zone that has one (`jobman reservations` lists "
            "them), or another pricing)")
      << "one problem: the listing judged it, not the tiers too";
  const auto other_generation = check_zone_offers(
      store, offer, configs("v4-8", "us-east5-a", "tpu-ubuntu2204-base", "  pricing: reserved\n"), kNow);
  EXPECT_EQ(only_problem(other_generation),
            "offers.yaml:7:12: tpu.pricing: no reservation in us-east5-a holds v4 chips (reservations.list) "
            "(us-east5-a has v6e-reservation (v6e, 64 chips))");
  const auto reserved = check_zone_offers(
      store, offer, configs("v4-8", "us-central2-b", "tpu-ubuntu2204-base", "  pricing: reserved\n"), kNow);
  EXPECT_TRUE(reserved.problems.empty()) << only_problem(reserved);
  EXPECT_NE(reserved.note.find("reservations asked in us-central2-b"), std::string::npos) << reserved.note;
  // On-demand with tpu.reserved (gcloud's --reserved) asks for reserved capacity too.
  const auto flagged = check_zone_offers(
      store, offer,
      configs("v6e-8", "europe-west4-a", "tpu-ubuntu2204-base", "  pricing: ondemand\n  flags: [--reserved]\n"), kNow);
  EXPECT_EQ(flagged.problems.size(), 1U) << only_problem(flagged);
  EXPECT_EQ(flagged.problems.at(0).where.key_path, "tpu.flags");
  EXPECT_EQ(flagged.problems.at(0).where.line, 8);
}

// A cloud that cannot list reservations (an endpoint without v2alpha1) leaves the reservation unchecked, and says so.
TEST(ZoneOffers, ReservationsThatCannotBeListedAreAWarningNotAProblem) {
  FakeCloud cloud;
  cloud.no_v2alpha1 = true;
  auto store = store::JobStore::open_in_memory();
  const auto check = check_zone_offers(
      store, cloud.offer(),
      configs("v4-8", "us-central2-b", "tpu-ubuntu2204-base", "  pricing: reserved\n  reservation: anything\n"), kNow);
  EXPECT_TRUE(check.problems.empty()) << only_problem(check);
  ASSERT_EQ(check.warnings.size(), 1U);
  EXPECT_NE(check.warnings[0].find("the reservation asked for in us-central2-b could not be checked"),
            std::string::npos)
      << check.warnings[0];
  EXPECT_NE(check.warnings[0].find("v2alpha1"), std::string::npos) << check.warnings[0];
  EXPECT_EQ(check.source, OfferSource::cloud) << "the zone's catalog itself was asked";
}

} // namespace core_zone_offers_test
} // namespace jobman::core
