#pragma once
// revolve: Griewank's binomial checkpointing (Revolve), the classical AD reversal for homogeneous
// chains (shilova-spec §1.2, Theorem 1; Griewank & Walther), turned into a valid chain schedule
// by an F^all before each B as in shilova-spec §2.1 (thesis S:1166-1170, sequence (2.2)).
//
// The reversal of stages s..t starts with a_{s-1} in memory and `c` free snapshot slots:
//   * one stage: F_s^all B_s;
//   * otherwise advance i stages (F_s^ck, then F^∅) to a_{s+i-1}, reverse s+i..t, then s..s+i-1.
//     The advanced state takes a snapshot slot unless it is the last state before the leaf
//     (i = t-s), which is the working state of plain AD.
// Split points minimise the number of forward steps with unit costs, as Revolve does; the
// count G(n, c) of forwards (besides the n F^all's) equals Griewank's t(n, c+1) (shilova-spec
// §7.1: c free slots + the one holding the input = c+1 snapshots).
//
// snapshots = -1 picks the c with the smallest makespan whose peak fits the budget.

#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <remat/policy/detail/common.hpp>

namespace remat {

struct revolve {
  static constexpr std::string_view name = "revolve";
  int snapshots = -1;  ///< free snapshot slots c besides the chain input; -1 = the best that fits

  /// Griewank-optimal forward counts and split points for reversing up to n_max steps with up
  /// to c_max free snapshots.
  class table {
   public:
    table(int n_max, int c_max)
        : n_(n_max), c_(c_max),
          g_(static_cast<std::size_t>((n_max + 1) * (c_max + 1)), 0),
          split_(g_.size(), 0) {
      for (int c = 0; c <= c_max; ++c)
        for (int n = 2; n <= n_max; ++n) {
          long best = std::numeric_limits<long>::max();
          int arg = n - 1;
          for (int i = n - 1; i >= 1; --i) {
            const int cc = (n - i >= 2) ? c - 1 : c;  // the advanced state needs a snapshot slot
            if (cc < 0) continue;
            const long v = i + at(n - i, cc) + at(i, c);
            if (v < best) {
              best = v;
              arg = i;
            }
          }
          g_[idx(n, c)] = best;
          split_[idx(n, c)] = arg;
        }
    }
    /// G(n, c): forward steps to reverse n stages (the n leaf F^all's not counted).
    [[nodiscard]] long forwards(int n, int c) const { return at(n, c); }
    [[nodiscard]] int split(int n, int c) const { return split_[idx(n, c)]; }

   private:
    [[nodiscard]] std::size_t idx(int n, int c) const { return static_cast<std::size_t>(n * (c_ + 1) + c); }
    [[nodiscard]] long at(int n, int c) const { return g_[idx(n, c)]; }
    int n_, c_;
    std::vector<long> g_;
    std::vector<int> split_;
  };

  /// The program reversing the whole chain with c free snapshots.
  [[nodiscard]] static std::vector<instruction> program(const chain& c, int snaps) {
    return program(c, snaps, table(c.length(), snaps));
  }

  /// Same, with split points from a table built for at least (N, snaps).
  [[nodiscard]] static std::vector<instruction> program(const chain& c, int snaps, const table& tab) {
    const int n = c.length();
    std::vector<instruction> ops;
    // Explicit stack of (s, t, c) reversals still to emit, in order.
    struct job { int s, t, c; };
    std::vector<job> todo{{1, n, snaps}};
    while (!todo.empty()) {
      const job j = todo.back();
      todo.pop_back();
      if (j.s == j.t) {
        ops.push_back(instruction::forward(j.s, forward_mode::save_all));
        ops.push_back(instruction::backward(j.s));
        continue;
      }
      const int len = j.t - j.s + 1;
      const int i = tab.split(len, j.c);
      ops.push_back(instruction::forward(j.s, forward_mode::save_input));
      for (int l = j.s + 1; l <= j.s + i - 1; ++l) ops.push_back(instruction::forward(l, forward_mode::no_save));
      // Reverse the tail first, then the head (pushed in reverse order).
      todo.push_back({j.s, j.s + i - 1, j.c});
      todo.push_back({j.s + i, j.t, len - i >= 2 ? j.c - 1 : j.c});
    }
    return ops;
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    const int n = c.length();
    const int c_max = std::max(0, n - 2);  // with n-2 free slots no state is recomputed
    if (snapshots < -1)
      return error{status::invalid_problem,
                   "revolve: snapshots = " + std::to_string(snapshots) +
                       " is negative; use 0.." + std::to_string(c_max) + ", or -1 to pick the best",
                   {}};
    if (snapshots >= 0) {
      auto ops = program(c, std::min(snapshots, c_max));
      const bytes peak = detail::peak_of(c, ops);
      if (peak > budget)
        return detail::budget_too_small(name, c, budget, peak,
                                        "with " + std::to_string(snapshots) + " snapshots");
      const seconds t = detail::time_of(c, ops);
      return detail::finish(name, c, budget, std::move(ops), t);
    }
    std::vector<instruction> best;
    seconds best_time = 0;
    bytes min_peak = unlimited_bytes;
    const table tab(n, c_max);
    for (int k = 0; k <= c_max; ++k) {
      auto ops = program(c, k, tab);
      const bytes peak = detail::peak_of(c, ops);
      min_peak = std::min(min_peak, peak);
      if (peak > budget) continue;
      const seconds t = detail::time_of(c, ops);
      if (best.empty() || t < best_time) {
        best = std::move(ops);
        best_time = t;
      }
    }
    if (best.empty()) return detail::budget_too_small(name, c, budget, min_peak, "with any number of snapshots");
    return detail::finish(name, c, budget, std::move(best), best_time);
  }
};

}  // namespace remat
