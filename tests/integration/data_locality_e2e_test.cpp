// Where the data is, end to end on the mock: its Cloud Storage API tells where a bucket is (the world config places
// eu-data in europe-west4). `create` of a job whose slice is in us-central2-b warns at gcsfuse.bucket_name, naming
// both regions and the price of reading across; --strict-locality (or the setting) refuses it with exit 2 and records
// nothing; a job free to run in us-central2-b or europe-west4-a is placed in europe-west4-a, near its data, though
// written second.
#include "jobman/store/attempts.hpp"
#include "jobman/store/events.hpp"
#include "jobman/store/jobs.hpp"
#include "support/supervisor_home.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace jobman::test {
namespace data_locality_e2e_test {

class DataLocalityTest : public SupervisorHome {
protected:
  DataLocalityTest()
      : SupervisorHome("  us-central2-b:\n    v4:\n      spot: {chips: 64}\n"
                       "  europe-west4-a:\n    v4:\n      spot: {chips: 64}\n"
                       "buckets:\n  eu-data: {location: europe-west4}\n") {}

  // A job in `zones` (a name or a YAML list) mounting eu-data; bucket_name is on line 8.
  std::string data_config(const std::string& zones, const std::string& command = "echo done") {
    static int counter = 0;
    return dir
        .write("data-" + std::to_string(++counter) + ".yaml",
               "job:\n  name: near-data\ntpu:\n  accelerator: v4-8\n  zone: " + zones +
                   "\n  pricing: spot\ngcsfuse:\n  bucket_name: eu-data\n  mount_path: ~/data\n"
                   "  expected_read_gb: 500\ncommand:\n  cmd: " +
                   command + "\nrecovery:\n  max_failures: 0\n")
        .string();
  }

  std::size_t jobs_recorded() { return db().jobs().list({}).size(); }
};

TEST_F(DataLocalityTest, ABucketInAnotherRegionIsAWarningAtCreateAndStrictLocalityRefusesIt) {
  const auto path = data_config("us-central2-b");
  const auto created = jm({"create", path});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string at = path + ":8:16: gcsfuse.bucket_name: bucket 'eu-data' is in europe-west4, the slice in "
                                "us-central2: every read crosses regions, at $";
  EXPECT_NE(created.err.find(at), std::string::npos) << created.err;
  EXPECT_NE(created.err.find("/GiB, about $"), std::string::npos) << "the cost of an epoch of 500 GB: " << created.err;
  EXPECT_NE(created.err.find("cloud.google.com/storage/pricing"), std::string::npos) << created.err;
  EXPECT_EQ(jobs_recorded(), 1U);

  const auto strict = jm({"create", path, "--strict-locality"});
  EXPECT_EQ(strict.exit_code, 2) << strict.out << strict.err;
  EXPECT_NE(strict.err.find(at), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find("refused by --strict-locality"), std::string::npos) << strict.err;
  EXPECT_EQ(jobs_recorded(), 1U) << "nothing recorded";

  const auto validated = jm({"validate", path, "--strict-locality"});
  EXPECT_EQ(validated.exit_code, 2) << validated.err;

  // The setting does what the flag does.
  auto strict_env = env;
  strict_env["JOBMAN_STRICT_LOCALITY"] = "true";
  const auto by_setting = run_jobman({"create", path}, RunOptions{strict_env, "", ""});
  EXPECT_EQ(by_setting.exit_code, 2) << by_setting.err;
  EXPECT_NE(by_setting.err.find("refused by the strict_locality setting"), std::string::npos) << by_setting.err;
  EXPECT_EQ(jobs_recorded(), 1U);

  // In the bucket's region there is nothing to say.
  const auto near = jm({"create", data_config("europe-west4-a"), "--strict-locality"});
  EXPECT_EQ(near.exit_code, 0) << near.err;
  EXPECT_EQ(near.err.find("gcsfuse.bucket_name"), std::string::npos) << near.err;
}

TEST_F(DataLocalityTest, AJobFreeToRunInEitherZoneIsPlacedNearItsData) {
  start_daemon();
  const auto id = create(data_config("[us-central2-b, europe-west4-a]"));
  const auto done = wait_for(id, 0, 120);
  const auto attempts = db().attempts().of(id);
  ASSERT_EQ(attempts.size(), 1U);
  EXPECT_EQ(attempts[0].zone, "europe-west4-a") << "both zones have room; the data is in europe-west4";
  bool said = false;
  for (const auto& e : db().events().of(id)) {
    said = said || e.message.find("the data is in europe-west4") != std::string::npos;
  }
  EXPECT_TRUE(said) << "the event says why";
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

// What a run reads through its mount is counted by the workers' gcsfuse, read by the supervisor when the attempt ends
// and priced across regions: show, the report and `jobman buckets` give the bytes, within 5% of what the command read.
TEST_F(DataLocalityTest, WhatARunReadsAcrossRegionsIsMeasuredAndPriced) {
  const std::int64_t size = 24LL << 20; // 24 MiB.
  dir.write("state/buckets/eu-data/epoch.bin", std::string(static_cast<std::size_t>(size), 'e'));
  start_daemon();
  const auto id = create(data_config("us-central2-b", "'cat ~/data/epoch.bin | wc -c'"));
  wait_for(id, 0, 120);
  const auto within = [&](std::int64_t bytes) { return std::llabs(bytes - size) <= size / 20; };

  const auto shown = jm({"show", std::to_string(id), "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const auto job = nlohmann::json::parse(shown.out);
  ASSERT_EQ(job["attempts"].size(), 1U) << shown.out;
  const auto& read = job["attempts"][0]["transfers"];
  ASSERT_EQ(read.size(), 1U) << shown.out;
  EXPECT_EQ(read[0]["bucket"], "eu-data");
  EXPECT_EQ(read[0]["zone"], "us-central2-b");
  EXPECT_EQ(read[0]["nearness"], "other-continent");
  EXPECT_TRUE(within(read[0]["read_bytes"].get<std::int64_t>())) << read.dump();

  const auto reported = jm({"report", "--json"});
  ASSERT_EQ(reported.exit_code, 0) << reported.err;
  const auto report = nlohmann::json::parse(reported.out);
  const auto& transfer = report["totals"]["data_transfer"];
  EXPECT_TRUE(within(transfer["across_region_bytes"].get<std::int64_t>())) << transfer.dump();
  ASSERT_EQ(transfer["by_bucket"].size(), 1U) << transfer.dump();
  const double per_gib = transfer["by_bucket"][0]["per_gib"].get<double>();
  EXPECT_GT(per_gib, 0.0) << "Europe to North America has a price";
  const double gib = static_cast<double>(size) / (1 << 30);
  EXPECT_NEAR(transfer["cost"].get<double>(), per_gib * gib, 0.05 * per_gib * gib);
  const auto text = jm({"report"});
  EXPECT_NE(text.out.find("Data read through gcsfuse"), std::string::npos) << text.out;

  const auto buckets = jm({"buckets", "--json"});
  ASSERT_EQ(buckets.exit_code, 0) << buckets.err;
  const auto listed = nlohmann::json::parse(buckets.out);
  ASSERT_EQ(listed["buckets"].size(), 1U) << buckets.out;
  EXPECT_EQ(listed["buckets"][0]["location"], "EUROPE-WEST4");
  EXPECT_TRUE(within(listed["buckets"][0]["read_bytes"].get<std::int64_t>())) << buckets.out;
  EXPECT_EQ(listed["buckets"][0]["zones"][0]["zone"], "us-central2-b");
  EXPECT_TRUE(eventually([&] { return mock_is_empty(); }, kPatience)) << metrics().dump();
}

} // namespace data_locality_e2e_test
} // namespace jobman::test
