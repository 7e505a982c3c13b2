#include "jobman/cloud/auth.hpp"

#include "jobman/cloud/http.hpp"
#include "jobman/util/base64url.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/json_text.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <unistd.h>
#include <utility>

namespace jobman::cloud {
namespace {

constexpr const char* kScope = "https://www.googleapis.com/auth/cloud-platform";
constexpr const char* kJwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer";

using Clock = std::chrono::system_clock;

// The longest lifetime believed from a token endpoint's expires_in (Google's tokens live an hour).
constexpr double kMaxTokenLifetimeSeconds = 86'400;

std::string sign_rs256(const std::string& input, const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  if (!bio) {
    throw Error("cannot read the service account's private key");
  }
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr),
                                                          EVP_PKEY_free);
  if (!key) {
    throw Error("the service account's private_key is not a PEM private key");
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::size_t length = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &length, reinterpret_cast<const unsigned char*>(input.data()), input.size()) !=
          1) {
    throw Error("cannot sign with the service account's private key");
  }
  std::string signature(length, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    throw Error("cannot sign with the service account's private key");
  }
  signature.resize(length);
  return signature;
}

} // namespace

AccessToken parse_token_answer(const HttpResponse& response, const std::string& source) {
  if (response.failure != TransportFailure::none) {
    throw Error("cannot get an access token from " + source + ": " + response.error);
  }
  const auto json = util::parse_json_bounded(response.body);
  if (response.status != 200) {
    std::string detail = "HTTP " + std::to_string(response.status);
    if (json.is_object()) {
      if (json.contains("error_description") && json["error_description"].is_string()) {
        detail += ": " + json["error_description"].get<std::string>();
      } else if (json.contains("error") && json["error"].is_string()) {
        detail += ": " + json["error"].get<std::string>();
      } else if (json.contains("error") && json["error"].is_object() && json["error"].contains("message") &&
                 json["error"]["message"].is_string()) {
        detail += ": " + json["error"]["message"].get<std::string>();
      }
    }
    throw Error("cannot get an access token from " + source + ": " + detail);
  }
  if (!json.is_object() || !json.contains("access_token") || !json["access_token"].is_string()) {
    throw Error("cannot get an access token from " + source + ": the answer has no access_token");
  }
  AccessToken token;
  token.value = json["access_token"].get<std::string>();
  if (json.contains("expires_in") && json["expires_in"].is_number()) {
    // Any number a server sends, negative or huge, stays within the clock's range.
    const double seconds = std::clamp(json["expires_in"].get<double>(), 0.0, kMaxTokenLifetimeSeconds);
    token.expiry = Clock::now() + std::chrono::seconds(static_cast<std::int64_t>(seconds));
  }
  return token;
}

namespace {

class StaticTokenSource final : public TokenSource {
public:
  StaticTokenSource(std::string token, std::string origin) : token_(std::move(token)), origin_(std::move(origin)) {}
  AccessToken fetch() override { return AccessToken{token_, Clock::time_point::max()}; }
  [[nodiscard]] std::string describe() const override { return "a fixed access token (" + origin_ + ")"; }

private:
  std::string token_;
  std::string origin_;
};

class ServiceAccountTokenSource final : public TokenSource {
public:
  explicit ServiceAccountTokenSource(std::string key_file)
      : key_file_(std::move(key_file)), key_(parse_service_account_key(util::read_file(key_file_), key_file_)) {}

  AccessToken fetch() override {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
    const std::string body =
        std::string("grant_type=") + url_encode(kJwtBearer) + "&assertion=" + build_jwt_assertion(key_, now);
    HttpRequest request;
    request.method = "POST";
    request.url = key_.token_uri;
    request.headers = {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}};
    request.body = body;
    return parse_token_answer(http_.send(request), key_.token_uri);
  }

  std::string account() override { return key_.client_email; }

  [[nodiscard]] std::string describe() const override {
    return "service account " + key_.client_email + " (key " + key_file_ + ", token endpoint " + key_.token_uri + ")";
  }

private:
  std::string key_file_;
  ServiceAccountKey key_;
  HttpClient http_;
};

// Runs `argv` with stdout captured; stdin is /dev/null and stderr is inherited.
std::pair<int, std::string> run_capturing(const std::vector<std::string>& argv) {
  auto child = util::ProcessBuilder(argv).input(util::Stream::null()).output(util::Stream::pipe()).spawn();
  if (child.exec_error != 0) {
    util::close_fd(child.out_fd);
    util::wait_exit(child.pid);
    throw Error("cannot run " + argv[0] + ": " + std::strerror(child.exec_error));
  }
  std::string out;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t n = ::read(child.out_fd, buffer.data(), buffer.size());
    if (n > 0) {
      out.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  util::close_fd(child.out_fd);
  return {util::wait_exit(child.pid), out};
}

class GcloudTokenSource final : public TokenSource {
public:
  explicit GcloudTokenSource(std::string program) : program_(std::move(program)) {}

  AccessToken fetch() override {
    auto [code, out] = run_capturing({program_, "auth", "print-access-token"});
    if (code != 0) {
      throw Error("cannot get an access token from `" + program_ + " auth print-access-token`: it exited with " +
                  std::to_string(code));
    }
    const auto token = std::string(util::trim(out));
    if (token.empty() || token.find_first_of(" \n\t") != std::string::npos) {
      throw Error("cannot get an access token from `" + program_ + " auth print-access-token`: it printed no token");
    }
    // gcloud does not say when its token expires; it refreshes tokens with less than five minutes left itself.
    return AccessToken{token, Clock::now() + std::chrono::minutes(5)};
  }

  [[nodiscard]] std::string describe() const override { return "`" + program_ + " auth print-access-token`"; }

  // The account gcloud is logged in as (its core/account property).
  std::string account() override {
    auto [code, out] = run_capturing({program_, "config", "get-value", "account", "--quiet"});
    auto account = std::string(util::trim(out));
    if (code != 0 || account.empty() || account == "(unset)") {
      throw Error("`" + program_ + " config get-value account` names no account; log in with `" + program_ +
                  " auth login`, or set JOBMAN_ACCOUNT");
    }
    return account;
  }

private:
  std::string program_;
};

class MetadataTokenSource final : public TokenSource {
public:
  explicit MetadataTokenSource(const std::string& host)
      : url_("http://" + host + "/computeMetadata/v1/instance/service-accounts/default/token"),
        http_(HttpOptions{std::chrono::milliseconds(3000), std::chrono::milliseconds(10'000), "jobman"}) {}

  AccessToken fetch() override {
    HttpRequest request;
    request.url = url_;
    request.headers = {{"Metadata-Flavor", "Google"}};
    return parse_token_answer(http_.send(request), "the metadata server (" + url_ + ")");
  }

  [[nodiscard]] std::string describe() const override { return "the metadata server (" + url_ + ")"; }

  // The default service account's email, from the path beside the token's.
  std::string account() override {
    HttpRequest request;
    request.url = url_.substr(0, url_.rfind('/')) + "/email";
    request.headers = {{"Metadata-Flavor", "Google"}};
    const auto response = http_.send(request);
    auto email = std::string(util::trim(response.body));
    if (response.failure != TransportFailure::none || response.status != 200 || email.empty()) {
      throw Error("cannot read the service account's email from the metadata server (" + request.url + ")");
    }
    return email;
  }

private:
  std::string url_;
  HttpClient http_;
};

// True when `program` names an executable file, directly or through PATH.
bool program_found(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return ::access(program.c_str(), X_OK) == 0;
  }
  const auto path = util::getenv_nonempty("PATH");
  return path && !util::find_in_path(program, *path).empty();
}

} // namespace

std::unique_ptr<TokenSource> make_static_token_source(std::string token, std::string origin) {
  return std::make_unique<StaticTokenSource>(std::move(token), std::move(origin));
}

std::unique_ptr<TokenSource> make_service_account_token_source(const std::string& key_file) {
  return std::make_unique<ServiceAccountTokenSource>(key_file);
}

std::unique_ptr<TokenSource> make_gcloud_token_source(const std::string& program) {
  return std::make_unique<GcloudTokenSource>(program);
}

std::unique_ptr<TokenSource> make_metadata_token_source(const std::string& host) {
  return std::make_unique<MetadataTokenSource>(host);
}

std::unique_ptr<TokenSource> make_default_token_source(const std::string& gcloud) {
  if (auto token = util::getenv_nonempty("JOBMAN_ACCESS_TOKEN")) {
    return make_static_token_source(*token, "JOBMAN_ACCESS_TOKEN");
  }
  if (auto key_file = util::getenv_nonempty("GOOGLE_APPLICATION_CREDENTIALS")) {
    return make_service_account_token_source(*key_file);
  }
  if (!gcloud.empty() && program_found(gcloud)) {
    return make_gcloud_token_source(gcloud);
  }
  return make_metadata_token_source(util::getenv_nonempty("GCE_METADATA_HOST").value_or("metadata.google.internal"));
}

ServiceAccountKey parse_service_account_key(const std::string& text, const std::string& origin) {
  const auto json = util::parse_json_bounded(text);
  if (!json.is_object()) {
    throw Error(origin + ": not a service-account key file (not a JSON object)");
  }
  auto field = [&](const char* name) {
    if (!json.contains(name) || !json[name].is_string() || json[name].get<std::string>().empty()) {
      throw Error(origin + ": not a service-account key file (no \"" + name + "\")");
    }
    return json[name].get<std::string>();
  };
  ServiceAccountKey key;
  key.client_email = field("client_email");
  key.private_key_id = field("private_key_id");
  key.private_key = field("private_key");
  key.token_uri = json.contains("token_uri") && json["token_uri"].is_string()
                      ? json["token_uri"].get<std::string>()
                      : std::string("https://oauth2.googleapis.com/token");
  return key;
}

std::string build_jwt_assertion(const ServiceAccountKey& key, std::int64_t now_epoch_seconds,
                                std::chrono::seconds lifetime) {
  lifetime = std::clamp(lifetime, std::chrono::seconds(1), std::chrono::seconds(3600));
  const nlohmann::json header = {{"alg", "RS256"}, {"typ", "JWT"}, {"kid", key.private_key_id}};
  const nlohmann::json claims = {{"iss", key.client_email},
                                 {"scope", kScope},
                                 {"aud", key.token_uri},
                                 {"iat", now_epoch_seconds},
                                 {"exp", now_epoch_seconds + lifetime.count()}};
  const std::string input = util::base64url_encode(header.dump()) + "." + util::base64url_encode(claims.dump());
  return input + "." + util::base64url_encode(sign_rs256(input, key.private_key));
}

CachedTokenSource::CachedTokenSource(std::unique_ptr<TokenSource> source, std::chrono::seconds margin)
    : source_(std::move(source)), margin_(margin) {}

std::string CachedTokenSource::account() {
  if (auto given = util::getenv_nonempty("JOBMAN_ACCOUNT")) {
    return *given;
  }
  const std::lock_guard lock(mutex_);
  if (account_.empty()) {
    account_ = source_->account();
    if (account_.empty()) {
      throw Error("the account of " + source_->describe() + " is not known; set JOBMAN_ACCOUNT to its email");
    }
  }
  return account_;
}

std::string CachedTokenSource::token() {
  const std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  const bool fresh = have_ && (cached_.expiry == Clock::time_point::max() || now + margin_ < cached_.expiry);
  if (!fresh) {
    cached_ = source_->fetch();
    have_ = true;
  }
  return cached_.value;
}

void CachedTokenSource::invalidate() {
  const std::lock_guard lock(mutex_);
  have_ = false;
  cached_ = AccessToken{};
}

std::string CachedTokenSource::describe() const {
  return source_->describe();
}

std::string new_request_id() {
  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw Error("cannot generate a request id: OpenSSL's random generator failed");
  }
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0FU) | 0x40U); // Version 4.
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3FU) | 0x80U); // RFC 4122 variant.
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      out.push_back('-');
    }
    out.push_back(kHex[bytes[i] >> 4U]);
    out.push_back(kHex[bytes[i] & 0x0FU]);
  }
  return out;
}

} // namespace jobman::cloud
