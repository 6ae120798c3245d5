#pragma once
// The H-ILP [Zhao24, §3.4]: checkmate's MILP (policy/checkmate/formulation.hpp) over an H-graph's
// run variants, each sub-cluster's option phantoms exclusive (Eq. 3.16), solved by a MILP
// backend; its plan lowered onto the cluster's ops (hgraph.hpp, lower) and replayed there in
// bytes. The MILP charges each sub-cluster's option with the peaks the option's record gives, and
// the lowered program can peak higher (an interface datum the H-graph frees after F_j is alive
// through the whole part; the units' rounding): a plan over the budget is solved again at a budget
// lower by the excess, until one fits. And the option selection of a sub-cluster when its parent's
// H-graph has too many [Zhao24, §3.4, "Option selection"]. docs/hiremate.md, "The H-ILP".

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/checkmate/formulation.hpp>
#include <remat/policy/checkmate/rounding.hpp>
#include <remat/policy/hiremate/hgraph.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::detail {

/// What one H-ILP solve may use.
struct hilp_limits {
  seconds time_limit = std::numeric_limits<double>::infinity();
  std::int64_t node_limit = 0;
  double relative_gap = 0;
  int threads = 1;
  /// Solves at a tighter budget after a lowered plan over the budget.
  int max_tightening = 8;
  /// The bytes the MILP's memory unit is chosen for (0: the budget): the same for every budget of
  /// one H-graph, so that a larger budget never loses a plan to rounding.
  bytes unit_reference = 0;
  /// Solve first at the budget plus the rounding's worst case (a unit per datum, and two), so
  /// that a plan that fits in bytes is not lost to sizes rounded up: at a block's store-all peak
  /// store-all itself does not fit the rounded MILP. A plan over the budget in bytes is solved
  /// again at the budget itself, then tightened as usual.
  bool rounding_slack = false;
  /// Start the MILP from the fastest of the cheap plans (hgraph_starts) whose lowering fits the
  /// budget: the solver improves on it, and where it finds nothing better in its time the start
  /// is the plan (the top at tight budgets, where CBC finds none of its own in minutes).
  bool warm_start = false;
};

/// An H-ILP plan lowered onto the cluster's block graph, and how it was reached.
struct hilp_plan {
  schedule program;  ///< on the block graph (target), its peak and makespan the replay's
  std::vector<hiremate_run> runs;
  bool optimal = false;  ///< the last MILP was solved to optimality (at its budget)
  /// The last MILP stopped at its time limit (not its node limit) with this plan unproven.
  bool time_limited = false;
  /// The last MILP's relative gap between its plan and its bound (0 when proven optimal,
  /// infinite when it proved no bound).
  double gap = 0;
  int tightened = 0;  ///< solves again at a lower budget
  /// The plan is the start (hilp_limits::warm_start): the MILP's own plans, lowered, did not fit
  /// or were slower, or it had none in its time.
  bool from_start = false;
};

/// A sub-cluster option's memory: what it holds between its parts plus its larger overhead.
inline bytes option_memory(const block_option& o) {
  return o.cost.saved_bytes +
         std::max(o.cost.forward_overhead_bytes, o.cost.backward_overhead_bytes);
}

/// A plan of an H-graph to start the H-ILP from: its runs, and their lowering with the replay's
/// time and peak.
struct hilp_start {
  std::vector<hiremate_run> runs;
  schedule program;
};

/// Plans of H-graph hg (h.g, its loss's overhead perhaps changed, with `variants`) in the stage
/// model, to start the H-ILP from, fastest first, each lowered onto `target` and replayed there
/// within `budget`:
/// - each sub-cluster in one option throughout, its first (the fastest) or its leanest (the
///   least saved plus the larger overhead, the faster on a tie), under checkmate's cheap storage
///   patterns (policy/checkmate/rounding.hpp: keep nothing, every s-th forward's data, every
///   forward's) derived over those variants, tried from keeping nothing up;
/// - then, from the fastest, a local search (first improvement): keep one more datum made by a
///   forward over its life, or run one sub-cluster in another option, while the plan gets faster
///   and stays within the budget.
/// Until `stop`, once one plan is found. Error (solver_error): a plan whose lowering is not a
/// valid program (a bug in remat).
inline result<std::vector<hilp_start>> hgraph_starts(
    const hiremate_hgraph& h, const graph& hg,
    const std::vector<std::vector<checkmate_formulation::run_variant>>& variants,
    const graph& target, bytes budget, std::chrono::steady_clock::time_point stop) {
  using keep_matrix = checkmate_formulation::keep_matrix;
  const checkmate_rounding r{};
  const int items = static_cast<int>(h.option_phantoms.size());
  auto out_of_time = [&] { return std::chrono::steady_clock::now() > stop; };
  // The plan of a storage matrix with each sub-cluster in option choice[item]: nullopt where
  // phase 2 has none or it is over the budget.
  struct found {
    hilp_start start;
    keep_matrix keep;
    std::vector<int> choice;
  };
  auto attempt = [&](keep_matrix keep,
                     const std::vector<int>& choice) -> result<std::optional<found>> {
    std::vector<int> normal(ix(hg.compute_count()), 0);
    for (int it = 0; it < items; ++it) {
      const auto& ph = h.option_phantoms[ix(it)];
      for (std::size_t o = 0; o < ph.size(); ++o)
        if (static_cast<int>(o) != choice[ix(it)])
          for (auto& row : keep) row[ix(ph[o])] = 0;
    }
    for (int n = 0; n < hg.compute_count(); ++n)
      if (const int it = h.item_of[ix(n)]; it >= 0 && h.compute_in_block[ix(n)] < 0) {
        normal[ix(n)] = choice[ix(it)];
        // An option that runs once keeps what only it makes (its phantom, the loss's input)
        // until its last reader.
        const auto& v = variants[ix(n)];
        if (!v[ix(choice[ix(it)])].once) continue;
        for (std::size_t q = 0; q < hg.outputs(n).size(); ++q)
          if (v[ix(choice[ix(it)])].makes[q] && std::ranges::none_of(v, [&](const auto& w) {
                return w.op == op_kind::fast_forward && w.makes[q];
              }))
            checkmate_rounding::keep_over_life(hg, keep, hg.outputs(n)[q]);
      }
    auto runs = r.derive_runs(hg, variants, normal, keep);
    if (!runs) return std::optional<found>{};
    schedule s{lower(h, *runs), 0, 0};
    const sim::report rep = sim::simulate(target, s, {.budget = budget, .record_timeline = false});
    if (!rep.valid) {
      if (rep.first_violation && rep.first_violation->kind == sim::violation_kind::over_budget)
        return std::optional<found>{};
      return error{status::solver_error,
                   "a start of the H-ILP of '" + h.g.name +
                       "', lowered onto its ops, is not valid (" +
                       (rep.first_violation ? rep.first_violation->message : std::string("?")) +
                       "); a bug in remat, please report it with the graph",
                   {}};
    }
    s.predicted_time = rep.makespan;
    s.predicted_peak = rep.peak;
    return std::optional<found>{found{{std::move(*runs), std::move(s)}, std::move(keep), choice}};
  };

  std::vector<std::vector<int>> choices(2, std::vector<int>(ix(items), 0));
  for (int it = 0; it < items; ++it) {
    const auto& opts = h.programs[ix(it)].options;
    for (std::size_t o = 1; o < opts.size(); ++o) {
      const auto& best = opts[ix(choices[1][ix(it)])];
      if (option_memory(opts[o]) < option_memory(best) ||
          (option_memory(opts[o]) == option_memory(best) &&
           opts[o].cost.forward_time + opts[o].cost.backward_time <
               best.cost.forward_time + best.cost.backward_time))
        choices[1][ix(it)] = static_cast<int>(o);
    }
  }
  if (choices[1] == choices[0]) choices.pop_back();
  auto keeps = checkmate_rounding::heuristic_keeps(hg);
  std::reverse(keeps.begin(), keeps.end());
  std::vector<found> plans;
  auto known = [&](const found& f) {
    return std::ranges::any_of(plans, [&](const found& p) { return p.start.runs == f.start.runs; });
  };
  for (const auto& keep : keeps) {
    if (!plans.empty() && out_of_time()) break;
    for (const auto& choice : choices) {
      auto f = attempt(keep, choice);
      if (!f) return f.err();
      if (*f && !known(**f)) plans.push_back(std::move(**f));
    }
  }
  auto faster = [](const found& a, const found& b) {
    return a.start.program.predicted_time < b.start.program.predicted_time;
  };
  std::stable_sort(plans.begin(), plans.end(), faster);

  // The local search from the fastest.
  if (!plans.empty()) {
    found best = plans.front();
    std::vector<int> made_by_forward;  // the data a keep can add
    for (int i = 0; i < hg.data_count(); ++i)
      if (checkmate_rounding::rounded(hg, i) &&
          hg.compute(hg.producers(i).front()).kind == compute_kind::forward)
        made_by_forward.push_back(i);
    for (bool better = true; better && !out_of_time();) {
      better = false;
      auto take = [&](result<std::optional<found>> f) -> result<bool> {
        if (!f) return f.err();
        if (!*f || !faster(**f, best)) return false;
        best = std::move(**f);
        return true;
      };
      for (int i : made_by_forward) {
        if (out_of_time()) break;
        keep_matrix keep = best.keep;
        checkmate_rounding::keep_over_life(hg, keep, i);
        if (keep == best.keep) continue;
        auto t = take(attempt(std::move(keep), best.choice));
        if (!t) return t.err();
        if ((better = *t)) break;
      }
      for (int it = 0; it < items && !better && !out_of_time(); ++it) {
        const auto& ph = h.option_phantoms[ix(it)];
        for (int o = 0; o < static_cast<int>(ph.size()) && !better; ++o) {
          if (o == best.choice[ix(it)]) continue;
          keep_matrix keep = best.keep;  // the new option's phantom kept where the old one was
          for (auto& row : keep) row[ix(ph[ix(o)])] = row[ix(ph[ix(best.choice[ix(it)])])];
          auto choice = best.choice;
          choice[ix(it)] = o;
          auto t = take(attempt(std::move(keep), choice));
          if (!t) return t.err();
          better = *t;
        }
      }
    }
    if (!known(best)) plans.insert(plans.begin(), std::move(best));
  }
  std::vector<hilp_start> out;
  for (auto& p : plans) out.push_back(std::move(p.start));
  return out;
}

/// Plans H-graph h on `target` (h.block.g, its loss's overhead perhaps changed: rockmate's save
/// budget) within `budget`: the H-ILP, lowered and replayed on target; a plan over the budget is
/// solved again at the budget less its excess. Errors: infeasible (the MILP has no plan at the
/// budget, or at the tightened one: then the message says so), time_limit (no plan in time), a
/// backend's failure.
template <class Backend>
result<hilp_plan> solve_hgraph(const hiremate_hgraph& h, const graph& target, bytes budget,
                               const Backend& backend, const hilp_limits& lim) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto left = [&] {
    return lim.time_limit - std::chrono::duration<double>(clock::now() - t0).count();
  };
  // The H-graph with its loss as the target's (the save budget is the loss's overhead).
  graph hg = h.g;
  auto variants = h.variants;
  const int loss = hg.loss();
  if (const int in_block = h.compute_in_block[ix(loss)]; in_block >= 0) {
    const bytes o = target.compute(in_block).overhead;
    hg.compute(loss).overhead = o;
    for (auto& v : variants[ix(loss)]) v.overhead = o;
  }
  std::vector<std::vector<int>> exclusive;
  for (const auto& ph : h.option_phantoms)
    if (ph.size() > 1) exclusive.push_back(ph);
  // Memory in at most 2^14 units of the budget: CBC 2.10.8's Clp fails an assertion (and aborts
  // the process) on some H-ILPs at checkmate's 2^17 (docs/hiremate.md, "The H-ILP"); sizes are
  // rounded up, so that the rounding never makes a plan that does not fit.
  checkmate_formulation f{};
  f.memory_bits = 14;
  f.round_up = true;
  f.unit_reference = lim.unit_reference > 0 ? lim.unit_reference : budget;
  // CBC without its cut generators: at the start of branch and bound CBC 2.10.8 re-solves the
  // root LP with the cuts it added, and where that LP has become infeasible, Clp aborts the
  // process on an assertion (docs/hiremate.md, "The H-ILP"); without cuts that LP is the root LP,
  // solved (feasible) before branch and bound starts.
  // Below the top (a node limit), no strong branching either: CBC finds these H-ILPs' plans with
  // its heuristics at the root (the feasibility pump's sub-searches), and strong branching made
  // each node several times dearer without a better plan in the first thousand nodes
  // (docs/hiremate.md, "The H-ILP").
  Backend solver = backend;
  if constexpr (requires { solver.parameters.push_back(std::string()); }) {
    solver.parameters.insert(solver.parameters.begin(), {"-cuts", "off"});
    if (lim.node_limit > 0)
      solver.parameters.insert(solver.parameters.begin() + 2, {"-strongBranching", "0"});
  }
  // The H-graph's floor: of each node, its leanest variant's inputs, outputs and scratch.
  bytes floor = 0;
  int floor_node = 0;
  for (int k = 0; k < hg.compute_count(); ++k) {
    bytes least = std::numeric_limits<bytes>::max();
    for (const auto& v : variants[ix(k)]) {
      bytes need = v.overhead;
      for (std::size_t q = 0; q < hg.inputs(k).size(); ++q)
        if (v.reads[q]) need += hg.data(hg.inputs(k)[q]).size;
      for (std::size_t q = 0; q < hg.outputs(k).size(); ++q)
        if (v.makes[q]) need += hg.data(hg.outputs(k)[q]).size;
      least = std::min(least, need);
    }
    if (least > floor) {
      floor = least;
      floor_node = k;
    }
  }
  const bytes slack = lim.rounding_slack
                          ? (hg.data_count() + 2) * checkmate_formulation::memory_unit(
                                                        hg, f.unit_reference, f.memory_bits)
                          : 0;
  bytes b = budget + slack;
  bool slacked = slack > 0;
  hilp_plan out;
  // The cheap plans to start from (lim.warm_start), found once: a tenth of the time at most.
  std::vector<hilp_start> starts;
  if (lim.warm_start) {
    const double share = std::isfinite(left()) ? left() / 10 : 60.0;
    auto found = hgraph_starts(h, hg, variants, target, budget,
                               clock::now() + std::chrono::duration_cast<clock::duration>(
                                                  std::chrono::duration<double>(share)));
    if (!found) return found.err();
    starts = std::move(*found);
  }
  // The fastest start, a plan within the budget: the answer where the MILP's own plans, lowered,
  // do not fit and it has none that does in its time, or its plan is slower once lowered.
  const hilp_start* started = starts.empty() ? nullptr : &starts.front();
  auto from_start = [&](bool time_limited) {
    hilp_plan p;
    p.program = started->program;
    p.runs = started->runs;
    p.time_limited = time_limited;
    p.gap = std::numeric_limits<double>::infinity();
    p.from_start = true;
    return p;
  };
  for (int round = 0;; ++round) {
    const double time_left = left();
    if (!(time_left > 0)) {
      if (started != nullptr) return from_start(true);
      return error{status::time_limit, "the H-ILP's time limit passed before it had a plan", {}};
    }
    const auto deadline = std::isfinite(time_left)
                              ? clock::now() + std::chrono::duration_cast<clock::duration>(
                                                   std::chrono::duration<double>(time_left))
                              : clock::time_point::max();
    // Below the floor no plan exists (and the MILP's rows would have bounds that cross).
    if (b < floor && started != nullptr) return from_start(false);
    if (b < floor)
      return error{status::infeasible,
                   "no plan of '" + h.g.name + "' fits " + std::to_string(b) +
                       " bytes: " + hg.compute(floor_node).name + " needs " +
                       std::to_string(floor) + " bytes alive while it runs, in its leanest variant",
                   {}};
    auto bm = f.build(hg, variants, exclusive, b, false, deadline);
    if (!bm && bm.code() == status::time_limit && started != nullptr) return from_start(true);
    if (!bm) return bm.err();
    milp::options o;
    for (const auto& st : starts)  // the fastest the MILP's rows take (sizes rounded up)
      if (auto x = f.start_values(hg, *bm, st.runs)) {
        o.warm_start = std::move(*x);
        break;
      }
    o.time_limit = time_left;
    o.node_limit = lim.node_limit;
    o.relative_gap = lim.relative_gap;
    o.threads = lim.threads;
    auto sol = solver.solve(bm->m, o);
    if (!sol) {
      error e = sol.err();
      if (started != nullptr && (e.code == status::time_limit || e.code == status::infeasible))
        return from_start(e.code == status::time_limit);
      if (e.code == status::infeasible && round > 0)
        e.message = "no plan fits " + std::to_string(budget) +
                    " bytes once lowered (the H-ILP at " + std::to_string(b) +
                    " bytes, tightened " + std::to_string(round) + " times, has none)";
      return e;
    }
    auto runs = f.extract_runs(hg, *bm, *sol);
    if (!runs) return runs.err();
    out.runs = std::move(*runs);
    schedule s{lower(h, out.runs), 0, 0};
    const sim::report rep = sim::simulate(target, s, {.budget = budget, .record_timeline = false});
    if (rep.valid) {
      // No faster than the start once lowered (the solver's start itself, where it found none
      // better): the start, as proven as the solve.
      if (started != nullptr && !(rep.makespan < started->program.predicted_time * (1 - 1e-9))) {
        hilp_plan p = from_start(!sol->is_optimal() && !sol->node_limit_reached);
        if (sol->is_optimal() && !(rep.makespan > started->program.predicted_time * (1 + 1e-9))) {
          p.optimal = true;
          p.gap = 0;
        }
        return p;
      }
      s.predicted_time = rep.makespan;
      s.predicted_peak = rep.peak;
      out.program = std::move(s);
      out.optimal = sol->is_optimal();
      out.time_limited = !out.optimal && !sol->node_limit_reached;
      out.gap = out.optimal && !std::isfinite(sol->gap()) ? 0.0 : sol->gap();
      out.tightened = round;
      return out;
    }
    if (!rep.first_violation || rep.first_violation->kind != sim::violation_kind::over_budget) {
      return error{status::solver_error,
                   "the H-ILP's plan of '" + h.g.name + "', lowered onto its ops, is not valid (" +
                       (rep.first_violation ? rep.first_violation->message : std::string("?")) +
                       "); a bug in remat, please report it with the graph",
                   {}};
    }
    if (slacked) {  // the plan at the budget with slack is over it: at the budget itself
      slacked = false;
      b = budget;
      --round;
      continue;
    }
    if (round >= lim.max_tightening) {
      if (started != nullptr) return from_start(false);
      return error{status::infeasible,
                   "the H-ILP's plans of '" + h.g.name + "' still peak over " +
                       std::to_string(budget) + " bytes once lowered after " +
                       std::to_string(round) + " tightenings (the last at " + std::to_string(b) +
                       " bytes peaks at " + std::to_string(rep.peak) + ")",
                   {}};
    }
    b -= std::max<bytes>(rep.peak - budget, bm->unit);
    if (b <= 0 && started != nullptr) return from_start(false);
    if (b <= 0)
      return error{
          status::infeasible,
          "no plan of '" + h.g.name + "' fits " + std::to_string(budget) + " bytes once lowered",
          {}};
  }
}

/// A sub-cluster's options cut down to `n` [Zhao24, §3.4, "Option selection"]: the first
/// (store-all) kept, then one at a time the option whose peak (what it holds plus its larger
/// overhead) is farthest from those of the options kept, ties to the first; in their order.
inline void select_options(std::vector<block_option>& options, int n) {
  if (n < 1 || static_cast<int>(options.size()) <= n) return;
  auto mem = [](const block_option& o) { return static_cast<double>(option_memory(o)); };
  std::vector<char> kept(options.size(), 0);
  kept[0] = 1;
  for (int taken = 1; taken < n; ++taken) {
    std::size_t best = 0;
    double far = -1;
    for (std::size_t i = 0; i < options.size(); ++i) {
      if (kept[i]) continue;
      double d = std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < options.size(); ++j)
        if (kept[j]) d = std::min(d, std::abs(mem(options[i]) - mem(options[j])));
      if (d > far) {
        far = d;
        best = i;
      }
    }
    kept[best] = 1;
  }
  std::vector<block_option> out;
  for (std::size_t i = 0; i < options.size(); ++i)
    if (kept[i]) out.push_back(std::move(options[i]));
  options = std::move(out);
}

}  // namespace remat::detail
