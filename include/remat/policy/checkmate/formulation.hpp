#pragma once
// checkmate's formulation: the RK-Checkmate MILP over a training graph (rockmate-spec §3), its
// extraction into a schedule, the warm start and the cover cuts: independent of the MILP backend,
// and not a template (the policy, policy/checkmate.hpp, names the backend). The measurements and
// alternatives behind these decisions: docs/checkmate.md.
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
// the budget down.
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
// The schedule (Algorithm 4): for t, for k <= t: compute (or fast_forward) c_k if it runs, then
// its frees. The ILP lets c_k run while an output of it is alive (an activation, or a phantom
// under the normal variant): the schedule frees it just before the recompute (the peak is the
// same: the recompute allocates it again at once). Every schedule is replayed in
// sim::simulate; one the simulator rejects, or whose makespan or peak differs from the plan,
// comes back as solver_error.
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
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::detail {

/// The MILP of checkmate (its `fast_forward` knob decides whether forwards get a fast variant).
struct checkmate_formulation {
  bool fast_forward = true;

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
    const bytes u = memory_gcd(g);
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
        out.ops.push_back(fast ? instruction::fast_forward(k) : instruction::compute(k));
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
};

}  // namespace remat::detail
