// The TPU client against a real jobman-mock-cloud child process: the queued-resource lifecycle, pagination,
// retries under injected faults, 409 on create, and the wording of API errors.
#include "jobman/cloud/tpu_client.hpp"
#include "jobman/config/loader.hpp"
#include "jobman/core/plan.hpp"
#include "support/mock_cloud.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <gtest/gtest.h>
#include <httplib.h>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace jobman::cloud {
namespace cloud_tpu_client_test {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kZone = "us-central2-b";
const Location kWhere{"p", kZone};

// Every delay is one simulated second (1 ms at --time-scale 1000); no random preemption or maintenance.
const std::string kFastWorld = test::test_world(1, R"(  us-central2-b:
    v4:
      spot: {chips: 64, quota: 128}
      on_demand: {chips: 32, quota: 32}
)");

// A job config's queued resource, as core builds it for the API.
json request_body(const std::string& name, const std::string& accelerator, long long job_id) {
  const auto configs = config::parse_job_configs("job:\n  name: " + name + "\ntpu:\n  name: " + name +
                                                     "\n  accelerator: " + accelerator + "\n  zone: " + kZone +
                                                     "\n  pricing: spot\ncommand:\n  cmd: run\n",
                                                 "cloud-test.yaml");
  EXPECT_EQ(configs.size(), 1U);
  return core::create_request_body(configs.front(), "p", job_id, "tester", 1);
}

// A job config's node in tpu-vm mode (`tpu_extra`: more lines of its tpu section), as core builds it for the API.
json node_body(const std::string& accelerator, long long job_id, const std::string& tpu_extra = "") {
  const auto configs = config::parse_job_configs(
      "job:\n  name: vm\ntpu:\n  accelerator: " + accelerator + "\n  zone: " + kZone +
          "\n  pricing: spot\n  allocation_mode: tpu-vm\n" + tpu_extra + "command:\n  cmd: run\n",
      "cloud-test.yaml");
  EXPECT_EQ(configs.size(), 1U);
  return core::create_request_body(configs.front(), "p", job_id, "tester", 1);
}

class CloudTpuClientTest : public ::testing::Test {
protected:
  test::TempDir dir;
  std::unique_ptr<test::MockCloudProcess> server;
  std::unique_ptr<httplib::Client> admin;
  std::atomic<int> sleeps{0};

  void SetUp() override {
    server = test::start_test_mock(dir, kFastWorld, 5);
    ASSERT_GT(server->port(), 0) << server->first_line();
    admin = std::make_unique<httplib::Client>("127.0.0.1", server->port());
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(server->port()); }

  // A client with the static test token, short backoffs and a sleep that counts retries.
  std::unique_ptr<TpuClient> client(int max_attempts = 12) {
    TpuClientOptions options;
    options.endpoint = endpoint();
    options.compute_endpoint = endpoint() + "/compute/v1/";
    options.oslogin_endpoint = endpoint() + "/oslogin/v1/";
    options.retry.max_attempts = max_attempts;
    options.retry.initial_backoff = milliseconds(2);
    options.retry.max_backoff = milliseconds(20);
    options.poll_initial = milliseconds(5);
    options.poll_max = milliseconds(50);
    options.sleep = [this](milliseconds delay) {
      ++sleeps;
      std::this_thread::sleep_for(delay);
    };
    auto tokens = std::make_shared<CachedTokenSource>(make_static_token_source("test-token", "test"));
    return std::make_unique<TpuClient>(tokens, options);
  }

  std::optional<QueuedResourceState> state_of(TpuClient& tpu, const std::string& id) {
    auto qr = tpu.get_queued_resource(kWhere, id);
    return qr ? std::optional(qr->state) : std::nullopt;
  }
};

// tpu-vm mode: nodes.create with core's body; the operation ends with the READY node, a second create finds it, and
// a create without free chips ends with RESOURCE_EXHAUSTED and leaves no node.
TEST_F(CloudTpuClientTest, ACreatedNodeBecomesReadyAndACreateWithoutCapacityFailsWithCodeEight) {
  auto tpu = client();
  const json body = node_body("v4-32", 3);
  const std::string id = core::resource_id("vm", 3, 1);
  const auto created = tpu->create_node(kWhere, id, body);
  ASSERT_TRUE(created.operation);
  const auto done = tpu->wait_operation(created.operation->name, milliseconds(20'000));
  ASSERT_FALSE(done.error) << done.error->message;
  EXPECT_EQ(parse_node(done.response).state, NodeState::ready);
  const auto node = tpu->get_node(kWhere, id);
  ASSERT_TRUE(node);
  EXPECT_EQ(node->raw["schedulingConfig"]["spot"], true);
  EXPECT_FALSE(node->raw.contains("queuedResource"));
  const auto again = tpu->create_node(kWhere, id, body);
  ASSERT_TRUE(again.existing) << "a 409 returns the node";
  EXPECT_EQ(again.existing->name, node->name);

  // 64 spot chips: a second v4-32 (16 chips) fits, a v4-128 (64) does not.
  ASSERT_FALSE(tpu->wait_operation(tpu->create_node(kWhere, "vm-b", body).operation->name, milliseconds(20'000)).error);
  json larger = body;
  larger["acceleratorType"] = "v4-128";
  const auto refused =
      tpu->wait_operation(tpu->create_node(kWhere, "vm-c", larger).operation->name, milliseconds(20'000));
  ASSERT_TRUE(refused.error);
  EXPECT_EQ(refused.error->code, 8);
  EXPECT_FALSE(tpu->get_node(kWhere, "vm-c")) << "no node remains";
  for (const auto& name : {id, std::string("vm-b")}) {
    ASSERT_TRUE(tpu->delete_node(kWhere, name));
  }
}

// What jobman asks beside the TPU API so that its key opens a node's hosts: nodes.patch of the node's metadata, the
// project's common metadata from the Compute API, and OS Login's import of the key, which names the POSIX account.
TEST_F(CloudTpuClientTest, ANodesMetadataIsPatchedAndOsLoginNamesTheAccountOfAnImportedKey) {
  auto tpu = client();
  const std::string id = core::resource_id("vm", 4, 1);
  const auto created = tpu->create_node(kWhere, id, node_body("v4-8", 4, "  metadata:\n    team: lab\n"));
  ASSERT_TRUE(created.operation);
  ASSERT_FALSE(tpu->wait_operation(created.operation->name, milliseconds(20'000)).error);
  EXPECT_EQ(tpu->get_node(kWhere, id)->metadata, (std::map<std::string, std::string>{{"team", "lab"}}));
  const auto patch = tpu->patch_node(
      kWhere, id, {{"metadata", {{"team", "lab"}, {"ssh-keys", "me:ssh-ed25519 AAAA me"}}}}, "metadata");
  EXPECT_FALSE(tpu->wait_operation(patch.name, milliseconds(20'000)).error);
  EXPECT_EQ(tpu->get_node(kWhere, id)->metadata.at("ssh-keys"), "me:ssh-ed25519 AAAA me");

  EXPECT_TRUE(tpu->project_metadata("p").empty()) << "a project nothing was set in has no common metadata";
  httplib::Client compute("127.0.0.1", server->port());
  const httplib::Headers auth = {{"Authorization", "Bearer test-token"}};
  const auto project = test::http_call(compute, "GET", "/compute/v1/projects/p", nullptr, auth);
  const auto set =
      test::http_call(compute, "POST", "/compute/v1/projects/p/setCommonInstanceMetadata",
                      json{{"fingerprint", project.body["commonInstanceMetadata"].value("fingerprint", "")},
                           {"items", json::array({{{"key", "enable-oslogin"}, {"value", "TRUE"}}})}},
                      auth);
  ASSERT_EQ(set.status, 200) << set.text;
  EXPECT_EQ(tpu->project_metadata("p"), (std::map<std::string, std::string>{{"enable-oslogin", "TRUE"}}));

  EXPECT_EQ(tpu->import_ssh_public_key("ada@example.com", "p", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKk2"),
            "ada_example_com");
  try {
    tpu->import_ssh_public_key("ada@example.com", "p", "not a key");
    ADD_FAILURE() << "a bad key is refused";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_NE(std::string(e.what()).find("OS Login API: oslogin.users.importSshPublicKey users/ada@example.com"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CloudTpuClientTest, CreatedQueuedResourceBecomesActiveAndIsGoneAfterDelete) {
  auto tpu = client();
  const json body = request_body("life", "v4-32", 7);
  const std::string id = core::resource_id("life", 7, 1);
  const auto created = tpu->create_queued_resource(kWhere, id, body);
  ASSERT_TRUE(created.operation);
  EXPECT_FALSE(created.existing);
  const auto done = tpu->wait_operation(created.operation->name, milliseconds(20'000));
  EXPECT_TRUE(done.done);
  EXPECT_FALSE(done.error) << done.error->message;

  ASSERT_TRUE(test::eventually([&] { return state_of(*tpu, id) == QueuedResourceState::active; }))
      << (state_of(*tpu, id) ? to_string(*state_of(*tpu, id)) : "gone");
  const auto qr = tpu->get_queued_resource(kWhere, id);
  ASSERT_TRUE(qr);
  EXPECT_EQ(qr->name, kWhere.name() + "/queuedResources/" + id);
  EXPECT_EQ(qr->state_initiator, StateInitiator::user);
  EXPECT_TRUE(qr->spot);
  ASSERT_EQ(qr->node_ids, std::vector<std::string>{id});

  const auto node = tpu->get_node(kWhere, qr->node_ids.front());
  ASSERT_TRUE(node);
  EXPECT_EQ(node->state, NodeState::ready);
  EXPECT_EQ(node->health, NodeHealth::healthy);
  EXPECT_EQ(node->accelerator_type, "v4-32");
  ASSERT_EQ(node->network_endpoints.size(), 4U);
  for (const auto& endpoint : node->network_endpoints) {
    EXPECT_FALSE(endpoint.ip_address.empty());
    EXPECT_FALSE(endpoint.external_ip.empty());
  }
  using Labels = std::map<std::string, std::string>;
  EXPECT_EQ(node->labels, body["tpu"]["nodeSpec"][0]["node"]["labels"].get<Labels>());
  const auto nodes = tpu->list_nodes(kWhere);
  ASSERT_EQ(nodes.size(), 1U);
  EXPECT_EQ(nodes.front().name, node->name);

  const auto deleted = tpu->delete_queued_resource(kWhere, id, DeleteMode::force);
  ASSERT_TRUE(deleted);
  const auto delete_done = tpu->wait_operation(deleted->name, milliseconds(20'000));
  EXPECT_FALSE(delete_done.error);
  ASSERT_TRUE(test::eventually([&] { return !tpu->get_queued_resource(kWhere, id).has_value(); }));
  EXPECT_FALSE(tpu->get_node(kWhere, id));
  // Deleting what is gone is not an error: there is nothing to wait for.
  EXPECT_FALSE(tpu->delete_queued_resource(kWhere, id, DeleteMode::force));
  EXPECT_FALSE(tpu->delete_node(kWhere, id));
}

TEST_F(CloudTpuClientTest, ListFollowsPageTokensAcrossPages) {
  auto tpu = client();
  std::set<std::string> expected;
  for (int i = 1; i <= 5; ++i) {
    const std::string id = core::resource_id("page", i, 1);
    ASSERT_TRUE(tpu->create_queued_resource(kWhere, id, request_body("page", "v4-8", i)).operation);
    expected.insert(kWhere.name() + "/queuedResources/" + id);
  }
  const auto all = tpu->list_queued_resources(kWhere, 2);
  std::set<std::string> names;
  for (const auto& qr : all) {
    names.insert(qr.name);
  }
  EXPECT_EQ(all.size(), 5U);
  EXPECT_EQ(names, expected);
  EXPECT_EQ(tpu->list_queued_resources(kWhere).size(), 5U);

  ASSERT_TRUE(test::eventually([&] { return tpu->list_nodes(kWhere, 1).size() == 5U; }));
}

TEST_F(CloudTpuClientTest, InjectedThrottlingAndOutagesDuringCreateLeaveExactlyOneResource) {
  auto tpu = client(20);
  ASSERT_EQ(test::http_call(*admin, "POST", "/mock/v1/faults", {{"rate", 0.2}, {"codes", {429, 503}}},
                            server->admin_headers())
                .status,
            200);
  // Create until at least one retry happened, so the faults were really met; each create must succeed.
  std::vector<std::string> ids;
  for (int i = 1; i <= 40 && sleeps.load() == 0; ++i) {
    ids.push_back(core::resource_id("flaky", i, 1));
    const auto created = tpu->create_queued_resource(kWhere, ids.back(), request_body("flaky", "v4-8", i));
    ASSERT_TRUE(created.operation) << ids.back();
  }
  ASSERT_GT(sleeps.load(), 0) << "no injected fault was met";
  ASSERT_EQ(test::http_call(*admin, "POST", "/mock/v1/faults", {{"rate", 0}}, server->admin_headers()).status, 200);

  std::multiset<std::string> names;
  for (const auto& qr : tpu->list_queued_resources(kWhere, 3)) {
    names.insert(qr.name);
  }
  EXPECT_EQ(names.size(), ids.size());
  for (const auto& id : ids) {
    EXPECT_EQ(names.count(kWhere.name() + "/queuedResources/" + id), 1U) << id;
  }
}

TEST_F(CloudTpuClientTest, CreatingAnExistingQueuedResourceReturnsIt) {
  auto tpu = client();
  const std::string id = core::resource_id("twice", 1, 1);
  const auto first = tpu->create_queued_resource(kWhere, id, request_body("twice", "v4-8", 1));
  ASSERT_TRUE(first.operation);
  const auto second = tpu->create_queued_resource(kWhere, id, request_body("twice", "v4-8", 1));
  EXPECT_FALSE(second.operation);
  ASSERT_TRUE(second.existing);
  EXPECT_EQ(second.existing->name, kWhere.name() + "/queuedResources/" + id);
  EXPECT_EQ(tpu->list_queued_resources(kWhere).size(), 1U);
}

TEST_F(CloudTpuClientTest, QuotaErrorCarriesTheStatusAndTheServersMessage) {
  ASSERT_EQ(test::http_call(*admin, "PUT", "/mock/v1/capacity",
                            {{"zone", kZone}, {"generation", "v4"}, {"tier", "spot"}, {"chips", 64}, {"quota", 4}},
                            server->admin_headers())
                .status,
            200);
  const std::string id = core::resource_id("big", 1, 1);
  const json body = request_body("big", "v4-32", 1);
  // What the server itself says about this request.
  const auto raw = test::http_call(*admin, "POST", "/v2/" + kWhere.name() + "/queuedResources?queuedResourceId=" + id,
                                   body, {{"Authorization", "Bearer test-token"}});
  ASSERT_EQ(raw.status, 429) << raw.text;
  const std::string server_message = raw.body["error"]["message"];

  auto tpu = client(2);
  try {
    tpu->create_queued_resource(kWhere, id, body);
    FAIL() << "a create past quota succeeded";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.http_status(), 429);
    EXPECT_EQ(error.status(), "RESOURCE_EXHAUSTED");
    EXPECT_EQ(std::string(error.what()), "TPU API: queuedResources.create " + kWhere.name() + "/queuedResources/" + id +
                                             ": RESOURCE_EXHAUSTED (429): " + server_message);
  }
  EXPECT_TRUE(tpu->list_queued_resources(kWhere).empty());
}

TEST_F(CloudTpuClientTest, UnreachableEndpointIsAnErrorNamingTheCall) {
  const int port = server->port();
  server->stop();
  TpuClientOptions options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(port);
  options.retry.max_attempts = 2;
  options.retry.initial_backoff = milliseconds(1);
  options.sleep = [](milliseconds) {};
  TpuClient tpu(std::make_shared<CachedTokenSource>(make_static_token_source("t", "test")), options);
  try {
    tpu.list_queued_resources(kWhere);
    FAIL() << "a list against a stopped server succeeded";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.http_status(), 0);
    EXPECT_NE(std::string(error.what()).find("TPU API: queuedResources.list " + kWhere.name() + ": cannot reach"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("connect failed"), std::string::npos) << error.what();
  }
}

} // namespace cloud_tpu_client_test
} // namespace jobman::cloud
