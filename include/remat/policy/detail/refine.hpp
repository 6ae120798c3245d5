#pragma once
// The discretised solve shared by rotor and rotor_floating: run the DP at S slots; when the
// budget is at least the exact minimum but rounding makes it infeasible at S, refine S (x4 each
// time, up to one slot per byte, where the DP is exact and hence feasible) while the table
// stays small (refinement_table_bytes). Past that, the budget is within rounding of the
// minimum: the caller's fallback (a schedule that fits the exact minimum) is returned.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/store_all.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

/// How rotor and rotor_floating reached a plan: their solve_detailed(), for tools that report
/// what a plan is worth (remat-plan's "proven optimal" line).
struct chain_dp_solution {
  enum class method {
    store_all,       ///< store-all fits the budget: the ideal time, optimal
    dp,              ///< the DP's optimum at `slots` (optimal when exact_sizes)
    minimum_memory,  ///< the budget is within rounding of the minimum at every affordable slot
                     ///< count: the fastest minimum-memory schedule, valid but not proven optimal
  };
  schedule program;
  method how = method::dp;
  std::int64_t slots = 0;    ///< how == dp: the slots the DP ran at (refined from the knob's)
  bool exact_sizes = false;  ///< how == dp: one slot per byte, the plan is optimal
  /// No schedule of the policy's search space is faster.
  [[nodiscard]] bool optimal() const {
    return how == method::store_all || (how == method::dp && exact_sizes);
  }
};

}  // namespace remat

namespace remat::detail {

/// Dp: constructible from a discrete_chain; fill(deadline, progress) -> bool (false: time out);
/// value() -> double (infinity when infeasible); reconstruct() -> decisions;
/// static feasible(discrete_chain, deadline) -> bool: whether value() will be finite, from the
/// min-memory recurrence on the same sizes (no table), so that refinement skips the fills of
/// discretisations that cannot plan.
/// cells(n, w): the table's size in doubles for a chain of n stages and rows of w slots.
/// minimum() -> optional<bytes>: the policy's exact minimum budget, nullopt when `dl` passed
/// first (then `advice` ends the time_limit message). It is O(N^3) or worse, so the size of
/// the first table is checked before it.
/// fallback() -> optional<decisions>: a schedule that fits the minimum (called only after
/// minimum()).
/// Target: where the decisions become a program: store_all_peak() -> bytes, the peak of
/// storing everything (every F^all with option 0, then every B), and finish(decisions) ->
/// result<schedule>, the program checked by the referee (chain_target: the chain's graph).
/// with_options: the DP chooses among every stage's cost set (RK-Rotor), else option 0.
/// The deadline is checked by minimum(), Dp::feasible and Dp::fill, every few milliseconds.
/// outcome (optional): how the plan was reached (chain_dp_solution's method, slots, exact_sizes).
inline constexpr std::int64_t refinement_table_bytes = std::int64_t{256} << 20;

/// The chain policies' target: their decisions lowered onto the chain's graph (built once).
struct chain_target {
  std::string_view policy;
  const chain& c;
  bytes budget;
  graph g = chain_graph(c);
  [[nodiscard]] bytes store_all_peak() const { return peak_of(g, store_all::program(c)); }
  [[nodiscard]] result<schedule> finish(decisions d) const {
    return detail::finish(policy, g, budget, std::move(d.ops), d.time);
  }
};

template <class Dp, class Target, class Cells, class Minimum, class Fallback>
result<schedule> solve_discretized(std::string_view policy, const chain& c, bytes budget,
                                   std::int64_t slots, std::int64_t max_table_bytes,
                                   const deadline& dl, const std::function<void(double)>& progress,
                                   Cells cells, Minimum minimum_of, std::string_view advice,
                                   Fallback fallback, const Target& target,
                                   bool with_options = false,
                                   chain_dp_solution* outcome = nullptr) {
  auto reached = [&](chain_dp_solution::method how, std::int64_t s = 0, bool exact = false) {
    if (outcome) *outcome = {{}, how, s, exact};
  };
  // Storing everything costs sum(u_F + u_B), a lower bound for any schedule: when it fits, it
  // is optimal, and the rounding of a coarse discretisation must not hide it.
  if (target.store_all_peak() <= budget) {
    if (progress) progress(1.0);
    reached(chain_dp_solution::method::store_all);
    return target.finish({store_all::program(c), {}, c.ideal_time()});
  }
  const std::int64_t first = slots <= 0 ? budget : std::min<std::int64_t>(slots, budget);
  auto table_bytes = [&](const discrete_chain& d) {
    // In doubles: with a budget near 2^63 neither dp_budget + 1 nor the size fits in bytes.
    return cells(d.n, static_cast<double>(std::max<std::int64_t>(d.dp_budget, 0)) + 1.0) * 8.0;
  };
  auto too_large = [&](std::int64_t s, double need) {
    const std::string need_text = need < 0x1p62 ? format_bytes(static_cast<bytes>(need))
                                                : "more than " + format_bytes(bytes{1} << 62);
    return std::string(policy) + ": " + std::to_string(s) + " slots would need a DP table of " +
           need_text + ", over max_table_bytes (" + format_bytes(max_table_bytes) + ")";
  };
  // The first table's size, before the minimum (O(N^3) or more) is computed: a chain far too
  // long for the slots is refused at once.
  if (const double need = table_bytes(discretize(c, budget, first, with_options));
      need > static_cast<double>(max_table_bytes))
    return error{status::invalid_problem,
                 too_large(first, need) + "; use fewer slots (or raise max_table_bytes)",
                 {}};
  const std::optional<bytes> min_budget = minimum_of();
  if (!min_budget)
    return time_limit_reached(policy, dl, "while computing the minimum memory", advice);
  const bytes minimum = *min_budget;
  if (budget < minimum) return budget_too_small(policy, c, budget, minimum);
  // Each refinement fills a new table from scratch; the user sees one solve whose fraction
  // never goes back, and ends at 1.
  double shown = 0;
  std::function<void(double)> report;
  if (progress)
    report = [&](double f) {
      if (f > shown) progress(shown = std::min(f, 1.0));
    };
  for (std::int64_t s = first;;) {
    const discrete_chain d = discretize(c, budget, s, with_options);
    const double need = table_bytes(d);
    if (s != first &&
        need > static_cast<double>(std::min(max_table_bytes, refinement_table_bytes))) {
      // No affordable discretisation leaves a plan: the budget is within rounding of the
      // minimum. The fallback fits the exact minimum, hence the budget.
      if (std::optional<decisions> fb = fallback()) {
        if (progress && shown < 1.0) progress(1.0);
        reached(chain_dp_solution::method::minimum_memory);
        return target.finish(std::move(*fb));
      }
      if (dl.passed())
        return time_limit_reached(policy, dl, "while computing a fallback schedule", advice);
    }
    if (need > static_cast<double>(max_table_bytes)) {
      std::string msg = too_large(s, need);
      if (s == first)
        return error{
            status::invalid_problem, msg + "; use fewer slots (or raise max_table_bytes)", {}};
      return error{status::infeasible,
                   msg + "; at " + std::to_string(first) +
                       " slots the rounding of sizes leaves no schedule "
                       "for a budget this close to the minimum (" +
                       std::to_string(minimum) +
                       " bytes): raise the budget a little, or raise max_table_bytes",
                   {}};
    }
    if (d.dp_budget >= 0 && Dp::feasible(d, dl)) {
      Dp dp(d);
      if (!dp.fill(dl, report))
        return time_limit_reached(
            policy, dl, "while filling the table (" + std::to_string(s) + " slots)", advice);
      if (dp.value() < std::numeric_limits<double>::infinity()) {
        if (progress && shown < 1.0) progress(1.0);
        reached(chain_dp_solution::method::dp, s, d.exact);
        return target.finish(dp.reconstruct());
      }
    }
    if (dl.passed()) return time_limit_reached(policy, dl, "while refining the slots", advice);
    if (d.exact) break;
    s = std::min<std::int64_t>(s * 4, budget);
  }
  return error{status::solver_error,
               std::string(policy) +
                   ": no schedule at exact sizes although the budget is above the "
                   "minimum (a bug in remat; please report it with the chain)",
               {}};
}

}  // namespace remat::detail
