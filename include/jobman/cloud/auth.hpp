// Access tokens for the TPU API: where they come from (environment, service-account key, gcloud, metadata server),
// and a thread-safe cache in front of them. Tokens are never logged, stored or put on a command line.
#pragma once

#include "jobman/cloud/http.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace jobman::cloud {

// An OAuth access token and when it stops working.
struct AccessToken {
  std::string value;                                                                           // The bearer token.
  std::chrono::system_clock::time_point expiry = std::chrono::system_clock::time_point::max(); // max() when unknown.
};

// Somewhere access tokens come from.
class TokenSource {
public:
  virtual ~TokenSource() = default;
  // Obtains a fresh token; throws jobman::Error naming the source when it cannot.
  virtual AccessToken fetch() = 0;
  // Where tokens come from, for diagnostics; never contains a token.
  [[nodiscard]] virtual std::string describe() const = 0;
  // The account (an email) the tokens belong to, what OS Login knows it by; "" when the source cannot tell. May ask
  // the source (gcloud's configuration, the metadata server); throws jobman::Error when that fails.
  virtual std::string account() { return {}; }
};

// A token given as is (JOBMAN_ACCESS_TOKEN); it never expires as far as jobman knows.
std::unique_ptr<TokenSource> make_static_token_source(std::string token, std::string origin);

// A service account's key file (the JSON Google issues) read from `key_file`.
std::unique_ptr<TokenSource> make_service_account_token_source(const std::string& key_file);

// `program auth print-access-token`, reading the token from its standard output.
std::unique_ptr<TokenSource> make_gcloud_token_source(const std::string& program);

// The metadata server's token path on `host` ("metadata.google.internal" or "127.0.0.1:8080").
std::unique_ptr<TokenSource> make_metadata_token_source(const std::string& host);

// The first source that applies: JOBMAN_ACCESS_TOKEN, GOOGLE_APPLICATION_CREDENTIALS, the `gcloud` program (the
// settings' one; none when empty) when it is found on PATH, then the metadata server ($GCE_METADATA_HOST or
// metadata.google.internal).
std::unique_ptr<TokenSource> make_default_token_source(const std::string& gcloud);

// A token endpoint's answer ({"access_token", "expires_in", "token_type"}) as a token; throws jobman::Error naming
// `source` for a failure, an error status or an answer without an access_token. Never includes the token in messages.
AccessToken parse_token_answer(const HttpResponse& response, const std::string& source);

// The fields of a service-account key file that signing needs.
struct ServiceAccountKey {
  std::string client_email;   // The JWT's issuer.
  std::string private_key_id; // The JWT header's kid.
  std::string private_key;    // PEM (PKCS#8) RSA private key.
  std::string token_uri;      // Where the assertion is exchanged; also its audience.
};

// Parses a key file's text; throws jobman::Error naming `origin` when a field is missing.
ServiceAccountKey parse_service_account_key(const std::string& text, const std::string& origin);

// The JWT-bearer assertion: header {alg RS256, typ JWT, kid}, claims {iss, scope cloud-platform, aud token_uri, iat,
// exp = iat + lifetime (at most an hour)}, signed with the key's private key (RS256). Throws jobman::Error on a bad
// key.
std::string build_jwt_assertion(const ServiceAccountKey& key, std::int64_t now_epoch_seconds,
                                std::chrono::seconds lifetime = std::chrono::seconds(3600));

// A source's tokens, each reused until `margin` before it expires. Thread-safe.
class CachedTokenSource {
public:
  // Wraps `source`; tokens are refreshed `margin` before their expiry.
  explicit CachedTokenSource(std::unique_ptr<TokenSource> source,
                             std::chrono::seconds margin = std::chrono::seconds(60));
  // A token that is still good, fetching one only when needed.
  std::string token();
  // Forgets the cached token (after the server refused it).
  void invalidate();
  // The underlying source's description.
  [[nodiscard]] std::string describe() const;
  // The account the tokens belong to: $JOBMAN_ACCOUNT when set, else the source's (asked once); throws jobman::Error
  // when neither tells.
  std::string account();

private:
  std::unique_ptr<TokenSource> source_;
  std::chrono::seconds margin_;
  std::mutex mutex_;
  AccessToken cached_;
  bool have_ = false;
  std::string account_;
};

// A random request id: a version 4 UUID from OpenSSL's RAND_bytes, e.g. "0f8fad5b-d9cb-469f-a165-70867728950e".
std::string new_request_id();

} // namespace jobman::cloud
