#pragma once
// MadPipe [Shilova21, ch. 7]: a non-contiguous allocation where every processor but one (the
// normal ones) holds one stage and a special processor holds any number, then a schedule of it.
// Phase 1 is the DP T(j, p, t_P, m_P, V) over the special processor's load t_P and memory m_P
// and a lower bound V on the delay between F_j and B_j (1F1B*'s groups for a target period
// T-hat), with t_P, m_P and V on grids, and Alg. 8's search on T-hat. The allocation is then
// scheduled by schedule_allocation: 1F1B* (Alg. 7) when it is contiguous, the modulo scheduler
// (pipeline/modulo.hpp) otherwise; the ch. 6 ILP (phase 2) is to precede them there, with the
// Milp backend. Every plan is replayed by the simulator. docs/pipeline.md.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/pipedream.hpp>
#include <remat/policy/pipeline/ilp.hpp>
#include <remat/policy/pipeline/modulo.hpp>
#include <remat/policy/pipeline/recompute_model.hpp>
#include <remat/policy/pipeline/solution.hpp>
#include <remat/policy/pipeline/stage_model.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace remat {

/// What MadPipe reports after each DP run of Alg. 8.
struct madpipe_progress {
  int iteration = 0;    ///< 1..K, K + 1 the last-resort run at ub; the worst-case pass from K + 2
  seconds target = 0;   ///< T-hat of this run
  seconds period = 0;   ///< its DP's T (+infinity: no allocation passed the estimates)
  seconds best = 0;     ///< min of max(T, T-hat) over this pass so far
  seconds elapsed = 0;  ///< since solve began
};

namespace detail {

/// Phase 1's allocation: the stages in chain order (last layers) and which are on the special
/// processor.
struct madpipe_allocation {
  std::vector<int> last;
  std::vector<bool> special;
  std::vector<int> option;  ///< each stage's option, its index in model.options(first, last)
  seconds period = std::numeric_limits<seconds>::infinity();  ///< the DP's T
  bool timed_out = false;
  /// Without an allocation: whether a higher cap could find one (false: memory rules out all).
  bool capped = false;
  [[nodiscard]] bool found() const { return !last.empty(); }
};

/// MadPipe-DP for one T-hat [Shilova21, §7.1.2], memoised top-down over (j, p, t_P index, m_P
/// index, V index); the blocks of the table are allocated when first reached. Rounding: t_P and
/// m_P are rounded up to their grids (t_P on [0, U(1, L)], a state beyond it dropped; m_P on
/// [0, M], beyond it infeasible), so that the special processor's load and memory are never
/// under-counted by the grids; V, a delay that only sets the groups, goes to the nearest value
/// of its grid on [0, U(1, L) + sum C] (held at the top beyond it): rounding it up at every stage
/// would push the stages into later groups one after the other. A cap drops every state whose
/// value reaches it (they come back +infinity), which Alg. 8 can afford (see madpipe::solve).
template <class Model>
class madpipe_dp {
 public:
  using clock = std::chrono::steady_clock;

  madpipe_dp(const Model& model, int procs, bytes memory, seconds target, int load_steps,
             int memory_steps, int delay_steps, clock::time_point deadline, seconds cap,
             bool worst_case_special)
      : model_(model),
        n_(model.layers()),
        procs_(procs),
        memory_(memory),
        limited_(memory < unlimited_bytes),
        target_(target),
        nt_(load_steps),
        nm_(memory_steps),
        nv_(delay_steps),
        deadline_(deadline),
        cap_(cap),
        special_less_(worst_case_special ? 0 : 1) {
    seconds total = 0, comm = 0;
    for (const auto& o : model.options(1, n_)) total = std::max(total, o.work());
    for (int l = 1; l < n_; ++l) comm += model.transfer(l);
    step_t_ = total / (nt_ - 1);
    step_m_ = static_cast<double>(memory) / (nm_ - 1);
    step_v_ = (total + comm) / (nv_ - 1);
    if (procs_ > 1) blocks_.resize(ix(n_) * ix(procs_ - 1) * ix(nt_));
    least_.assign(ix(n_ + 1), 0);
    for (int j = 1; j <= n_; ++j) least_[ix(j)] = std::begin(model.options(1, j))->work();
  }

  madpipe_allocation run() {
    madpipe_allocation out;
    choice c;
    int j = n_, p = procs_ - 1, ti = 0, mi = 0, vi = 0;
    out.period = value(j, p, ti, mi, vi, nullptr);
    out.timed_out = timed_out_;
    out.capped = capped_;
    if (timed_out_ || !std::isfinite(out.period)) return out;
    // The decisions along the path, from the last stage back.
    std::vector<int> last;
    std::vector<bool> special;
    std::vector<int> option;
    while (j > 0) {
      if (p == 0) {
        last.push_back(j);
        special.push_back(true);
        option.push_back(first_special(j, vi, mi));
        break;
      }
      value(j, p, ti, mi, vi, &c);
      last.push_back(j);
      special.push_back(c.special);
      option.push_back(c.option);
      j = c.first - 1;
      if (!c.special) --p;
      ti = c.ti;
      mi = c.mi;
      vi = c.vi;
    }
    std::reverse(last.begin(), last.end());
    std::reverse(special.begin(), special.end());
    std::reverse(option.begin(), option.end());
    out.last = std::move(last);
    out.special = std::move(special);
    out.option = std::move(option);
    return out;
  }

 private:
  struct choice {
    int first = 1;
    bool special = false;
    int ti = 0, mi = 0, vi = 0;
    int option = 0;
  };
  static constexpr seconds inf = std::numeric_limits<seconds>::infinity();
  static constexpr double eps = 1e-9;

  [[nodiscard]] long long group(seconds v, seconds u) const {
    return std::max(1LL, static_cast<long long>(std::ceil((v + u) / target_ - eps)));
  }
  /// x (+) y [Shilova21, §7.1.2]: x + y within x's group, else from the start of the next.
  [[nodiscard]] seconds oplus(seconds x, seconds y) const {
    const double gx = std::ceil(x / target_ - eps), gxy = std::ceil((x + y) / target_ - eps);
    return gx == gxy ? x + y : target_ * gx + y;
  }
  /// The activations counted for a special stage of group g: the thesis' g - 1 (or g in the
  /// worst-case pass), but at least 1: the F..B of one mini-batch on the special processor's
  /// later stages run inside those of its earlier stages, so when the last of them runs its B
  /// every one of them holds that mini-batch's activation.
  [[nodiscard]] long long special(long long g) const { return std::max(1LL, g - special_less_); }
  [[nodiscard]] int up(double x, double step) const {
    if (!(step > 0)) return 0;
    return std::max(0, static_cast<int>(std::ceil(x / step - eps)));
  }
  [[nodiscard]] int delay_index(seconds v) const {
    return std::min(nv_ - 1, step_v_ > 0 ? static_cast<int>(std::floor(v / step_v_ + 0.5)) : 0);
  }

  /// The first option of layers 1..j that fits the special processor after m_P (index mi), with
  /// the delay bound of index vi; -1 if none.
  [[nodiscard]] int first_special(int j, int vi, int mi) const {
    const seconds v = vi * step_v_;
    const double mp = mi * step_m_;
    int k = 0;
    for (const auto& o : model_.options(1, j)) {
      const long long g = group(v, o.work());
      if (!limited_ ||
          mp + static_cast<double>(model_.memory(o, 1, j, special(g), false, j < n_)) <=
              static_cast<double>(memory_))
        return k;
      ++k;
    }
    return -1;
  }

  seconds value(int j, int p, int ti, int mi, int vi, choice* rec) {
    const seconds tp = ti * step_t_;
    if (j == 0) return tp;
    const seconds v = vi * step_v_;
    const double mp = mi * step_m_;
    if (p == 0) {  // layers 1..j as one stage on the special processor
      const int k = first_special(j, vi, mi);
      if (k < 0) return inf;
      return tp + std::begin(model_.options(1, j))[k].work();
    }
    float* slot = nullptr;
    if (!rec) {
      auto& block = blocks_[(ix(j - 1) * ix(procs_ - 1) + ix(p - 1)) * ix(nt_) + ix(ti)];
      if (!block) {
        block = std::make_unique<float[]>(ix(nm_) * ix(nv_));
        std::fill_n(block.get(), ix(nm_) * ix(nv_), -1.0f);
      }
      slot = &block[ix(mi) * ix(nv_) + ix(vi)];
      if (*slot >= 0) return *slot;
      if ((++calls_ & 1023) == 0 && clock::now() > deadline_) timed_out_ = true;
      if (timed_out_) return inf;
    }
    seconds best = cap_;      // values at or above the cap are of no use: they come back infinite
    bool cut = !(tp < best);  // something left out for reaching the best (the cap, at first)
    for (int i = tp < best ? j : 0; i >= 1; --i) {  // the value is at least t_P
      const auto& opts = model_.options(i, j);
      const seconds least = std::begin(opts)->work();
      const bool try_normal = least < best;
      const bool try_special = tp + least < best;
      cut = cut || !try_normal || !try_special;
      if (!try_normal && !try_special) break;  // the works only grow as i falls
      const seconds comm = model_.transfer(i - 1);
      if (comm >= best) {
        cut = true;
        continue;
      }
      // Layers 1..i-1 and t_P on the processors left: their average load bounds the period.
      const seconds before = least_[ix(i - 1)];
      const bool normal_bound = (before + tp) / p < best;
      cut = cut || (try_normal && !normal_bound);
      int k = -1;
      if (try_normal && normal_bound)
        for (const auto& o : opts) {
          ++k;
          const long long g = group(v, o.work());
          if (limited_ && model_.memory(o, i, j, g, i > 1, j < n_) > memory_) continue;
          const int nvi = delay_index(oplus(oplus(v, o.work()), comm));
          const seconds rest = value(i - 1, p - 1, ti, mi, nvi, nullptr);
          const seconds val = std::max({o.work(), comm, rest});
          if (val < best) {
            best = val;
            if (rec) *rec = {i, false, ti, mi, nvi, k};
          }
          break;
        }
      k = -1;
      if (try_special)
        for (const auto& o : opts) {
          ++k;
          const int nti = up(tp + o.work(), step_t_);
          if (nti > nt_ - 1) break;
          const long long g = group(v, o.work());
          int nmi = 0;
          if (limited_) {
            const double m =
                mp + static_cast<double>(model_.memory(o, i, j, special(g), i > 1, j < n_));
            if (m > static_cast<double>(memory_)) continue;
            nmi = std::min(nm_ - 1, up(m, step_m_));
          }
          const int nvi = delay_index(oplus(oplus(v, o.work()), comm));
          const seconds load = nti * step_t_;
          if ((before + load) / (p + 1) >= best) {
            cut = true;
            break;
          }
          const seconds rest = value(i - 1, p, nti, nmi, nvi, nullptr);
          const seconds val = std::max({load, comm, rest});
          if (val < best) {
            best = val;
            if (rec) *rec = {i, true, nti, nmi, nvi, k};
          }
          break;
        }
    }
    if (best >= cap_) {
      best = inf;
      capped_ = capped_ || cut;
    }
    if (slot && !timed_out_) *slot = static_cast<float>(best);
    return best;
  }

  const Model& model_;
  int n_, procs_;
  bytes memory_;
  bool limited_;
  seconds target_;
  int nt_, nm_, nv_;
  clock::time_point deadline_;
  seconds cap_;
  long long special_less_;  ///< the special processor's stages keep g - this many activations
  double step_t_ = 0, step_m_ = 0, step_v_ = 0;
  std::vector<std::unique_ptr<float[]>> blocks_;
  /// The least work of layers 1..j (the first option of options(1, j); the store-all model's
  /// works add up, so every partition of 1..j works at least that in all).
  std::vector<seconds> least_;
  long long calls_ = 0;
  bool timed_out_ = false;
  bool capped_ = false;  ///< some state came back infinite for the cap, not for memory alone
};

/// The stages of an allocation in chain order: the normal processors' stages on processors 0,
/// 1, ... in turn, the special ones on the next (at most P - 1), each with its option's program
/// (model.program; none for the store-all model).
template <class Model>
result<std::vector<pipeline_stage>> madpipe_stages_of(const Model& model,
                                                      const madpipe_allocation& alloc, int procs) {
  int normal = 0;
  for (bool s : alloc.special) normal += s ? 0 : 1;
  const int special_proc = std::min(normal, procs - 1);
  auto stages = pipe_stages_of(model, alloc.last, alloc.option);
  if (!stages) return stages;
  normal = 0;
  for (std::size_t s = 0; s < stages->size(); ++s)
    (*stages)[s].processor = alloc.special[s] ? special_proc : normal++;
  return stages;
}

/// The plan of an allocation and the scheduler that made it.
struct pipe_scheduled {
  pipeline_plan plan;
  std::string scheduler;
};

/// Schedules any allocation: 1F1B* with the smallest period that fits M (Alg. 7) when each
/// processor holds at most one stage, the modulo scheduler's search otherwise. The ch. 6 ILP
/// (MadPipe's phase 2) is to come first here.
inline result<pipe_scheduled> schedule_allocation(const pipeline_problem& problem,
                                                  const std::vector<pipeline_stage>& stages) {
  std::vector<int> held(ix(problem.processors), 0);
  bool contiguous = true;
  for (const auto& st : stages)
    if (st.processor >= 0 && st.processor < problem.processors && ++held[ix(st.processor)] > 1)
      contiguous = false;
  auto plan =
      contiguous ? one_f_one_b_star_fit(problem, stages) : pipeline_modulo_fit(problem, stages);
  if (!plan) return plan.err();
  return pipe_scheduled{std::move(*plan), contiguous ? "1F1B*" : "modulo"};
}

}  // namespace detail

template <class Milp = milp::unavailable, class Segments = rotor_segments>
struct madpipe {
  static constexpr std::string_view name = "madpipe";
  static constexpr std::string_view summary =
      "MadPipe: a DP over one special processor holding several stages (Alg. 8's search on the "
      "target period), scheduled by 1F1B* or a modulo scheduler";

  int iterations = 10;    ///< K, Alg. 8's DP runs
  int load_steps = 101;   ///< values of t_P on [0, U(1, L)]
  int memory_steps = 11;  ///< values of m_P on [0, M]
  int delay_steps = 51;   ///< values of V on [0, U(1, L) + sum C]
  /// Seconds for the whole solve, checked inside the DP; 0: none. Past it, the best allocation
  /// of the DP runs that finished is scheduled, or time_limit when none had.
  double time_limit = 0;
  /// A second Alg. 8 with the special processor's stages counted as a normal processor's (g
  /// activations, not the thesis' g - 1): its allocations are scheduled too and the shortest
  /// valid plan wins. Without the ILP (phase 2) to repair the thesis' optimistic estimate, the
  /// first pass's allocations may need a much longer period than the DP said.
  bool worst_case_pass = true;
  /// Where storing every activation of a stage does not fit, the stage may recompute in its
  /// backward (the segment policy's program within a share of M, rotor's by default;
  /// docs/pipeline.md, "Stages that recompute"). false: the thesis' model, every stage stores.
  bool recompute = true;
  detail::pipe_recompute_knobs recompute_knobs{};
  /// The recomputing stages' programs: rotor_segments (one table for every interval and
  /// share), or any chain policy P as policy_segments<P> (policy/policy_segments.hpp).
  Segments segments{};
  std::function<void(const madpipe_progress&)> progress;  ///< after each DP run, if set
  Milp milp{};  ///< phase 2's backend (the ch. 6 ILP); milp::unavailable: no phase 2
  /// Phase 2 [Shilova21, ch. 7]: the ILP of ch. 6 on the best plan's stages (its allocation and
  /// schedule chosen anew), warm-started from that plan and bounded by its period, within
  /// phase2_time_limit seconds (and what is left of time_limit). false: phase 1 only.
  bool phase2 = true;
  double phase2_time_limit = 60;

  /// Phase 2 on `out`'s stages: the ILP's plan replaces phase 1's when its period is shorter.
  /// What happened is in out.notes; the ILP's bound, when it has one, in out.period_bound.
  void run_phase2(const pipeline_problem& problem, pipeline_solution& out, double spent) const {
    if (!phase2) return;
    if constexpr (std::is_same_v<Milp, milp::unavailable>) {
      out.notes.push_back("phase 2 (the ILP) skipped: no MILP backend (madpipe<milp::cbc>)");
      return;
    } else {
      if (!Milp::available()) {
        out.notes.push_back("phase 2 (the ILP) skipped: " + std::string(Milp::name) +
                            " is not available in this build");
        return;
      }
      pipeline_ilp_options o;
      o.time_limit = phase2_time_limit;
      if (time_limit > 0) o.time_limit = std::min(o.time_limit, std::max(0.01, time_limit - spent));
      o.period_bound = out.plan.period;
      o.warm_start = out.plan;
      o.contiguous_start_limit = 0;
      if (out.plan.k != 1 || out.plan.stages.size() > detail::pipe_ilp_max_stages) {
        out.notes.push_back("phase 2 (the ILP) skipped: " + std::to_string(out.plan.stages.size()) +
                            " stages");
        return;
      }
      auto r = pipeline_ilp_schedule<Milp>(problem, out.plan.stages, o);
      if (!r) {
        out.notes.push_back("phase 2 (the ILP): " + r.message() + "; phase 1's plan kept");
        return;
      }
      out.period_bound = r->bound;
      if (r->plan.period < out.plan.period * (1 - 1e-9)) {
        out.report = sim::simulate_pipeline(problem, r->plan);
        out.plan = std::move(r->plan);
        out.scheduler = "ILP";
      }
      out.notes.push_back(
          std::string("phase 2 (the ILP): ") + (r->optimal ? "optimal" : "stopped") + " in " +
          detail::time_text(r->solve_seconds) + " s, period " + detail::time_text(r->plan.period) +
          " s, bound " + detail::time_text(r->bound) + " s");
    }
  }

  [[nodiscard]] result<pipeline_solution> solve(const pipeline_problem& problem) const {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto bad = [](std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; };
    if (auto v = validate(problem); !v) return v.err();
    if (iterations < 1 || iterations > 1000)
      return bad("madpipe: iterations is " + std::to_string(iterations) + "; use 1..1000 (10)");
    for (auto [v, what] : {std::pair{load_steps, "load_steps"},
                           {memory_steps, "memory_steps"},
                           {delay_steps, "delay_steps"}})
      if (v < 2 || v > 100000)
        return bad(std::string("madpipe: ") + what + " is " + std::to_string(v) +
                   "; a grid needs 2..100000 values");
    if (!(time_limit >= 0))
      return bad("madpipe: time_limit is " + detail::time_text(time_limit) +
                 "; it is seconds, >= 0 (0: none)");
    const auto deadline = time_limit > 0 && time_limit < 1e9
                              ? start + std::chrono::duration_cast<clock::duration>(
                                            std::chrono::duration<double>(time_limit))
                              : clock::time_point::max();
    // The thesis' model (every stage stores), and, when stages may recompute and memory is
    // limited, the model with recomputing options: Alg. 8 runs on both and the shortest valid
    // plan wins, so that recomputation never makes a plan worse than the thesis' model's.
    const detail::pipe_store_all_model plain(problem);
    std::optional<detail::pipe_recompute_model<Segments>> rich;
    if (recompute && problem.memory < unlimited_bytes) {
      auto made = detail::pipe_recompute_model<Segments>::make(
          problem, recompute_knobs, detail::deadline(time_limit), name, segments);
      if (!made) return made.err();
      rich.emplace(std::move(*made));
    }
    const int n = plain.layers(), procs = problem.processors;
    seconds total = 0, comm = 0;
    for (const auto& o : plain.options(1, n)) total = std::max(total, o.work());
    for (int l = 1; l < n; ++l) comm += plain.transfer(l);
    if (!(total > 0))
      return error{status::infeasible,
                   "madpipe: every layer of chain '" + problem.layers.name +
                       "' takes 0 s: there is no period to balance (give the layers their times)",
                   {}};
    auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };

    // Alg. 8, with the thesis' estimate of the special processor and then, if asked, with the
    // worst case (g activations for its stages, as a normal processor's).
    struct run {
      seconds target, period;
      detail::madpipe_allocation alloc;
      /// The allocation's stages (each with its option's program), or why they could not be made.
      result<std::vector<pipeline_stage>> stages;
    };
    std::vector<run> runs;
    bool timed_out = false;
    int dp_runs = 0;
    const seconds top = total + comm;
    // Whether any allocation passes the model's estimates at some target: a DP at the loosest
    // target, top, with nothing cut. There every stage counts the fewest activations any target
    // gives (g = 1: the delays add up without rounding to groups), the grids do not depend on
    // the target, and no load is cut, so what passes at any target passes there
    // (docs/pipeline.md, "Decisions"). Asked when a pass's first probe finds nothing, so that a
    // memory no allocation fits is told in two DP runs per model, not Alg. 8's K + 1 per pass.
    auto passes_somewhere = [&](const auto& m) {
      using model_type = std::decay_t<decltype(m)>;
      detail::madpipe_dp<model_type> dp(m, procs, problem.memory, top, load_steps, memory_steps,
                                        delay_steps, deadline, top * (1 + 1e-9), false);
      const detail::madpipe_allocation a = dp.run();
      ++dp_runs;
      if (a.timed_out) timed_out = true;
      return a.found() || a.timed_out;
    };
    auto search = [&](const auto& m, bool worst, int first_iteration) {
      using model_type = std::decay_t<decltype(m)>;
      seconds lb = total / procs, ub = top, best = std::numeric_limits<seconds>::infinity();
      bool found = false;
      auto probe = [&](seconds target, int iteration, seconds cap, seconds reach) {
        // Alg. 8 only moves its bounds with a T below ub (the best max(T, T-hat) so far): the
        // DP may leave out whatever reaches it (its states come back infinite). It is run with
        // smaller caps first, each 1.5 times the last, from 1.125 U(1, L) / P (no T is below
        // U(1, L) / P), up to `reach`: a DP whose T is below its cap has it exact, and a low cap
        // prunes most states. A T beyond `reach` (2 max(T-hat, U(1, L) / P)) counts as +infinity:
        // lb still becomes T-hat, only ub misses a decrease to T (a later T-hat finds such
        // allocations).
        detail::madpipe_allocation a;
        const seconds last = std::min(cap, reach);
        for (seconds c = std::min(last, total / procs * 1.125);; c = std::min(last, c * 1.5)) {
          detail::madpipe_dp<model_type> dp(m, procs, problem.memory, target, load_steps,
                                            memory_steps, delay_steps, deadline, c, worst);
          a = dp.run();
          ++dp_runs;
          if (a.timed_out || a.found() || c >= last || !a.capped) break;
        }
        if (a.timed_out) {
          timed_out = true;
          return std::numeric_limits<seconds>::infinity();
        }
        const seconds t = a.period;
        if (a.found()) best = std::min(best, std::max(t, target));
        if (progress) progress({iteration, target, t, best, elapsed()});
        if (a.found()) {
          found = true;
          auto stages = detail::madpipe_stages_of(m, a, procs);
          runs.push_back({target, t, std::move(a), std::move(stages)});
        }
        return t;
      };
      seconds target = lb;
      for (int k = 1; k <= iterations && !timed_out; ++k) {
        const seconds t = probe(target, first_iteration + k, found ? ub : top * (1 + 1e-9),
                                2 * std::max(target, total / procs));
        if (timed_out) break;
        if (k == 1 && !found && !passes_somewhere(m)) return false;  // nothing passes anywhere
        lb = std::max(lb, std::min(t, target));
        ub = std::min(ub, std::max(t, target));
        target = (lb + ub) / 2;
      }
      // Alg. 8 never reaches its upper bound; when nothing passed, probe it once.
      if (!found && !timed_out)
        probe(top, first_iteration + iterations + 1, top * (1 + 1e-9), top * (1 + 1e-9));
      return true;
    };
    int iteration = 0;
    auto both_passes = [&](const auto& m) {
      if (timed_out) return;
      // The worst-case pass counts more activations than the thesis' estimate, and as many at
      // top: when nothing passes anywhere in the first, nothing does in it either.
      const bool possible = search(m, false, iteration);
      iteration += iterations + 1;
      if (worst_case_pass && possible && !timed_out) search(m, true, iteration);
      iteration += iterations + 1;
    };
    both_passes(plain);
    if (rich) both_passes(*rich);
    if (runs.empty()) {
      if (timed_out)
        return error{status::time_limit,
                     "madpipe: time_limit " + detail::time_text(time_limit) +
                         " s ran out before a DP run finished (" + detail::time_text(elapsed()) +
                         " s); raise it or use coarser grids (load_steps, delay_steps)",
                     {}};
      const bytes need =
          detail::pipe_least_memory(problem, recompute, recompute_knobs, name, segments);
      return error{status::budget_too_small,
                   "madpipe: no allocation of chain '" + problem.layers.name + "' on " +
                       std::to_string(procs) + " processors passes MadPipe's memory estimates in " +
                       format_bytes(problem.memory) + " per processor; with " + format_bytes(need) +
                       " a contiguous partition does (PipeDream's DP, found by a bisection over M)",
                   need};
    }
    // Schedule the allocations found, best max(T, T-hat) first; keep the shortest valid plan.
    std::stable_sort(runs.begin(), runs.end(), [](const run& a, const run& b) {
      return std::max(a.period, a.target) < std::max(b.period, b.target);
    });
    // The candidates: each DP run's allocation, and PipeDream's contiguous partition on either
    // model (MadPipe's allocations include the contiguous ones; its DP's estimates may miss the
    // best of them, which must not make MadPipe slower than PipeDream).
    struct candidate {
      std::vector<pipeline_stage> stages;
      seconds predicted, target;
    };
    std::vector<candidate> candidates;
    for (run& r : runs) {
      if (!r.stages) return r.stages.err();
      candidates.push_back({std::move(*r.stages), r.period, r.target});
    }
    // PipeDream's check of 1F1B's activations is optimistic when transfers take time (1F1B*
    // then needs a longer period to fit), so its partitions at smaller memories, which fit M
    // too, are candidates as well: M 2^(-k/4), k = 0..8.
    std::optional<error> failed;
    // A level whose partition is the previous level's adds nothing (its stages and programs are
    // not made again); a later level may still change it, so the levels go on.
    auto pipedream_candidates = [&](const auto& m) {
      detail::pipe_partition previous;
      for (int k = 0; k <= (problem.memory < unlimited_bytes ? 8 : 0) && !failed; ++k) {
        const auto level =
            static_cast<bytes>(static_cast<double>(problem.memory) * std::exp2(-k / 4.0));
        const auto part = detail::pipedream_partition(m, procs, level);
        if (!part.found()) break;
        if (part.last == previous.last && part.option == previous.option) continue;
        previous = part;
        auto stages = detail::pipe_stages_of(m, part.last, part.option);
        if (!stages)
          failed = stages.err();
        else
          candidates.push_back({std::move(*stages), part.period, 0});
      }
    };
    pipedream_candidates(plain);
    if (rich) pipedream_candidates(*rich);
    if (failed) return *failed;
    pipeline_solution out;
    out.dp_runs = dp_runs;
    std::optional<error> first_error;
    std::vector<std::vector<pipeline_stage>> tried;
    bool have = false;
    for (candidate& cand : candidates) {
      if (std::find(tried.begin(), tried.end(), cand.stages) != tried.end()) continue;
      tried.push_back(cand.stages);
      auto sched = detail::schedule_allocation(problem, cand.stages);
      if (!sched) {
        if (!first_error) first_error = sched.err();
        continue;
      }
      sim::pipeline_report rep = sim::simulate_pipeline(problem, sched->plan);
      if (!rep.valid)
        return error{status::solver_error,
                     "madpipe: the simulator rejects the " + sched->scheduler + " plan: " +
                         (rep.first_violation ? rep.first_violation->message : std::string()),
                     {}};
      if (!have || rep.normalized_period < out.report.normalized_period) {
        have = true;
        out.plan = std::move(sched->plan);
        out.report = std::move(rep);
        out.scheduler = sched->scheduler;
        out.predicted_period = cand.predicted;
        out.target_period = cand.target;
      }
    }
    if (!have)
      return error{first_error->code,
                   "madpipe: no allocation found could be scheduled: " + first_error->message,
                   first_error->minimum_budget};
    run_phase2(problem, out, elapsed());
    out.planning_seconds = elapsed();
    return out;
  }
};

}  // namespace remat
