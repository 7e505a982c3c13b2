// RS256 JSON Web Tokens and the RSA keys that sign them, as used by the service-account JWT-bearer grant.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace jobman::mock {

// An RSA key pair as PEM text.
struct RsaKeyPem {
  std::string private_key_pem; // PKCS#8 ("BEGIN PRIVATE KEY"), as in a service-account key file.
  std::string public_key_pem;  // SubjectPublicKeyInfo ("BEGIN PUBLIC KEY").
};

// Generates a fresh RSA-2048 key pair; throws jobman::Error when OpenSSL fails.
RsaKeyPem generate_rsa_key();

// The public key PEM of a private key PEM; throws jobman::Error when the private key cannot be read.
std::string public_key_of(const std::string& private_key_pem);

// `count` cryptographically random bytes; throws jobman::Error when OpenSSL fails.
std::string random_bytes(std::size_t count);

// Signs header.claims with RS256 and returns the compact JWT; throws jobman::Error on an unusable key.
std::string sign_jwt_rs256(const nlohmann::json& header, const nlohmann::json& claims,
                           const std::string& private_key_pem);

// A compact JWT split into its parts; the signature is not checked yet.
struct ParsedJwt {
  nlohmann::json header;     // The decoded header object.
  nlohmann::json claims;     // The decoded claims object.
  std::string signing_input; // "<header>.<claims>" exactly as received, the bytes the signature covers.
  std::string signature;     // The decoded signature bytes.
};

// Parses a compact JWT; nullopt unless it has three base64url parts (unpadded, or padded as a whole with '=')
// whose first two are JSON objects.
std::optional<ParsedJwt> parse_jwt(std::string_view token);

// True when `signature` is a valid RSASSA-PKCS1-v1_5 SHA-256 signature of `data` by the key in `public_key_pem`.
bool verify_rs256(std::string_view data, std::string_view signature, const std::string& public_key_pem);

} // namespace jobman::mock
