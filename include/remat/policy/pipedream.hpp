#pragma once
// PipeDream's partitioning [PipeDream19], as the thesis compares with it [Shilova21, ch. 7,
// "DP + 1F1B*"]: a dynamic program splits the chain into contiguous stages, one per processor
// (no data-parallel replication), minimising the largest of the stage works U(i, j) and the
// transfers C(j) = (a_j + delta_j) / beta at the boundaries, under PipeDream's memory check: the
// stage s of P' keeps P' - s + 1 activations (1F1B's count), plus C copies of its weights and its
// boundary buffers, within M. The partition is then scheduled by 1F1B* with the smallest period
// that fits M (Alg. 7), or, as an option, by PipeDream's 1F1B. When no partition passes the check,
// the error's minimum_budget is the smallest M with one, found by a bisection over M with the same
// DP. docs/pipeline.md.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/pipeline/recompute_model.hpp>
#include <remat/policy/pipeline/solution.hpp>
#include <remat/policy/pipeline/stage_model.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace remat {

namespace detail {

/// A contiguous partition: the last layer of each stage, the option of the model each stage runs
/// (its index in model.options(first, last)), and the DP's period for it.
struct pipe_partition {
  std::vector<int> last;
  std::vector<int> option;
  seconds period = std::numeric_limits<seconds>::infinity();
  [[nodiscard]] bool found() const { return !last.empty(); }
};

/// PipeDream's DP over suffixes: best(i, m) is the smallest max(U, C) over the partitions of
/// layers i..N into exactly m stages, each passing the memory check with m', the stages from it
/// to the end, activations (1F1B's NCA). The answer is the best over m = 1..P; ties go to fewer
/// stages. O(N^2 P) options looked at.
template <class Model>
pipe_partition pipedream_partition(const Model& model, int procs, bytes memory) {
  const int n = model.layers();
  constexpr seconds inf = std::numeric_limits<seconds>::infinity();
  const auto at = [&](int i, int m) { return ix(i) * ix(procs + 1) + ix(m); };
  std::vector<seconds> best(ix(n + 2) * ix(procs + 1), inf);
  std::vector<int> cut(best.size(), 0), chosen(best.size(), 0);
  best[at(n + 1, 0)] = 0;
  for (int i = n; i >= 1; --i)
    for (int m = 1; m <= std::min(procs, n - i + 1); ++m)
      for (int j = i; j <= n - m + 1; ++j) {
        const seconds rest = best[at(j + 1, m - 1)];
        if (rest == inf) continue;
        int k = 0;
        for (const auto& o : model.options(i, j)) {
          if (model.memory(o, i, j, m, i > 1, j < n) > memory) {
            ++k;
            continue;
          }
          const seconds v = std::max({o.work(), model.transfer(j), rest});
          if (v < best[at(i, m)]) {
            best[at(i, m)] = v;
            cut[at(i, m)] = j;
            chosen[at(i, m)] = k;
          }
          break;  // the first option that fits: the smallest work
        }
      }
  pipe_partition out;
  int stages = 0;
  for (int m = 1; m <= procs; ++m)
    if (best[at(1, m)] < out.period) {
      out.period = best[at(1, m)];
      stages = m;
    }
  for (int i = 1, m = stages; m > 0; --m) {
    const int j = cut[at(i, m)];
    out.last.push_back(j);
    out.option.push_back(chosen[at(i, m)]);
    i = j + 1;
  }
  return out;
}

/// The smallest M for which pipedream_partition finds a partition (a bisection over M; the
/// check passes for more memory once it passes). `model_for(M)` is the stage model at memory M
/// (the store-all model does not depend on it; the recomputing one's shares do), or an empty
/// optional or pointer when it cannot be made.
template <class ModelFor>
bytes pipedream_minimum_memory(const pipeline_problem& problem, ModelFor&& model_for,
                               int* runs = nullptr) {
  const pipe_store_all_model all(problem);
  bytes hi = 0;  // one stage storing everything passes
  for (const auto& o : all.options(1, all.layers()))
    hi = std::max(hi, all.memory(o, 1, all.layers(), 1, false, false));
  bytes lo = 0;  // hi passes; find the smallest that does
  while (lo < hi) {
    const bytes mid = lo + (hi - lo) / 2;
    if (runs) ++*runs;
    const auto model = model_for(mid);
    if (model && pipedream_partition(*model, problem.processors, mid).found())
      hi = mid;
    else
      lo = mid + 1;
  }
  return hi;
}

/// The least M with a contiguous partition (pipedream_minimum_memory) on the model the planners
/// use: with recomputing stages, the segment policy's model made at each M probed; without, the
/// store-all model, which does not depend on M.
template <class Segments>
bytes pipe_least_memory(const pipeline_problem& problem, bool recompute, pipe_recompute_knobs knobs,
                        std::string_view who, const Segments& segments, int* runs = nullptr) {
  if (!recompute) {
    const pipe_store_all_model plain(problem);
    return pipedream_minimum_memory(
        problem, [&](bytes) { return &plain; }, runs);
  }
  return pipedream_minimum_memory(
      problem,
      [&](bytes memory) -> std::optional<pipe_recompute_model<Segments>> {
        pipeline_problem q = problem;
        q.memory = memory;
        auto m = pipe_recompute_model<Segments>::make(q, knobs, deadline(0), who, segments);
        if (!m) return std::nullopt;
        return std::move(*m);
      },
      runs);
}

/// The contiguous stages of a partition, each with the program of its option (a recomputing
/// stage's, pipe_recompute_model::program; none for store-all).
template <class Model>
result<std::vector<pipeline_stage>> pipe_stages_of(const Model& model, const std::vector<int>& last,
                                                   const std::vector<int>& option) {
  std::vector<pipeline_stage> stages = contiguous_stages(last);
  if constexpr (requires { model.program(1, 1, pipe_stage_option{}); })
    for (std::size_t s = 0; s < stages.size(); ++s) {
      auto& st = stages[s];
      const auto opts = model.options(st.first, st.last);
      auto prog = model.program(st.first, st.last, opts[ix(option[s])]);
      if (!prog) return prog.err();
      st.recompute = std::move(*prog);
    }
  return stages;
}

/// PipeDream's 1F1B on a contiguous allocation, in 1F1B*'s terms [Shilova21, Alg. 6]: each stage
/// with the transfer after it is its own group (group 1 the last stage), so that stage s of S
/// keeps S - s + 1 activations whatever the period; the period is the largest group's work
/// U_s + C(s). The plan is 1F1B*'s construction with these groups (pipe_plan_of).
inline result<pipeline_plan> one_f_one_b_plain(const pipeline_problem& problem,
                                               const std::vector<pipeline_stage>& stages) {
  auto res = pipe_resources(problem, stages);
  if (!res) return res.err();
  const std::vector<pipe_resource>& r = *res;
  const std::size_t n = r.size();  // stage, link, stage, ..., stage
  const int S = static_cast<int>(stages.size());
  std::vector<int> group(n);
  seconds period = 0;
  for (std::size_t i = 0; i < n; i += 2) {
    const seconds work = r[i].work() + (i + 1 < n ? r[i + 1].work() : 0);
    period = std::max(period, work);
    group[i] = S - r[i].stage + 1;
    if (i + 1 < n) group[i + 1] = group[i];
  }
  if (!(period > 0))
    return error{status::infeasible,
                 "every stage and transfer takes 0 s: there is no period (give the layers their "
                 "times)",
                 {}};
  return pipe_plan_of(stages, r, group, period);
}

}  // namespace detail

template <class Segments = rotor_segments>
struct pipedream {
  static constexpr std::string_view name = "pipedream";
  static constexpr std::string_view summary =
      "PipeDream's contiguous partitioning DP (1F1B memory check), scheduled by 1F1B* (Alg. 7)";

  /// false: 1F1B* with the smallest period that fits M (Alg. 7), what the thesis compares with;
  /// true: PipeDream's own 1F1B, stage s of S keeping S - s + 1 activations, the period the
  /// largest work of a stage and the transfer after it.
  bool plain_one_f_one_b = false;

  /// Where storing every activation of a stage does not fit, the stage may recompute in its
  /// backward (the segment policy's program within a share of M, rotor's by default;
  /// docs/pipeline.md, "Stages that recompute"). false: the thesis' model, every stage stores.
  bool recompute = true;
  detail::pipe_recompute_knobs recompute_knobs{};
  /// The recomputing stages' programs: rotor_segments (one table for every interval and
  /// share), or any chain policy P as policy_segments<P> (policy/policy_segments.hpp).
  Segments segments{};

  /// The partition (contiguous stages, stage s on processor s - 1) and its 1F1B* plan of the
  /// smallest period that fits M (or its 1F1B plan), replayed by the simulator. With recompute
  /// and a limited M, the DP runs on the thesis' model and on the one with recomputing stages,
  /// and the shorter plan wins: recomputation never makes the plan slower.
  [[nodiscard]] result<pipeline_solution> solve(const pipeline_problem& problem) const {
    const auto start = std::chrono::steady_clock::now();
    if (auto v = validate(problem); !v) return v.err();
    const bool both = recompute && problem.memory < unlimited_bytes;
    int runs = 0;
    const detail::pipe_store_all_model plain(problem);
    auto best = plan_on(problem, plain, runs);
    if (both) {
      auto rich = detail::pipe_recompute_model<Segments>::make(problem, recompute_knobs,
                                                               detail::deadline(0), name, segments);
      if (!rich) return rich.err();
      auto other = plan_on(problem, *rich, runs);
      if (other &&
          (!best || other->report.normalized_period < best->report.normalized_period * (1 - 1e-12)))
        best = std::move(other);
      else if (!other && !best && other.code() != status::budget_too_small)
        return other;
    }
    if (!best && best.code() == status::budget_too_small && !best.err().minimum_budget) {
      const bytes need =
          detail::pipe_least_memory(problem, both, recompute_knobs, name, segments, &runs);
      return error{status::budget_too_small,
                   "pipedream: no contiguous partition of chain '" + problem.layers.name +
                       "' into at most " + std::to_string(problem.processors) +
                       " stages fits memory " + format_bytes(problem.memory) +
                       " per processor (stage s of P' keeping P' - s + 1 activations, C x its "
                       "weights and its buffers" +
                       (both ? ", storing or recomputing" : "") +
                       "); the smallest memory with one is " + format_bytes(need) +
                       " (a bisection over M with the same DP)",
                   need};
    }
    if (!best) return best;
    best->dp_runs = runs;
    best->planning_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return best;
  }

 private:
  /// The DP on `model`, its partition's stages and plan; budget_too_small without a minimum when
  /// no partition passes the DP's check.
  template <class Model>
  [[nodiscard]] result<pipeline_solution> plan_on(const pipeline_problem& problem,
                                                  const Model& model, int& runs) const {
    const detail::pipe_partition part =
        detail::pipedream_partition(model, problem.processors, problem.memory);
    ++runs;
    if (!part.found()) return error{status::budget_too_small, "no partition", {}};
    auto stages = detail::pipe_stages_of(model, part.last, part.option);
    if (!stages) return stages.err();
    auto plan = plain_one_f_one_b ? detail::one_f_one_b_plain(problem, *stages)
                                  : one_f_one_b_star_fit(problem, *stages);
    if (!plan) return error{plan.code(), "pipedream: " + plan.message(), plan.err().minimum_budget};
    pipeline_solution out;
    out.report = sim::simulate_pipeline(problem, *plan);
    if (!out.report.valid)
      return error{
          status::solver_error,
          "pipedream: the simulator rejects the " +
              std::string(plain_one_f_one_b ? "1F1B" : "1F1B*") + " plan: " +
              (out.report.first_violation ? out.report.first_violation->message : std::string()),
          {}};
    out.plan = std::move(*plan);
    out.predicted_period = part.period;
    out.scheduler = plain_one_f_one_b ? "1F1B" : "1F1B*";
    return out;
  }
};

}  // namespace remat
