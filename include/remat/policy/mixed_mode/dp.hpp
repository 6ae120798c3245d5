#pragma once
// Mixed Mode's dynamic program [MixedMode, Eqs. 1-2]: a sequence of N ops split into segments,
// each run in one of two modes (0: planned, "graph mode"; 1: dynamic, "eager mode") with a share
// of M memory slots. Opt(i,k), the least cost of ops [0, i) in k slots, is
//
//   Opt(0,k) = 0,   Opt(i,k) = min_{0<=j<i} min_{delta_min<=delta<=k} Opt(j, k-delta) +
//   F(j,i,delta)
//
// with F(j,i,delta) = min(G, E) over the two modes (ties to planned): memory and cost add up over
// the segments. The paper prints Eq. 1 with Opt(0,i,.) on both sides and j free; this is the
// reading its prose gives (docs/mixed-mode.md, "The recurrence as printed").
//
// Three searches, one plan type (mixed_search): `exact` tries every split and, per (j,i), the
// budgets where F(j,i,.) drops (F and Opt both fall with the budget, so between two drops the
// smaller share is never worse: still exact, O(N^2 M b) for b drops); `dc` adds the paper's
// divide and conquer over i, exact only under its quadrangle inequality (Assumption 1, which the
// paper says may fail), O(M^2 N log N); `dc_ternary` also takes the budget split by ternary
// search, exact only where the sum is convex in it, O(M log M N log N). The accelerated searches
// return a plan of the model always, which may be slower than the exact one.
//
// The cost model is a template parameter (mixed_costs): the policy's (policy/mixed_mode.hpp)
// plans segments with a chain policy and runs DTR on them; mixed_op_costs is the paper's
// two-mode operator chain in its simplest exact form, for studies and benchmarks.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/details.hpp>

namespace remat {

/// One segment of a plan: ops [first, last) in one mode, with a share of the slots.
struct mixed_segment {
  int first = 0;
  int last = 0;
  segment_mode mode = segment_mode::planned;
  std::int64_t slots = 0;
  double cost = 0;

  friend bool operator==(const mixed_segment&, const mixed_segment&) = default;
};

/// The DP's answer: its cost (infinite where no split fits) and the segments, in order.
struct mixed_plan {
  double cost = std::numeric_limits<double>::infinity();
  std::vector<mixed_segment> segments;

  [[nodiscard]] bool feasible() const noexcept {
    return cost < std::numeric_limits<double>::infinity();
  }
  friend bool operator==(const mixed_plan&, const mixed_plan&) = default;
};

/// A segment cost model: ops 0..size()-1; cost(mode, j, i, delta) is the cost of ops [j, i) in
/// that mode with delta slots (infinite where they do not fit), nonincreasing in delta.
template <class C>
concept mixed_costs = requires(const C& c, segment_mode m, int j, int i, std::int64_t d) {
  { c.size() } -> std::convertible_to<int>;
  { c.cost(m, j, i, d) } -> std::convertible_to<double>;
};

/// Knobs of one DP run.
struct mixed_dp_options {
  mixed_search search = mixed_search::exact;
  /// The least share of a segment: 1 as printed; 0 lets a segment that needs no memory cost
  /// none (docs/mixed-mode.md, "Shares of zero").
  std::int64_t delta_min = 1;
  std::function<void(double)> progress = {};  ///< called with the fraction done (0..1)
};

namespace detail {

inline constexpr double mixed_inf = std::numeric_limits<double>::infinity();

/// The DP's tables: Opt and the choice that reached each cell.
class mixed_table {
 public:
  mixed_table(int n, std::int64_t m)
      : n_(n), w_(m + 1), opt_(cells(n, m), mixed_inf), arg_(cells(n, m)) {
    for (std::int64_t k = 0; k < w_; ++k) opt_[static_cast<std::size_t>(k)] = 0;
  }
  [[nodiscard]] double& opt(int i, std::int64_t k) { return opt_[at(i, k)]; }
  [[nodiscard]] double opt(int i, std::int64_t k) const { return opt_[at(i, k)]; }
  /// Takes (j, delta, mode, segment cost) at (i, k) when it is strictly better.
  void offer(int i, std::int64_t k, double v, int j, std::int64_t delta, segment_mode mode,
             double f) {
    if (v < opt_[at(i, k)]) {
      opt_[at(i, k)] = v;
      arg_[at(i, k)] = {j, delta, mode, f};
    }
  }
  [[nodiscard]] mixed_plan plan() const {
    mixed_plan out;
    out.cost = opt(n_, w_ - 1);
    if (!out.feasible()) return out;
    int i = n_;
    std::int64_t k = w_ - 1;
    while (i > 0) {
      const choice& c = arg_[at(i, k)];
      out.segments.push_back({c.j, i, c.mode, c.delta, c.cost});
      k -= c.delta;
      i = c.j;
    }
    std::ranges::reverse(out.segments);
    return out;
  }

 private:
  struct choice {
    int j = 0;
    std::int64_t delta = 0;
    segment_mode mode = segment_mode::planned;
    double cost = 0;
  };
  static std::size_t cells(int n, std::int64_t m) {
    return static_cast<std::size_t>(n + 1) * static_cast<std::size_t>(m + 1);
  }
  [[nodiscard]] std::size_t at(int i, std::int64_t k) const {
    return static_cast<std::size_t>(i) * static_cast<std::size_t>(w_) + static_cast<std::size_t>(k);
  }
  int n_;
  std::int64_t w_;
  std::vector<double> opt_;
  std::vector<choice> arg_;
};

/// F(j,i,delta) and its mode: the faster, planned on a tie.
template <mixed_costs C>
std::pair<double, segment_mode> mixed_f(const C& costs, int j, int i, std::int64_t delta) {
  const double g = costs.cost(segment_mode::planned, j, i, delta);
  const double e = costs.cost(segment_mode::dynamic, j, i, delta);
  return e < g ? std::pair{e, segment_mode::dynamic} : std::pair{g, segment_mode::planned};
}

/// The smallest delta in [from, m] where F(j,i,.) is finite (m + 1: none), by bisection (F
/// falls with delta, so being finite is monotone).
template <mixed_costs C>
std::int64_t mixed_first_finite(const C& costs, int j, int i, std::int64_t from, std::int64_t m) {
  std::int64_t lo = from, hi = m + 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (mixed_f(costs, j, i, mid).first < mixed_inf)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/// min_j eval(j, i) for i in [ilo, ihi], j in [jlo, min(i - 1, jhi)], by divide and conquer,
/// the argmin assumed monotone in i (the quadrangle inequality); take(i, j) is called with each
/// i's finite argmin (the smallest j on a tie).
template <class Eval, class Take>
void mixed_dc(int ilo, int ihi, int jlo, int jhi, const Eval& eval, const Take& take) {
  if (ilo > ihi) return;
  const int mid = ilo + (ihi - ilo) / 2;
  double best = mixed_inf;
  int arg = jlo;
  for (int j = jlo; j <= std::min(mid - 1, jhi); ++j) {
    const double v = eval(j, mid);
    if (v < best) {
      best = v;
      arg = j;
    }
  }
  if (best < mixed_inf) take(mid, arg);
  mixed_dc(ilo, mid - 1, jlo, arg, eval, take);
  mixed_dc(mid + 1, ihi, arg, jhi, eval, take);
}

}  // namespace detail

/// Runs the Mixed Mode DP over `costs` with `slots` memory slots; nullopt when the deadline
/// passed first. The plan's cost is infinite when no split fits.
template <mixed_costs C>
std::optional<mixed_plan> mixed_dp(const C& costs, std::int64_t slots,
                                   const mixed_dp_options& opt = {},
                                   const detail::deadline& dl = detail::deadline(0)) {
  const int n = costs.size();
  const std::int64_t m = std::max<std::int64_t>(slots, 0);
  const std::int64_t dmin = std::clamp<std::int64_t>(opt.delta_min, 0, 1);
  detail::mixed_table t(n, m);
  detail::deadline_poll poll(dl);
  if (n == 0) return t.plan();
  auto report = [&](double f) {
    if (opt.progress) opt.progress(f);
  };
  if (opt.search == mixed_search::exact) {
    std::vector<double> f(static_cast<std::size_t>(m + 1));
    std::vector<segment_mode> mode(f.size());
    std::vector<std::int64_t> drops;
    for (int i = 1; i <= n; ++i) {
      for (int j = 0; j < i; ++j) {
        // F(j,i,.), made nonincreasing (a segment may use less than its share), and where it
        // drops.
        drops.clear();
        double prev = detail::mixed_inf;
        segment_mode prev_mode = segment_mode::planned;
        for (std::int64_t d = dmin; d <= m; ++d) {
          const auto [v, md] = detail::mixed_f(costs, j, i, d);
          if (v < prev) {
            drops.push_back(d);
            prev = v;
            prev_mode = md;
          }
          f[static_cast<std::size_t>(d)] = prev;
          mode[static_cast<std::size_t>(d)] = prev_mode;
        }
        for (std::int64_t k = dmin; k <= m; ++k)
          for (std::int64_t d : drops) {
            if (d > k) break;
            const double v = t.opt(j, k - d) + f[static_cast<std::size_t>(d)];
            t.offer(i, k, v, j, d, mode[static_cast<std::size_t>(d)],
                    f[static_cast<std::size_t>(d)]);
          }
        if (poll.passed((m + 1) * (1 + static_cast<std::int64_t>(drops.size())))) return {};
      }
      report(static_cast<double>(i) * i / (static_cast<double>(n) * n));
    }
    return t.plan();
  }
  // The accelerated searches fill budget layers in increasing k: Opt(., k) reads only budgets
  // below k (delta >= 1), or k itself at delta = 0 through Opt(0, k) = 0 alone.
  std::vector<std::int64_t> least(static_cast<std::size_t>(n + 1), m + 1);  // Opt(j,.) finite
  least[0] = 0;
  for (std::int64_t k = 0; k <= m; ++k) {
    if (opt.search == mixed_search::dc) {
      for (std::int64_t d = std::max<std::int64_t>(dmin, 0); d <= k; ++d) {
        if (d == 0) continue;  // delta = 0 reads Opt(., k), not yet final: exact pass below
        auto eval = [&](int j, int i) {
          return t.opt(j, k - d) + detail::mixed_f(costs, j, i, d).first;
        };
        auto take = [&](int i, int j) {
          const auto [fv, md] = detail::mixed_f(costs, j, i, d);
          t.offer(i, k, t.opt(j, k - d) + fv, j, d, md, fv);
        };
        detail::mixed_dc(1, n, 0, n - 1, eval, take);
        if (poll.passed(static_cast<std::int64_t>(n) * 16)) return {};
      }
    } else {
      // c_k(j,i) = min_delta Opt(j, k-delta) + F(j,i,delta), delta by ternary search between
      // the first share where F is finite and the last where Opt(j, .) is.
      struct best_split {
        double v = detail::mixed_inf;
        std::int64_t d = 0;
      };
      auto split = [&](int j, int i) -> best_split {
        const std::int64_t lo0 = detail::mixed_first_finite(costs, j, i, std::int64_t{1}, k);
        const std::int64_t hi0 = k - least[static_cast<std::size_t>(j)];
        if (lo0 > hi0) return {};
        auto phi = [&](std::int64_t d) {
          return t.opt(j, k - d) + detail::mixed_f(costs, j, i, d).first;
        };
        std::int64_t lo = lo0, hi = hi0;
        while (hi - lo > 2) {
          const std::int64_t m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
          const double p1 = phi(m1), p2 = phi(m2);
          if (p1 < p2)
            hi = m2 - 1;
          else if (p1 > p2)
            lo = m1 + 1;
          else {
            lo = m1;
            hi = m2;
          }
        }
        // The ends too: F and Opt are steps, whose plateaus a ternary search cannot see across
        // (the whole share to the segment is often the best, and never costs a search).
        best_split b;
        for (std::int64_t d : {lo0, hi0})
          if (const double v = phi(d); v < b.v) b = {v, d};
        for (std::int64_t d = lo; d <= hi; ++d)
          if (const double v = phi(d); v < b.v || (v == b.v && d < b.d)) b = {v, d};
        return b;
      };
      auto eval = [&](int j, int i) { return split(j, i).v; };
      auto take = [&](int i, int j) {
        const best_split b = split(j, i);
        const auto [fv, md] = detail::mixed_f(costs, j, i, b.d);
        t.offer(i, k, b.v, j, b.d, md, fv);
      };
      detail::mixed_dc(1, n, 0, n - 1, eval, take);
      if (poll.passed(static_cast<std::int64_t>(n) * 64)) return {};
    }
    // delta = 0 (delta_min 0): a segment of no memory after a prefix of the same budget, in
    // increasing i (Opt(j,k) for j < i is then final for this pass).
    if (dmin == 0)
      for (int i = 1; i <= n; ++i)
        for (int j = 0; j < i; ++j) {
          const auto [fv, md] = detail::mixed_f(costs, j, i, 0);
          t.offer(i, k, t.opt(j, k) + fv, j, 0, md, fv);
        }
    for (int i = 1; i <= n; ++i)
      if (least[static_cast<std::size_t>(i)] > m && t.opt(i, k) < detail::mixed_inf)
        least[static_cast<std::size_t>(i)] = k;
    report(static_cast<double>(k + 1) / static_cast<double>(m + 1));
  }
  return t.plan();
}

// --- the paper's two-mode operator chain -------------------------------------------------------

/// The two-mode operator chain of [MixedMode] in its simplest exact form (docs/mixed-mode.md,
/// "The operator model"): per op its time in graph mode (fused) and in eager mode, the slots of
/// its output the backward keeps, the time to recompute that output eagerly, and whether it is
/// a control-flow op (which no graph segment may hold); a cost per segment of each mode.
struct mixed_op_chain {
  std::vector<double> graph_time;
  std::vector<double> eager_time;
  std::vector<std::int64_t> kept_slots;
  std::vector<double> recompute_time;
  std::vector<char> control_flow;  ///< empty: none
  double graph_segment_time = 0;   ///< kappa_G: per graph segment (launch, compilation)
  double eager_segment_time = 0;   ///< kappa_E: per eager segment (a mode switch)
};

/// mixed_op_chain's segment costs, O(1) each from prefix sums. G(j,i,d): every output of the
/// segment kept, graph times, if they fit d and no control flow is inside; E(j,i,d): eager
/// times, only the last output kept and the others recomputed once, if that output fits d.
class mixed_op_costs {
 public:
  /// Checks the chain: equal lengths, times finite and >= 0, slots >= 0.
  static result<mixed_op_costs> make(const mixed_op_chain& c) {
    const std::size_t n = c.graph_time.size();
    auto bad = [](const std::string& what) {
      return error{status::invalid_problem, "mixed_op_chain: " + what, {}};
    };
    if (c.eager_time.size() != n || c.kept_slots.size() != n || c.recompute_time.size() != n ||
        (!c.control_flow.empty() && c.control_flow.size() != n))
      return bad("graph_time has " + std::to_string(n) +
                 " ops; eager_time, kept_slots, recompute_time (and control_flow, unless empty) "
                 "need as many");
    auto ok = [](double v) { return v >= 0 && v < std::numeric_limits<double>::infinity(); };
    for (std::size_t l = 0; l < n; ++l) {
      const std::string at = " of op " + std::to_string(l);
      if (!ok(c.graph_time[l])) return bad("graph_time" + at + " is not a finite time >= 0");
      if (!ok(c.eager_time[l])) return bad("eager_time" + at + " is not a finite time >= 0");
      if (!ok(c.recompute_time[l]))
        return bad("recompute_time" + at + " is not a finite time >= 0");
      if (c.kept_slots[l] < 0) return bad("kept_slots" + at + " is negative");
    }
    if (!ok(c.graph_segment_time) || !ok(c.eager_segment_time))
      return bad("the per-segment times must be finite and >= 0");
    mixed_op_costs out;
    out.c_ = c;
    out.tf_.assign(n + 1, 0);
    out.te_.assign(n + 1, 0);
    out.rc_.assign(n + 1, 0);
    out.a_.assign(n + 1, 0);
    out.cf_.assign(n + 1, 0);
    for (std::size_t l = 0; l < n; ++l) {
      out.tf_[l + 1] = out.tf_[l] + c.graph_time[l];
      out.te_[l + 1] = out.te_[l] + c.eager_time[l];
      out.rc_[l + 1] = out.rc_[l] + c.recompute_time[l];
      out.a_[l + 1] = out.a_[l] + c.kept_slots[l];
      out.cf_[l + 1] = out.cf_[l] + (!c.control_flow.empty() && c.control_flow[l] ? 1 : 0);
    }
    return out;
  }
  [[nodiscard]] int size() const noexcept { return static_cast<int>(c_.graph_time.size()); }
  [[nodiscard]] double cost(segment_mode m, int j, int i, std::int64_t d) const {
    const auto J = static_cast<std::size_t>(j), I = static_cast<std::size_t>(i);
    if (m == segment_mode::planned) {
      if (cf_[I] != cf_[J] || a_[I] - a_[J] > d) return detail::mixed_inf;
      return c_.graph_segment_time + (tf_[I] - tf_[J]);
    }
    if (c_.kept_slots[I - 1] > d) return detail::mixed_inf;
    return c_.eager_segment_time + (te_[I] - te_[J]) + (rc_[I - 1] - rc_[J]);
  }

 private:
  mixed_op_costs() = default;
  mixed_op_chain c_;
  std::vector<double> tf_, te_, rc_;
  std::vector<std::int64_t> a_, cf_;
};

}  // namespace remat
