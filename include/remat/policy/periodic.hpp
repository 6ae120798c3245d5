#pragma once
// periodic: PyTorch's torch.utils.checkpoint.checkpoint_sequential(functions, k, input), the
// single-pass strategy of [Chen16] (a baseline of [Shilova21, §2.1.2]): k segments cut as PyTorch
// cuts them, the first k-1 checkpointed, each recomputed once in the backward. Example (N = 5,
// k = 3): F1_ck F2_ck F3_all F4_all F5_all B5 B4 B3 F2_all B2 F1_all B1.
//
// Without `segments` it takes the k in 1..N whose program is fastest within the budget
// (family_best: ties to the fewest segments): N programs replayed, O(N^2). time_limit holds
// between the k's. docs/chain-dps.md §3.

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/policy/detail/common.hpp>
#include <remat/policy/details.hpp>

namespace remat {

struct periodic {
  static constexpr std::string_view name = "periodic";
  static constexpr std::string_view summary =
      "PyTorch's checkpoint_sequential: k segments, the best k that fits (Chen et al.)";
  /// k; nullopt = the best k that fits the budget
  std::optional<int> segments = std::nullopt;
  /// Wall-clock limit of one solve (without `segments`, every k is tried); not finite = none.
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

  /// The smallest budget with which periodic plans c: the least peak of its segment counts
  /// (of `segments` when given). O(N^2) without `segments`.
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    const graph g = detail::chain_graph(c);
    if (segments) return detail::peak_of(g, program(c, std::clamp(*segments, 1, c.length())));
    bytes lo = unlimited_bytes;
    for (int k = 1; k <= c.length(); ++k) lo = std::min(lo, detail::peak_of(g, program(c, k)));
    return lo;
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }

  [[nodiscard]] result<solution<periodic_details>> solve_detailed(const chain& c,
                                                                  bytes budget) const {
    return detail::timed([&] { return solve_untimed(c, budget); });
  }

 private:
  [[nodiscard]] result<solution<periodic_details>> solve_untimed(const chain& c,
                                                                 bytes budget) const {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    const int n = c.length();
    if (segments && (*segments < 1 || *segments > n))
      return error{status::invalid_problem,
                   "periodic: segments = " + std::to_string(*segments) +
                       " is out of range; use 1.." + std::to_string(n) +
                       " for this chain, or leave it unset to pick the best",
                   {}};
    const graph g = detail::chain_graph(c);
    detail::family_best best(budget);
    const detail::deadline dl(time_limit);
    const int first = segments.value_or(1), last = segments.value_or(n);
    for (int k = first; k <= last; ++k) {
      if (!segments && dl.passed())
        return detail::time_limit_reached(name, dl,
                                          "after trying " + std::to_string(k - 1) + " of " +
                                              std::to_string(n) + " segment counts",
                                          "raise time_limit, or give segments = k (one program, "
                                          "O(N))");
      if (progress && k > first) progress(static_cast<double>(k - first) / (last - first + 1));
      auto ops = program(c, k);
      const bytes peak = detail::peak_of(g, ops);
      const seconds t = detail::time_of(c, ops);
      best.consider(k, std::move(ops), peak, t);
    }
    if (progress) progress(1.0);
    if (!best.found())
      return detail::budget_too_small(name, c, budget, best.min_peak(),
                                      segments ? "with " + std::to_string(*segments) + " segments"
                                               : "with any number of segments");
    auto s = detail::finish(name, g, budget, std::move(best.program()), best.time());
    if (!s) return s.err();
    solution<periodic_details> out;
    out.program = std::move(*s);
    out.optimal = out.program.predicted_time <= c.ideal_time();
    out.details.segments = best.parameter();
    return out;
  }
};

}  // namespace remat
