#pragma once
// checkmate: the RK-Checkmate MILP over a training graph (rockmate-spec §3), solved by a MILP
// backend (remat::milp::lpsolve or remat::milp::cbc; this header includes neither, so it needs
// no solver library until a backend is named), exactly or through Checkmate's LP relaxation with
// two-phase rounding (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal Tensor
// Rematerialization", MLSys 2020, §5: solve the LP, round the storage matrix S with several
// deterministic thresholds and randomized roundings, then take the cheapest recomputation R that
// the rounded S allows).
//
// Stages t = 0..T-1 over the compute nodes in topological order (0-based here); stage t ends
// with the first run of c_t; inside a stage, step k = "maybe run c_k, then maybe free data".
// Variables (all binary but U):
//   R[t][k], k <= t       run c_k in normal mode in stage t; R[t][t] + F[t][t] = 1
//   F[t][k], forwards     run c_k as a fast-forward (no phantom), when fast_forward is on
//   S[t][(k,i)], t > k    c_k's contribution to data i is present at the start of stage t
//   P[t][i]               data i is alive at the start of stage t (sources: the constant 1)
//   create[t][i][k]       i is allocated at step (t,k), k a producer of i
//   del[t][i][k]          i is freed right after step (t,k), k related to i (never if protected)
//   U[t][k]               memory after step (t,k) and its frees (continuous)
// Constraints (the spec's (2.3)-(2.19) with its fixes, and ours):
//   * alive(t,i,k) = P[t][i] + creates up to k - frees up to k, in [0, 1], and in [0, 1] before
//     step k's frees too (else a step could allocate what is alive and free it at once: the
//     plan would count one copy where the program holds none after the free); a producer that runs
//     leaves its output alive right after it (before its frees); a consumer needs its input
//     alive before its own step's frees, and every contribution (kept in S or recomputed earlier
//     in the stage, (2.8)); a phantom is made only by the normal variant;
//   * S is exact, not just an upper bound (Checkmate's (2.7)/(2.12) only bound it from above):
//     S[t+1] is 1 iff the contribution was kept (S[t], no free of i in stage t) or made at step k
//     with no free of i at or after k. With that, R + S <= 1 for a multi-producer gradient (a
//     contribution is never summed twice), relaxed when i was freed earlier in the stage;
//   * a multi-producer gradient freed at some step cannot be read later in the same stage (it
//     would miss the contributions made before the free): conservative, never needed in
//     practice;
//   * P[t+1][i] = alive after the last step related to i in stage t; nothing but protected data
//     alive at the end; protected data never freed; the loss and every backward run once (a
//     backward adds to the parameter gradients: a second run would count them twice; rockmate-
//     spec §1.4 asks it of the loss only, our executors and simulator of every backward);
//   * U[t][-1] = sum_i M_i P[t][i] (the protected input counted, as the simulator does);
//     U[t][k] = U[t][k-1] + created - freed; peak of the step U[t][k] + freed + overhead <= budget.
// Frees are not forced to be as early as possible (Checkmate's hazard constraints): the
// objective ignores memory, and any placement the constraints allow is a valid program.
// Memory units, and the check in bytes. Memory is counted in integer units: of the gcd of every
// size and overhead when that leaves fewer than 2^17 units in the budget (the budget row is then
// exact), else of the smallest power of two that does, every size and overhead rounded DOWN and
// the budget down. Why not bytes: with the 4-byte loss output of
// examples/graphs/residual_net.json the gcd was 4 bytes, memory rows had coefficients from 1 to
// 2.6e7, and CBC 2.10.8's cut generators (two-step MIR, and others) cut off optimal solutions: at
// 6 budgets of 10 between 280 and 380 MiB it proved a worse schedule "optimal" (0.6-1.7% slower
// than the schedule CBC found with -cuts off); with at most 2^17 integer units CBC's answers
// equal those found with -cuts off (test_io's test_example_graphs checks four, and lp_solve at
// three). Why not round sizes up, as an earlier version did: the plan then fits, but schedules
// that fit within a few bytes are lost: checkmate said "infeasible" on chains where rotor and
// store-all plan (a 2-stage chain at its store-all peak of 1091786 bytes, in units of 16 bytes),
// and planned slower than rotor elsewhere (issue 10). Why not exact fractions of the unit (tried):
// solvers' tolerances are relative (1e-9-1e-7 of a row) while a byte is 2^-17 of the budget or
// less, so a solver took schedules a few bytes over the budget as feasible and one exactly at
// it as infeasible (lp_solve), and Clp failed an assertion (abort) on such a model under CBC.
// Rounded down, the integer rows leave the solvers no room, and the MILP is a relaxation of the
// byte problem: it loses no schedule within the budget, so "infeasible" is a proof. Each schedule
// the solver returns is replayed in bytes; when a step is over the budget (by less than a unit
// per data node), cover cuts go into the MILP (see cover_cuts: that set of data, alive together
// at that step, exceeds the budget; every schedule within it satisfies the cut; integer
// coefficients) and it is solved again. The schedule returned is within the budget to the byte,
// and "optimal" is the optimum of a relaxation met by a schedule within the budget: the optimum.
// (Checked against rotor and store-all on random chains with sizes of 10^0-10^11 bytes, and
// find_minimum's answers re-solved, in test_checkmate_properties.)
//
// The objective is sum_{t,k} time_k R[t][k] + fast_time_k F[t][k]: the makespan itself.
//
// Reductions. The model above is built smaller, without losing its optimum (each point is
// forced by the constraints, or keeps at least one optimal solution):
//   * backwards and the loss run once, in their own stage: no R, create or free at the other
//     steps of theirs (constants 0); R[t][t] is the constant 1 where c_t has no F;
//   * a forward runs only while it can help: up to the last stage in which a consumer of one of
//     its outputs can run (backwards: their stage; forwards: recursively; protected outputs:
//     always). A later run makes data nobody reads. Likewise, data is not kept past the last
//     stage in which a consumer of it can run (P is 0 there: freeing it at its last step that
//     runs holds less memory);
//   * a forward whose phantoms are all empty and whose fast-forward is no cheaper gets no F (its
//     normal run does the same for no more); where the fast-forward is no dearer and there is one
//     phantom, the phantom's create is R itself (a normal run that makes no phantom is a
//     fast-forward at a cost no lower);
//   * data related only to nodes that run once (gradients) has its life fixed: allocated at its
//     first producer's step, freed at its last related node's step (protected: kept); P, S,
//     create and free are constants;
//   * with one producer, which precedes its consumers in the order, "no allocation of what is
//     alive" is only needed at the producer's step and "alive >= 0" not at all (the frees only
//     lower it, down to P[t+1] >= 0), and "every contribution" is "alive before the step";
//   * milp's flatten turns single-variable rows into bounds and drops rows the bounds imply.
// On bench_checkmate's 21-node chain this took the MILP from 4905 rows and 2157 columns to
// 1447 and 946 (after flatten), with the same LP bound and optimum.
// Tried and left out (each slower in total over a dozen 20-40-node chains and residual nets,
// with CBC): the memory rows without U (U substituted), create and free as continuous variables
// (they are integral once R, F and P are), a "phantom made is kept" symmetry cut, stage-start
// knapsack rows, branching priorities, CBC's -scaling off / -cuts off / strong-branching settings.
//
// The schedule (Algorithm 4): for t, for k <= t: compute (or fast_forward) c_k if it runs, then
// its frees. The ILP lets c_k run while an output of it is alive (an activation, or a phantom
// under the normal variant): the schedule frees it just before the recompute (the peak is the
// same: the recompute allocates it again at once). Every schedule is replayed in
// sim::simulate; one the simulator rejects, or whose makespan or peak differs from the plan,
// comes back as solver_error.
//
// Results: ok with the schedule; budget_too_small with the minimum budget when the MILP is
// infeasible and `find_minimum` is on (a bisection over budgets with feasibility MILPs; off by
// default, it costs several solves; the minimum reported is always a budget at which a solve
// was seen to succeed, never store-all's peak taken on trust); infeasible otherwise; time_limit
// when the limit passed before any schedule was found (the warm start, or auto_warm_start's
// schedule, when there is one, is returned instead, not proven optimal). The time limit covers
// the whole call: the warm start's relaxation (a quarter of it), building the MILP (checked
// between stages), the solver (CBC: the root LP under Clp's wall-clock limit without presolve,
// then branch and bound stopped by the event handler; lp_solve: its abort callback), and
// find_minimum's bisection. Graphs whose MILP would exceed max_variables are refused at once. A time-limited solve that found a schedule returns ok: whether
// it is proven optimal is in solve_detailed()'s `optimal` (schedule, plain data owned by
// the schedule layer, carries no solver status).
//
// Warm start (`warm_start`, or `auto_warm_start`): a schedule is translated into values of every
// MILP variable by replaying it stage by stage (a compute node's first run opens its stage;
// recomputations belong to the stage of the next first run and must come in index order; a free
// is attached to the last step related to the data before it, the only place the MILP can put
// it, which frees no later than the program does). The backend gets the values as
// milp::options::warm_start: CBC takes it as its first incumbent (setMIPStart), lp_solve as a
// cutoff that it must beat (it has no MIP start). A warm start that the simulator rejects, that
// exceeds the budget, or that runs nodes out of the stage order is an invalid_problem error that
// says why. `auto_warm_start` (on by default) starts from the relaxation's best schedule (below),
// found within a quarter of the time limit.
//
// LP relaxation (`relax`), Checkmate's two-phase rounding adapted to this model. Decisions where
// our model differs from Checkmate's, where it has one S per node:
//   * What is rounded: P[t][i] (data i alive at the start of stage t), our storage matrix, for
//     every data but the sources and protected data (always kept). P, not S: S tracks the
//     contributions of multi-producer gradients; phase 2 treats such a gradient as a whole
//     (kept: it holds every contribution made so far; not alive when needed: all its producers
//     run again in the stage). Gradients are rounded too (a gradient freed early is one that no
//     later stage needs); since every backward runs once (see the MILP's R bounds), a rounding
//     that needs a gradient back after freeing it is dropped in phase 2.
//   * Phase 2 (the cheapest R given the rounded P), stage by stage, from c_t down to c_0: c_t
//     runs; a node that runs needs each input that is not alive at the start of the stage, so
//     its producers run earlier in the stage; data kept into stage t+1 that is not alive is
//     produced in stage t. A storage plan that needs the loss again, or a contribution already
//     summed into a gradient, is dropped. A forward runs normally when its phantom is needed
//     (by its backward in this stage, or kept for a later stage), as a fast-forward otherwise
//     (fast_forward on).
//   * Frees: as early as the stage allows (after the last step of the stage that reads or makes
//     the data, or at the start of the stage when none does). The MILP could place them later
//     only, so the rounded schedule is a schedule of the same stage model: never faster than
//     the exact optimum.
//   * The budget: the rounded schedules are replayed in the simulator and the fastest within the
//     budget wins. When none fits, the LP is solved again at a smaller budget (90%, 80%, ... of
//     it, Checkmate's "budget allowance"), down to the lower bound, while time remains; the
//     cheap storage patterns (heuristic_keeps) join the candidates too. If nothing fits, the
//     result says what was tried and the smallest peak reached (status::infeasible, although a
//     schedule may exist: the exact solve decides).
//   * `optimal` is false for relaxed solutions; `bound` is the LP's optimum at the budget (a lower
//     bound on the exact optimum), -inf when the LP did not finish within time_limit (the
//     schedule then comes from the cheap patterns; with none that fits, status::time_limit).

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
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/problem/graph.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

/// What solve_detailed returns besides the schedule.
struct checkmate_solution {
  remat::schedule schedule;
  /// Proven optimal (within relative_gap); false when the limit stopped it, and for relax.
  bool optimal = false;
  /// The best bound on the makespan (seconds): the solver's, or the LP relaxation's for relax.
  double bound = 0;
  double solve_seconds = 0;
};

template <milp::MilpBackend Backend>
struct checkmate {
  static constexpr std::string_view name = "checkmate";

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
  /// Stop when the gap between the best schedule and the bound is at most this (relative).
  double relative_gap = 0;
  /// Lets forwards run as fast-forwards (no phantom): R' of the thesis version.
  bool fast_forward = true;
  /// On an infeasible budget, find the minimum by bisection (several MILP solves).
  bool find_minimum = false;
  /// Forwarded to the backend: {incumbent, bound, elapsed} during the solve (seconds of makespan).
  /// With relax: once after each LP and its roundings.
  std::function<void(const milp::progress_report&)> progress = {};
  /// Solver threads (CBC from 2 on).
  int threads = 1;
  /// Solve the LP relaxation and round it (Checkmate's two-phase rounding): fast on large
  /// graphs, not optimal.
  bool relax = false;
  /// With relax: randomized roundings per LP, besides the deterministic thresholds.
  int rounding_samples = 16;
  /// With relax: the seed of the randomized roundings (the result is deterministic for a seed).
  std::uint64_t seed = 1;
  /// A schedule to start the exact solve from (a heuristic's: store-all's program when it fits,
  /// a chain policy's schedule of the chain whose graph this is). It must be valid within the budget.
  std::optional<schedule> warm_start = std::nullopt;
  /// Without warm_start: start the exact solve from the relaxation's schedule (LP, roundings and
  /// cheap storage patterns; as with relax), computed within a quarter of time_limit. On by
  /// default: over twenty 10-20-op chains and residual nets of bench_checkmate's kind, CBC's
  /// exact solves took 10.6 s in all with it, 15.2 s without (longest 1.5 s against 2.3 s).
  /// (An earlier version started from the cheap patterns only and seemed to trap CBC on
  /// examples/graphs/residual_net.json; that was CBC proving wrong optima, see "Memory units".)
  bool auto_warm_start = true;
  Backend backend = {};

  /// A budget below which no schedule exists: for each compute node, the graph inputs plus its
  /// own inputs and outputs plus its overhead (a forward's cheaper variant). Budgets below it are
  /// answered at once (infeasible).
  [[nodiscard]] static bytes lower_bound(const graph& g) {
    bytes best = g.initial_bytes();
    for (int c = 0; c < g.compute_count(); ++c) {
      std::vector<int> ds;
      for (int d = 0; d < g.data_count(); ++d)
        if (g.is_source(d)) ds.push_back(d);
      auto need = [&](bool fast) {
        std::vector<int> all = ds;
        for (int d : g.inputs(c)) all.push_back(d);
        for (int d : g.outputs(c))
          if (!fast || g.data(d).kind != data_kind::phantom) all.push_back(d);
        std::sort(all.begin(), all.end());
        all.erase(std::unique(all.begin(), all.end()), all.end());
        bytes m = fast ? g.compute(c).fast_overhead : g.compute(c).overhead;
        for (int d : all) m += g.data(d).size;
        return m;
      };
      bytes m = need(false);
      if (g.compute(c).kind == compute_kind::forward) m = std::min(m, need(true));
      best = std::max(best, m);
    }
    return best;
  }

  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    auto r = solve_detailed(g, budget);
    if (!r) return r.err();
    return std::move(r.value().schedule);
  }

  [[nodiscard]] result<checkmate_solution> solve_detailed(const graph& g, bytes budget) const {
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
      if (!rep.valid && !(rep.first_violation &&
                          rep.first_violation->kind == sim::violation_kind::over_budget))
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
    const auto deadline = deadline_after(clock::now(), time_limit);
    const bytes floor = lower_bound(g);
    const error below_floor{status::infeasible,
                            "checkmate: no schedule of graph '" + g.name + "' fits in " +
                                std::to_string(budget) +
                                " bytes: some compute node needs at least " +
                                std::to_string(floor) +
                                " bytes (the graph inputs, its own inputs and outputs, its "
                                "overhead)" + find_minimum_hint(),
                            {}};
    if (budget < floor && !find_minimum) return below_floor;
    bool proven = true;  // an infeasible answer is a proof (not so when no rounding fits)
    auto r = budget < floor ? result<checkmate_solution>(below_floor)
             : relax        ? solve_relaxed(g, budget, proven)
                            : solve_once(g, budget, deadline, false, warm_start);
    if (r || r.code() != status::infeasible || !find_minimum || !proven) return r;
    // Bisection between the infeasible budget and store-all's peak. The store-all program is a
    // schedule of the stage model, so the MILP has one there; but a reported minimum must be a
    // budget at which checkmate was seen to plan, so hi counts only once a solve succeeded at it.
    schedule sa{store_all_program(g), g.ideal_time(), 0};
    bytes hi = sim::simulate(g, sa, {.budget = std::numeric_limits<bytes>::max()}).peak;
    bytes lo = std::max(budget, floor - 1);  // infeasible
    if (hi <= lo) return r;
    bool hi_solved = false;
    while (hi - lo > 1) {
      const bytes mid = lo + (hi - lo) / 2;
      auto m = solve_once(g, mid, deadline, true, std::nullopt);
      if (m) {
        hi = mid;
        hi_solved = true;
      } else if (m.code() == status::infeasible) {
        lo = mid;
      } else {  // cannot tell (out of time, a solver failure): the plain answer, and why
        error e = r.err();
        e.message += "; find_minimum stopped between " + std::to_string(lo) + " and " +
                     std::to_string(hi) + " bytes: " + m.err().message;
        if (m.code() == status::time_limit) e.message += "; raise time_limit to let it finish";
        return e;
      }
    }
    if (!hi_solved) {
      auto m = solve_once(g, hi, deadline, true, std::nullopt);
      if (!m && m.code() != status::infeasible) {
        error e = r.err();
        e.message += "; find_minimum could not confirm store-all's peak (" + std::to_string(hi) +
                     " bytes): " + m.err().message;
        return e;
      }
      if (!m)
        return error{status::solver_error,
                     "checkmate: the MILP has no schedule even at store-all's peak (" +
                         std::to_string(hi) + " bytes) although store-all's program fits there; "
                         "a bug in remat: please report it with the graph (" + m.err().message +
                         ")",
                     {}};
    }
    return error{status::budget_too_small,
                 "checkmate: no schedule fits in " + std::to_string(budget) +
                     " bytes; the smallest budget with a schedule is " + std::to_string(hi) +
                     " bytes",
                 hi};
  }

 private:
  /// (step k, a variable or the constant 1); a step that is not listed is the constant 0.
  using steps = std::vector<std::pair<int, milp::linear_expr>>;
  using keep_matrix = std::vector<std::vector<char>>;  // [t][i], t = 0..T

  struct built {
    milp::model m;
    bytes unit = 1;
    /// Seconds per unit of the objective (see time_unit).
    double time_scale = 1;
    /// [t][k], k <= t: a variable, or a constant (see "Reductions"); F is 0 where c_k has no
    /// fast-forward variable.
    std::vector<std::vector<milp::linear_expr>> R, F;
    std::vector<std::vector<milp::linear_expr>> P;               // [t][i]: a variable or a constant
    std::vector<std::vector<std::vector<milp::linear_expr>>> S;  // [t][i][producer position]
    std::vector<std::vector<steps>> cre, del;                    // [t][i]
    std::vector<std::vector<milp::variable>> U;                  // [t][k]
    /// [k]: the phantom that a normal run of c_k always makes (R is its create), or -1.
    std::vector<int> normal_makes;
  };

  static const milp::linear_expr* at_step(const steps& v, int k) {
    for (const auto& [kk, x] : v)
      if (kk == k) return &x;
    return nullptr;
  }

  /// The memory unit of the model (see "Memory units" above): the gcd of every size and overhead
  /// when that leaves fewer than 2^17 units in the budget (exact), else the smallest power of two
  /// that does (sizes rounded down to it).
  static bytes memory_unit(const graph& g, bytes budget) {
    bytes u = 0;
    for (const auto& d : g.data_nodes()) u = std::gcd(u, d.size);
    for (const auto& c : g.compute_nodes()) u = std::gcd(std::gcd(u, c.overhead), c.fast_overhead);
    u = std::max<bytes>(u, 1);
    if (budget / u < (bytes{1} << 17)) return u;
    bytes coarse = 1;
    while (coarse <= (budget >> 17)) coarse *= 2;
    return coarse;
  }
  /// Bytes in model units, rounded down (exact when the unit is the gcd): the MILP is then a
  /// relaxation of the byte problem, and its schedules are checked in bytes (see "Memory units").
  static double units(bytes v, bytes unit) { return static_cast<double>(v / unit); }
  /// The objective's unit of time: the power of two nearest below the longest op time (1 when
  /// every time is 0), so that the objective's coefficients lie in (0, 2) and dividing by it is
  /// exact. CBC aborts the process (a failed assertion in Clp) on an objective coefficient of
  /// 1e25 or more, and solvers' tolerances are absolute: in seconds, times of 1e-9 s would fall
  /// below them, times of 1e20 s above every gap.
  static double time_unit(const graph& g) {
    double longest = 0;
    for (const auto& c : g.compute_nodes()) longest = std::max({longest, c.time, c.fast_time});
    if (!(longest > 0) || !std::isfinite(longest)) return 1;
    int e = 0;
    std::frexp(longest, &e);  // longest = f * 2^e, f in [0.5, 1)
    return std::ldexp(1.0, e - 1);
  }

  /// Backwards and the loss run once, in their own stage.
  static bool runs_once(const graph& g, int k) {
    return g.compute(k).kind != compute_kind::forward;
  }

  /// Whether the model gives forward k a fast-forward variable: not when its phantoms are all
  /// empty and the fast-forward is no cheaper (time and overhead), since the normal run then does
  /// the same for no more (both would only double the solutions).
  [[nodiscard]] bool has_fast(const graph& g, int k) const {
    const auto& n = g.compute(k);
    if (!fast_forward || n.kind != compute_kind::forward) return false;
    bool empty = true;
    for (int i : g.outputs(k))
      if (g.data(i).kind == data_kind::phantom && g.data(i).size > 0) empty = false;
    return !(empty && n.fast_time >= n.time && n.fast_overhead >= n.overhead);
  }

  /// Data every related node of which runs once (gradients: made by backwards and the loss, read
  /// by backwards): its life is fixed (see "Reductions").
  static bool is_fixed(const graph& g, int i) {
    if (g.is_source(i)) return false;
    for (int k : g.producers(i))
      if (!runs_once(g, k)) return false;
    for (int k : g.consumers(i))
      if (!runs_once(g, k)) return false;
    return true;
  }

  using clock = std::chrono::steady_clock;

  /// The time limit as a deadline from `start` (time_point::max() when the limit is not finite).
  static clock::time_point deadline_after(clock::time_point start, double limit) {
    if (!(limit < 1e9)) return clock::time_point::max();
    return start + std::chrono::duration_cast<clock::duration>(
                       std::chrono::duration<double>(std::max(0.0, limit)));
  }
  static double seconds_left(clock::time_point deadline) {
    if (deadline == clock::time_point::max()) return std::numeric_limits<double>::infinity();
    return std::chrono::duration<double>(deadline - clock::now()).count();
  }

  /// An upper bound on the MILP's variables for this graph (R and F per step, P and S per stage
  /// and data, create and free per stage and related step), computed before building anything.
  static double variables_bound(const graph& g) {
    const double T = g.compute_count();
    double related = 0, producers = 0;
    for (int i = 0; i < g.data_count(); ++i) {
      related += static_cast<double>(g.producers(i).size() + g.consumers(i).size());
      producers += static_cast<double>(g.producers(i).size());
    }
    return T * (T + 1) + T * (g.data_count() + producers) + 2 * T * related + T * (T + 1) / 2;
  }

  /// The end of an "infeasible" message: how to get the minimum, unless find_minimum is on.
  [[nodiscard]] std::string find_minimum_hint() const {
    return find_minimum ? "" : "; set find_minimum to get the smallest budget that fits";
  }

  /// invalid_problem when the graph's MILP would have more than max_variables variables.
  [[nodiscard]] result<void> size_check(const graph& g) const {
    const double nv = variables_bound(g);
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

  /// The MILP at this budget; without objective when only feasibility matters. time_limit when
  /// the deadline passes while building (solve_detailed has refused graphs over max_variables).
  [[nodiscard]] result<built> build(const graph& g, bytes budget, bool feasibility,
                                    clock::time_point deadline) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    auto past_deadline = [&] { return clock::now() > deadline; };
    const error out_of_time{status::time_limit,
                            "checkmate: the time limit passed while building the MILP of graph '" +
                                g.name + "' (" + std::to_string(T) +
                                " compute nodes); raise time_limit",
                            {}};
    const bytes unit = memory_unit(g, budget);
    const double cap = units(budget, unit);
    auto sz = [&](int i) { return units(g.data(i).size, unit); };
    using milp::linear_expr;
    using milp::variable;

    built b;
    b.unit = unit;
    milp::model& m = b.m;
    // useful[k]: the last stage in which running c_k can help (see "Reductions").
    std::vector<int> useful(ix(T), T - 1);
    for (int k = T - 1; k >= 0; --k) {
      if (runs_once(g, k)) {
        useful[ix(k)] = k;
        continue;
      }
      int u = -1;
      for (int i : g.outputs(k)) {
        if (g.data(i).is_protected) u = T - 1;
        for (int c : g.consumers(i)) u = std::max(u, useful[ix(c)]);
      }
      useful[ix(k)] = std::max(u, k);
    }
    auto can_run = [&](int t, int k) { return k == t || (k < t && t <= useful[ix(k)]); };

    // R and F: constants where c_k cannot run (0), and R[t][t] = 1 where c_t has no F.
    b.R.assign(ix(T), {});
    b.F.assign(ix(T), {});
    std::vector<char> fast(ix(T));
    b.normal_makes.assign(ix(T), -1);
    for (int k = 0; k < T; ++k) {
      fast[ix(k)] = has_fast(g, k) ? 1 : 0;
      const auto& n = g.compute(k);
      if (!fast[ix(k)] || n.fast_time > n.time || n.fast_overhead > n.overhead) continue;
      int phantoms = 0;
      for (int i : g.outputs(k))
        if (g.data(i).kind == data_kind::phantom) {
          ++phantoms;
          b.normal_makes[ix(k)] = i;
        }
      if (phantoms != 1) b.normal_makes[ix(k)] = -1;
    }
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k <= t; ++k) {
        linear_expr r, f;
        if (can_run(t, k)) {
          if (k == t && !fast[ix(k)])
            r = linear_expr(1.0);
          else
            r = m.add_binary();
          if (fast[ix(k)]) f = m.add_binary();
        }
        b.R[ix(t)].push_back(std::move(r));
        b.F[ix(t)].push_back(std::move(f));
      }
    }
    auto R = [&](int t, int k) -> const linear_expr& { return b.R[ix(t)][ix(k)]; };
    auto run = [&](int t, int k) -> linear_expr { return R(t, k) + b.F[ix(t)][ix(k)]; };
    auto prodrun = [&](int t, int k, int i) -> linear_expr {
      return g.data(i).kind == data_kind::phantom ? R(t, k) : run(t, k);
    };
    for (int t = 0; t < T; ++t) {
      m.add(run(t, t) == 1);
      for (int k = 0; k < t; ++k)
        if (fast[ix(k)] && can_run(t, k)) m.add(run(t, k) <= 1);
    }

    // Per data node: related steps, P, S, create, del.
    std::vector<std::vector<int>> rel(ix(I));
    std::vector<char> fixed(ix(I), 0);  // data whose life the model fixes (see is_fixed)
    std::vector<int> first(ix(I), 0), last(ix(I), 0);  // first producer, last related node
    for (int i = 0; i < I; ++i) {
      auto& v = rel[ix(i)];
      for (int k : g.producers(i)) v.push_back(k);
      for (int k : g.consumers(i)) v.push_back(k);
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      fixed[ix(i)] = is_fixed(g, i) ? 1 : 0;
      if (!g.is_source(i)) {
        first[ix(i)] = *std::min_element(g.producers(i).begin(), g.producers(i).end());
        last[ix(i)] = v.back();
      }
    }
    // dead[i]: the last stage in which a consumer of i can run (past it, i is freed).
    std::vector<int> dead(ix(I), T);
    for (int i = 0; i < I; ++i) {
      if (g.data(i).is_protected) continue;
      int d = -1;
      for (int c : g.consumers(i)) d = std::max(d, useful[ix(c)]);
      dead[ix(i)] = d;
    }
    // Fixed data: alive from its first producer's step to its last related step, freed there
    // unless protected.
    auto fixed_alive = [&](int t, int i) {
      return t > first[ix(i)] && (g.data(i).is_protected || t <= last[ix(i)]);
    };
    // P[t][i] as expressions (constants for sources, fixed data, and before the first producer).
    auto& P = b.P;
    P.assign(ix(T), std::vector<linear_expr>(ix(I)));
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < I; ++i) {
        if (g.is_source(i))
          P[ix(t)][ix(i)] = linear_expr(1.0);
        else if (fixed[ix(i)])
          P[ix(t)][ix(i)] = linear_expr(fixed_alive(t, i) ? 1.0 : 0.0);
        else if (t > first[ix(i)] && t <= dead[ix(i)])
          P[ix(t)][ix(i)] = m.add_binary();
      }
    // S[t][i][pos] for producer pos of i (0 when t <= producer). With one producer, the
    // contribution is there exactly when the data is alive: S is P (no variables, no transitions).
    auto& S = b.S;
    S.assign(ix(T), {});
    for (int t = 0; t < T; ++t) {
      S[ix(t)].resize(ix(I));
      for (int i = 0; i < I; ++i) {
        const auto pr = g.producers(i);
        S[ix(t)][ix(i)].resize(pr.size());
        for (std::size_t p = 0; p < pr.size(); ++p)
          if (pr.size() == 1)
            S[ix(t)][ix(i)][p] = P[ix(t)][ix(i)];
          else if (fixed[ix(i)])
            S[ix(t)][ix(i)][p] = linear_expr(t > pr[p] && fixed_alive(t, i) ? 1.0 : 0.0);
          else if (t > pr[p])
            S[ix(t)][ix(i)][p] = m.add_binary();
      }
    }
    // create[t][i][k] (k producer <= t), del[t][i][k] (k related <= t, not protected), at the
    // steps that can run.
    auto& cre = b.cre;
    cre.assign(ix(T), std::vector<steps>(ix(I)));
    b.del.assign(ix(T), std::vector<steps>(ix(I)));
    auto find = [](const steps& v, int k) -> linear_expr {
      const linear_expr* x = at_step(v, k);
      return x ? *x : linear_expr();
    };
    for (int t = 0; t < T; ++t) {
      if (past_deadline()) return out_of_time;
      for (int i = 0; i < I; ++i) {
        for (int k : rel[ix(i)]) {
          if (k > t) break;
          if (!can_run(t, k)) continue;
          const auto pr = g.producers(i);
          const bool producer = std::find(pr.begin(), pr.end(), k) != pr.end();
          const bool freeable = !g.data(i).is_protected;
          if (fixed[ix(i)]) {  // here k == t
            if (producer && k == first[ix(i)]) cre[ix(t)][ix(i)].push_back({k, linear_expr(1.0)});
            if (freeable && k == last[ix(i)]) b.del[ix(t)][ix(i)].push_back({k, linear_expr(1.0)});
            continue;
          }
          if (producer && b.normal_makes[ix(k)] == i) {
            cre[ix(t)][ix(i)].push_back({k, R(t, k)});  // the normal run is the phantom's making
          } else if (producer) {
            variable c = m.add_binary();
            m.add(linear_expr(c) <= prodrun(t, k, i));
            cre[ix(t)][ix(i)].push_back({k, c});
          }
          if (freeable) {
            variable d = m.add_binary();
            m.add(linear_expr(d) <= run(t, k));
            b.del[ix(t)][ix(i)].push_back({k, d});
          }
        }
      }
    }

    // Liveness, dependencies, S and P transitions.
    for (int t = 0; t < T; ++t) {
      if (past_deadline()) return out_of_time;
      for (int i = 0; i < I; ++i) {
        const auto pr = g.producers(i);
        const auto& D = b.del[ix(t)][ix(i)];
        const bool multi = pr.size() > 1;
        linear_expr alive = P[ix(t)][ix(i)];
        linear_expr freed_before;  // frees at steps < k
        for (int k : rel[ix(i)]) {
          if (k > t) break;
          if (!can_run(t, k)) continue;
          const linear_expr c = find(cre[ix(t)][ix(i)], k);
          const linear_expr d = find(D, k);
          alive += c;
          const linear_expr before_free = alive;
          const bool producer = std::find(pr.begin(), pr.end(), k) != pr.end();
          // No allocation of what is alive (a free comes after it), and no free of what is not.
          // With one producer, which comes before the consumers, only the producer's step can
          // allocate and the frees only lower `alive`: the rows at the other steps follow from
          // the producer's and from P[t+1] >= 0 (or the end row).
          if (multi || producer) m.add(before_free <= 1);
          alive -= d;
          if (multi) m.add(alive >= 0);  // (alive <= 1 follows from before_free <= 1)
          if (producer) {
            m.add(before_free >= prodrun(t, k, i));
            const auto p =
                static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
            if (multi)  // never sum a contribution twice
              m.add(prodrun(t, k, i) + S[ix(t)][ix(i)][p] <= 1 + freed_before);
          } else {  // consumer
            m.add(before_free >= run(t, k));
            // Every contribution, kept or made in the stage; with one producer it is the row
            // above (create <= the producer's run).
            for (std::size_t p = 0; p < pr.size() && multi; ++p) {
              linear_expr have = S[ix(t)][ix(i)][p];
              if (pr[p] <= t) have += prodrun(t, pr[p], i);
              m.add(run(t, k) <= have);
            }
            if (multi)
              for (const auto& [kk, x] : D)
                if (kk < k) m.add(x + run(t, k) <= 1);
          }
          freed_before += d;
        }
        if (t + 1 < T) {
          if (!g.is_source(i)) m.add(P[ix(t + 1)][ix(i)] == alive);
          for (std::size_t p = 0; p < pr.size() && multi; ++p) {
            const int k = pr[p];
            if (k > t) continue;
            const linear_expr s1 = S[ix(t + 1)][ix(i)][p];
            const linear_expr s0 = S[ix(t)][ix(i)][p];
            const linear_expr made = prodrun(t, k, i);
            m.add(s1 <= s0 + made);
            m.add(s1 <= P[ix(t + 1)][ix(i)]);
            linear_expr late, all;
            for (const auto& [kk, x] : D) {
              all += x;
              if (kk >= k) {
                m.add(s1 <= 1 - x);
                late += x;
              } else {
                m.add(s1 <= 1 - x + made);
              }
            }
            m.add(s1 >= made - late);
            m.add(s1 >= s0 - all);
          }
        } else if (!g.is_source(i)) {
          m.add(alive == (g.data(i).is_protected ? 1.0 : 0.0));
        }
      }
    }

    // Memory.
    b.U.assign(ix(T), {});
    std::vector<linear_expr> made_at, gone_at;  // [k]: what step k of stage t allocates, frees
    for (int t = 0; t < T; ++t) {
      if (past_deadline()) return out_of_time;
      linear_expr prev;
      for (int i = 0; i < I; ++i) prev += sz(i) * P[ix(t)][ix(i)];
      made_at.assign(ix(t + 1), linear_expr());
      gone_at.assign(ix(t + 1), linear_expr());
      for (int i = 0; i < I; ++i) {
        for (const auto& [k, x] : cre[ix(t)][ix(i)]) made_at[ix(k)] += sz(i) * x;
        for (const auto& [k, x] : b.del[ix(t)][ix(i)]) gone_at[ix(k)] += sz(i) * x;
      }
      for (int k = 0; k <= t; ++k) {
        if (!can_run(t, k)) {  // nothing happens at this step: U is the previous step's
          b.U[ix(t)].push_back(variable{});
          continue;
        }
        const linear_expr& made = made_at[ix(k)];
        const linear_expr& gone = gone_at[ix(k)];
        const auto& n = g.compute(k);
        const linear_expr tmp =
            units(n.overhead, unit) * R(t, k) + units(n.fast_overhead, unit) * b.F[ix(t)][ix(k)];
        m.add(prev + made + tmp <= cap);
        variable u = m.add_continuous(0, milp::infinity);
        m.add(linear_expr(u) == prev + made - gone);
        b.U[ix(t)].push_back(u);
        prev = u;
      }
    }

    // Objective: the makespan, in units of time_scale seconds.
    b.time_scale = time_unit(g);
    linear_expr obj;
    if (!feasibility)
      for (int t = 0; t < T; ++t)
        for (int k = 0; k <= t; ++k)
          obj += g.compute(k).time / b.time_scale * R(t, k) +
                 g.compute(k).fast_time / b.time_scale * b.F[ix(t)][ix(k)];
    m.minimize(obj);
    if (past_deadline()) return out_of_time;
    return b;
  }

  static std::size_t ix(int v) { return static_cast<std::size_t>(v); }

  /// What a replay tracks: which data is alive, and which contributions each holds.
  struct memory_state {
    std::vector<char> alive;
    std::vector<std::vector<char>> done;  // [i][producer position]
    /// At the start: the sources alive, nothing else.
    static memory_state initial(const graph& g) {
      memory_state m{std::vector<char>(ix(g.data_count()), 0), {}};
      m.done.resize(ix(g.data_count()));
      for (int i = 0; i < g.data_count(); ++i) {
        m.done[ix(i)].assign(g.producers(i).size(), 0);
        if (g.is_source(i)) m.alive[ix(i)] = 1;
      }
      return m;
    }
  };

  /// Algorithm 4 over an integral solution, replaying the state to free an alive output before
  /// its recompute.
  [[nodiscard]] result<schedule> extract(const graph& g, const built& b,
                                               const milp::solution& s) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    auto on = [&](const milp::linear_expr& e) { return s.value(e) > 0.5; };
    schedule out;
    memory_state state = memory_state::initial(g);  // not a structured binding: lambdas use it
    auto& alive = state.alive;
    auto& done = state.done;
    for (int t = 0; t < T; ++t)
      for (int k = 0; k <= t; ++k) {
        const bool normal = on(b.R[ix(t)][ix(k)]);
        const bool fast = !normal && on(b.F[ix(t)][ix(k)]);
        if (!normal && !fast) continue;
        for (int i : g.outputs(k)) {
          if (fast && g.data(i).kind == data_kind::phantom) continue;
          const auto pr = g.producers(i);
          const auto p = static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
          if (alive[ix(i)] && done[ix(i)][p]) {
            if (pr.size() > 1 || g.data(i).is_protected)
              return error{status::solver_error,
                           "checkmate: the MILP solution sums a contribution to data " +
                               std::to_string(i) + " twice (a bug in the model)",
                           {}};
            out.ops.push_back(instruction::free(i));
            alive[ix(i)] = 0;
            std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
          }
          alive[ix(i)] = 1;
          done[ix(i)][p] = 1;
        }
        out.ops.push_back(fast ? instruction::fast_forward(k)
                               : instruction::compute(k));
        out.predicted_time += fast ? g.compute(k).fast_time : g.compute(k).time;
        for (int i = 0; i < I; ++i)
          for (const auto& [kk, x] : b.del[ix(t)][ix(i)])
            if (kk == k && on(x)) {
              out.ops.push_back(instruction::free(i));
              alive[ix(i)] = 0;
              std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
            }
      }
    return out;
  }

  /// The MILP's values for a schedule (see "Warm start" above); invalid_problem when the
  /// schedule does not follow the stage model.
  [[nodiscard]] result<std::vector<double>> start_values(const graph& g, const built& b,
                                                         const schedule& s) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    auto bad = [&](const std::string& why) {
      return error{status::invalid_problem,
                   "checkmate: the warm start does not fit Checkmate's stage model: " + why +
                       " (stage t runs some of c_0..c_t, each once and in index order, and ends "
                       "with the first run of c_t)",
                   {}};
    };
    auto cname = [&](int c) { return "'" + g.compute(c).name + "' (c" + std::to_string(c) + ")"; };
    // mode[t][k]: 0 idle, 1 normal, 2 fast; frees[t][k]: data freed after step (t,k).
    std::vector<std::vector<char>> mode(ix(T));
    std::vector<std::vector<std::vector<int>>> frees(ix(T));
    for (int t = 0; t < T; ++t) {
      mode[ix(t)].assign(ix(t + 1), 0);
      frees[ix(t)].resize(ix(t + 1));
    }
    std::vector<std::pair<int, int>> last_rel(ix(I), {-1, -1});  // (t, k)
    int next = 0;     // the first compute node not run yet: the current stage
    int last_k = -1;  // the last step run in the current stage
    for (const auto& ins : s.ops) {
      if (ins.op == op_kind::free) {
        const auto [t, k] = last_rel[ix(ins.node)];
        if (t < 0)
          return bad("data " + std::to_string(ins.node) +
                     " is freed before any step that reads or makes it");
        frees[ix(t)][ix(k)].push_back(ins.node);
        continue;
      }
      const int k = ins.node;
      if (next >= T) return bad(cname(k) + " runs after the last stage");
      const int t = next;
      if (k > t) return bad(cname(k) + " runs for the first time before " + cname(t));
      if (k <= last_k)
        return bad(cname(k) + " runs in stage " + std::to_string(t) + " after " + cname(last_k));
      mode[ix(t)][ix(k)] = ins.op == op_kind::fast_forward ? 2 : 1;
      for (int i : g.inputs(k)) last_rel[ix(i)] = {t, k};
      for (int i : g.outputs(k)) last_rel[ix(i)] = {t, k};
      last_k = k;
      if (k == t) {
        ++next;
        last_k = -1;
      }
    }
    if (next < T) return bad(cname(next) + " never runs");

    std::vector<double> x(b.m.num_variables(), 0.0);
    auto set = [&](const milp::linear_expr& e, double v) -> bool {
      if (e.terms.empty()) return std::abs(e.constant - v) < 0.5;
      x[e.terms.front().index] = v;
      return true;
    };
    memory_state state = memory_state::initial(g);  // not a structured binding: lambdas use it
    auto& alive = state.alive;
    auto& done = state.done;
    auto sz = [&](int i) { return units(g.data(i).size, b.unit); };
    for (int t = 0; t < T; ++t) {
      double mem = 0;
      for (int i = 0; i < I; ++i) {
        if (!set(b.P[ix(t)][ix(i)], alive[ix(i)]))
          return bad("data " + std::to_string(i) + " is alive where the model cannot hold it");
        for (std::size_t p = 0; p < done[ix(i)].size(); ++p)
          set(b.S[ix(t)][ix(i)][p], done[ix(i)][p]);
        if (alive[ix(i)]) mem += sz(i);
      }
      for (int k = 0; k <= t; ++k) {
        char md = mode[ix(t)][ix(k)];
        if (md == 2 && b.F[ix(t)][ix(k)].terms.empty()) {
          if (!fast_forward)
            return bad(cname(k) + " runs as a fast-forward but fast_forward is off");
          md = 1;  // no F (see has_fast): the normal run, which also makes its empty phantoms
        }
        if (md == 1 && b.normal_makes[ix(k)] >= 0 && alive[ix(b.normal_makes[ix(k)])])
          md = 2;  // makes no phantom: the model's fast-forward (as fast, as small)
        if (md == 1 && !set(b.R[ix(t)][ix(k)], 1))
          return bad(cname(k) + " runs again (backwards and the loss run once)");
        if (md == 2) set(b.F[ix(t)][ix(k)], 1);
        if (md != 0)
          for (int i : g.outputs(k)) {
            if (md == 2 && g.data(i).kind == data_kind::phantom) continue;
            const auto pr = g.producers(i);
            const auto p =
                static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
            if (!alive[ix(i)]) {
              if (const auto* c = at_step(b.cre[ix(t)][ix(i)], k)) set(*c, 1);
              alive[ix(i)] = 1;
              mem += sz(i);
            }
            done[ix(i)][p] = 1;
          }
        for (int i : frees[ix(t)][ix(k)]) {
          const auto* d = at_step(b.del[ix(t)][ix(i)], k);
          if (d == nullptr || !alive[ix(i)] || !set(*d, 1))
            return bad("data " + std::to_string(i) + " is freed where the model cannot free it");
          alive[ix(i)] = 0;
          std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
          mem -= sz(i);
        }
        if (const auto u = b.U[ix(t)][ix(k)]; u.index != milp::variable::none) x[u.index] = mem;
      }
    }
    if (b.m.max_violation(x) > 1e-6) {
      for (std::size_t c = 0; c < b.m.num_constraints(); ++c)
        if (b.m.constraints()[c].violation(x) > 1e-6)
          return bad("it breaks the MILP's constraint #" + std::to_string(c));
      return bad("a variable is out of its bounds");
    }
    return x;
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

  [[nodiscard]] result<checkmate_solution> solve_once(
      const graph& g, bytes budget, clock::time_point deadline, bool feasibility,
      const std::optional<schedule>& start) const {
    const auto t0 = clock::now();
    std::optional<schedule> heuristic;  // auto_warm_start's schedule, found before building
    if (!start && auto_warm_start && !feasibility)
      heuristic = relaxed_start(g, budget, seconds_left(deadline) / 4);
    // Out of time before the solver had a schedule of its own: the warm start is the best.
    auto fallback = [&]() -> result<checkmate_solution> {
      auto ok = checked(g, budget, start ? *start : *heuristic);
      if (!ok) return ok.err();
      checkmate_solution res;
      res.schedule = std::move(ok.value());
      res.optimal = false;
      res.bound = -std::numeric_limits<double>::infinity();
      res.solve_seconds = std::chrono::duration<double>(clock::now() - t0).count();
      return res;
    };
    auto bt = build(g, budget, feasibility, deadline);
    if (!bt && bt.code() == status::time_limit && (start || heuristic)) return fallback();
    if (!bt) return bt.err();
    built& b = bt.value();
    milp::options o;
    o.relative_gap = relative_gap;
    o.threads = threads;
    if (!feasibility && progress)
      o.progress = [this, scale = b.time_scale](const milp::progress_report& r) {
        milp::progress_report sec = r;
        sec.incumbent *= scale;
        sec.bound *= scale;
        progress(sec);
      };
    if (start) {
      auto x = start_values(g, b, *start);
      if (!x) return x.err();
      o.warm_start = std::move(x.value());
    } else if (heuristic) {
      if (auto x = start_values(g, b, *heuristic)) o.warm_start = std::move(x.value());
    }
    // Solve, then check in bytes (see "Memory units"): a schedule over the budget by a solver's
    // tolerance is cut off (a no-good cut: at least one integer variable differs from it; every
    // schedule within the budget satisfies it) and the MILP solved again, up to max_cuts times.
    for (int cuts = 0;; ++cuts) {
      o.time_limit = std::max(1e-3, seconds_left(deadline));
      auto sol = backend.solve(b.m, o);
      if (!sol && sol.code() == status::time_limit && (start || heuristic)) return fallback();
      if (!sol) {
        error e = sol.err();
        if (e.code == status::infeasible)
          e.message = "checkmate: no schedule of graph '" + g.name + "' fits in " +
                      std::to_string(budget) + " bytes (" + e.message +
                      ")" + find_minimum_hint();
        else
          e.message = "checkmate: " + e.message;
        return e;
      }
      const milp::solution& s = sol.value();
      auto out = extract(g, b, s);
      if (!out) return out.err();
      const auto rep =
          sim::simulate(g, out.value(), {.budget = budget, .record_timeline = false});
      if (rep.first_violation &&
          rep.first_violation->kind == sim::violation_kind::over_budget) {
        constexpr int max_cuts = 64;
        if (cuts < max_cuts && seconds_left(deadline) > 0) {
          auto covers = cover_cuts(g, b, s, budget);
          if (covers.empty()) covers.push_back(no_good(b.m, s.values));
          for (auto& c : covers) b.m.add(std::move(c));
          continue;
        }
        if (start || heuristic) return fallback();
        return error{status::solver_error,
                     "checkmate: after " + std::to_string(cuts) +
                         " rounds of cuts the MILP still answers schedules over the budget in "
                         "bytes (" +
                         rep.first_violation->message +
                         "); give a budget a little larger, or a warm start",
                     {}};
      }
      auto ok = checked(rep, std::move(out.value()));
      if (!ok) return ok.err();
      checkmate_solution res;
      res.schedule = std::move(ok.value());
      res.optimal = s.is_optimal();
      res.bound = s.bound * b.time_scale;
      res.solve_seconds = std::chrono::duration<double>(clock::now() - t0).count();
      return res;
    }
  }

  /// Cover cuts for the steps of an integral solution whose memory, in bytes, exceeds the
  /// budget (the MILP let them through by its tolerance): at such a step (t, k), a smallest set
  /// C of the data alive there (before the step's frees), largest first, with the op's scratch,
  /// that exceeds the budget on its own cannot be alive together again at that step:
  ///   sum_{i in C} alive(t, k, i) [+ the run variable of the op's variant] <= |C| [+ 1] - 1.
  /// Every schedule within the budget satisfies it; it cuts off every solution with that
  /// configuration, whatever its other variables (a no-good cut of the whole point cut off one
  /// at a time, and the MILP has many points that differ only where it does not matter).
  [[nodiscard]] std::vector<milp::constraint> cover_cuts(const graph& g, const built& b,
                                                          const milp::solution& s,
                                                          bytes budget) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    auto on = [&](const milp::linear_expr& e) { return s.value(e) > 0.5 ? 1 : 0; };
    std::vector<milp::constraint> out;
    std::vector<int> alive(ix(I));
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < I; ++i) alive[ix(i)] = on(b.P[ix(t)][ix(i)]);
      for (int k = 0; k <= t; ++k) {
        for (int i = 0; i < I; ++i)
          if (const auto* c = at_step(b.cre[ix(t)][ix(i)], k)) alive[ix(i)] += on(*c);
        const bool normal = on(b.R[ix(t)][ix(k)]) != 0;
        const bool fast = !normal && on(b.F[ix(t)][ix(k)]) != 0;
        if (normal || fast) {
          const auto& n = g.compute(k);
          const bytes scratch = normal ? n.overhead : n.fast_overhead;
          std::vector<std::pair<bytes, int>> items;  // (size, data; -1: the op's scratch)
          bytes mem = scratch;
          if (scratch > 0) items.push_back({scratch, -1});
          for (int i = 0; i < I; ++i)
            if (alive[ix(i)] > 0 && g.data(i).size > 0) {
              mem += g.data(i).size;
              items.push_back({g.data(i).size, i});
            }
          if (mem > budget) {
            std::sort(items.begin(), items.end(), std::greater<>());
            milp::linear_expr lhs;
            bytes sum = 0;
            double count = 0;
            for (const auto& [size, i] : items) {
              if (i < 0) {
                lhs += normal ? b.R[ix(t)][ix(k)] : b.F[ix(t)][ix(k)];
              } else {
                lhs += b.P[ix(t)][ix(i)];
                for (const auto& [kk, x] : b.cre[ix(t)][ix(i)])
                  if (kk <= k) lhs += x;
                for (const auto& [kk, x] : b.del[ix(t)][ix(i)])
                  if (kk < k) lhs -= x;
              }
              sum += size;
              count += 1;
              if (sum > budget) break;
            }
            out.push_back(lhs <= count - 1);
          }
        }
        for (int i = 0; i < I; ++i)
          if (const auto* d = at_step(b.del[ix(t)][ix(i)], k)) alive[ix(i)] -= on(*d);
      }
    }
    return out;
  }

  /// The no-good cut of an integral point: sum over the binaries at 1 of (1 - x) plus sum over
  /// those at 0 of x >= 1 (every other 0-1 point satisfies it; the model's integers are all
  /// binaries).
  static milp::constraint no_good(const milp::model& m, const std::vector<double>& x) {
    milp::linear_expr cut;
    double ones = 0;
    const auto vars = m.variables();
    for (std::size_t j = 0; j < vars.size(); ++j) {
      if (vars[j].type == milp::var_type::continuous) continue;
      if (x[j] > 0.5) {
        cut -= milp::linear_expr(milp::variable{j});
        ones += 1;
      } else {
        cut += milp::linear_expr(milp::variable{j});
      }
    }
    return cut >= 1 - ones;
  }

  // --- phase 2 and the storage patterns ---------------------------------------------------------

  /// Whether P[t][i] is a rounding decision: all data but the sources and protected data.
  static bool rounded(const graph& g, int i) { return !g.is_source(i) && !g.data(i).is_protected; }

  /// Data i kept over its life: from its first producer's stage to its last reader's.
  static void keep_over_life(const graph& g, keep_matrix& keep, int i) {
    const auto pr = g.producers(i);
    const auto co = g.consumers(i);
    const int first = *std::min_element(pr.begin(), pr.end());
    const int last = co.empty() ? g.compute_count() : *std::max_element(co.begin(), co.end());
    for (int t = first + 1; t <= last; ++t) keep[ix(t)][ix(i)] = 1;
  }

  /// A storage matrix with what is not rounded: the sources always, protected data from its
  /// first producer on.
  static keep_matrix base_keep(const graph& g) {
    const int T = g.compute_count();
    const int I = g.data_count();
    keep_matrix keep(ix(T + 1), std::vector<char>(ix(I), 0));
    for (int i = 0; i < I; ++i) {
      if (rounded(g, i)) continue;
      if (g.is_source(i)) {
        for (auto& row : keep) row[ix(i)] = 1;
        continue;
      }
      const auto pr = g.producers(i);
      const int first = *std::min_element(pr.begin(), pr.end());
      for (int t = first + 1; t <= T; ++t) keep[ix(t)][ix(i)] = 1;
    }
    return keep;
  }

  /// Phase 2: the cheapest schedule of the stage model that keeps data i alive at the start of
  /// stage t exactly when keep[t][i] (see "LP relaxation" above); nullopt when the storage
  /// needs what no schedule does: the loss again, a protected output again, a contribution to
  /// a gradient that is already summed in.
  [[nodiscard]] std::optional<schedule> derive(const graph& g,
                                                     const keep_matrix& keep) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    schedule out;
    memory_state state = memory_state::initial(g);  // not a structured binding: lambdas use it
    auto& alive = state.alive;
    auto& done = state.done;
    std::vector<char> need(ix(I)), mode;  // mode: 0 idle, 1 normal, 2 fast
    std::vector<int> last(ix(I));
    for (int t = 0; t < T; ++t) {
      const auto& keep_next = keep[ix(t + 1)];
      std::fill(need.begin(), need.end(), 0);
      for (int i = 0; i < I; ++i)
        if (keep_next[ix(i)] && !alive[ix(i)]) need[ix(i)] = 1;
      mode.assign(ix(t + 1), 0);
      for (int k = t; k >= 0; --k) {
        bool runs = k == t, phantom = false;
        for (int i : g.outputs(k))
          if (need[ix(i)]) {
            runs = true;
            phantom = phantom || g.data(i).kind == data_kind::phantom;
          }
        if (!runs) continue;
        const bool fwd = g.compute(k).kind == compute_kind::forward;
        if (k < t && g.compute(k).kind != compute_kind::forward) return std::nullopt;
        mode[ix(k)] = fwd && fast_forward && !phantom ? 2 : 1;
        for (int i : g.inputs(k))
          if (!alive[ix(i)]) need[ix(i)] = 1;
      }
      // The last step of the stage related to each data.
      std::fill(last.begin(), last.end(), -1);
      for (int k = 0; k <= t; ++k) {
        if (!mode[ix(k)]) continue;
        for (int i : g.inputs(k)) last[ix(i)] = k;
        for (int i : g.outputs(k))
          if (mode[ix(k)] == 1 || g.data(i).kind != data_kind::phantom) last[ix(i)] = k;
      }
      auto release = [&](int i) {
        out.ops.push_back(instruction::free(i));
        alive[ix(i)] = 0;
        std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
      };
      auto droppable = [&](int i) {
        return alive[ix(i)] && !keep_next[ix(i)] && !g.data(i).is_protected;
      };
      for (int i = 0; i < I; ++i)
        if (droppable(i) && last[ix(i)] < 0) release(i);
      for (int k = 0; k <= t; ++k) {
        if (!mode[ix(k)]) continue;
        const bool fast = mode[ix(k)] == 2;
        for (int i : g.outputs(k)) {
          if (fast && g.data(i).kind == data_kind::phantom) continue;
          const auto pr = g.producers(i);
          const auto p = static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
          if (alive[ix(i)] && done[ix(i)][p]) {
            if (pr.size() > 1 || g.data(i).is_protected) return std::nullopt;
            release(i);  // recomputed: allocated again at once
          }
          alive[ix(i)] = 1;
          done[ix(i)][p] = 1;
        }
        out.ops.push_back(fast ? instruction::fast_forward(k)
                               : instruction::compute(k));
        out.predicted_time += fast ? g.compute(k).fast_time : g.compute(k).time;
        for (int i : g.inputs(k))
          if (droppable(i) && last[ix(i)] == k) release(i);
        for (int i : g.outputs(k))
          if (droppable(i) && last[ix(i)] == k) release(i);
      }
    }
    return out;
  }

  /// Cheap storage patterns, all derived by phase 2, all keeping the gradients over their life:
  /// keep every forward's data over its life (store-all), or the activations only, or the data
  /// of every s-th forward (s = 2..), with or without its phantom, or nothing.
  [[nodiscard]] static std::vector<keep_matrix> heuristic_keeps(const graph& g) {
    const int T = g.compute_count();
    const int I = g.data_count();
    std::vector<int> fwd_rank(ix(T), -1);
    int n = 0;
    for (int k = 0; k < T; ++k)
      if (g.compute(k).kind == compute_kind::forward) fwd_rank[ix(k)] = n++;
    const keep_matrix base = base_keep(g);
    std::vector<keep_matrix> out;
    auto made_by_forward = [&](int i) {
      return g.compute(g.producers(i).front()).kind == compute_kind::forward;
    };
    auto pattern = [&](auto chosen) {
      keep_matrix keep = base;
      for (int i = 0; i < I; ++i)
        if (rounded(g, i) && (!made_by_forward(i) || chosen(i))) keep_over_life(g, keep, i);
      out.push_back(std::move(keep));
    };
    auto is_phantom = [&](int i) { return g.data(i).kind == data_kind::phantom; };
    auto rank = [&](int i) { return fwd_rank[ix(g.producers(i).front())]; };
    pattern([](int) { return true; });
    pattern([&](int i) { return !is_phantom(i); });
    for (int s = 2; s <= std::max(2, n); ++s) {
      pattern([&](int i) { return rank(i) % s == s - 1; });
      pattern([&](int i) { return rank(i) % s == s - 1 && !is_phantom(i); });
    }
    pattern([](int) { return false; });
    return out;
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
      auto s = derive(g, keep);
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
    for (const auto& keep : heuristic_keeps(g)) consider(keep);

    // Checkmate's allowance: the LP at the budget, then at 90%, 80%, ... of it while no rounding
    // fits (a tighter LP keeps less, so its roundings peak lower).
    for (int step = 0; step <= 9; ++step) {
      const bytes b = step == 0 ? budget : budget - budget / 10 * step;
      if (step > 0 && (best || b < floor)) break;
      const double left = time_limit - elapsed();
      if (!(left > 0)) break;
      auto bmt = build(g, b, false, deadline_after(t0, time_limit));
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
                           std::to_string(budget) +
                           " bytes: even the LP relaxation is "
                           "infeasible" + find_minimum_hint(),
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
        keep_matrix keep = base_keep(g);
        for (int t = 0; t < T; ++t)
          for (int i = 0; i < I; ++i) {
            const auto& e = bm.P[ix(t)][ix(i)];
            if (!rounded(g, i)) continue;
            keep[ix(t)][ix(i)] = e.terms.empty() ? (e.constant > 0.5 ? 1 : 0)
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
          if (rounded(g, i) && g.compute(g.producers(i).front()).kind != compute_kind::forward)
            keep_over_life(g, keep, i);
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
    res.schedule = std::move(*best);
    res.optimal = false;
    res.bound = std::isfinite(lp_bound) ? std::min(lp_bound, res.schedule.predicted_time)
                                        : -std::numeric_limits<double>::infinity();
    res.solve_seconds = elapsed();
    return res;
  }
};

}  // namespace remat
