// The simulated systolic array: its products equal the reference product bit for bit, and its cycle counts are
// the ones the weight-stationary dataflow implies.
#include "systolic/matrix.hpp"
#include "systolic/systolic_array.hpp"

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>
#include <random>
#include <stdexcept>
#include <string>

namespace systolic_array_test {

using jobman::systolic::Matrix;
using jobman::systolic::MxuFault;
using jobman::systolic::ProductStats;
using jobman::systolic::reference_product;
using jobman::systolic::SystolicArray;

// A matrix whose elements have random signs and magnitudes spread over 2^-12 .. 2^12, so that sums of products
// round differently when added in another order.
Matrix random_matrix(std::size_t rows, std::size_t cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> mantissa(-1.0F, 1.0F);
  std::uniform_int_distribution<int> exponent(-12, 12);
  Matrix m(rows, cols);
  for (float& v : m.values()) {
    v = std::ldexp(mantissa(rng), exponent(rng));
  }
  return m;
}

// The product with k descending: the same terms as the reference, added in the other order.
Matrix product_k_descending(const Matrix& a, const Matrix& b) {
  Matrix out(a.rows(), b.cols());
  for (std::size_t i = 0; i < a.rows(); ++i) {
    for (std::size_t j = 0; j < b.cols(); ++j) {
      float sum = 0.0F;
      for (std::size_t k = a.cols(); k-- > 0;) {
        const float product = a.at(i, k) * b.at(k, j);
        sum = sum + product;
      }
      out.at(i, j) = sum;
    }
  }
  return out;
}

std::string shape(std::size_t a, std::size_t m, std::size_t k, std::size_t n) {
  return "array " + std::to_string(a) + ", " + std::to_string(m) + "x" + std::to_string(k) + " times " +
         std::to_string(k) + "x" + std::to_string(n);
}

TEST(SystolicArray, ReferenceProductComputesTheTextbookProduct) {
  Matrix a(2, 3);
  a.values() = {1, 2, 3, 4, 5, 6};
  Matrix b(3, 2);
  b.values() = {7, 8, 9, 10, 11, 12};
  const Matrix c = reference_product(a, b);
  ASSERT_EQ(c.rows(), 2U);
  ASSERT_EQ(c.cols(), 2U);
  EXPECT_EQ(c.values(), (std::vector<float>{58, 64, 139, 154}));
}

TEST(SystolicArray, ProductEqualsReferenceBitForBitForRandomShapesAndArraySizes) {
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<std::size_t> dim(1, 37);
  const std::size_t array_sizes[] = {1, 2, 3, 4, 5, 7, 8, 16};
  int order_sensitive_cases = 0;
  for (int trial = 0; trial < 160; ++trial) {
    const std::size_t a = array_sizes[static_cast<std::size_t>(trial) % std::size(array_sizes)];
    const std::size_t m = dim(rng);
    const std::size_t k = dim(rng);
    const std::size_t n = dim(rng);
    const Matrix x = random_matrix(m, k, rng);
    const Matrix w = random_matrix(k, n, rng);
    SystolicArray array(a);
    const Matrix expected = reference_product(x, w);
    EXPECT_TRUE(array.multiply(x, w).bitwise_equal(expected)) << shape(a, m, k, n);
    order_sensitive_cases += product_k_descending(x, w).bitwise_equal(expected) ? 0 : 1;
  }
  // The inputs are hard enough that the order of accumulation shows in the bits, so equality above means the
  // array accumulated in the reference's order, not merely to a nearby value.
  EXPECT_GT(order_sensitive_cases, 100);
}

TEST(SystolicArray, ProductEqualsReferenceBitForBitForEdgeShapes) {
  std::mt19937_64 rng(7);
  // Shapes around the array size 4: single rows, columns and depths, exact multiples, one more and one less.
  const std::size_t sizes[] = {1, 2, 3, 4, 5, 8, 9};
  for (const std::size_t m : sizes) {
    for (const std::size_t k : sizes) {
      for (const std::size_t n : sizes) {
        const Matrix x = random_matrix(m, k, rng);
        const Matrix w = random_matrix(k, n, rng);
        SystolicArray array(4);
        EXPECT_TRUE(array.multiply(x, w).bitwise_equal(reference_product(x, w))) << shape(4, m, k, n);
      }
    }
  }
}

TEST(SystolicArray, OneByOneArrayStillComputesTheExactProduct) {
  std::mt19937_64 rng(11);
  const Matrix x = random_matrix(6, 9, rng);
  const Matrix w = random_matrix(9, 5, rng);
  SystolicArray array(1);
  EXPECT_TRUE(array.multiply(x, w).bitwise_equal(reference_product(x, w)));
}

TEST(SystolicArray, SpecialValuesPropagateLikeTheReference) {
  Matrix x(2, 3);
  x.values() = {INFINITY, 1.0F, -0.0F, 3.0F, -2.0F, 1e38F};
  Matrix w(3, 2);
  w.values() = {1.0F, 0.0F, 2.0F, -0.0F, 1e38F, 4.0F};
  SystolicArray array(2);
  EXPECT_TRUE(array.multiply(x, w).bitwise_equal(reference_product(x, w)));
}

TEST(SystolicArray, ArrayIsReusableAcrossProductsOfDifferentShapes) {
  std::mt19937_64 rng(3);
  SystolicArray array(5);
  for (const auto& [m, k, n] :
       {std::tuple{7, 12, 3}, std::tuple{1, 1, 1}, std::tuple{20, 6, 11}, std::tuple{2, 5, 5}}) {
    const Matrix x = random_matrix(static_cast<std::size_t>(m), static_cast<std::size_t>(k), rng);
    const Matrix w = random_matrix(static_cast<std::size_t>(k), static_cast<std::size_t>(n), rng);
    EXPECT_TRUE(array.multiply(x, w).bitwise_equal(reference_product(x, w))) << m << "x" << k << "x" << n;
  }
}

// One weight tile (K <= A, N <= A) costs, by the dataflow in systolic_array.cpp:
//  - A cycles to shift the weights in from the top edge, one array row per cycle;
//  - then row i of x enters array row r at cycle i + r and its partial sum for column c enters at cycle i + c, so
//    both meet in element (r, c) at cycle i + r + c, and the bottom row A - 1 latches output (i, c) at cycle
//    i + c + A - 1. The last output, (M - 1, N - 1), leaves at cycle M + N + A - 3, so streaming takes
//    M + N + A - 2 cycles (cycles 0 .. M + N + A - 3).
// Each loaded element multiplies once per row of x: M * K * N multiply-accumulates. With A * A elements busy or not
// in every one of the A + (M + N + A - 2) cycles, utilisation = M K N / (A^2 (M + N + 2A - 2)).
TEST(SystolicArray, OneTileCostsWhatTheDataflowImplies) {
  std::mt19937_64 rng(5);
  struct Case {
    std::size_t a, m, k, n;
  };
  for (const Case& c : {Case{4, 4, 4, 4}, Case{4, 1, 1, 1}, Case{4, 10, 3, 2}, Case{8, 16, 8, 8}, Case{1, 5, 1, 1},
                        Case{6, 1, 6, 6}, Case{3, 100, 3, 3}}) {
    SystolicArray array(c.a);
    ProductStats stats;
    array.multiply(random_matrix(c.m, c.k, rng), random_matrix(c.k, c.n, rng), &stats);
    const std::string label = shape(c.a, c.m, c.k, c.n);
    EXPECT_EQ(stats.array_size, c.a) << label;
    EXPECT_EQ(stats.tiles, 1U) << label;
    EXPECT_EQ(stats.weight_load_cycles, c.a) << label;
    EXPECT_EQ(stats.stream_cycles, c.m + c.n + c.a - 2) << label;
    EXPECT_EQ(stats.cycles(), c.m + c.n + 2 * c.a - 2) << label;
    EXPECT_EQ(stats.macs, c.m * c.k * c.n) << label;
    const double expected =
        static_cast<double>(c.m * c.k * c.n) / static_cast<double>(c.a * c.a * (c.m + c.n + 2 * c.a - 2));
    EXPECT_DOUBLE_EQ(stats.utilisation(), expected) << label;
  }
}

TEST(SystolicArray, UtilisationApproachesTheTileFillForLongStreams) {
  std::mt19937_64 rng(9);
  SystolicArray array(4);
  ProductStats stats;
  // A full 4x4 tile streamed 2000 rows: 2000*16 MACs in 16 * (2000 + 4 + 8 - 2) element-cycles.
  array.multiply(random_matrix(2000, 4, rng), random_matrix(4, 4, rng), &stats);
  EXPECT_DOUBLE_EQ(stats.utilisation(), 2000.0 / 2010.0);
}

TEST(SystolicArray, LargerProductsAreTiledOverKAndN) {
  std::mt19937_64 rng(13);
  const std::size_t a = 4;
  const std::size_t m = 6;
  const std::size_t k = 10; // K-tiles of 4, 4 and 2 rows.
  const std::size_t n = 5;  // N-tiles of 4 and 1 columns.
  SystolicArray array(a);
  ProductStats stats;
  array.multiply(random_matrix(m, k, rng), random_matrix(k, n, rng), &stats);
  EXPECT_EQ(stats.tiles, 6U);
  EXPECT_EQ(stats.weight_load_cycles, 6 * a);
  // Each of the three K-tiles of an N-tile streams M + nt + A - 2 cycles.
  EXPECT_EQ(stats.stream_cycles, 3 * (m + 4 + a - 2) + 3 * (m + 1 + a - 2));
  EXPECT_EQ(stats.macs, m * k * n);
}

TEST(SystolicArray, StatsAccumulateOverProducts) {
  std::mt19937_64 rng(17);
  SystolicArray array(3);
  ProductStats total;
  ProductStats first;
  ProductStats second;
  const Matrix x = random_matrix(5, 3, rng);
  const Matrix w = random_matrix(3, 3, rng);
  array.multiply(x, w, &first);
  array.multiply(x, w, &second);
  array.multiply(x, w, &total);
  array.multiply(x, w, &total);
  first += second;
  EXPECT_EQ(total.cycles(), first.cycles());
  EXPECT_EQ(total.macs, first.macs);
  EXPECT_EQ(total.tiles, 2U);
  EXPECT_DOUBLE_EQ(total.utilisation(), first.utilisation());
}

TEST(SystolicArray, FaultyMultiplierPoisonsTheOutputsItFeeds) {
  std::mt19937_64 rng(19);
  const Matrix x = random_matrix(3, 6, rng);
  const Matrix w = random_matrix(6, 6, rng);
  SystolicArray array(4);
  array.set_fault(MxuFault::nan_multiplier);
  const Matrix out = array.multiply(x, w);
  // Element (0, 0) sits in column 0 of every tile: output columns 0 and 4 pass through it.
  for (std::size_t i = 0; i < out.rows(); ++i) {
    for (std::size_t j = 0; j < out.cols(); ++j) {
      EXPECT_EQ(std::isnan(out.at(i, j)), j % 4 == 0) << i << "," << j;
    }
  }
  array.set_fault(MxuFault::none);
  EXPECT_TRUE(array.multiply(x, w).bitwise_equal(reference_product(x, w)));
}

TEST(SystolicArray, MismatchedShapesAreRejected) {
  SystolicArray array(4);
  EXPECT_THROW(array.multiply(Matrix(2, 3), Matrix(4, 2)), std::invalid_argument);
  EXPECT_THROW(reference_product(Matrix(2, 3), Matrix(4, 2)), std::invalid_argument);
  EXPECT_THROW(SystolicArray(0), std::invalid_argument);
}

} // namespace systolic_array_test
