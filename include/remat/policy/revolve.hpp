#pragma once
// revolve: Griewank's binomial checkpointing [Revolve00; Shilova21, Thm 1], the classical AD
// reversal for homogeneous chains, made a valid chain schedule by an F^all before each B
// [Shilova21, §2.1.2]. The reversal of stages s..t with c free snapshot slots advances i stages
// (F_s^ck, then F^∅), reverses s+i..t, then s..s+i-1; the split points minimise the forward
// steps at unit cost, as Revolve does. Without `snapshots` it takes the c whose program is fastest
// within the budget (family_best: ties to the fewest snapshots).
//
// time_limit holds: the split table and each program check the clock, and a program is replayed
// in the simulator only when the replay fits in the time left. docs/chain-dps.md §4.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/policy/detail/common.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/store_all.hpp>

namespace remat {

struct revolve {
  static constexpr std::string_view name = "revolve";
  static constexpr std::string_view summary =
      "Griewank's binomial checkpointing (Revolve), the best snapshot count that fits";
  /// Free snapshot slots c besides the chain input; nullopt = the best that fits.
  std::optional<int> snapshots = std::nullopt;
  /// Wall-clock limit of one solve; not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// Called with the fraction of the work done (0..1) as the solve goes on: the split table
  /// first, then the programs tried.
  std::function<void(double)> progress = {};

  /// Griewank-optimal forward counts and split points for reversing up to n_max steps with up
  /// to c_max free snapshots. O(n_max^2 c_max) time, 12 (n_max + 1)(c_max + 1) bytes.
  class table {
   public:
    table(int n_max, int c_max) : table(n_max, c_max, detail::deadline(0)) {}
    /// Stops early once `dl` has passed; then complete() is false and the table unusable.
    table(int n_max, int c_max, const detail::deadline& dl,
          const std::function<void(double)>& progress = {})
        : n_(n_max) {
      detail::deadline_poll poll(dl);
      // Column by column (c is the slow index), so that memory grows only as the table fills.
      for (int c = 0; c <= c_max; ++c) {
        g_.resize(static_cast<std::size_t>(c + 1) * static_cast<std::size_t>(n_max + 1), 0);
        split_.resize(g_.size(), 0);
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
          if (poll.passed(n)) return;
        }
        if (progress) progress(static_cast<double>(c + 1) / (c_max + 1));
      }
      complete_ = true;
    }
    [[nodiscard]] bool complete() const { return complete_; }
    /// G(n, c): forward steps to reverse n stages (the n leaf F^all's not counted).
    [[nodiscard]] long forwards(int n, int c) const { return at(n, c); }
    [[nodiscard]] int split(int n, int c) const { return split_[idx(n, c)]; }

   private:
    [[nodiscard]] std::size_t idx(int n, int c) const {
      return static_cast<std::size_t>(c) * static_cast<std::size_t>(n_ + 1) +
             static_cast<std::size_t>(n);
    }
    [[nodiscard]] long at(int n, int c) const { return g_[idx(n, c)]; }
    int n_;  // n_max: each column (one per c) holds n = 0..n_max
    bool complete_ = false;
    std::vector<long> g_;
    std::vector<int> split_;
  };

  /// The program reversing the whole chain with c free snapshots.
  [[nodiscard]] static std::vector<chain_op> program(const chain& c, int snaps) {
    return program(c, snaps, table(c.length(), snaps));
  }

  /// Same, with split points from a table built for at least (N, snaps).
  [[nodiscard]] static std::vector<chain_op> program(const chain& c, int snaps, const table& tab) {
    return program(c, snaps, tab, detail::deadline(0));
  }

  /// Same; empty if `dl` passed first.
  [[nodiscard]] static std::vector<chain_op> program(const chain& c, int snaps, const table& tab,
                                                     const detail::deadline& dl) {
    return program(c.length(), snaps, tab, dl);
  }

  /// The reversal of n stages (1..n) with `snaps` free snapshots, split points from a table built
  /// for at least (n, snaps); empty if `dl` passed first. The multi-chain DP reverses its
  /// chains' segments with it (policy/multi_chain.hpp).
  [[nodiscard]] static std::vector<chain_op> program(int n, int snaps, const table& tab,
                                                     const detail::deadline& dl) {
    detail::deadline_poll poll(dl);
    std::vector<chain_op> ops;
    ops.reserve(static_cast<std::size_t>(2 * n + tab.forwards(n, snaps)));
    // Explicit stack of (s, t, c) reversals still to emit, in order.
    struct job {
      int s, t, c;
    };
    std::vector<job> todo{{1, n, snaps}};
    while (!todo.empty()) {
      const job j = todo.back();
      todo.pop_back();
      if (j.s == j.t) {
        ops.push_back(chain_op::forward(j.s, forward_mode::save_all));
        ops.push_back(chain_op::backward(j.s));
        continue;
      }
      const int len = j.t - j.s + 1;
      const int i = tab.split(len, j.c);
      ops.push_back(chain_op::forward(j.s, forward_mode::save_input));
      for (int l = j.s + 1; l <= j.s + i - 1; ++l)
        ops.push_back(chain_op::forward(l, forward_mode::no_save));
      if (poll.passed(i)) return {};
      // Reverse the tail first, then the head (pushed in reverse order).
      todo.push_back({j.s, j.s + i - 1, j.c});
      todo.push_back({j.s + i, j.t, len - i >= 2 ? j.c - 1 : j.c});
    }
    return ops;
  }

  /// The smallest budget with which revolve plans c: the least peak of its snapshot counts (of
  /// `snapshots` when given). O(N^2 c) for the split table, and a program per count.
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    const graph g = detail::chain_graph(c);
    const int n = c.length(), c_max = std::max(0, n - 2);
    if (snapshots) {
      const int snaps = std::clamp(*snapshots, 0, c_max);
      return detail::peak_of(g, program(c, snaps));
    }
    const table tab(n, c_max);
    bytes lo = unlimited_bytes;
    for (int k = c_max; k >= 0; --k) lo = std::min(lo, detail::peak_of(g, program(c, k, tab)));
    return lo;
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }

  [[nodiscard]] result<solution<revolve_details>> solve_detailed(const chain& c,
                                                                 bytes budget) const {
    return detail::timed([&] { return solve_untimed(c, budget); });
  }

 private:
  [[nodiscard]] result<solution<revolve_details>> solve_untimed(const chain& c,
                                                                bytes budget) const {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    const int n = c.length();
    const int c_max = std::max(0, n - 2);  // with n-2 free slots no state is recomputed
    if (snapshots && *snapshots < 0)
      return error{status::invalid_problem,
                   "revolve: snapshots = " + std::to_string(*snapshots) + " is negative; use 0.." +
                       std::to_string(c_max) + ", or leave it unset to pick the best",
                   {}};
    const graph g = detail::chain_graph(c);
    const detail::deadline dl(time_limit);
    const std::string advice =
        "raise time_limit" + std::string(snapshots ? "" : ", or give snapshots = c (one program)") +
        "; the split table is O(N^2 c) and a program with few snapshots has O(N^2) operations";
    // The clock is read often while the table and the programs are built; replaying a program
    // in the simulator cannot be stopped, so a program is only replayed (and then replayed
    // again by detail::finish) when the time that takes, estimated from the simulator's speed
    // on the store-all program, fits in what is left of the limit.
    double per_op = 0;  // seconds per simulated operation
    if (std::isfinite(time_limit) && time_limit > 0) {
      const auto all = store_all::program(c);
      const double t0 = dl.elapsed();
      (void)detail::peak_of(g, all);
      per_op = (dl.elapsed() - t0) / static_cast<double>(all.size());
    }
    auto out_of_time = [&](std::size_t ops) {
      return per_op > 0 && dl.elapsed() + 2.5 * per_op * static_cast<double>(ops) > dl.limit();
    };
    std::function<void(double)> table_progress;
    if (progress) table_progress = [&](double f) { progress(0.5 * f); };
    // The counts tried: the one given, else all of them, the most snapshots first (the programs
    // grow as the count falls, to O(N^2) operations at 0).
    const int high = snapshots ? std::min(*snapshots, c_max) : c_max;
    const int low = snapshots ? high : 0;
    const table tab(n, high, dl, table_progress);
    if (!tab.complete())
      return detail::time_limit_reached(name, dl, "while building the split table", advice);
    detail::family_best best(budget);
    for (int k = high; k >= low; --k) {
      const auto length = static_cast<std::size_t>(2 * n + tab.forwards(n, k));
      if (out_of_time(length + best.size()))
        return detail::time_limit_reached(name, dl,
                                          snapshots ? std::string("before replaying the program")
                                                    : "with " + std::to_string(c_max - k) + " of " +
                                                          std::to_string(c_max + 1) +
                                                          " snapshot counts tried",
                                          advice);
      auto ops = program(c, k, tab, dl);
      if (ops.empty())
        return detail::time_limit_reached(
            name, dl, snapshots ? "while writing the program" : "while writing a program", advice);
      const bytes peak = detail::peak_of(g, ops);
      if (progress) progress(0.5 + 0.5 * static_cast<double>(high - k + 1) / (high - low + 1));
      const seconds t = detail::time_of(c, ops);
      best.consider(k, std::move(ops), peak, t);
    }
    if (!best.found())
      return detail::budget_too_small(name, c, budget, best.min_peak(),
                                      snapshots
                                          ? "with " + std::to_string(*snapshots) + " snapshots"
                                          : std::string("with any number of snapshots"));
    auto s = detail::finish(name, g, budget, std::move(best.program()), best.time());
    if (!s) return s.err();
    solution<revolve_details> out;
    out.program = std::move(*s);
    out.optimal = out.program.predicted_time <= c.ideal_time();
    out.details.snapshots = best.parameter();
    return out;
  }
};

}  // namespace remat
