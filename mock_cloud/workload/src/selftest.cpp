#include "systolic/selftest.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace jobman::systolic {

namespace {

constexpr std::size_t kRows = 12;
constexpr std::size_t kInner = 20;
constexpr std::size_t kCols = 10;

// The left factor's element (i, k): an integer in [-5, 5], zeros and both signs included.
std::int64_t left_value(std::size_t i, std::size_t k) {
  return static_cast<std::int64_t>((i * 7 + k * 3) % 11) - 5;
}

// The right factor's element (k, j): an integer in [-4, 4].
std::int64_t right_value(std::size_t k, std::size_t j) {
  return static_cast<std::int64_t>((k * 5 + j * 2) % 9) - 4;
}

// An output as printed: "nan" and "inf" spelled plainly, else the shortest exact decimal of a binary32.
std::string format_output(float value) {
  if (std::isnan(value)) {
    return "nan";
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
  return text;
}

} // namespace

std::string SelftestReport::summary() const {
  const auto product = "the " + std::to_string(rows) + "x" + std::to_string(inner) + " by " + std::to_string(inner) +
                       "x" + std::to_string(cols) + " product on the " + std::to_string(array_size) + "x" +
                       std::to_string(array_size) + " array";
  const auto outputs = std::to_string(rows * cols);
  if (passed()) {
    return "selftest passed: " + product + " matches its known answer in all " + outputs + " outputs";
  }
  return "selftest failed: " + product + " has " + std::to_string(non_finite) + " non-finite and " +
         std::to_string(mismatched) + " mismatched of " + outputs + " outputs; first " + first_bad;
}

SelftestReport multiply_known_answer(SystolicArray& mxu) {
  Matrix x(kRows, kInner);
  Matrix w(kInner, kCols);
  for (std::size_t k = 0; k < kInner; ++k) {
    for (std::size_t i = 0; i < kRows; ++i) {
      x.at(i, k) = static_cast<float>(left_value(i, k));
    }
    for (std::size_t j = 0; j < kCols; ++j) {
      w.at(k, j) = static_cast<float>(right_value(k, j));
    }
  }
  const Matrix y = mxu.multiply(x, w);
  SelftestReport report;
  report.rows = kRows;
  report.inner = kInner;
  report.cols = kCols;
  report.array_size = mxu.size();
  for (std::size_t i = 0; i < kRows; ++i) {
    for (std::size_t j = 0; j < kCols; ++j) {
      std::int64_t expected = 0;
      for (std::size_t k = 0; k < kInner; ++k) {
        expected += left_value(i, k) * right_value(k, j);
      }
      const float got = y.at(i, j);
      const bool finite = std::isfinite(got);
      if (finite && got == static_cast<float>(expected)) {
        continue;
      }
      ++(finite ? report.mismatched : report.non_finite);
      if (report.first_bad.empty()) {
        report.first_bad = "[" + std::to_string(i) + "][" + std::to_string(j) + "] = " + format_output(got) +
                           ", expected " + std::to_string(expected);
      }
    }
  }
  return report;
}

} // namespace jobman::systolic
