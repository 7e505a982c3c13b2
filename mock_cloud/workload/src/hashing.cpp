#include "systolic/hashing.hpp"

#include <array>

namespace jobman::systolic {

namespace {

// The byte-at-a-time table of the reflected polynomial 0xEDB88320.
constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t n = 0; n < 256; ++n) {
    std::uint32_t c = n;
    for (int bit = 0; bit < 8; ++bit) {
      c = (c & 1U) != 0 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
    }
    table[n] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kCrcTable = make_crc_table();

} // namespace

std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash) {
  for (const char ch : bytes) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::uint32_t crc32(std::string_view bytes, std::uint32_t crc) {
  crc = ~crc;
  for (const char ch : bytes) {
    crc = kCrcTable[(crc ^ static_cast<unsigned char>(ch)) & 0xFFU] ^ (crc >> 8);
  }
  return ~crc;
}

std::string hex64(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i) {
    text[static_cast<std::size_t>(i)] = kDigits[value & 0xFU];
    value >>= 4;
  }
  return text;
}

} // namespace jobman::systolic
