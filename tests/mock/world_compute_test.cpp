// Compute Engine's project in the mock: commonInstanceMetadata, its fingerprint, the operation a change returns, and
// the metadata kept across a restart.
#include "mock_cloud/world.hpp"
#include "mock_cloud/world_store.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace world_compute_test {

using jobman::mock::MockConfig;
using jobman::mock::PoolConfig;
using jobman::mock::Reply;
using jobman::mock::Tier;
using jobman::mock::World;
using nlohmann::json;

constexpr std::int64_t kStart = 1'800'000'000'000;
const std::string kProject = "lab";

MockConfig test_config() {
  MockConfig config;
  jobman::mock::ZoneConfig zone;
  zone.name = "us-central2-b";
  zone.pools["v4"][Tier::spot] = PoolConfig{16, 16, {}};
  config.zones.push_back(zone);
  return config;
}

// The Metadata a client sends: the fingerprint it read and the items it wants.
json metadata(const std::string& fingerprint, const std::vector<std::pair<std::string, std::string>>& items) {
  json out = {{"kind", "compute#metadata"}, {"fingerprint", fingerprint}, {"items", json::array()}};
  for (const auto& [key, value] : items) {
    out["items"].push_back({{"key", key}, {"value", value}});
  }
  return out;
}

std::string fingerprint_of(World& world, std::int64_t now) {
  return world.get_compute_project(kProject, now).body["commonInstanceMetadata"]["fingerprint"].get<std::string>();
}

TEST(MockComputeProject, AProjectHasEmptyMetadataWithAFingerprint) {
  World world(test_config(), 1, 7);
  const auto reply = world.get_compute_project(kProject, kStart);
  ASSERT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body["kind"], "compute#project");
  EXPECT_EQ(reply.body["name"], kProject);
  EXPECT_EQ(reply.body["selfLink"], "https://www.googleapis.com/compute/v1/projects/lab");
  EXPECT_TRUE(reply.body["id"].is_string());
  const auto& common = reply.body["commonInstanceMetadata"];
  EXPECT_EQ(common["kind"], "compute#metadata");
  EXPECT_EQ(common["fingerprint"].get<std::string>().size(), 12U) << common.dump(); // Eight bytes in base64.
  EXPECT_FALSE(common.contains("items"));
  EXPECT_TRUE(world.common_metadata(kProject).empty());
  // Every project has its own.
  EXPECT_NE(world.get_compute_project("other", kStart).body["commonInstanceMetadata"]["fingerprint"],
            common["fingerprint"]);
}

TEST(MockComputeProject, AChangeNeedsTheCurrentFingerprintAndReturnsAnOperation) {
  World world(test_config(), 1000, 7); // Propagation takes 2 simulated seconds: 2 ms here.
  const auto first = fingerprint_of(world, kStart);
  const auto stale = world.set_common_instance_metadata(kProject, metadata("AAAAAAAAAAA=", {{"a", "1"}}), kStart);
  EXPECT_EQ(stale.status, 412);
  EXPECT_EQ(stale.body["error"]["status"], "FAILED_PRECONDITION");
  EXPECT_EQ(stale.body["error"]["errors"][0]["reason"], "conditionNotMet");
  json unlocked = metadata("", {{"a", "1"}});
  unlocked.erase("fingerprint");
  EXPECT_EQ(world.set_common_instance_metadata(kProject, unlocked, kStart).status, 412);

  const auto op = world.set_common_instance_metadata(
      kProject, metadata(first, {{"ssh-keys", "me:ssh-ed25519 AAAA me"}, {"enable-oslogin", "FALSE"}}), kStart);
  ASSERT_EQ(op.status, 200) << op.body.dump();
  EXPECT_EQ(op.body["kind"], "compute#operation");
  EXPECT_EQ(op.body["status"], "RUNNING");
  EXPECT_EQ(op.body["operationType"], "compute.projects.setCommonInstanceMetadata");
  EXPECT_EQ(op.body["targetLink"], "https://www.googleapis.com/compute/v1/projects/lab");
  const auto name = op.body["name"].get<std::string>();
  EXPECT_EQ(op.body["selfLink"], "https://www.googleapis.com/compute/v1/projects/lab/global/operations/" + name);
  EXPECT_EQ(world.compute_operation_end_ms(kProject, name), kStart + 2);
  EXPECT_EQ(world.get_compute_operation(kProject, name, kStart + 1).body["status"], "RUNNING");
  const auto done = world.get_compute_operation(kProject, name, kStart + 2).body;
  EXPECT_EQ(done["status"], "DONE");
  EXPECT_EQ(done["progress"], 100);
  EXPECT_TRUE(done.contains("endTime"));
  EXPECT_EQ(world.get_compute_operation(kProject, "operation-0-0", kStart).status, 404);
  EXPECT_FALSE(world.compute_operation_end_ms(kProject, "operation-0-0"));

  // The change is there at once, in the order it was sent, with a new fingerprint.
  const auto project = world.get_compute_project(kProject, kStart).body;
  EXPECT_EQ(project["commonInstanceMetadata"]["items"],
            json::parse(R"([{"key": "ssh-keys", "value": "me:ssh-ed25519 AAAA me"},
                            {"key": "enable-oslogin", "value": "FALSE"}])"));
  const auto second = project["commonInstanceMetadata"]["fingerprint"].get<std::string>();
  EXPECT_NE(second, first);
  EXPECT_EQ(world.common_metadata(kProject),
            (std::map<std::string, std::string>{{"enable-oslogin", "FALSE"}, {"ssh-keys", "me:ssh-ed25519 AAAA me"}}));
  // The first fingerprint is stale now; setting the first contents back still changes the fingerprint.
  EXPECT_EQ(world.set_common_instance_metadata(kProject, metadata(first, {}), kStart + 5).status, 412);
  ASSERT_TRUE(world.set_common_instance_metadata(kProject, metadata(second, {}), kStart + 5).ok());
  EXPECT_NE(fingerprint_of(world, kStart + 5), first);
  EXPECT_TRUE(world.common_metadata(kProject).empty());
}

TEST(MockComputeProject, BadItemsAreRefused) {
  World world(test_config(), 1, 7);
  const auto current = fingerprint_of(world, kStart);
  const std::vector<json> bad = {
      metadata(current, {{"a", "1"}, {"a", "2"}}),      // A key twice.
      metadata(current, {{"bad key", "1"}}),            // Outside [a-zA-Z0-9-_].
      metadata(current, {{std::string(129, 'k'), ""}}), // Longer than 128.
      metadata(current, {{"big", std::string(256 * 1024 + 1, 'v')}}),
      json({{"fingerprint", current}, {"items", {{{"key", 1}, {"value", "x"}}}}}),
      json({{"fingerprint", current}, {"items", "a=1"}}),
      json("metadata"),
  };
  for (const auto& body : bad) {
    const auto reply = world.set_common_instance_metadata(kProject, body, kStart);
    EXPECT_EQ(reply.status, 400) << body.dump().substr(0, 200);
    EXPECT_EQ(reply.body["error"]["status"], "INVALID_ARGUMENT");
  }
  EXPECT_EQ(fingerprint_of(world, kStart), current);
}

TEST(MockComputeProject, ARestartedWorldKeepsTheMetadataAndItsOperations) {
  jobman::test::TempDir dir;
  const auto db = dir / "state.db";
  std::string fingerprint;
  std::string op;
  {
    World before(test_config(), 1, 7);
    before.attach_store(db, kStart);
    const auto reply = before.set_common_instance_metadata(
        kProject, metadata(fingerprint_of(before, kStart), {{"team", "lab"}}), kStart);
    ASSERT_TRUE(reply.ok()) << reply.body.dump();
    op = reply.body["name"].get<std::string>();
    fingerprint = fingerprint_of(before, kStart);
  }
  World restarted(test_config(), 1, 7);
  restarted.attach_store(db, kStart + 10'000);
  EXPECT_EQ(restarted.common_metadata(kProject), (std::map<std::string, std::string>{{"team", "lab"}}));
  EXPECT_EQ(fingerprint_of(restarted, kStart + 10'000), fingerprint);
  EXPECT_EQ(restarted.get_compute_operation(kProject, op, kStart + 10'000).body["status"], "DONE");
  EXPECT_EQ(restarted.snapshot()["computeProjects"].size(), 1U);
  // The store holds a row for the project and one for the operation.
  std::size_t compute_rows = 0;
  for (const auto& record : jobman::mock::WorldStore(db).load().records) {
    compute_rows += record["name"].get<std::string>().starts_with("compute/projects/lab") ? 1 : 0;
  }
  EXPECT_EQ(compute_rows, 2U);
  // A change after the restart needs the fingerprint from before it.
  EXPECT_TRUE(restarted.set_common_instance_metadata(kProject, metadata(fingerprint, {}), kStart + 10'000).ok());
}

} // namespace world_compute_test
