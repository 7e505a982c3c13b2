// The mock's authentication: Google's OAuth token endpoint (JWT-bearer grant), the metadata server's token path,
// and the bearer-token check the /v2 routes use.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace httplib {
class Server;
} // namespace httplib

namespace jobman::mock {

// The clock the authority reads; tests pass a fixed one.
using AuthClock = std::chrono::system_clock;

// What a generated service account is called and where its tokens come from.
struct ServiceAccountOptions {
  std::string project_id = "jobman-mock"; // The key file's project_id and the email's domain.
  std::string account_id = "jobman";      // The part of client_email before '@'.
  std::string token_uri;                  // The mock's token URL, e.g. http://127.0.0.1:8471/token.
};

// A generated service-account key: the key file jobman reads and the public half the mock trusts.
struct ServiceAccountKey {
  nlohmann::json key_file;    // The JSON Google issues: type, project_id, private_key_id, private_key, ...
  std::string client_email;   // The account's email, the JWT's iss.
  std::string private_key_id; // The key's id, the JWT header's kid.
  std::string public_key_pem; // The public key that verifies the account's assertions.
  std::string token_uri;      // The token URL written into the key file.
};

// Generates an RSA-2048 service-account key; throws jobman::Error when OpenSSL fails.
ServiceAccountKey generate_service_account_key(const ServiceAccountOptions& options);

// The directory under a mock state directory that holds trusted public keys: <state-dir>/service-accounts.
std::filesystem::path trusted_keys_dir(const std::filesystem::path& state_dir);

// The file under a mock state directory whose lines are static access tokens: <state-dir>/access-tokens.
std::filesystem::path static_tokens_file(const std::filesystem::path& state_dir);

// Saves the public half of `key` as <dir>/<private_key_id>.json (created with mode 0700); returns the path.
std::filesystem::path save_trusted_key(const std::filesystem::path& dir, const ServiceAccountKey& key);

// Writes the key file (mode 0600) to `key_path` and saves its public half into trusted_keys_dir(state_dir).
void write_service_account_key(const std::filesystem::path& key_path, const std::filesystem::path& state_dir,
                               const ServiceAccountKey& key);

// An access token the authority issued, as the token endpoints return it.
struct IssuedToken {
  std::string access_token;          // "ya29." and 32 random bytes in base64url, like Google's tokens.
  std::chrono::seconds expires_in{}; // Lifetime from the moment of issue.
};

// An OAuth error response: the HTTP status and the JSON body's "error" and "error_description".
struct OAuthError {
  int status = 400;        // HTTP status.
  std::string error;       // invalid_grant, invalid_request, invalid_scope or unsupported_grant_type.
  std::string description; // A sentence for the person reading the client's error.
};

// The outcome of a token request: exactly one of the token or the error is meaningful.
struct GrantResult {
  std::optional<IssuedToken> token; // Set on success.
  OAuthError error;                 // Meaningful when token is empty.
};

// Issues and checks access tokens and trusts service-account keys; every member is thread-safe.
class TokenAuthority {
public:
  // An authority whose tokens live `token_lifetime` and whose clock is `clock` (the system clock by default).
  explicit TokenAuthority(std::chrono::seconds token_lifetime = std::chrono::seconds{3600},
                          std::function<AuthClock::time_point()> clock = {});

  // The authority's current time.
  [[nodiscard]] AuthClock::time_point now() const;

  // Issues a fresh random token that expires one token lifetime after `now`.
  IssuedToken issue(AuthClock::time_point now);

  // True when `token` is a static token, one this authority issued that has not expired at `now`, or a self-signed
  // JWT (self_signed_jwt_valid).
  [[nodiscard]] bool valid(std::string_view token, AuthClock::time_point now) const;

  // The issued tokens that have not expired at `now` (for the admin API: tests look for them where they must not be).
  [[nodiscard]] std::vector<std::string> issued_tokens(AuthClock::time_point now) const;

  // True when `authorization_header` is "Bearer <token>" (scheme case-insensitive) with a valid token.
  [[nodiscard]] bool authorize(std::string_view authorization_header, AuthClock::time_point now) const;

  // Accepts `token` forever, e.g. a value the user also sets as JOBMAN_ACCESS_TOKEN; empty tokens are refused.
  void trust_static_token(std::string token);

  // Trusts every non-empty, non-'#' line of `path` as a static token; returns how many; throws jobman::Error.
  std::size_t load_static_tokens(const std::filesystem::path& path);

  // Trusts a service account's public key for assertions with iss `client_email` and kid `private_key_id`.
  void trust_key(const std::string& client_email, const std::string& private_key_id, const std::string& public_key_pem,
                 const std::string& token_uri = {});

  // Trusts the public half of a generated key.
  void trust_key(const ServiceAccountKey& key);

  // Trusts every *.json written by save_trusted_key in `dir` (none when it is missing); returns how many;
  // throws jobman::Error naming a file that is not a trusted-key record.
  std::size_t load_trusted_keys(const std::filesystem::path& dir);

  // Loads trusted_keys_dir(state_dir) and, when it exists, static_tokens_file(state_dir); throws jobman::Error.
  void load_state_dir(const std::filesystem::path& state_dir);

  // Judges a JWT-bearer grant (form fields grant_type and assertion) that arrived at `request_url`: RS256 signature
  // by the key named by kid (or any key of iss), aud, iat/exp and scope; issues a token or says why not.
  GrantResult exchange(const std::map<std::string, std::string>& form, std::string_view request_url,
                       AuthClock::time_point now);

private:
  struct TrustedKey {
    std::string client_email;
    std::string private_key_id;
    std::string public_key_pem;
    std::string token_uri;
  };
  void prune_expired(AuthClock::time_point now);
  // True when `token` is a JWT that a trusted service-account key signed for its own account (RS256; kid the key's
  // id; iss and sub its email), current at `now` and living at most an hour, with a scope claim or an audience: what
  // Google's APIs take in place of an access token, and what gcloud's alpha and beta compute commands send. The
  // caller holds mutex_.
  [[nodiscard]] bool self_signed_jwt_valid(std::string_view token, AuthClock::time_point now) const;

  std::chrono::seconds lifetime_;
  std::function<AuthClock::time_point()> clock_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, AuthClock::time_point> issued_; // Token -> expiry.
  std::set<std::string, std::less<>> static_tokens_;
  std::map<std::string, TrustedKey, std::less<>> keys_; // private_key_id -> key.
  std::size_t issues_since_prune_ = 0;
};

// Where the auth routes say they are and whom the metadata server speaks for.
struct AuthRouteOptions {
  // Answered at /computeMetadata/v1/project/project-id.
  std::string project_id = "jobman-mock";
  // Answered at /computeMetadata/v1/instance/service-accounts/default/email.
  std::string metadata_email = "default@jobman-mock.iam.gserviceaccount.com";
  // Answered at /computeMetadata/v1/project/numeric-project-id: how gcloud on a VM learns that it is on one.
  std::string numeric_project_id = "1";
};

// Registers POST /token and /oauth2/v4/token (JWT-bearer grant) and the metadata server's token, email,
// project-id and numeric-project-id paths on `server`; `authority` must outlive the server.
void register_auth_routes(httplib::Server& server, TokenAuthority& authority, const AuthRouteOptions& options = {});

} // namespace jobman::mock
