#pragma once
// rockmate: hierarchical planning of a training graph [Zhao24, ch. 2; Rockmate23, §3, App. C]:
//   1. cut the graph into a sequence of blocks at its 1-separators (cut_into_blocks) and find
//      the identical ones (same_block): each kind is solved once;
//   2. options per kind of block: the inner graph policy plans the block graph at a grid of
//      (M_peak, M_save) budgets; each plan is an option (rockmate/options.hpp);
//   3. RK-Rotor: Rotor's DP over the block sequence, choosing among each block's options
//      (rockmate/rk_rotor.hpp);
//   4. the program: the DP's decisions with each block op replaced by its program on the whole
//      graph (rockmate/assembly.hpp), checked by the simulator like every policy's.
// docs/rockmate.md has the recurrences and every decision where the sources leave it open.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/rockmate/assembly.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/policy/rockmate/rk_rotor.hpp>
#include <remat/policy/rockmate/whole_graph.hpp>
#include <remat/policy/solution.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>

namespace remat {

/// A rockmate solution.
using rockmate_plan = solution<rockmate_details>;

/// Rockmate with the inner graph policy Inner for the blocks, and Large for blocks of more than
/// large_block_ops forward ops (e.g. checkmate in relax mode, or store_all).
template <class Inner, class Large = Inner>
struct rockmate {
  static_assert(require_graph_policy<Inner>, "remat::rockmate<Inner>: Inner plans the blocks");
  static_assert(require_graph_policy<Large>,
                "remat::rockmate<Inner, Large>: Large plans the large blocks");
  static constexpr std::string_view name = "rockmate";
  static constexpr std::string_view summary =
      "Rockmate: blocks planned by an inner graph policy, then RK-Rotor over the sequence";

  Inner inner{};
  /// The policy of the large blocks: by default Large's relaxation (`relax` set where it has
  /// one: checkmate's LP relaxation and rounding), which plans a block of dozens of ops in a
  /// fraction of a second where the exact MILP can take minutes per grid point.
  Large large = detail::relaxation_of(Large{});
  /// Blocks with more forward ops than this are planned by `large`; 0 = never.
  int large_block_ops = 6;
  /// The budget grid of the inner solves ([Zhao24, §2.6]): M_peak values, M_save values per M_peak.
  int peak_budgets = 10;
  int save_budgets = 10;
  /// Work limit of each inner solve, in branch-and-bound nodes (set on the inner policies'
  /// node_limit where they have one, as checkmate does): a solve stopped by it gives its best
  /// plan found. A limit of work, not of time, so that the options, and so the plan, are the
  /// same on every run and machine; 0 = none.
  std::int64_t inner_node_limit = 1000;
  /// Solve time of each kind of block: its grid's inner solves stop when they have used it
  /// (the grid is visited coarse to fine, so a short limit still spans it); the kind keeps the
  /// options found by then (store-all at least), and a note says so when it found none. Not
  /// finite (the default) = none. A finite limit makes a time-bounded search: its plan depends
  /// on the machine's speed and load.
  seconds block_time_limit = std::numeric_limits<double>::infinity();
  /// Time limit of each inner solve (set on the inner policy's time_limit when it has one and
  /// this is finite): a solve stopped by it gives its best plan found, when it found one. Not
  /// finite (the default) = none; as block_time_limit, a finite one depends on the machine.
  seconds inner_time_limit = std::numeric_limits<double>::infinity();
  /// Where one block holds half of the graph's forward ops or more (a graph that does not cut
  /// into small blocks) and the inner policy has a relaxation (checkmate's `relax`): the whole
  /// graph is also planned by that relaxation at this many budgets, evenly from the store-all
  /// peak down to the graph's memory floor, and rockmate returns the fastest of RK-Rotor's plan
  /// and those that fit (details.whole_graph_chosen says which). 0 = never.
  int whole_graph_budgets = 20;
  /// Time limit of the whole solve; not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// Threads for the inner solves; 0 = the hardware's.
  int threads = 0;
  /// RK-Rotor's memory slots (rotor's `slots`) and table limit.
  std::int64_t slots = 500;
  std::int64_t max_table_bytes = std::int64_t{2} << 30;
  /// RK-Rotor's gap tolerance (rotor's `tolerance`).
  double tolerance = 0.01;
  /// Called as each grid point's solve is settled (so also as the options of each kind of block
  /// are done), from the solving threads but never from two at once; remat-plan's progress line.
  std::function<void(const rockmate_progress&)> progress = {};

  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    return detail::program_of(solve_detailed(g, budget));
  }
  /// A chain plans through its training graph: every stage is a block.
  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    for (int l = 1; l <= c.length(); ++l)
      if (c.option_count(l) > 1)
        return error{
            status::invalid_problem,
            "rockmate: " + detail::stage_label(c, l) +
                " has cost sets (\"options\"), which have no programs behind them; rockmate makes "
                "each "
                "stage's options itself from the chain's graph: remove them, or plan with rotor",
            {}};
    return solve(detail::chain_graph(c), budget);
  }

  /// The plan with its blocks, options and times.
  [[nodiscard]] result<rockmate_plan> solve_detailed(const graph& g, bytes budget) const {
    return detail::timed([&] { return plan(g, budget); });
  }

 private:
  [[nodiscard]] result<rockmate_plan> plan(const graph& g, bytes budget) const;
};

template <class Inner, class Large>
result<rockmate_plan> rockmate<Inner, Large>::plan(const graph& g, bytes budget) const {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  if (auto ok = detail::check_request(name, g, budget); !ok) return ok.err();
  if (peak_budgets < 1 || save_budgets < 1)
    return error{status::invalid_problem,
                 "rockmate: peak_budgets and save_budgets are " + std::to_string(peak_budgets) +
                     " and " + std::to_string(save_budgets) +
                     "; give at least 1 each (the thesis uses 10 and 10)",
                 {}};
  if (auto ok = detail::check_threads(name, threads); !ok) return ok.err();
  const detail::deadline dl(time_limit);
  rockmate_plan out;
  std::vector<std::vector<int>> cut = cut_into_blocks(g);
  if (cut.size() <= 1) {
    // No cut point: the whole graph is one block, for the inner policy.
    Inner p = inner;
    if constexpr (requires { p.time_limit; })
      p.time_limit = std::min<double>(p.time_limit, time_limit);
    auto s = p.solve(g, budget);
    if (!s) {
      error e = s.err();
      e.message = "rockmate: graph '" + g.name +
                  "' has no cut point, so it is one block, planned by " + std::string(Inner::name) +
                  ": " + e.message;
      return e;
    }
    out.program = std::move(*s);
    out.details.blocks.push_back({cut.empty() ? std::vector<int>{} : cut[0], 0, 1, 0, 1});
    out.details.kinds = 1;
    out.notes.push_back("graph '" + g.name + "' has no cut point: it is one block, planned by " +
                        std::string(Inner::name) + " as it is");
    return out;
  }

  // Plain training fits: nothing to plan (its time is a lower bound for any schedule).
  if (schedule all{store_all_program(g), g.ideal_time(), 0};
      sim::simulate(g, all, {.record_timeline = false}).peak <= budget) {
    auto s = detail::finish(name, g, budget, std::move(all));
    if (!s) return s.err();
    out.program = std::move(*s);
    for (const auto& fw : cut) out.details.blocks.push_back({fw, 0, 1, 0, 1});
    out.notes.push_back("every activation fits the budget: plain training, nothing recomputed");
    return out;
  }

  // The whole graph by the inner policy's relaxation, where one block is most of it.
  std::vector<detail::whole_graph_plan> whole;
  if constexpr (requires(Inner p) { p.relax = true; })
    if (whole_graph_budgets > 0 && detail::needs_whole_graph(cut)) {
      whole = detail::plan_whole_graph(g, detail::relaxation_of(inner), whole_graph_budgets,
                                       threads, dl);
      out.details.whole_graph_plans = static_cast<int>(whole.size());
    }

  // 1. Blocks and their kinds.
  auto bk = detail::find_block_kinds(g, std::move(cut));
  if (!bk) return bk.err();
  out.details.kinds = bk->kinds();

  // 2. Options per kind: the grid's inner solves, on threads.
  auto programs = detail::make_block_options(g, *bk, inner, large,
                                             {.peak_budgets = peak_budgets,
                                              .save_budgets = save_budgets,
                                              .block_time_limit = block_time_limit,
                                              .inner_time_limit = inner_time_limit,
                                              .time_limit = time_limit,
                                              .node_limit = inner_node_limit,
                                              .threads = threads,
                                              .large_block_ops = large_block_ops,
                                              .limit = &dl,
                                              .limits_text = {},
                                              .block_name = {},
                                              .progress = progress,
                                              .elapsed = elapsed},
                                             out.notes);
  if (!programs) return programs.err();
  out.details.options_time = elapsed();

  // 3. The block chain: a stage per block, its options as cost sets.
  auto bc = detail::block_chain(g, *bk, *programs, out.details.blocks);
  if (!bc) return bc.err();
  out.details.block_chain = *bc;

  // 4. RK-Rotor, and the program. Where an op's fast_time differs from its time the DP charges
  // F^0 at the normal time (an upper bound) and the plan's time is its program's exact time.
  bool exact_fast = true;
  for (int k = 0; k < bk->count(); ++k)
    exact_fast = exact_fast && (*programs)[detail::ix(bk->kind_of[detail::ix(k)])].fast_time ==
                                   bc->stages[detail::ix(k)].forward_time;
  const detail::block_assembly assembly(g, *bk, *programs);
  auto s = detail::rk_rotor(g, *bc, assembly, exact_fast,
                            {.policy = name,
                             .budget = budget,
                             .slots = slots,
                             .max_table_bytes = max_table_bytes,
                             .tolerance = tolerance,
                             .limit = &dl});
  const detail::whole_graph_plan* w = detail::fastest_within(whole, budget);
  if (w) out.details.whole_graph_time = w->program.predicted_time;
  const bool no_plan =
      !s && (s.code() == status::budget_too_small || s.code() == status::infeasible);
  if (w && (no_plan || (s && w->program.predicted_time < s->program.predicted_time))) {
    out.program = w->program;
    out.program.predicted_peak = w->peak;
    out.details.whole_graph_chosen = true;
    out.notes.push_back(
        std::string("one block holds half of the graph or more: the whole graph planned by ") +
        std::string(Inner::name) + "'s relaxation (at " + format_size(w->budget) + ") " +
        (s ? "is faster than RK-Rotor's plan over the blocks (" +
                 format_seconds(w->program.predicted_time) + " against " +
                 format_seconds(s->program.predicted_time) + "): returned it"
           : "fits where the blocks' options do not: returned it"));
  } else {
    if (!s) return s.err();
    out.program = std::move(s->program);
    for (int k = 0; k < bk->count(); ++k) {
      out.details.blocks[detail::ix(k)].chosen = assembly.chosen()[detail::ix(k)];
      out.details.blocks[detail::ix(k)].forward_runs = assembly.runs()[detail::ix(k)];
    }
  }
  out.optimal = out.program.predicted_time <= g.ideal_time();
  return out;
}

}  // namespace remat
