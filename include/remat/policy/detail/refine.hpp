#pragma once
// The discretised solve shared by rotor, rotor_floating and rockmate's RK-Rotor: run the DP at
// S slots with sizes rounded up (a plan that fits) and, when it plans more than `tolerance` above
// the ideal time, again with sizes rounded down (a lower bound on the optimum at exact sizes).
// While the plan is more than `tolerance` above the bound, or rounding leaves no plan although the
// budget is at least the exact minimum, refine S (x4 each time, up to exact sizes: one slot per
// common divisor of the sizes, where the DP is exact) while the table stays small
// (refinement_table_bytes where rounding leaves no plan, gap_refinement_table_bytes for the gap
// alone). Past that, the best plan found is returned with its bound; without one the budget is
// within rounding of the minimum, and the caller's fallback (a schedule that fits the exact
// minimum) is returned. docs/chain-dps.md, "Memory slots".

#include <algorithm>
#include <concepts>
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
#include <remat/policy/details.hpp>
#include <remat/policy/solution.hpp>
#include <remat/policy/store_all.hpp>

namespace remat {}  // namespace remat

namespace remat::detail {

/// A discretised chain DP's table: built from a discrete_chain, filled under a deadline (false:
/// the deadline passed first), its value (infinity when infeasible) and the decisions that reach
/// it. feasible(d, dl) tells from the minimum-memory recurrence on the same sizes (no table)
/// whether value() will be finite, so that refinement skips the fills that cannot plan.
template <class Dp>
concept DiscretizedDp = std::constructible_from<Dp, const discrete_chain&> &&
    requires(Dp& dp, const Dp& cdp, const discrete_chain& d, const deadline& dl,
             const std::function<void(double)>& report) {
  { dp.fill(dl, report) } -> std::same_as<bool>;
  { cdp.value() } -> std::convertible_to<double>;
  { cdp.reconstruct() } -> std::same_as<decisions>;
  { Dp::feasible(d, dl) } -> std::same_as<bool>;
};

/// Where a DP's decisions become a program: the peak of storing everything (every F^all with
/// option 0, then every B), and the program made of decisions, checked by the referee.
template <class T>
concept DecisionTarget = requires(const T& t, decisions d) {
  { t.store_all_peak() } -> std::convertible_to<bytes>;
  { t.finish(std::move(d)) } -> std::same_as<result<schedule>>;
};

/// What solve_discretized is asked.
struct discretized_request {
  std::string_view policy;  ///< for messages
  const chain* problem = nullptr;
  bytes budget = 0;
  std::int64_t slots = 0;  ///< the knob: S, or 0 for exact sizes
  std::int64_t max_table_bytes = 0;
  /// The plan may be this much (relative) above the lower bound before the slots are refined.
  double tolerance = 0.01;
  cost_sets costs = cost_sets::own;
  /// The threads a table may be filled on (0: the hardware's), for a Dp built from
  /// (discrete_chain, tile, threads) (rotor_dp); the others fill on one.
  int threads = 1;
  const deadline* limit = nullptr;
  std::function<void(double)> progress;
  /// The table's size in doubles for a chain of n stages and rows of w slots.
  std::function<double(int n, double w)> table_cells;
  /// The policy's exact minimum budget, nullopt when the deadline passed first. It is O(N^3) or
  /// worse, so the size of the first table is checked before it.
  std::function<std::optional<bytes>()> minimum;
  /// A schedule that fits the minimum (called only after minimum()), nullopt if none fits.
  std::function<std::optional<decisions>()> fallback;
  /// How to avoid the time limit, ending its message.
  std::string_view time_limit_advice;
};

/// Past this table size the refinement stops and the fallback is taken.
inline constexpr std::int64_t refinement_table_bytes = std::int64_t{256} << 20;
/// Past this table size the refinement for the gap alone stops (the plan is returned with its
/// bound): a table of 32 MiB fills in about a tenth of a second, one of 256 MiB in a second.
inline constexpr std::int64_t gap_refinement_table_bytes = std::int64_t{32} << 20;

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

template <DiscretizedDp Dp, DecisionTarget Target>
result<solution<chain_dp_details>> solve_discretized(const discretized_request& r,
                                                     const Target& target) {
  using method = chain_dp_details::method;
  const chain& c = *r.problem;
  const bytes budget = r.budget;
  const deadline& dl = *r.limit;
  // `lower`: a lower bound on the optimum at exact sizes (0: none), put in the solution's bound;
  // a plan proven optimal is its own bound.
  auto done = [&](result<schedule> s, chain_dp_details how,
                  double lower = 0) -> result<solution<chain_dp_details>> {
    if (!s) return s.err();
    solution<chain_dp_details> out;
    out.program = std::move(*s);
    out.details = how;
    out.optimal = how.how == method::store_all || (how.how == method::dp && how.exact_sizes);
    if (out.optimal) lower = out.program.predicted_time;
    if (lower > 0) out.bound = std::min(lower, out.program.predicted_time);
    return out;
  };
  // Storing everything costs sum(u_F + u_B), a lower bound for any schedule: when it fits, it
  // is optimal, and the rounding of a coarse discretisation must not hide it.
  if (target.store_all_peak() <= budget) {
    if (r.progress) r.progress(1.0);
    return done(target.finish({store_all::program(c), {}, c.ideal_time()}), {method::store_all});
  }
  const std::int64_t exact_at = exact_slots(c, budget, r.costs);
  const std::int64_t first = r.slots <= 0 ? exact_at : std::min<std::int64_t>(r.slots, exact_at);
  auto table_bytes = [&](std::int64_t s) {
    const discrete_chain d = discretize(c, budget, s, r.costs);
    // In doubles: with a budget near 2^63 neither dp_budget + 1 nor the size fits in bytes.
    return r.table_cells(d.n, static_cast<double>(std::max<std::int64_t>(d.dp_budget, 0)) + 1.0) *
           8.0;
  };
  auto too_large = [&](std::int64_t s, double need) {
    const std::string need_text = need < 0x1p62 ? format_bytes(static_cast<bytes>(need))
                                                : "more than " + format_bytes(bytes{1} << 62);
    return std::string(r.policy) + ": " + std::to_string(s) + " slots would need a DP table of " +
           need_text + ", over max_table_bytes (" + format_bytes(r.max_table_bytes) + ")";
  };
  // The first table's size, before the minimum (O(N^3) or more) is computed: a chain far too
  // long for the slots is refused at once.
  if (const double need = table_bytes(first); need > static_cast<double>(r.max_table_bytes))
    return error{status::invalid_problem,
                 too_large(first, need) + "; use fewer slots (or raise max_table_bytes)",
                 {}};
  const std::optional<bytes> min_budget = r.minimum();
  if (!min_budget)
    return time_limit_reached(r.policy, dl, "while computing the minimum memory",
                              r.time_limit_advice);
  const bytes minimum = *min_budget;
  if (budget < minimum) return budget_too_small(r.policy, c, budget, minimum);
  // Each fill (rounded up, down, refined) starts a table from scratch; the user sees one solve
  // whose fraction never goes back, and ends at 1.
  double shown = 0;
  std::function<void(double)> report;
  if (r.progress)
    report = [&](double f) {
      if (f > shown) r.progress(shown = std::min(f, 1.0));
    };
  auto finished = [&] {
    if (r.progress && shown < 1.0) r.progress(1.0);
  };
  // The DP's value at s slots with sizes rounded `way`, and its decisions when asked; nullopt
  // when the deadline passed first.
  struct fill_result {
    double value = std::numeric_limits<double>::infinity();
    std::optional<decisions> plan;
  };
  auto run = [&](std::int64_t s, rounding way) -> std::optional<fill_result> {
    const discrete_chain d = discretize(c, budget, s, r.costs, way);
    fill_result out;
    if (d.dp_budget < 0 || !Dp::feasible(d, dl))
      return dl.passed() ? std::nullopt : std::optional(out);
    Dp dp = [&] {
      if constexpr (std::constructible_from<Dp, const discrete_chain&, int, int>)
        return Dp(d, 0, r.threads);
      else
        return Dp(d);
    }();
    if (!dp.fill(dl, report)) return std::nullopt;
    out.value = dp.value();
    if (way == rounding::up && out.value < std::numeric_limits<double>::infinity())
      out.plan = dp.reconstruct();
    return out;
  };
  // Every schedule runs each stage's backward once, after a forward_save with the same option:
  // the least sum of the two, over the stages, bounds every makespan from below (rotor: the
  // ideal time).
  const double ideal = [&] {
    const discrete_chain d = discretize(c, budget, first, r.costs);
    double sum = 0;
    for (int k = 1; k <= d.n; ++k) {
      double least = std::numeric_limits<double>::infinity();
      for (const discrete_option& o : d.options[static_cast<std::size_t>(k)])
        least = std::min(least, o.uf + o.ub);
      sum += least;
    }
    return sum;
  }();
  std::optional<decisions> best;  // the fastest plan found, at best_slots
  std::int64_t best_slots = 0;
  double lower = 0;  // the best lower bound found
  auto best_plan = [&] {
    finished();
    return done(target.finish(std::move(*best)), {method::dp, best_slots, false}, lower);
  };
  for (std::int64_t s = first;;) {
    const bool exact = s >= exact_at;
    const std::optional<fill_result> up = run(s, rounding::up);
    if (!up) {
      if (best) return best_plan();  // a plan, with the bound reached so far
      return time_limit_reached(r.policy, dl,
                                "while filling the table (" + std::to_string(s) + " slots)",
                                r.time_limit_advice);
    }
    if (up->plan && (!best || up->plan->time < best->time)) {
      best = std::move(up->plan);
      best_slots = s;
    }
    if (exact) {
      if (!up->plan) break;  // a bug: the exact minimum fits
      finished();
      return done(target.finish(std::move(*best)), {method::dp, exact_at, true});
    }
    if (best) {
      // Within the tolerance of the ideal time (always, with an infinite tolerance), the bound
      // of the DP with sizes rounded down is not needed: it would cost a second fill.
      if (best->time <= ideal * (1 + r.tolerance)) {
        lower = std::max(lower, ideal);
        return best_plan();
      }
      const std::optional<fill_result> down = run(s, rounding::down);
      if (!down) return best_plan();
      if (down->value < std::numeric_limits<double>::infinity())
        lower = std::max(lower, down->value);
      if (best->time <= lower * (1 + r.tolerance)) return best_plan();
    }
    if (dl.passed()) {
      if (best) return best_plan();
      return time_limit_reached(r.policy, dl, "while refining the slots", r.time_limit_advice);
    }
    const std::int64_t next = std::min<std::int64_t>(s * 4, exact_at);
    const double need = table_bytes(next);
    if (need <= static_cast<double>(std::min(r.max_table_bytes, best ? gap_refinement_table_bytes
                                                                     : refinement_table_bytes))) {
      s = next;
      continue;
    }
    // No affordable refinement: the best plan with its bound, or, with none, the budget is
    // within rounding of the minimum, and the fallback fits the exact minimum, hence the budget.
    if (best) return best_plan();
    if (std::optional<decisions> fb = r.fallback()) {
      // Its bound: the DP with sizes rounded down, which plans at any budget above the minimum.
      if (const std::optional<fill_result> down = run(s, rounding::down);
          down && down->value < std::numeric_limits<double>::infinity())
        lower = std::max(lower, down->value);
      finished();
      return done(target.finish(std::move(*fb)), {method::minimum_memory}, lower);
    }
    if (dl.passed())
      return time_limit_reached(r.policy, dl, "while computing a fallback schedule",
                                r.time_limit_advice);
    if (need > static_cast<double>(r.max_table_bytes))
      return error{status::infeasible,
                   too_large(next, need) + "; at " + std::to_string(first) +
                       " slots the rounding of sizes leaves no schedule "
                       "for a budget this close to the minimum (" +
                       std::to_string(minimum) +
                       " bytes): raise the budget a little, or raise max_table_bytes",
                   {}};
    s = next;  // within max_table_bytes though past the refinement's limit: go on
  }
  return error{status::solver_error,
               std::string(r.policy) +
                   ": no schedule at exact sizes although the budget is above the "
                   "minimum (a bug in remat; please report it with the chain)",
               {}};
}

}  // namespace remat::detail
