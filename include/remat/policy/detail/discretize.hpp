#pragma once
// Memory discretisation of the Rotor dynamic programs [Shilova21, §2.4.2]: the budget M is split
// into S slots, every size rounded up, q(x) = ceil(x*S/M), so every discrete-feasible schedule
// fits in bytes. Rounded down instead, q(x) = floor(x*S/M), every schedule that fits in bytes is
// discrete-feasible (a sum of floors is at most the floor of the sum), so the DP's value is a
// lower bound on the exact optimum: the two bracket it. Exact: the sizes in units of their
// greatest common divisor g, S = floor(M/g), one slot per g bytes. docs/chain-dps.md §7.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>

// q(x) needs the exact product x * S of two sizes of up to 2^63 bytes: 128 bits. __int128 is a
// GCC and Clang extension on 64-bit targets, the compilers remat supports (README, "Compilers");
// MSVC has no 128-bit integer type.
#if !defined(__SIZEOF_INT128__)
#error \
    "remat needs a compiler with __int128, GCC or Clang on a 64-bit target (README, Compilers): <remat/policy/detail/discretize.hpp> rounds sizes to slots with 128-bit products"
#endif

namespace remat::detail {

/// One way to run a stage's F^all and B (chain.hpp, "Cost sets"), in slots.
struct discrete_option {
  double uf = 0, ub = 0;
  std::int64_t abar = 0, of_all = 0, ob = 0;
};

/// The chain's sizes in slots and times, 1-based as in the thesis (index 0 = the input).
/// abar/of_all/ob/uf/ub are option 0 (the stage's own); uf and of are also F^ck's and F^none's.
struct discrete_chain {
  int n = 0;
  std::int64_t slots = 0;      ///< S
  std::int64_t dp_budget = 0;  ///< S - q(a_0)
  bool exact = false;          ///< one slot per `unit` bytes, every size a whole number of slots
  std::int64_t unit = 1;       ///< exact: the bytes of a slot (the sizes' common divisor)
  std::vector<std::int64_t> a, abar, delta, of, of_all, ob;  // of/of_all/ob: index 1..n
  /// q(abar_k - a_k): what stays of abar_k when its a_k is offloaded (rounded on its own, not
  /// q(abar_k) - q(a_k), which may be smaller than the bytes).
  std::vector<std::int64_t> context;
  std::vector<double> uf, ub;  // index 1..n
  /// index 1..n: the options the DP chooses F_s^all / B_s among; options[s][0] is the stage's
  /// own, the others its cost set when discretize() was asked for them (RK-Rotor).
  std::vector<std::vector<discrete_option>> options;

  /// m_all(s,t): memory F_s^all and B_s need besides the input ([Shilova21, §2.3.3]),
  /// with option o (docs/rockmate.md: the forward with delta_t alive, the backward with
  /// delta_s and delta_{s-1}).
  [[nodiscard]] std::int64_t m_all(int s_, int t_, const discrete_option& o) const {
    const auto s = static_cast<std::size_t>(s_), t = static_cast<std::size_t>(t_);
    return std::max(delta[t] + o.abar + o.of_all, o.abar + delta[s] + delta[s - 1] + o.ob);
  }
  [[nodiscard]] std::int64_t m_all(int s, int t) const {
    return m_all(s, t, options[static_cast<std::size_t>(s)][0]);
  }
  /// max over h in [s, t] of M_F∅(s,t,h) without the delta_t term (add delta[t]).
  [[nodiscard]] std::int64_t f_none(int s_, int h_) const {
    const auto s = static_cast<std::size_t>(s_), h = static_cast<std::size_t>(h_);
    return h == s ? a[s] + of[s] : a[h - 1] + a[h] + of[h];
  }
};

/// Whether the DP chooses among every stage's cost set (RK-Rotor) or runs its own F^all / B.
enum class cost_sets { own, all };

/// Which way sizes are rounded to slots: up (every plan fits in bytes) or down (the DP's value
/// is a lower bound on the optimum at exact sizes; its plan may not fit).
enum class rounding { up, down };

/// Calls f(x) on every size the DP reads (the input's too), with the options of `costs`.
template <class F>
void for_each_size(const chain& c, cost_sets costs, F&& f) {
  for (int k = 0; k <= c.length(); ++k) {
    f(c.a(k));
    f(c.abar(k));
    f(c.abar(k) - c.a(k));
    f(c.delta(k));
    if (k == 0) continue;
    f(c.of(k));
    f(c.of_all(k));
    f(c.ob(k));
    const int count = costs == cost_sets::all ? c.option_count(k) : 1;
    for (int o = 0; o < count; ++o) {
      const stage_option x = c.option(k, o);
      f(x.saved_bytes);
      f(x.forward_overhead_bytes);
      f(x.backward_overhead_bytes);
    }
  }
}

/// The greatest common divisor of the chain's sizes (1 when all are 0): the bytes of a slot at
/// exact sizes. Tensors of whole elements, often of whole pages, make it large, and the exact
/// table small.
inline std::int64_t size_unit(const chain& c, cost_sets costs = cost_sets::own) {
  std::int64_t g = 0;
  for_each_size(c, costs, [&](bytes x) { g = std::gcd(g, x); });
  return g > 0 ? g : 1;
}

/// The slot count at which discretize() is exact: floor(budget / size_unit).
inline std::int64_t exact_slots(const chain& c, bytes budget, cost_sets costs = cost_sets::own) {
  return budget / size_unit(c, costs);
}

/// q(x) = ceil(x * S / M) (or floor, rounding::down), or x / g at exact sizes (slots <= 0 or at
/// least exact_slots()). With cost_sets::all, every stage offers its whole cost set to the DP
/// (RK-Rotor); without, its own F^all / B only (Rotor).
inline discrete_chain discretize(const chain& c, bytes budget, std::int64_t slots,
                                 cost_sets costs = cost_sets::own, rounding way = rounding::up) {
  discrete_chain d;
  d.n = c.length();
  const std::int64_t unit = budget > 0 ? size_unit(c, costs) : 1;
  d.exact = slots <= 0 || slots >= budget / unit;
  d.unit = d.exact ? unit : 1;
  d.slots = d.exact ? budget / unit : slots;
  auto q = [&](bytes x) -> std::int64_t {
    if (d.exact) return x / d.unit;
    if (x == 0) return 0;
    __extension__ using i128 = __int128;
    const i128 num = static_cast<i128>(x) * d.slots;
    return static_cast<std::int64_t>(way == rounding::up ? (num + budget - 1) / budget
                                                         : num / budget);
  };
  const auto sz = static_cast<std::size_t>(d.n + 1);
  d.a.resize(sz);
  d.abar.resize(sz);
  d.delta.resize(sz);
  d.context.resize(sz);
  d.of.assign(sz, 0);
  d.of_all.assign(sz, 0);
  d.ob.assign(sz, 0);
  d.uf.assign(sz, 0.0);
  d.ub.assign(sz, 0.0);
  d.options.assign(sz, {});
  for (int k = 0; k <= d.n; ++k) {
    const auto i = static_cast<std::size_t>(k);
    d.a[i] = q(c.a(k));
    d.abar[i] = q(c.abar(k));
    d.context[i] = q(c.abar(k) - c.a(k));
    d.delta[i] = q(c.delta(k));
    if (k > 0) {
      d.of[i] = q(c.of(k));
      d.of_all[i] = q(c.of_all(k));
      d.ob[i] = q(c.ob(k));
      d.uf[i] = c.uf(k);
      d.ub[i] = c.ub(k);
      const int count = costs == cost_sets::all ? c.option_count(k) : 1;
      for (int o = 0; o < count; ++o) {
        const stage_option x = c.option(k, o);
        d.options[i].push_back({x.forward_time, x.backward_time, q(x.saved_bytes),
                                q(x.forward_overhead_bytes), q(x.backward_overhead_bytes)});
      }
    }
  }
  d.dp_budget = d.slots - d.a[0];
  return d;
}

/// The chain in exact bytes (one slot per byte), for the minimum-memory recurrences.
inline discrete_chain exact_sizes(const chain& c, cost_sets costs = cost_sets::own) {
  return discretize(c, 0, 0, costs);
}

/// What a chain DP decided: its ops in the chain notation, the option of each (0 for the
/// forwards that are not F^all, and for every op when the DP had no cost sets; empty = all 0),
/// and the time the DP claims.
struct decisions {
  std::vector<chain_op> ops;
  std::vector<int> options;
  seconds time = 0;
};

}  // namespace remat::detail
