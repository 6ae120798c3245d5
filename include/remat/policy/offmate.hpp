#pragma once
// offmate: OFFMATE's one plan for parameters, gradients, optimizer states and activations
// [Offmate24], its O-ILP solved by a MILP backend (milp::cbc or milp::lpsolve; this header
// includes neither). plan(graph, budget) plans a training graph with parameters through its
// blocks (policy/offmate/from_graph.hpp); plan(problem, budget) answers with each block's option,
// where each group's parameters and optimizer states are at each step, what the CPU updates, and
// the iteration's time as evaluate() (plan.hpp) computes it from the plan, not as the solver
// reports it; then the same in whole tensors (Algorithm 1, tensors.hpp) and, from a graph, the one
// program (program.hpp) that the simulator replays: the answer's makespan and peaks are those of
// what runs, the fractional plan's beside them. plan_batch chooses the batch size too (the
// variant of [Offmate24, App. A]: r = 1/b a variable, the time per sample minimised).
//
// Where nothing fits, the answer says why: budget_too_small with the least GPU memory any plan
// needs (a MILP of its own) and what fills it at its peak step; infeasible with the host memory
// the plans need when the host is what is short. The time limit covers every solve of the
// call; a solve it stops returns its best plan (not proven optimal) or time_limit.
// docs/offmate.md.

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
#include <utility>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/offmate/formulation.hpp>
#include <remat/policy/offmate/from_graph.hpp>
#include <remat/policy/offmate/plan.hpp>
#include <remat/policy/offmate/problem.hpp>
#include <remat/policy/offmate/program.hpp>
#include <remat/policy/offmate/tensors.hpp>
#include <remat/policy/solution.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat {

/// What offmate::plan answers.
struct offmate_answer {
  offmate_problem problem;  ///< what was planned (from a graph: its blocks, options and groups)
  /// From a graph: each block's forward nodes; empty when planned from a problem.
  std::vector<std::vector<int>> blocks;
  int run_length = 1;             ///< from a graph: blocks of its cut merged into each block
  offmate_plan plan;              ///< the O-ILP's plan (fractions of groups, or whole groups)
  offmate_evaluation evaluation;  ///< its step lanes, memory and (none) violations
  /// The plan in whole tensors (Algorithm 1; tensors.hpp): what the program moves.
  offmate_tensor_plan tensors;
  /// From a graph: the one program (program.hpp), checked by the simulator on hw and budget,
  /// its predicted_time and predicted_peak the simulator's.
  std::optional<schedule> program;
  /// One iteration, optimizer included, of what runs: from a graph the simulated program's
  /// makespan; from a problem the whole-tensor plan's by evaluate().
  seconds makespan = 0;
  bytes peak_bytes = 0;       ///< the GPU's peak, likewise
  bytes host_peak_bytes = 0;  ///< the host's, likewise
  /// The O-ILP's plan's (= evaluation.makespan): in fractions of groups, or whole groups where
  /// those were kept (a note says).
  seconds fractional_makespan = 0;
  bool optimal = false;          ///< proven optimal in the O-ILP
  std::optional<seconds> bound;  ///< the solver's lower bound on the O-ILP's optimum
  seconds solve_seconds = 0;
  std::vector<std::string> notes;
};

/// What offmate::plan_batch answers: the batch size it chose, and the plan at that size.
struct offmate_batch_answer {
  int batch = 1;  ///< the batch size chosen: 1/r rounded, or 1, with the more samples per second
  double continuous_batch = 1;  ///< 1/r at the variant's optimum, before rounding
  /// The variant's optimum: the time per sample of its fractional plan, a lower bound of every
  /// batch size's plan per sample (within the solver's gap).
  seconds time_per_sample = 0;
  offmate_answer answer;  ///< the plan at `batch` (plan(at_batch(problem, batch), budget))
  /// Each batch size planned: its size and its iteration's time (0 where it had no plan).
  std::vector<std::pair<int, seconds>> tried;

  [[nodiscard]] double samples_per_second() const {
    return answer.makespan > 0 ? batch / answer.makespan : 0.0;
  }
};

template <milp::MilpBackend Backend>
struct offmate {
  static constexpr std::string_view name = "offmate";
  static constexpr std::string_view summary =
      "OFFMATE's MILP: parameters, optimizer states, CPU updates and activations in one plan";
  /// Its budget is the whole GPU (parameters, gradients and optimizer states too), not the
  /// activations' share the other policies plan: it stays out of the portfolios, which compare
  /// plans within one budget.
  static constexpr bool in_portfolio = false;
  /// It plans within the machine's host memory (hw.host_memory), which remat-plan's
  /// --host-memory sets.
  static constexpr bool plans_host_memory = true;

  /// The machine: the link each way, the host memory, both optimizer speeds and the CPU's
  /// management time per step.
  machine hw = default_machine();
  /// Wall-clock limit of the whole call, seconds (every solve of it); not finite = none.
  double time_limit = std::numeric_limits<double>::infinity();
  /// Solver threads (CBC's parallel search from 2 on).
  int threads = 1;
  /// Called during the O-ILP's solve with the best iteration time found and the bound, in
  /// seconds.
  std::function<void(const milp::progress_report&)> progress = {};
  /// Stop when the gap to the bound is at most this (0: prove optimality).
  double relative_gap = 0;
  offmate_semantics semantics = offmate_semantics::strict;
  /// Switch the CPU optimizer or activation offloading off (the paper's ablations).
  offmate_features features = {};
  /// Move groups whole (every fraction 0 or 1) instead of by tensors.
  bool whole_groups = false;
  /// Where whole tensors cost the fractional plan more than 0.1 %, also solve the O-ILP with
  /// whole groups (exact in whole tensors) within this many branch-and-bound nodes (a bound that
  /// stops at the same point on every run, unlike time), and keep it where faster; 0 (the
  /// default): never. Worth it where groups are one or two large tensors (docs/offmate.md,
  /// "Whole tensors"); a binary MILP, seconds where the fractional one takes a fraction of one.
  std::int64_t whole_group_nodes = 0;
  /// Branch-and-bound nodes of the plan's solves (0: none): a limit that, unlike time_limit,
  /// stops at the same point on every run (the least-memory solves behind budget_too_small stay
  /// exact).
  std::int64_t node_limit = 0;
  /// From a graph: its blocks and their options (policy/offmate/from_graph.hpp). The O-ILP grows
  /// as the square of the blocks: 40 solve within a minute on two cores, a decoder layer's two
  /// blocks (attention, MLP) merged (docs/offmate.md, "From a graph").
  offmate_graph_options blocks = {.max_blocks = 40};
  /// The batch sizes to consider in solve_detailed / solve (a graph): 1 to max_batch times the
  /// graph's own, chosen by plan_batch (the program is then for at_batch(g, batch)); 1 (the
  /// default): the batch as given.
  int max_batch = 1;
  Backend backend = {};

  /// PCIe 3.0 both ways, the RTX 3060 machine's optimizer speeds of [Offmate24, §5] (CPU 1.1
  /// GB/s, GPU 16.6 GB/s), no management time.
  static constexpr machine default_machine() {
    machine m = machine::with_bandwidth(pcie3_x16_bandwidth);
    m.cpu_optimizer_speed = 1.1e9;
    m.gpu_optimizer_speed = 16.6e9;
    return m;
  }

  /// The plan of a training graph with parameters: its blocks as an OFFMATE problem, planned.
  /// Unless blocks.run_length is given, the blocks are the fewest merges that fit max_blocks or
  /// one block of the cut longer each (fewer steps: less management time, H each), whichever
  /// has the smaller LP relaxation at this budget (a second or two each).
  [[nodiscard]] result<offmate_answer> plan(const graph& g, bytes budget) const {
    const auto start = clock::now();
    std::string why;
    auto p = problem_of(g, budget, why);
    if (!p) return p.err();
    offmate rest = *this;  // the time limit covers the relaxations too
    rest.time_limit =
        std::max(0.0, time_limit - std::chrono::duration<double>(clock::now() - start).count());
    auto a = rest.plan(p->problem, budget);
    if (!a) return a;
    if (!why.empty()) a->notes.push_back(why);
    if (semantics == offmate_semantics::strict && !features.zero_offload) {
      auto s = offmate_program(g, *p, a->tensors);
      if (!s) return s.err();
      const sim::report r =
          sim::simulate(g, *s, {.budget = budget, .record_timeline = false, .hw = hw});
      if (!r.valid)
        return error{status::solver_error,
                     "offmate: the program of the plan is not valid on graph '" + g.name + "' (" +
                         r.first_violation->message +
                         "); a bug in remat: please report it with the graph",
                     {}};
      s->predicted_time = r.makespan;
      s->predicted_peak = r.peak;
      a->makespan = r.makespan;
      a->peak_bytes = r.peak;
      a->host_peak_bytes = r.host_peak;
      a->program = std::move(*s);
    }
    a->blocks = std::move(p->blocks);
    a->run_length = p->run_length;
    return a;
  }

  /// The catalogue's surface: the program of plan(g, budget), checked by the simulator.
  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    auto s = solve_detailed(g, budget);
    if (!s) return s.err();
    return std::move(s->program);
  }

  /// The program with what it is made of: each block's option and where its parameters,
  /// gradients and optimizer states live (offmate_details). Not marked optimal (whole tensors
  /// are a heuristic on the O-ILP's plan), and without a bound (the O-ILP's bounds its own
  /// model's optimum, not the program's time); the notes give both.
  [[nodiscard]] result<solution<offmate_details>> solve_detailed(const graph& g,
                                                                 bytes budget) const {
    std::optional<offmate_batch_answer> batch;
    auto a = [&]() -> result<offmate_answer> {
      if (max_batch == 1) return plan(g, budget);
      auto v = plan_batch(g, budget, max_batch);
      if (!v) return v.err();
      batch = *v;
      return std::move(v->answer);
    }();
    if (!a) return a.err();
    if (!a->program)
      return bad(
          "the literal semantics and the ZeRO-2-like baseline plan in fractions of groups, which "
          "no program runs; the strict semantics (the default) without features.zero_offload "
          "plans a program");
    solution<offmate_details> s;
    s.program = std::move(*a->program);
    s.optimal = s.program.predicted_time <= g.ideal_time();
    s.solve_seconds = a->solve_seconds;
    s.notes = a->notes;
    s.notes.push_back(
        "the O-ILP's plan: " + format_seconds(a->fractional_makespan) +
        (a->optimal ? " (optimal)"
                    : (a->bound ? ", its bound " + format_seconds(*a->bound) : std::string())) +
        "; in whole tensors the program takes " + format_seconds(a->makespan));
    offmate_details& d = s.details;
    d.fractional_makespan = a->fractional_makespan;
    d.host_peak_bytes = a->host_peak_bytes;
    if (batch) {
      d.batch = batch->batch;
      d.continuous_batch = batch->continuous_batch;
      d.time_per_sample = batch->time_per_sample;
      s.notes.push_back("batch " + std::to_string(batch->batch) +
                        " times the graph's (the variant's 1/r " +
                        std::to_string(batch->continuous_batch) +
                        "): " + std::to_string(batch->samples_per_second()) +
                        " samples per second; the program is for the graph at that batch");
    }
    d.hw = hw;
    d.run_length = a->run_length;
    const offmate_problem& p = a->problem;
    d.blocks.resize(p.blocks.size());
    for (std::size_t k = 0; k < p.blocks.size(); ++k) {
      d.blocks[k].name = p.blocks[k].name;
      d.blocks[k].option = p.option(static_cast<int>(k), a->plan.option[k]).name;
      if (k < a->blocks.size()) d.blocks[k].forwards = a->blocks[k];
    }
    for (std::size_t w = 0; w < p.groups.size(); ++w) {
      const parameter_group& grp = p.groups[w];
      const offmate_group_tensors& gt = a->tensors.groups[w];
      offmate_block_summary& b = d.blocks[static_cast<std::size_t>(grp.first_block())];
      for (std::size_t j = 0; j < grp.tensors.size(); ++j) {
        const parameter_tensor& t = grp.tensors[j];
        const bytes st =
            static_cast<bytes>(std::llround(p.optimizer_states * static_cast<double>(t.trainable)));
        bool leaves = false, states_leave = false;
        for (const offmate_tensor_step& x : gt.steps) {
          leaves = leaves || std::ranges::find(x.free, static_cast<int>(j)) != x.free.end();
          states_leave = states_leave || std::ranges::find(x.states_free, static_cast<int>(j)) !=
                                             x.states_free.end();
        }
        const bool cpu = gt.cpu_updated[j] != 0;
        b.parameter_bytes += t.size;
        b.offloaded_bytes += leaves ? t.size : 0;
        b.state_bytes += st;
        b.states_on_host_bytes += cpu || states_leave ? st : 0;
        (cpu ? b.cpu_update_bytes : b.gpu_update_bytes) += t.trainable;
      }
    }
    return s;
  }

  [[nodiscard]] result<offmate_answer> plan(const offmate_problem& p, bytes budget) const {
    if (auto v = validate(p); !v) return v.err();
    if (auto e = offmate_machine_error(hw)) return bad("hw: " + *e);
    if (budget < 0) return bad("the budget must be >= 0 bytes, not " + std::to_string(budget));
    if (threads < 0)
      return bad("threads must be >= 0 (0 or 1: one), not " + std::to_string(threads));
    if (std::isnan(time_limit) || time_limit < 0)
      return bad("time_limit must be >= 0 seconds (infinity: none)");
    if (!features.activation_offload || !hw.transfers())
      for (std::size_t i = 0; i < p.blocks.size(); ++i)
        if (std::ranges::all_of(p.blocks[i].options,
                                [](const offmate_option& o) { return o.offloaded_bytes > 0; }))
          return bad(detail::offmate_block_label(p.blocks[i], i) +
                     " has only options that offload activations, and " +
                     (hw.transfers() ? "activation offloading is off" : "there is no link") +
                     ": give it an option that keeps or recomputes");
    const auto start = clock::now();
    const auto deadline = deadline_from_now();
    auto sol = solve(p, budget, goal::time, deadline, true);
    if (!sol) {
      if (sol.code() != status::infeasible) return sol.err();
      return why_not(p, budget, deadline);
    }
    auto& [f, s] = *sol;
    offmate_answer out;
    out.problem = p;
    out.plan = f->plan(s);
    out.evaluation = evaluate(p, hw, budget, out.plan, semantics, features, 1e-5);
    if (!out.evaluation.valid())
      return error{status::solver_error,
                   "offmate: the solver's plan breaks the model (" +
                       out.evaluation.violations.front() +
                       "); a bug in remat or the solver's tolerances: please report it",
                   {}};
    out.fractional_makespan = out.makespan = out.evaluation.makespan;
    out.peak_bytes = static_cast<bytes>(std::ceil(out.evaluation.gpu_peak()));
    out.host_peak_bytes = static_cast<bytes>(std::ceil(out.evaluation.host_bytes));
    if (semantics == offmate_semantics::strict && !features.zero_offload) {
      // Whole tensors (Algorithm 1), priced by the same referee.
      out.tensors =
          balanced(p, hw, budget, to_tensors(p, hw, budget, out.plan, features), features);
      const auto whole =
          evaluate(p, hw, budget, fractions_of(p, out.tensors), semantics, features, 1e-5);
      if (!whole.valid())
        return error{status::solver_error,
                     "offmate: the plan in whole tensors breaks the model (" +
                         whole.violations.front() + "); a bug in remat: please report it",
                     {}};
      out.makespan = whole.makespan;
      out.peak_bytes = static_cast<bytes>(std::ceil(whole.gpu_peak()));
      out.host_peak_bytes = static_cast<bytes>(std::ceil(whole.host_bytes));
    } else if (features.zero_offload) {
      out.notes.push_back(
          "a ZeRO-2-like baseline: the plan stays in fractions of groups (the model's price of "
          "that placement; Algorithm 1 would move its tensors elsewhere), with no program");
    } else {
      out.notes.push_back(
          "literal semantics: the plan stays in fractions of groups (whole tensors and the "
          "program need the strict semantics)");
    }
    out.optimal = s.is_optimal();
    if (std::isfinite(s.bound)) out.bound = f->seconds_of(s.bound);
    if (!out.optimal)
      out.notes.push_back("stopped by the time limit: the best plan found, within " +
                          std::to_string(100 * s.gap()) + " % of the bound");
    // Where whole tensors cost the fractional plan much (a group of one large tensor), the
    // O-ILP with whole groups, exact in whole tensors, in the time left: kept where faster.
    const double left = time_limit - std::chrono::duration<double>(clock::now() - start).count();
    if (semantics == offmate_semantics::strict && !whole_groups && whole_group_nodes > 0 &&
        out.makespan > out.fractional_makespan * (1 + 1e-3) && left > 0) {
      offmate whole = *this;
      whole.whole_groups = true;
      whole.time_limit = left;
      whole.node_limit =
          node_limit > 0 ? std::min(node_limit, whole_group_nodes) : whole_group_nodes;
      whole.progress = {};
      auto w = whole.plan(p, budget);
      if (w && w->makespan < out.makespan * (1 - 1e-9)) {
        w->notes.insert(
            w->notes.begin(),
            "groups moved whole (every fraction 0 or 1): " + format_seconds(w->makespan) +
                ", faster than the fractional plan (" + format_seconds(out.fractional_makespan) +
                ") in whole tensors (" + format_seconds(out.makespan) + ")");
        w->bound = out.bound;  // the fractional O-ILP's bound holds for every plan
        w->optimal = false;
        out = std::move(*w);
      } else {
        out.notes.push_back(
            "groups moved whole: " +
            (w ? format_seconds(w->makespan) + ", not faster"
               : "no plan in the time left (" + std::string(to_string(w.code())) + ")"));
      }
    }
    out.solve_seconds = std::chrono::duration<double>(clock::now() - start).count();
    return out;
  }

  /// The batch-size variant [Offmate24, App. A]: `per_sample` holds one sample's data (each
  /// option's times and activation bytes, A_t); the O-ILP with r = 1/b a variable in
  /// [1/largest, 1] minimises the time per sample; 1/r rounded down and up, and 1, are each
  /// planned (plan(at_batch(per_sample, b), budget)), and the one with the more samples per
  /// second is the answer (never slower per sample than batch 1). budget_too_small where even one
  /// sample does not fit.
  [[nodiscard]] result<offmate_batch_answer> plan_batch(const offmate_problem& per_sample,
                                                        bytes budget, int largest) const {
    return batch_search(per_sample, budget, largest, [&](const offmate& sub, int b) {
      return sub.plan(at_batch(per_sample, b), budget);
    });
  }

  /// The same from a graph whose batch is the unit: the variant on its blocks (plan(g, ...)'s),
  /// then each rounding b planned as plan(at_batch(g, b), budget), whose program is for that
  /// graph (from_graph.hpp's at_batch: the activations and times b times the graph's).
  [[nodiscard]] result<offmate_batch_answer> plan_batch(const graph& g, bytes budget,
                                                        int largest) const {
    std::string why;
    auto p = problem_of(g, budget, why);
    if (!p) return p.err();
    return batch_search(p->problem, budget, largest, [&](const offmate& sub, int b) {
      return sub.plan(at_batch(g, b), budget);
    });
  }

  /// The least GPU memory any plan of p needs on hw (a MILP solved to optimality, rounded up).
  [[nodiscard]] result<bytes> minimum_budget(const offmate_problem& p) const {
    if (auto v = validate(p); !v) return v.err();
    if (auto e = offmate_machine_error(hw)) return bad("hw: " + *e);
    auto s = solve(p, 0, goal::gpu_memory, deadline_from_now(), false);
    if (!s) return s.err();
    return round_up(s->first->bytes_of(s->second.objective));
  }

 private:
  using clock = std::chrono::steady_clock;
  using goal = detail::offmate_settings::goal;
  using built = std::pair<std::unique_ptr<detail::offmate_formulation>, milp::solution>;

  /// Bytes from the model's value: up to the next byte, past the solver's tolerance.
  static bytes round_up(double v) { return static_cast<bytes>(std::ceil(v - 1e-3)); }
  static error bad(std::string m) {
    return error{status::invalid_problem, "offmate: " + std::move(m), {}};
  }
  [[nodiscard]] clock::time_point deadline_from_now() const {
    return clock::now() + std::chrono::duration_cast<clock::duration>(
                              std::chrono::duration<double>(std::min(time_limit, 1e9)));
  }

  [[nodiscard]] result<built> solve(const offmate_problem& p, bytes budget, goal g,
                                    clock::time_point deadline, bool report,
                                    int batch_variant = 0) const {
    detail::offmate_settings st{semantics, features, whole_groups, g, batch_variant};
    auto f = std::make_unique<detail::offmate_formulation>(p, hw, budget, st);
    milp::options o;
    o.threads = threads;
    if (g == goal::time) o.node_limit = node_limit;  // the minimum-memory solves stay exact
    o.relative_gap = g == goal::time ? relative_gap : 1e-9;
    o.time_limit = std::max(1e-3, std::chrono::duration<double>(deadline - clock::now()).count());
    if (report && progress)
      o.progress = [this, unit = f->time_unit](const milp::progress_report& r) {
        milp::progress_report sec = r;
        sec.incumbent *= unit;
        sec.bound *= unit;
        progress(sec);
      };
    if (g == goal::time && !whole_groups) {
      // Only the options are integers: the LP relaxation rounded is a plan in a second or two,
      // which the search starts from (and returns if time runs out before it finds better).
      o.warm_start = f->rounded_start([&](const milp::model& m) {
        milp::options lp;
        lp.time_limit =
            std::max(1e-3, std::chrono::duration<double>(deadline - clock::now()).count());
        return backend.solve(m, lp);
      });
      o.time_limit = std::max(1e-3, std::chrono::duration<double>(deadline - clock::now()).count());
    }
    auto s = backend.solve(f->model, o);
    if (!s) {
      error e = s.err();
      if (e.code == status::time_limit) e.message = "offmate: " + e.message + "; raise time_limit";
      return e;
    }
    return built{std::move(f), std::move(*s)};
  }

  /// plan(g, ...)'s blocks: the fewest merges that fit max_blocks, or one block of the cut
  /// longer each where the LP relaxation at this budget says so (`why` then says why).
  [[nodiscard]] result<offmate_graph_problem> problem_of(const graph& g, bytes budget,
                                                         std::string& why) const {
    offmate_graph_options o = blocks;
    o.offload = o.offload && features.activation_offload;
    auto p = offmate_problem_of(g, o, hw);
    if (!p) return p.err();
    if (blocks.run_length == 0 && p->run_length < p->cut_blocks) {
      offmate_graph_options longer = o;
      longer.run_length = p->run_length + 1;
      auto q = offmate_problem_of(g, longer, hw);
      if (!q) return q.err();
      const auto deadline = deadline_from_now();
      const auto a = relaxed(p->problem, budget, deadline),
                 b = relaxed(q->problem, budget, deadline);
      if (b && (!a || *b < *a)) {
        why = "blocks: runs of " + std::to_string(q->run_length) + " blocks of the cut (LP " +
              format_seconds(*b) + ") rather than " + std::to_string(p->run_length) + " (LP " +
              (a ? format_seconds(*a) : std::string("infeasible")) + ")";
        p = std::move(q);
      }
    }
    return p;
  }

  /// The batch-size variant on `per_sample` (one unit of batch), then `plan_at(sub, b)` for its
  /// 1/r rounded down and up, and for 1; the one with the more samples per second.
  template <class PlanAt>
  [[nodiscard]] result<offmate_batch_answer> batch_search(const offmate_problem& per_sample,
                                                          bytes budget, int largest,
                                                          PlanAt plan_at) const {
    if (largest < 1)
      return bad("max_batch must be >= 1 (the largest batch size to consider), not " +
                 std::to_string(largest));
    if (auto v = validate(per_sample); !v) return v.err();
    if (auto e = offmate_machine_error(hw)) return bad("hw: " + *e);
    if (budget < 0) return bad("the budget must be >= 0 bytes, not " + std::to_string(budget));
    const auto start = clock::now();
    auto sol = solve(per_sample, budget, goal::time, deadline_from_now(), true, largest);
    if (!sol) {  // one sample does not fit either: plan() says why
      if (sol.code() != status::infeasible) return sol.err();
      auto one = plan_at(*this, 1);
      if (!one) return one.err();
      return error{status::solver_error,
                   "offmate: the batch-size variant has no plan where batch 1 has one; a bug in "
                   "remat or the solver's tolerances: please report it",
                   {}};
    }
    offmate_batch_answer out;
    const double r = std::clamp(sol->first->ratio(sol->second), 1.0 / largest, 1.0);
    out.continuous_batch = 1.0 / r;
    out.time_per_sample = sol->first->seconds_of(sol->second.objective);
    const int down =
        std::clamp(static_cast<int>(std::floor(out.continuous_batch + 1e-9)), 1, largest);
    const int up = std::clamp(static_cast<int>(std::ceil(out.continuous_batch - 1e-9)), 1, largest);
    // The batch as given too: the answer is never slower per sample than it.
    std::vector<int> candidates{1};
    for (const int b : {down, up})
      if (std::ranges::find(candidates, b) == candidates.end()) candidates.push_back(b);
    std::optional<error> last;
    bool found = false;
    for (const int b : candidates) {
      offmate sub = *this;
      sub.time_limit =
          std::max(1e-3, time_limit - std::chrono::duration<double>(clock::now() - start).count());
      auto a = plan_at(sub, b);
      out.tried.emplace_back(b, a ? a->makespan : 0.0);
      if (!a) {
        last = a.err();
        continue;
      }
      if (!found || b / a->makespan > out.samples_per_second() * (1 + 1e-12)) {
        out.batch = b;
        out.answer = std::move(*a);
        found = true;
      }
    }
    if (!found) return *last;
    out.answer.solve_seconds = std::chrono::duration<double>(clock::now() - start).count();
    return out;
  }

  /// The O-ILP's LP relaxation at this budget, seconds; nullopt when it has none in time.
  [[nodiscard]] std::optional<seconds> relaxed(const offmate_problem& p, bytes budget,
                                               clock::time_point deadline) const {
    if (!validate(p)) return std::nullopt;
    const detail::offmate_formulation f(p, hw, budget, {semantics, features, false, goal::time});
    milp::options lp;
    lp.time_limit = std::max(1e-3, std::chrono::duration<double>(deadline - clock::now()).count());
    const auto s = backend.solve(f.relaxation(), lp);
    if (!s || !s->has_values()) return std::nullopt;
    return f.seconds_of(s->objective);
  }

  /// The answer where the O-ILP has no plan: the GPU's minimum and what sets it, or the host's.
  [[nodiscard]] result<offmate_answer> why_not(const offmate_problem& p, bytes budget,
                                               clock::time_point deadline) const {
    auto least = solve(p, 0, goal::gpu_memory, deadline, false);
    if (least) {
      auto& [f, s] = *least;
      const bytes need = round_up(f->bytes_of(s.objective));
      if (need > budget)
        return error{status::budget_too_small,
                     "offmate: no plan of '" + p.name + "' fits in " + format_bytes(budget) +
                         " of GPU memory" +
                         (hw.host_memory < unlimited_bytes
                              ? " with " + format_bytes(hw.host_memory) + " of host memory"
                              : std::string()) +
                         "; the least is " + format_bytes(need) + ", " + what_fills(p, f->plan(s)),
                     need};
    } else if (least.code() != status::infeasible) {
      return least.err();
    }
    // The GPU is not what is short: the host is.
    offmate host_free = *this;
    host_free.hw.host_memory = unlimited_bytes;
    auto h = host_free.solve(p, budget, goal::host_memory, deadline, false);
    if (!h) return h.err();
    const bytes need = round_up(h->first->bytes_of(h->second.objective));
    return error{status::infeasible,
                 "offmate: no plan of '" + p.name + "' fits in " + format_bytes(budget) +
                     " of GPU memory with " + format_bytes(hw.host_memory) +
                     " of host memory; with this budget the host needs at least " +
                     format_bytes(need) + " (" + format_bytes(need - hw.host_memory) +
                     " more), or give the GPU more",
                 {}};
  }

  /// "at step t (block b's backward): its parameters X, ..." for a least-memory plan.
  [[nodiscard]] std::string what_fills(const offmate_problem& p, const offmate_plan& pl) const {
    const auto ev = evaluate(p, hw, unlimited_bytes, pl, semantics, features, 1e-5);
    const int t = static_cast<int>(std::ranges::max_element(ev.gpu_bytes) - ev.gpu_bytes.begin());
    const int b = p.block_of(t);
    double own = 0, other = 0, states = 0, grads = 0;
    for (std::size_t wi = 0; wi < p.groups.size(); ++wi) {
      const parameter_group& w = p.groups[wi];
      const auto& s = pl.at(wi, t);
      const double sz = static_cast<double>(w.size());
      (p.uses(w, t) ? own : other) += sz * (s.resident + s.prefetched);
      states += p.optimizer_states * static_cast<double>(w.trainable()) *
                (s.states_resident + s.states_prefetched);
      if (p.holds_gradient(w, t)) grads += static_cast<double>(w.trainable());
    }
    double stored = 0;
    for (int i = 0; i <= b; ++i)
      stored +=
          static_cast<double>(p.option(i, pl.option[static_cast<std::size_t>(i)]).stored_bytes);
    const offmate_option& o = p.option(b, pl.option[static_cast<std::size_t>(b)]);
    const double temp =
        static_cast<double>(p.is_forward(t) ? o.forward_overhead_bytes : o.backward_overhead_bytes);
    auto sz = [](double v) { return format_size(static_cast<bytes>(std::llround(v))); };
    const std::string block = detail::offmate_block_label(p.blocks[static_cast<std::size_t>(b)],
                                                          static_cast<std::size_t>(b));
    std::string s = "set at step " + std::to_string(t) + " (" + block + "'s " +
                    (p.is_forward(t) ? "forward" : "backward") + "): the parameters of " + block +
                    " " + sz(own);
    if (other > 0) s += ", other parameters " + sz(other);
    if (states > 0) s += ", optimizer states " + sz(states);
    if (grads > 0) s += ", gradients " + sz(grads);
    s += ", stored activations of blocks 0.." + std::to_string(b) + " " + sz(stored) +
         ", interface activations " + sz(static_cast<double>(p.interface_at(t)));
    if (temp > 0) s += ", the block's temporaries " + sz(temp);
    return s;
  }
};

}  // namespace remat
