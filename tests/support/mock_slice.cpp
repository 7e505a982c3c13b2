#include "support/mock_slice.hpp"

#include "jobman/util/system.hpp"

#include <nlohmann/json.hpp>

namespace jobman::test {

namespace {

using nlohmann::json;

// Where the slice's node is.
constexpr const char* kLocation = "projects/p/locations/us-central2-b";

const httplib::Headers& auth() {
  static const httplib::Headers headers = {{"Authorization", "Bearer test-token"}};
  return headers;
}

} // namespace

MockSlice::MockSlice(const TempDir& dir, const std::string& accelerator) {
  server_ = start_test_mock(dir, test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 256}\n"
                                               "    v5litepod:\n      spot: {chips: 256}\n"));
  if (server_->port() <= 0) {
    return;
  }
  client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  std::vector<std::string> users = {util::current_user()};
  if (users.front() != "alice") {
    users.emplace_back("alice");
  }
  hosts_ = std::make_unique<MockHostSsh>(dir, *server_, users);
  if (!hosts_->error().empty()) {
    return;
  }
  const json body = {{"tpu",
                      {{"nodeSpec",
                        {{{"parent", "projects/p/locations/us-central2-b"},
                          {"nodeId", "slice-node"},
                          {"node", {{"acceleratorType", accelerator}, {"runtimeVersion", "tpu-ubuntu2204-base"}}}}}}}},
                     {"spot", json::object()}};
  if (http_call(*client_, "POST", "/v2/projects/p/locations/us-central2-b/queuedResources?queuedResourceId=slice", body,
                auth())
          .status != 200) {
    return;
  }
  if (auto target = hosts_->target("us-central2-b", "slice-node", util::current_user(), std::chrono::seconds(60))) {
    target_ = *target;
    ready_ = true;
  }
}

std::filesystem::path MockSlice::worker_path(int worker, const char* key, const std::string& user) {
  auto answer = http_call(*client_, "GET",
                          "/mock/v1/projects/p/locations/us-central2-b/nodes/slice-node/workers/" +
                              std::to_string(worker) + (user.empty() ? "" : "?user=" + user),
                          nullptr, server_->admin_headers());
  return answer.status == 200 ? std::filesystem::path(answer.body[key].get<std::string>()) : std::filesystem::path();
}

std::filesystem::path MockSlice::worker_dir(int worker) {
  return worker_path(worker, "dir");
}

std::filesystem::path MockSlice::worker_home(int worker) {
  return worker_path(worker, "sandbox_home", util::current_user());
}

std::filesystem::path MockSlice::remote_home(int worker, const std::string& user) {
  return worker_path(worker, "home", user);
}

bool MockSlice::preempt() {
  return http_call(*client_, "POST", "/mock/v1/projects/p/locations/us-central2-b/nodes/slice-node:preempt",
                   json::object(), server_->admin_headers())
             .status == 200;
}

bool MockSlice::inject_loss_spike(double factor, int steps, std::optional<int> worker) {
  return jobman::test::inject_loss_spike(*client_, *server_, kLocation, "slice-node", factor, steps, worker).status ==
         200;
}

bool MockSlice::inject_hang(std::optional<int> worker) {
  return jobman::test::inject_hang(*client_, *server_, kLocation, "slice-node", worker).status == 200;
}

int MockSlice::processes_running() {
  auto metrics = http_call(*client_, "GET", "/mock/v1/metrics", nullptr, server_->admin_headers());
  return metrics.status == 200 ? metrics.body["processes_running"].get<int>() : -1;
}

} // namespace jobman::test
