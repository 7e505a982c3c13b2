// Stable digests of text, for names of files and locks (not for security).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace jobman::util {

// FNV-1a, 64 bits: the same for the same text in every process and build.
std::uint64_t fnv1a(std::string_view text);

// The low `digits` hex digits of `value`, zero-padded, lowercase.
std::string hex_digits(std::uint64_t value, int digits);

} // namespace jobman::util
