// The known-answer check of `systolic-train --selftest`: a fixed integer product on the simulated matrix unit,
// compared with the exact answer the host computes on its own, so a job can refuse faulty hardware before it trains.
#pragma once

#include "systolic/systolic_array.hpp"

#include <cstddef>
#include <string>

namespace jobman::systolic {

// What the known-answer product found.
struct SelftestReport {
  std::size_t rows = 0;       // M: rows of the left factor and of the product.
  std::size_t inner = 0;      // K: columns of the left factor, rows of the right one.
  std::size_t cols = 0;       // N: columns of the right factor and of the product.
  std::size_t array_size = 0; // A: the array has A x A processing elements.
  std::size_t non_finite = 0; // Outputs that are NaN or infinite.
  std::size_t mismatched = 0; // Finite outputs that differ from the known answer.
  std::string first_bad;      // "[i][j] = got, expected want" for the first bad output in row order; empty if none.

  // True when every output equals the known answer.
  [[nodiscard]] bool passed() const { return non_finite == 0 && mismatched == 0; }
  // One line without a newline: "selftest passed: ..." or "selftest failed: ...".
  [[nodiscard]] std::string summary() const;
};

// Multiplies a fixed 12 x 20 matrix by a fixed 20 x 10 one on `mxu`, as it is (its fault included), and compares
// every output with the answer computed in integer arithmetic. Every input and partial sum is a small integer, which
// binary32 holds exactly, so a healthy array of any size matches exactly; the shapes make a default 8 x 8 array chain
// three K-tiles and fill edge tiles.
SelftestReport multiply_known_answer(SystolicArray& mxu);

} // namespace jobman::systolic
