// nodes.create (tpu-vm mode) as the client sends it, against a scripted transport: the URL, the body, one request id
// across retries, and a 409 answered with the node that exists.
#include "jobman/cloud/tpu_client.hpp"

#include <gtest/gtest.h>
#include <memory>
#include <vector>

namespace jobman::cloud {
namespace cloud_tpu_client_nodes_test {

using nlohmann::json;

constexpr const char* kParent = "projects/p/locations/us-central2-b";

HttpResponse answer(int status, const json& body) {
  HttpResponse response;
  response.status = status;
  response.body = body.dump();
  return response;
}

// A client whose server gives `answers` in turn and records every request.
class ScriptedClient {
public:
  explicit ScriptedClient(std::vector<HttpResponse> answers) : answers_(std::move(answers)) {
    TpuClientOptions options;
    options.endpoint = "http://127.0.0.1:1/v2/";
    options.sleep = [](std::chrono::milliseconds) {};
    options.jitter = [] { return 0.5; };
    options.transport = [this](const HttpRequest& request) {
      requests.push_back(request);
      return next_ < answers_.size() ? answers_[next_++] : answer(500, json::object());
    };
    client = std::make_unique<TpuClient>(std::make_shared<CachedTokenSource>(make_static_token_source("t", "test")),
                                         options);
  }

  std::vector<HttpRequest> requests;
  std::unique_ptr<TpuClient> client;

private:
  std::vector<HttpResponse> answers_;
  std::size_t next_ = 0;
};

// The value of `key` in a URL's query string.
std::string query_value(const std::string& url, const std::string& key) {
  const auto at = url.find(key + "=");
  if (at == std::string::npos) {
    return {};
  }
  const auto start = at + key.size() + 1;
  return url.substr(start, url.find('&', start) - start);
}

TEST(TpuClientNodes, CreatePostsTheNodeWithItsIdAndOnlyTheParametersNodesCreateBinds) {
  const json operation = {{"name", std::string(kParent) + "/operations/op-1"}, {"done", false}};
  ScriptedClient server({answer(503, {{"error", {{"code", 503}, {"status", "UNAVAILABLE"}}}}), answer(200, operation)});
  const json body = {{"acceleratorType", "v4-8"}, {"schedulingConfig", {{"spot", true}}}};
  const auto created = server.client->create_node({"p", "us-central2-b"}, "train-000001-a1", body);

  ASSERT_TRUE(created.operation.has_value());
  EXPECT_EQ(created.operation->name, std::string(kParent) + "/operations/op-1");
  EXPECT_FALSE(created.existing.has_value());
  ASSERT_EQ(server.requests.size(), 2U) << "a 503 is retried";
  for (const auto& request : server.requests) {
    EXPECT_EQ(request.method, "POST");
    EXPECT_TRUE(request.url.starts_with("http://127.0.0.1:1/v2/" + std::string(kParent) + "/nodes?")) << request.url;
    EXPECT_EQ(query_value(request.url, "nodeId"), "train-000001-a1");
    EXPECT_EQ(json::parse(request.body), body);
  }
  for (const auto& request : server.requests) {
    // Google refuses a query parameter the method does not bind, and nodes.create binds nodeId alone.
    EXPECT_EQ(request.url.find("requestId"), std::string::npos) << request.url;
  }
}

TEST(TpuClientNodes, CreateOfANodeThatExistsReturnsIt) {
  const json node = {
      {"name", std::string(kParent) + "/nodes/train-000001-a1"}, {"state", "READY"}, {"acceleratorType", "v4-8"}};
  ScriptedClient server({answer(409, {{"error", {{"code", 409}, {"status", "ALREADY_EXISTS"}}}}), answer(200, node)});
  const auto created = server.client->create_node({"p", "us-central2-b"}, "train-000001-a1", json::object());

  EXPECT_FALSE(created.operation.has_value());
  ASSERT_TRUE(created.existing.has_value());
  EXPECT_EQ(created.existing->state, NodeState::ready);
  ASSERT_EQ(server.requests.size(), 2U);
  EXPECT_EQ(server.requests[1].method, "GET");
  EXPECT_TRUE(server.requests[1].url.find(std::string(kParent) + "/nodes/train-000001-a1?") != std::string::npos);
}

TEST(TpuClientNodes, CreateRefusedSaysWhichMethodAndNode) {
  ScriptedClient server(
      {answer(400, {{"error", {{"code", 400}, {"status", "INVALID_ARGUMENT"}, {"message", "bad accelerator"}}}})});
  try {
    (void)server.client->create_node({"p", "us-central2-b"}, "n1", json::object());
    FAIL() << "a 400 throws";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_STREQ(e.what(),
                 "TPU API: nodes.create projects/p/locations/us-central2-b/nodes/n1: INVALID_ARGUMENT (400): bad "
                 "accelerator");
  }
}

} // namespace cloud_tpu_client_nodes_test
} // namespace jobman::cloud
