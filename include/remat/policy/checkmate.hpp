#pragma once
// checkmate: the RK-Checkmate MILP over a training graph (rockmate-spec §3), solved by a MILP
// backend (remat::milp::lpsolve or remat::milp::cbc; this header includes neither, so it needs
// no solver library until a backend is named).
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
//     alive at the end; protected data never freed; the loss runs once;
//   * U[t][-1] = sum_i M_i P[t][i] (the protected input counted, as the simulator does);
//     U[t][k] = U[t][k-1] + created - freed; peak of the step U[t][k] + freed + overhead <= budget.
// Frees are not forced to be as early as possible (Checkmate's hazard constraints): the
// objective ignores memory, and any placement the constraints allow is a valid program.
// Memory is counted in units of the gcd of every size and overhead, so the budget constraint is
// exact in integers.
//
// The objective is sum_{t,k} time_k R[t][k] + fast_time_k F[t][k]: the makespan itself.
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
// default, it costs several solves); infeasible otherwise; time_limit when the limit passed
// before any schedule was found. A time-limited solve that found a schedule returns ok: whether
// it is proven optimal is in solve_detailed()'s `optimal` (graph_schedule, plain data owned by
// the schedule layer, carries no solver status).
//
// No LP relaxation + rounding (Checkmate's approximation) here: the policy solves the MILP.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/graph_schedule.hpp>
#include <remat/sim/graph_simulate.hpp>

namespace remat {

/// What solve_detailed returns besides the schedule.
struct checkmate_solution {
  graph_schedule schedule;
  bool optimal = false;  ///< proven optimal (within relative_gap); false when the limit stopped it
  double bound = 0;      ///< the solver's best bound on the makespan (seconds)
  double solve_seconds = 0;
};

template <milp::MilpBackend Backend>
struct checkmate {
  static constexpr std::string_view name = "checkmate";

  /// Wall-clock limit of each MILP solve, seconds; not finite = none.
  double time_limit = std::numeric_limits<double>::infinity();
  /// Stop when the gap between the best schedule and the bound is at most this (relative).
  double relative_gap = 0;
  /// Lets forwards run as fast-forwards (no phantom): R' of the thesis version.
  bool fast_forward = true;
  /// On an infeasible budget, find the minimum by bisection (several MILP solves).
  bool find_minimum = false;
  /// Forwarded to the backend: {incumbent, bound, elapsed} during the solve (seconds of makespan).
  std::function<void(const milp::progress_report&)> progress = {};
  /// Solver threads (CBC from 2 on).
  int threads = 1;
  Backend backend = {};

  [[nodiscard]] result<graph_schedule> solve(const graph& g, bytes budget) const {
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
    const bytes floor = lower_bound(g);
    if (budget < floor && !find_minimum)
      return error{status::infeasible,
                   "checkmate: no schedule of graph '" + g.name + "' fits in " +
                       std::to_string(budget) + " bytes: some compute node needs at least " +
                       std::to_string(floor) +
                       " bytes (the graph inputs, its own inputs and outputs, its overhead); set "
                       "find_minimum to get the smallest budget that fits",
                   {}};
    auto r = budget < floor ? result<checkmate_solution>(error{status::infeasible, "", {}})
                            : solve_once(g, budget, time_limit, false);
    if (r || r.code() != status::infeasible || !find_minimum) return r;
    // Bisection between the infeasible budget and store-all's peak (always feasible).
    graph_schedule sa{store_all_program(g), g.ideal_time(), 0};
    bytes hi = sim::simulate(g, sa, {.budget = std::numeric_limits<bytes>::max()}).peak;
    bytes lo = std::max(budget, floor - 1);  // infeasible
    if (hi <= lo) return r;
    while (hi - lo > 1) {
      const bytes mid = lo + (hi - lo) / 2;
      auto m = solve_once(g, mid, time_limit, true);
      if (m) hi = mid;
      else if (m.code() == status::infeasible) lo = mid;
      else return r;  // cannot tell: keep the plain answer
    }
    return error{status::budget_too_small,
                 "checkmate: no schedule fits in " + std::to_string(budget) +
                     " bytes; the smallest budget with a schedule is " + std::to_string(hi) +
                     " bytes",
                 hi};
  }

 private:
  struct built {
    milp::model m;
    std::vector<std::vector<milp::variable>> R, F;  // [t][k]; F empty where none
    std::vector<std::vector<std::vector<std::pair<int, milp::variable>>>> del;  // [t][i] -> (k,v)
  };

  /// A budget below which no schedule exists: for each compute node, the graph inputs plus its
  /// own inputs and outputs plus its overhead (a forward's cheaper variant).
  static bytes lower_bound(const graph& g) {
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

  static bytes gcd_unit(const graph& g) {
    bytes u = 0;
    for (const auto& d : g.data_nodes()) u = std::gcd(u, d.size);
    for (const auto& c : g.compute_nodes()) u = std::gcd(std::gcd(u, c.overhead), c.fast_overhead);
    return u > 0 ? u : 1;
  }

  [[nodiscard]] result<checkmate_solution> solve_once(const graph& g, bytes budget, double limit,
                                                      bool feasibility) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    const int loss = g.loss();
    const bytes unit = gcd_unit(g);
    const double cap = static_cast<double>(budget / unit);
    auto sz = [&](int i) { return static_cast<double>(g.data(i).size / unit); };
    auto ix = [](int v) { return static_cast<std::size_t>(v); };
    using milp::linear_expr;
    using milp::variable;

    built b;
    milp::model& m = b.m;
    const bool ff = fast_forward;
    auto is_fwd = [&](int k) { return g.compute(k).kind == compute_kind::forward; };

    b.R.assign(ix(T), {});
    b.F.assign(ix(T), {});
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k <= t; ++k) {
        variable r = m.add_binary();
        if (k == loss && t != loss) m.set_bounds(r, 0, 0);
        b.R[ix(t)].push_back(r);
        if (ff && is_fwd(k)) b.F[ix(t)].push_back(m.add_binary());
        else b.F[ix(t)].push_back(variable{});
      }
    }
    auto has_f = [&](int t, int k) { return ff && is_fwd(k) && t >= k; };
    auto R = [&](int t, int k) -> linear_expr { return b.R[ix(t)][ix(k)]; };
    auto run = [&](int t, int k) -> linear_expr {
      linear_expr e = R(t, k);
      if (has_f(t, k)) e += b.F[ix(t)][ix(k)];
      return e;
    };
    auto prodrun = [&](int t, int k, int i) -> linear_expr {
      return g.data(i).kind == data_kind::phantom ? R(t, k) : run(t, k);
    };
    for (int t = 0; t < T; ++t) {
      m.add(run(t, t) == 1);
      for (int k = 0; k < t; ++k)
        if (has_f(t, k)) m.add(run(t, k) <= 1);
    }

    // Per data node: related steps, P, S, create, del.
    std::vector<std::vector<int>> rel(ix(I));
    for (int i = 0; i < I; ++i) {
      auto& v = rel[ix(i)];
      for (int k : g.producers(i)) v.push_back(k);
      for (int k : g.consumers(i)) v.push_back(k);
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
    // P[t][i] as expressions (constants for sources and before the first producer).
    std::vector<std::vector<linear_expr>> P(ix(T), std::vector<linear_expr>(ix(I)));
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < I; ++i) {
        if (g.is_source(i)) P[ix(t)][ix(i)] = linear_expr(1.0);
        else {
          const int first = *std::min_element(g.producers(i).begin(), g.producers(i).end());
          if (t > first) P[ix(t)][ix(i)] = m.add_binary();
        }
      }
    // S[t][i][pos] for producer pos of i (0 when t <= producer).
    std::vector<std::vector<std::vector<linear_expr>>> S(ix(T));
    for (int t = 0; t < T; ++t) {
      S[ix(t)].resize(ix(I));
      for (int i = 0; i < I; ++i) {
        const auto pr = g.producers(i);
        S[ix(t)][ix(i)].resize(pr.size());
        for (std::size_t p = 0; p < pr.size(); ++p)
          if (t > pr[p]) S[ix(t)][ix(i)][p] = m.add_binary();
      }
    }
    // create[t][i][k] (k producer <= t), del[t][i][k] (k related <= t, not protected).
    std::vector<std::vector<std::vector<std::pair<int, variable>>>> cre(
        ix(T), std::vector<std::vector<std::pair<int, variable>>>(ix(I)));
    b.del.assign(ix(T), std::vector<std::vector<std::pair<int, variable>>>(ix(I)));
    auto find = [](const std::vector<std::pair<int, variable>>& v, int k) -> linear_expr {
      for (const auto& [kk, x] : v)
        if (kk == k) return x;
      return {};
    };
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < I; ++i) {
        for (int k : rel[ix(i)]) {
          if (k > t) break;
          const auto pr = g.producers(i);
          const bool producer = std::find(pr.begin(), pr.end(), k) != pr.end();
          if (producer) {
            variable c = m.add_binary();
            m.add(linear_expr(c) <= prodrun(t, k, i));
            cre[ix(t)][ix(i)].push_back({k, c});
          }
          if (!g.data(i).is_protected) {
            variable d = m.add_binary();
            m.add(linear_expr(d) <= run(t, k));
            b.del[ix(t)][ix(i)].push_back({k, d});
          }
        }
      }

    // Liveness, dependencies, S and P transitions.
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < I; ++i) {
        const auto pr = g.producers(i);
        const auto& D = b.del[ix(t)][ix(i)];
        const bool multi = pr.size() > 1;
        linear_expr alive = P[ix(t)][ix(i)];
        linear_expr freed_before;  // frees at steps < k
        for (int k : rel[ix(i)]) {
          if (k > t) break;
          const linear_expr c = find(cre[ix(t)][ix(i)], k);
          const linear_expr d = find(D, k);
          alive += c;
          const linear_expr before_free = alive;
          m.add(before_free <= 1);  // no allocation of what is alive (a free comes after it)
          alive -= d;
          m.add(alive >= 0);
          m.add(alive <= 1);
          const bool producer = std::find(pr.begin(), pr.end(), k) != pr.end();
          if (producer) {
            m.add(before_free >= prodrun(t, k, i));
            const auto p = static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
            if (multi)  // never sum a contribution twice
              m.add(prodrun(t, k, i) + S[ix(t)][ix(i)][p] <= 1 + freed_before);
          } else {  // consumer
            m.add(before_free >= run(t, k));
            for (std::size_t p = 0; p < pr.size(); ++p) {
              linear_expr have = S[ix(t)][ix(i)][p];
              if (pr[p] <= t) have += prodrun(t, pr[p], i);
              m.add(run(t, k) <= have);
            }
            if (multi)
              for (const auto& [kk, x] : D)
                if (kk < k) m.add(linear_expr(x) + run(t, k) <= 1);
          }
          freed_before += d;
        }
        if (t + 1 < T) {
          if (!g.is_source(i)) m.add(P[ix(t + 1)][ix(i)] == alive);
          for (std::size_t p = 0; p < pr.size(); ++p) {
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
                m.add(s1 <= 1 - linear_expr(x));
                late += x;
              } else {
                m.add(s1 <= 1 - linear_expr(x) + made);
              }
            }
            m.add(s1 >= made - late);
            m.add(s1 >= s0 - all);
          }
        } else if (!g.is_source(i)) {
          m.add(alive == (g.data(i).is_protected ? 1.0 : 0.0));
        }
      }

    // Memory.
    for (int t = 0; t < T; ++t) {
      linear_expr prev;
      for (int i = 0; i < I; ++i) prev += sz(i) * P[ix(t)][ix(i)];
      for (int k = 0; k <= t; ++k) {
        linear_expr made, gone;
        for (int i = 0; i < I; ++i) {
          made += sz(i) * find(cre[ix(t)][ix(i)], k);
          gone += sz(i) * find(b.del[ix(t)][ix(i)], k);
        }
        const auto& n = g.compute(k);
        linear_expr tmp = static_cast<double>(n.overhead / unit) * R(t, k);
        if (has_f(t, k))
          tmp += static_cast<double>(n.fast_overhead / unit) * linear_expr(b.F[ix(t)][ix(k)]);
        m.add(prev + made + tmp <= cap);
        variable u = m.add_continuous(0, milp::infinity);
        m.add(linear_expr(u) == prev + made - gone);
        prev = u;
      }
    }

    // Objective: the makespan.
    linear_expr obj;
    if (!feasibility)
      for (int t = 0; t < T; ++t)
        for (int k = 0; k <= t; ++k) {
          obj += g.compute(k).time * R(t, k);
          if (has_f(t, k)) obj += g.compute(k).fast_time * linear_expr(b.F[ix(t)][ix(k)]);
        }
    m.minimize(obj);

    milp::options o;
    o.time_limit = limit;
    o.relative_gap = relative_gap;
    o.threads = threads;
    if (!feasibility) o.progress = progress;
    auto sol = backend.solve(m, o);
    if (!sol) {
      error e = sol.err();
      if (e.code == status::infeasible)
        e.message = "checkmate: no schedule of graph '" + g.name + "' fits in " +
                    std::to_string(budget) + " bytes (" + e.message +
                    "); set find_minimum to get the smallest budget that fits";
      else
        e.message = "checkmate: " + e.message;
      return e;
    }
    const milp::solution& s = sol.value();
    auto on = [&](variable v) { return v.index != variable::none && s[v] > 0.5; };

    // Algorithm 4, replaying the state to free an alive output before its recompute.
    graph_schedule out;
    std::vector<char> alive(ix(I), 0);
    std::vector<std::vector<char>> done(ix(I));
    for (int i = 0; i < I; ++i) {
      done[ix(i)].assign(g.producers(i).size(), 0);
      if (g.is_source(i)) alive[ix(i)] = 1;
    }
    for (int t = 0; t < T; ++t)
      for (int k = 0; k <= t; ++k) {
        const bool normal = on(b.R[ix(t)][ix(k)]);
        const bool fast = !normal && has_f(t, k) && on(b.F[ix(t)][ix(k)]);
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
            out.ops.push_back(graph_instruction::free(i));
            alive[ix(i)] = 0;
            std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
          }
          alive[ix(i)] = 1;
          done[ix(i)][p] = 1;
        }
        out.ops.push_back(fast ? graph_instruction::fast_forward(k) : graph_instruction::compute(k));
        out.predicted_time += fast ? g.compute(k).fast_time : g.compute(k).time;
        for (int i = 0; i < I; ++i)
          for (const auto& [kk, x] : b.del[ix(t)][ix(i)])
            if (kk == k && on(x)) {
              out.ops.push_back(graph_instruction::free(i));
              alive[ix(i)] = 0;
              std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
            }
      }

    const auto rep = sim::simulate(g, out, {.budget = budget});
    if (!rep.valid)
      return error{status::solver_error,
                   "checkmate: the schedule built from the MILP solution is rejected by the "
                   "simulator: " +
                       (rep.first_violation ? rep.first_violation->message : std::string("?")),
                   {}};
    const double tol = 1e-9 * std::max(1.0, std::abs(rep.makespan));
    if (std::abs(rep.makespan - out.predicted_time) > tol)
      return error{status::solver_error,
                   "checkmate: the schedule's simulated makespan differs from the plan", {}};
    out.predicted_peak = rep.peak;
    checkmate_solution res;
    res.schedule = std::move(out);
    res.optimal = s.is_optimal();
    res.bound = s.bound;
    res.solve_seconds = s.seconds;
    return res;
  }
};

}  // namespace remat
