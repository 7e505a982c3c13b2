// Byte hashes: FNV-1a 64 for the weights' fingerprint and CRC-32 for checkpoint integrity.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace jobman::systolic {

// The FNV-1a 64-bit basis, the hash of no bytes.
inline constexpr std::uint64_t kFnv1a64Basis = 0xcbf29ce484222325ULL;

// Continues an FNV-1a 64 hash `hash` over `bytes`.
std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash = kFnv1a64Basis);

// Continues a CRC-32 (IEEE 802.3, the polynomial of zlib and PNG) over `bytes`; start with 0.
std::uint32_t crc32(std::string_view bytes, std::uint32_t crc = 0);

// `value` as 16 lowercase hexadecimal digits.
std::string hex64(std::uint64_t value);

} // namespace jobman::systolic
