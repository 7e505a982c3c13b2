// Exact sums of floating-point numbers: wide fixed-point integers that add without rounding, so that a sum does not
// depend on the order of its terms or on how they were grouped, and round once, correctly, when read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace jobman::systolic {

// The exact sum of numbers that are multiples of 2^UnitExponent: a two's complement integer of Limbs 64-bit words
// that counts units of 2^UnitExponent, with flags for NaN and infinities. Addition is exact, hence associative and
// commutative: any order and any grouping of the same terms gives the same bits.
template <std::size_t Limbs, int UnitExponent> class ExactSum {
public:
  // Adds `value` exactly. NaN and infinities are remembered by flag. Throws std::domain_error for a finite value that
  // is not a multiple of 2^UnitExponent or too large for the accumulator (a caller's mistake, never data).
  void add(double value);
  // Adds another sum of the same kind exactly.
  ExactSum& operator+=(const ExactSum& other);
  // The sum correctly rounded (to nearest, ties to even) to binary64; NaN when a NaN or both infinities were added,
  // the infinity when one was.
  [[nodiscard]] double to_double() const;
  // The sum correctly rounded (to nearest, ties to even) to binary32, directly (not through binary64); for units no
  // finer than binary32's smallest subnormal.
  [[nodiscard]] float to_float() const requires(UnitExponent >= -149);
  // True when both hold the same integer and flags.
  bool operator==(const ExactSum& other) const = default;

  // The number of bytes of `encode`.
  static constexpr std::size_t kEncodedSize = Limbs * 8 + 1;
  // Appends the exact state to `out`: each limb as 8 little-endian bytes, lowest first, then the flags byte.
  void encode(std::string& out) const;
  // Reads kEncodedSize bytes written by `encode` from the start of `bytes`; false when there are fewer or the flags
  // byte is not one `encode` writes.
  bool decode(std::string_view bytes);

private:
  // Flags of non-finite terms.
  enum Special : std::uint8_t { kNan = 1, kPlusInfinity = 2, kMinusInfinity = 4 };

  // The magnitude rounded to `precision` significant bits as (significand, exponent of its last bit), sign apart.
  [[nodiscard]] bool rounded(int precision, std::uint64_t& significand, int& exponent) const;
  // The non-finite result the flags call for, if any.
  [[nodiscard]] bool special_value(double& value) const;

  std::array<std::uint64_t, Limbs> limbs_{}; // The integer, lowest word first, two's complement.
  std::uint8_t special_ = 0;                 // Special flags of the terms added.
};

// Sums of binary32 values: units of 2^-149 (the smallest subnormal), 320 bits: every float is exact, and 2^41 terms
// of the largest magnitude still cannot overflow.
using FloatSum = ExactSum<5, -149>;

// Sums of squares of binary32 values (exact in binary64): units of 2^-298, 640 bits.
using SquareSum = ExactSum<10, -298>;

extern template class ExactSum<5, -149>;
extern template class ExactSum<10, -298>;

} // namespace jobman::systolic
