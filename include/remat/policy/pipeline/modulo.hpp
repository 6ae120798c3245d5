#pragma once
// A 1-periodic pattern for any allocation, contiguous or not (a processor may hold several
// stages): modulo scheduling with a reservation table. One mini-batch's ops, in the order of
// their dependencies (F of stage 1, the activation sent, F of stage 2, ..., B of the last stage,
// the gradient sent back, ..., B of stage 1), are each placed at the earliest time after the op
// before it ends at which its resource (the stage's processor, or the link between the two
// processors of a boundary, one transfer at a time in either direction, as the simulator has
// it) is free modulo T; the timeline is then folded into [0, T) with place_op. Every mini-batch
// repeats it T later, so the table's disjoint intervals make the pattern valid.
// pipeline_modulo_fit searches T for the smallest whose plan fits M, each probe replayed by the
// simulator. On a contiguous allocation no 1-periodic plan keeps fewer activations than 1F1B*
// [Shilova21, Thm 15], so this is for the allocations 1F1B* does not take. docs/pipeline.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace remat {

namespace detail {

/// One op of a mini-batch's chain of ops, with its resource (processors 0..P-1, then links).
struct pipe_chain_op {
  pipeline_op_kind kind;
  int stage;
  int resource;
  seconds length;
};

/// The ops of one mini-batch in dependency order, each with its resource.
inline std::vector<pipe_chain_op> pipe_chain_ops(const pipeline_problem& problem,
                                                 const std::vector<pipeline_stage>& stages) {
  using k = pipeline_op_kind;
  const chain& c = problem.layers;
  const int procs = problem.processors;
  const int S = static_cast<int>(stages.size());
  auto proc = [&](int s) { return stages[ix(s - 1)].processor; };
  auto link = [&](int s) {  // the link between the processors of stages s and s + 1
    const int p = std::min(proc(s), proc(s + 1)), q = std::max(proc(s), proc(s + 1));
    return procs + p * procs + q;
  };
  auto crosses = [&](int s) { return s < S && proc(s) != proc(s + 1); };
  std::vector<pipe_chain_op> out;
  for (int s = 1; s <= S; ++s) {
    if (s > 1 && crosses(s - 1))
      out.push_back({k::send_activation, s - 1, link(s - 1),
                     static_cast<double>(c.a(stages[ix(s - 2)].last)) / problem.bandwidth});
    seconds f = 0;
    for (int l = stages[ix(s - 1)].first; l <= stages[ix(s - 1)].last; ++l) f += c.uf(l);
    out.push_back({k::forward, s, proc(s), f});
  }
  for (int s = S; s >= 1; --s) {
    if (crosses(s))
      out.push_back({k::send_gradient, s, link(s),
                     static_cast<double>(c.delta(stages[ix(s - 1)].last)) / problem.bandwidth});
    seconds b = 0;
    for (int l = stages[ix(s - 1)].first; l <= stages[ix(s - 1)].last; ++l) b += c.ub(l);
    out.push_back({k::backward, s, proc(s), b});
  }
  return out;
}

/// Intervals of [0, T) taken on one resource.
class pipe_reservations {
 public:
  explicit pipe_reservations(seconds period) : period_(period), tol_(1e-9 * period) {}

  /// The earliest x >= ready at which [x, x + d) is free modulo T, or a negative value.
  [[nodiscard]] seconds earliest(seconds ready, seconds d) const {
    std::vector<seconds> candidates{ready};
    for (const auto& [s, e] : taken_) {
      (void)s;
      candidates.push_back(lift(e, ready));
    }
    std::sort(candidates.begin(), candidates.end());
    for (seconds x : candidates)
      if (free(fold(x), d)) return x;
    return -1;
  }
  /// The earliest x >= ready that keeps what is taken one arc of the circle: right after the
  /// arc, or right before it. Such a placement always exists while the work fits in T, so a
  /// resource placed this way never runs out of gaps (it may wait longer than earliest()).
  [[nodiscard]] seconds packed(seconds ready, seconds d) const {
    if (taken_.empty()) return ready;
    const seconds after = lift(fold(arc_start_ + arc_length_), ready);
    const seconds before = lift(fold(arc_start_ - d + period_), ready);
    return std::min(after, before);
  }
  void take(seconds x, seconds d) {
    const seconds s = fold(x);
    if (taken_.empty()) {
      arc_start_ = s;
      arc_length_ = d;
    } else if (std::abs(fold(s + d) - fold(arc_start_)) <= tol_ ||
               std::abs(fold(s + d) - fold(arc_start_)) >= period_ - tol_) {
      arc_start_ = s;  // just before the arc
      arc_length_ += d;
    } else {
      arc_length_ += d;  // just after it (or, from earliest(), anywhere: the arc is then unused)
    }
    if (s + d <= period_) {
      taken_.emplace_back(s, s + d);
    } else {
      taken_.emplace_back(s, period_);
      taken_.emplace_back(0, s + d - period_);
    }
  }

 private:
  [[nodiscard]] seconds fold(seconds x) const {
    seconds t = x - std::floor(x / period_) * period_;
    if (t >= period_ - tol_) t = 0;
    return std::max<seconds>(t, 0);
  }
  /// The first time >= ready that equals t modulo T.
  [[nodiscard]] seconds lift(seconds t, seconds ready) const {
    seconds x = ready + (t - fold(ready));
    if (t >= period_ - tol_) x = ready + (period_ - fold(ready));
    if (x < ready - tol_) x += period_;
    return std::max(x, ready);
  }
  [[nodiscard]] bool free(seconds s, seconds d) const {
    auto clash = [&](seconds a, seconds b) {
      for (const auto& [x, y] : taken_)
        if (std::max(a, x) < std::min(b, y) - tol_) return true;
      return false;
    };
    if (s + d <= period_ + tol_) return !clash(s, std::min(s + d, period_));
    return !clash(s, period_) && !clash(0, s + d - period_);
  }

  seconds period_;
  seconds tol_;
  std::vector<std::pair<seconds, seconds>> taken_;
  seconds arc_start_ = 0, arc_length_ = 0;  ///< what packed() keeps taken: one arc
};

/// The work of each resource in one period: what no 1-periodic pattern's T can be below.
inline std::vector<seconds> pipe_resource_loads(const pipeline_problem& problem,
                                                const std::vector<pipe_chain_op>& ops) {
  const int procs = problem.processors;
  std::vector<seconds> load(ix(procs + procs * procs), 0);
  for (const auto& op : ops) load[ix(op.resource)] += op.length;
  return load;
}

}  // namespace detail

/// Where the modulo scheduler puts an op on its resource.
enum class pipeline_modulo_placement {
  earliest,  ///< the earliest free time: the fewest waits, but the gaps it leaves may be short
  packed,    ///< right after or right before what the resource already holds: never short of a
             ///< gap while its work fits in T, at the cost of some waits
};

/// The modulo-scheduled 1-periodic plan of period T for any allocation (see above). Fails with
/// invalid_problem for a bad problem or allocation, and infeasible when a processor or a link
/// has more work than T or (earliest placement) the reservation table leaves no gap long enough
/// for an op.
inline result<pipeline_plan> pipeline_modulo(
    const pipeline_problem& problem, const std::vector<pipeline_stage>& stages, seconds period,
    pipeline_modulo_placement placement = pipeline_modulo_placement::earliest) {
  if (auto v = validate(problem); !v) return v.err();
  if (auto v = validate_stages(problem, stages); !v) return v.err();
  if (!std::isfinite(period) || period <= 0 || period >= max_time)
    return error{
        status::invalid_problem,
        "the period is " + detail::time_text(period) + "; it must be > 0 and below 1e+15 s",
        {}};
  const auto ops = detail::pipe_chain_ops(problem, stages);
  const auto load = detail::pipe_resource_loads(problem, ops);
  for (std::size_t r = 0; r < load.size(); ++r)
    if (load[r] > period * (1 + 1e-9)) {
      const int procs = problem.processors;
      const int ri = static_cast<int>(r);
      const std::string who = ri < procs ? "processor " + std::to_string(ri)
                                         : "the link between processors " +
                                               std::to_string((ri - procs) / procs) + " and " +
                                               std::to_string((ri - procs) % procs);
      return error{status::infeasible,
                   "period " + detail::time_text(period) + " s is shorter than the work of " + who +
                       " (" + detail::time_text(load[r]) +
                       " s a mini-batch); the period must be at least that",
                   {}};
    }
  std::vector<detail::pipe_reservations> table(load.size(), detail::pipe_reservations(period));
  pipeline_plan plan;
  plan.stages = stages;
  plan.period = period;
  plan.k = 1;
  seconds ready = 0;
  for (const auto& op : ops) {
    seconds at = ready;
    if (op.length > 0) {
      auto& res = table[detail::ix(op.resource)];
      at = placement == pipeline_modulo_placement::packed ? res.packed(ready, op.length)
                                                          : res.earliest(ready, op.length);
      if (at < 0)
        return error{status::infeasible,
                     "period " + detail::time_text(period) + " s: the modulo reservation table " +
                         "has no gap of " + detail::time_text(op.length) + " s left for " +
                         to_string(op.kind) + " of stage " + std::to_string(op.stage) +
                         "; a longer period leaves larger gaps",
                     {}};
      res.take(at, op.length);
    }
    plan.ops.push_back(place_op(op.kind, op.stage, at, 0, period));
    ready = at + op.length;
  }
  int base = 0;  // the thesis' convention: B of stage 1 has shift 0
  for (const auto& op : plan.ops)
    if (op.kind == pipeline_op_kind::backward && op.stage == 1) base = op.shift;
  for (auto& op : plan.ops) op.shift -= base;
  return plan;
}

/// The smallest period found whose modulo plan fits every processor in M: first the largest
/// work of a resource (below which no 1-periodic plan exists), then, if that does not fit, a
/// bisection of `steps` probes between it and the time of one mini-batch's ops end to end (where
/// each stage keeps one activation). The activations kept need not fall as T grows for this
/// greedy placement, so the bisection is a heuristic; every probe is replayed by the simulator
/// and the smallest valid one returned. Fails with budget_too_small (minimum_budget: the largest
/// peak of the end-to-end plan) when even one activation per stage does not fit.
inline result<pipeline_plan> pipeline_modulo_fit(const pipeline_problem& problem,
                                                 const std::vector<pipeline_stage>& stages,
                                                 int steps = 40) {
  if (auto v = validate(problem); !v) return v.err();
  if (auto v = validate_stages(problem, stages); !v) return v.err();
  const auto ops = detail::pipe_chain_ops(problem, stages);
  const auto load = detail::pipe_resource_loads(problem, ops);
  const seconds lo = *std::max_element(load.begin(), load.end());
  seconds hi = 0;
  for (const auto& op : ops) hi += op.length;
  if (!(lo > 0))
    return error{status::infeasible,
                 "every stage and transfer takes 0 s: there is no period to search (give the "
                 "layers their times)",
                 {}};
  hi = std::max(hi, lo);
  struct probe {
    result<pipeline_plan> plan;
    sim::pipeline_report report;
    [[nodiscard]] bool ok() const { return plan.ok() && report.valid; }
  };
  auto rejected = [](const probe& p) -> std::optional<error> {
    if (!p.plan) return std::nullopt;
    const auto& v = p.report.first_violation;
    if (p.report.valid || (v && v->kind == sim::pipeline_violation_kind::over_memory))
      return std::nullopt;
    return error{status::solver_error,
                 "the modulo scheduler made a plan the simulator rejects: " +
                     (v ? v->message : std::string()),
                 {}};
  };
  std::optional<error> broken;
  auto place = [&](seconds period, pipeline_modulo_placement how) {
    auto plan = pipeline_modulo(problem, stages, period, how);
    sim::pipeline_report rep;
    if (plan) rep = sim::simulate_pipeline(problem, *plan);
    probe p{std::move(plan), std::move(rep)};
    if (auto e = rejected(p); e && !broken) broken = e;
    return p;
  };
  // Earliest placement first; packed placement when it leaves no gap or does not fit.
  auto run = [&](seconds period) {
    probe p = place(period, pipeline_modulo_placement::earliest);
    if (p.ok()) return p;
    probe q = place(period, pipeline_modulo_placement::packed);
    return q.ok() || !p.plan ? std::move(q) : std::move(p);
  };
  probe first = run(lo);
  if (broken) return *broken;
  if (first.ok()) return std::move(first.plan);
  probe top = run(hi);
  if (broken) return *broken;
  if (!top.plan) return top.plan;
  if (!top.report.valid) {
    const bytes need = sim::pipeline_memory_needed(problem, *top.plan);
    return error{status::budget_too_small,
                 "no modulo-scheduled plan of this allocation fits in memory " +
                     format_bytes(problem.memory) + " per processor: with period " +
                     detail::time_text(hi) +
                     " s (one mini-batch end to end, one activation per stage) " +
                     top.report.first_violation->message,
                 need};
  }
  probe best = std::move(top);
  seconds a = lo, b = hi;  // b's plan fits
  for (int i = 0; i < steps && b - a > 1e-9 * b; ++i) {
    const seconds mid = a + (b - a) / 2;
    probe p = run(mid);
    if (broken) return *broken;
    if (p.ok()) {
      b = mid;
      best = std::move(p);
    } else {
      a = mid;
    }
  }
  return std::move(best.plan);
}

}  // namespace remat
