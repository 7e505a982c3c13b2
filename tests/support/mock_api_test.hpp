// A fixture for tests of the mock's API: a jobman-mock-cloud child process of its own world (seed 5, no SSH
// servers), called as the holder of the test token that start_test_mock writes.
#pragma once

#include "support/mock_cloud.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace jobman::test {

class MockApiTest : public ::testing::Test {
protected:
  // `world` is the mock's world config (test_world builds one).
  explicit MockApiTest(std::string world) : world_(std::move(world)) {}

  void SetUp() override {
    server = start_test_mock(dir, world_, 5, {"--sshd", "none"});
    ASSERT_GT(server->port(), 0) << server->first_line();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
  }

  // A call to the mock with the test token.
  HttpAnswer api(const std::string& method, const std::string& path, const nlohmann::json& body = nullptr) {
    return http_call(*client, method, path, body, {{"Authorization", "Bearer test-token"}});
  }

  TempDir dir;
  std::unique_ptr<MockCloudProcess> server;
  std::unique_ptr<httplib::Client> client;

private:
  std::string world_;
};

} // namespace jobman::test
