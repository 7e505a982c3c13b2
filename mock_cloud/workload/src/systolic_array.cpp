#include "systolic/systolic_array.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace jobman::systolic {

double ProductStats::utilisation() const {
  const auto pe_cycles =
      static_cast<double>(array_size) * static_cast<double>(array_size) * static_cast<double>(cycles());
  return pe_cycles == 0 ? 0.0 : static_cast<double>(macs) / pe_cycles;
}

ProductStats& ProductStats::operator+=(const ProductStats& other) {
  array_size = std::max(array_size, other.array_size);
  tiles += other.tiles;
  weight_load_cycles += other.weight_load_cycles;
  stream_cycles += other.stream_cycles;
  macs += other.macs;
  return *this;
}

SystolicArray::SystolicArray(std::size_t size) : size_(size), current_(size * size), next_(size * size) {
  if (size == 0) {
    throw std::invalid_argument("a systolic array needs at least one processing element");
  }
}

Matrix SystolicArray::multiply(const Matrix& x, const Matrix& w, ProductStats* stats) {
  if (x.cols() != w.rows()) {
    throw std::invalid_argument("matrix product of " + std::to_string(x.rows()) + "x" + std::to_string(x.cols()) +
                                " and " + std::to_string(w.rows()) + "x" + std::to_string(w.cols()));
  }
  ProductStats local;
  local.array_size = size_;
  // Every output starts at +0, exactly like the reference's accumulator.
  Matrix out(x.rows(), w.cols());
  if (x.rows() > 0) {
    for (std::size_t n0 = 0; n0 < w.cols(); n0 += size_) {
      // K-tiles in ascending order: each one's outputs re-enter the next one from the top edge, so every output
      // accumulates its products for k = 0, 1, 2, ... one after another, as the reference does.
      for (std::size_t k0 = 0; k0 < x.cols(); k0 += size_) {
        run_tile(x, w, k0, std::min(size_, x.cols() - k0), n0, std::min(size_, w.cols() - n0), out, local);
      }
    }
  }
  if (stats != nullptr) {
    *stats += local;
  }
  return out;
}

void SystolicArray::load_weights(const Matrix& w, std::size_t k0, std::size_t kt, std::size_t n0, std::size_t nt,
                                 ProductStats& stats) {
  // Weights enter at the top edge and shift down one row per cycle. The tile's last row goes in first, so after A
  // cycles row r holds tile row r. Rows and columns outside the tile are marked empty (they will pass data through).
  // The data registers hold nothing meanwhile: the previous tile has drained.
  for (std::size_t cycle = 0; cycle < size_; ++cycle) {
    const std::size_t fed_row = size_ - 1 - cycle;
    for (std::size_t r = size_; r-- > 0;) {
      for (std::size_t c = 0; c < size_; ++c) {
        ProcessingElement& element = pe(r, c);
        if (r > 0) {
          const ProcessingElement& above = pe(r - 1, c);
          element.weight = above.weight;
          element.weight_loaded = above.weight_loaded;
        } else {
          const bool inside = fed_row < kt && c < nt;
          element.weight = inside ? w.at(k0 + fed_row, n0 + c) : 0.0F;
          element.weight_loaded = inside;
        }
        element.activation = 0.0F;
        element.activation_valid = false;
        element.partial_sum = 0.0F;
        element.partial_sum_valid = false;
      }
    }
  }
  stats.weight_load_cycles += size_;
  stats.tiles += 1;
}

void SystolicArray::run_tile(const Matrix& x, const Matrix& w, std::size_t k0, std::size_t kt, std::size_t n0,
                             std::size_t nt, Matrix& out, ProductStats& stats) {
  load_weights(w, k0, kt, n0, nt, stats);
  const std::size_t m = x.rows();
  const std::size_t a = size_;
  // Timing of row i of x (all cycles counted from the first streaming cycle, 0):
  //  - x[i][k0 + r] enters array row r from the left edge at cycle i + r (the input skew), then moves one
  //    column right per cycle, so it is in processing element (r, c) at cycle i + r + c;
  //  - the partial sum of output (i, n0 + c) enters column c from the top edge at cycle i + c carrying what the
  //    previous K-tiles accumulated (out[i][n0 + c]), then moves one row down per cycle: (r, c) at cycle i + r + c;
  //  - so each element meets the activation and the partial sum of the same row i, adds activation x weight, and
  //    the finished sum is latched by the bottom row (A - 1) at cycle i + c + A - 1 (the output skew, undone below).
  // The last output (i = M - 1, c = nt - 1) leaves at cycle M + nt + A - 3: the stream takes M + nt + A - 2 cycles.
  const std::size_t cycles = m + nt + a - 2;
  std::uint64_t macs = 0;
  for (std::size_t t = 0; t < cycles; ++t) {
    for (std::size_t r = 0; r < a; ++r) {
      for (std::size_t c = 0; c < a; ++c) {
        const ProcessingElement& self = current_[r * a + c];
        float activation = 0.0F;
        bool activation_valid = false;
        if (c == 0) {
          // Left edge: row r is fed x[t - r][k0 + r] while that row exists.
          if (r < kt && t >= r && t - r < m) {
            activation = x.at(t - r, k0 + r);
            activation_valid = true;
          }
        } else {
          const ProcessingElement& left = current_[r * a + c - 1];
          activation = left.activation;
          activation_valid = left.activation_valid;
        }
        float partial_sum = 0.0F;
        bool partial_sum_valid = false;
        if (r == 0) {
          // Top edge: column c is fed the running sum of output row t - c.
          if (c < nt && t >= c && t - c < m) {
            partial_sum = out.at(t - c, n0 + c);
            partial_sum_valid = true;
          }
        } else {
          const ProcessingElement& above = current_[(r - 1) * a + c];
          partial_sum = above.partial_sum;
          partial_sum_valid = above.partial_sum_valid;
        }
        ProcessingElement& next = next_[r * a + c];
        next.weight = self.weight;
        next.weight_loaded = self.weight_loaded;
        next.activation = activation;
        next.activation_valid = activation_valid;
        next.partial_sum_valid = partial_sum_valid;
        if (self.weight_loaded && activation_valid) {
          if (!partial_sum_valid) {
            throw std::logic_error("systolic array: an activation met no partial sum");
          }
          float product = activation * self.weight;
          if (fault_ == MxuFault::nan_multiplier && r == 0 && c == 0) {
            product = std::numeric_limits<float>::quiet_NaN();
          }
          next.partial_sum = partial_sum + product;
          ++macs;
        } else {
          next.partial_sum = partial_sum;
        }
      }
    }
    std::swap(current_, next_);
    // De-skew: column c's bottom register now holds output row t - c - (A - 1).
    for (std::size_t c = 0; c < nt; ++c) {
      if (t >= c + a - 1 && t - c - (a - 1) < m) {
        const ProcessingElement& bottom = pe(a - 1, c);
        if (!bottom.partial_sum_valid) {
          throw std::logic_error("systolic array: an output slot left the array empty");
        }
        out.at(t - c - (a - 1), n0 + c) = bottom.partial_sum;
      }
    }
  }
  stats.stream_cycles += cycles;
  stats.macs += macs;
}

} // namespace jobman::systolic
