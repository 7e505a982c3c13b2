// A cycle-by-cycle simulation of a weight-stationary systolic array, the matrix unit (MXU) of a TPU.
#pragma once

#include "systolic/matrix.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jobman::systolic {

// What one or more matrix products cost on the array.
struct ProductStats {
  std::size_t array_size = 0;           // A: the array has A x A processing elements.
  std::uint64_t tiles = 0;              // Weight tiles loaded (one per K-tile x N-tile).
  std::uint64_t weight_load_cycles = 0; // Cycles spent shifting weights into the array.
  std::uint64_t stream_cycles = 0;      // Cycles from the first activation entering to the last output leaving.
  std::uint64_t macs = 0;               // Multiply-accumulates performed by processing elements.

  // All cycles: weight loading plus streaming.
  [[nodiscard]] std::uint64_t cycles() const { return weight_load_cycles + stream_cycles; }
  // macs / (A * A * cycles): the fraction of processing-element cycles that did useful work; 0 when idle.
  [[nodiscard]] double utilisation() const;
  // Adds another product's figures (same array size) to these.
  ProductStats& operator+=(const ProductStats& other);
};

// How the simulated hardware misbehaves.
enum class MxuFault {
  none,          // A healthy array.
  nan_multiplier // The multiplier of processing element (0, 0) is broken and yields NaN, as on a faulty slice.
};

// An A x A grid of processing elements. Each holds one weight (loaded from the top edge, then kept: weight
// stationary), an activation register that feeds its right neighbour and a partial-sum register that feeds the
// neighbour below. Every register is updated once per simulated clock cycle.
class SystolicArray {
public:
  // An array of size x size processing elements; throws std::invalid_argument for size 0.
  explicit SystolicArray(std::size_t size);

  // x (M x K) times w (K x N), tiled over K and N with M streaming through; the result equals
  // reference_product(x, w) bit for bit. Adds the cost to `stats` when it is not null. Throws
  // std::invalid_argument when the shapes do not fit.
  Matrix multiply(const Matrix& x, const Matrix& w, ProductStats* stats = nullptr);

  // The side length A.
  [[nodiscard]] std::size_t size() const { return size_; }
  // Makes the hardware healthy or faulty for the products that follow.
  void set_fault(MxuFault fault) { fault_ = fault; }
  // The current fault.
  [[nodiscard]] MxuFault fault() const { return fault_; }

private:
  // The registers of one processing element.
  struct ProcessingElement {
    float weight = 0.0F;            // The stationary weight.
    bool weight_loaded = false;     // False for elements outside the current tile: they pass data through.
    float activation = 0.0F;        // The activation latched this cycle, passed right next cycle.
    bool activation_valid = false;  // False for the bubbles before and after the streamed rows.
    float partial_sum = 0.0F;       // The partial sum latched this cycle, passed down next cycle.
    bool partial_sum_valid = false; // False when no output row occupies this slot of the column.
  };

  // Runs one weight tile: loads w[k0..k0+kt) x [n0..n0+nt) and streams every row of x through it, adding
  // each output to the partial sums already in `out` (the previous K-tile's results enter from the top edge).
  void run_tile(const Matrix& x, const Matrix& w, std::size_t k0, std::size_t kt, std::size_t n0, std::size_t nt,
                Matrix& out, ProductStats& stats);
  // Shifts the tile's weights in from the top edge, one row per cycle, A cycles in all.
  void load_weights(const Matrix& w, std::size_t k0, std::size_t kt, std::size_t n0, std::size_t nt,
                    ProductStats& stats);
  // The processing element in row `row`, column `col` of the current register set.
  ProcessingElement& pe(std::size_t row, std::size_t col) { return current_[row * size_ + col]; }

  std::size_t size_;                       // A.
  MxuFault fault_ = MxuFault::none;        // The injected fault.
  std::vector<ProcessingElement> current_; // Registers after the last clock edge, row-major.
  std::vector<ProcessingElement> next_;    // Registers being computed for the next clock edge.
};

} // namespace jobman::systolic
