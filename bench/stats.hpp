// Order statistics for the benchmarks' timings.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace jobman::bench {

// The q-quantile (0 <= q <= 1) of `sorted`, an ascending list: the value at rank floor(q * size); 0 when empty.
inline double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) {
    return 0;
  }
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * static_cast<double>(sorted.size())))];
}

// The median of `values` in any order: the middle value, or the mean of the two middle ones; 0 when empty.
inline double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

} // namespace jobman::bench
