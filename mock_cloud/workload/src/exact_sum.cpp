#include "systolic/exact_sum.hpp"

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace jobman::systolic {

namespace {

// Adds `value` shifted left by `shift` bits to the two's complement integer `limbs`, or subtracts it.
template <std::size_t Limbs>
void add_shifted(std::array<std::uint64_t, Limbs>& limbs, std::uint64_t value, int shift, bool subtract) {
  const auto word = static_cast<std::size_t>(shift / 64);
  const int offset = shift % 64;
  std::array<std::uint64_t, 2> parts{value << offset, offset == 0 ? 0 : value >> (64 - offset)};
  std::uint64_t carry = 0;
  for (std::size_t i = word; i < Limbs; ++i) {
    const std::uint64_t part = i - word < parts.size() ? parts[i - word] : 0;
    if (part == 0 && carry == 0) {
      if (i - word >= parts.size()) {
        break;
      }
      continue;
    }
    const std::uint64_t before = limbs[i];
    if (subtract) {
      const std::uint64_t after = before - part - carry;
      carry = (before < part || before - part < carry) ? 1 : 0;
      limbs[i] = after;
    } else {
      const std::uint64_t after = before + part + carry;
      carry = (after < before || (carry != 0 && after == before)) ? 1 : 0;
      limbs[i] = after;
    }
  }
}

// Bits [low, low + count) of `limbs` as a number; count is at most 64.
template <std::size_t Limbs> std::uint64_t bits_at(const std::array<std::uint64_t, Limbs>& limbs, int low, int count) {
  const auto word = static_cast<std::size_t>(low / 64);
  const int offset = low % 64;
  std::uint64_t value = limbs[word] >> offset;
  if (offset != 0 && word + 1 < Limbs) {
    value |= limbs[word + 1] << (64 - offset);
  }
  return count == 64 ? value : value & ((std::uint64_t{1} << count) - 1);
}

} // namespace

template <std::size_t Limbs, int UnitExponent> void ExactSum<Limbs, UnitExponent>::add(double value) {
  if (std::isnan(value)) {
    special_ |= kNan;
    return;
  }
  if (std::isinf(value)) {
    special_ |= value > 0 ? kPlusInfinity : kMinusInfinity;
    return;
  }
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const auto biased = static_cast<int>((bits >> 52) & 0x7FFU);
  std::uint64_t significand = bits & ((std::uint64_t{1} << 52) - 1);
  int exponent = -1074;
  if (biased != 0) {
    significand |= std::uint64_t{1} << 52;
    exponent = biased - 1075;
  }
  if (significand == 0) {
    return; // +0 and -0 add nothing.
  }
  int shift = exponent - UnitExponent;
  if (shift < 0) {
    // Only trailing zero bits may fall below the unit.
    const int drop = -shift;
    if (drop >= 64 || (significand & ((std::uint64_t{1} << drop) - 1)) != 0) {
      throw std::domain_error("exact sum: a term finer than the accumulator's unit");
    }
    significand >>= drop;
    shift = 0;
  }
  if (shift + std::bit_width(significand) > static_cast<int>(64 * Limbs) - 2) {
    throw std::domain_error("exact sum: a term too large for the accumulator");
  }
  add_shifted(limbs_, significand, shift, (bits >> 63) != 0);
}

template <std::size_t Limbs, int UnitExponent>
ExactSum<Limbs, UnitExponent>& ExactSum<Limbs, UnitExponent>::operator+=(const ExactSum& other) {
  std::uint64_t carry = 0;
  for (std::size_t i = 0; i < Limbs; ++i) {
    const std::uint64_t before = limbs_[i];
    const std::uint64_t after = before + other.limbs_[i] + carry;
    carry = (after < before || (carry != 0 && after == before)) ? 1 : 0;
    limbs_[i] = after;
  }
  special_ |= other.special_;
  return *this;
}

template <std::size_t Limbs, int UnitExponent> bool ExactSum<Limbs, UnitExponent>::special_value(double& value) const {
  if ((special_ & kNan) != 0 || ((special_ & kPlusInfinity) != 0 && (special_ & kMinusInfinity) != 0)) {
    value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (special_ != 0) {
    value = (special_ & kPlusInfinity) != 0 ? std::numeric_limits<double>::infinity()
                                            : -std::numeric_limits<double>::infinity();
    return true;
  }
  return false;
}

template <std::size_t Limbs, int UnitExponent>
bool ExactSum<Limbs, UnitExponent>::rounded(int precision, std::uint64_t& significand, int& exponent) const {
  const bool negative = (limbs_[Limbs - 1] >> 63) != 0;
  std::array<std::uint64_t, Limbs> magnitude = limbs_;
  if (negative) {
    std::uint64_t carry = 1;
    for (auto& limb : magnitude) {
      limb = ~limb + carry;
      carry = (carry != 0 && limb == 0) ? 1 : 0;
    }
  }
  int top = -1; // The index of the highest set bit.
  for (std::size_t i = Limbs; i-- > 0;) {
    if (magnitude[i] != 0) {
      top = static_cast<int>(i * 64) + std::bit_width(magnitude[i]) - 1;
      break;
    }
  }
  if (top < precision) {
    significand = magnitude[0]; // Fewer than `precision` (at most 53) bits: exact.
    exponent = UnitExponent;
    return negative;
  }
  const int shift = top - (precision - 1);
  significand = bits_at(magnitude, shift, precision);
  const bool round = bits_at(magnitude, shift - 1, 1) != 0;
  // Sticky: any bit below the round bit.
  const int below = shift - 1;
  bool sticky = (magnitude[static_cast<std::size_t>(below / 64)] & ((std::uint64_t{1} << (below % 64)) - 1)) != 0;
  for (std::size_t word = 0; !sticky && word < static_cast<std::size_t>(below / 64); ++word) {
    sticky = magnitude[word] != 0;
  }
  exponent = UnitExponent + shift;
  if (round && (sticky || (significand & 1U) != 0)) {
    ++significand;
    if (significand == (std::uint64_t{1} << precision)) {
      significand >>= 1;
      ++exponent;
    }
  }
  return negative;
}

template <std::size_t Limbs, int UnitExponent> double ExactSum<Limbs, UnitExponent>::to_double() const {
  if (double value = 0; special_value(value)) {
    return value;
  }
  std::uint64_t significand = 0;
  int exponent = 0;
  const bool negative = rounded(53, significand, exponent);
  const double magnitude = std::ldexp(static_cast<double>(significand), exponent);
  return negative ? -magnitude : magnitude;
}

template <std::size_t Limbs, int UnitExponent>
float ExactSum<Limbs, UnitExponent>::to_float() const requires(UnitExponent >= -149) {
  if (double value = 0; special_value(value)) {
    return static_cast<float>(value);
  }
  std::uint64_t significand = 0;
  int exponent = 0;
  const bool negative = rounded(24, significand, exponent);
  // At most 24 significant bits and a last bit no finer than 2^-149: exact in binary64, and exact in binary32 too
  // unless it is beyond binary32's range.
  const double magnitude = std::ldexp(static_cast<double>(significand), exponent);
  const float result =
      magnitude > static_cast<double>(FLT_MAX) ? std::numeric_limits<float>::infinity() : static_cast<float>(magnitude);
  return negative ? -result : result;
}

template <std::size_t Limbs, int UnitExponent> void ExactSum<Limbs, UnitExponent>::encode(std::string& out) const {
  for (const std::uint64_t limb : limbs_) {
    for (int byte = 0; byte < 8; ++byte) {
      out.push_back(static_cast<char>((limb >> (8 * byte)) & 0xFFU));
    }
  }
  out.push_back(static_cast<char>(special_));
}

template <std::size_t Limbs, int UnitExponent> bool ExactSum<Limbs, UnitExponent>::decode(std::string_view bytes) {
  if (bytes.size() < kEncodedSize) {
    return false;
  }
  const auto special = static_cast<std::uint8_t>(bytes[Limbs * 8]);
  if ((special & ~(kNan | kPlusInfinity | kMinusInfinity)) != 0) {
    return false;
  }
  for (std::size_t i = 0; i < Limbs; ++i) {
    std::uint64_t limb = 0;
    for (std::size_t byte = 0; byte < 8; ++byte) {
      limb |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i * 8 + byte])) << (8 * byte);
    }
    limbs_[i] = limb;
  }
  special_ = special;
  return true;
}

template class ExactSum<5, -149>;
template class ExactSum<10, -298>;

} // namespace jobman::systolic
