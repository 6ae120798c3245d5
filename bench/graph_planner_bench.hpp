#pragma once
// What the graph planners' benchmarks (bench_rockmate, bench_hiremate) share: a graph with its
// store-all peak and ideal time, a plan's counters, a policy's minimum budget, the budgets of
// a quality table, checkmate's plans.

#include <functional>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/core/result.hpp>
#include <remat/milp/cbc.hpp>
#include <remat/policy/checkmate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat_bench {

using remat::bytes;

struct problem {
  remat::graph g;
  bytes peak = 0;    ///< store-all's
  double ideal = 0;  ///< every op once
};

inline problem make_problem(remat::graph g) {
  problem p;
  p.g = std::move(g);
  p.peak =
      remat::sim::simulate(p.g, {remat::store_all_program(p.g), 0, 0}, {.record_timeline = false})
          .peak;
  p.ideal = p.g.ideal_time();
  return p;
}

/// Counters budget (a fraction of store-all's peak), overhead (predicted makespan / ideal - 1,
/// or -1 without a plan) and peak (a fraction of store-all's).
inline void report(benchmark::State& st, const problem& p, bytes budget,
                   const remat::result<remat::schedule>& s) {
  st.counters["budget"] = static_cast<double>(budget) / static_cast<double>(p.peak);
  st.counters["overhead"] = s ? s->predicted_time / p.ideal - 1 : -1;
  if (s) st.counters["peak"] = static_cast<double>(s->predicted_peak) / static_cast<double>(p.peak);
}

/// The minimum budget a policy reports (budget_too_small's) when asked for 0 bytes, or -1.
inline bytes minimum_of(const std::function<remat::result<remat::schedule>(bytes)>& solve) {
  const auto r = solve(0);
  return r.code() == remat::status::budget_too_small ? r.err().minimum_budget.value_or(-1) : -1;
}

/// checkmate<cbc>'s plan in 600 s: relaxed (LP and rounding) or exact (counter optimal = 1 when
/// proven).
inline remat::result<remat::schedule> checkmate_plan(benchmark::State& st, const remat::graph& g,
                                                     bytes budget, bool relax) {
  if (relax)
    return remat::checkmate<remat::milp::cbc>{.time_limit = 600, .relax = true}.solve(g, budget);
  auto d = remat::checkmate<remat::milp::cbc>{.time_limit = 600}.solve_detailed(g, budget);
  if (!d) return d.err();
  st.counters["optimal"] = d->optimal;
  return d->program;
}

/// Budget k of five (k = 0..4) evenly spaced from `minimum` to 90 % of store-all's peak, the
/// minimum made once per key (a model) by `make_minimum`.
template <class Key, class F>
bytes quality_budget(const problem& p, const Key& key, int k, F&& make_minimum) {
  static std::vector<std::pair<Key, bytes>> minima;
  bytes lo = -1;
  for (const auto& [n, m] : minima)
    if (n == key) lo = m;
  if (lo < 0) {
    lo = make_minimum();
    minima.emplace_back(key, lo);
  }
  const bytes hi = p.peak * 9 / 10;
  return lo + (hi - lo) * k / 4;
}

}  // namespace remat_bench
