#pragma once
// periodic: PyTorch's torch.utils.checkpoint.checkpoint_sequential(functions, k, input), the
// single-pass strategy of Chen et al. (shilova-spec §2.1 baselines, thesis S:1166-1170).
//
// The N stages are cut like PyTorch does: segment_size = N / k; the first k-1 segments have
// segment_size stages and are checkpointed (forward: F_b^ck then F^∅, keeping only the segment
// input); the last segment takes the rest and runs normally (F^all). Backward: the last segment
// is reversed directly, every checkpointed segment is recomputed once with F^all and reversed.
// Example (N = 5, k = 3): F1_ck F2_ck F3_all F4_all F5_all B5 B4 B3 F2_all B2 F1_all B1.
//
// segments = 0 picks the k in 1..N with the smallest makespan whose peak fits the budget: N
// programs of O(N) operations, each replayed in the simulator, O(N^2) in all (about 5 s for
// 4,000 stages). time_limit holds (detail/common.hpp): the clock is read after each k, and past
// the limit the solve returns status::time_limit (not the best k so far, which would depend on
// the machine's speed). A given k is one program, O(N): the limit is not checked.

#include <algorithm>
#include <functional>
#include <limits>
#include <remat/policy/detail/common.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

struct periodic {
  static constexpr std::string_view name = "periodic";
  int segments = 0;  ///< k; 0 = the best k that fits the budget
  /// Wall-clock limit of one solve (segments = 0 tries every k); not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// Called with the fraction of the k's tried (0..1) as the solve goes on.
  std::function<void(double)> progress = {};

  /// The program for k segments (1 <= k <= N).
  [[nodiscard]] static std::vector<chain_op> program(const chain& c, int k) {
    const int n = c.length();
    const int size = n / k;
    std::vector<chain_op> ops;
    // Segment j (0-based) covers stages [j*size + 1, (j+1)*size]; the last covers the rest.
    for (int j = 0; j + 1 < k; ++j) {
      const int b = j * size + 1, e = (j + 1) * size;
      ops.push_back(chain_op::forward(b, forward_mode::save_input));
      for (int l = b + 1; l <= e; ++l) ops.push_back(chain_op::forward(l, forward_mode::no_save));
    }
    const int last = (k - 1) * size + 1;
    for (int l = last; l <= n; ++l) ops.push_back(chain_op::forward(l, forward_mode::save_all));
    for (int l = n; l >= last; --l) ops.push_back(chain_op::backward(l));
    for (int j = k - 2; j >= 0; --j) {
      const int b = j * size + 1, e = (j + 1) * size;
      for (int l = b; l <= e; ++l) ops.push_back(chain_op::forward(l, forward_mode::save_all));
      for (int l = e; l >= b; --l) ops.push_back(chain_op::backward(l));
    }
    return ops;
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    const int n = c.length();
    if (segments < 0 || segments > n)
      return error{status::invalid_problem,
                   "periodic: segments = " + std::to_string(segments) +
                       " is out of range; use 1.." + std::to_string(n) +
                       " for this chain, or 0 to pick the best",
                   {}};
    const graph g = detail::chain_graph(c);
    if (segments > 0) {
      auto ops = program(c, segments);
      const bytes peak = detail::peak_of(g, ops);
      if (peak > budget)
        return detail::budget_too_small(name, c, budget, peak,
                                        "with " + std::to_string(segments) + " segments");
      const seconds t = detail::time_of(c, ops);
      if (progress) progress(1.0);
      return detail::finish(name, g, budget, std::move(ops), t);
    }
    std::vector<chain_op> best;
    seconds best_time = 0;
    bytes min_peak = unlimited_bytes;
    const detail::deadline dl(time_limit);
    for (int k = 1; k <= n; ++k) {
      if (dl.passed())
        return detail::time_limit_reached(
            name, dl,
            "after trying " + std::to_string(k - 1) + " of " + std::to_string(n) +
                " segment counts",
            "raise time_limit, or give segments = k (one program, O(N))");
      if (progress && k > 1) progress(static_cast<double>(k - 1) / n);
      auto ops = program(c, k);
      const bytes peak = detail::peak_of(g, ops);
      min_peak = std::min(min_peak, peak);
      if (peak > budget) continue;
      const seconds t = detail::time_of(c, ops);
      if (best.empty() || t < best_time) {
        best = std::move(ops);
        best_time = t;
      }
    }
    if (progress) progress(1.0);
    if (best.empty())
      return detail::budget_too_small(name, c, budget, min_peak, "with any number of segments");
    return detail::finish(name, g, budget, std::move(best), best_time);
  }
};

}  // namespace remat
