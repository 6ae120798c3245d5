#pragma once
// checkmate: the RK-Checkmate MILP over a training graph [Zhao24, §2.4], solved by a MILP backend
// (milp::cbc or milp::lpsolve; this header includes neither), exactly or through Checkmate's LP
// relaxation with two-phase rounding [Checkmate20, §5].
//
// Below lower_bound(), or where the MILP is infeasible (a proof), the answer is budget_too_small
// with the minimum when it is known, else infeasible with the interval it lies in and the hint
// find_minimum, which bisects it. The time limit covers the whole call; a solve stopped by it
// returns its best schedule (not proven optimal: solve_detailed's `optimal`) or time_limit.
//
// The formulation: policy/checkmate/formulation.hpp; the rounding: rounding.hpp; the bounds:
// bounds.hpp; the decisions and measurements: docs/checkmate.md.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/checkmate/bounds.hpp>
#include <remat/policy/checkmate/rounding.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat {

/// checkmate's solutions: the common fields say it all (optimal, bound, solve_seconds, notes:
/// "relax: no rounding of the LP relaxation fits in B bytes; solved exactly instead").
using checkmate_solution = solution<>;

template <milp::MilpBackend Backend>
struct checkmate {
  static constexpr std::string_view name = "checkmate";
  static constexpr std::string_view summary =
      "Checkmate's MILP on training graphs (exact, or its LP relaxation rounded)";

  /// Wall-clock limit of the whole solve (building the MILP, the warm start, every MILP solve of
  /// find_minimum's bisection; the relaxation and rounding with relax), seconds; not finite =
  /// none. Kept to within ~0.1 s plus the time of one node LP of the solver (CBC and lp_solve
  /// stop at their next check): returns the best schedule found by then (not proven optimal), or
  /// status::time_limit.
  double time_limit = std::numeric_limits<double>::infinity();
  /// Graphs whose MILP would have more variables than this are refused at once
  /// (invalid_problem): building and solving such a model would exhaust memory and time (a
  /// 500-stage chain's ran out of memory). The default admits chains of about 250 stages.
  double max_variables = 4e6;
  /// Stop when the gap between the best schedule and the bound is at most this (relative); the
  /// answer is then not `optimal` (unless the gap closed), and its `bound` says how close it is.
  /// 0 (the default) proves optimality. Profiles of one model measured again (times a few
  /// percent apart) make the exact proof take ten times longer than round times do; 0.01 cuts it
  /// back (docs/checkmate.md, "Solve time across profiles").
  double relative_gap = 0;
  /// Branch-and-bound nodes of each exact MILP solve (milp::options::node_limit); 0 = none. A
  /// solve stopped by it returns its best schedule (not proven optimal), like the time limit,
  /// but at the same point on every run: rockmate's inner solves use it so that their plans do
  /// not depend on the machine's load.
  std::int64_t node_limit = 0;
  /// Lets forwards run as fast-forwards (no phantom): R' of the thesis version.
  bool fast_forward = true;
  /// On a budget with no schedule, find the minimum budget: a bisection between the lower bound
  /// and least_memory()'s peak with feasibility MILPs (a few on graphs of a few dozen ops).
  bool find_minimum = false;
  /// Forwarded to the backend: {incumbent, bound, elapsed} during the solve (seconds of makespan).
  /// With relax: once after each LP and its roundings.
  std::function<void(const milp::progress_report&)> progress = {};
  /// Solver threads (CBC from 2 on).
  int threads = 1;
  /// Solve the LP relaxation and round it (Checkmate's two-phase rounding): fast on large
  /// graphs, not optimal.
  bool relax = false;
  /// With relax: when no rounding fits, solve the exact MILP instead (it may find a schedule
  /// that no rounding does, or prove there is none). Off, such a budget is answered at once
  /// (infeasible, saying that a schedule may still exist): rockmate's large blocks, planned at
  /// a grid of budgets where the exact solve would cost seconds each, turn it off.
  bool exact_fallback = true;
  /// With relax: randomized roundings per LP, besides the deterministic thresholds.
  int rounding_samples = 16;
  /// With relax: the seed of the randomized roundings (the result is deterministic for a seed).
  std::uint64_t seed = 1;
  /// A schedule to start the exact solve from (a heuristic's: store-all's program when it fits,
  /// a chain policy's schedule of the chain whose graph this is). It must be valid within the
  /// budget.
  std::optional<schedule> warm_start = std::nullopt;
  /// Without warm_start: start the exact solve from the relaxation's schedule (LP, roundings and
  /// cheap storage patterns; as with relax), computed within a quarter of time_limit. On by
  /// default: it makes CBC's exact solves faster (docs/checkmate.md has the measurements).
  bool auto_warm_start = true;
  Backend backend = {};

  /// A budget below which no schedule exists, in any order, with any recomputation: for each
  /// compute node, what is alive while it runs in every schedule (the graph inputs, its own
  /// inputs and outputs, its overhead, and for a backward the gradients that are alive across
  /// it; see policy/checkmate/bounds.hpp), and the protected data together. Budgets below it are
  /// answered at once.
  [[nodiscard]] static bytes lower_bound(const graph& g) { return detail::memory_floor(g); }

  /// The heuristic plan at low budgets, in milliseconds: of the cheap storage patterns (keep
  /// every s-th forward's data, or nothing but the gradients, recompute the rest from the
  /// nearest kept data; see policy/checkmate/rounding.hpp), the schedule with the smallest peak,
  /// checked by the simulator (its predicted_peak is that peak). Its peak is an upper bound on
  /// the minimum budget, within which the MILP always has a schedule. Within time_limit: the
  /// patterns are tried from the lowest-memory one while it lasts (all of them take 1.8 s on a
  /// 250-stage chain's graph). invalid_problem for an invalid graph.
  [[nodiscard]] result<schedule> least_memory(const graph& g) const {
    return least_memory(g, model().deadline_after(model_t::clock::now(), time_limit));
  }

  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    auto r = solve_detailed(g, budget);
    if (!r) return r.err();
    return std::move(r.value().program);
  }

  [[nodiscard]] result<checkmate_solution> solve_detailed(const graph& g, bytes budget) const {
    return detail::timed([&] { return solve_untimed(g, budget); });
  }

 private:
  [[nodiscard]] result<checkmate_solution> solve_untimed(const graph& g, bytes budget) const {
    if (auto v = validate(g); !v) return v.err();
    if (budget < 0)
      return error{status::invalid_problem,
                   "checkmate: the budget is negative (" + std::to_string(budget) + " bytes)",
                   {}};
    if (!Backend::available())
      return error{status::solver_error,
                   "checkmate: the MILP backend " + std::string(Backend::name) +
                       " is not available in this build",
                   {}};
    if (auto size = size_check(g); !size) return size.err();
    if (relax && rounding_samples < 0)
      return error{
          status::invalid_problem,
          "checkmate: rounding_samples must be >= 0, not " + std::to_string(rounding_samples),
          {}};
    if (warm_start) {
      const auto rep = sim::simulate(g, *warm_start, {.budget = budget, .record_timeline = false});
      if (!rep.valid &&
          !(rep.first_violation && rep.first_violation->kind == sim::violation_kind::over_budget))
        return error{status::invalid_problem,
                     "checkmate: the warm start is not a valid schedule of graph '" + g.name +
                         "': " + rep.first_violation->message,
                     {}};
      if (rep.peak > budget)
        return error{status::invalid_problem,
                     "checkmate: the warm start peaks at " + std::to_string(rep.peak) +
                         " bytes, above the budget of " + std::to_string(budget) +
                         " bytes; give a schedule that fits, or none",
                     {}};
    }
    const auto deadline = model().deadline_after(clock::now(), time_limit);
    const bytes floor = lower_bound(g);
    bool proven = true;  // an infeasible answer is a proof (not so when no rounding fits)
    auto r = budget < floor ? result<checkmate_solution>(error{status::infeasible, "", {}})
             : relax        ? solve_relaxed(g, budget, proven)
                            : solve_once(g, budget, deadline, false, warm_start);
    if (!r && !proven && r.code() == status::infeasible && exact_fallback) {
      // No rounding fits, but a schedule may exist: solve exactly within the time left (the
      // relaxation's patterns were tried already: no automatic warm start).
      const std::string why = r.err().message;
      checkmate exact = *this;
      exact.relax = false;
      exact.auto_warm_start = false;
      auto e = exact.solve_once(g, budget, deadline, false, warm_start);
      if (e) {
        e.value().notes.push_back("relax: no rounding of the LP relaxation fits in " +
                                  std::to_string(budget) + " bytes; solved exactly instead");
        return e;
      }
      if (e.code() != status::infeasible) {
        error out = e.err();
        out.message = why + "; the exact solve that followed did not finish: " + out.message;
        return out;
      }
      proven = true;
      r = std::move(e);
    }
    if (r || r.code() != status::infeasible || !proven) return r;
    return below_minimum(g, budget, floor, deadline);
  }

 private:
  using model_t = detail::checkmate_rounding;
  using built = model_t::built;
  using keep_matrix = model_t::keep_matrix;
  using clock = model_t::clock;
  [[nodiscard]] model_t model() const { return model_t{{fast_forward}}; }

  [[nodiscard]] result<schedule> least_memory(const graph& g, clock::time_point stop) const {
    if (auto v = validate(g); !v) return v.err();
    if (auto s = model().least_memory(g, stop)) return std::move(*s);
    schedule sa{store_all_program(g), g.ideal_time(), 0};  // never needed: a pattern is valid
    sa.predicted_peak = sim::simulate(g, sa, {.record_timeline = false}).peak;
    return sa;
  }

  /// The answer at a budget proven to have no schedule (below the floor, or the MILP
  /// infeasible there). The minimum lies in [lo, hi]: lo the smallest multiple of the sizes' gcd
  /// above the budget and at least the floor (every peak is such a multiple), hi the peak of the
  /// heuristic plan (least_memory), a schedule in hand. Without find_minimum: budget_too_small
  /// with the minimum when lo = hi, else infeasible with the interval and the hint. With it:
  /// bisection over the multiples in between with feasibility MILPs (a solve that succeeds
  /// lowers hi to its schedule's peak, at or below the budget tried), then budget_too_small with
  /// hi: always a budget with a schedule seen. The old upper end, store-all's peak, cost about
  /// log2(store-all peak - floor) solves; see docs/checkmate.md for the measurements.
  [[nodiscard]] result<checkmate_solution> below_minimum(const graph& g, bytes budget, bytes floor,
                                                         clock::time_point deadline) const {
    const bytes unit = detail::memory_gcd(g);
    auto up = [&](bytes v) { return (v + unit - 1) / unit * unit; };
    bytes lo = up(std::max(floor, budget + 1));
    const auto plan = least_memory(g, deadline);
    if (!plan) return plan.err();
    bytes hi = plan.value().predicted_peak;
    if (hi <= budget)  // the budget was proven to have no schedule
      return error{status::solver_error,
                   "checkmate: the MILP is infeasible at " + std::to_string(budget) +
                       " bytes, but a schedule of graph '" + g.name + "' peaks at " +
                       std::to_string(hi) +
                       " bytes; a bug in remat: please report it with the "
                       "graph",
                   {}};
    const std::string head = "checkmate: no schedule of graph '" + g.name + "' fits in " +
                             std::to_string(budget) + " bytes";
    const std::string why_floor =
        budget < floor ? " (some compute node needs " + std::to_string(floor) +
                             " bytes alive while it runs: the graph inputs, its own inputs and "
                             "outputs, its overhead, the gradients alive across it)"
                       : "";
    auto interval = [&] {
      return head + why_floor + "; the smallest budget with a schedule is between " +
             std::to_string(lo) + " and " + std::to_string(hi) + " bytes (at " +
             std::to_string(hi) + ": a schedule that keeps little and recomputes, least_memory())";
    };
    auto minimum = [&] {
      return error{status::budget_too_small,
                   head + why_floor + "; the smallest budget with a schedule is " +
                       std::to_string(hi) + " bytes",
                   hi};
    };
    if (lo >= hi) return minimum();
    if (!find_minimum)
      return error{status::infeasible, interval() + "; set find_minimum = true to find it", {}};
    while (lo < hi) {
      const bytes mid = lo + (hi - lo) / unit / 2 * unit;
      auto m = solve_once(g, mid, deadline, true, std::nullopt);
      if (m) {
        hi = std::min(mid, m.value().program.predicted_peak);
      } else if (m.code() == status::infeasible) {
        lo = mid + unit;
      } else {  // cannot tell (out of time, a solver failure): the interval so far, and why
        std::string msg = interval() + "; find_minimum stopped there: " + m.err().message;
        if (m.code() == status::time_limit) msg += "; raise time_limit to let it finish";
        return error{status::infeasible, msg, {}};
      }
    }
    return minimum();
  }

  /// invalid_problem when the graph's MILP would have more than max_variables variables.
  [[nodiscard]] result<void> size_check(const graph& g) const {
    const double nv = model().variables_bound(g);
    if (nv <= max_variables) return {};
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", nv);
    return error{status::invalid_problem,
                 "checkmate: the MILP of graph '" + g.name + "' (" +
                     std::to_string(g.compute_count()) + " compute nodes, " +
                     std::to_string(g.data_count()) + " data nodes) would have up to " + buf +
                     " variables, over max_variables (" +
                     std::to_string(static_cast<long long>(max_variables)) +
                     "); an exact or relaxed solve of that size does not finish: plan a "
                     "coarser graph, or a chain with rotor",
                 {}};
  }

  /// Replays a schedule: with the budget, its peak and makespan set, or solver_error (the
  /// shared finishing step).
  [[nodiscard]] static result<schedule> checked(const graph& g, bytes budget, schedule out) {
    return detail::finish(name, g, budget, std::move(out));
  }
  /// The same with the replay already made.
  [[nodiscard]] static result<schedule> checked(const sim::report& rep, schedule out) {
    return detail::finish(name, rep, std::move(out));
  }

  [[nodiscard]] result<checkmate_solution> solve_once(const graph& g, bytes budget,
                                                      clock::time_point deadline, bool feasibility,
                                                      const std::optional<schedule>& start) const {
    const auto t0 = clock::now();
    std::optional<schedule> heuristic;  // auto_warm_start's schedule, found before building
    if (!start && auto_warm_start && !feasibility)
      heuristic = relaxed_start(g, budget, model().seconds_left(deadline) / 4);
    // Out of time before the solver had a schedule of its own: the warm start is the best, or
    // else the fastest cheap pattern within the budget (milliseconds), or else `why`.
    auto fallback = [&](error why) -> result<checkmate_solution> {
      std::optional<schedule> s = start ? start : heuristic;
      if (!s && !feasibility)  // past the deadline: the patterns derived within 50 ms more
        s = model().fastest_pattern(g, budget, clock::now() + std::chrono::milliseconds(50));
      if (!s) return why;
      auto ok = checked(g, budget, std::move(*s));
      if (!ok) return ok.err();
      checkmate_solution res;
      res.program = std::move(ok.value());
      res.optimal = false;
      res.solve_seconds = std::chrono::duration<double>(clock::now() - t0).count();
      return res;
    };
    auto bt = model().build(g, budget, feasibility, deadline);
    if (!bt && bt.code() == status::time_limit) return fallback(bt.err());
    if (!bt) return bt.err();
    built& b = bt.value();
    milp::options o;
    o.relative_gap = relative_gap;
    o.node_limit = node_limit;
    o.threads = threads;
    if (!feasibility && progress)
      o.progress = [this, scale = b.time_scale](const milp::progress_report& r) {
        milp::progress_report sec = r;
        sec.incumbent *= scale;
        sec.bound *= scale;
        progress(sec);
      };
    if (start) {
      auto x = model().start_values(g, b, *start);
      if (!x) return x.err();
      o.warm_start = std::move(x.value());
    } else if (heuristic) {
      if (auto x = model().start_values(g, b, *heuristic)) o.warm_start = std::move(x.value());
    }
    // Solve, then check in bytes (see "Memory units"): a schedule over the budget by a solver's
    // tolerance is cut off (a no-good cut: at least one integer variable differs from it; every
    // schedule within the budget satisfies it) and the MILP solved again, up to max_cuts times.
    for (int cuts = 0;; ++cuts) {
      o.time_limit = std::max(1e-3, model().seconds_left(deadline));
      auto sol = backend.solve(b.m, o);
      if (!sol) {
        error e = sol.err();
        // infeasible is a proof (the MILP is a relaxation of the byte problem): solve_detailed
        // words the answer (the minimum, or where it lies), not the solver.
        if (e.code == status::infeasible)
          e.message = "checkmate: no schedule of graph '" + g.name + "' fits in " +
                      std::to_string(budget) + " bytes";
        else
          e.message = "checkmate: " + e.message;
        if (e.code == status::time_limit) return fallback(std::move(e));
        return e;
      }
      const milp::solution& s = sol.value();
      auto out = model().extract(g, b, s);
      if (!out) return out.err();
      const auto rep = sim::simulate(g, out.value(), {.budget = budget, .record_timeline = false});
      if (rep.first_violation && rep.first_violation->kind == sim::violation_kind::over_budget) {
        constexpr int max_cuts = 64;
        if (cuts < max_cuts && model().seconds_left(deadline) > 0) {
          auto covers = model().cover_cuts(g, b, s, budget);
          if (covers.empty()) covers.push_back(model().no_good(b.m, s.values));
          for (auto& c : covers) b.m.add(std::move(c));
          continue;
        }
        return fallback(error{status::solver_error,
                              "checkmate: after " + std::to_string(cuts) +
                                  " rounds of cuts the MILP still answers schedules over the "
                                  "budget in bytes (" +
                                  rep.first_violation->message +
                                  "); give a budget a little larger, or a warm start",
                              {}});
      }
      auto ok = checked(rep, std::move(out.value()));
      if (!ok) return ok.err();
      checkmate_solution res;
      res.program = std::move(ok.value());
      // Stopped within relative_gap is not proven optimal: the bound says how close it is.
      res.optimal = s.is_optimal() && (relative_gap == 0 || s.gap() <= 1e-9);
      if (std::isfinite(s.bound)) res.bound = s.bound * b.time_scale;
      res.solve_seconds = std::chrono::duration<double>(clock::now() - t0).count();
      return res;
    }
  }
  /// auto_warm_start's schedule: the relaxation's (its roundings and the cheap patterns), within
  /// `limit` seconds (a quarter of the time left); nullopt when none fits.
  [[nodiscard]] std::optional<schedule> relaxed_start(const graph& g, bytes budget,
                                                      double limit) const {
    checkmate quick = *this;
    quick.relax = true;
    quick.auto_warm_start = false;
    quick.warm_start = std::nullopt;
    quick.find_minimum = false;
    quick.progress = {};
    quick.time_limit = limit;
    auto r = quick.solve(g, budget);
    if (!r) return std::nullopt;
    return std::move(r.value());
  }

  // --- LP relaxation and rounding
  // -----------------------------------------------------------------

  [[nodiscard]] result<checkmate_solution> solve_relaxed(const graph& g, bytes budget,
                                                         bool& proven) const {
    const auto t0 = clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
    const int T = g.compute_count();
    const int I = g.data_count();
    const bytes floor = lower_bound(g);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    std::set<keep_matrix> tried;
    std::optional<schedule> best;
    bytes smallest_peak = std::numeric_limits<bytes>::max();
    double lp_bound = std::numeric_limits<double>::quiet_NaN();
    int candidates = 0;
    std::string budgets_tried;

    auto consider = [&](const keep_matrix& keep) {
      if (elapsed() > time_limit) return;  // out of time: keep what was found
      if (!tried.insert(keep).second) return;
      ++candidates;
      auto s = model().derive(g, keep);
      if (!s) return;
      const auto rep = sim::simulate(g, *s, {.budget = budget, .record_timeline = false});
      smallest_peak = std::min(smallest_peak, rep.peak);
      if (!rep.valid || (best && s->predicted_time >= best->predicted_time)) return;
      s->predicted_peak = rep.peak;
      best = std::move(*s);
    };
    auto report = [&] {
      if (!progress) return;
      milp::progress_report r;
      if (best) r.incumbent = best->predicted_time;
      if (std::isfinite(lp_bound)) r.bound = lp_bound;
      r.elapsed = elapsed();
      progress(r);
    };
    for (const auto& keep : model().heuristic_keeps(g)) consider(keep);

    // Checkmate's allowance: the LP at the budget, then at 90%, 80%, ... of it while no rounding
    // fits (a tighter LP keeps less, so its roundings peak lower).
    for (int step = 0; step <= 9; ++step) {
      const bytes b = step == 0 ? budget : budget - budget / 10 * step;
      if (step > 0 && (best || b < floor)) break;
      const double left = time_limit - elapsed();
      if (!(left > 0)) break;
      auto bmt = model().build(g, b, false, model().deadline_after(t0, time_limit));
      if (!bmt) {
        if (step == 0 && !best) return bmt.err();
        break;
      }
      const built& bm = bmt.value();
      milp::options o;
      o.time_limit = left;
      o.threads = threads;
      auto sol = backend.solve(bm.m.relax(), o);
      if (!sol) {
        if (step == 0 && sol.code() == status::infeasible)
          return error{status::infeasible,
                       "checkmate: no schedule of graph '" + g.name + "' fits in " +
                           std::to_string(budget) + " bytes: even the LP relaxation is infeasible",
                       {}};
        if (step == 0 && sol.code() == status::time_limit && !best)
          return error{status::time_limit,
                       "checkmate: the LP relaxation was not solved within the time limit (" +
                           sol.err().message + "); raise time_limit",
                       {}};
        break;
      }
      const milp::solution& lp = sol.value();
      if (step == 0) lp_bound = lp.objective * bm.time_scale;
      budgets_tried += (budgets_tried.empty() ? "" : ", ") + std::to_string(b);
      // Phase 1: round P, deterministic thresholds then randomized.
      auto rounding = [&](auto take) {
        keep_matrix keep = model().base_keep(g);
        for (int t = 0; t < T; ++t)
          for (int i = 0; i < I; ++i) {
            const auto& e = bm.P[detail::ix(t)][detail::ix(i)];
            if (!model().rounded(g, i)) continue;
            keep[detail::ix(t)][detail::ix(i)] = e.terms.empty() ? (e.constant > 0.5 ? 1 : 0)
                                                 : take(lp.values[e.terms.front().index]) ? 1
                                                                                          : 0;
          }
        return keep;
      };
      // Each rounding twice: as rounded, and with the gradients kept over their life (the
      // rounding of a gradient often costs more recomputation than it saves memory).
      auto both = [&](keep_matrix keep) {
        consider(keep);
        for (int i = 0; i < I; ++i)
          if (model().rounded(g, i) &&
              g.compute(g.producers(i).front()).kind != compute_kind::forward)
            model().keep_over_life(g, keep, i);
        consider(keep);
      };
      for (double th : {0.999, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.001})
        both(rounding([&](double v) { return v >= th; }));
      for (int r = 0; r < rounding_samples; ++r)
        both(rounding([&](double v) { return coin(rng) < v; }));
      report();
    }
    if (!best) {
      proven = false;
      std::string msg = "checkmate: no rounding of the LP relaxation fits graph '" + g.name +
                        "' in " + std::to_string(budget) + " bytes; tried " +
                        std::to_string(candidates) + " storage plans (thresholds, " +
                        std::to_string(rounding_samples) +
                        " randomized roundings per LP, cheap patterns) from the LP at " +
                        (budgets_tried.empty() ? std::string("no budget (time limit)")
                                               : budgets_tried + " bytes");
      if (smallest_peak != std::numeric_limits<bytes>::max())
        msg += "; the smallest peak reached is " + std::to_string(smallest_peak) + " bytes";
      msg += ". A schedule may still exist: solve exactly (relax = false), or raise the budget";
      return error{elapsed() >= time_limit ? status::time_limit : status::infeasible, msg, {}};
    }
    checkmate_solution res;
    res.program = std::move(*best);
    res.optimal = false;
    if (std::isfinite(lp_bound)) res.bound = std::min(lp_bound, res.program.predicted_time);
    res.solve_seconds = elapsed();
    return res;
  }
};

}  // namespace remat
