// The mock cloud's world model, driven by a fake clock: every lifecycle transition without sleeping.
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/world.hpp"
#include "mock_cloud/world_store.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <optional>
#include <regex>
#include <set>

namespace world_test {

using jobman::mock::DelayDistribution;
using jobman::mock::MockConfig;
using jobman::mock::PoolConfig;
using jobman::mock::Reply;
using jobman::mock::Tier;
using jobman::mock::World;
using nlohmann::json;

constexpr std::int64_t kStart = 1'800'000'000'000;
const std::string kProject = "p";
const std::string kZone = "us-central2-b";

// Fixed delays: creating 1 s, provisioning 10 s, suspending 2 s, deleting 3 s; 64 spot and 32 on-demand v4 chips.
MockConfig test_config(double preemption_mean = 0, double maintenance_mean = 0) {
  MockConfig config;
  jobman::mock::ZoneConfig zone;
  zone.name = kZone;
  zone.pools["v4"][Tier::spot] = PoolConfig{64, 128, {}};
  zone.pools["v4"][Tier::on_demand] = PoolConfig{32, 32, {}};
  zone.pools["v5litepod"][Tier::spot] = PoolConfig{64, 64, {}};
  zone.pools["v6e"][Tier::spot] = PoolConfig{256, 256, {}};
  config.zones.push_back(zone);
  config.provisioning["default"] = DelayDistribution{DelayDistribution::Kind::fixed, 10, 0};
  config.creating_seconds = 1;
  config.suspending_seconds = 2;
  config.deleting_seconds = 3;
  config.spot_mean_seconds_between_preemptions = preemption_mean;
  config.maintenance_mean_seconds_between_events = maintenance_mean;
  return config;
}

json request(const std::string& node_id, const std::string& accelerator, bool spot, json policy = nullptr) {
  json body = {{"tpu",
                {{"nodeSpec",
                  {{{"parent", "projects/p/locations/" + kZone},
                    {"nodeId", node_id},
                    {"node", {{"acceleratorType", accelerator}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}}};
  if (spot) {
    body["spot"] = json::object();
  } else {
    body["guaranteed"] = json::object();
  }
  if (!policy.is_null()) {
    body["queueingPolicy"] = policy;
  }
  return body;
}

std::string qr_state(World& world, const std::string& id, std::int64_t now) {
  auto reply = world.get_queued_resource(kProject, kZone, id, now);
  return reply.ok() ? reply.body["state"]["state"].get<std::string>() : "GONE";
}

std::string node_state(World& world, const std::string& id, std::int64_t now) {
  auto reply = world.get_node(kProject, kZone, id, now);
  return reply.ok() ? reply.body["state"].get<std::string>() : "GONE";
}

Reply create(World& world, const std::string& id, const std::string& accelerator, bool spot, std::int64_t now,
             json policy = nullptr) {
  return world.create_queued_resource(kProject, kZone, id, "", request(id + "-node", accelerator, spot, policy), now);
}

TEST(MockWorld, WalksCreatingWaitingProvisioningActive) {
  World world(test_config(), 1, 7);
  auto op = create(world, "a", "v4-8", true, kStart);
  ASSERT_TRUE(op.ok()) << op.body.dump();
  EXPECT_FALSE(op.body["done"].get<bool>());
  EXPECT_EQ(op.body["metadata"]["@type"], "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata");
  EXPECT_EQ(qr_state(world, "a", kStart), "CREATING");
  // Capacity is free, so the request passes through the queue in the same tick.
  EXPECT_EQ(qr_state(world, "a", kStart + 1000), "PROVISIONING");
  EXPECT_EQ(node_state(world, "a-node", kStart + 1000), "CREATING");
  auto op_id = op.body["name"].get<std::string>().substr(op.body["name"].get<std::string>().rfind('/') + 1);
  auto done = world.get_operation(kProject, kZone, op_id, kStart + 1000);
  EXPECT_TRUE(done.body["done"].get<bool>());
  EXPECT_EQ(done.body["response"]["@type"], "type.googleapis.com/google.cloud.tpu.v2.QueuedResource");
  EXPECT_EQ(qr_state(world, "a", kStart + 10'999), "PROVISIONING");
  EXPECT_EQ(qr_state(world, "a", kStart + 11'000), "ACTIVE");
  auto node = world.get_node(kProject, kZone, "a-node", kStart + 11'000).body;
  EXPECT_EQ(node["state"], "READY");
  EXPECT_EQ(node["health"], "HEALTHY");
  EXPECT_EQ(node["schedulingConfig"]["spot"], true);
  EXPECT_EQ(node["name"], "projects/p/locations/us-central2-b/nodes/a-node");
  EXPECT_EQ(node["queuedResource"], "projects/p/locations/us-central2-b/queuedResources/a");
}

TEST(MockWorld, WorkerEndpointsOnePerHost) {
  World world(test_config(), 1, 7);
  std::vector<std::pair<std::string, std::size_t>> cases = {
      {"v4-8", 1}, {"v4-32", 4}, {"v5litepod-16", 4}, {"v6e-256", 64}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto id = "e" + std::to_string(i);
    ASSERT_TRUE(create(world, id, cases[i].first, true, kStart).ok());
  }
  world.tick(kStart + 20'000);
  // Real ssh and gcloud connect wherever the API says: every address is this machine's loopback, and each is one
  // host's alone.
  const std::regex internal("127\\.(1[6-9]|[2-9][0-9]|1[01][0-9]|12[0-7])\\.[0-9]{1,3}\\.[0-9]{1,3}");
  const std::regex external("127\\.(1[3-9][0-9]|2[0-4][0-9]|25[0-4])\\.[0-9]{1,3}\\.[0-9]{1,3}");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto node = world.get_node(kProject, kZone, "e" + std::to_string(i) + "-node", kStart + 20'000).body;
    ASSERT_EQ(node["networkEndpoints"].size(), cases[i].second) << cases[i].first;
    for (const auto& endpoint : node["networkEndpoints"]) {
      const auto address = endpoint["ipAddress"].get<std::string>();
      const auto external_address = endpoint["accessConfig"]["externalIp"].get<std::string>();
      EXPECT_TRUE(std::regex_match(address, internal)) << address;
      EXPECT_TRUE(std::regex_match(external_address, external)) << external_address;
      EXPECT_TRUE(seen.insert(address).second) << address;
      EXPECT_TRUE(seen.insert(external_address).second) << external_address;
    }
  }
}

TEST(MockWorld, QueuesFifoPerZoneAndTierAndReleasesOnDelete) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "first", "v4-128", true, kStart).ok()); // 64 chips: the whole spot pool.
  ASSERT_TRUE(create(world, "second", "v4-32", true, kStart).ok());
  ASSERT_TRUE(create(world, "third", "v4-8", true, kStart).ok());
  ASSERT_TRUE(create(world, "ondemand", "v4-8", false, kStart).ok());
  world.tick(kStart + 1000);
  EXPECT_EQ(qr_state(world, "first", kStart + 1000), "PROVISIONING");
  EXPECT_EQ(qr_state(world, "second", kStart + 1000), "WAITING_FOR_RESOURCES");
  EXPECT_EQ(qr_state(world, "third", kStart + 1000), "WAITING_FOR_RESOURCES");
  EXPECT_EQ(qr_state(world, "ondemand", kStart + 1000), "PROVISIONING"); // Its own tier's queue.
  world.tick(kStart + 11'000);
  auto refused = world.delete_queued_resource(kProject, kZone, "first", false, "", kStart + 11'000);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.body["error"]["status"], "FAILED_PRECONDITION");
  ASSERT_TRUE(world.delete_queued_resource(kProject, kZone, "first", true, "", kStart + 11'000).ok());
  EXPECT_EQ(qr_state(world, "first", kStart + 12'000), "DELETING");
  EXPECT_EQ(qr_state(world, "second", kStart + 12'000), "WAITING_FOR_RESOURCES");
  EXPECT_EQ(qr_state(world, "first", kStart + 14'000), "GONE");
  EXPECT_EQ(node_state(world, "first-node", kStart + 14'000), "GONE");
  EXPECT_EQ(qr_state(world, "second", kStart + 14'000), "PROVISIONING");
  EXPECT_EQ(qr_state(world, "third", kStart + 14'000), "PROVISIONING");
}

TEST(MockWorld, ValidUntilDurationExpiresWhileWaiting) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "big", "v4-128", true, kStart).ok());
  ASSERT_TRUE(create(world, "late", "v4-8", true, kStart, {{"validUntilDuration", "30s"}}).ok());
  EXPECT_EQ(qr_state(world, "late", kStart + 29'000), "WAITING_FOR_RESOURCES");
  auto failed = world.get_queued_resource(kProject, kZone, "late", kStart + 30'000).body;
  EXPECT_EQ(failed["state"]["state"], "FAILED");
  EXPECT_EQ(failed["state"]["stateInitiator"], "SERVICE");
  EXPECT_TRUE(failed["state"]["failedData"]["error"].contains("message"));
  // Reset puts it back in the queue.
  ASSERT_TRUE(world.reset_queued_resource(kProject, kZone, "late", kStart + 31'000).ok());
  EXPECT_EQ(qr_state(world, "late", kStart + 31'000), "WAITING_FOR_RESOURCES");
  EXPECT_EQ(world.reset_queued_resource(kProject, kZone, "big", kStart + 31'000).status, 400);
}

TEST(MockWorld, PreemptionSuspendsFreesCapacityAndNeverRequeues) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "a", "v4-128", true, kStart).ok());
  ASSERT_TRUE(create(world, "b", "v4-128", true, kStart).ok());
  EXPECT_EQ(qr_state(world, "a", kStart + 11'000), "ACTIVE");
  ASSERT_TRUE(world.preempt_node(kProject, kZone, "a-node", kStart + 12'000).ok());
  EXPECT_EQ(node_state(world, "a-node", kStart + 12'000), "PREEMPTED");
  EXPECT_EQ(qr_state(world, "a", kStart + 12'000), "SUSPENDING");
  EXPECT_EQ(qr_state(world, "b", kStart + 13'000), "WAITING_FOR_RESOURCES");
  auto suspended = world.get_queued_resource(kProject, kZone, "a", kStart + 14'000).body;
  EXPECT_EQ(suspended["state"]["state"], "SUSPENDED");
  EXPECT_EQ(suspended["state"]["stateInitiator"], "SERVICE");
  EXPECT_EQ(qr_state(world, "b", kStart + 14'000), "PROVISIONING");
  EXPECT_EQ(qr_state(world, "a", kStart + 1'000'000), "SUSPENDED");
  EXPECT_EQ(world.preempt_node(kProject, kZone, "a-node", kStart + 1'000'000).status, 400);
}

TEST(MockWorld, RandomSpotPreemptionAndOnDemandMaintenance) {
  World world(test_config(3600, 3600), 1, 11);
  ASSERT_TRUE(create(world, "spot", "v4-8", true, kStart).ok());
  ASSERT_TRUE(create(world, "od", "v4-8", false, kStart).ok());
  std::int64_t t = kStart;
  while (t < kStart + 100LL * 3600 * 1000 &&
         (qr_state(world, "spot", t) != "SUSPENDED" || qr_state(world, "od", t) != "SUSPENDED")) {
    t += 60'000;
  }
  EXPECT_EQ(node_state(world, "spot-node", t), "PREEMPTED");
  EXPECT_EQ(node_state(world, "od-node", t), "TERMINATED");
}

TEST(MockWorld, AMaintenanceIsAnnouncedItsNoticeBeforeItStopsTheSlice) {
  auto config = test_config(0, 3600);
  config.maintenance_notice_seconds = 600;
  World world(config, 1, 11);
  ASSERT_TRUE(create(world, "od", "v4-8", false, kStart).ok());
  std::int64_t t = kStart + 11'000;
  ASSERT_EQ(node_state(world, "od-node", t), "READY");
  // Minute by minute: the node announces the maintenance, then (ten minutes later) its slice is stopped.
  std::optional<std::int64_t> announced_at;
  std::string window;
  while (t < kStart + 100LL * 3600 * 1000 && qr_state(world, "od", t) == "ACTIVE") {
    const auto node = world.get_node(kProject, kZone, "od-node", t).body;
    if (!announced_at && node.contains("upcomingMaintenance")) {
      announced_at = t;
      window = node["upcomingMaintenance"]["windowStartTime"].get<std::string>();
      EXPECT_EQ(node["upcomingMaintenance"]["type"], "SCHEDULED");
      EXPECT_EQ(node["upcomingMaintenance"]["maintenanceStatus"], "PENDING");
      EXPECT_EQ(node["upcomingMaintenance"]["latestWindowStartTime"], window);
    }
    t += 60'000;
  }
  ASSERT_TRUE(announced_at) << "stopped without notice";
  const auto opens = jobman::util::parse_utc(window);
  ASSERT_TRUE(opens);
  EXPECT_LE(*opens - *announced_at, 600'000) << "announced no earlier than its notice";
  // Within a minute (a step of the loop) of its notice, or of the slice coming up when the draw fell within it.
  EXPECT_LE(*announced_at - std::max(kStart + 11'000, *opens - 600'000), 60'000);
  EXPECT_LE(t - *opens, 60'000) << "stopped when its window opened";
  EXPECT_EQ(node_state(world, "od-node", t), "TERMINATED");
  EXPECT_FALSE(world.get_node(kProject, kZone, "od-node", t).body.contains("upcomingMaintenance"));
}

TEST(MockWorld, AnAdminScheduledMaintenanceIsAnnouncedAtOnce) {
  World world(test_config(), 1, 11);
  ASSERT_TRUE(create(world, "s", "v4-8", true, kStart).ok());
  const auto t = kStart + 11'000;
  EXPECT_EQ(world.schedule_maintenance(kProject, kZone, "s-node", 120, kStart + 5'000).status, 400) << "not READY";
  const auto reply = world.schedule_maintenance(kProject, kZone, "s-node", 120, t);
  ASSERT_TRUE(reply.ok()) << reply.body.dump();
  EXPECT_EQ(reply.body["upcomingMaintenance"]["windowStartTime"], jobman::util::format_utc(t + 120'000));
  EXPECT_EQ(qr_state(world, "s", t + 119'999), "ACTIVE");
  EXPECT_EQ(node_state(world, "s-node", t + 120'000), "TERMINATED");
  EXPECT_EQ(world.schedule_maintenance(kProject, kZone, "none", 120, t).status, 404);
}

TEST(MockWorld, QuotaExceededIs429AndErrorsHaveStatus) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "a", "v4-256", true, kStart).ok()); // 128 chips = the spot quota.
  auto over = create(world, "b", "v4-8", true, kStart);
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(over.body["error"]["status"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(create(world, "a", "v4-8", true, kStart).status, 409);
  auto unknown = create(world, "c", "v9-8", true, kStart);
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.body["error"]["status"], "INVALID_ARGUMENT");
  EXPECT_EQ(world.get_queued_resource(kProject, kZone, "zzz", kStart).status, 404);
}

TEST(MockWorld, RepeatedRequestIdReturnsTheFirstOperation) {
  World world(test_config(), 1, 7);
  auto body = request("n", "v4-8", true);
  auto first = world.create_queued_resource(kProject, kZone, "a", "req-1", body, kStart);
  auto again = world.create_queued_resource(kProject, kZone, "a", "req-1", body, kStart + 5);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first.body["name"], again.body["name"]);
}

TEST(MockWorld, FaultInjectionIsDeterministicForASeed) {
  auto draws = [](std::uint64_t seed) {
    World world(test_config(), 1, seed);
    world.set_faults({0.3, {429, 503}, 0});
    std::vector<int> out;
    for (int i = 0; i < 200; ++i) {
      out.push_back(world.decide_fault().fail_status);
    }
    return out;
  };
  auto a = draws(5);
  EXPECT_EQ(a, draws(5));
  EXPECT_NE(a, draws(6));
  auto failures = std::count_if(a.begin(), a.end(), [](int s) { return s != 0; });
  EXPECT_GT(failures, 30);
  EXPECT_LT(failures, 90);
  World cleared(test_config(), 1, 5);
  cleared.set_faults({0.5, {503}, 0});
  cleared.set_faults({0, {}, 0});
  EXPECT_EQ(cleared.decide_fault().fail_status, 0);
}

TEST(MockWorld, CapacityChangeAdmitsWaitingResources) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(world.set_capacity(kZone, "v4", Tier::spot, 0, std::nullopt, kStart).ok());
  ASSERT_TRUE(create(world, "a", "v4-8", true, kStart).ok());
  EXPECT_EQ(qr_state(world, "a", kStart + 5000), "WAITING_FOR_RESOURCES");
  ASSERT_TRUE(world.set_capacity(kZone, "v4", Tier::spot, 8, std::nullopt, kStart + 6000).ok());
  EXPECT_EQ(qr_state(world, "a", kStart + 6000), "PROVISIONING");
}

TEST(MockWorld, SnapshotRestoresResourcesAndNodes) {
  World world(test_config(), 1, 7);
  ASSERT_TRUE(create(world, "a", "v4-32", true, kStart).ok());
  world.tick(kStart + 11'000);
  World restored(test_config(), 1, 7);
  restored.restore(world.snapshot());
  EXPECT_EQ(qr_state(restored, "a", kStart + 11'000), "ACTIVE");
  EXPECT_EQ(restored.get_node(kProject, kZone, "a-node", kStart + 11'000).body,
            world.get_node(kProject, kZone, "a-node", kStart + 11'000).body);
}

// The first twenty seconds of a world: creates (one with a requestId), provisioning, a delete, a faulty node.
void first_twenty_seconds(World& world) {
  ASSERT_TRUE(create(world, "a", "v4-32", true, kStart).ok());
  ASSERT_TRUE(create(world, "b", "v4-8", false, kStart).ok());
  ASSERT_TRUE(
      world.create_queued_resource(kProject, kZone, "c", "req-c", request("c-node", "v4-8", true), kStart + 100).ok());
  world.tick(kStart + 12'000);
  ASSERT_TRUE(world.delete_queued_resource(kProject, kZone, "b", true, "del-b", kStart + 13'000).ok());
  ASSERT_TRUE(world.mark_node_faulty(kProject, kZone, "a-node", kStart + 13'500).ok());
  world.tick(kStart + 20'000); // b is gone: its rows must be removed, not left behind.
  ASSERT_EQ(qr_state(world, "b", kStart + 20'000), "GONE");
}

// The number of records a snapshot holds: resources and machines.
std::size_t resource_count(const json& snapshot) {
  return snapshot["queuedResources"].size() + snapshot["nodes"].size() + snapshot["operations"].size() +
         snapshot["machines"].size() + snapshot["computeProjects"].size() + snapshot["computeOperations"].size() +
         snapshot["osloginUsers"].size();
}

// Hours of spot preemptions, each answered by deleting the suspended resource and creating it again.
void churn(World& world, std::int64_t from, std::int64_t to) {
  for (std::int64_t t = from; t < to; t += 7'000) {
    world.tick(t);
    for (const auto* id : {"a", "c"}) {
      if (qr_state(world, id, t) == "SUSPENDED") {
        ASSERT_TRUE(world.delete_queued_resource(kProject, kZone, id, false, "", t).ok());
      } else if (qr_state(world, id, t) == "GONE") {
        ASSERT_TRUE(create(world, id, "v4-8", true, t).ok());
      }
    }
  }
}

TEST(MockWorldStore, ARestartedWorldIsTheSameWorldAndMakesTheSameDraws) {
  jobman::test::TempDir dir;
  // Spot preemptions and maintenance at random, so the generator's state matters after a restart.
  World uninterrupted(test_config(600, 900), 1, 11);
  first_twenty_seconds(uninterrupted);
  const auto db = dir / "state.db";
  {
    World before(test_config(600, 900), 1, 11);
    before.attach_store(db, kStart);
    first_twenty_seconds(before);
    // The store holds a row for every resource and none for those gone.
    EXPECT_EQ(jobman::mock::WorldStore(db).load().records.size(), resource_count(before.snapshot()));
  }
  // A different seed: the stored generator state must win.
  World restarted(test_config(600, 900), 1, 99);
  restarted.attach_store(db, kStart + 20'000);
  EXPECT_EQ(restarted.snapshot(), uninterrupted.snapshot());
  EXPECT_TRUE(restarted.node_faulty(kProject, kZone, "a-node"));
  // A repeated requestId still finds its operation.
  auto again =
      restarted.create_queued_resource(kProject, kZone, "c", "req-c", request("c-node", "v4-8", true), kStart + 20'000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(
      again.body["name"],
      uninterrupted.snapshot()["requestIds"]["create projects/p/locations/us-central2-b/queuedResources/c req-c"]);

  const std::int64_t end = kStart + 4 * 3'600'000;
  churn(uninterrupted, kStart + 21'000, end);
  churn(restarted, kStart + 21'000, end);
  const auto final_state = uninterrupted.snapshot();
  EXPECT_EQ(restarted.snapshot(), final_state);
  EXPECT_GT(final_state["nextSequence"].get<int>(), 20) << "the churn should have preempted and recreated";
  EXPECT_EQ(jobman::mock::WorldStore(db).load().records.size(), resource_count(final_state));
  // What the restarted world committed along the way restores to the same world again.
  World third(test_config(600, 900), 1, 5);
  third.attach_store(db, end - 7'000);
  EXPECT_EQ(third.snapshot(), final_state);
}

TEST(MockConfigFile, DcnGivesLatencyAndBandwidthAndRefusesBadUnits) {
  const auto bundled = jobman::mock::load_mock_config(JOBMAN_MOCK_DEFAULT_CONFIG);
  ASSERT_TRUE(bundled.dcn);
  EXPECT_EQ(bundled.dcn->latency_us, 2000U);
  EXPECT_EQ(bundled.dcn->bandwidth_bps, 25'000'000'000U);
  const std::string zones = "zones:\n  z1:\n    v4:\n      spot: {chips: 8}\n";
  EXPECT_FALSE(jobman::mock::parse_mock_config(zones, "w.yaml").dcn) << "no key, no network to emulate";
  const auto config = jobman::mock::parse_mock_config("dcn: {latency: 500us, bandwidth: 800Mbps}\n" + zones, "w.yaml");
  ASSERT_TRUE(config.dcn);
  EXPECT_EQ(config.dcn->latency_us, 500U);
  EXPECT_EQ(config.dcn->bandwidth_bps, 800'000'000U);
  EXPECT_EQ(jobman::mock::parse_mock_config("dcn: {latency: 0.01s}\n" + zones, "w.yaml").dcn->latency_us, 10'000U);
  const auto error_of = [&](const std::string& dcn) {
    try {
      (void)jobman::mock::parse_mock_config(dcn + zones, "bad.yaml");
    } catch (const jobman::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto latency = error_of("dcn: {latency: 2 parsecs}\n");
  EXPECT_NE(latency.find("bad.yaml:1"), std::string::npos) << latency;
  EXPECT_NE(latency.find("dcn.latency"), std::string::npos) << latency;
  const auto bandwidth = error_of("dcn:\n  bandwidth: 25GB\n");
  EXPECT_NE(bandwidth.find("bad.yaml:2"), std::string::npos) << bandwidth;
  EXPECT_NE(bandwidth.find("dcn.bandwidth"), std::string::npos) << bandwidth;
  EXPECT_NE(bandwidth.find("Gbps"), std::string::npos) << bandwidth;
  EXPECT_NE(error_of("dcn: {latency: -2ms}\n").find("dcn.latency"), std::string::npos);
  EXPECT_NE(error_of("dcn: {jitter: 1ms}\n").find("dcn.jitter"), std::string::npos);
}

TEST(MockConfigFile, BundledConfigLoadsAndBadKeysNameFileAndKey) {
  auto config = jobman::mock::load_mock_config(JOBMAN_MOCK_DEFAULT_CONFIG);
  ASSERT_NE(config.find_zone("us-central2-b"), nullptr);
  EXPECT_EQ(config.find_zone("us-central2-b")->pools.at("v4").at(Tier::spot).chips, 256);
  EXPECT_EQ(config.find_zone("us-central2-b")->pools.at("v4").at(Tier::on_demand).chips, 32);
  try {
    jobman::mock::parse_mock_config("zones:\n  z1:\n    v4:\n      spot: {chps: 8}\n", "bad.yaml");
    FAIL() << "expected a ConfigError";
  } catch (const jobman::ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("bad.yaml:4"), std::string::npos) << what;
    EXPECT_NE(what.find("zones.z1.v4.spot.chps"), std::string::npos) << what;
    EXPECT_NE(what.find("chips"), std::string::npos) << what;
  }
}

TEST(MockWorldState, AStateWrittenBeforeReservationsKeepsTheConfigsReservationName) {
  auto config = test_config();
  config.zones[0].pools["v4"][Tier::reserved] = PoolConfig{8, 8, "lab-v4"};
  World written(config, 1, 5);
  auto state = written.snapshot();
  for (auto& pool : state["pools"]) {
    ASSERT_TRUE(pool.contains("reservation"));
    pool.erase("reservation"); // As an older mock wrote it.
  }
  World restored(config, 1, 5);
  restored.restore(state);
  const auto listed = restored.list_reservations(kProject, kZone, {});
  ASSERT_EQ(listed.status, 200) << listed.body.dump();
  ASSERT_EQ(listed.body["reservations"].size(), 1U) << listed.body.dump();
  EXPECT_EQ(listed.body["reservations"][0]["name"], "projects/p/locations/us-central2-b/reservations/lab-v4");
}

TEST(MockConfigFile, TheProvisioningModelsPoolsAreReadAndTheirMistakesNamed) {
  const auto config = jobman::mock::load_mock_config(JOBMAN_MOCK_DEFAULT_CONFIG);
  const auto& v4 = config.find_zone("us-central2-b")->pools.at("v4");
  EXPECT_EQ(v4.at(Tier::reserved).reservation, "v4-reservation");
  EXPECT_EQ(v4.at(Tier::best_effort).chips, 0) << "its chips are the spot pool's";
  ASSERT_NE(config.find_zone("us-east5-a"), nullptr);
  EXPECT_GT(config.find_zone("us-east5-a")->pools.at("v6e").at(Tier::flex_start).chips, 0);
  const auto error_of = [](const std::string& text) {
    try {
      (void)jobman::mock::parse_mock_config(text, "bad.yaml");
    } catch (const jobman::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto without_spot = error_of("zones:\n  z1:\n    v4:\n      best_effort: {quota: 8}\n");
  EXPECT_NE(without_spot.find("zones.z1.v4.best_effort"), std::string::npos) << without_spot;
  EXPECT_NE(without_spot.find("spot pool"), std::string::npos) << without_spot;
  const auto chips =
      error_of("zones:\n  z1:\n    v4:\n      spot: {chips: 8}\n      best_effort: {chips: 8, quota: 8}\n");
  EXPECT_NE(chips.find("bad.yaml:5"), std::string::npos) << chips;
  EXPECT_NE(chips.find("zones.z1.v4.best_effort.chips"), std::string::npos) << chips;
  const auto reservation = error_of("zones:\n  z1:\n    v4:\n      reserved: {chips: 8, reservation: Lab_1}\n");
  EXPECT_NE(reservation.find("zones.z1.v4.reserved.reservation"), std::string::npos) << reservation;
  const auto tier = error_of("zones:\n  z1:\n    v4:\n      flex: {chips: 8}\n");
  EXPECT_NE(tier.find("zones.z1.v4.flex"), std::string::npos) << tier;
  EXPECT_NE(tier.find("flex_start"), std::string::npos) << tier << " (the known tiers are named)";
}

} // namespace world_test
