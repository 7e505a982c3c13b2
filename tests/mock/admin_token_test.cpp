// The mock's admin and exec paths (/mock/v1) open only to its own admin token, kept in a private file; the mock
// listens on loopback unless told otherwise. See SECURITY.md.
#include "mock_cloud/admin_token.hpp"
#include "support/mock_cloud.hpp"
#include "support/mock_slice.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace jobman::test {
namespace admin_token_test {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kNode = "/mock/v1/projects/p/locations/us-central2-b/nodes/slice-node";

unsigned mode_of(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<unsigned>(info.st_mode & 07777) : 07777U;
}

std::string first_line_of(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// One admin or exec route: its method, path and body.
struct AdminCall {
  std::string method;
  std::string path;
  json body;
};

std::vector<AdminCall> admin_calls() {
  return {
      {"GET", "/mock/v1/metrics", nullptr},
      {"GET", "/mock/v1/tokens", nullptr},
      {"POST", "/mock/v1/faults", {{"rate", 1}, {"codes", {503}}}},
      {"PUT", "/mock/v1/capacity", {{"zone", "us-central2-b"}, {"generation", "v4"}, {"tier", "spot"}, {"chips", 0}}},
      {"PUT", "/mock/v1/hardware", {{"faulty_fraction", 0}}},
      {"POST", kNode + ":preempt", json::object()},
      {"POST", kNode + ":markFaulty", json::object()},
      {"POST", kNode + ":setHealth", {{"health", "HEALTHY"}}},
      {"POST", kNode + ":scheduleMaintenance", {{"in", 3600}}},
      {"GET", kNode + "/workers/0", nullptr}};
}

class MockAdminTokenTest : public MockSliceTest {
protected:
  HttpAnswer call(const AdminCall& c, const httplib::Headers& headers) {
    return http_call(slice.client(), c.method, c.path, c.body, headers);
  }

  // A token the metadata path hands any local caller: good for the /v2 API.
  std::string metadata_token() {
    auto answer = slice.client().Get("/computeMetadata/v1/instance/service-accounts/default/token",
                                     httplib::Headers{{"Metadata-Flavor", "Google"}});
    return answer && answer->status == 200 ? json::parse(answer->body)["access_token"].get<std::string>() : "";
  }
};

TEST_F(MockAdminTokenTest, AdminAndExecPathsRefuseNoTokenAWrongTokenAndApiTokens) {
  const auto api_token = metadata_token();
  ASSERT_FALSE(api_token.empty());
  // Both API tokens really open the /v2 API.
  for (const std::string& token : {api_token, std::string("test-token")}) {
    EXPECT_EQ(http_call(slice.client(), "GET", "/v2/projects/p/locations/us-central2-b/nodes/slice-node", nullptr,
                        {{"Authorization", "Bearer " + token}})
                  .status,
              200);
  }
  const auto& admin = slice.server().admin_token();
  ASSERT_EQ(admin.size(), 64U);
  const std::vector<std::pair<std::string, httplib::Headers>> refused = {
      {"no token", {}},
      {"a wrong token", {{"Authorization", "Bearer " + std::string(64, '0')}}},
      {"the admin token with one character changed",
       {{"Authorization", "Bearer " + admin.substr(0, 63) + (admin.back() == 'a' ? "b" : "a")}}},
      {"the admin token's prefix", {{"Authorization", "Bearer " + admin.substr(0, 32)}}},
      {"the admin token without the Bearer scheme", {{"Authorization", admin}}},
      {"a static API token", {{"Authorization", "Bearer test-token"}}},
      {"a metadata API token", {{"Authorization", "Bearer " + api_token}}}};
  for (const auto& c : admin_calls()) {
    for (const auto& [what, headers] : refused) {
      const auto answer = call(c, headers);
      EXPECT_EQ(answer.status, headers.empty() ? 401 : 403) << c.method << " " << c.path << " with " << what;
      EXPECT_TRUE(answer.body.is_object() &&
                  answer.body["error"]["message"].get<std::string>().find("admin token") != std::string::npos)
          << answer.text;
      EXPECT_EQ(answer.text.find(admin), std::string::npos) << "the refusal leaked the token";
    }
  }
  // Nothing the refused calls asked for happened: the node is still up and healthy, no faults, capacity unchanged.
  const auto metrics = http_call(slice.client(), "GET", "/mock/v1/metrics", nullptr, slice.server().admin_headers());
  ASSERT_EQ(metrics.status, 200) << metrics.text;
  EXPECT_EQ(metrics.body["faults"]["rate"], 0.0);
  EXPECT_TRUE(metrics.body["faultyNodes"].empty()) << metrics.body.dump();
  EXPECT_EQ(metrics.body["nodes"], json({{"READY", 1}}));
  // The tokens the mock issued are listed for the admin only; the static token was never issued.
  const auto tokens = http_call(slice.client(), "GET", "/mock/v1/tokens", nullptr, slice.server().admin_headers());
  ASSERT_EQ(tokens.status, 200) << tokens.text;
  const auto issued = tokens.body["issued"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(issued.begin(), issued.end(), api_token), issued.end()) << tokens.text;
  EXPECT_EQ(std::find(issued.begin(), issued.end(), "test-token"), issued.end()) << tokens.text;
  // The admin token opens every route (the exec path first, the preemption after it).
  auto calls = admin_calls();
  std::reverse(calls.begin(), calls.end());
  for (const auto& c : calls) {
    const auto answer = call(c, slice.server().admin_headers());
    EXPECT_EQ(answer.status, 200) << c.method << " " << c.path << ": " << answer.text;
  }
}

TEST(MockAdminToken, TheTokenFileIsPrivateAndKeptAcrossRestartsUnlessOthersCouldReadIt) {
  TempDir dir;
  const auto file = dir / "state" / "admin-token";
  std::string first;
  {
    auto mock = start_test_mock(dir, test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 8}\n"));
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    EXPECT_EQ(mock->admin_token_file(), file.string());
    EXPECT_EQ(mode_of(file), 0600U);
    EXPECT_EQ(mode_of(dir / "state"), 0700U);
    first = first_line_of(file);
    EXPECT_EQ(first.size(), 64U);
    EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos) << first;
    EXPECT_EQ(mock->admin_token(), first);
  }
  {
    auto mock = start_test_mock(dir, test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 8}\n"));
    ASSERT_GT(mock->port(), 0) << mock->first_line();
    EXPECT_EQ(first_line_of(file), first) << "a private token file is reused";
  }
  // A token others could read is no secret: the next start replaces it with a new one, privately.
  fs::permissions(file,
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  auto mock = start_test_mock(dir, test_world(1, "  us-central2-b:\n    v4:\n      spot: {chips: 8}\n"));
  ASSERT_GT(mock->port(), 0) << mock->first_line();
  EXPECT_EQ(mode_of(file), 0600U);
  const auto renewed = first_line_of(file);
  EXPECT_NE(renewed, first);
  EXPECT_EQ(mock->admin_token(), renewed);
  httplib::Client client("127.0.0.1", mock->port());
  EXPECT_EQ(http_call(client, "GET", "/mock/v1/metrics", nullptr, {{"Authorization", "Bearer " + first}}).status, 403);
  EXPECT_EQ(http_call(client, "GET", "/mock/v1/metrics", nullptr, mock->admin_headers()).status, 200);
}

TEST(MockAdminToken, WithoutAStateDirTheTokenIsInAPrivateScratchFileOrTheFileNamed) {
  MockCloudProcess scratch({"--port", "0"});
  ASSERT_GT(scratch.port(), 0) << scratch.first_line();
  ASSERT_FALSE(scratch.admin_token_file().empty());
  EXPECT_EQ(mode_of(scratch.admin_token_file()), 0600U);
  EXPECT_EQ(mode_of(fs::path(scratch.admin_token_file()).parent_path()), 0700U);
  httplib::Client client("127.0.0.1", scratch.port());
  EXPECT_EQ(http_call(client, "GET", "/mock/v1/metrics", nullptr, scratch.admin_headers()).status, 200);
  const auto scratch_dir = fs::path(scratch.admin_token_file()).parent_path();
  EXPECT_EQ(scratch.stop(), 0);
  EXPECT_FALSE(fs::exists(scratch_dir)) << "the scratch directory outlived the mock";

  TempDir dir;
  const auto named = dir / "my-token";
  MockCloudProcess chosen(
      {"--port", "0", "--state-dir", (dir / "state").string(), "--admin-token-file", named.string()});
  ASSERT_GT(chosen.port(), 0) << chosen.first_line();
  EXPECT_EQ(chosen.admin_token_file(), named.string());
  EXPECT_EQ(mode_of(named), 0600U);
  EXPECT_FALSE(fs::exists(dir / "state" / "admin-token"));
  EXPECT_EQ(chosen.admin_token(), first_line_of(named));
}

TEST(MockAdminToken, ListensOnLoopbackAndRefusesAnotherAddressWithoutAllowRemote) {
  MockCloudProcess mock({"--port", "0"});
  ASSERT_GT(mock.port(), 0) << mock.first_line();
  // The kernel's table of listening TCP sockets: the mock's port is bound to 127.0.0.1 (0100007F) only.
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::vector<std::string> bound;
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, "%04X", mock.port());
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot;
    std::string local;
    std::string remote;
    std::string state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.ends_with(std::string(":") + port_hex)) {
      bound.push_back(local);
    }
  }
  EXPECT_EQ(bound, std::vector<std::string>{std::string("0100007F:") + port_hex});
  std::ifstream tcp6("/proc/net/tcp6");
  while (std::getline(tcp6, line)) {
    EXPECT_EQ(line.find(std::string(":") + port_hex + " 00000000000000000000000000000000:0000 0A"), std::string::npos)
        << "also listening on IPv6: " << line;
  }

  for (const std::string host : {"0.0.0.0", "::", "192.0.2.1"}) {
    const auto refused = run_program({mock_cloud_binary(), "--port", "0", "--host", host});
    EXPECT_EQ(refused.exit_code, 2) << host;
    EXPECT_NE(refused.err.find("refusing to listen on non-loopback address '" + host + "'"), std::string::npos)
        << refused.err;
    EXPECT_EQ(refused.out, "") << host;
  }
}

TEST(MockAdminToken, AuthorizationHeaderMatchesOnlyTheExactToken) {
  const std::string token(64, 'a');
  EXPECT_TRUE(mock::admin_token_matches("Bearer " + token, token));
  EXPECT_FALSE(mock::admin_token_matches("Bearer " + token + "a", token));
  EXPECT_FALSE(mock::admin_token_matches("Bearer " + token.substr(1), token));
  EXPECT_FALSE(mock::admin_token_matches("Basic " + token, token));
  EXPECT_FALSE(mock::admin_token_matches("Bearer ", ""));
  EXPECT_FALSE(mock::admin_token_matches("", ""));
}

} // namespace admin_token_test
} // namespace jobman::test
