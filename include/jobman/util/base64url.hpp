// Base64url (RFC 4648 section 5) without padding, the encoding of JSON Web Tokens and access tokens.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace jobman::util {

// Encodes bytes as base64url with no '=' padding.
std::string base64url_encode(std::string_view bytes);

// Decodes unpadded base64url; nullopt on any character outside the alphabet, on padding, or on an impossible length.
std::optional<std::string> base64url_decode(std::string_view text);

} // namespace jobman::util
