#pragma once
// 1F1B*(T) [Shilova21, Alg. 6]: for a contiguous allocation (each processor at most one stage)
// and a period T, the 1-periodic pattern that keeps the fewest activations on every stage
// [Shilova21, Thm 15]. The stages and the transfers between them form a chain of resources
// (stage 1, the link to stage 2, stage 2, ...), each with its work U = its F + its B. Groups are
// built greedily from the last resource back while their work fits in T; in group g the forwards
// run back to back on mini-batch m and the backwards follow at once on mini-batch m - g + 1
// (Def. 12's Equal Shift Pattern), the forwards of all groups back to back; a stage of group g
// keeps g activations. one_f_one_b_star_fit is Alg. 7: the smallest T whose 1F1B*(T) fits every
// processor in M, each probe checked by the simulator. docs/pipeline.md.

#include <algorithm>
#include <cstddef>
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

/// A resource of 1F1B*'s chain: a stage's processor, or the link after stage `stage`.
struct pipe_resource {
  pipeline_op_kind forward_kind = pipeline_op_kind::forward;
  pipeline_op_kind backward_kind = pipeline_op_kind::backward;
  int stage = 1;
  seconds forward = 0;
  seconds backward = 0;
  [[nodiscard]] seconds work() const { return forward + backward; }
};

/// The chain of resources of a contiguous allocation, or why the allocation does not do.
inline result<std::vector<pipe_resource>> pipe_resources(
    const pipeline_problem& problem, const std::vector<pipeline_stage>& stages) {
  auto bad = [](std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; };
  if (auto v = validate(problem); !v) return v.err();
  if (auto v = validate_stages(problem, stages); !v) return v.err();
  const chain& c = problem.layers;
  std::vector<int> holder(ix(problem.processors), 0);
  std::vector<pipe_resource> out;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const pipeline_stage& st = stages[i];
    const int s = static_cast<int>(i) + 1;
    int& h = holder[ix(st.processor)];
    if (h != 0)
      return bad("processor " + std::to_string(st.processor) + " holds stages " +
                 std::to_string(h) + " and " + std::to_string(s) +
                 "; 1F1B* needs a contiguous allocation, each processor at most one stage");
    h = s;
    auto cost = sim::stage_cost(c, st);
    if (!cost) return bad("stage " + std::to_string(s) + ": " + cost.message());
    out.push_back(
        {pipeline_op_kind::forward, pipeline_op_kind::backward, s, cost->forward, cost->backward});
    if (i + 1 < stages.size())
      out.push_back({pipeline_op_kind::send_activation, pipeline_op_kind::send_gradient, s,
                     static_cast<double>(c.a(st.last)) / problem.bandwidth,
                     static_cast<double>(c.delta(st.last)) / problem.bandwidth});
  }
  return out;
}

inline std::string pipe_resource_label(const pipe_resource& r) {
  if (r.forward_kind == pipeline_op_kind::forward) return "stage " + std::to_string(r.stage);
  return "the link from stage " + std::to_string(r.stage) + " to stage " +
         std::to_string(r.stage + 1);
}

/// Group of each resource (1 holds the last), greedily from the last while the work fits in T.
inline std::vector<int> pipe_groups(const std::vector<pipe_resource>& res, seconds period) {
  std::vector<int> group(res.size(), 1);
  const seconds tol = 1e-9 * period;
  int g = 1;
  seconds load = 0;
  for (std::size_t i = res.size(); i-- > 0;) {
    if (load + res[i].work() > period + tol) {
      ++g;
      load = 0;
    }
    load += res[i].work();
    group[i] = g;
  }
  return group;
}

inline result<std::vector<pipe_resource>> pipe_resources_for(
    const pipeline_problem& problem, const std::vector<pipeline_stage>& stages, seconds period) {
  auto res = pipe_resources(problem, stages);
  if (!res) return res;
  if (!std::isfinite(period) || period <= 0 || period >= max_time)
    return error{status::invalid_problem,
                 "the period is " + time_text(period) + "; it must be > 0 and below 1e+15 s",
                 {}};
  for (const auto& r : *res)
    if (r.work() > period * (1 + 1e-9))
      return error{status::infeasible,
                   "period " + time_text(period) + " s is shorter than the work of " +
                       pipe_resource_label(r) + " (" + time_text(r.work()) +
                       " s, its F and B), which it does once a period; the period must be at "
                       "least that",
                   {}};
  return res;
}

/// The 1-periodic plan of a chain of resources split into groups (`group[i]`, 1 holding the last
/// resource; a group a run of consecutive resources) at period T [Shilova21, Alg. 6]: mini-batch
/// 0's forwards back to back; in group g = resources [first, last], the backwards run last to
/// first right after F of `last`, in the window where the forwards run mini-batch g - 1 periods
/// later. Shifts as the thesis has them: B of stage 1 at shift 0.
inline pipeline_plan pipe_plan_of(const std::vector<pipeline_stage>& stages,
                                  const std::vector<pipe_resource>& r,
                                  const std::vector<int>& group, seconds period) {
  const std::size_t n = r.size();
  // Mini-batch 0's forwards back to back: F of resource i starts at phi[i].
  std::vector<seconds> phi(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) phi[i + 1] = phi[i] + r[i].forward;
  pipeline_plan plan;
  plan.stages = stages;
  plan.period = period;
  plan.k = 1;
  for (std::size_t i = 0; i < n; ++i)
    plan.ops.push_back(place_op(r[i].forward_kind, r[i].stage, phi[i], 0, period));
  for (std::size_t last = n; last-- > 0;) {
    std::size_t first = last;
    while (first > 0 && group[first - 1] == group[last]) --first;
    seconds t = (group[last] - 1) * period + phi[last + 1];
    for (std::size_t i = last + 1; i-- > first;) {
      plan.ops.push_back(place_op(r[i].backward_kind, r[i].stage, t, 0, period));
      t += r[i].backward;
    }
    last = first;
    if (last == 0) break;
  }
  int base = 0;
  for (const auto& op : plan.ops)
    if (op.kind == pipeline_op_kind::backward && op.stage == 1) base = op.shift;
  for (auto& op : plan.ops) op.shift -= base;
  return plan;
}

}  // namespace detail

/// The group of each stage in 1F1B*(T) (index s - 1): 1 for the group of the last stage, and
/// the stage keeps that many activations at once.
inline result<std::vector<int>> one_f_one_b_star_groups(const pipeline_problem& problem,
                                                        const std::vector<pipeline_stage>& stages,
                                                        seconds period) {
  auto res = detail::pipe_resources_for(problem, stages, period);
  if (!res) return res.err();
  const std::vector<int> group = detail::pipe_groups(*res, period);
  std::vector<int> out;
  for (std::size_t i = 0; i < res->size(); i += 2) out.push_back(group[i]);  // stages only
  return out;
}

/// 1F1B*(T) for a contiguous allocation: the 1-periodic plan of period T (see above). Fails
/// with invalid_problem for a bad problem or allocation, infeasible when a stage or a link has
/// more work than T.
inline result<pipeline_plan> one_f_one_b_star(const pipeline_problem& problem,
                                              const std::vector<pipeline_stage>& stages,
                                              seconds period) {
  auto res = detail::pipe_resources_for(problem, stages, period);
  if (!res) return res.err();
  const std::vector<detail::pipe_resource>& r = *res;
  return detail::pipe_plan_of(stages, r, detail::pipe_groups(r, period), period);
}

/// Alg. 7: the smallest period T whose 1F1B*(T) fits every processor in M, with its plan. The
/// groups change only where T crosses the work of some run of consecutive resources, so the
/// search runs over those values (from the largest single work, below which no 1-periodic plan
/// exists, to the whole work, one group) and is exact. Each probe is checked by the simulator.
/// Fails with budget_too_small (minimum_budget: the M that one group needs) when even one group,
/// one activation per stage, does not fit.
inline result<pipeline_plan> one_f_one_b_star_fit(const pipeline_problem& problem,
                                                  const std::vector<pipeline_stage>& stages) {
  auto res = detail::pipe_resources(problem, stages);
  if (!res) return res.err();
  const std::vector<detail::pipe_resource>& r = *res;
  seconds longest = 0;
  for (const auto& x : r) longest = std::max(longest, x.work());
  std::vector<seconds> candidates;
  for (std::size_t i = 0; i < r.size(); ++i) {
    seconds sum = 0;
    for (std::size_t j = i; j < r.size(); ++j) {
      sum += r[j].work();
      if (sum >= longest) candidates.push_back(sum);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  candidates.erase(
      std::remove_if(candidates.begin(), candidates.end(), [](seconds t) { return !(t > 0); }),
      candidates.end());
  if (candidates.empty())
    return error{status::infeasible,
                 "every stage and transfer takes 0 s: there is no period to search (give the "
                 "layers their times)",
                 {}};
  struct probe {
    result<pipeline_plan> plan;
    sim::pipeline_report report;
  };
  auto run = [&](seconds period) {
    auto plan = one_f_one_b_star(problem, stages, period);
    sim::pipeline_report rep;
    if (plan) rep = sim::simulate_pipeline(problem, *plan);
    return probe{std::move(plan), std::move(rep)};
  };
  probe hi = run(candidates.back());
  if (!hi.plan) return hi.plan;
  if (!hi.report.valid) {
    const auto& v = hi.report.first_violation;
    if (!v || v->kind != sim::pipeline_violation_kind::over_memory)
      return error{status::solver_error,
                   "1F1B* made a plan the simulator rejects: " + (v ? v->message : std::string()),
                   {}};
    const bytes need = sim::pipeline_memory_needed(problem, *hi.plan);
    return error{status::budget_too_small,
                 "no 1-periodic 1F1B* plan of this allocation fits in memory " +
                     format_bytes(problem.memory) + " per processor: with one group (period " +
                     detail::time_text(candidates.back()) + " s, one activation per stage) " +
                     v->message,
                 need};
  }
  // candidates[hi_i] fits; find the smallest that does (the peaks do not grow with T).
  std::size_t lo_i = 0, hi_i = candidates.size() - 1;
  probe best = std::move(hi);
  while (lo_i < hi_i) {
    const std::size_t mid = lo_i + (hi_i - lo_i) / 2;
    probe p = run(candidates[mid]);
    if (p.plan && p.report.valid) {
      hi_i = mid;
      best = std::move(p);
    } else {
      lo_i = mid + 1;
    }
  }
  return std::move(best.plan);
}

}  // namespace remat
