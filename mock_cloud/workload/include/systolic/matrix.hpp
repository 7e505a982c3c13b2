// Dense row-major float matrices and the plain reference product the systolic array must reproduce bit for bit.
#pragma once

#include <cstddef>
#include <vector>

namespace jobman::systolic {

// A rows x cols matrix of floats stored row by row.
class Matrix {
public:
  // An empty 0 x 0 matrix.
  Matrix() = default;
  // A rows x cols matrix of zeros.
  Matrix(std::size_t rows, std::size_t cols) : rows_(rows), cols_(cols), values_(rows * cols, 0.0F) {}

  // The number of rows.
  [[nodiscard]] std::size_t rows() const { return rows_; }
  // The number of columns.
  [[nodiscard]] std::size_t cols() const { return cols_; }
  // The element in row `row`, column `col`.
  [[nodiscard]] float& at(std::size_t row, std::size_t col) { return values_[row * cols_ + col]; }
  // The element in row `row`, column `col`.
  [[nodiscard]] float at(std::size_t row, std::size_t col) const { return values_[row * cols_ + col]; }
  // Every element, row by row.
  [[nodiscard]] std::vector<float>& values() { return values_; }
  // Every element, row by row.
  [[nodiscard]] const std::vector<float>& values() const { return values_; }

  // True when both have the same shape and the same bits in every element (NaNs compare by their bits).
  [[nodiscard]] bool bitwise_equal(const Matrix& other) const;

private:
  std::size_t rows_ = 0;      // Number of rows.
  std::size_t cols_ = 0;      // Number of columns.
  std::vector<float> values_; // rows_ * cols_ elements, row-major.
};

// The transpose of `m`.
Matrix transpose(const Matrix& m);

// a (M x K) times b (K x N) by the textbook triple loop: each output starts at +0 and adds a[i][k] * b[k][j] for k
// ascending, one rounding per multiply and one per add. Throws std::invalid_argument when the shapes do not fit.
Matrix reference_product(const Matrix& a, const Matrix& b);

} // namespace jobman::systolic
