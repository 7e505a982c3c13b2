#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/core/jobs.hpp"
#include "jobman/core/plan.hpp"

#include <gtest/gtest.h>
#include <regex>

namespace jobman::core {
namespace core_plan_test {

config::JobConfig load(const std::string& yaml) {
  auto configs = config::parse_job_configs(yaml, "plan.yaml");
  EXPECT_EQ(configs.size(), 1U);
  return configs.front();
}

const std::string kBase = "job:\n  name: plan\ntpu:\n  accelerator: v4-32\n  zone: us-central2-b\n";

TEST(PlanResourceId, IsAValidCloudIdAndEncodesJobAndAttempt) {
  const std::regex valid("[a-z]([-a-z0-9]{0,61}[a-z0-9])?");
  EXPECT_EQ(resource_id("yufeng-v4-128", 42, 1), "yufeng-v4-128-000042-a1");
  EXPECT_EQ(resource_id("My_Run.v2", 7, 3), "my-run-v2-000007-a3");
  EXPECT_TRUE(std::regex_match(resource_id("42 starts with a digit", 1, 1), valid));
  const std::string long_name(200, 'x');
  const auto id = resource_id(long_name, 123456, 12);
  EXPECT_LE(id.size(), 63U);
  EXPECT_TRUE(std::regex_match(id, valid)) << id;
  EXPECT_TRUE(id.ends_with("-123456-a12"));
  EXPECT_TRUE(std::regex_match(resource_id("a'b\"c $(touch /tmp/x) ;", 1, 1), valid));
}

TEST(PlanRequestBody, SpotQueuedResourceUsesTheApiFieldNames) {
  const auto config = load(kBase + "  pricing: spot\n  tags: [a, b]\n  metadata:\n    owner: me\n"
                                   "  startup_script: echo boot\ncommand:\n  cmd: run\n");
  const auto body = create_request_body(config, "proj", 42, "alice", 2);
  ASSERT_TRUE(body.contains("spot"));
  EXPECT_TRUE(body["spot"].is_object());
  EXPECT_FALSE(body.contains("guaranteed"));
  const auto& spec = body["tpu"]["nodeSpec"][0];
  EXPECT_EQ(spec["parent"], "projects/proj/locations/us-central2-b");
  EXPECT_EQ(spec["nodeId"], "plan-000042-a2");
  EXPECT_EQ(spec["node"]["acceleratorType"], "v4-32");
  EXPECT_EQ(spec["node"]["runtimeVersion"], "tpu-ubuntu2204-base");
  EXPECT_EQ(spec["node"]["labels"]["jobman-job-id"], "000042");
  EXPECT_EQ(spec["node"]["labels"]["jobman-owner"], "alice");
  EXPECT_EQ(spec["node"]["labels"]["jobman-attempt"], "2");
  EXPECT_EQ(spec["node"]["labels"]["jobman-store"], store_label_value(store_location()));
  EXPECT_EQ(spec["node"]["tags"], nlohmann::json({"a", "b"}));
  EXPECT_EQ(spec["node"]["metadata"]["owner"], "me");
  EXPECT_EQ(spec["node"]["metadata"]["startup-script"], "echo boot");
}

TEST(PlanRequestBody, TheSshKeyJoinsTheNodesMetadataOnce) {
  const auto config = load(kBase + "  pricing: spot\n  metadata:\n    ssh-keys: \"bob:ssh-rsa AAAB bob\"\n"
                                   "command:\n  cmd: run\n");
  auto body = create_request_body(config, "proj", 42, "alice", 2);
  add_ssh_key(body, "alice:ssh-ed25519 AAAC alice");
  add_ssh_key(body, "alice:ssh-ed25519 AAAC alice");
  EXPECT_EQ(body["tpu"]["nodeSpec"][0]["node"]["metadata"]["ssh-keys"],
            "bob:ssh-rsa AAAB bob\nalice:ssh-ed25519 AAAC alice");
  // A node's own create request (tpu-vm mode) carries its metadata at the top.
  nlohmann::json node = {{"acceleratorType", "v4-8"}};
  add_ssh_key(node, "alice:ssh-ed25519 AAAC alice");
  EXPECT_EQ(node["metadata"]["ssh-keys"], "alice:ssh-ed25519 AAAC alice");
}

TEST(PlanRequestBody, OnDemandIsGuaranteedAndQueueTimeoutIsValidUntilDuration) {
  const auto config = load(kBase + "  pricing: ondemand\n  queue_timeout: 2h\ncommand:\n  cmd: run\n");
  const auto body = create_request_body(config, "proj", 1, "alice", 1);
  EXPECT_TRUE(body["guaranteed"].is_object());
  EXPECT_FALSE(body.contains("spot"));
  EXPECT_EQ(body["queueingPolicy"]["validUntilDuration"], "7200s");
}

TEST(PlanRequestBody, PreemptibleSetsTheNodeSchedulingConfig) {
  const auto config = load(kBase + "  pricing: preemptible\ncommand:\n  cmd: run\n");
  const auto body = create_request_body(config, "proj", 1, "alice", 1);
  EXPECT_EQ(body["tpu"]["nodeSpec"][0]["node"]["schedulingConfig"]["preemptible"], true);
  EXPECT_FALSE(body.contains("spot"));
  EXPECT_FALSE(body.contains("guaranteed"));
}

TEST(PlanRequestBody, InternalIpsAndReservedReachTheNode) {
  const auto config = load(kBase + "  pricing: ondemand\n  internal_ips: true\n  reserved: true\n"
                                   "  network: projects/p/global/networks/n\ncommand:\n  cmd: run\n");
  const auto body = create_request_body(config, "proj", 1, "alice", 1);
  const auto& node = body["tpu"]["nodeSpec"][0]["node"];
  EXPECT_EQ(node["networkConfig"]["enableExternalIps"], false);
  EXPECT_EQ(node["networkConfig"]["network"], "projects/p/global/networks/n");
  EXPECT_EQ(node["schedulingConfig"]["reserved"], true);
}

// tpu-vm mode: the body of nodes.create is the Node itself; its pricing is schedulingConfig.spot or .preemptible, and
// on-demand names neither (the discovery document's SchedulingConfig).
TEST(PlanRequestBody, TpuVmModeSendsTheNodeWithItsPricingInSchedulingConfig) {
  const std::string mode = "  allocation_mode: tpu-vm\n";
  const auto spot =
      create_request_body(load(kBase + mode + "  pricing: spot\ncommand:\n  cmd: run\n"), "p", 7, "al", 2);
  EXPECT_FALSE(spot.contains("tpu")) << "no queued resource around it";
  EXPECT_EQ(spot["acceleratorType"], "v4-32");
  EXPECT_EQ(spot["labels"]["jobman-attempt"], "2");
  EXPECT_EQ(spot["schedulingConfig"], nlohmann::json({{"spot", true}}));

  const auto preemptible =
      create_request_body(load(kBase + mode + "  pricing: preemptible\ncommand:\n  cmd: run\n"), "p", 7, "al", 1);
  EXPECT_EQ(preemptible["schedulingConfig"], nlohmann::json({{"preemptible", true}}));

  const auto ondemand =
      create_request_body(load(kBase + mode + "  pricing: ondemand\ncommand:\n  cmd: run\n"), "p", 7, "al", 1);
  EXPECT_FALSE(ondemand.contains("schedulingConfig"));
  EXPECT_FALSE(ondemand.contains("spot"));
  EXPECT_FALSE(ondemand.contains("guaranteed"));

  const auto reserved =
      create_request_body(load(kBase + mode + "  pricing: reserved\ncommand:\n  cmd: run\n"), "p", 7, "al", 1);
  EXPECT_EQ(reserved["schedulingConfig"], nlohmann::json({{"reserved", true}}));
}

// The provisioning models only v2alpha1 has: flex-start with its run duration, a reservation (by its full name, as
// gcloud writes it) and best-effort; the plan says the request goes to v2alpha1.
TEST(PlanRequestBody, FlexStartReservedAndBestEffortAskForTheirModelsThroughV2alpha1) {
  const auto flex = load(kBase + "  pricing: flex-start\n  max_run_duration: 20m\ncommand:\n  cmd: run\n");
  const auto body = create_request_body(flex, "proj", 1, "alice", 1);
  EXPECT_EQ(body["provisioningModel"], "FLEX_START");
  EXPECT_EQ(body["runDuration"], nlohmann::json({{"maxRunDuration", "1200s"}}));
  EXPECT_FALSE(body.contains("spot"));
  EXPECT_FALSE(body.contains("guaranteed"));
  EXPECT_EQ(plan_json(flex, "proj", "alice")["api"]["version"], "v2alpha1");

  const auto reserved = create_request_body(
      load(kBase + "  pricing: reserved\n  reservation: lab\ncommand:\n  cmd: run\n"), "proj", 1, "alice", 1);
  EXPECT_EQ(reserved["provisioningModel"], "RESERVATION_BOUND");
  EXPECT_EQ(reserved["guaranteed"], nlohmann::json({{"reserved", true}}));
  EXPECT_EQ(reserved["reservationName"], "projects/proj/locations/us-central2-b/reservations/lab");

  const auto best = load(kBase + "  pricing: best-effort\ncommand:\n  cmd: run\n");
  EXPECT_EQ(create_request_body(best, "proj", 1, "alice", 1)["bestEffort"], nlohmann::json::object());
  EXPECT_EQ(plan_json(best, "proj", "alice")["api"]["version"], "v2alpha1");

  EXPECT_EQ(plan_json(load(kBase + "  pricing: spot\ncommand:\n  cmd: run\n"), "proj", "alice")["api"]["version"], "v2")
      << "v2 for everything else";
}

// tpu.slices: one slice names its node (nodeId); several are one queued resource whose nodeSpec asks for them with
// multisliceParams, the prefix being the id one slice's node would have had (the cloud names them ID-0 ... ID-(N-1)).
TEST(PlanRequestBody, OneSliceNamesItsNodeAndSeveralAskForMultisliceParams) {
  const auto one =
      create_request_body(load(kBase + "  pricing: spot\n  slices: 1\ncommand:\n  cmd: run\n"), "proj", 42, "alice", 2);
  const auto& single = one["tpu"]["nodeSpec"][0];
  EXPECT_EQ(single["nodeId"], "plan-000042-a2");
  EXPECT_FALSE(single.contains("multisliceParams"));
  EXPECT_FALSE(single.contains("multiNodeParams"));

  const auto config = load(kBase + "  pricing: spot\n  slices: 2\ncommand:\n  cmd: run\n");
  const auto body = create_request_body(config, "proj", 42, "alice", 2);
  ASSERT_EQ(body["tpu"]["nodeSpec"].size(), 1U) << "one nodeSpec for every slice";
  const auto& spec = body["tpu"]["nodeSpec"][0];
  EXPECT_FALSE(spec.contains("nodeId"));
  EXPECT_EQ(spec["multisliceParams"], nlohmann::json({{"nodeCount", 2}, {"nodeIdPrefix", "plan-000042-a2"}}));
  EXPECT_EQ(spec["parent"], "projects/proj/locations/us-central2-b");
  EXPECT_EQ(spec["node"]["acceleratorType"], "v4-32") << "each slice's";
  EXPECT_EQ(spec["node"]["labels"]["jobman-attempt"], "2");
  EXPECT_EQ(body["spot"], nlohmann::json::object());
  EXPECT_FALSE(cloud::needs_v2alpha1(body)) << "multisliceParams is v2's";
  EXPECT_EQ(request_node_labels(body)["jobman-job-id"], "000042");
  // The name the supervisor gives the attempt's node is the prefix.
  EXPECT_EQ(create_request_body(config, "proj", 42, "alice", 2,
                                "plan-000042-a2c2")["tpu"]["nodeSpec"][0]["multisliceParams"]["nodeIdPrefix"],
            "plan-000042-a2c2");
  // The SSH key reaches the one node spec every slice is made from.
  auto keyed = body;
  add_ssh_key(keyed, "alice:ssh-ed25519 AAAC alice");
  EXPECT_EQ(keyed["tpu"]["nodeSpec"][0]["node"]["metadata"]["ssh-keys"], "alice:ssh-ed25519 AAAC alice");

  const auto plan = plan_json(config, "proj", "alice");
  EXPECT_EQ(plan["api"]["version"], "v2");
  EXPECT_EQ(plan["api"]["url"],
            "projects/proj/locations/us-central2-b/queuedResources?queuedResourceId=plan-000000-a1");
  EXPECT_EQ(plan["api"]["body"]["tpu"]["nodeSpec"][0]["multisliceParams"],
            nlohmann::json({{"nodeCount", 2}, {"nodeIdPrefix", "plan-000000-a1"}}));
}

// A body that goes to v2alpha1 (flex-start, a reservation, best-effort) spells the same field multiNodeParams, the
// name v2alpha1 has for it; needs_v2alpha1 still sends it there.
TEST(PlanRequestBody, SeveralSlicesThroughV2alpha1AreMultiNodeParams) {
  const auto flex = load(kBase + "  pricing: flex-start\n  max_run_duration: 3h\n  slices: 4\ncommand:\n  cmd: run\n");
  const auto body = create_request_body(flex, "proj", 7, "alice", 1);
  const auto& spec = body["tpu"]["nodeSpec"][0];
  EXPECT_EQ(spec["multiNodeParams"], nlohmann::json({{"nodeCount", 4}, {"nodeIdPrefix", "plan-000007-a1"}}));
  EXPECT_FALSE(spec.contains("multisliceParams"));
  EXPECT_FALSE(spec.contains("nodeId"));
  EXPECT_EQ(body["provisioningModel"], "FLEX_START");
  EXPECT_EQ(body["runDuration"], nlohmann::json({{"maxRunDuration", "10800s"}}));
  EXPECT_TRUE(cloud::needs_v2alpha1(body));
  const auto plan = plan_json(flex, "proj", "alice");
  EXPECT_EQ(plan["api"]["version"], "v2alpha1");
  EXPECT_TRUE(plan["api"]["body"]["tpu"]["nodeSpec"][0].contains("multiNodeParams"));

  for (const char* pricing : {"best-effort", "reserved\n  reservation: lab"}) {
    std::string text = kBase;
    text.append("  pricing: ").append(pricing).append("\n  slices: 2\ncommand:\n  cmd: run\n");
    const auto other = create_request_body(load(text), "proj", 7, "alice", 1);
    EXPECT_EQ(other["tpu"]["nodeSpec"][0]["multiNodeParams"]["nodeCount"], 2) << pricing;
    EXPECT_TRUE(cloud::needs_v2alpha1(other)) << pricing;
  }
  // Only the multislice field itself says v2alpha1 when nothing else does.
  nlohmann::json bare = {{"tpu", {{"nodeSpec", {{{"multiNodeParams", {{"nodeCount", 2}}}}}}}}};
  EXPECT_TRUE(cloud::needs_v2alpha1(bare));
  bare["tpu"]["nodeSpec"][0] = {{"multisliceParams", {{"nodeCount", 2}}}};
  EXPECT_FALSE(cloud::needs_v2alpha1(bare));
}

TEST(PlanJson, TpuVmModeCreatesTheNodeByItsId) {
  const auto plan = plan_json(load(kBase + "  allocation_mode: tpu-vm\ncommand:\n  cmd: run\n"), "proj", "alice");
  EXPECT_EQ(plan["api"]["url"], "projects/proj/locations/us-central2-b/nodes?nodeId=plan-000000-a1");
}

TEST(PlanSetupSteps, RunInOrderOnEveryHostAndTheCommandOnTheSelectedOnes) {
  const auto config = load(kBase + "  pricing: spot\n"
                                   "gcsfuse:\n  bucket_name: b\n  mount_path: /mnt/b\n"
                                   "ssh:\n  private_key: ~/.ssh/id_rsa\n"
                                   "venv:\n  name: env\n  python: '3.10'\n"
                                   "command:\n  cmd: run\n  workers: [0, 2]\n");
  auto with_env = config;
  with_env.job.env_type = config::EnvType::venv;
  const auto steps = setup_steps(with_env);
  ASSERT_EQ(steps.size(), 4U);
  EXPECT_EQ(steps[0].module, "ssh");
  EXPECT_EQ(steps[1].module, "gcsfuse");
  EXPECT_EQ(steps[2].module, "venv");
  EXPECT_EQ(steps[3].module, "command");
  EXPECT_EQ(steps[0].workers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(steps[3].workers, (std::vector<int>{0, 2}));
}

TEST(PlanSetupSteps, TheSetupScriptRunsLastOnEveryHostBeforeTheCommand) {
  const auto config = load(kBase + "venv:\n  name: env\n"
                                   "setup:\n  script: |\n    pip install -e .\n    make data\n"
                                   "command:\n  cmd: run\n  workers: [0]\n");
  const auto steps = setup_steps(config);
  ASSERT_EQ(steps.size(), 2U);
  EXPECT_EQ(steps[0].module, "script");
  EXPECT_NE(steps[0].summary.find("2 lines"), std::string::npos) << steps[0].summary;
  EXPECT_EQ(steps[0].workers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(steps[1].module, "command");
}

} // namespace core_plan_test
} // namespace jobman::core
