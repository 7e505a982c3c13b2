#include "mock_cloud/jwt.hpp"

#include "jobman/util/base64url.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/json_text.hpp"

#include <memory>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

namespace jobman::mock {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// Throws an Error carrying OpenSSL's most recent message.
[[noreturn]] void fail(const std::string& what) {
  const unsigned long code = ERR_get_error();
  std::string message = "mock cloud: " + what;
  if (code != 0) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    message += ": ";
    message += buffer;
  }
  ERR_clear_error();
  throw Error(message);
}

// Everything written to a memory BIO, as a string.
std::string bio_contents(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);
  if (size <= 0 || data == nullptr) {
    return {};
  }
  return {data, static_cast<std::size_t>(size)};
}

// A read-only memory BIO over `text`.
BioPtr memory_bio(std::string_view text) {
  BioPtr bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (!bio) {
    fail("cannot allocate a memory buffer");
  }
  return bio;
}

PkeyPtr read_private_key(const std::string& pem) {
  const BioPtr bio = memory_bio(pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    fail("cannot read the private key");
  }
  return key;
}

// The public key, or null (with OpenSSL's error queue cleared) when the PEM is not one.
PkeyPtr read_public_key(const std::string& pem) {
  const BioPtr bio = memory_bio(pem);
  PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return key;
}

std::string write_public_key(EVP_PKEY* key) {
  const BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    fail("cannot write the public key");
  }
  return bio_contents(bio.get());
}

// One segment of a compact JWT. RFC 7515 writes base64url without padding, but Google's token endpoint also takes
// segments padded with '=', as google-auth for Python before 1.6 sends every assertion. Padding, when present, must
// be exactly what the length needs, so each segment still has a single encoding.
std::optional<std::string> decode_segment(std::string_view text) {
  const auto padding_start = text.find('=');
  if (padding_start == std::string_view::npos) {
    return util::base64url_decode(text);
  }
  const std::size_t padding = text.size() - padding_start;
  if (text.size() % 4 != 0 || padding > 2 || text.find_first_not_of('=', padding_start) != std::string_view::npos) {
    return std::nullopt;
  }
  return util::base64url_decode(text.substr(0, padding_start));
}

} // namespace

RsaKeyPem generate_rsa_key() {
  const PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", std::size_t{2048}));
  if (!key) {
    fail("cannot generate an RSA key");
  }
  const BioPtr bio(BIO_new(BIO_s_mem()));
  // PEM_write_bio_PrivateKey writes PKCS#8, the form service-account key files carry.
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    fail("cannot write the private key");
  }
  return {bio_contents(bio.get()), write_public_key(key.get())};
}

std::string public_key_of(const std::string& private_key_pem) {
  const PkeyPtr key = read_private_key(private_key_pem);
  return write_public_key(key.get());
}

std::string random_bytes(std::size_t count) {
  std::string bytes(count, '\0');
  if (count > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(count)) != 1) {
    fail("cannot read random bytes");
  }
  return bytes;
}

std::string sign_jwt_rs256(const nlohmann::json& header, const nlohmann::json& claims,
                           const std::string& private_key_pem) {
  const std::string signing_input = util::base64url_encode(header.dump()) + "." + util::base64url_encode(claims.dump());
  const PkeyPtr key = read_private_key(private_key_pem);
  const MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1) {
    fail("cannot start an RS256 signature");
  }
  const auto* data = reinterpret_cast<const unsigned char*>(signing_input.data());
  std::size_t size = 0;
  if (EVP_DigestSign(ctx.get(), nullptr, &size, data, signing_input.size()) != 1) {
    fail("cannot size the RS256 signature");
  }
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size, data,
                     signing_input.size()) != 1) {
    fail("cannot compute the RS256 signature");
  }
  signature.resize(size);
  return signing_input + "." + util::base64url_encode(signature);
}

std::optional<ParsedJwt> parse_jwt(std::string_view token) {
  const auto first = token.find('.');
  if (first == std::string_view::npos) {
    return std::nullopt;
  }
  const auto second = token.find('.', first + 1);
  if (second == std::string_view::npos || token.find('.', second + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  const auto header_text = decode_segment(token.substr(0, first));
  const auto claims_text = decode_segment(token.substr(first + 1, second - first - 1));
  auto signature = decode_segment(token.substr(second + 1));
  if (!header_text || !claims_text || !signature) {
    return std::nullopt;
  }
  ParsedJwt jwt;
  jwt.header = util::parse_json_bounded(*header_text);
  jwt.claims = util::parse_json_bounded(*claims_text);
  if (!jwt.header.is_object() || !jwt.claims.is_object()) {
    return std::nullopt;
  }
  jwt.signing_input = std::string(token.substr(0, second));
  jwt.signature = std::move(*signature);
  return jwt;
}

bool verify_rs256(std::string_view data, std::string_view signature, const std::string& public_key_pem) {
  const PkeyPtr key = read_public_key(public_key_pem);
  if (!key || EVP_PKEY_is_a(key.get(), "RSA") != 1) {
    return false;
  }
  const MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1) {
    ERR_clear_error();
    return false;
  }
  const int result =
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                       reinterpret_cast<const unsigned char*>(data.data()), data.size());
  ERR_clear_error();
  return result == 1;
}

} // namespace jobman::mock
