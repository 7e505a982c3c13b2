// A world with standalone nodes, driven by a fake clock, for the tests of nodes.create and what follows it.
#pragma once

#include "mock_cloud/world.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace jobman::test {

inline constexpr std::int64_t kStandaloneStart = 1'800'000'000'000;
inline const std::string kStandaloneZone = "us-central2-b";

// Fixed delays: creating 1 s, provisioning 10 s, suspending (and stopping) 2 s, deleting 3 s; 64 spot and 32
// on-demand v4 chips (quota 128 and 32); the given mean times between preemptions and maintenance events.
inline mock::MockConfig standalone_config(double preemption_mean = 0, double maintenance_mean = 0) {
  mock::MockConfig config;
  mock::ZoneConfig zone;
  zone.name = kStandaloneZone;
  zone.pools["v4"][mock::Tier::spot] = mock::PoolConfig{64, 128, {}};
  zone.pools["v4"][mock::Tier::on_demand] = mock::PoolConfig{32, 32, {}};
  config.zones.push_back(zone);
  config.provisioning["default"] = mock::DelayDistribution{mock::DelayDistribution::Kind::fixed, 10, 0};
  config.creating_seconds = 1;
  config.suspending_seconds = 2;
  config.deleting_seconds = 3;
  config.spot_mean_seconds_between_preemptions = preemption_mean;
  config.maintenance_mean_seconds_between_events = maintenance_mean;
  return config;
}

// A Node body: `scheduling` is "spot", "preemptible" or "" (on-demand).
inline nlohmann::json node_body(const std::string& accelerator, const std::string& scheduling = "spot") {
  nlohmann::json body = {{"acceleratorType", accelerator},
                         {"runtimeVersion", "tpu-ubuntu2204-base"},
                         {"labels", {{"team", "ml"}}},
                         {"metadata", {{"startup-script", "echo hi"}}}};
  if (!scheduling.empty()) {
    body["schedulingConfig"] = {{scheduling, true}};
  }
  return body;
}

// nodes.create of `id` in project p.
inline mock::Reply create_node(mock::World& world, const std::string& id, const nlohmann::json& body,
                               std::int64_t now) {
  return world.create_node("p", kStandaloneZone, id, body, now);
}

// The node's state, or "GONE".
inline std::string standalone_state(mock::World& world, const std::string& id, std::int64_t now) {
  auto reply = world.get_node("p", kStandaloneZone, id, now);
  return reply.ok() ? reply.body["state"].get<std::string>() : "GONE";
}

// An operation by its full name.
inline nlohmann::json operation(mock::World& world, const std::string& name, std::int64_t now) {
  return world.get_operation("p", kStandaloneZone, name.substr(name.rfind('/') + 1), now).body;
}

// The chips in use of the v4 pool of `tier` ("spot" or "on_demand").
inline int chips_in_use(mock::World& world, const std::string& tier, std::int64_t now) {
  const auto metrics = world.metrics(now);
  for (const auto& pool : metrics["capacity"]) {
    if (pool["generation"] == "v4" && pool["tier"] == tier) {
      return pool["inUse"].get<int>();
    }
  }
  return -1;
}

// Asserts a google.rpc error reply.
inline void expect_rpc_error(const mock::Reply& reply, int code, const std::string& status) {
  EXPECT_EQ(reply.status, code) << reply.body.dump();
  EXPECT_EQ(reply.body["error"]["code"], code) << reply.body.dump();
  EXPECT_EQ(reply.body["error"]["status"], status) << reply.body.dump();
}

// Records what the world tells the data plane.
class RecordingListener : public mock::SliceListener {
public:
  void slice_ready(const mock::SliceHosts& slice) override {
    events.push_back("ready " + slice.node_name + " " + std::to_string(slice.hosts()));
    incarnations.push_back(slice.numeric_id);
    machines.push_back(slice.machines);
  }
  void slice_lost(const std::string& node_name) override { events.push_back("lost " + node_name); }
  void slice_faulty(const std::string& node_name, int worker) override {
    events.push_back("faulty " + node_name + " " + std::to_string(worker));
  }
  void slice_step_fault(const std::string& node_name, int worker, const mock::StepFault& fault) override {
    events.push_back((fault.kind == mock::StepFault::Kind::hang
                          ? "hang "
                          : "spike " + nlohmann::json(fault.factor).dump() + "x" + std::to_string(fault.steps) + " ") +
                     node_name + " " + std::to_string(worker));
  }

  // "ready NAME HOSTS", "lost NAME", "faulty NAME WORKER", "spike FACTORxSTEPS NAME WORKER", "hang NAME WORKER", in
  // order.
  std::vector<std::string> events;
  std::vector<std::string> incarnations;                // The numeric id of each slice_ready.
  std::vector<std::vector<mock::HostMachine>> machines; // The machines of each slice_ready, by worker.
};

} // namespace jobman::test
