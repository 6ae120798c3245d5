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
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/checkmate/formulation.hpp>
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
};

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
  for (int round = 0;; ++round) {
    const double time_left = left();
    if (!(time_left > 0))
      return error{status::time_limit, "the H-ILP's time limit passed before it had a plan", {}};
    const auto deadline = std::isfinite(time_left)
                              ? clock::now() + std::chrono::duration_cast<clock::duration>(
                                                   std::chrono::duration<double>(time_left))
                              : clock::time_point::max();
    // Below the floor no plan exists (and the MILP's rows would have bounds that cross).
    if (b < floor)
      return error{status::infeasible,
                   "no plan of '" + h.g.name + "' fits " + std::to_string(b) +
                       " bytes: " + hg.compute(floor_node).name + " needs " +
                       std::to_string(floor) + " bytes alive while it runs, in its leanest variant",
                   {}};
    auto bm = f.build(hg, variants, exclusive, b, false, deadline);
    if (!bm) return bm.err();
    milp::options o;
    o.time_limit = time_left;
    o.node_limit = lim.node_limit;
    o.relative_gap = lim.relative_gap;
    o.threads = lim.threads;
    auto sol = solver.solve(bm->m, o);
    if (!sol) {
      error e = sol.err();
      if (e.code == status::infeasible && round > 0)
        e.message = "no plan fits " + std::to_string(budget) +
                    " bytes once lowered (the H-ILP at " + std::to_string(b) +
                    " bytes, tightened " + std::to_string(round) + " times, has none)";
      return e;
    }
    auto runs = f.extract_runs(hg, *bm, *sol);
    if (!runs) return runs.err();
    out.runs.clear();
    for (const auto& r : *runs) out.runs.push_back({r.ins, r.variant});
    schedule s{lower(h, out.runs), 0, 0};
    const sim::report rep = sim::simulate(target, s, {.budget = budget, .record_timeline = false});
    if (rep.valid) {
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
    if (round >= lim.max_tightening)
      return error{status::infeasible,
                   "the H-ILP's plans of '" + h.g.name + "' still peak over " +
                       std::to_string(budget) + " bytes once lowered after " +
                       std::to_string(round) + " tightenings (the last at " + std::to_string(b) +
                       " bytes peaks at " + std::to_string(rep.peak) + ")",
                   {}};
    b -= std::max<bytes>(rep.peak - budget, bm->unit);
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
  auto mem = [](const block_option& o) {
    return static_cast<double>(o.cost.saved_bytes + std::max(o.cost.forward_overhead_bytes,
                                                             o.cost.backward_overhead_bytes));
  };
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
