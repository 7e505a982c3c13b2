// The mock's authentication: service-account keys, the JWT-bearer token endpoint, the metadata server's token
// path, and the bearer-token check of the /v2 routes.
#include "jobman/util/base64url.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/auth.hpp"
#include "mock_cloud/jwt.hpp"
#include "support/serving_thread.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <thread>

namespace jobman::mock {
namespace auth_test {

using namespace std::chrono_literals;

constexpr const char* kScope = "https://www.googleapis.com/auth/cloud-platform";
constexpr const char* kJwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer";

std::int64_t epoch_seconds(AuthClock::time_point time) {
  return std::chrono::duration_cast<std::chrono::seconds>(time.time_since_epoch()).count();
}

// The header and claims of a well-formed assertion for `key_file`, valid from now for an hour.
struct Assertion {
  nlohmann::json header;
  nlohmann::json claims;
};

Assertion valid_assertion(const nlohmann::json& key_file, const std::string& aud) {
  const std::int64_t now = epoch_seconds(AuthClock::now());
  return Assertion{
      nlohmann::json{{"alg", "RS256"}, {"typ", "JWT"}, {"kid", key_file.at("private_key_id")}},
      nlohmann::json{
          {"iss", key_file.at("client_email")}, {"scope", kScope}, {"aud", aud}, {"iat", now}, {"exp", now + 3600}},
  };
}

std::string sign(const Assertion& assertion, const nlohmann::json& key_file) {
  return sign_jwt_rs256(assertion.header, assertion.claims, key_file.at("private_key").get<std::string>());
}

TEST(Jwt, ParseRefusesAnythingButThreeJsonParts) {
  EXPECT_FALSE(parse_jwt(""));
  EXPECT_FALSE(parse_jwt("a.b"));
  EXPECT_FALSE(parse_jwt("a.b.c.d"));
  EXPECT_FALSE(parse_jwt(util::base64url_encode("[1]") + "." + util::base64url_encode("{}") + "."));
  EXPECT_FALSE(parse_jwt(util::base64url_encode("{") + "." + util::base64url_encode("{}") + "."));
  const auto jwt =
      parse_jwt(util::base64url_encode(R"({"alg":"RS256"})") + "." + util::base64url_encode(R"({"iss":"x"})") + ".");
  ASSERT_TRUE(jwt);
  EXPECT_EQ(jwt->header.at("alg"), "RS256");
  EXPECT_EQ(jwt->claims.at("iss"), "x");
  EXPECT_TRUE(jwt->signature.empty());
}

// Base64url with its '=' padding put back, as google-auth for Python before 1.6 writes every JWT segment.
std::string padded(std::string segment) {
  segment.append((4 - segment.size() % 4) % 4, '=');
  return segment;
}

// An assertion signed as google-auth for Python before 1.6 signs it: each segment padded, the signature over the
// padded header and claims.
std::string sign_padded(const Assertion& assertion, const nlohmann::json& key_file) {
  const std::string input = padded(util::base64url_encode(assertion.header.dump())) + "." +
                            padded(util::base64url_encode(assertion.claims.dump()));
  const std::string pem = key_file.at("private_key");
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::size_t size = 0;
  std::string signature;
  const auto* data = reinterpret_cast<const unsigned char*>(input.data());
  if (key != nullptr && ctx != nullptr && EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestSign(ctx, nullptr, &size, data, input.size()) == 1) {
    signature.resize(size);
    if (EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(signature.data()), &size, data, input.size()) != 1) {
      signature.clear();
    }
  }
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  EXPECT_FALSE(signature.empty()) << "cannot sign with the key file's private key";
  return input + "." + padded(util::base64url_encode(signature));
}

TEST(Jwt, ParseTakesPaddedSegmentsButOnlyWithTheRightPadding) {
  const std::string header = util::base64url_encode(R"({"alg":"RS256"})"); // 15 bytes: no padding.
  const std::string claims = util::base64url_encode(R"({"iss":"xy"})");    // 12 bytes: no padding.
  const std::string signature = util::base64url_encode("sig!!");           // 5 bytes: "=" of padding.
  const auto jwt = parse_jwt(header + "." + padded(util::base64url_encode(R"({"a":1})")) + "." + padded(signature));
  ASSERT_TRUE(jwt);
  EXPECT_EQ(jwt->claims.at("a"), 1);
  EXPECT_EQ(jwt->signature, "sig!!");
  // The signing input is the segments as sent, padding included.
  EXPECT_EQ(jwt->signing_input, header + "." + padded(util::base64url_encode(R"({"a":1})")));
  EXPECT_TRUE(parse_jwt(header + "." + claims + "." + util::base64url_encode("sig")));

  EXPECT_FALSE(parse_jwt(header + "." + claims + "." + signature + "=="));    // Not a multiple of four.
  EXPECT_FALSE(parse_jwt(header + "." + claims + "." + signature + "=====")); // Too much padding.
  EXPECT_FALSE(parse_jwt(header + "." + claims + "====." + signature));       // Padding where none is needed.
  EXPECT_FALSE(parse_jwt(header + "." + claims + "." + "c2lnIQ=x"));          // Padding inside the text.
  EXPECT_FALSE(parse_jwt(header + "." + claims + "." + "===="));
}

TEST(ServiceAccountKeyFile, HasGoogleFieldsAndAPrivateKeyThatSignsForTheSavedPublicKey) {
  const test::TempDir dir;
  const std::string token_uri = "http://127.0.0.1:8471/token";
  const ServiceAccountKey key = generate_service_account_key({"lab-project", "trainer", token_uri});
  const auto key_path = dir / "keys" / "trainer.json";
  write_service_account_key(key_path, dir.path(), key);

  const auto perms = std::filesystem::status(key_path).permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::ifstream in(key_path);
  const nlohmann::json file = nlohmann::json::parse(in);
  EXPECT_EQ(file.at("type"), "service_account");
  EXPECT_EQ(file.at("project_id"), "lab-project");
  EXPECT_EQ(file.at("client_email"), "trainer@lab-project.iam.gserviceaccount.com");
  EXPECT_EQ(file.at("token_uri"), token_uri);
  EXPECT_EQ(file.at("auth_uri"), "http://127.0.0.1:8471/o/oauth2/auth");
  EXPECT_EQ(file.at("private_key_id").get<std::string>().size(), 40U);
  EXPECT_EQ(file.at("client_id").get<std::string>().size(), 21U);
  const std::string private_key = file.at("private_key");
  EXPECT_EQ(private_key.rfind("-----BEGIN PRIVATE KEY-----\n", 0), 0U);
  EXPECT_EQ(public_key_of(private_key), key.public_key_pem);

  // A JWT signed with the key file's private key verifies against the public key saved for the mock.
  std::ifstream record_in(trusted_keys_dir(dir.path()) / (key.private_key_id + ".json"));
  const nlohmann::json record = nlohmann::json::parse(record_in);
  EXPECT_FALSE(record.contains("private_key"));
  const auto jwt = parse_jwt(sign(valid_assertion(file, token_uri), file));
  ASSERT_TRUE(jwt);
  EXPECT_TRUE(verify_rs256(jwt->signing_input, jwt->signature, record.at("public_key")));
  EXPECT_FALSE(verify_rs256(jwt->signing_input + " ", jwt->signature, record.at("public_key")));
  EXPECT_FALSE(verify_rs256(jwt->signing_input, jwt->signature, "not a key"));
}

TEST(ServiceAccountKeyFile, KeysSavedBeforeTheAuthorityStartsAreTrusted) {
  const test::TempDir dir;
  const std::string token_uri = "http://127.0.0.1:8471/token";
  const ServiceAccountKey key = generate_service_account_key({"lab-project", "trainer", token_uri});
  write_service_account_key(dir / "key.json", dir.path(), key);

  TokenAuthority authority;
  EXPECT_EQ(authority.load_trusted_keys(trusted_keys_dir(dir.path())), 1U);
  const std::map<std::string, std::string> form{
      {"grant_type", kJwtBearer}, {"assertion", sign(valid_assertion(key.key_file, token_uri), key.key_file)}};
  // The request reaches the mock under another name; the key's own token_uri is still an accepted aud.
  const GrantResult result = authority.exchange(form, "http://localhost:8471/token", AuthClock::now());
  ASSERT_TRUE(result.token) << result.error.description;
  EXPECT_TRUE(authority.authorize("Bearer " + result.token->access_token, AuthClock::now()));

  TokenAuthority empty;
  EXPECT_FALSE(empty.exchange(form, token_uri, AuthClock::now()).token);
  EXPECT_EQ(empty.load_trusted_keys(dir / "missing"), 0U);
}

TEST(ServiceAccountKeyFile, AMalformedTrustedKeyRecordIsAnError) {
  const test::TempDir dir;
  dir.write("service-accounts/broken.json", R"({"type":"jobman_mock_trusted_key","client_email":"a@b"})");
  TokenAuthority authority;
  EXPECT_THROW(authority.load_trusted_keys(trusted_keys_dir(dir.path())), Error);
}

TEST(TokenAuthority, IssuedTokensAreRandomAndExpireAfterTheirLifetime) {
  TokenAuthority authority(600s);
  const auto t0 = AuthClock::now();
  const IssuedToken first = authority.issue(t0);
  const IssuedToken second = authority.issue(t0);
  EXPECT_NE(first.access_token, second.access_token);
  EXPECT_GE(first.access_token.size(), 40U);
  EXPECT_EQ(first.expires_in, 600s);
  EXPECT_TRUE(authority.valid(first.access_token, t0 + 599s));
  EXPECT_FALSE(authority.valid(first.access_token, t0 + 600s));
  EXPECT_TRUE(authority.authorize("Bearer " + first.access_token, t0));
  EXPECT_FALSE(authority.authorize("Bearer " + first.access_token, t0 + 601s));
}

TEST(TokenAuthority, AuthorizeAcceptsOnlyBearerWithAKnownToken) {
  TokenAuthority authority;
  const auto now = AuthClock::now();
  const std::string token = authority.issue(now).access_token;
  EXPECT_TRUE(authority.authorize("Bearer " + token, now));
  EXPECT_TRUE(authority.authorize("bearer  " + token + " ", now));
  EXPECT_FALSE(authority.authorize("", now));
  EXPECT_FALSE(authority.authorize("Bearer", now));
  EXPECT_FALSE(authority.authorize("Bearer ", now));
  EXPECT_FALSE(authority.authorize("Bearer" + token, now));
  EXPECT_FALSE(authority.authorize("Basic " + token, now));
  EXPECT_FALSE(authority.authorize(token, now));
  EXPECT_FALSE(authority.authorize("Bearer " + token.substr(0, token.size() - 1), now));
  EXPECT_FALSE(authority.authorize("Bearer ya29." + util::base64url_encode(random_bytes(32)), now));
  EXPECT_FALSE(authority.authorize("Bearer \x01\xff garbage", now));
}

TEST(TokenAuthority, StaticTokensNeverExpireAndLoadFromAFile) {
  const test::TempDir dir;
  TokenAuthority authority;
  const auto now = AuthClock::now();
  authority.trust_static_token("lab-token-1");
  EXPECT_TRUE(authority.authorize("Bearer lab-token-1", now + 24h * 365));
  EXPECT_FALSE(authority.valid("lab-token", now));
  EXPECT_THROW(authority.trust_static_token(""), Error);

  const auto file = dir.write("access-tokens", "# tokens the mock accepts\n\n  lab-token-2  \nlab-token-3\n");
  EXPECT_EQ(authority.load_static_tokens(file), 2U);
  EXPECT_TRUE(authority.valid("lab-token-2", now));
  EXPECT_TRUE(authority.valid("lab-token-3", now));
  EXPECT_FALSE(authority.valid("# tokens the mock accepts", now));
  EXPECT_THROW(authority.load_static_tokens(dir / "missing"), Error);
}

TEST(TokenAuthority, LoadsKeysAndStaticTokensFromAStateDirectory) {
  const test::TempDir dir;
  TokenAuthority authority;
  authority.load_state_dir(dir.path()); // An empty state directory trusts nothing and is no error.
  EXPECT_FALSE(authority.valid("lab-token", AuthClock::now()));

  const std::string token_uri = "http://127.0.0.1:8471/token";
  const ServiceAccountKey key = generate_service_account_key({"lab-project", "trainer", token_uri});
  write_service_account_key(dir / "key.json", dir.path(), key);
  util::write_file_atomic(static_tokens_file(dir.path()), "lab-token\n", 0600);
  authority.load_state_dir(dir.path());
  EXPECT_TRUE(authority.valid("lab-token", AuthClock::now()));
  const std::map<std::string, std::string> form{
      {"grant_type", kJwtBearer}, {"assertion", sign(valid_assertion(key.key_file, token_uri), key.key_file)}};
  EXPECT_TRUE(authority.exchange(form, token_uri, AuthClock::now()).token);
}

TEST(TokenAuthority, IssuesAndChecksFromManyThreads) {
  TokenAuthority authority;
  const auto now = AuthClock::now();
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> accepted = 0;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        if (authority.valid(authority.issue(now).access_token, now)) {
          ++accepted;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(accepted, 1200);
}

// A real HTTP server on 127.0.0.1 with the auth routes, shared by the tests of one suite.
class AuthRoutesTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    authority_ = std::make_unique<TokenAuthority>();
    server_ = std::make_unique<httplib::Server>();
    register_auth_routes(*server_, *authority_,
                         AuthRouteOptions{"lab-project", "vm@lab-project.iam.gserviceaccount.com"});
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    // The socket already listens, so requests queue until the thread accepts them.
    serving_ = std::make_unique<test::ServingThread>(*server_);
    token_url_ = "http://127.0.0.1:" + std::to_string(port_) + "/token";
    key_ = std::make_unique<ServiceAccountKey>(generate_service_account_key({"lab-project", "trainer", token_url_}));
    stranger_ =
        std::make_unique<ServiceAccountKey>(generate_service_account_key({"lab-project", "stranger", token_url_}));
    authority_->trust_key(*key_);
  }

  static void TearDownTestSuite() {
    serving_.reset();
    server_.reset();
    authority_.reset();
  }

  static httplib::Client client() {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_connection_timeout(10);
    cli.set_read_timeout(10);
    return cli;
  }

  // POSTs a JWT-bearer grant to `path` and returns the status and parsed body.
  static std::pair<int, nlohmann::json> post_grant(const std::string& assertion,
                                                   const std::string& grant_type = kJwtBearer,
                                                   const std::string& path = "/token") {
    httplib::Params params{{"grant_type", grant_type}};
    if (!assertion.empty()) {
      params.emplace("assertion", assertion);
    }
    auto res = client().Post(path.c_str(), params);
    if (!res) {
      ADD_FAILURE() << "no response from the mock's token endpoint";
      return {0, {}};
    }
    return {res->status, nlohmann::json::parse(res->body, nullptr, false)};
  }

  // Expects a 400 carrying the OAuth error `error` whose description mentions `reason`.
  static void expect_refused(const std::pair<int, nlohmann::json>& response, const std::string& error,
                             const std::string& reason = "") {
    EXPECT_EQ(response.first, 400);
    ASSERT_TRUE(response.second.is_object());
    EXPECT_EQ(response.second.value("error", ""), error);
    const std::string description = response.second.value("error_description", "");
    EXPECT_FALSE(description.empty());
    EXPECT_NE(description.find(reason), std::string::npos) << description;
    EXPECT_FALSE(response.second.contains("access_token"));
  }

  static inline std::unique_ptr<TokenAuthority> authority_;
  static inline std::unique_ptr<httplib::Server> server_;
  static inline std::unique_ptr<test::ServingThread> serving_;
  static inline int port_ = 0;
  static inline std::string token_url_;
  static inline std::unique_ptr<ServiceAccountKey> key_;
  static inline std::unique_ptr<ServiceAccountKey> stranger_;
};

TEST_F(AuthRoutesTest, AValidAssertionGetsABearerTokenThatAuthorizes) {
  const auto [status, body] = post_grant(sign(valid_assertion(key_->key_file, token_url_), key_->key_file));
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body.at("token_type"), "Bearer");
  EXPECT_EQ(body.at("expires_in"), 3600);
  const std::string token = body.at("access_token");
  EXPECT_TRUE(authority_->authorize("Bearer " + token, AuthClock::now()));
  EXPECT_FALSE(authority_->authorize("Bearer " + token, AuthClock::now() + 3601s));
}

TEST_F(AuthRoutesTest, TheGoogleV4PathAndAnAssertionWithoutKidAlsoWork) {
  const std::string v4_url = "http://127.0.0.1:" + std::to_string(port_) + "/oauth2/v4/token";
  Assertion assertion = valid_assertion(key_->key_file, v4_url);
  assertion.header.erase("kid");
  const auto [status, body] = post_grant(sign(assertion, key_->key_file), kJwtBearer, "/oauth2/v4/token");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_TRUE(authority_->valid(body.at("access_token").get<std::string>(), AuthClock::now()));
}

TEST_F(AuthRoutesTest, AnAssertionWithPaddedSegmentsIsAccepted) {
  // google-auth for Python before 1.6 (Debian 12 has 1.5.1) pads each segment; Google accepts that.
  const std::string jwt = sign_padded(valid_assertion(key_->key_file, token_url_), key_->key_file);
  ASSERT_NE(jwt.find('='), std::string::npos) << "no segment of this assertion needs padding";
  const auto [status, body] = post_grant(jwt);
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_TRUE(authority_->valid(body.at("access_token").get<std::string>(), AuthClock::now()));
}

TEST_F(AuthRoutesTest, RefusesASignatureByAnotherKey) {
  // The stranger's private key signs an assertion naming the trusted account and key.
  expect_refused(post_grant(sign(valid_assertion(key_->key_file, token_url_), stranger_->key_file)), "invalid_grant",
                 "Signature");
  expect_refused(post_grant(sign_padded(valid_assertion(key_->key_file, token_url_), stranger_->key_file)),
                 "invalid_grant", "Signature");
}

TEST_F(AuthRoutesTest, RefusesATamperedPayload) {
  const std::string jwt = sign(valid_assertion(key_->key_file, token_url_), key_->key_file);
  Assertion other = valid_assertion(key_->key_file, token_url_);
  other.claims["scope"] = "https://www.googleapis.com/auth/everything";
  const std::string forged_claims = util::base64url_encode(other.claims.dump());
  const auto first = jwt.find('.');
  const auto second = jwt.find('.', first + 1);
  const std::string tampered = jwt.substr(0, first + 1) + forged_claims + jwt.substr(second);
  expect_refused(post_grant(tampered), "invalid_grant", "Signature");
  // Padding is part of what is signed: the padded claims under the unpadded signing input's signature are refused.
  const std::string claims = jwt.substr(first + 1, second - first - 1);
  if (claims.size() % 4 != 0) {
    expect_refused(post_grant(jwt.substr(0, first + 1) + padded(claims) + jwt.substr(second)), "invalid_grant",
                   "Signature");
  }
}

TEST_F(AuthRoutesTest, RefusesExpiredAndOverlongAndFutureAssertions) {
  Assertion expired = valid_assertion(key_->key_file, token_url_);
  expired.claims["iat"] = expired.claims["iat"].get<std::int64_t>() - 7200;
  expired.claims["exp"] = expired.claims["exp"].get<std::int64_t>() - 7200;
  expect_refused(post_grant(sign(expired, key_->key_file)), "invalid_grant", "short-lived");

  Assertion overlong = valid_assertion(key_->key_file, token_url_);
  overlong.claims["exp"] = overlong.claims["iat"].get<std::int64_t>() + 3601;
  expect_refused(post_grant(sign(overlong, key_->key_file)), "invalid_grant", "short-lived");

  Assertion future = valid_assertion(key_->key_file, token_url_);
  future.claims["iat"] = future.claims["iat"].get<std::int64_t>() + 600;
  future.claims["exp"] = future.claims["iat"].get<std::int64_t>() + 600;
  expect_refused(post_grant(sign(future, key_->key_file)), "invalid_grant", "short-lived");

  Assertion text_times = valid_assertion(key_->key_file, token_url_);
  text_times.claims["exp"] = "tomorrow";
  expect_refused(post_grant(sign(text_times, key_->key_file)), "invalid_grant", "short-lived");
}

TEST_F(AuthRoutesTest, AcceptsTheAudiencesGooglesTokenEndpointAccepts) {
  // google-auth for Python (gcloud's) signs for Google's endpoint whatever the key file's token_uri says.
  for (const char* aud : {"https://oauth2.googleapis.com/token", "https://www.googleapis.com/oauth2/v4/token"}) {
    const auto [status, body] = post_grant(sign(valid_assertion(key_->key_file, aud), key_->key_file));
    EXPECT_EQ(status, 200) << aud << ": " << body.dump();
  }
}

TEST_F(AuthRoutesTest, RefusesAWrongAudience) {
  for (const char* aud : {"https://oauth2.googleapis.com/token/", "https://oauth2.googleapis.com/revoke",
                          "http://oauth2.googleapis.com/token", "https://example.com/token", ""}) {
    expect_refused(post_grant(sign(valid_assertion(key_->key_file, aud), key_->key_file)), "invalid_grant", "audience");
  }
  Assertion no_aud = valid_assertion(key_->key_file, token_url_);
  no_aud.claims.erase("aud");
  expect_refused(post_grant(sign(no_aud, key_->key_file)), "invalid_grant", "audience");
}

TEST_F(AuthRoutesTest, RefusesUnknownIssuersAndKeyIds) {
  // A well-signed assertion from an account the mock never trusted.
  expect_refused(post_grant(sign(valid_assertion(stranger_->key_file, token_url_), stranger_->key_file)),
                 "invalid_grant", "not found");

  Assertion unknown_kid = valid_assertion(key_->key_file, token_url_);
  unknown_kid.header["kid"] = std::string(40, '0');
  expect_refused(post_grant(sign(unknown_kid, key_->key_file)), "invalid_grant", "not found");

  // The trusted kid, claimed by another account.
  Assertion wrong_iss = valid_assertion(key_->key_file, token_url_);
  wrong_iss.claims["iss"] = stranger_->client_email;
  expect_refused(post_grant(sign(wrong_iss, key_->key_file)), "invalid_grant", "not found");
}

TEST_F(AuthRoutesTest, RefusesOtherAlgorithmsMissingScopesAndMalformedAssertions) {
  Assertion none = valid_assertion(key_->key_file, token_url_);
  none.header["alg"] = "none";
  const std::string unsigned_jwt =
      util::base64url_encode(none.header.dump()) + "." + util::base64url_encode(none.claims.dump()) + ".";
  expect_refused(post_grant(unsigned_jwt), "invalid_grant", "RS256");

  Assertion no_scope = valid_assertion(key_->key_file, token_url_);
  no_scope.claims.erase("scope");
  expect_refused(post_grant(sign(no_scope, key_->key_file)), "invalid_scope");

  expect_refused(post_grant("not-a-jwt"), "invalid_grant", "not a signed");
  expect_refused(post_grant("a.b.c"), "invalid_grant", "not a signed");
}

TEST_F(AuthRoutesTest, RefusesAWrongGrantTypeAndAMissingAssertion) {
  const std::string jwt = sign(valid_assertion(key_->key_file, token_url_), key_->key_file);
  expect_refused(post_grant(jwt, "client_credentials"), "unsupported_grant_type");
  expect_refused(post_grant(jwt, ""), "invalid_request", "grant_type");
  expect_refused(post_grant(""), "invalid_request", "assertion");

  auto res = client().Post("/token", nlohmann::json{{"grant_type", kJwtBearer}, {"assertion", jwt}}.dump(),
                           "application/json");
  ASSERT_TRUE(res);
  expect_refused({res->status, nlohmann::json::parse(res->body, nullptr, false)}, "invalid_request");

  // The assertion belongs in the body; one in the query string is not read.
  res = client().Post(("/token?grant_type=" + std::string(kJwtBearer) + "&assertion=" + jwt).c_str(), "",
                      "application/x-www-form-urlencoded");
  ASSERT_TRUE(res);
  expect_refused({res->status, nlohmann::json::parse(res->body, nullptr, false)}, "invalid_request");
}

TEST_F(AuthRoutesTest, MetadataTokenRequiresTheMetadataFlavorHeader) {
  const char* path = "/computeMetadata/v1/instance/service-accounts/default/token";
  auto refused = client().Get(path);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(refused->get_header_value("Metadata-Flavor"), "Google");
  EXPECT_EQ(refused->body.find("access_token"), std::string::npos);

  auto wrong = client().Get(path, httplib::Headers{{"Metadata-Flavor", "Other"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 403);

  auto proxied = client().Get(path, httplib::Headers{{"Metadata-Flavor", "Google"}, {"X-Forwarded-For", "10.0.0.1"}});
  ASSERT_TRUE(proxied);
  EXPECT_EQ(proxied->status, 403);

  auto res =
      client().Get((std::string(path) + "?scopes=" + kScope).c_str(), httplib::Headers{{"Metadata-Flavor", "Google"}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Metadata-Flavor"), "Google");
  const nlohmann::json body = nlohmann::json::parse(res->body);
  EXPECT_EQ(body.at("token_type"), "Bearer");
  EXPECT_EQ(body.at("expires_in"), 3600);
  EXPECT_TRUE(authority_->authorize("Bearer " + body.at("access_token").get<std::string>(), AuthClock::now()));
}

TEST_F(AuthRoutesTest, MetadataAnswersEmailAndProjectAsPlainText) {
  const httplib::Headers flavor{{"Metadata-Flavor", "Google"}};
  auto email = client().Get("/computeMetadata/v1/instance/service-accounts/default/email", flavor);
  ASSERT_TRUE(email);
  EXPECT_EQ(email->status, 200);
  EXPECT_EQ(email->body, "vm@lab-project.iam.gserviceaccount.com");
  auto project = client().Get("/computeMetadata/v1/project/project-id", flavor);
  ASSERT_TRUE(project);
  EXPECT_EQ(project->status, 200);
  EXPECT_EQ(project->body, "lab-project");
  auto refused = client().Get("/computeMetadata/v1/project/project-id");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
}

TEST_F(AuthRoutesTest, MetadataDirectoriesListWhatTheMockAnswersAndRedirectWithoutTheSlash) {
  const httplib::Headers flavor{{"Metadata-Flavor", "Google"}};
  // google-auth-library probes GET .../instance to learn whether it runs on a VM; the server redirects to the
  // directory, as Google's does.
  auto probe = client().Get("/computeMetadata/v1/instance", flavor);
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->status, 301);
  EXPECT_EQ(probe->get_header_value("Location"), "/computeMetadata/v1/instance/");
  EXPECT_EQ(probe->get_header_value("Metadata-Flavor"), "Google");
  auto instance = client().Get("/computeMetadata/v1/instance/", flavor);
  ASSERT_TRUE(instance);
  EXPECT_EQ(instance->status, 200);
  EXPECT_EQ(instance->body, "service-accounts/\n");
  auto account = client().Get("/computeMetadata/v1/instance/service-accounts/default/", flavor);
  ASSERT_TRUE(account);
  EXPECT_EQ(account->body, "email\ntoken\n");
  auto universe = client().Get("/computeMetadata/v1/universe/universe-domain", flavor);
  ASSERT_TRUE(universe);
  EXPECT_EQ(universe->status, 200);
  EXPECT_EQ(universe->body, "googleapis.com");
  for (const char* path : {"/computeMetadata/v1/instance", "/computeMetadata/v1/instance/",
                           "/computeMetadata/v1/universe/universe-domain"}) {
    auto refused = client().Get(path);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 403) << path;
  }
}

} // namespace auth_test
} // namespace jobman::mock
