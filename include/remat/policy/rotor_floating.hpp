#pragma once
// rotor_floating: the optimal dynamic program with floating activations [Shilova21, §2.3.3,
// Thm 5, Eqs. 2.4-2.8, Alg. 1-2], plus a move the thesis lacks (C3: the floating activation
// advances without storing anything; exhaustive search finds chains that need it). It is optimal
// among all sequences of the Table 2.1 operations and never worse than rotor.
//
// C(s,t,l,m), s <= l <= t, over O(N^3) rows of S+1 slots with O(N^3) moves each: O(N^6 S), meant
// for chains of a few tens of stages (practical_stages). Same table layout, time limit and
// reconstruction scheme as rotor.
//
// The recurrences, C2's rebuilt body, C3 and the decisions: docs/chain-dps.md §6 and Decisions.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/detail/refine.hpp>
#include <remat/policy/detail/rows.hpp>
#include <remat/policy/rotor.hpp>

namespace remat {

namespace detail {

/// Index of the states (s, l, t), s <= l <= t <= n, packed.
class floating_index {
 public:
  explicit floating_index(int n) : n_(n), off_(static_cast<std::size_t>((n + 2) * (n + 2)), 0) {
    std::size_t cur = 0;
    for (int s = 1; s <= n; ++s)
      for (int l = s; l <= n; ++l) {
        off_[static_cast<std::size_t>(s * (n + 2) + l)] = cur;
        cur += static_cast<std::size_t>(n - l + 1);
      }
    size_ = cur;
  }
  [[nodiscard]] std::size_t operator()(int s, int t, int l) const {
    return off_[static_cast<std::size_t>(s * (n_ + 2) + l)] + static_cast<std::size_t>(t - l);
  }
  [[nodiscard]] std::size_t size() const { return size_; }
  static double cells(int n, double w) { return n * (n + 1.0) * (n + 2.0) / 6.0 * w; }

 private:
  int n_;
  std::vector<std::size_t> off_;
  std::size_t size_ = 0;
};

/// sum_{k=s..e} u_F_k, accumulated from s upwards (so that every use adds in the same order).
class forward_sums {
 public:
  explicit forward_sums(const discrete_chain& d)
      : n_(d.n), v_(static_cast<std::size_t>((d.n + 2) * (d.n + 2)), 0.0) {
    for (int s = 1; s <= n_; ++s) {
      double acc = 0;
      for (int e = s; e <= n_; ++e) {
        acc += d.uf[static_cast<std::size_t>(e)];
        v_[static_cast<std::size_t>(s * (n_ + 2) + e)] = acc;
      }
    }
  }
  [[nodiscard]] double operator()(int s, int e) const {
    return v_[static_cast<std::size_t>(s * (n_ + 2) + e)];
  }

 private:
  int n_;
  std::vector<double> v_;
};

inline std::int64_t m_none(const discrete_chain& d, int s, int t) {
  std::int64_t v = 0;
  for (int h = s; h <= t; ++h) v = std::max(v, d.f_none(s, h));
  return v + d.delta[static_cast<std::size_t>(t)];
}

/// Exact minimum memory (besides the input) for which C(s,t,l,·) is finite; -1 if the
/// deadline passed.
inline std::int64_t floating_min_memory(const discrete_chain& d, const deadline& dl) {
  constexpr std::int64_t inf = std::numeric_limits<std::int64_t>::max() / 4;
  const int n = d.n;
  const floating_index ix(n);
  // Not initialised (every state is written before it is read): no gigabyte to clear before
  // the first look at the clock.
  const big_array<std::int64_t> lo(ix.size());
  auto A = [&](int k) { return d.a[static_cast<std::size_t>(k)]; };
  for (int s = 1; s <= n; ++s) lo[ix(s, s, s)] = d.m_all(s, s);
  deadline_poll poll(dl);
  for (int len = 1; len < n; ++len) {
    for (int s = 1; s + len <= n; ++s) {
      const int t = s + len;
      const std::int64_t mn = m_none(d, s, t);
      for (int l = s; l <= t; ++l) {
        std::int64_t best = inf;
        if (l == s)
          best = std::max(d.m_all(s, t),
                          d.abar[static_cast<std::size_t>(s)] + lo[ix(s + 1, t, s + 1)]);
        std::int64_t need = 0;  // C3: F_s^∅..F_{r-1}^∅ and then C(r, t, l)
        for (int r = s + 1; r <= l; ++r) {
          need = std::max(need, d.f_none(s, r - 1) + d.delta[static_cast<std::size_t>(t)]);
          if (A(r - 1) >= A(s - 1))
            best = std::min(best, std::max(need, lo[ix(r, t, l)] + A(r - 1) - A(s - 1)));
        }
        for (int r = s; r <= l; ++r) {
          if (A(r - 1) < A(s - 1)) continue;
          const std::int64_t adj = A(r - 1) - A(s - 1);
          for (int tp = l + 1; tp <= t; ++tp)
            for (int sp = r; sp < tp; ++sp)
              best = std::min(best, std::max({mn, lo[ix(sp + 1, t, tp)] + A(sp) + adj,
                                              lo[ix(r, tp - 1, l)] + adj}));
        }
        lo[ix(s, t, l)] = best;
        // Work of the C2 loops: about (l - s + 1) (t - l)^2 / 2.
        if (poll.passed(std::int64_t{l - s + 1} * (t - l + 1) * (t - l + 1))) return -1;
      }
    }
  }
  return lo[ix(1, n, 1)];
}

}  // namespace detail

struct rotor_floating {
  static constexpr std::string_view name = "rotor_floating";
  static constexpr std::string_view summary =
      "optimal DP with floating activations for chains, never worse than rotor (O(N^6 S))";
  /// Its DP is O(N^6 S): a sweep leaves it out on chains longer than this.
  static constexpr int practical_stages = 24;
  static constexpr std::string_view complexity = "O(N^6 S)";
  /// S: memory slots the budget is split into; 0 = exact sizes.
  std::int64_t slots = 500;
  /// The plan may be this much (relative) above the DP's lower bound (sizes rounded down)
  /// before the slots are refined (docs/chain-dps.md, "Memory slots"); details.gap() reports it.
  double tolerance = 0.01;
  /// Wall-clock limit of one solve; not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// Called with the fraction of the table done (0..1) as the solve goes on.
  std::function<void(double)> progress = {};
  std::int64_t max_table_bytes = std::int64_t{2} << 30;

  /// The smallest budget (bytes) with which rotor_floating finds a schedule (exact sizes).
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    return c.a(0) + detail::floating_min_memory(detail::exact_sizes(c), detail::deadline(0));
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }
  /// solve(), and how the plan was reached: store-all, the DP at some slots (optimal at exact
  /// sizes) or, within rounding of the minimum, the fastest minimum-memory schedule.
  [[nodiscard]] result<solution<chain_dp_details>> solve_detailed(const chain& c,
                                                                  bytes budget) const;

 private:
  class dp;
};

class rotor_floating::dp {
 public:
  static constexpr double inf = detail::infinite_cost;

  explicit dp(const detail::discrete_chain& d)
      : d_(d), n_(d.n), w_(d.dp_budget + 1), ix_(d.n), sums_(d) {
    // Rows are set as they are filled (see rotor::dp).
    cost_.reset(ix_.size() * static_cast<std::size_t>(w_));
    lo_.assign(ix_.size(), w_);
  }

  bool fill(const detail::deadline& dl, const std::function<void(double)>& report) {
    for (int s = 1; s <= n_; ++s) {
      double* row = row_of(s, s, s);
      const std::int64_t from = std::min(d_.m_all(s, s), w_);
      const double v = d_.uf[detail::ix(s)] + d_.ub[detail::ix(s)];
      std::fill(row, row + from, inf);
      std::fill(row + from, row + w_, v);
      lo_[ix_(s, s, s)] = from;
    }
    detail::deadline_poll poll(dl);
    // Work of one diagonal grows like len^4 (n-len) states x moves; report by that weight.
    double total = 0, done = 0;
    for (int len = 1; len < n_; ++len) total += weight(len);
    for (int len = 1; len < n_; ++len) {
      for (int s = 1; s + len <= n_; ++s) {
        for (int l = s; l <= s + len; ++l) {
          fill_one(s, s + len, l);
          const std::int64_t moves =
              std::int64_t{l - s + 1} * (s + len - l + 1) * (s + len - l + 1);
          if (poll.passed(moves * w_)) return false;
        }
      }
      done += weight(len);
      if (report) report(done / total);
    }
    return true;
  }

  [[nodiscard]] double value() const { return row_of(1, n_, 1)[w_ - 1]; }

  /// value() < infinity exactly when the min-memory recurrence on the same sizes fits (past the
  /// deadline: unknown, the fill reports the time limit).
  static bool feasible(const detail::discrete_chain& d, const detail::deadline& dl) {
    const std::int64_t lo = detail::floating_min_memory(d, dl);
    return lo < 0 || lo <= d.dp_budget;
  }

  /// Alg. 2 (OptRecFL) with the second call's budget of Eq. 2.7.
  [[nodiscard]] detail::decisions reconstruct() const {
    std::vector<chain_op> ops;
    struct job {
      int s, t, l;
      std::int64_t m;
      bool backward_only;
    };
    std::vector<job> todo{{1, n_, 1, w_ - 1, false}};
    while (!todo.empty()) {
      const job j = todo.back();
      todo.pop_back();
      if (j.backward_only) {
        ops.push_back(chain_op::backward(j.s));
        continue;
      }
      const int s = j.s, t = j.t, l = j.l;
      const std::int64_t m = j.m;
      if (s == t) {
        ops.push_back(chain_op::forward(s, forward_mode::save_all));
        ops.push_back(chain_op::backward(s));
        continue;
      }
      const double target = row_of(s, t, l)[m];
      move mv;
      if (!find_c2(s, t, l, m, target, mv)) {
        // C1 or C3: any move whose value is the table's gives an optimal sequence.
        const std::int64_t ab = d_.abar[detail::ix(s)];
        const bool c1 =
            l == s && m >= std::max(d_.m_all(s, t), ab + lo(s + 1, t, s + 1)) &&
            d_.uf[detail::ix(s)] + d_.ub[detail::ix(s)] + row_of(s + 1, t, s + 1)[m - ab] == target;
        int to = 0;
        std::int64_t adj = 0;
        if (!c1)
          for_each_shift(s, t, l,
                         [&](int r, std::int64_t from, std::int64_t a, const double* next) {
                           if (m < from || sums_(s, r - 1) + next[m - a] != target) return true;
                           to = r;
                           adj = a;
                           return false;
                         });
        if (to == 0) {  // C1
          ops.push_back(chain_op::forward(s, forward_mode::save_all));
          todo.push_back({s, s, s, 0, true});
          todo.push_back({s + 1, t, s + 1, m - ab, false});
        } else {  // C3
          for (int q = s; q < to; ++q) ops.push_back(chain_op::forward(q, forward_mode::no_save));
          todo.push_back({to, t, l, m - adj, false});
        }
        continue;
      }
      for (int q = s; q < mv.r; ++q) ops.push_back(chain_op::forward(q, forward_mode::no_save));
      ops.push_back(chain_op::forward(mv.r, forward_mode::save_input));
      for (int q = mv.r + 1; q <= mv.sp; ++q)
        ops.push_back(chain_op::forward(q, forward_mode::no_save));
      const std::int64_t mr = m - mv.adj;
      todo.push_back({mv.r, mv.tp - 1, l, mr, false});
      todo.push_back({mv.sp + 1, t, mv.tp, mr - d_.a[detail::ix(mv.sp)], false});
    }
    return {std::move(ops), {}, value()};
  }

 private:
  struct move {
    int r = 0, tp = 0, sp = 0;
    std::int64_t adj = 0;
  };
  [[nodiscard]] double weight(int len) const {
    return static_cast<double>(n_ - len) * len * len * len * len + 1.0;
  }
  double* row_of(int s, int t, int l) {
    return cost_.get() + ix_(s, t, l) * static_cast<std::size_t>(w_);
  }
  [[nodiscard]] const double* row_of(int s, int t, int l) const {
    return cost_.get() + ix_(s, t, l) * static_cast<std::size_t>(w_);
  }
  [[nodiscard]] std::int64_t lo(int s, int t, int l) const { return lo_[ix_(s, t, l)]; }

  /// Calls f(move, first slot, tail row, head row) for every C2 move of (s,t,l), in a fixed order.
  template <class F>
  void for_each_c2(int s, int t, int l, F&& f) const {
    const std::int64_t mn = detail::m_none(d_, s, t);
    for (int r = s; r <= l; ++r) {
      if (d_.a[detail::ix(r - 1)] < d_.a[detail::ix(s - 1)]) continue;
      const std::int64_t adj = d_.a[detail::ix(r - 1)] - d_.a[detail::ix(s - 1)];
      for (int tp = l + 1; tp <= t; ++tp)
        for (int sp = r; sp < tp; ++sp) {
          const std::int64_t shift = d_.a[detail::ix(sp)] + adj;
          const std::int64_t from =
              std::max({mn, lo(sp + 1, t, tp) + shift, lo(r, tp - 1, l) + adj});
          if (from >= w_) continue;
          if (!f(move{r, tp, sp, adj}, from, row_of(sp + 1, t, tp), row_of(r, tp - 1, l))) return;
        }
    }
  }

  /// Calls f(r, first slot, adjustment, row of C(r,t,l)) for every C3 move of (s,t,l).
  template <class F>
  void for_each_shift(int s, int t, int l, F&& f) const {
    std::int64_t need = 0;
    for (int r = s + 1; r <= l; ++r) {
      need = std::max(need, d_.f_none(s, r - 1) + d_.delta[detail::ix(t)]);
      if (d_.a[detail::ix(r - 1)] < d_.a[detail::ix(s - 1)]) continue;
      const std::int64_t adj = d_.a[detail::ix(r - 1)] - d_.a[detail::ix(s - 1)];
      const std::int64_t from = std::max(need, lo(r, t, l) + adj);
      if (from >= w_) continue;
      if (!f(r, from, adj, row_of(r, t, l))) return;
    }
  }

  bool find_c2(int s, int t, int l, std::int64_t m, double target, move& found) const {
    bool hit = false;
    for_each_c2(
        s, t, l, [&](const move& mv, std::int64_t from, const double* tail, const double* head) {
          if (m < from) return true;
          const double v =
              sums_(s, mv.sp) + tail[m - d_.a[detail::ix(mv.sp)] - mv.adj] + head[m - mv.adj];
          if (v == target) {
            found = mv;
            hit = true;
            return false;
          }
          return true;
        });
    return hit;
  }

  void fill_one(int s, int t, int l) {
    double* row = row_of(s, t, l);
    std::fill(row, row + w_, inf);
    for_each_c2(s, t, l,
                [&](const move& mv, std::int64_t from, const double* tail, const double* head) {
                  const double sf = sums_(s, mv.sp);
                  const std::int64_t shift = d_.a[detail::ix(mv.sp)] + mv.adj;
                  detail::relax_row(row, from, w_, [&](std::int64_t m) {
                    return sf + tail[m - shift] + head[m - mv.adj];
                  });
                  return true;
                });
    if (l == s) {
      const std::int64_t ab = d_.abar[detail::ix(s)];
      const std::int64_t from = std::max(d_.m_all(s, t), ab + lo(s + 1, t, s + 1));
      const double* next = row_of(s + 1, t, s + 1);
      const double ufb = d_.uf[detail::ix(s)] + d_.ub[detail::ix(s)];
      detail::relax_row(row, from, w_, [&](std::int64_t m) { return ufb + next[m - ab]; });
    }
    for_each_shift(s, t, l, [&](int r, std::int64_t from, std::int64_t adj, const double* next) {
      const double sf = sums_(s, r - 1);
      detail::relax_row(row, from, w_, [&](std::int64_t m) { return sf + next[m - adj]; });
      return true;
    });
    lo_[ix_(s, t, l)] = detail::first_finite(row, w_);
  }

  const detail::discrete_chain& d_;
  int n_;
  std::int64_t w_;
  detail::floating_index ix_;
  detail::forward_sums sums_;
  detail::big_array<double> cost_;
  std::vector<std::int64_t> lo_;
};

inline result<solution<chain_dp_details>> rotor_floating::solve_detailed(const chain& c,
                                                                         bytes budget) const {
  return detail::timed([&]() -> result<solution<chain_dp_details>> {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    const detail::deadline dl(time_limit);
    // Within rounding of the minimum, fall back on rotor's minimum-memory schedule when it fits
    // (rotor's minimum can be above rotor_floating's; then the budget must be raised a little).
    return detail::solve_discretized<dp>(
        {.policy = name,
         .problem = &c,
         .budget = budget,
         .slots = slots,
         .max_table_bytes = max_table_bytes,
         .tolerance = tolerance,
         .limit = &dl,
         .progress = progress,
         .table_cells = &detail::floating_index::cells,
         .minimum = [&]() -> std::optional<bytes> {
           const std::int64_t lo = detail::floating_min_memory(detail::exact_sizes(c), dl);
           if (lo < 0) return std::nullopt;
           return c.a(0) + lo;
         },
         .fallback = [&]() -> std::optional<detail::decisions> {
           const detail::rotor_min_memory persistent(detail::exact_sizes(c), dl);
           if (!persistent.complete() || c.a(0) + persistent(1, c.length()) > budget)
             return std::nullopt;
           return persistent.schedule();
         },
         .time_limit_advice = "raise time_limit, or use fewer slots; the floating DP is "
                              "O(N^6 S): use rotor (O(N^3 S)) for long chains"},
        detail::chain_target{name, c, budget});
  });
}

}  // namespace remat
