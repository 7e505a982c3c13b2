// Every way of getting an access token, against a real jobman-mock-cloud: a static token, the service-account key
// the mock writes, a gcloud program, and the metadata server; and the token cache.
#include "jobman/cloud/auth.hpp"
#include "jobman/cloud/tpu_client.hpp"
#include "jobman/util/system.hpp"
#include "support/mock_cloud.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <httplib.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace jobman::cloud {
namespace cloud_auth_test {

using std::chrono::milliseconds;

const Location kWhere{"p", "us-central2-b"};

using jobman::test::ScopedEnv;

// Wraps a source and counts how often it is asked for a token.
class CountingSource final : public TokenSource {
public:
  CountingSource(std::unique_ptr<TokenSource> inner, std::atomic<int>& fetches)
      : inner_(std::move(inner)), fetches_(fetches) {}
  AccessToken fetch() override {
    ++fetches_;
    return inner_->fetch();
  }
  [[nodiscard]] std::string describe() const override { return inner_->describe(); }

private:
  std::unique_ptr<TokenSource> inner_;
  std::atomic<int>& fetches_;
};

class CloudAuthTest : public ::testing::Test {
protected:
  test::TempDir dir;
  std::unique_ptr<test::MockCloudProcess> server;

  void SetUp() override {
    dir.write("state/access-tokens", "lab-static-token\n");
    server = std::make_unique<test::MockCloudProcess>(
        std::vector<std::string>{"--port", "0", "--state-dir", (dir / "state").string(), "--write-service-account-key",
                                 (dir / "key.json").string()});
    ASSERT_GT(server->port(), 0) << server->first_line();
  }

  std::string host() const { return "127.0.0.1:" + std::to_string(server->port()); }

  TpuClient client(std::shared_ptr<CachedTokenSource> tokens) {
    TpuClientOptions options;
    options.endpoint = "http://" + host();
    options.retry.max_attempts = 1;
    return TpuClient(std::move(tokens), options);
  }

  // Lists queued resources with `source`: succeeds only if the mock accepts its token.
  void expect_accepted(std::unique_ptr<TokenSource> source) {
    const std::string description = source->describe();
    auto tpu = client(std::make_shared<CachedTokenSource>(std::move(source)));
    EXPECT_NO_THROW(tpu.list_queued_resources(kWhere)) << description;
  }

  // A token from the mock's metadata path, as a VM would get one.
  std::string metadata_token() {
    httplib::Client http("127.0.0.1", server->port());
    auto answer = http.Get("/computeMetadata/v1/instance/service-accounts/default/token",
                           httplib::Headers{{"Metadata-Flavor", "Google"}});
    EXPECT_TRUE(answer && answer->status == 200);
    return answer ? nlohmann::json::parse(answer->body)["access_token"].get<std::string>() : "";
  }

  // A fake gcloud that prints `token` for `auth print-access-token` and fails otherwise.
  std::filesystem::path fake_gcloud(const std::string& token) {
    const auto path = dir.write("bin/gcloud", "#!/bin/sh\n[ \"$1 $2\" = \"auth print-access-token\" ] || exit 3\n"
                                              "echo '" +
                                                  token + "'\n");
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  }
};

TEST_F(CloudAuthTest, StaticTokenFromTheAccessTokensFileIsAccepted) {
  expect_accepted(make_static_token_source("lab-static-token", "test"));
}

TEST_F(CloudAuthTest, UnknownTokenIsRefusedAsUnauthenticated) {
  auto tpu = client(std::make_shared<CachedTokenSource>(make_static_token_source("made-up", "test")));
  try {
    tpu.list_queued_resources(kWhere);
    FAIL() << "a made-up token was accepted";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.http_status(), 401);
    EXPECT_EQ(error.status(), "UNAUTHENTICATED");
    EXPECT_EQ(std::string(error.what()).find("made-up"), std::string::npos) << "the token leaked: " << error.what();
  }
}

TEST_F(CloudAuthTest, ServiceAccountKeyIsExchangedAtItsTokenUri) {
  const auto source = make_service_account_token_source((dir / "key.json").string());
  EXPECT_NE(source->describe().find("http://" + host() + "/token"), std::string::npos) << source->describe();
  expect_accepted(make_service_account_token_source((dir / "key.json").string()));
}

TEST_F(CloudAuthTest, ServiceAccountKeyTheMockDoesNotTrustIsRefusedByTheTokenEndpoint) {
  // The same key file, but naming a key id the mock never issued.
  auto key = nlohmann::json::parse(util::read_file(dir / "key.json"));
  key["private_key_id"] = "0000000000000000000000000000000000000000";
  const auto forged = dir.write("forged.json", key.dump());
  try {
    make_service_account_token_source(forged.string())->fetch();
    FAIL() << "a key the mock does not trust got a token";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cannot get an access token from http://" + host() + "/token"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(CloudAuthTest, GcloudPrintAccessTokenIsRead) {
  const auto gcloud = fake_gcloud(metadata_token());
  expect_accepted(make_gcloud_token_source(gcloud.string()));
  const auto failing = dir.write("bin/broken-gcloud", "#!/bin/sh\nexit 1\n");
  std::filesystem::permissions(failing, std::filesystem::perms::owner_all);
  EXPECT_THROW(make_gcloud_token_source(failing.string())->fetch(), Error);
}

TEST_F(CloudAuthTest, MetadataServerTokenIsAccepted) {
  expect_accepted(make_metadata_token_source(host()));
}

TEST_F(CloudAuthTest, EachSourceTellsTheAccountItsTokensBelongTo) {
  // What OS Login knows the caller by: the key's client_email, the metadata server's account, gcloud's core/account.
  const auto key = nlohmann::json::parse(util::read_file(dir / "key.json"));
  EXPECT_EQ(CachedTokenSource(make_service_account_token_source((dir / "key.json").string())).account(),
            key["client_email"].get<std::string>());
  httplib::Client http("127.0.0.1", server->port());
  const auto email = http.Get("/computeMetadata/v1/instance/service-accounts/default/email",
                              httplib::Headers{{"Metadata-Flavor", "Google"}});
  ASSERT_TRUE(email && email->status == 200);
  EXPECT_EQ(CachedTokenSource(make_metadata_token_source(host())).account(), email->body);
  if (std::filesystem::exists("/usr/bin/gcloud")) {
    const ScopedEnv config("CLOUDSDK_CONFIG", (dir / "gcloud").string());
    const ScopedEnv home("HOME", (dir / "home").string());
    const ScopedEnv prompts("CLOUDSDK_CORE_DISABLE_PROMPTS", "1");
    // Nothing leaves this machine: no probe of a metadata server, no update check, no usage report.
    const ScopedEnv probe("CLOUDSDK_CORE_CHECK_GCE_METADATA", "false");
    const ScopedEnv metadata("GCE_METADATA_HOST", host());
    const ScopedEnv updates("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true");
    const ScopedEnv reports("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true");
    EXPECT_THROW(CachedTokenSource(make_gcloud_token_source("/usr/bin/gcloud")).account(), Error)
        << "a gcloud logged in as nobody names no account";
    const auto set = std::system("/usr/bin/gcloud config set account ada@example.com >/dev/null 2>&1");
    ASSERT_EQ(set, 0);
    EXPECT_EQ(CachedTokenSource(make_gcloud_token_source("/usr/bin/gcloud")).account(), "ada@example.com");
  }
  // A fixed token says nothing of its account: JOBMAN_ACCOUNT does, and overrides every source.
  EXPECT_THROW(CachedTokenSource(make_static_token_source("lab-static-token", "test")).account(), Error);
  const ScopedEnv account("JOBMAN_ACCOUNT", "bob@example.com");
  EXPECT_EQ(CachedTokenSource(make_static_token_source("lab-static-token", "test")).account(), "bob@example.com");
  EXPECT_EQ(CachedTokenSource(make_metadata_token_source(host())).account(), "bob@example.com");
}

TEST_F(CloudAuthTest, DefaultChainReachesEachSourceAgainstTheMock) {
  std::string gcloud = fake_gcloud(metadata_token()).string();
  {
    const ScopedEnv token("JOBMAN_ACCESS_TOKEN", "lab-static-token");
    const ScopedEnv creds("GOOGLE_APPLICATION_CREDENTIALS", (dir / "key.json").string());
    expect_accepted(make_default_token_source(gcloud));
  }
  const ScopedEnv token("JOBMAN_ACCESS_TOKEN", std::nullopt);
  {
    const ScopedEnv creds("GOOGLE_APPLICATION_CREDENTIALS", (dir / "key.json").string());
    auto source = make_default_token_source(gcloud);
    EXPECT_NE(source->describe().find("service account"), std::string::npos) << source->describe();
    expect_accepted(std::move(source));
  }
  const ScopedEnv creds("GOOGLE_APPLICATION_CREDENTIALS", std::nullopt);
  {
    auto source = make_default_token_source(gcloud);
    EXPECT_NE(source->describe().find("auth print-access-token"), std::string::npos) << source->describe();
    expect_accepted(std::move(source));
  }
  gcloud = (dir / "bin" / "no-such-gcloud").string();
  const ScopedEnv metadata_host("GCE_METADATA_HOST", host());
  auto source = make_default_token_source(gcloud);
  EXPECT_NE(source->describe().find("metadata server"), std::string::npos) << source->describe();
  expect_accepted(std::move(source));
}

TEST_F(CloudAuthTest, OneTokenFetchServesManyCalls) {
  std::atomic<int> fetches{0};
  auto tokens = std::make_shared<CachedTokenSource>(
      std::make_unique<CountingSource>(make_service_account_token_source((dir / "key.json").string()), fetches));
  auto tpu = client(tokens);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(tpu.list_queued_resources(kWhere).empty());
    EXPECT_FALSE(tpu.get_queued_resource(kWhere, "none"));
  }
  EXPECT_EQ(fetches.load(), 1);
}

} // namespace cloud_auth_test
} // namespace jobman::cloud
