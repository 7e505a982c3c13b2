// Where the data is: a bucket's place against a zone (regions, dual-regions, multi-regions, continents), the price of
// reading across from the price table, the warning at gcsfuse.bucket_name with buckets.get answered once a day, and
// candidates ranked near the data first.
#include "jobman/config/loader.hpp"
#include "jobman/core/bucket_transfers.hpp"
#include "jobman/core/data_locality.hpp"

#include <gtest/gtest.h>
#include <string>

namespace jobman::core {
namespace core_data_locality_test {

using nlohmann::json;

constexpr std::int64_t kNow = 1'800'000'000'000;

store::BucketPlace place(const std::string& location, const std::string& type) {
  return store::BucketPlace{"test", "data", location, type, "STANDARD", kNow};
}

cloud::HttpResponse reply(int status, const json& body) {
  cloud::HttpResponse response;
  response.status = status;
  response.body = body.dump();
  return response;
}

// Cloud Storage with three buckets: eu-data in EUROPE-WEST4, us-data in the US multi-region, nam4-data in the NAM4
// dual-region; any other is 404, and `denied` answers 403 for every bucket. Counts the requests.
class FakeStorage {
public:
  FakeStorage() {
    cloud::TpuClientOptions options;
    options.endpoint = "http://127.0.0.1:1/v2/";
    options.storage_endpoint = "http://127.0.0.1:1/storage/v1/";
    options.sleep = [](std::chrono::milliseconds) {};
    options.jitter = [] { return 0.5; };
    options.retry.max_attempts = 1;
    options.transport = [this](const cloud::HttpRequest& request) {
      ++requests;
      last_url = request.url;
      if (denied) {
        return reply(403, {{"error", {{"code", 403}, {"message", "caller does not have storage.buckets.get access"}}}});
      }
      const auto bucket = [](const std::string& location, const std::string& type) {
        return json{
            {"kind", "storage#bucket"}, {"location", location}, {"locationType", type}, {"storageClass", "STANDARD"}};
      };
      if (request.url.find("/b/eu-data?") != std::string::npos) {
        return reply(200, bucket("EUROPE-WEST4", "region"));
      }
      if (request.url.find("/b/us-data?") != std::string::npos) {
        return reply(200, bucket("US", "multi-region"));
      }
      if (request.url.find("/b/nam4-data?") != std::string::npos) {
        return reply(200, bucket("NAM4", "dual-region"));
      }
      return reply(404, {{"error", {{"code", 404}, {"message", "The specified bucket does not exist."}}}});
    };
    client = std::make_shared<cloud::TpuClient>(
        std::make_shared<cloud::CachedTokenSource>(cloud::make_static_token_source("t", "test")), options);
  }

  OfferCloud offer() const { return OfferCloud{"http://fake/", "p", client, "", {}, {}}; }

  int requests = 0;
  bool denied = false;
  std::string last_url;
  std::shared_ptr<cloud::TpuClient> client;
};

// A config in `zone` (a name or a flow list) mounting `bucket` (written on line 8), with `more` gcsfuse lines.
std::vector<config::JobConfig> configs(const std::string& zone, const std::string& bucket,
                                       const std::string& more = "") {
  return config::parse_job_configs("job:\n  name: data\ntpu:\n  accelerator: v4-8\n  zone: " + zone +
                                       "\n  pricing: spot\ngcsfuse:\n  bucket_name: " + bucket +
                                       "\n  mount_path: /mnt/data\n" + more + "command:\n  cmd: echo\n",
                                   "data.yaml", {});
}

// gcsfuse.expected_read_gb: a number of GB, 0 or more, kept through the job's snapshot; bucket_name's place is kept
// for the warnings.
TEST(DataLocality, TheExpectedReadIsReadKeptAndRefusedBelowZero) {
  const auto c = configs("us-central2-b", "eu-data", "  expected_read_gb: 12.5\n").front();
  ASSERT_TRUE(c.gcsfuse);
  EXPECT_EQ(c.gcsfuse->expected_read_gb, 12.5);
  EXPECT_EQ(c.gcsfuse->bucket_origin.line, 8);
  EXPECT_EQ(c.gcsfuse->bucket_origin.key_path, "gcsfuse.bucket_name");
  const auto again = config::parse_job_configs(c.resolved_yaml, "snapshot", {}).front();
  EXPECT_EQ(again.gcsfuse->expected_read_gb, 12.5);
  EXPECT_FALSE(configs("us-central2-b", "eu-data").front().gcsfuse->expected_read_gb);
  try {
    configs("us-central2-b", "eu-data", "  expected_read_gb: -1\n");
    FAIL() << "a negative read is refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.yaml:10:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gcsfuse.expected_read_gb"), std::string::npos) << e.what();
  }
}

TEST(DataLocality, ZonesRegionsAndContinents) {
  EXPECT_EQ(region_of_zone("us-central2-b"), "us-central2");
  EXPECT_EQ(region_of_zone("europe-west4"), "europe-west4") << "a region stays itself";
  EXPECT_EQ(continent_of("us-central2"), "north-america");
  EXPECT_EQ(continent_of("northamerica-northeast1"), "north-america");
  EXPECT_EQ(continent_of("europe-west4-a"), "europe");
  EXPECT_EQ(continent_of("australia-southeast1"), "oceania");
  EXPECT_EQ(continent_of("me-west1"), "middle-east");
  EXPECT_EQ(continent_of("mars-north1"), "");
}

TEST(DataLocality, NearnessOfRegionsDualRegionsAndMultiRegions) {
  EXPECT_EQ(nearness(place("EUROPE-WEST4", "region"), "europe-west4-a"), Nearness::same_region);
  EXPECT_EQ(nearness(place("EUROPE-WEST4", "region"), "europe-west1-b"), Nearness::same_continent);
  EXPECT_EQ(nearness(place("EUROPE-WEST4", "region"), "us-central2-b"), Nearness::other_continent);
  EXPECT_EQ(nearness(place("NAM4", "dual-region"), "us-east1-d"), Nearness::same_region) << "NAM4 holds us-east1";
  EXPECT_EQ(nearness(place("NAM4", "dual-region"), "us-central2-b"), Nearness::same_continent);
  EXPECT_EQ(nearness(place("US-EAST1+US-CENTRAL2", "dual-region"), "us-central2-b"), Nearness::same_region)
      << "a configurable dual-region's own regions";
  EXPECT_EQ(nearness(place("US", "multi-region"), "us-central2-b"), Nearness::same_continent)
      << "a multi-region is never the slice's region";
  EXPECT_EQ(nearness(place("EU", "multi-region"), "us-central2-b"), Nearness::other_continent);
  EXPECT_EQ(nearness(place("MARS1", "region"), "us-central2-b"), Nearness::unknown);
  EXPECT_EQ(describe_place(place("US", "multi-region")), "the US multi-region");
  EXPECT_EQ(describe_place(place("NAM4", "dual-region")), "dual-region NAM4 (us-central1 and us-east1)");
  EXPECT_EQ(describe_place(place("EUROPE-WEST4", "region")), "europe-west4");
}

TEST(DataLocality, TheRateOfReadingAcrossComesFromThePriceTable) {
  const auto prices = config::builtin_prices();
  EXPECT_FALSE(prices.transfer.source.empty()) << "the rates name their source";
  EXPECT_EQ(transfer_per_gib(prices.transfer, place("EUROPE-WEST4", "region"), "europe-west4-a"), 0.0);
  EXPECT_EQ(transfer_per_gib(prices.transfer, place("US-EAST1", "region"), "us-central2-b"),
            prices.transfer.same_continent.at("default"));
  EXPECT_EQ(transfer_per_gib(prices.transfer, place("EUROPE-WEST4", "region"), "us-central2-b"),
            prices.transfer.between_continents.at("default"));
  // Between continents the higher end's rate applies.
  EXPECT_EQ(transfer_per_gib(prices.transfer, place("AUSTRALIA-SOUTHEAST1", "region"), "us-central2-b"),
            prices.transfer.between_continents.at("oceania"));
  EXPECT_EQ(transfer_per_gib(prices.transfer, place("MARS1", "region"), "us-central2-b"), std::nullopt);
}

// gcsfuse's metrics as its Prometheus port serves them: the bytes read, summed over samples, and the writes.
TEST(BucketTransfers, GcsfuseMetricsGiveTheBytesReadAndTheWrites) {
  const std::string text = "# HELP gcs_read_bytes_count The cumulative number of bytes read from GCS objects.\n"
                           "# TYPE gcs_read_bytes_count counter\n"
                           "gcs_read_bytes_count 3145745\r\n"
                           "fs_ops_count{fs_op=\"ReadFile\"} 12\n"
                           "fs_ops_count{fs_op=\"WriteFile\"} 4\n"
                           "gcs_request_count{gcs_method=\"NewReader\"} 2\n";
  const auto counts = parse_gcsfuse_metrics(text);
  ASSERT_TRUE(counts);
  EXPECT_EQ(counts->read_bytes, 3145745);
  EXPECT_EQ(counts->write_ops, 4);
  // An exporter's unit and counter suffixes, labels and a timestamp.
  const auto suffixed =
      parse_gcsfuse_metrics("gcs_read_bytes_count_bytes_total{otel_scope_name=\"gcsfuse\"} 2.5e3 1700000000000\n");
  ASSERT_TRUE(suffixed);
  EXPECT_EQ(suffixed->read_bytes, 2500);
  EXPECT_FALSE(parse_gcsfuse_metrics("fs_ops_count{fs_op=\"WriteFile\"} 4\n")) << "no bytes read: not gcsfuse's";
  EXPECT_FALSE(parse_gcsfuse_metrics("<html>404</html>"));
  EXPECT_FALSE(parse_gcsfuse_metrics("gcs_read_bytes_count -5\n"));
  EXPECT_FALSE(parse_gcsfuse_metrics("gcs_read_bytes_countless 5\n"));
}

TEST(BucketTransfers, TheWorkersThatAnsweredAreSummedAndTheCrossingPriced) {
  const std::vector<remote::WorkerRun> runs = {{0, 0, false, "gcs_read_bytes_count 1073741824\n"},
                                               {1, 0, false, "gcs_read_bytes_count 1073741824\n"},
                                               {2, 3, false, "no gcsfuse metrics on port 9447\n"}};
  const auto sum = sum_transfers(runs, 7, 2, "data", "us-central2-b");
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->read_bytes, 2LL << 30);
  EXPECT_EQ(sum->workers_read, 2);
  EXPECT_EQ(sum->workers, 3);
  EXPECT_EQ(sum->job_id, 7);
  EXPECT_EQ(sum->attempt, 2);
  EXPECT_FALSE(sum_transfers({{0, 255, false, "ssh: connect refused"}}, 7, 2, "data", "z"));
  const auto prices = config::builtin_prices();
  const auto across = transfer_cost(prices.transfer, place("EUROPE-WEST4", "region"), "us-central2-b", 2LL << 30);
  ASSERT_TRUE(across);
  EXPECT_DOUBLE_EQ(*across, 2 * prices.transfer.between_continents.at("default"));
  EXPECT_EQ(transfer_cost(prices.transfer, place("US-CENTRAL2", "region"), "us-central2-b", 2LL << 30), 0.0);
  EXPECT_EQ(transfer_cost(prices.transfer, place("MARS1", "region"), "us-central2-b", 1), std::nullopt);
  EXPECT_EQ(describe_bytes(900), "900 B");
  EXPECT_EQ(describe_bytes(3LL << 30), "3.00 GiB");
  EXPECT_EQ(describe_bytes(1536LL << 20), "1.50 GiB");
  EXPECT_EQ(describe_bytes(200LL << 20), "200.0 MiB");
}

TEST(DataLocality, ABucketInAnotherRegionIsAWarningAtItsKeyWithThePriceAndTheAnswerIsKeptForADay) {
  FakeStorage storage;
  auto store = store::JobStore::open_in_memory();
  const auto prices = config::builtin_prices();
  const auto check =
      check_data_locality(store, storage.offer(), "test", configs("us-central2-b", "eu-data"), prices, kNow);
  ASSERT_EQ(check.findings.size(), 1U);
  EXPECT_TRUE(check.notes.empty());
  const auto text = check.findings[0].format();
  EXPECT_TRUE(text.starts_with("data.yaml:8:16: gcsfuse.bucket_name: bucket 'eu-data' is in europe-west4, the slice "
                               "in us-central2: every read crosses regions, at $0.080/GiB"))
      << text;
  EXPECT_NE(text.find(prices.transfer.source), std::string::npos) << text;
  EXPECT_NE(storage.last_url.find("/storage/v1/b/eu-data?"), std::string::npos) << storage.last_url;
  EXPECT_EQ(storage.requests, 1);

  // Within the day the store answers; afterwards Cloud Storage is asked again.
  check_data_locality(store, storage.offer(), "test", configs("us-central2-b", "eu-data"), prices, kNow + 3'600'000);
  EXPECT_EQ(storage.requests, 1);
  check_data_locality(store, storage.offer(), "test", configs("us-central2-b", "eu-data"), prices,
                      kNow + kBucketPlaceTtlMs);
  EXPECT_EQ(storage.requests, 2);
  const auto kept = store.zone_catalogs().bucket("test", "eu-data");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->location, "EUROPE-WEST4");
  EXPECT_EQ(kept->location_type, "region");
}

TEST(DataLocality, TheExpectedReadGivesTheCostOfAnEpoch) {
  FakeStorage storage;
  auto store = store::JobStore::open_in_memory();
  const auto check = check_data_locality(store, storage.offer(), "test",
                                         configs("us-central2-b", "eu-data", "  expected_read_gb: 1000\n"),
                                         config::builtin_prices(), kNow);
  ASSERT_EQ(check.findings.size(), 1U);
  // 1000 GB is 931.3 GiB, at $0.08.
  EXPECT_NE(check.findings[0].message.find("about $74.51 an epoch of 1000 GB"), std::string::npos)
      << check.findings[0].message;
}

TEST(DataLocality, ABucketInTheSlicesRegionOrAMultiRegionOfItsContinent) {
  FakeStorage storage;
  auto store = store::JobStore::open_in_memory();
  const auto prices = config::builtin_prices();
  EXPECT_TRUE(check_data_locality(store, storage.offer(), "test", configs("europe-west4-a", "eu-data"), prices, kNow)
                  .findings.empty());
  const auto multi =
      check_data_locality(store, storage.offer(), "test", configs("us-central2-b", "us-data"), prices, kNow);
  ASSERT_EQ(multi.findings.size(), 1U) << "a multi-region is never the slice's region";
  EXPECT_NE(multi.findings[0].message.find("is in the US multi-region"), std::string::npos)
      << multi.findings[0].message;
}

TEST(DataLocality, EachZoneOfAListIsComparedAndTheWarningNamesTheFarOnes) {
  FakeStorage storage;
  auto store = store::JobStore::open_in_memory();
  const auto check =
      check_data_locality(store, storage.offer(), "test", configs("[us-central2-b, europe-west4-a]", "eu-data"),
                          config::builtin_prices(), kNow);
  ASSERT_EQ(check.findings.size(), 1U);
  EXPECT_NE(check.findings[0].message.find("the slice in us-central2:"), std::string::npos)
      << check.findings[0].message;
}

TEST(DataLocality, ABucketThatCannotBeLookedUpIsANoteOnceAndTheConfigsGoThrough) {
  FakeStorage storage;
  storage.denied = true;
  auto store = store::JobStore::open_in_memory();
  auto both = configs("us-central2-b", "eu-data");
  const auto more = configs("us-central2-b", "eu-data");
  both.insert(both.end(), more.begin(), more.end());
  const auto check = check_data_locality(store, storage.offer(), "test", both, config::builtin_prices(), kNow);
  EXPECT_TRUE(check.findings.empty());
  ASSERT_EQ(check.notes.size(), 1U);
  EXPECT_NE(check.notes[0].find("cannot tell where bucket 'eu-data' is"), std::string::npos) << check.notes[0];
  EXPECT_NE(check.notes[0].find("403"), std::string::npos) << check.notes[0];
  EXPECT_EQ(storage.requests, 1);

  storage.denied = false;
  const auto missing = check_data_locality(store, storage.offer(), "test", configs("us-central2-b", "nowhere"),
                                           config::builtin_prices(), kNow);
  ASSERT_EQ(missing.notes.size(), 1U);
  EXPECT_NE(missing.notes[0].find("no bucket of that name"), std::string::npos) << missing.notes[0];
}

TEST(DataLocality, CandidatesNearTheDataComeFirstAndAnotherContinentLast) {
  const std::vector<config::Candidate> written{
      {"us-central2-b", *config::find_accelerator("v4-8"), domain::Pricing::spot},
      {"asia-east1-c", *config::find_accelerator("v4-8"), domain::Pricing::spot},
      {"europe-west4-a", *config::find_accelerator("v4-8"), domain::Pricing::spot},
      {"europe-west1-b", *config::find_accelerator("v4-8"), domain::Pricing::spot}};
  std::string why;
  const auto ranked = prefer_near_data(written, place("EUROPE-WEST4", "region"), &why);
  ASSERT_EQ(ranked.size(), 4U);
  EXPECT_EQ(ranked[0].zone, "europe-west4-a");
  EXPECT_EQ(ranked[1].zone, "europe-west1-b");
  EXPECT_EQ(ranked[2].zone, "us-central2-b") << "the other continents keep their order";
  EXPECT_EQ(ranked[3].zone, "asia-east1-c");
  EXPECT_NE(why.find("europe-west4-a first (the bucket's region)"), std::string::npos) << why;
  EXPECT_NE(why.find("only after the rest: another continent from the data"), std::string::npos) << why;

  prefer_near_data({written[2], written[3]}, place("EUROPE-WEST4", "region"), &why);
  EXPECT_EQ(why, "") << "nothing moved";
}

TEST(DataLocality, ARaceHoldsBackOtherContinentsUnlessNothingElseIsLeft) {
  const auto v4 = *config::find_accelerator("v4-8");
  std::vector<config::Candidate> race = {{"us-central2-b", v4, domain::Pricing::spot},
                                         {"europe-west4-a", v4, domain::Pricing::spot},
                                         {"asia-east1-c", v4, domain::Pricing::spot},
                                         {"europe-west1-b", v4, domain::Pricing::spot}};
  const auto why = hold_back_far(race, place("EUROPE-WEST4", "region"));
  ASSERT_EQ(race.size(), 2U);
  EXPECT_EQ(race[0].zone, "europe-west4-a");
  EXPECT_EQ(race[1].zone, "europe-west1-b") << "the same continent stays in the race";
  EXPECT_EQ(why, "v4-8 spot in us-central2-b; v4-8 spot in asia-east1-c held back, on another continent from the "
                 "data: asked only if this race is given up");

  std::vector<config::Candidate> far = {{"us-central2-b", v4, domain::Pricing::spot},
                                        {"asia-east1-c", v4, domain::Pricing::spot}};
  EXPECT_EQ(hold_back_far(far, place("EUROPE-WEST4", "region")), "");
  EXPECT_EQ(far.size(), 2U) << "with nothing near, every candidate races";
}

} // namespace core_data_locality_test
} // namespace jobman::core
