// Physical machines in the mock's world, on a fake clock: worker hosts placed on new machines while the zone has room
// and on released ones, first in, first out, once it is full,
// faulty hardware that stays with its machine, the faulty fraction, machines across a restart, and node health.
#include "jobman/util/error.hpp"
#include "mock_cloud/enum_encoding.hpp"
#include "mock_cloud/world.hpp"
#include "standalone_world.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <limits>
#include <regex>
#include <set>

namespace world_machines_test {

using jobman::mock::MockConfig;
using jobman::mock::Reply;
using jobman::mock::Tier;
using jobman::mock::World;
using jobman::test::create_node;
using jobman::test::expect_rpc_error;
using jobman::test::kStandaloneStart;
using jobman::test::kStandaloneZone;
using jobman::test::node_body;
using jobman::test::RecordingListener;
using jobman::test::standalone_config;
using jobman::test::standalone_state;
using nlohmann::json;

constexpr std::int64_t kT = kStandaloneStart;
constexpr std::int64_t kReady = kT + 10'000; // A standalone node created at kT is READY.
const std::string kNodes = "projects/p/locations/" + kStandaloneZone + "/nodes/";

// queuedResources.create of `id` for node `node_id`, spot; its node is READY 11 s later.
Reply create_queued(World& world, const std::string& id, const std::string& node_id, const std::string& accelerator,
                    std::int64_t now) {
  const json body = {{"tpu",
                      {{"nodeSpec",
                        {{{"nodeId", node_id},
                          {"node", {{"acceleratorType", accelerator}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                     {"spot", json::object()}};
  return world.create_queued_resource("p", kStandaloneZone, id, "", body, now);
}

// The machine under each worker host of READY node `id`, by worker, from its guest attributes.
std::vector<std::string> physical_hosts(World& world, const std::string& id, std::int64_t now) {
  const auto reply = world.get_guest_attributes("p", kStandaloneZone, id, {{"queryPath", "host/physical_host"}}, now);
  EXPECT_TRUE(reply.ok()) << reply.body.dump();
  std::vector<std::string> hosts;
  for (const auto& worker : reply.body["guestAttributes"]) {
    const auto& items = worker["queryValue"]["items"];
    EXPECT_EQ(items.size(), 1U) << worker;
    EXPECT_EQ(items[0]["namespace"], "host");
    EXPECT_EQ(items[0]["key"], "physical_host");
    hosts.push_back(items[0]["value"].get<std::string>());
  }
  return hosts;
}

// The world's faulty machines as the metrics list them.
json faulty_machines(World& world, std::int64_t now) {
  return world.metrics(now)["faultyMachines"];
}

// A zone whose v4 pools hold `chips` spot chips and no on-demand ones: a fleet of chips / 4 machines.
MockConfig full_fleet_config(int chips) {
  auto config = standalone_config();
  config.zones[0].pools["v4"][Tier::spot] = jobman::mock::PoolConfig{chips, chips, {}};
  config.zones[0].pools["v4"][Tier::on_demand] = jobman::mock::PoolConfig{0, 0, {}};
  return config;
}

// Marks worker `worker` of node `id` faulty (every worker when none).
Reply mark_faulty(World& world, const std::string& id, std::int64_t now, std::optional<std::int64_t> worker = {}) {
  return world.mark_node_faulty("p", kStandaloneZone, id, now, worker);
}

TEST(MockMachines, AZoneWithRoomPlacesANewSliceOnNewMachines) {
  World world(standalone_config(), 1, 7); // 96 v4 chips: 24 machines.
  ASSERT_TRUE(create_node(world, "x", node_body("v4-8"), kT).ok());
  const auto x = physical_hosts(world, "x", kReady);
  ASSERT_TRUE(world.delete_node("p", kStandaloneZone, "x", kReady).ok());
  ASSERT_TRUE(create_node(world, "y", node_body("v4-8"), kReady + 1'000).ok());
  const auto y = physical_hosts(world, "y", kReady + 11'000);
  ASSERT_EQ(y.size(), 1U);
  EXPECT_NE(y, x) << "x's machine waits on the free list while the fleet has room";
  EXPECT_EQ(world.metrics(kReady + 11'000)["machines"], 2);
}

TEST(MockMachines, HostsArePlacedOnMachinesAndReleasedOnesAreHandedOutFirstInFirstOut) {
  World world(full_fleet_config(20), 1, 7); // Five machines: a's four and b's one fill the zone.
  ASSERT_TRUE(create_queued(world, "qa", "a", "v4-32", kT).ok());
  ASSERT_TRUE(create_node(world, "b", node_body("v4-8"), kT).ok());
  const auto a = physical_hosts(world, "a", kT + 11'000);
  const auto b = physical_hosts(world, "b", kT + 11'000);
  ASSERT_EQ(a.size(), 4U);
  ASSERT_EQ(b.size(), 1U);
  std::set<std::string> minted(a.begin(), a.end());
  minted.insert(b[0]);
  EXPECT_EQ(minted.size(), 5U) << "each worker host on a machine of its own";
  const std::regex form("[0-9a-f]{8}/[0-9a-f]{8}/[0-9a-f]{8}");
  for (const auto& id : minted) {
    EXPECT_TRUE(std::regex_match(id, form)) << id;
    EXPECT_EQ(id.substr(0, 18), a[0].substr(0, 18)) << "the first machines of a fleet share a block and sub-block";
  }
  EXPECT_EQ(physical_hosts(world, "a", kT + 11'500), a) << "a host stays on its machine";

  // a goes (its queued resource is deleted), then b (stopped): the free list is a0 a1 a2 a3 b0.
  ASSERT_TRUE(world.delete_queued_resource("p", kStandaloneZone, "qa", true, "", kT + 12'000).ok());
  ASSERT_TRUE(world.stop_node("p", kStandaloneZone, "b", kT + 13'000).ok());
  // (Once the delete and the stop are done, the zone's chips are free again.)
  ASSERT_TRUE(create_node(world, "c", node_body("v4-8"), kT + 16'000).ok());
  ASSERT_TRUE(create_node(world, "d", node_body("v4-16"), kT + 17'000).ok());
  ASSERT_TRUE(create_node(world, "e", node_body("v4-16"), kT + 18'000).ok());
  const std::int64_t later = kT + 29'000;
  EXPECT_EQ(physical_hosts(world, "c", later), std::vector<std::string>({a[0]}));
  EXPECT_EQ(physical_hosts(world, "d", later), std::vector<std::string>({a[1], a[2]}));
  EXPECT_EQ(physical_hosts(world, "e", later), std::vector<std::string>({a[3], b[0]}));
  EXPECT_EQ(world.metrics(later)["machines"], 5);

  // A preemption frees c's machine; b, started again, is placed on it.
  ASSERT_TRUE(world.preempt_node("p", kStandaloneZone, "c", later).ok());
  ASSERT_TRUE(world.start_node("p", kStandaloneZone, "b", later).ok());
  EXPECT_EQ(physical_hosts(world, "b", later + 10'000), std::vector<std::string>({a[0]}));
  EXPECT_EQ(world.metrics(later + 10'000)["machines"], 5);
}

TEST(MockMachines, MarkFaultyOfOneWorkerFaultsOnlyThatWorkersMachine) {
  World world(standalone_config(), 1, 7);
  RecordingListener listener;
  world.set_listener(&listener);
  ASSERT_TRUE(create_node(world, "n", node_body("v4-32"), kT).ok());
  expect_rpc_error(mark_faulty(world, "n", kT + 1'000), 400, "FAILED_PRECONDITION"); // CREATING: no machines yet.
  const auto hosts = physical_hosts(world, "n", kReady);
  ASSERT_EQ(hosts.size(), 4U);
  for (const std::int64_t bad : std::vector<std::int64_t>{4, -1, std::int64_t{1} << 40}) {
    expect_rpc_error(mark_faulty(world, "n", kReady, bad), 400, "INVALID_ARGUMENT");
  }
  expect_rpc_error(mark_faulty(world, "none", kReady, 0), 404, "NOT_FOUND");
  EXPECT_FALSE(world.node_faulty("p", kStandaloneZone, "n"));

  const auto marked = mark_faulty(world, "n", kReady, 2);
  ASSERT_TRUE(marked.ok()) << marked.body.dump();
  EXPECT_EQ(marked.body["machines"], json::array({{{"worker", 2}, {"physicalHost", hosts[2]}}}));
  EXPECT_EQ(listener.events.back(), "faulty " + kNodes + "n 2");
  EXPECT_TRUE(world.node_faulty("p", kStandaloneZone, "n"));
  EXPECT_EQ(world.get_node("p", kStandaloneZone, "n", kReady).body["health"], "HEALTHY");
  const auto metrics = world.metrics(kReady);
  EXPECT_EQ(metrics["faultyMachines"], json::array({{{"physicalHost", hosts[2]},
                                                     {"zone", kStandaloneZone},
                                                     {"generation", "v4"},
                                                     {"node", kNodes + "n"},
                                                     {"worker", 2}}}));
  EXPECT_EQ(metrics["faultyNodes"], json::array({kNodes + "n"}));

  // Without a worker: every worker's machine.
  ASSERT_EQ(mark_faulty(world, "n", kReady).body["machines"].size(), 4U);
  EXPECT_EQ(std::vector<std::string>(listener.events.end() - 4, listener.events.end()),
            std::vector<std::string>({"faulty " + kNodes + "n 0", "faulty " + kNodes + "n 1",
                                      "faulty " + kNodes + "n 2", "faulty " + kNodes + "n 3"}));
  EXPECT_EQ(faulty_machines(world, kReady).size(), 4U);
}

// Step faults go to the data plane for the selected workers of a READY node, and change nothing in the world.
TEST(MockMachines, StepFaultsReachTheSelectedWorkersOfAReadyNode) {
  using jobman::mock::StepFault;
  World world(standalone_config(), 1, 7);
  RecordingListener listener;
  world.set_listener(&listener);
  ASSERT_TRUE(create_node(world, "n", node_body("v4-16"), kT).ok());
  const StepFault spike{StepFault::Kind::loss_spike, 10, 3};
  const StepFault hang{StepFault::Kind::hang};
  const auto inject = [&](const StepFault& fault, std::int64_t now, std::optional<std::int64_t> worker = {},
                          const std::string& id = "n") {
    return world.inject_step_fault("p", kStandaloneZone, id, fault, now, worker);
  };
  expect_rpc_error(inject(spike, kT + 1'000), 400, "FAILED_PRECONDITION"); // CREATING: no hosts yet.
  expect_rpc_error(inject(hang, kReady, 2), 400, "INVALID_ARGUMENT");
  expect_rpc_error(inject(hang, kReady, -1), 400, "INVALID_ARGUMENT");
  expect_rpc_error(inject(hang, kReady, 0, "none"), 404, "NOT_FOUND");
  for (const auto& bad : {StepFault{StepFault::Kind::loss_spike, 1, 3}, StepFault{StepFault::Kind::loss_spike, 0.5, 3},
                          StepFault{StepFault::Kind::loss_spike, 2e6, 3}, StepFault{StepFault::Kind::loss_spike, 10, 0},
                          StepFault{StepFault::Kind::loss_spike, 10, 1'000'001},
                          StepFault{StepFault::Kind::loss_spike, std::numeric_limits<double>::quiet_NaN(), 3}}) {
    expect_rpc_error(inject(bad, kReady), 400, "INVALID_ARGUMENT");
  }
  const std::size_t before = listener.events.size();

  const auto spiked = inject(spike, kReady);
  ASSERT_TRUE(spiked.ok()) << spiked.body.dump();
  EXPECT_EQ(spiked.body,
            json({{"node", kNodes + "n"}, {"workers", {0, 1}}, {"lossSpike", {{"factor", 10.0}, {"steps", 3}}}}));
  const auto hung = inject(hang, kReady, 1);
  ASSERT_TRUE(hung.ok()) << hung.body.dump();
  EXPECT_EQ(hung.body, json({{"node", kNodes + "n"}, {"workers", {1}}, {"hang", true}}));
  EXPECT_EQ(
      std::vector<std::string>(listener.events.begin() + static_cast<std::ptrdiff_t>(before), listener.events.end()),
      std::vector<std::string>(
          {"spike 10.0x3 " + kNodes + "n 0", "spike 10.0x3 " + kNodes + "n 1", "hang " + kNodes + "n 1"}));
  EXPECT_FALSE(world.node_faulty("p", kStandaloneZone, "n")) << "the machines stay healthy";
}

TEST(MockMachines, AFaultyMachineHandedToANewNodeMakesThatWorkerFaultyFromTheStart) {
  World world(full_fleet_config(8), 1, 7); // Two machines.
  RecordingListener listener;
  world.set_listener(&listener);
  ASSERT_TRUE(create_node(world, "a", node_body("v4-16"), kT).ok());
  const auto a = physical_hosts(world, "a", kReady);
  ASSERT_EQ(a.size(), 2U);
  ASSERT_TRUE(mark_faulty(world, "a", kReady, 1).ok());
  ASSERT_TRUE(world.delete_node("p", kStandaloneZone, "a", kReady).ok());
  EXPECT_FALSE(world.node_faulty("p", kStandaloneZone, "a"));
  auto metrics = world.metrics(kReady);
  EXPECT_TRUE(metrics["faultyNodes"].empty()) << metrics.dump();
  ASSERT_EQ(metrics["faultyMachines"].size(), 1U);
  EXPECT_EQ(metrics["faultyMachines"][0]["physicalHost"], a[1]);
  EXPECT_FALSE(metrics["faultyMachines"][0].contains("node")) << "a free machine keeps its fault";

  // b takes a's healthy machine, c the faulty one: the data plane hears of the fault as c's host comes up.
  // (Once the delete is done, 3 s on, the zone's chips are free again.)
  ASSERT_TRUE(create_node(world, "b", node_body("v4-8"), kReady + 4'000).ok());
  ASSERT_TRUE(create_node(world, "c", node_body("v4-8"), kReady + 5'000).ok());
  world.tick(kReady + 15'000);
  ASSERT_EQ(listener.machines.size(), 3U);
  EXPECT_EQ(listener.machines[1].at(0).physical_host, a[0]);
  EXPECT_FALSE(listener.machines[1].at(0).faulty);
  EXPECT_EQ(listener.machines[2].at(0).physical_host, a[1]);
  EXPECT_TRUE(listener.machines[2].at(0).faulty);
  EXPECT_FALSE(world.node_faulty("p", kStandaloneZone, "b"));
  EXPECT_TRUE(world.node_faulty("p", kStandaloneZone, "c"));
  EXPECT_EQ(world.metrics(kReady + 15'000)["faultyNodes"], json::array({kNodes + "c"}));
}

// Room for eight v6e-256 slices (512 worker hosts) beside the v4 pools; new machines faulty with `fraction`.
MockConfig fleet_config(double fraction) {
  auto config = standalone_config();
  config.zones[0].pools["v6e"][Tier::spot] = jobman::mock::PoolConfig{2048, 2048, {}};
  config.faulty_fraction = fraction;
  return config;
}

// The ids of the faulty machines after eight v6e-256 slices come up in a world of `fraction` and `seed`.
std::set<std::string> faulty_after_512_machines(double fraction, std::uint64_t seed) {
  World world(fleet_config(fraction), 1, seed);
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(create_node(world, "s" + std::to_string(i), node_body("v6e-256"), kT).ok());
  }
  const auto metrics = world.metrics(kReady);
  EXPECT_EQ(metrics["machines"], 512);
  std::set<std::string> faulty;
  for (const auto& machine : metrics["faultyMachines"]) {
    faulty.insert(machine["physicalHost"].get<std::string>());
  }
  return faulty;
}

TEST(MockMachines, EachNewMachineIsFaultyWithTheFaultyFractionDrawnFromTheSeed) {
  EXPECT_TRUE(faulty_after_512_machines(0, 7).empty());
  EXPECT_EQ(faulty_after_512_machines(1, 7).size(), 512U);
  const auto half = faulty_after_512_machines(0.5, 7);
  // 256 expected, with a standard deviation of 11.3: five of them either way.
  EXPECT_GT(half.size(), 200U);
  EXPECT_LT(half.size(), 312U);
  EXPECT_EQ(faulty_after_512_machines(0.5, 7), half) << "the same seed, the same machines";
  EXPECT_NE(faulty_after_512_machines(0.5, 8), half);

  // Changed live: the machines minted from then on follow the new fraction; a reused one keeps what it was.
  World world(full_fleet_config(8), 1, 7); // Two machines.
  ASSERT_TRUE(create_node(world, "a", node_body("v4-8"), kT).ok());
  world.tick(kReady);
  for (const double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    expect_rpc_error(world.set_faulty_fraction(bad, kReady), 400, "INVALID_ARGUMENT");
  }
  const auto set = world.set_faulty_fraction(1, kReady);
  ASSERT_TRUE(set.ok()) << set.body.dump();
  EXPECT_EQ(set.body["faulty_fraction"], 1.0);
  EXPECT_EQ(world.metrics(kReady)["hardware"]["faulty_fraction"], 1.0);
  ASSERT_TRUE(world.delete_node("p", kStandaloneZone, "a", kReady).ok());
  ASSERT_TRUE(create_node(world, "b", node_body("v4-8"), kReady + 4'000).ok());
  ASSERT_TRUE(create_node(world, "c", node_body("v4-8"), kReady + 4'000).ok());
  world.tick(kReady + 14'000);
  EXPECT_TRUE(world.node_faulty("p", kStandaloneZone, "b")) << "minted at fraction 1";
  EXPECT_FALSE(world.node_faulty("p", kStandaloneZone, "c")) << "a's machine, minted healthy, once the zone is full";
}

// Two nodes, one faulty worker, a raised fraction, and a stop that leaves machines on the free list.
void machines_script(World& world) {
  ASSERT_TRUE(create_node(world, "a", node_body("v4-32"), kT).ok());
  ASSERT_TRUE(create_node(world, "b", node_body("v4-8"), kT).ok());
  ASSERT_TRUE(mark_faulty(world, "a", kReady, 1).ok());
  ASSERT_TRUE(world.set_faulty_fraction(0.5, kReady).ok());
  ASSERT_TRUE(world.stop_node("p", kStandaloneZone, "a", kReady + 1'000).ok());
  world.tick(kReady + 5'000);
}

TEST(MockMachines, MachinesTheirFaultsAndTheFreeListSurviveARestart) {
  jobman::test::TempDir dir;
  const auto db = dir / "state.db";
  World uninterrupted(full_fleet_config(36), 1, 11); // Nine machines.
  machines_script(uninterrupted);
  {
    World before(full_fleet_config(36), 1, 11);
    before.attach_store(db, kT);
    machines_script(before);
  }
  World restarted(full_fleet_config(36), 1, 99);
  restarted.attach_store(db, kReady + 5'000);
  EXPECT_EQ(restarted.snapshot(), uninterrupted.snapshot());
  EXPECT_EQ(restarted.metrics(kReady + 5'000)["hardware"]["faulty_fraction"], 0.5);
  EXPECT_EQ(physical_hosts(restarted, "b", kReady + 5'000), physical_hosts(uninterrupted, "b", kReady + 5'000));

  // Both worlds go on alike: c mints the last four machines, d takes a's four in order (worker 1's faulty).
  for (World* world : {&uninterrupted, &restarted}) {
    ASSERT_TRUE(create_node(*world, "c", node_body("v4-32"), kReady + 6'000).ok());
    ASSERT_TRUE(create_node(*world, "d", node_body("v4-32"), kReady + 6'000).ok());
    world->tick(kReady + 16'000);
  }
  EXPECT_EQ(restarted.snapshot(), uninterrupted.snapshot());
  const auto d = kNodes + "d";
  const auto faulty = faulty_machines(restarted, kReady + 16'000);
  EXPECT_EQ(std::count_if(faulty.begin(), faulty.end(), [&](const json& m) { return m.value("node", "") == d; }), 1)
      << faulty.dump();
  EXPECT_NE(std::find_if(faulty.begin(), faulty.end(),
                         [&](const json& m) { return m.value("node", "") == d && m["worker"] == 1; }),
            faulty.end())
      << "d's worker 1 is on the machine a's worker 1 had";
  World third(full_fleet_config(36), 1, 5);
  third.attach_store(db, kReady + 16'000);
  EXPECT_EQ(third.snapshot(), restarted.snapshot());
}

TEST(MockMachines, ARecordWrittenBeforeMachinesExistedGetsItsReadyHostsPlacedOnRestore) {
  World world(standalone_config(), 1, 7);
  ASSERT_TRUE(create_node(world, "a", node_body("v4-16"), kT).ok());
  world.tick(kReady);
  auto snapshot = world.snapshot();
  snapshot.erase("machines");
  for (auto& node : snapshot["nodes"]) {
    node.erase("machines");
    node["faulty"] = true; // How a node marked faulty was stored.
  }
  World old(standalone_config(), 1, 7);
  old.restore(snapshot);
  EXPECT_EQ(physical_hosts(old, "a", kReady).size(), 2U);
  EXPECT_TRUE(old.node_faulty("p", kStandaloneZone, "a"));
  EXPECT_EQ(faulty_machines(old, kReady).size(), 2U);
}

TEST(MockNodeHealth, SetHealthSetsHealthAndItsDescriptionOnAReadyNode) {
  World world(standalone_config(), 1, 7);
  ASSERT_TRUE(create_node(world, "n", node_body("v4-8", ""), kT).ok());
  auto set = [&](const std::string& health, const std::string& description, std::int64_t now = kReady) {
    return world.set_node_health("p", kStandaloneZone, "n", health, description, now);
  };
  expect_rpc_error(set("TIMEOUT", "", kT + 1'000), 400, "FAILED_PRECONDITION"); // CREATING.
  const auto reply = set("UNHEALTHY_MAINTENANCE", "The host is under maintenance");
  ASSERT_TRUE(reply.ok()) << reply.body.dump();
  EXPECT_EQ(reply.body["health"], "UNHEALTHY_MAINTENANCE");
  auto node = world.get_node("p", kStandaloneZone, "n", kReady).body;
  EXPECT_EQ(node["health"], "UNHEALTHY_MAINTENANCE");
  EXPECT_EQ(node["healthDescription"], "The host is under maintenance");
  jobman::mock::encode_enums_as_numbers("nodes.get", node);
  EXPECT_EQ(node["health"], 5);

  for (const char* bad : {"BROKEN", "HEALTH_UNSPECIFIED", "healthy", ""}) {
    expect_rpc_error(set(bad, ""), 400, "INVALID_ARGUMENT");
  }
  expect_rpc_error(world.set_node_health("p", kStandaloneZone, "none", "HEALTHY", "", kReady), 404, "NOT_FOUND");
  for (const char* health : {"TIMEOUT", "UNHEALTHY_TENSORFLOW", "HEALTHY"}) {
    EXPECT_EQ(set(health, "").body["health"], health);
  }
  EXPECT_FALSE(world.get_node("p", kStandaloneZone, "n", kReady).body.contains("healthDescription"));

  // Kept in the snapshot; cleared by a stop; a start comes back HEALTHY.
  ASSERT_TRUE(set("UNHEALTHY_TENSORFLOW", "The runtime crashed").ok());
  World restored(standalone_config(), 1, 7);
  restored.restore(world.snapshot());
  EXPECT_EQ(restored.get_node("p", kStandaloneZone, "n", kReady).body,
            world.get_node("p", kStandaloneZone, "n", kReady).body);
  ASSERT_TRUE(world.stop_node("p", kStandaloneZone, "n", kReady).ok());
  node = world.get_node("p", kStandaloneZone, "n", kReady).body;
  EXPECT_FALSE(node.contains("health"));
  EXPECT_FALSE(node.contains("healthDescription"));
  world.tick(kReady + 2'000);
  ASSERT_TRUE(world.start_node("p", kStandaloneZone, "n", kReady + 2'000).ok());
  ASSERT_EQ(standalone_state(world, "n", kReady + 12'000), "READY");
  node = world.get_node("p", kStandaloneZone, "n", kReady + 12'000).body;
  EXPECT_EQ(node["health"], "HEALTHY");
  EXPECT_FALSE(node.contains("healthDescription"));
}

TEST(MockConfigFile, HardwareFaultyFractionIsAFractionBetweenZeroAndOne) {
  const std::string zones = "zones:\n  z1:\n    v4:\n      spot: {chips: 8}\n";
  EXPECT_EQ(jobman::mock::parse_mock_config(zones, "world.yaml").faulty_fraction, 0.0);
  EXPECT_EQ(jobman::mock::parse_mock_config("hardware: {faulty_fraction: 0.2}\n" + zones, "world.yaml").faulty_fraction,
            0.2);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{faulty_fraction: 1.5}", "faulty_fraction"},  {"{faulty_fraction: -0.1}", "faulty_fraction"},
      {"{faulty_fraction: lots}", "faulty_fraction"}, {"{faulty_fraction: .nan}", "faulty_fraction"},
      {"{faulty_fractoin: 0.2}", "faulty_fractoin"},  {"0.2", ""}};
  for (const auto& [hardware, key] : bad) {
    try {
      jobman::mock::parse_mock_config(std::string("hardware: ").append(hardware).append("\n").append(zones),
                                      "bad.yaml");
      ADD_FAILURE() << "expected a ConfigError for " << hardware;
    } catch (const jobman::ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("bad.yaml:1"), std::string::npos) << what;
      EXPECT_NE(what.find(key.empty() ? "hardware" : "hardware." + key), std::string::npos) << what;
    }
  }
}

} // namespace world_machines_test
