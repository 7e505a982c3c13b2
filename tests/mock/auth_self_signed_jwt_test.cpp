// Self-signed JWTs as bearer tokens: Google's APIs take a JWT a service account signed for itself in place of an
// access token, and gcloud's alpha and beta compute commands send one (auth/service_account_use_self_signed_jwt).
#include "mock_cloud/auth.hpp"
#include "mock_cloud/jwt.hpp"

#include <gtest/gtest.h>

namespace jobman::mock {
namespace auth_self_signed_jwt_test {

std::int64_t epoch_seconds(AuthClock::time_point time) {
  return std::chrono::duration_cast<std::chrono::seconds>(time.time_since_epoch()).count();
}

class SelfSignedJwtTest : public ::testing::Test {
protected:
  void SetUp() override { authority.trust_key(key); }

  // The claims gcloud signs: iss and sub the account, a scope, an hour from now.
  [[nodiscard]] nlohmann::json claims() const {
    const auto now = epoch_seconds(AuthClock::now());
    return {{"iss", key.client_email},
            {"sub", key.client_email},
            {"scope", "https://www.googleapis.com/auth/cloud-platform"},
            {"iat", now},
            {"exp", now + 3600}};
  }
  [[nodiscard]] nlohmann::json header() const {
    return {{"typ", "JWT"}, {"alg", "RS256"}, {"kid", key.private_key_id}};
  }
  [[nodiscard]] std::string signed_by(const ServiceAccountKey& signer, const nlohmann::json& header,
                                      const nlohmann::json& claims) const {
    return sign_jwt_rs256(header, claims, signer.key_file.at("private_key").get<std::string>());
  }
  [[nodiscard]] bool accepted(const std::string& token) const { return authority.valid(token, AuthClock::now()); }

  ServiceAccountKey key = generate_service_account_key({"lab", "trainer", "http://127.0.0.1:1/token"});
  TokenAuthority authority;
};

TEST_F(SelfSignedJwtTest, AJwtATrustedKeySignedForItsOwnAccountIsABearerToken) {
  EXPECT_TRUE(accepted(signed_by(key, header(), claims())));
  auto for_one_api = claims();
  for_one_api.erase("scope");
  for_one_api["aud"] = "https://tpu.googleapis.com/";
  EXPECT_TRUE(accepted(signed_by(key, header(), for_one_api)));
}

TEST_F(SelfSignedJwtTest, AnyOtherJwtIsRefused) {
  const auto other = generate_service_account_key({"lab", "intruder", "http://127.0.0.1:1/token"});
  EXPECT_FALSE(accepted(signed_by(other, header(), claims()))) << "signed by a key the mock does not trust";
  auto other_header = header();
  other_header["kid"] = other.private_key_id;
  EXPECT_FALSE(accepted(signed_by(other, other_header, claims()))) << "a key id the mock does not trust";
  auto hs = header();
  hs["alg"] = "HS256";
  EXPECT_FALSE(accepted(signed_by(key, hs, claims()))) << "not RS256";
  for (const char* claim : {"iss", "sub"}) {
    auto changed = claims();
    changed[claim] = "someone@lab.iam.gserviceaccount.com";
    EXPECT_FALSE(accepted(signed_by(key, header(), changed))) << claim << " another account";
  }
  auto expired = claims();
  expired["iat"] = expired["iat"].get<std::int64_t>() - 7200;
  expired["exp"] = expired["exp"].get<std::int64_t>() - 7200;
  EXPECT_FALSE(accepted(signed_by(key, header(), expired))) << "expired";
  auto overlong = claims();
  overlong["exp"] = overlong["iat"].get<std::int64_t>() + 7200;
  EXPECT_FALSE(accepted(signed_by(key, header(), overlong))) << "living more than an hour";
  auto unscoped = claims();
  unscoped.erase("scope");
  EXPECT_FALSE(accepted(signed_by(key, header(), unscoped))) << "neither scope nor audience";
  auto token = signed_by(key, header(), claims());
  auto& flipped = token[token.size() - 10]; // Inside the signature, clear of the last character's padding bits.
  flipped = flipped == 'A' ? 'B' : 'A';
  EXPECT_FALSE(accepted(token)) << "a signature that does not verify";
}

} // namespace auth_self_signed_jwt_test
} // namespace jobman::mock
