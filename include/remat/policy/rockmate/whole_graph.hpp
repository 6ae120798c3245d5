#pragma once
// Rockmate's plans of the whole graph, for graphs that do not cut into small blocks: where one
// block holds half of the graph's forward ops or more, RK-Rotor's choice among that block's
// options is little better than the inner policy on the whole graph, and can be worse (its
// options are made at a grid of budgets of the block alone). The inner policy's relaxation
// plans the whole graph at a grid of budgets that does not depend on the asked one, and
// rockmate returns the fastest of RK-Rotor's plan and those that fit: a larger budget keeps
// every plan a smaller one had. docs/rockmate.md, "Graphs that do not cut into small blocks".

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include <remat/policy/checkmate/bounds.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/parallel_for.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::detail {

/// One plan of the whole graph: the budget it was made for, its simulated peak, its program.
struct whole_graph_plan {
  bytes budget = 0, peak = 0;
  schedule program;
};

/// Whether rockmate also plans the whole graph: some block of `cut` holds at least half of the
/// graph's forward ops.
inline bool needs_whole_graph(const std::vector<std::vector<int>>& cut) {
  std::size_t forwards = 0, largest = 0;
  for (const auto& fw : cut) {
    forwards += fw.size();
    largest = std::max(largest, fw.size());
  }
  return cut.size() > 1 && 2 * largest >= forwards;
}

/// The policy as its relaxation: `relax` set where it has one (checkmate's LP relaxation and
/// rounding), without falling back on the exact solve where no rounding fits; else the policy
/// itself.
template <class P>
P relaxation_of(P p) {
  if constexpr (requires { p.relax; }) p.relax = true;
  if constexpr (requires { p.exact_fallback; }) p.exact_fallback = false;
  return p;
}

/// `policy` on the whole graph at `points` budgets evenly from the store-all peak down to the
/// graph's memory floor (both included), on `threads`; the plans it found that the simulator
/// accepts, in the order of the budgets (from the largest). Deterministic when the policy is.
template <class P>
std::vector<whole_graph_plan> plan_whole_graph(const graph& g, const P& policy, int points,
                                               int threads, const deadline& dl) {
  const schedule all{store_all_program(g), 0, 0};
  const bytes hi = sim::simulate(g, all, {.record_timeline = false}).peak;
  const bytes lo = std::min(hi, memory_floor(g));
  const int n = std::max(points, 1);
  std::vector<std::optional<whole_graph_plan>> found(static_cast<std::size_t>(n));
  parallel_for(found.size(), threads, [&](std::size_t i) {
    if (dl.passed()) return;
    const bytes b = evenly_down(hi, lo, static_cast<int>(i), n);
    P p = policy;
    if constexpr (requires { p.time_limit; })
      if (dl.on()) p.time_limit = std::max(1e-3, dl.limit() - dl.elapsed());
    auto s = p.solve(g, b);
    if (!s) return;
    const auto r = sim::simulate(g, *s, {.budget = b, .record_timeline = false});
    if (r.valid) found[i] = whole_graph_plan{b, r.peak, std::move(*s)};
  });
  std::vector<whole_graph_plan> out;
  for (auto& f : found)
    if (f) out.push_back(std::move(*f));
  return out;
}

/// The fastest of `plans` that fits `budget` (the first among equals), or nullptr.
inline const whole_graph_plan* fastest_within(const std::vector<whole_graph_plan>& plans,
                                              bytes budget) {
  const whole_graph_plan* best = nullptr;
  for (const auto& p : plans)
    if (p.peak <= budget && (!best || p.program.predicted_time < best->program.predicted_time))
      best = &p;
  return best;
}

}  // namespace remat::detail
