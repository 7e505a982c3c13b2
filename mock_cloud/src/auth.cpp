#include "mock_cloud/auth.hpp"

#include "jobman/util/base64url.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"
#include "mock_cloud/jwt.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace jobman::mock {
namespace {

constexpr std::string_view kJwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer";
constexpr std::string_view kTrustedKeyType = "jobman_mock_trusted_key";
constexpr std::int64_t kClockSkewSeconds = 60;
constexpr std::int64_t kMaxAssertionLifetimeSeconds = 3600;
constexpr std::size_t kPruneEvery = 256;
// The audiences Google's token endpoint accepts whatever URL the grant reached it at: its documented one, which
// google-auth for Python (and so gcloud) always sends, and the older one oauth2client sent.
constexpr std::array<std::string_view, 2> kGoogleTokenAudiences = {"https://oauth2.googleapis.com/token",
                                                                   "https://www.googleapis.com/oauth2/v4/token"};

std::string hex(std::string_view bytes) {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += kDigits[byte >> 4];
    out += kDigits[byte & 15];
  }
  return out;
}

// A 21-digit numeric id, the shape of a service account's client_id.
std::string numeric_id() {
  const std::string bytes = random_bytes(21);
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int digit = static_cast<unsigned char>(bytes[i]) % 10;
    out += static_cast<char>('0' + (i == 0 && digit == 0 ? 1 : digit));
  }
  return out;
}

// "scheme://host[:port]" of a URL, or the URL itself when it has no path.
std::string origin_of(const std::string& url) {
  const auto scheme_end = url.find("://");
  const auto path_start = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  return path_start == std::string::npos ? url : url.substr(0, path_start);
}

std::string percent_encode(std::string_view text) {
  static constexpr std::string_view kDigits = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kDigits[byte >> 4];
      out += kDigits[byte & 15];
    }
  }
  return out;
}

// True for ids that are safe as a file name: letters, digits, '-' and '_'.
bool is_plain_id(std::string_view id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
  });
}

GrantResult refuse(std::string error, std::string description) {
  return GrantResult{std::nullopt, OAuthError{400, std::move(error), std::move(description)}};
}

std::optional<std::string> string_member(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string()) {
    return std::nullopt;
  }
  return it->get<std::string>();
}

std::optional<std::int64_t> integer_member(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_number_integer()) {
    return std::nullopt;
  }
  return it->get<std::int64_t>();
}

std::int64_t epoch_seconds(AuthClock::time_point time) {
  return std::chrono::duration_cast<std::chrono::seconds>(time.time_since_epoch()).count();
}

} // namespace

ServiceAccountKey generate_service_account_key(const ServiceAccountOptions& options) {
  if (options.token_uri.empty()) {
    throw Error("mock cloud: a service-account key needs the token URL of the mock");
  }
  if (options.project_id.empty() || options.account_id.empty()) {
    throw Error("mock cloud: a service-account key needs a project id and an account id");
  }
  const RsaKeyPem pem = generate_rsa_key();
  ServiceAccountKey key;
  key.client_email = options.account_id + "@" + options.project_id + ".iam.gserviceaccount.com";
  key.private_key_id = hex(random_bytes(20));
  key.public_key_pem = pem.public_key_pem;
  key.token_uri = options.token_uri;
  const std::string origin = origin_of(options.token_uri);
  key.key_file = nlohmann::json{
      {"type", "service_account"},
      {"project_id", options.project_id},
      {"private_key_id", key.private_key_id},
      {"private_key", pem.private_key_pem},
      {"client_email", key.client_email},
      {"client_id", numeric_id()},
      {"auth_uri", origin + "/o/oauth2/auth"},
      {"token_uri", options.token_uri},
      {"auth_provider_x509_cert_url", origin + "/oauth2/v1/certs"},
      {"client_x509_cert_url", origin + "/robot/v1/metadata/x509/" + percent_encode(key.client_email)},
      {"universe_domain", "googleapis.com"},
  };
  return key;
}

std::filesystem::path trusted_keys_dir(const std::filesystem::path& state_dir) {
  return state_dir / "service-accounts";
}

std::filesystem::path static_tokens_file(const std::filesystem::path& state_dir) {
  return state_dir / "access-tokens";
}

std::filesystem::path save_trusted_key(const std::filesystem::path& dir, const ServiceAccountKey& key) {
  if (!is_plain_id(key.private_key_id)) {
    throw Error("mock cloud: a private_key_id must be letters, digits, '-' or '_'");
  }
  util::ensure_directory(dir, 0700);
  const nlohmann::json record{
      {"type", kTrustedKeyType},          {"client_email", key.client_email}, {"private_key_id", key.private_key_id},
      {"public_key", key.public_key_pem}, {"token_uri", key.token_uri},
  };
  auto path = dir / (key.private_key_id + ".json");
  util::write_file_atomic(path, record.dump(2) + "\n", 0644);
  return path;
}

void write_service_account_key(const std::filesystem::path& key_path, const std::filesystem::path& state_dir,
                               const ServiceAccountKey& key) {
  if (key_path.has_parent_path()) {
    std::filesystem::create_directories(key_path.parent_path());
  }
  util::write_file_atomic(key_path, key.key_file.dump(2) + "\n", 0600);
  save_trusted_key(trusted_keys_dir(state_dir), key);
}

TokenAuthority::TokenAuthority(std::chrono::seconds token_lifetime, std::function<AuthClock::time_point()> clock)
    : lifetime_(token_lifetime), clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] { return AuthClock::now(); };
  }
}

AuthClock::time_point TokenAuthority::now() const {
  return clock_();
}

IssuedToken TokenAuthority::issue(AuthClock::time_point now) {
  std::string token = "ya29." + util::base64url_encode(random_bytes(32));
  const std::lock_guard lock(mutex_);
  if (++issues_since_prune_ >= kPruneEvery) {
    prune_expired(now);
  }
  issued_[token] = now + lifetime_;
  return IssuedToken{std::move(token), lifetime_};
}

void TokenAuthority::prune_expired(AuthClock::time_point now) {
  issues_since_prune_ = 0;
  std::erase_if(issued_, [now](const auto& entry) { return entry.second <= now; });
}

bool TokenAuthority::valid(std::string_view token, AuthClock::time_point now) const {
  if (token.empty()) {
    return false;
  }
  const std::lock_guard lock(mutex_);
  if (static_tokens_.find(token) != static_tokens_.end()) {
    return true;
  }
  const auto it = issued_.find(std::string(token));
  if (it != issued_.end()) {
    return now < it->second;
  }
  return self_signed_jwt_valid(token, now);
}

bool TokenAuthority::self_signed_jwt_valid(std::string_view token, AuthClock::time_point now) const {
  const auto jwt = parse_jwt(token);
  if (!jwt || string_member(jwt->header, "alg") != "RS256") {
    return false;
  }
  const auto kid = string_member(jwt->header, "kid");
  const auto iss = string_member(jwt->claims, "iss");
  if (!kid || !iss || string_member(jwt->claims, "sub") != iss) {
    return false;
  }
  const auto key = keys_.find(*kid);
  if (key == keys_.end() || key->second.client_email != *iss ||
      !verify_rs256(jwt->signing_input, jwt->signature, key->second.public_key_pem)) {
    return false;
  }
  const auto iat = integer_member(jwt->claims, "iat");
  const auto exp = integer_member(jwt->claims, "exp");
  const std::int64_t now_s = epoch_seconds(now);
  if (!iat || !exp || *exp <= now_s || *iat > now_s + kClockSkewSeconds || *exp <= *iat ||
      *exp - *iat > kMaxAssertionLifetimeSeconds) {
    return false;
  }
  // Scoped (the scope claim, as gcloud signs it) or for one API (aud its URL).
  const auto scope = string_member(jwt->claims, "scope");
  const auto aud = string_member(jwt->claims, "aud");
  return (scope && !util::trim(*scope).empty()) || (aud && !aud->empty());
}

std::vector<std::string> TokenAuthority::issued_tokens(AuthClock::time_point now) const {
  const std::lock_guard lock(mutex_);
  std::vector<std::string> tokens;
  for (const auto& [token, expiry] : issued_) {
    if (now < expiry) {
      tokens.push_back(token);
    }
  }
  return tokens;
}

bool TokenAuthority::authorize(std::string_view authorization_header, AuthClock::time_point now) const {
  const std::string_view header = util::trim(authorization_header);
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() || (header[kScheme.size()] != ' ' && header[kScheme.size()] != '\t')) {
    return false;
  }
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) {
      return false;
    }
  }
  const std::string_view token = util::trim(header.substr(kScheme.size()));
  return valid(token, now);
}

void TokenAuthority::trust_static_token(std::string token) {
  if (token.empty()) {
    throw Error("mock cloud: an empty static access token cannot be trusted");
  }
  const std::lock_guard lock(mutex_);
  static_tokens_.insert(std::move(token));
}

std::size_t TokenAuthority::load_static_tokens(const std::filesystem::path& path) {
  const std::string text = util::read_file(path);
  std::size_t count = 0;
  for (const std::string& line : util::split(text, '\n')) {
    const std::string_view token = util::trim(line);
    if (token.empty() || token.front() == '#') {
      continue;
    }
    trust_static_token(std::string(token));
    ++count;
  }
  return count;
}

void TokenAuthority::trust_key(const std::string& client_email, const std::string& private_key_id,
                               const std::string& public_key_pem, const std::string& token_uri) {
  if (client_email.empty() || private_key_id.empty() || public_key_pem.empty()) {
    throw Error("mock cloud: a trusted key needs a client_email, a private_key_id and a public key");
  }
  const std::lock_guard lock(mutex_);
  keys_[private_key_id] = TrustedKey{client_email, private_key_id, public_key_pem, token_uri};
}

void TokenAuthority::trust_key(const ServiceAccountKey& key) {
  trust_key(key.client_email, key.private_key_id, key.public_key_pem, key.token_uri);
}

std::size_t TokenAuthority::load_trusted_keys(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return 0;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const nlohmann::json record = nlohmann::json::parse(util::read_file(file), nullptr, false);
    const auto type = record.is_object() ? string_member(record, "type") : std::nullopt;
    const auto email = record.is_object() ? string_member(record, "client_email") : std::nullopt;
    const auto key_id = record.is_object() ? string_member(record, "private_key_id") : std::nullopt;
    const auto public_key = record.is_object() ? string_member(record, "public_key") : std::nullopt;
    const auto token_uri = record.is_object() ? string_member(record, "token_uri") : std::nullopt;
    if (type != kTrustedKeyType || !email || !key_id || !public_key ||
        public_key->find("-----BEGIN PUBLIC KEY-----") == std::string::npos) {
      throw Error("mock cloud: " + file.string() +
                  " is not a trusted service-account key (type, client_email, private_key_id, public_key)");
    }
    trust_key(*email, *key_id, *public_key, token_uri.value_or(""));
  }
  return files.size();
}

void TokenAuthority::load_state_dir(const std::filesystem::path& state_dir) {
  load_trusted_keys(trusted_keys_dir(state_dir));
  std::error_code ec;
  if (std::filesystem::exists(static_tokens_file(state_dir), ec)) {
    load_static_tokens(static_tokens_file(state_dir));
  }
}

GrantResult TokenAuthority::exchange(const std::map<std::string, std::string>& form, std::string_view request_url,
                                     AuthClock::time_point now) {
  const auto grant_type = form.find("grant_type");
  if (grant_type == form.end() || grant_type->second.empty()) {
    return refuse("invalid_request", "Missing required parameter: grant_type");
  }
  if (grant_type->second != kJwtBearerGrant) {
    return refuse("unsupported_grant_type", "Invalid grant_type: " + grant_type->second);
  }
  const auto assertion = form.find("assertion");
  if (assertion == form.end() || assertion->second.empty()) {
    return refuse("invalid_request", "Missing required parameter: assertion");
  }
  const auto jwt = parse_jwt(assertion->second);
  if (!jwt) {
    return refuse("invalid_grant", "Invalid JWT: the assertion is not a signed JSON Web Token.");
  }
  if (string_member(jwt->header, "alg") != "RS256") {
    return refuse("invalid_grant", "Invalid JWT: the signing algorithm must be RS256.");
  }
  const auto iss = string_member(jwt->claims, "iss");
  if (!iss) {
    return refuse("invalid_grant", "Invalid JWT: no iss claim.");
  }
  const auto kid = string_member(jwt->header, "kid");
  if (jwt->header.contains("kid") && !kid) {
    return refuse("invalid_grant", "Invalid JWT: kid must be a string.");
  }

  // Candidate keys: the one named by kid, or every key of the account when there is no kid.
  std::vector<TrustedKey> candidates;
  {
    const std::lock_guard lock(mutex_);
    if (kid) {
      const auto it = keys_.find(*kid);
      if (it != keys_.end() && it->second.client_email == *iss) {
        candidates.push_back(it->second);
      }
    } else {
      for (const auto& [id, key] : keys_) {
        if (key.client_email == *iss) {
          candidates.push_back(key);
        }
      }
    }
  }
  if (candidates.empty()) {
    return refuse("invalid_grant", "Invalid grant: account or key not found.");
  }
  const auto signer = std::find_if(candidates.begin(), candidates.end(), [&](const TrustedKey& key) {
    return verify_rs256(jwt->signing_input, jwt->signature, key.public_key_pem);
  });
  if (signer == candidates.end()) {
    return refuse("invalid_grant", "Invalid JWT Signature.");
  }

  const auto aud = string_member(jwt->claims, "aud");
  const bool google_audience = aud && std::find(kGoogleTokenAudiences.begin(), kGoogleTokenAudiences.end(),
                                                std::string_view(*aud)) != kGoogleTokenAudiences.end();
  if (!aud || (!google_audience && *aud != request_url && (signer->token_uri.empty() || *aud != signer->token_uri))) {
    return refuse("invalid_grant",
                  "Invalid JWT: Failed audience check. The expected value was " + std::string(request_url) + ".");
  }
  const auto iat = integer_member(jwt->claims, "iat");
  const auto exp = integer_member(jwt->claims, "exp");
  const std::int64_t now_s = epoch_seconds(now);
  if (!iat || !exp || *exp <= now_s || *iat > now_s + kClockSkewSeconds || *exp <= *iat ||
      *exp - *iat > kMaxAssertionLifetimeSeconds) {
    return refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                                   "timeframe. Check your iat and exp values in the JWT claim.");
  }
  const auto scope = string_member(jwt->claims, "scope");
  if (!scope || util::trim(*scope).empty()) {
    return refuse("invalid_scope", "Invalid oauth scope or ID token audience provided.");
  }
  return GrantResult{issue(now), {}};
}

} // namespace jobman::mock
