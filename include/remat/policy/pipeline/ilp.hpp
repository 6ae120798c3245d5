#pragma once
// The ILP of [Shilova21, ch. 6] for PIPE_{S^1&A} on a chain of stages, MadPipe's phase 2
// [Shilova21, ch. 7]: given the partition into stages (layer intervals), it chooses the
// allocation of the stages to at most P processors (any stages may share one, not only
// neighbours), the start of every op in a 1-periodic pattern and the period T, minimising T under
// the memory M of each processor. A stage is one layer of the ILP's chain: its F and B take the
// sums of its layers' times, it sends a_j (delta_j back) for its last layer j, it stores
// sum a_{l-1} over its layers per activation, and it holds the sum of their weights.
//
// The formulation follows ch. 6 on stages, with remat's memory model (sim/pipeline.hpp) and the
// repairs of its garbled parts (docs/pipeline.md, "The ILP (phase 2)"). The solver's times are
// cleaned to exact ones for its discrete choices (allocation, orders, shifts), the plan is built
// from one mini-batch's timeline, and the simulator replays it: a plan it rejects is an error,
// never an answer. Opt-in: include a backend (<remat/milp/cbc.hpp>) next to this header.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace remat {

struct pipeline_ilp_options {
  /// Wall-clock limit of the MILP solve in seconds (60: MadPipe's phase 2); not finite = none.
  /// Stopped by it, the best plan found is returned (not optimal, with its gap), or time_limit.
  double time_limit = 60;
  /// Only plans of period <= this (e.g. phase 1's): a constraint on T, which also tightens the
  /// formulation. No plan that good: status::infeasible.
  std::optional<seconds> period_bound = std::nullopt;
  /// Stop once (T - bound) / T <= relative_gap; 0 proves optimality.
  double relative_gap = 0;
  /// Solver threads (milp::options::threads).
  int threads = 1;
  /// Branch-and-bound nodes after which the search stops (0 = none): a limit that does not
  /// depend on the machine's speed.
  std::int64_t node_limit = 0;
  /// A 1-periodic plan of the same stages (phase 1's, or 1F1B*'s on a contiguous allocation):
  /// the solver's first incumbent, so that a stop on the time limit returns a plan at least as
  /// good. Checked by the simulator; one that is not valid is an error. It is left unused (see
  /// pipeline_ilp_result::warm_start_used) when its period exceeds period_bound, or when two
  /// consecutive ops of a mini-batch lie more than two periods apart in it (the ILP's shifts
  /// between consecutive ops are 0, 1 or 2).
  std::optional<pipeline_plan> warm_start = std::nullopt;
  /// Without warm_start: try at most this many contiguous allocations (neighbouring stages merged
  /// into at most P groups, one per processor) with 1F1B* (Alg. 7), and the best plan found, its
  /// groups split back into the stages, is the warm start. 0: none. All of them are tried when
  /// there are at most this many, else none (64: up to 8 stages on 4 processors).
  int contiguous_start_limit = 64;
  /// Forwarded to the backend, in seconds of period: {incumbent, bound, elapsed}.
  std::function<void(const milp::progress_report&)> progress = {};
};

struct pipeline_ilp_result {
  pipeline_plan plan;            ///< 1-periodic, replayed valid by sim::simulate_pipeline
  bool optimal = false;          ///< proven optimal among the 1-periodic plans of this partition
  seconds bound = 0;             ///< proven lower bound on that optimum
  double gap = 0;                ///< (plan.period - bound) / plan.period, 0 when optimal
  double solve_seconds = 0;      ///< the MILP solve's wall-clock time
  int processors_used = 0;       ///< processors 0..processors_used-1 hold stages
  std::vector<int> nca;          ///< per stage, from the replay
  std::vector<bytes> peaks;      ///< per processor, from the replay
  std::string solver_message;    ///< what the backend said
  bool warm_start_used = false;  ///< a warm start (given, or 1F1B*'s) was handed to the solver
};

namespace detail {

/// The most stages the ILP takes: its model grows as the cube of them.
inline constexpr int pipe_ilp_max_stages = 40;

/// One op of the ILP's chain of a mini-batch: F_1, [act_1], F_2, ..., F_N, B_N, [grad_{N-1}],
/// B_{N-1}, ..., B_1. Transfers of zero length (free links, empty tensors) are left out.
struct pipe_ilp_op {
  pipeline_op_kind kind = pipeline_op_kind::forward;
  int stage = 1;  ///< a transfer: the stage before its boundary
  seconds d = 0;  ///< duration (a transfer: when its boundary crosses processors)
  [[nodiscard]] bool transfer() const {
    return kind == pipeline_op_kind::send_activation || kind == pipeline_op_kind::send_gradient;
  }
};

struct pipe_ilp_instance {
  int n = 0;                       ///< stages
  std::vector<seconds> uf, ub;     ///< per stage (index s - 1)
  std::vector<bytes> weights;      ///< sum W_l per stage
  std::vector<bytes> stored;       ///< per stage: what it keeps per activation (sim::stage_cost)
  std::vector<bytes> working;      ///< per stage: a recomputing B's working memory
  std::vector<bytes> buffer;       ///< per boundary s (index s - 1): a_j + delta_j
  std::vector<seconds> act, grad;  ///< per boundary: transfer times
  std::vector<pipeline_stage> stages;
};

inline result<pipe_ilp_instance> pipe_ilp_read(const pipeline_problem& problem,
                                               std::span<const pipeline_stage> partition) {
  auto bad = [](std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; };
  if (auto v = validate(problem); !v) return v.err();
  const chain& c = problem.layers;
  pipe_ilp_instance in;
  for (const auto& st : partition) {
    in.stages.push_back(st);
    in.stages.back().processor = 0;
  }
  if (auto v = validate_stages(problem, in.stages); !v)
    return bad("pipeline ILP: the partition is not one: " + v.message() +
               " (give each stage's first and last layer, in chain order)");
  in.n = static_cast<int>(partition.size());
  if (in.n > pipe_ilp_max_stages)
    return bad("pipeline ILP: the partition has " + std::to_string(in.n) +
               " stages; the ILP takes at most " + std::to_string(pipe_ilp_max_stages) +
               " (its model grows as the cube of the stages): merge stages first");
  for (std::size_t i = 0; i < in.stages.size(); ++i) {
    const pipeline_stage& st = in.stages[i];
    auto cost = sim::stage_cost(c, st);
    if (!cost) return bad("pipeline ILP: stage " + std::to_string(i + 1) + ": " + cost.message());
    bytes w = 0;
    for (int l = st.first; l <= st.last; ++l) w += c.w(l);
    in.uf.push_back(cost->forward);
    in.ub.push_back(cost->backward);
    in.weights.push_back(w);
    in.stored.push_back(cost->kept);
    in.working.push_back(cost->working);
  }
  for (int s = 1; s < in.n; ++s) {
    const int j = in.stages[ix(s - 1)].last;
    in.buffer.push_back(c.a(j) + c.delta(j));
    in.act.push_back(static_cast<double>(c.a(j)) / problem.bandwidth);
    in.grad.push_back(static_cast<double>(c.delta(j)) / problem.bandwidth);
  }
  return in;
}

/// The least memory M with which some allocation of the stages to at most P processors has a
/// 1-periodic plan: at the start of F_N every stage holds an activation of that mini-batch, so a
/// processor needs at least C x its weights + its buffers + one activation of each of its stages,
/// and one mini-batch at a time (T = the whole work) needs no more. Over all the allocations
/// (restricted growth strings); nullopt above 12 stages (4.2 million allocations).
inline std::optional<bytes> pipe_ilp_least_memory(const pipe_ilp_instance& in, int copies, int P) {
  const int n = in.n;
  if (n > 12) return std::nullopt;
  std::vector<int> g(ix(n), 0);
  std::vector<bytes> need(ix(n), 0);
  bytes best = std::numeric_limits<bytes>::max();
  auto visit = [&](auto&& self, int i, int blocks) -> void {
    if (i == n) {
      std::fill(need.begin(), need.begin() + blocks, 0);
      for (int s = 0; s < n; ++s) {
        bytes& x = need[ix(g[ix(s)])];
        x += copies * in.weights[ix(s)] + in.stored[ix(s)] + in.working[ix(s)];
        if (s > 0 && g[ix(s - 1)] != g[ix(s)]) x += in.buffer[ix(s - 1)];
        if (s + 1 < n && g[ix(s + 1)] != g[ix(s)]) x += in.buffer[ix(s)];
      }
      best = std::min(best, *std::max_element(need.begin(), need.begin() + blocks));
      return;
    }
    for (int b = 0; b <= blocks && b < P; ++b) {
      g[ix(i)] = b;
      self(self, i + 1, std::max(blocks, b + 1));
    }
  };
  visit(visit, 0, 0);
  return best;
}

/// The plan on the partition's stages of a plan whose stages are runs of them: a merged stage's F
/// runs its parts' forwards back to back, its B their backwards, at the same times.
inline pipeline_plan pipe_ilp_split(const pipeline_problem& p, const pipeline_plan& plan,
                                    const std::vector<pipeline_stage>& parts) {
  using kind = pipeline_op_kind;
  pipeline_plan out;
  out.period = plan.period;
  std::vector<int> first_part;  // per merged stage, its first part (0-based)
  for (const auto& st : plan.stages) {
    first_part.push_back(static_cast<int>(out.stages.size()));
    for (const auto& part : parts)
      if (part.first >= st.first && part.last <= st.last) {
        out.stages.push_back(part);
        out.stages.back().processor = st.processor;
      }
  }
  auto add = [&](kind kd, int stage, seconds start, int shift) {
    for (; start >= plan.period; --shift) start -= plan.period;  // a period later
    out.ops.push_back({kd, stage, start, shift});
  };
  auto time = [&](int s, bool forward) {
    const auto cost = sim::stage_cost(p.layers, out.stages[ix(s)]);
    return cost ? (forward ? cost->forward : cost->backward) : 0.0;
  };
  for (const auto& op : plan.ops) {
    const int lo = first_part[ix(op.stage - 1)];
    const int hi = op.stage < static_cast<int>(plan.stages.size())
                       ? first_part[ix(op.stage)]
                       : static_cast<int>(out.stages.size());
    seconds t = op.start;
    if (op.kind == kind::forward)
      for (int s = lo; s < hi; t += time(s, true), ++s) add(kind::forward, s + 1, t, op.shift);
    else if (op.kind == kind::backward)
      for (int s = hi - 1; s >= lo; t += time(s, false), --s)
        add(kind::backward, s + 1, t, op.shift);
    else
      add(op.kind, hi, op.start, op.shift);
  }
  return out;
}

/// The best 1F1B* plan (Alg. 7) over the contiguous allocations of runs of the stages (at most P
/// runs), split back into the stages and replayed valid; nullopt when more than `limit`
/// allocations would be tried, or none fits.
inline std::optional<pipeline_plan> pipe_ilp_contiguous(const pipeline_problem& p,
                                                        const pipe_ilp_instance& in, int limit) {
  const int n = in.n;
  for (const auto& st : in.stages)  // runs of recomputing stages are not stages of their own
    if (st.recompute) return std::nullopt;
  // Allocations: the subsets of at most P - 1 of the n - 1 boundaries, cut.
  double count = 0, binom = 1;
  for (int k = 0; k <= std::min(p.processors - 1, n - 1); ++k) {
    count += binom;
    binom = binom * (n - 1 - k) / (k + 1);
  }
  if (count > limit) return std::nullopt;
  std::optional<pipeline_plan> best;
  std::vector<int> lasts;
  auto visit = [&](auto&& self, int s) -> void {  // s: the next stage that may end a run
    if (s == n) {
      lasts.push_back(in.stages.back().last);
      auto plan = one_f_one_b_star_fit(p, contiguous_stages(lasts));
      if (plan && (!best || plan->period < best->period)) best = std::move(*plan);
      lasts.pop_back();
      return;
    }
    self(self, s + 1);
    if (static_cast<int>(lasts.size()) + 1 < p.processors) {
      lasts.push_back(in.stages[ix(s - 1)].last);
      self(self, s + 1);
      lasts.pop_back();
    }
  };
  visit(visit, 1);
  if (!best) return std::nullopt;
  pipeline_plan out = pipe_ilp_split(p, *best, in.stages);
  if (!sim::simulate_pipeline(p, out).valid) return std::nullopt;
  return out;
}

/// Longest paths from node 0 over edges (u, v, w) meaning x_v >= x_u + w; nullopt when a
/// positive cycle makes the system infeasible.
inline std::optional<std::vector<double>> pipe_ilp_longest(
    int nodes, const std::vector<std::tuple<int, int, double>>& edges, double tol) {
  const double none = -std::numeric_limits<double>::infinity();
  std::vector<double> x(ix(nodes), none);
  x[0] = 0;
  for (int round = 0; round <= nodes; ++round) {
    bool changed = false;
    for (const auto& [u, v, w] : edges)
      if (x[ix(u)] != none && x[ix(u)] + w > x[ix(v)] + tol) {
        x[ix(v)] = x[ix(u)] + w;
        changed = true;
      }
    if (!changed) return x;
  }
  return std::nullopt;
}

}  // namespace detail

/// The ILP of [Shilova21, ch. 6] on the stages of `partition` (each stage's first and last
/// layer, 1-based, in chain order): the best 1-periodic plan over the allocations of the stages
/// to at most P processors, within memory M on each. Errors: invalid_problem (bad problem or
/// partition), solver_error (no MILP backend: milp::unavailable; or a solution the simulator
/// rejects), budget_too_small (no allocation fits in M whatever the period; minimum_budget the
/// least M that does, computed up to 12 stages), infeasible (no allocation fits, above 12
/// stages, or none has a period <= period_bound), time_limit (no plan found in time).
template <milp::MilpBackend Backend>
result<pipeline_ilp_result> pipeline_ilp_schedule(const pipeline_problem& problem,
                                                  std::span<const pipeline_stage> partition,
                                                  const pipeline_ilp_options& opts = {}) {
  static_assert(milp::require_milp_backend<Backend>);
  using kind = pipeline_op_kind;
  using detail::ix;
  using milp::linear_expr;
  using milp::variable;
  if (!Backend::available())
    return error{status::solver_error,
                 "pipeline ILP: it needs a MILP backend, and " + std::string(Backend::name) +
                     " is not available in this build (install coinor-libcbc-dev and use "
                     "remat::milp::cbc)",
                 {}};
  auto read = detail::pipe_ilp_read(problem, partition);
  if (!read) return read.err();
  const detail::pipe_ilp_instance& in = *read;
  if (std::isnan(opts.time_limit) || opts.time_limit <= 0)
    return error{status::invalid_problem,
                 "pipeline ILP: time_limit is " + detail::time_text(opts.time_limit) +
                     "; it must be > 0 seconds (+infinity for none)",
                 {}};
  if (opts.period_bound && !(*opts.period_bound > 0 && *opts.period_bound < max_time))
    return error{status::invalid_problem,
                 "pipeline ILP: period_bound is " + detail::time_text(*opts.period_bound) +
                     "; it must be > 0 and below 1e+15 s",
                 {}};
  const int n = in.n;
  const int P = problem.processors;
  const bool limited = problem.memory < unlimited_bytes;
  if (limited)
    if (auto least = detail::pipe_ilp_least_memory(in, problem.copies, P);
        least && *least > problem.memory)
      return error{status::budget_too_small,
                   "pipeline ILP: no allocation of the " + std::to_string(n) +
                       " stages on at most " + std::to_string(P) + " processors fits in memory " +
                       format_bytes(problem.memory) + " per processor: the best needs " +
                       format_bytes(*least) +
                       " on some processor (C x weights, buffers, one activation of each of its "
                       "stages)",
                   *least};

  // The ops of a mini-batch's chain.
  std::vector<detail::pipe_ilp_op> ops;
  std::vector<int> fwd(ix(n)), bwd(ix(n));
  for (int s = 1; s <= n; ++s) {
    fwd[ix(s - 1)] = static_cast<int>(ops.size());
    ops.push_back({kind::forward, s, in.uf[ix(s - 1)]});
    if (s < n && in.act[ix(s - 1)] > 0)
      ops.push_back({kind::send_activation, s, in.act[ix(s - 1)]});
  }
  for (int s = n; s >= 1; --s) {
    bwd[ix(s - 1)] = static_cast<int>(ops.size());
    ops.push_back({kind::backward, s, in.ub[ix(s - 1)]});
    if (s > 1 && in.grad[ix(s - 2)] > 0)
      ops.push_back({kind::send_gradient, s - 1, in.grad[ix(s - 2)]});
  }
  const int nops = static_cast<int>(ops.size());

  // Time scale: the whole work K (everything in sequence: T <= K loses nothing, see the docs), or
  // the period bound if smaller. The model's times are in units of it.
  seconds total = 0;
  for (const auto& o : ops) total += o.d;
  if (!(total > 0))
    return error{status::infeasible,
                 "pipeline ILP: every stage and transfer takes 0 s: there is no period to "
                 "minimise (give the layers their times)",
                 {}};
  const seconds scale = opts.period_bound ? std::min(total, *opts.period_bound) : total;
  auto dur = [&](int o) { return ops[ix(o)].d / scale; };

  milp::model m;
  const variable T = m.add_continuous(0, 1, "T");
  // The integer variables, for a warm start: f per stage, w per pair (o, p) of ops, y per pair of
  // boundaries, v and v' per link of the chain.
  std::vector<variable> fvar;
  std::vector<std::tuple<int, int, variable>> wvar;
  std::vector<std::tuple<int, int, variable>> yvar;
  std::vector<std::pair<variable, variable>> vvar;
  std::vector<std::tuple<int, int, variable>> sigmavar, bvar;  // (s, s') and (s, k)
  // z(s, s'): stages on one processor.
  std::vector<std::vector<variable>> zv(ix(n), std::vector<variable>(ix(n)));
  for (int s = 1; s <= n; ++s)
    for (int t = s + 1; t <= n; ++t)
      zv[ix(s - 1)][ix(t - 1)] = zv[ix(t - 1)][ix(s - 1)] =
          m.add_binary("z" + std::to_string(s) + "_" + std::to_string(t));
  auto z = [&](int s, int t) -> linear_expr {
    if (s == t) return 1.0;
    return zv[ix(s - 1)][ix(t - 1)];
  };
  // (6.1), in its three forms: an equivalence relation.
  for (int a = 1; a <= n; ++a)
    for (int b = a + 1; b <= n; ++b)
      for (int c = b + 1; c <= n; ++c) {
        m.add(z(b, c) >= z(a, b) + z(a, c) - 1);
        m.add(z(a, c) >= z(a, b) + z(b, c) - 1);
        m.add(z(a, b) >= z(a, c) + z(b, c) - 1);
      }
  // (6.2)-(6.3): at most P processors, f_s = 1 for the first stage of each.
  {
    linear_expr used;
    for (int s = 1; s <= n; ++s) {
      const variable f = m.add_binary("f" + std::to_string(s));
      fvar.push_back(f);
      linear_expr before;
      for (int t = 1; t < s; ++t) before += z(s, t);
      m.add(linear_expr(f) >= 1 - before);
      used += f;
    }
    m.add(used <= P, "processors");
  }
  auto crosses = [&](int k) { return 1 - z(k, k + 1); };  // boundary k, k + 1 on two processors

  // Starts; (6.17)-(6.19). A transfer's length counts only when its boundary crosses.
  std::vector<variable> tau;
  for (int o = 0; o < nops; ++o) tau.push_back(m.add_continuous(-1, 1, "tau" + std::to_string(o)));
  auto eff = [&](int o) -> linear_expr {
    return ops[ix(o)].transfer() ? dur(o) * crosses(ops[ix(o)].stage) : linear_expr(dur(o));
  };
  for (int o = 0; o < nops; ++o) {
    m.add(tau[ix(o)] + eff(o) >= 0);
    m.add(tau[ix(o)] + eff(o) <= T);
    m.add(linear_expr(T) >= eff(o));
  }
  m.add(linear_expr(tau[ix(fwd[0])]) == 0);
  constexpr double big = 2;  // bounds every difference of times, in units of the scale

  // (6.5)-(6.7) and (6.20) for a pair on one resource when `same` is 1, with order variable w
  // (1: o before o'): order[o][p] is 1 when o and p share a resource and o runs first in the
  // window.
  std::vector<std::vector<linear_expr>> order(ix(nops), std::vector<linear_expr>(ix(nops)));
  auto disjoint = [&](int o, int p, const linear_expr& same) {
    const variable w = m.add_binary();
    wvar.emplace_back(o, p, w);
    order[ix(o)][ix(p)] = w;
    order[ix(p)][ix(o)] = same - w;
    m.add(linear_expr(w) <= same);
    m.add(tau[ix(o)] - tau[ix(p)] + big * (1 - same + w) >= dur(p));
    m.add(tau[ix(p)] - tau[ix(o)] + big * (2 - same - w) >= dur(o));
    m.add(linear_expr(T) >= tau[ix(o)] + dur(o) - tau[ix(p)] - big * (1 - same));
    m.add(linear_expr(T) >= tau[ix(p)] + dur(p) - tau[ix(o)] - big * (1 - same));
  };
  for (int o = 0; o < nops; ++o)  // compute ops
    for (int p = o + 1; p < nops; ++p)
      if (!ops[ix(o)].transfer() && !ops[ix(p)].transfer())
        disjoint(o, p, z(ops[ix(o)].stage, ops[ix(p)].stage));
  // Transfers: the link of boundary k is shared with boundary k' when both cross between the same
  // two processors, (6.8)-(6.13); both directions of one boundary share its link.
  {
    std::vector<std::vector<linear_expr>> link(ix(n), std::vector<linear_expr>(ix(n)));
    for (int k = 1; k < n; ++k) {
      link[ix(k)][ix(k)] = crosses(k);
      for (int q = k + 1; q < n; ++q) {
        const variable y = m.add_binary();
        yvar.emplace_back(k, q, y);
        m.add(linear_expr(y) >= z(k, q) + z(k + 1, q + 1) - z(k, k + 1) - 1);
        m.add(linear_expr(y) >= z(k, q + 1) + z(k + 1, q) - z(k, k + 1) - 1);
        m.add(linear_expr(y) <= crosses(k));
        m.add(linear_expr(y) <= crosses(q));
        link[ix(k)][ix(q)] = link[ix(q)][ix(k)] = y;
      }
    }
    for (int o = 0; o < nops; ++o)
      for (int p = o + 1; p < nops; ++p)
        if (ops[ix(o)].transfer() && ops[ix(p)].transfer())
          disjoint(o, p, link[ix(ops[ix(o)].stage)][ix(ops[ix(p)].stage)]);
    // Each link busy at most T a period (a valid cut: it follows from the above).
    for (int k = 1; k < n; ++k) {
      linear_expr load;
      for (int q = 1; q < n; ++q)
        load += (in.act[ix(q - 1)] + in.grad[ix(q - 1)]) / scale * link[ix(k)][ix(q)];
      m.add(linear_expr(T) >= load);
    }
  }
  // Each processor busy at most T a period (a valid cut), and P of them at most P T.
  {
    linear_expr all;
    for (int s = 1; s <= n; ++s) {
      linear_expr load;
      for (int t = 1; t <= n; ++t) load += (in.uf[ix(t - 1)] + in.ub[ix(t - 1)]) / scale * z(s, t);
      m.add(linear_expr(T) >= load);
      all += (in.uf[ix(s - 1)] + in.ub[ix(s - 1)]) / scale;
    }
    m.add(P * linear_expr(T) >= all);
  }
  // Shifts along the chain, (6.24), (6.26), (6.28), (6.30): delta = v + v' periods between an op
  // and the next on the same mini-batch (v = 0: in order in the window; v' = 0: at most T apart).
  std::vector<linear_expr> shift(ix(nops));  // shift[o]: from op o to o + 1
  for (int o = 0; o + 1 < nops; ++o) {
    const variable v = m.add_binary(), v2 = m.add_binary();
    vvar.emplace_back(v, v2);
    m.add(linear_expr(v2) <= v);
    m.add(tau[ix(o + 1)] - tau[ix(o)] - eff(o) + big * v >= 0);
    m.add(tau[ix(o + 1)] + T - tau[ix(o)] - eff(o) + 2 * big * v2 >= 0);
    shift[ix(o)] = v + v2;
  }

  // Memory (6.31)-(6.36) in remat's model: at the start of F_s, its processor holds C x weights,
  // the buffers of its crossing boundaries, and of each stage s' there Delta_{s'} + [F_{s'} has
  // started] - [B_{s'} has ended] activations, Delta_{s'} the periods from F_{s'} to B_{s'}.
  if (limited) {
    // Bytes in units of M (of 1 byte when M is 0).
    const double Mb = static_cast<double>(std::max<bytes>(problem.memory, 1));
    std::vector<linear_expr> delta(ix(n));
    std::vector<double> delta_max(ix(n));
    for (int s = 1; s <= n; ++s) {
      for (int o = fwd[ix(s - 1)]; o < bwd[ix(s - 1)]; ++o) delta[ix(s - 1)] += shift[ix(o)];
      delta_max[ix(s - 1)] = 2.0 * (bwd[ix(s - 1)] - fwd[ix(s - 1)]);
    }
    for (int s = 1; s <= n; ++s) {
      const int F = fwd[ix(s - 1)];
      linear_expr mem;
      for (int t = 1; t <= n; ++t) {
        // C x weights, and a recomputing stage's working memory all along (conservative: it is
        // held only while its B runs).
        mem += (static_cast<double>(problem.copies) * static_cast<double>(in.weights[ix(t - 1)]) +
                static_cast<double>(in.working[ix(t - 1)])) /
               Mb * z(s, t);
        const double a = static_cast<double>(in.stored[ix(t - 1)]) / Mb;
        const int Ft = fwd[ix(t - 1)], Bt = bwd[ix(t - 1)];
        if (t == s) {
          mem += a * (delta[ix(s - 1)] + 1 - order[ix(Bt)][ix(F)]);
          continue;
        }
        if (a > 0) {
          const variable sigma = m.add_continuous(0, delta_max[ix(t - 1)]);
          sigmavar.emplace_back(s, t, sigma);
          m.add(linear_expr(sigma) >= delta[ix(t - 1)] - delta_max[ix(t - 1)] * (1 - z(s, t)));
          mem += a * (sigma + order[ix(Ft)][ix(F)] - order[ix(Bt)][ix(F)]);
        }
      }
      for (int k = 1; k < n; ++k) {  // (6.34)-(6.35)
        const double buf = static_cast<double>(in.buffer[ix(k - 1)]) / Mb;
        if (buf <= 0) continue;
        const variable b = m.add_continuous(0, 1);
        bvar.emplace_back(s, k, b);
        m.add(linear_expr(b) >= z(s, k) - z(s, k + 1));
        m.add(linear_expr(b) >= z(s, k + 1) - z(s, k));
        mem += buf * b;
      }
      m.add(mem <= static_cast<double>(problem.memory) / Mb, "memory_F" + std::to_string(s));
    }
  }
  m.minimize(T);

  // The warm start: its integer variables from the plan (the solver completes the others).
  std::optional<std::vector<double>> warm_values;
  std::optional<pipeline_plan> contiguous;
  if (!opts.warm_start && opts.contiguous_start_limit > 0)
    contiguous = detail::pipe_ilp_contiguous(problem, in, opts.contiguous_start_limit);
  if (opts.warm_start || contiguous) {
    const pipeline_plan& w = opts.warm_start ? *opts.warm_start : *contiguous;
    auto bad = [](std::string msg) {
      return error{status::invalid_problem, "pipeline ILP: warm_start: " + std::move(msg), {}};
    };
    if (w.k != 1)
      return bad("k is " + std::to_string(w.k) + "; the ILP's plans are 1-periodic (k = 1)");
    if (w.stages.size() != in.stages.size())
      return bad("it has " + std::to_string(w.stages.size()) + " stages, the partition " +
                 std::to_string(n));
    for (int s = 1; s <= n; ++s)
      if (w.stages[ix(s - 1)].first != in.stages[ix(s - 1)].first ||
          w.stages[ix(s - 1)].last != in.stages[ix(s - 1)].last)
        return bad("its stage " + std::to_string(s) + " is not the partition's (layers " +
                   std::to_string(in.stages[ix(s - 1)].first) + ".." +
                   std::to_string(in.stages[ix(s - 1)].last) + ")");
    const sim::pipeline_report wr = sim::simulate_pipeline(problem, w);
    if (!wr.valid)
      return bad("the plan is not valid: " +
                 (wr.first_violation ? wr.first_violation->message : std::string("?")));
    if (!opts.period_bound || w.period <= *opts.period_bound) {
      const seconds Tw = w.period;
      auto pr = [&](int s) { return w.stages[ix(s - 1)].processor; };
      auto crossing = [&](int k) { return pr(k) != pr(k + 1); };
      // Each op's start in the window, the plan's time origin moved to F_1's start (tau_{F_1} =
      // 0): t, or t - T when it runs past the period's end (then its shift is one less); a
      // transfer within a processor right after its predecessor.
      std::vector<double> t0(ix(nops));
      std::vector<int> h(ix(nops));
      bool ok = true;
      seconds origin = 0;
      for (const auto& op : w.ops)
        if (op.kind == kind::forward && op.stage == 1) origin = op.start;
      for (int o = 0; o < nops && ok; ++o) {
        const auto& op = ops[ix(o)];
        if (op.transfer() && !crossing(op.stage)) {
          t0[ix(o)] = t0[ix(o - 1)] + ops[ix(o - 1)].d;  // a virtual op, of length 0
          h[ix(o)] = h[ix(o - 1)];
          continue;
        }
        auto it = std::find_if(w.ops.begin(), w.ops.end(), [&](const pipeline_op& x) {
          return x.kind == op.kind && x.stage == op.stage;
        });
        if (it == w.ops.end()) {
          ok = false;
          break;
        }
        seconds u = it->start - origin;
        int hu = it->shift;
        if (u < 0) {  // a period earlier, on the same mini-batch
          u += Tw;
          ++hu;
        }
        const bool wraps = op.d > 0 && u + op.d > Tw * (1 + 1e-12);
        t0[ix(o)] = wraps ? u - Tw : u;
        h[ix(o)] = wraps ? hu - 1 : hu;
      }
      std::vector<double> x(m.num_variables(), 0.0);
      for (int s = 1; s <= n; ++s)
        for (int t = s + 1; t <= n; ++t) x[zv[ix(s - 1)][ix(t - 1)].index] = pr(s) == pr(t);
      for (int s = 1; s <= n; ++s) {
        bool first_here = true;
        for (int t = 1; t < s; ++t) first_here = first_here && pr(t) != pr(s);
        x[fvar[ix(s - 1)].index] = first_here;
      }
      for (const auto& [a, b, var] : wvar) {  // a before b; 0 unless they share a resource
        const auto &oa = ops[ix(a)], &ob = ops[ix(b)];
        bool same = false;
        if (!oa.transfer())
          same = pr(oa.stage) == pr(ob.stage);
        else if (crossing(oa.stage) && crossing(ob.stage))
          same = std::minmax(pr(oa.stage), pr(oa.stage + 1)) ==
                 std::minmax(pr(ob.stage), pr(ob.stage + 1));
        x[var.index] = same && t0[ix(a)] < t0[ix(b)];
      }
      for (const auto& [k, q, var] : yvar)
        x[var.index] = crossing(k) && crossing(q) &&
                       std::minmax(pr(k), pr(k + 1)) == std::minmax(pr(q), pr(q + 1));
      for (int o = 0; o + 1 < nops && ok; ++o) {
        const int d = h[ix(o)] - h[ix(o + 1)];
        ok = d >= 0 && d <= 2;
        x[vvar[ix(o)].first.index] = d >= 1;
        x[vvar[ix(o)].second.index] = d >= 2;
      }
      for (const auto& [a, b, var] : sigmavar) {  // Delta_b on a's processor
        int d = 0;
        for (int o = fwd[ix(b - 1)]; o < bwd[ix(b - 1)]; ++o) d += h[ix(o)] - h[ix(o + 1)];
        x[var.index] = pr(a) == pr(b) ? d : 0;
      }
      for (const auto& [a, k, var] : bvar) x[var.index] = (pr(a) == pr(k)) != (pr(a) == pr(k + 1));
      for (int o = 0; o < nops; ++o) x[tau[ix(o)].index] = t0[ix(o)] / scale;
      x[T.index] = Tw / scale;
      if (ok) warm_values = std::move(x);
    }
  }

  milp::options mo;
  mo.time_limit = opts.time_limit;
  mo.relative_gap = opts.relative_gap;
  mo.threads = opts.threads;
  mo.node_limit = opts.node_limit;
  mo.warm_start = warm_values;
  if (opts.progress)
    mo.progress = [&](const milp::progress_report& r) {
      opts.progress({r.incumbent * scale, r.bound * scale, r.elapsed});
    };
  auto sol = Backend{}.solve(m, mo);
  if (!sol) {
    if (sol.code() == status::infeasible)
      return error{
          status::infeasible,
          "pipeline ILP: no allocation of the " + std::to_string(n) + " stages on at most " +
              std::to_string(P) + " processors has a 1-periodic plan" +
              (opts.period_bound ? " of period <= " + detail::time_text(*opts.period_bound) + " s"
                                 : std::string()) +
              (limited ? " within memory " + format_bytes(problem.memory) +
                             " per processor (C x weights, buffers, activations)"
                       : std::string()) +
              "; give more memory or processors, or another partition",
          {}};
    if (sol.code() == status::time_limit)
      return error{status::time_limit,
                   "pipeline ILP: no plan found within the time limit (" +
                       detail::time_text(opts.time_limit) +
                       " s); raise time_limit, or give a warm_start (e.g. 1F1B*'s plan of a "
                       "contiguous allocation)",
                   {}};
    return error{sol.code(), "pipeline ILP: " + sol.message(), {}};
  }
  const milp::solution& x = *sol;
  auto bit = [&](const linear_expr& e) { return x.value(e) > 0.5; };

  // The allocation: processors numbered by their first stage.
  std::vector<int> proc(ix(n), -1);
  int used = 0;
  for (int s = 1; s <= n; ++s) {
    if (proc[ix(s - 1)] >= 0) continue;
    for (int t = s; t <= n; ++t)
      if (proc[ix(t - 1)] < 0 && bit(z(s, t))) proc[ix(t - 1)] = used;
    ++used;
  }
  auto cross = [&](int k) { return proc[ix(k - 1)] != proc[ix(k)]; };
  auto eff_d = [&](int o) {
    return ops[ix(o)].transfer() && !cross(ops[ix(o)].stage) ? 0.0 : ops[ix(o)].d;
  };

  // Exact times for the solver's discrete choices: a system of differences x_v >= x_u + w in the
  // period T (node 0 is time 0, node o + 1 is op o), feasible from some T on; the smallest such
  // T near the solver's, by bisection.
  auto same_resource = [&](int o, int p) {
    const auto &a = ops[ix(o)], &b = ops[ix(p)];
    if (a.transfer() != b.transfer()) return false;
    if (!a.transfer()) return proc[ix(a.stage - 1)] == proc[ix(b.stage - 1)];
    if (!cross(a.stage) || !cross(b.stage)) return false;
    auto ends = [&](int k) { return std::minmax(proc[ix(k - 1)], proc[ix(k)]); };
    return ends(a.stage) == ends(b.stage);
  };
  auto system = [&](seconds period) {
    std::vector<std::tuple<int, int, double>> e;
    for (int o = 0; o < nops; ++o) {
      e.emplace_back(0, o + 1, -eff_d(o));
      e.emplace_back(o + 1, 0, eff_d(o) - period);
      if (o + 1 < nops)
        e.emplace_back(o + 1, o + 2, eff_d(o) - std::round(x.value(shift[ix(o)])) * period);
      for (int p = 0; p < nops; ++p) {
        if (p == o || !same_resource(o, p)) continue;
        e.emplace_back(o + 1, p + 1, eff_d(o) - period);
        if (bit(order[ix(o)][ix(p)])) e.emplace_back(o + 1, p + 1, eff_d(o));  // o first
      }
    }
    e.emplace_back(fwd[0] + 1, 0, 0.0);  // F_1 at time 0
    e.emplace_back(0, fwd[0] + 1, 0.0);
    return detail::pipe_ilp_longest(nops + 1, e, 1e-13 * total);
  };
  const seconds solver_T = x.value(T) * scale;
  seconds longest = 0;  // no period below the longest op
  for (int o = 0; o < nops; ++o) longest = std::max(longest, eff_d(o));
  seconds hi = std::max({solver_T, longest, 1e-12 * total});
  std::optional<std::vector<double>> times = system(hi);
  for (int i = 0; !times && i < 40; ++i) {
    hi += std::max(1e-9 * total, hi * 1e-9) * std::pow(4.0, i);
    times = system(hi);
  }
  if (!times)
    return error{status::solver_error,
                 "pipeline ILP: the solver's allocation and orders have no exact schedule near "
                 "its period " +
                     detail::time_text(solver_T) + " s (numerical trouble); " + x.message,
                 {}};
  // Usually just below the solver's T; lower when the solver's incumbent was not tight.
  seconds lo = std::max(longest, solver_T * (1 - 1e-6));
  if (lo < hi && system(lo)) lo = longest;
  for (int i = 0; i < 60 && hi - lo > 1e-12 * hi; ++i) {
    const seconds mid = (lo + hi) / 2;
    if (auto t = system(mid)) {
      hi = mid;
      times = std::move(t);
    } else {
      lo = mid;
    }
  }
  const seconds period = hi;
  const std::vector<double>& tt = *times;

  // One mini-batch's timeline: each op at the first time congruent to its start that follows
  // its predecessor; the transfers of boundaries within a processor are left out, and those of
  // zero length (not in the ILP) are put at their predecessor's end.
  pipeline_plan plan;
  plan.period = period;
  plan.k = 1;
  for (int s = 1; s <= n; ++s) {
    plan.stages.push_back(in.stages[ix(s - 1)]);
    plan.stages.back().processor = proc[ix(s - 1)];
  }
  seconds end = 0;
  bool started = false;
  auto put = [&](kind kd, int stage, seconds start, seconds d) {
    plan.ops.push_back(place_op(kd, stage, start, 0, period));
    end = start + d;
  };
  auto run = [&](int o) {
    const seconds t0 = tt[ix(o + 1)];
    seconds start = t0;
    if (started) start = t0 + period * std::ceil((end - t0) / period - 1e-10);
    started = true;
    put(ops[ix(o)].kind, ops[ix(o)].stage, start, ops[ix(o)].d);
  };
  int o = 0;
  for (int s = 1; s <= n; ++s) {  // forwards
    run(o++);
    if (s < n) {
      const bool in_ilp = o < nops && ops[ix(o)].kind == kind::send_activation;
      if (cross(s)) {
        if (in_ilp)
          run(o);
        else
          put(kind::send_activation, s, end, 0);
      }
      if (in_ilp) ++o;
    }
  }
  for (int s = n; s >= 1; --s) {  // backwards
    run(o++);
    if (s > 1) {
      const bool in_ilp = o < nops && ops[ix(o)].kind == kind::send_gradient;
      if (cross(s - 1)) {
        if (in_ilp)
          run(o);
        else
          put(kind::send_gradient, s - 1, end, 0);
      }
      if (in_ilp) ++o;
    }
  }
  int base = 0;  // B of stage 1 has shift 0
  for (const auto& op : plan.ops)
    if (op.kind == kind::backward && op.stage == 1) base = op.shift;
  for (auto& op : plan.ops) op.shift -= base;

  const sim::pipeline_report rep = sim::simulate_pipeline(problem, plan);
  if (!rep.valid)
    return error{status::solver_error,
                 "pipeline ILP: the plan built from the solver's solution (period " +
                     detail::time_text(period) + " s) does not replay valid: " +
                     (rep.first_violation ? rep.first_violation->message : std::string("?")),
                 {}};
  pipeline_ilp_result out;
  out.bound = std::isfinite(x.bound) ? std::min(x.bound * scale, period) : 0;
  out.gap = (period - out.bound) / period;
  out.optimal = x.is_optimal() && out.gap <= std::max(1e-6, opts.relative_gap);
  out.solve_seconds = x.seconds;
  out.processors_used = used;
  out.nca = rep.nca;
  out.peaks = rep.processor_peaks;
  out.solver_message = x.message;
  out.warm_start_used = warm_values.has_value();
  out.plan = std::move(plan);
  return out;
}

/// The same on stages given as (first, last) layer intervals, each storing its activations.
template <milp::MilpBackend Backend>
result<pipeline_ilp_result> pipeline_ilp_schedule(const pipeline_problem& problem,
                                                  const std::vector<std::pair<int, int>>& partition,
                                                  const pipeline_ilp_options& opts = {}) {
  std::vector<pipeline_stage> stages;
  for (const auto& [first, last] : partition) stages.push_back({first, last, 0});
  return pipeline_ilp_schedule<Backend>(problem, std::span<const pipeline_stage>(stages), opts);
}

}  // namespace remat
