// Service-account assertions (signed JWTs checked with OpenSSL against the public key), request ids, and the
// token cache.
#include "jobman/cloud/auth.hpp"
#include "jobman/util/error.hpp"
#include "support/scoped_env.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace jobman::cloud {
namespace cloud_auth_test {

using EvpKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// A fresh RSA key pair as PEM: {private (PKCS#8), public}.
std::pair<std::string, std::string> rsa_key_pair() {
  EvpKey key(EVP_RSA_gen(2048), EVP_PKEY_free);
  EXPECT_TRUE(key);
  auto to_pem = [&](bool is_private) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    const int ok = is_private
                       ? PEM_write_bio_PKCS8PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr)
                       : PEM_write_bio_PUBKEY(bio.get(), key.get());
    EXPECT_EQ(ok, 1);
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(size));
  };
  return {to_pem(true), to_pem(false)};
}

std::string base64url_decode(std::string text) {
  for (auto& c : text) {
    c = c == '-' ? '+' : c == '_' ? '/' : c;
  }
  while (text.size() % 4 != 0) {
    text.push_back('=');
  }
  std::string out(text.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  EXPECT_GE(n, 0);
  out.resize(static_cast<std::size_t>(n) - std::count(text.begin(), text.end(), '='));
  return out;
}

bool verify_rs256(const std::string& input, const std::string& signature, const std::string& public_pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(public_pem.data(), static_cast<int>(public_pem.size())),
                                                BIO_free);
  EvpKey key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  return key && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                          reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
}

TEST(CloudJwtAssertion, HasGooglesHeaderAndClaimsAndVerifiesWithThePublicKey) {
  const auto [private_pem, public_pem] = rsa_key_pair();
  const ServiceAccountKey key{"trainer@lab.iam.gserviceaccount.com", "0123abcd", private_pem,
                              "http://127.0.0.1:9/token"};
  const std::string jwt = build_jwt_assertion(key, 1'700'000'000);
  const auto first_dot = jwt.find('.');
  const auto second_dot = jwt.find('.', first_dot + 1);
  ASSERT_NE(second_dot, std::string::npos) << jwt;
  EXPECT_EQ(jwt.find_first_of("=+/"), std::string::npos) << "base64url without padding";

  const auto header = nlohmann::json::parse(base64url_decode(jwt.substr(0, first_dot)));
  EXPECT_EQ(header, (nlohmann::json{{"alg", "RS256"}, {"typ", "JWT"}, {"kid", "0123abcd"}}));
  const auto claims = nlohmann::json::parse(base64url_decode(jwt.substr(first_dot + 1, second_dot - first_dot - 1)));
  EXPECT_EQ(claims.at("iss"), "trainer@lab.iam.gserviceaccount.com");
  EXPECT_EQ(claims.at("scope"), "https://www.googleapis.com/auth/cloud-platform");
  EXPECT_EQ(claims.at("aud"), "http://127.0.0.1:9/token");
  EXPECT_EQ(claims.at("iat"), 1'700'000'000);
  EXPECT_EQ(claims.at("exp"), 1'700'003'600);

  const std::string input = jwt.substr(0, second_dot);
  const std::string signature = base64url_decode(jwt.substr(second_dot + 1));
  EXPECT_EQ(signature.size(), 256U);
  EXPECT_TRUE(verify_rs256(input, signature, public_pem));
  EXPECT_FALSE(verify_rs256(input + "x", signature, public_pem));
  EXPECT_FALSE(verify_rs256(input, signature, rsa_key_pair().second)) << "another key must not verify it";
}

TEST(CloudJwtAssertion, LifetimeIsAtMostAnHour) {
  const ServiceAccountKey key{"a@b", "k", rsa_key_pair().first, "https://oauth2.googleapis.com/token"};
  const std::string jwt = build_jwt_assertion(key, 100, std::chrono::hours(5));
  const auto first_dot = jwt.find('.');
  const auto second_dot = jwt.find('.', first_dot + 1);
  const auto claims = nlohmann::json::parse(base64url_decode(jwt.substr(first_dot + 1, second_dot - first_dot - 1)));
  EXPECT_EQ(claims.at("exp").get<long long>() - claims.at("iat").get<long long>(), 3600);
}

TEST(CloudJwtAssertion, ABadPrivateKeyIsAnError) {
  const ServiceAccountKey key{"a@b", "k", "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", "x"};
  EXPECT_THROW(build_jwt_assertion(key, 1), Error);
}

TEST(CloudServiceAccountKey, ParsesGoogleKeyFilesAndNamesTheFileWhenAFieldIsMissing) {
  const auto key = parse_service_account_key(
      R"({"type":"service_account","client_email":"e@p","private_key_id":"id1","private_key":"PEM","token_uri":"http://t/token"})",
      "key.json");
  EXPECT_EQ(key.client_email, "e@p");
  EXPECT_EQ(key.private_key_id, "id1");
  EXPECT_EQ(key.private_key, "PEM");
  EXPECT_EQ(key.token_uri, "http://t/token");
  try {
    parse_service_account_key(R"({"client_email":"e@p","private_key":"PEM"})", "/keys/k.json");
    FAIL() << "a key without private_key_id was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("/keys/k.json"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("private_key_id"), std::string::npos) << error.what();
  }
  EXPECT_THROW(parse_service_account_key("not json", "k.json"), Error);
}

TEST(CloudRequestId, IsARandomVersion4Uuid) {
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const auto id = new_request_id();
    EXPECT_TRUE(std::regex_match(id, uuid)) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 100U);
}

// A source that counts its fetches and hands out tokens expiring `lifetime` from now.
class CountingSource final : public TokenSource {
public:
  CountingSource(std::atomic<int>& fetches, std::chrono::seconds lifetime) : fetches_(fetches), lifetime_(lifetime) {}
  AccessToken fetch() override {
    const int n = ++fetches_;
    return AccessToken{"token-" + std::to_string(n), std::chrono::system_clock::now() + lifetime_};
  }
  [[nodiscard]] std::string describe() const override { return "counting"; }

private:
  std::atomic<int>& fetches_;
  std::chrono::seconds lifetime_;
};

TEST(CloudTokenCache, FetchesOnceForManyCallsFromManyThreads) {
  std::atomic<int> fetches{0};
  CachedTokenSource cache(std::make_unique<CountingSource>(fetches, std::chrono::hours(1)));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(cache.token(), "token-1");
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_EQ(cache.describe(), "counting");
}

TEST(CloudTokenCache, RefreshesATokenCloseToExpiryAndAfterInvalidate) {
  std::atomic<int> fetches{0};
  // Tokens that expire in 30 s are inside the 60 s margin: each call needs a new one.
  CachedTokenSource near_expiry(std::make_unique<CountingSource>(fetches, std::chrono::seconds(30)));
  EXPECT_EQ(near_expiry.token(), "token-1");
  EXPECT_EQ(near_expiry.token(), "token-2");

  std::atomic<int> more{0};
  CachedTokenSource cache(std::make_unique<CountingSource>(more, std::chrono::hours(1)));
  EXPECT_EQ(cache.token(), "token-1");
  cache.invalidate();
  EXPECT_EQ(cache.token(), "token-2");
  EXPECT_EQ(cache.token(), "token-2");
}

TEST(CloudTokenSource, DescriptionsNeverContainTheToken) {
  const auto source = make_static_token_source("ya29.secret-value", "JOBMAN_ACCESS_TOKEN");
  EXPECT_EQ(source->fetch().value, "ya29.secret-value");
  EXPECT_EQ(source->describe().find("secret"), std::string::npos) << source->describe();
  EXPECT_NE(source->describe().find("JOBMAN_ACCESS_TOKEN"), std::string::npos);
}

} // namespace cloud_auth_test
} // namespace jobman::cloud

namespace jobman::cloud {
namespace cloud_auth_test {

using jobman::test::ScopedEnv;

TEST(CloudDefaultTokenSource, TakesTheFirstSourceThatApplies) {
  const auto dir = std::filesystem::temp_directory_path() / ("jobman-auth-chain-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto key_file = dir / "key.json";
  {
    std::ofstream out(key_file);
    out << nlohmann::json{{"client_email", "sa@p"},
                          {"private_key_id", "k"},
                          {"private_key", "PEM"},
                          {"token_uri", "http://127.0.0.1:9/token"}}
               .dump();
  }
  std::string gcloud = "/bin/true";
  {
    const ScopedEnv token("JOBMAN_ACCESS_TOKEN", "secret-token");
    const ScopedEnv creds("GOOGLE_APPLICATION_CREDENTIALS", key_file.c_str());
    const auto source = make_default_token_source(gcloud);
    EXPECT_NE(source->describe().find("JOBMAN_ACCESS_TOKEN"), std::string::npos) << source->describe();
  }
  {
    const ScopedEnv token("JOBMAN_ACCESS_TOKEN", nullptr);
    const ScopedEnv creds("GOOGLE_APPLICATION_CREDENTIALS", key_file.c_str());
    const auto source = make_default_token_source(gcloud);
    EXPECT_NE(source->describe().find("service account sa@p"), std::string::npos) << source->describe();
  }
  {
    const ScopedEnv token("JOBMAN_ACCESS_TOKEN", nullptr);
    const ScopedEnv creds("GOOGLE_APPLICATION_CREDENTIALS", nullptr);
    const auto source = make_default_token_source(gcloud);
    EXPECT_NE(source->describe().find("/bin/true auth print-access-token"), std::string::npos) << source->describe();
  }
  {
    const ScopedEnv token("JOBMAN_ACCESS_TOKEN", nullptr);
    const ScopedEnv creds("GOOGLE_APPLICATION_CREDENTIALS", nullptr);
    const ScopedEnv host("GCE_METADATA_HOST", "127.0.0.1:9");
    gcloud = "jobman-no-such-gcloud";
    const auto source = make_default_token_source(gcloud);
    EXPECT_NE(source->describe().find("http://127.0.0.1:9/computeMetadata/v1/instance/service-accounts/default/token"),
              std::string::npos)
        << source->describe();
  }
  std::filesystem::remove_all(dir);
}

} // namespace cloud_auth_test
} // namespace jobman::cloud
