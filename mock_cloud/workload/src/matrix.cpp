#include "systolic/matrix.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace jobman::systolic {

bool Matrix::bitwise_equal(const Matrix& other) const {
  return rows_ == other.rows_ && cols_ == other.cols_ &&
         (values_.empty() || std::memcmp(values_.data(), other.values_.data(), values_.size() * sizeof(float)) == 0);
}

Matrix transpose(const Matrix& m) {
  Matrix t(m.cols(), m.rows());
  for (std::size_t r = 0; r < m.rows(); ++r) {
    for (std::size_t c = 0; c < m.cols(); ++c) {
      t.at(c, r) = m.at(r, c);
    }
  }
  return t;
}

Matrix reference_product(const Matrix& a, const Matrix& b) {
  if (a.cols() != b.rows()) {
    throw std::invalid_argument("matrix product of " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) +
                                " and " + std::to_string(b.rows()) + "x" + std::to_string(b.cols()));
  }
  Matrix out(a.rows(), b.cols());
  for (std::size_t i = 0; i < a.rows(); ++i) {
    for (std::size_t j = 0; j < b.cols(); ++j) {
      float sum = 0.0F;
      for (std::size_t k = 0; k < a.cols(); ++k) {
        const float product = a.at(i, k) * b.at(k, j);
        sum = sum + product;
      }
      out.at(i, j) = sum;
    }
  }
  return out;
}

} // namespace jobman::systolic
