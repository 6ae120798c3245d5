#pragma once
// Row operations of the discretised DPs (rotor, rotor_floating): a row holds one state's cost
// for every memory budget m = 0..w-1, +infinity where infeasible.

#include <cstdint>
#include <limits>

namespace remat::detail {

inline constexpr double infinite_cost = std::numeric_limits<double>::infinity();

/// row[m] = min(row[m], value(m)) for m in [from, w). A strict < keeps the earlier move on
/// ties, which the reconstructions rely on. Inlined into a plain loop the compiler vectorises.
template <class F>
inline void relax_row(double* row, std::int64_t from, std::int64_t w, F&& value) {
  for (std::int64_t m = from; m < w; ++m) {
    const double v = value(m);
    row[m] = v < row[m] ? v : row[m];
  }
}

/// In a non-increasing row, the smallest m in [from, w) with row[m] <= bound, or w if none (a
/// binary search): past it, a move whose cost is at least `bound` improves no cell.
inline std::int64_t first_at_most(const double* row, std::int64_t from, std::int64_t w,
                                  double bound) {
  std::int64_t lo = from, hi = w;  // the answer is in [lo, hi]
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (row[mid] <= bound)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/// The smallest m with a finite cost, or w if none.
inline std::int64_t first_finite(const double* row, std::int64_t w) {
  for (std::int64_t m = 0; m < w; ++m)
    if (row[m] < infinite_cost) return m;
  return w;
}

}  // namespace remat::detail
