#pragma once
// rockmate: hierarchical planning of a training graph (rockmate-spec §5-§7; Zhao's thesis ch. 2,
// T:679-1015; the Rockmate paper, P:113-200, P:645-720).
//
//   1. cut the graph into a sequence of blocks at its 1-separators (cut_into_blocks,
//      problem/block.hpp) and find the identical ones (same_block): each kind is solved once;
//   2. options per kind of block: the inner graph policy plans the block graph
//      (extract_block) at a grid of (M_peak, M_save) budgets (§5.3); each plan is an option,
//      a forward part and a backward part (lift); the Pareto set is kept, store-all first;
//   3. RK-Rotor (§6.3): Rotor's dynamic program over the block sequence, whose F^all / B move
//      chooses among the options of the block (detail::rotor_dp over a chain with cost sets);
//   4. the program (§6.4): the DP's decisions with each block op replaced by its program on
//      the whole graph, checked by the simulator like every policy's.
//
// Decisions (the sources leave them open or differ):
//   * M_save is enforced through the graph itself, so that any graph policy can be the inner
//     one: the block's placeholder loss (it stands for the rest of the network) gets the
//     overhead M_peak - M_save, so that a plan within M_peak holds at most M_save at the loss.
//   * M_peak runs over [lower bound, store-all peak] of the block (the thesis' T:1013 range
//     with a cheap lower bound: the largest single op's need; the infeasible low end costs
//     failed solves only), M_save from M_peak down to the least the loss step holds (block
//     input, output and its gradient). The grid is visited coarse to fine in both budgets under
//     block_time_limit per kind, and a point below a proven infeasible one (in both budgets) is
//     skipped: monotonicity, as impl's HILP order stops at the first failure.
//   * An option's record (§5.3) comes from replaying its program on the block graph: x̄ is
//     what is held at the loss besides the block input, tmp(F) = forward peak - input - x̄,
//     tmp(B) = backward peak - input - x̄ - g_out - g_in (at least 0: conservative when the
//     backward frees part of x̄ before it makes g_in). RK-Rotor's checks are then the exact
//     accounting of §6.3 (rotor's m_all with delta_t, delta_s, delta_{s-1}).
//   * F^0 (F^ck / F^none, no backward) is the block's forward ops fast-forwarded, each
//     intermediate freed after its last forward reader (impl _fast_fwd_sched); F^none then
//     frees the block input. Its time is the stage's forward_time, which the block chain sets
//     to the normal forwards' time (a stage has one forward time for F^ck and its own F^all);
//     where an op's fast_time differs, the DP charges F^0 at the normal time (an upper bound)
//     and the plan's predicted time is its program's exact time.
//   * The loss block (the one that holds the graph's loss) splits at the loss: its forward part
//     includes the loss. RK-Rotor always runs it as F^all then B at once (rotor's C(N,N)).
//   * The block's interface data that the rest no longer needs once its backward has read them
//     (its output and the gradient of its output) are freed after their last reader in the
//     backward part (RK-Rotor's "B_s frees x̄_s", as early as it can be), and the option's record
//     is taken with those frees.
//   * Near the minimum, where no affordable discretisation plans, the fallback is the faster of
//     the minimum-memory schedules with the options and with store-all's only.
//   * A graph with one block (no cut point) is planned by the inner policy as it is.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <remat/policy/concepts.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/detail/refine.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>

namespace remat {

/// Where a rockmate solve is: the options of `done` of `kinds` kinds of blocks are made, and
/// `solves_done` of the `solves` grid points of all kinds are settled (solved, or skipped: below
/// a point proven infeasible, past the block's time limit).
struct rockmate_progress {
  int done = 0;
  int kinds = 0;
  seconds elapsed = 0;
  int solves_done = 0;
  int solves = 0;
};

/// A rockmate solution.
using rockmate_plan = solution<rockmate_details>;

namespace detail {

/// One option of a block, on the whole graph: the forward part, the backward part and the
/// frees that follow it, with the record RK-Rotor reads.
struct block_option {
  std::vector<instruction> forward, backward;
  stage_option cost;
};

/// A block's programs on the whole graph.
struct block_programs {
  std::vector<instruction> fast_forward;  ///< F^ck (F^none frees the input after it)
  seconds fast_time = 0;                  ///< F^0's exact time
  bytes fast_overhead = 0;                ///< tmp(F^0)
  bytes output = 0;                       ///< a_l
  std::vector<block_option> options;      ///< store-all first
};

/// The time of instructions on g.
inline seconds program_time(const graph& g, std::span<const instruction> ops) {
  seconds t = 0;
  for (const instruction& i : ops) {
    if (i.op == op_kind::compute) t += g.compute(i.node).time;
    if (i.op == op_kind::fast_forward) t += g.compute(i.node).fast_time;
  }
  return t;
}

inline std::vector<instruction> to_parent(const block_graph& b, std::span<const instruction> ops) {
  std::vector<instruction> out;
  out.reserve(ops.size());
  for (const instruction& i : ops) {
    const auto& map = i.is_compute() ? b.compute_in_parent : b.data_in_parent;
    out.push_back({i.op, map.at(static_cast<std::size_t>(i.node))});
  }
  return out;
}

/// The block's loss (placeholder or the graph's) in the block graph.
inline int block_loss(const block_graph& b) {
  return b.placeholder_loss >= 0 ? b.placeholder_loss : b.g.loss();
}

/// Sizes at the block's interface: its input (alive at the start), its output's gradient
/// (made by the loss), its input's gradient (made by its backward).
struct interface_sizes {
  bytes input = 0, output_gradient = 0, input_gradient = 0, output = 0;
};

inline interface_sizes interface_of(const block_graph& b) {
  interface_sizes s;
  const graph& g = b.g;
  for (int d : b.inputs)
    (g.data(d).kind == data_kind::gradient ? s.output_gradient : s.input) += g.data(d).size;
  for (int d : b.outputs)
    (g.data(d).kind == data_kind::gradient ? s.input_gradient : s.output) += g.data(d).size;
  if (b.placeholder_loss < 0)  // the loss block: its output is the loss op's
    for (int d : g.inputs(g.loss())) s.output += g.data(d).size;
  return s;
}

/// The block's interface data that the rest of the graph no longer needs once the block's
/// backward has read them (its output and its output's gradient; not its input, which the
/// previous block's backward reads, nor its input's gradient, nor what the whole graph
/// protects): protected in the block graph so that the inner policy keeps them, freed by
/// rockmate after their last reader in the backward part.
inline std::vector<int> releasable(const block_graph& b, const graph& parent) {
  std::vector<int> out;
  for (int d = 0; d < b.g.data_count(); ++d) {
    if (!b.g.data(d).is_protected ||
        parent.data(b.data_in_parent[static_cast<std::size_t>(d)]).is_protected)
      continue;
    const bool is_in = std::find(b.inputs.begin(), b.inputs.end(), d) != b.inputs.end();
    const bool is_out = std::find(b.outputs.begin(), b.outputs.end(), d) != b.outputs.end();
    if ((is_in && b.g.data(d).kind == data_kind::activation) ||
        (is_out && b.g.data(d).kind == data_kind::gradient))
      continue;
    out.push_back(d);
  }
  return out;
}

/// An inner program of the block graph as an option, or nothing when it is not a valid one.
/// `release`: releasable(b, parent), freed in the backward part after their last reader.
inline std::optional<block_option> make_option(const block_graph& b, const interface_sizes& io,
                                               const schedule& s, std::span<const int> release) {
  if (!sim::simulate(b.g, s, {.record_timeline = false}).valid) return std::nullopt;
  const int loss = block_loss(b);
  std::size_t k = 0;
  while (k < s.ops.size() && !(s.ops[k].is_compute() && s.ops[k].node == loss)) ++k;
  if (k == s.ops.size()) return std::nullopt;
  // The program with the releases, on the block graph without their protection.
  block_graph open = b;
  schedule t;
  t.ops.assign(s.ops.begin(), s.ops.begin() + static_cast<std::ptrdiff_t>(k) + 1);
  std::vector<int> last(release.size(), static_cast<int>(k));
  for (std::size_t i = k + 1; i < s.ops.size(); ++i)
    if (s.ops[i].is_compute())
      for (std::size_t j = 0; j < release.size(); ++j)
        for (int d : b.g.inputs(s.ops[i].node))
          last[j] = d == release[j] ? static_cast<int>(i) : last[j];
  for (std::size_t j = 0; j < release.size(); ++j) {
    open.g.data(release[j]).is_protected = false;
    if (last[j] == static_cast<int>(k)) t.ops.push_back(instruction::free(release[j]));
  }
  for (std::size_t i = k + 1; i < s.ops.size(); ++i) {
    t.ops.push_back(s.ops[i]);
    for (std::size_t j = 0; j < release.size(); ++j)
      if (last[j] == static_cast<int>(i)) t.ops.push_back(instruction::free(release[j]));
  }
  const sim::report r = sim::simulate(open.g, t);
  if (!r.valid) return std::nullopt;
  const bool placeholder = b.placeholder_loss >= 0;
  const std::size_t fwd_end = placeholder ? k : k + 1;  // the graph's loss is in the forward part
  const bytes start = r.timeline.empty() ? 0 : r.timeline.front().before;
  bytes fwd_peak = start, bwd_peak = 0;
  for (std::size_t i = 0; i < fwd_end; ++i) fwd_peak = std::max(fwd_peak, r.timeline[i].peak);
  const bytes held = placeholder ? r.timeline[k].before : r.timeline[k].after;
  for (std::size_t i = k + 1; i < t.ops.size(); ++i)
    bwd_peak = std::max(bwd_peak, r.timeline[i].peak);
  block_option o;
  const std::span<const instruction> all(t.ops);
  o.forward = to_parent(b, all.subspan(0, fwd_end));
  o.backward = to_parent(b, all.subspan(k + 1));
  o.cost.saved_bytes = held - start;
  o.cost.forward_time = program_time(b.g, all.subspan(0, fwd_end));
  o.cost.backward_time = program_time(b.g, all.subspan(k + 1));
  o.cost.forward_overhead_bytes = std::max<bytes>(0, fwd_peak - held);
  o.cost.backward_overhead_bytes = std::max<bytes>(
      0, bwd_peak - start - o.cost.saved_bytes - io.output_gradient - io.input_gradient);
  return o;
}

/// F^0 of a block: its forwards fast-forwarded in order, each intermediate freed after its
/// last forward reader; the frees after the backward part; the block's exact F^0 time and
/// tmp(F^0).
inline void make_fast_forward(const block_graph& b, const interface_sizes& io, block_programs& p) {
  const graph& g = b.g;
  std::vector<int> last(static_cast<std::size_t>(g.data_count()), -1);
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::forward)
      for (int d : g.inputs(c)) last[static_cast<std::size_t>(d)] = c;
  schedule ff;
  for (int c = 0; c < g.compute_count(); ++c) {
    if (g.compute(c).kind != compute_kind::forward) continue;
    ff.ops.push_back(instruction::fast_forward(c));
    for (int d : g.inputs(c))
      if (last[static_cast<std::size_t>(d)] == c && !g.data(d).is_protected)
        ff.ops.push_back(instruction::free(d));
  }
  // An intermediate nothing in the block's forward reads (read by its backward only).
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::forward)
      for (int d : g.outputs(c))
        if (g.data(d).kind == data_kind::activation && !g.data(d).is_protected &&
            last[static_cast<std::size_t>(d)] < 0)
          ff.ops.push_back(instruction::free(d));
  const sim::report r = sim::simulate(g, ff);  // an incomplete program: its timeline is what counts
  bytes peak = 0;
  for (const auto& pt : r.timeline) peak = std::max(peak, pt.peak);
  const bytes start = r.timeline.empty() ? 0 : r.timeline.front().before;
  p.fast_time = program_time(g, ff.ops);
  p.fast_overhead = std::max<bytes>(0, peak - start - io.output);
  p.fast_forward = to_parent(b, ff.ops);
  p.output = io.output;
}

/// The indices 0..n-1 ranked coarse to fine: 0 and n-1 first, then the midpoints of the
/// intervals between ranked indices, level by level (rank[i] is i's level).
inline std::vector<int> coarse_to_fine(int n) {
  std::vector<int> rank(static_cast<std::size_t>(std::max(n, 0)), 0);
  if (n <= 2) return rank;
  struct span {
    int lo, hi;
  };
  std::vector<span> level{{0, n - 1}};
  for (int depth = 1; !level.empty(); ++depth) {
    std::vector<span> next;
    for (const span& x : level) {
      if (x.hi - x.lo < 2) continue;
      const int mid = (x.lo + x.hi) / 2;
      rank[static_cast<std::size_t>(mid)] = depth;
      next.push_back({x.lo, mid});
      next.push_back({mid, x.hi});
    }
    level = std::move(next);
  }
  return rank;
}

/// Pareto filter on what RK-Rotor reads: time, x̄, x̄ + tmp(F), x̄ + tmp(B). Keeps the first
/// (store-all) always; among equal records, the first.
inline void keep_pareto(std::vector<block_option>& options) {
  auto key = [](const block_option& o) {
    const stage_option& c = o.cost;
    return std::array<double, 4>{c.forward_time + c.backward_time,
                                 static_cast<double>(c.saved_bytes),
                                 static_cast<double>(c.saved_bytes + c.forward_overhead_bytes),
                                 static_cast<double>(c.saved_bytes + c.backward_overhead_bytes)};
  };
  std::vector<block_option> out;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const auto ki = key(options[i]);
    bool drop = false;
    for (std::size_t j = 0; j < options.size() && !drop && i > 0; ++j) {
      if (j == i) continue;
      const auto kj = key(options[j]);
      const bool le = kj[0] <= ki[0] && kj[1] <= ki[1] && kj[2] <= ki[2] && kj[3] <= ki[3];
      drop = le && (kj != ki || j < i);
    }
    if (!drop) out.push_back(std::move(options[i]));
  }
  options = std::move(out);
}

}  // namespace detail

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
  Large large{};
  /// Blocks with more forward ops than this are planned by `large`; 0 = never.
  int large_block_ops = 0;
  /// The budget grid of the inner solves (§5.3): M_peak values, and M_save values per M_peak.
  int peak_budgets = 10;
  int save_budgets = 10;
  /// Solve time of each kind of block: its grid's inner solves stop when they have used it
  /// (the grid is visited coarse to fine, so a short limit still spans it); the kind keeps the
  /// options found by then (store-all at least), and a note says so when it found none.
  seconds block_time_limit = 4;
  /// Time limit of each inner solve (set on the inner policy's time_limit when it has one): a
  /// solve stopped by it gives its best plan found, when it found one.
  seconds inner_time_limit = 1;
  /// Time limit of the whole solve; not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// Threads for the inner solves; 0 = the hardware's.
  int threads = 0;
  /// RK-Rotor's memory slots (rotor's `slots`) and table limit.
  std::int64_t slots = 500;
  std::int64_t max_table_bytes = std::int64_t{2} << 30;
  /// Called as each grid point's solve is settled (so also as the options of each kind of block
  /// are done), from the solving threads but never from two at once; remat-plan's progress line.
  std::function<void(const rockmate_progress&)> progress = {};

  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    auto p = plan(g, budget);
    if (!p) return p.err();
    return std::move(p->program);
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
  if (auto v = validate(g); !v) return v.err();
  if (budget < 0)
    return error{status::invalid_problem,
                 "rockmate: the budget is negative (" + std::to_string(budget) +
                     " bytes); give a byte count >= 0",
                 {}};
  if (peak_budgets < 1 || save_budgets < 1)
    return error{status::invalid_problem,
                 "rockmate: peak_budgets and save_budgets are " + std::to_string(peak_budgets) +
                     " and " + std::to_string(save_budgets) +
                     "; give at least 1 each (the thesis uses 10 and 10)",
                 {}};
  const detail::deadline dl(time_limit);
  rockmate_plan out;
  const std::vector<std::vector<int>> cut = cut_into_blocks(g);
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

  // 1. Blocks and their kinds.
  const int nb = static_cast<int>(cut.size());
  std::vector<block_graph> blocks;
  std::vector<int> kind_of(static_cast<std::size_t>(nb), -1), representative;
  for (int k = 0; k < nb; ++k) {
    auto b = extract_block(g, cut[static_cast<std::size_t>(k)]);
    if (!b) {
      error e = b.err();
      e.message = "rockmate: block " + std::to_string(k + 1) + " of " + std::to_string(nb) + ": " +
                  e.message;
      return e;
    }
    blocks.push_back(std::move(*b));
    for (std::size_t r = 0; r < representative.size() && kind_of[static_cast<std::size_t>(k)] < 0;
         ++r)
      if (same_block(blocks[static_cast<std::size_t>(representative[r])], blocks.back()))
        kind_of[static_cast<std::size_t>(k)] = static_cast<int>(r);
    if (kind_of[static_cast<std::size_t>(k)] < 0) {
      kind_of[static_cast<std::size_t>(k)] = static_cast<int>(representative.size());
      representative.push_back(k);
    }
  }
  const int kinds = static_cast<int>(representative.size());
  out.details.kinds = kinds;

  // 2. Options per kind: the grid's inner solves, on threads.
  std::vector<detail::block_programs> programs(
      static_cast<std::size_t>(kinds));  // on the representative's nodes
  std::vector<detail::interface_sizes> io(static_cast<std::size_t>(kinds));
  std::vector<std::vector<int>> release(static_cast<std::size_t>(kinds));
  for (int r = 0; r < kinds; ++r)
    release[static_cast<std::size_t>(r)] = detail::releasable(
        blocks[static_cast<std::size_t>(representative[static_cast<std::size_t>(r)])], g);
  // A grid point: kind, M_peak index i (0 = the store-all peak), M_save index j (0 = M_peak);
  // visited coarse to fine in both (rank), so that a short block_time_limit still spans the grid.
  struct task {
    int kind, i, j, rank;
    bytes peak, save;
  };
  std::vector<task> tasks;
  // Plans found, by grid point (sorted before they become options: the same options whatever
  // the threads' timing).
  std::vector<std::vector<std::pair<std::pair<int, int>, schedule>>> found(
      static_cast<std::size_t>(kinds));
  std::vector<int> tasks_left(static_cast<std::size_t>(kinds), 0);
  std::vector<int> timed_out(static_cast<std::size_t>(kinds), 0);
  std::vector<double> solve_seconds(static_cast<std::size_t>(kinds), 0.0);
  for (int r = 0; r < kinds; ++r) {
    const block_graph& b =
        blocks[static_cast<std::size_t>(representative[static_cast<std::size_t>(r)])];
    io[static_cast<std::size_t>(r)] = detail::interface_of(b);
    detail::make_fast_forward(b, io[static_cast<std::size_t>(r)],
                              programs[static_cast<std::size_t>(r)]);
    schedule all{store_all_program(b.g), 0, 0};
    auto o = detail::make_option(b, io[static_cast<std::size_t>(r)], all,
                                 release[static_cast<std::size_t>(r)]);
    if (!o)
      return error{
          status::solver_error,
          "rockmate: the store-all program of block " +
              std::to_string(representative[static_cast<std::size_t>(r)] + 1) +
              " is not valid on its graph (a bug in remat; please report it with the graph)",
          {}};
    programs[static_cast<std::size_t>(r)].options.push_back(std::move(*o));
    // The grid of M_peak: a lower bound (the largest single op's need, the input held) to the
    // store-all peak.
    const bytes hi = sim::simulate(b.g, all, {.record_timeline = false}).peak;
    bytes lo = 0;
    for (int c = 0; c < b.g.compute_count(); ++c) {
      bytes need = io[static_cast<std::size_t>(r)].input + b.g.compute(c).overhead;
      for (int d : b.g.inputs(c))
        need += b.g.data(d).is_protected && b.g.data(d).kind == data_kind::activation
                    ? 0
                    : b.g.data(d).size;
      for (int d : b.g.outputs(c)) need += b.g.data(d).size;
      lo = std::max(lo, need);
    }
    lo = std::min(lo, hi);
    const detail::interface_sizes& sz = io[static_cast<std::size_t>(r)];
    const int saves = b.placeholder_loss >= 0 ? save_budgets : 1;
    const std::vector<int> peak_rank = detail::coarse_to_fine(peak_budgets),
                           save_rank = detail::coarse_to_fine(saves);
    for (int i = 0; i < peak_budgets; ++i) {
      const bytes peak =
          hi - (peak_budgets == 1 ? 0
                                  : static_cast<bytes>(std::llround(static_cast<double>(hi - lo) *
                                                                    i / (peak_budgets - 1))));
      const bytes save_lo = std::min(peak, sz.input + sz.output + sz.output_gradient);
      for (int j = 0; j < saves; ++j) {
        const bytes save =
            peak - (saves == 1 ? 0
                               : static_cast<bytes>(std::llround(
                                     static_cast<double>(peak - save_lo) * j / (saves - 1))));
        if (std::any_of(tasks.begin(), tasks.end(), [&](const task& t) {
              return t.kind == r && t.peak == peak && t.save == save;
            }))
          continue;
        tasks.push_back({r, i, j,
                         std::max(peak_rank[static_cast<std::size_t>(i)],
                                  save_rank[static_cast<std::size_t>(j)]),
                         peak, save});
        ++tasks_left[static_cast<std::size_t>(r)];
      }
    }
  }
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const task& x, const task& y) { return x.rank < y.rank; });
  // Proven infeasible points: every point below one in both budgets is infeasible too.
  std::vector<std::vector<std::pair<bytes, bytes>>> failed(static_cast<std::size_t>(kinds));
  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  int kinds_done = 0, solves_done = 0;
  auto run_task = [&](const task& t) {
    const auto k = static_cast<std::size_t>(t.kind);
    double budget_left = 0;
    {
      std::lock_guard lock(mutex);
      for (const auto& [p, q] : failed[k])
        if (t.peak <= p && t.save <= q) return;
      budget_left = block_time_limit - solve_seconds[k];
      if (budget_left <= 0) {
        ++timed_out[k];
        return;
      }
    }
    if (dl.passed()) return;
    const block_graph& b = blocks[static_cast<std::size_t>(representative[k])];
    const bool large_block =
        large_block_ops > 0 &&
        static_cast<int>(cut[static_cast<std::size_t>(representative[k])].size()) > large_block_ops;
    block_graph limited = b;
    if (limited.placeholder_loss >= 0)
      limited.g.compute(limited.placeholder_loss).overhead = t.peak - t.save;
    const double left =
        std::isfinite(time_limit) ? std::max(1e-3, time_limit - dl.elapsed()) : inner_time_limit;
    auto attempt = [&](auto policy) {
      if constexpr (requires { policy.time_limit; })
        policy.time_limit =
            std::max(1e-3, std::min({static_cast<double>(inner_time_limit), left, budget_left}));
      return policy.solve(limited.g, t.peak);
    };
    const auto started = clock::now();
    result<schedule> sol = large_block ? attempt(large) : attempt(inner);
    const double took = std::chrono::duration<double>(clock::now() - started).count();
    std::lock_guard lock(mutex);
    solve_seconds[k] += took;
    if (sol && sim::simulate(limited.g, *sol, {.budget = t.peak, .record_timeline = false}).valid) {
      found[k].emplace_back(std::pair{t.i, t.j}, std::move(*sol));
    } else if (sol.code() == status::time_limit) {
      ++timed_out[k];
    } else if (sol.code() == status::budget_too_small || sol.code() == status::infeasible) {
      failed[k].emplace_back(t.peak, t.save);
    }
  };
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < tasks.size();) {
      run_task(tasks[i]);
      std::lock_guard lock(mutex);
      if (--tasks_left[static_cast<std::size_t>(tasks[i].kind)] == 0) ++kinds_done;
      ++solves_done;
      if (progress)
        progress({kinds_done, kinds, elapsed(), solves_done, static_cast<int>(tasks.size())});
    }
  };
  {
    const int n_threads = std::max(
        1,
        std::min<int>(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()),
                      static_cast<int>(tasks.size())));
    std::vector<std::thread> pool;
    for (int i = 1; i < n_threads; ++i) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }
  if (dl.passed())
    return detail::time_limit_reached(
        name, dl, "while making the blocks' options",
        "raise time_limit, or use a coarser grid (peak_budgets, save_budgets)");
  for (int r = 0; r < kinds; ++r) {
    const block_graph& b =
        blocks[static_cast<std::size_t>(representative[static_cast<std::size_t>(r)])];
    auto& opts = programs[static_cast<std::size_t>(r)].options;
    auto& plans = found[static_cast<std::size_t>(r)];
    std::sort(plans.begin(), plans.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [point, s] : plans)
      if (auto o = detail::make_option(b, io[static_cast<std::size_t>(r)], s,
                                       release[static_cast<std::size_t>(r)]))
        opts.push_back(std::move(*o));
    detail::keep_pareto(opts);
    if (opts.size() == 1 && timed_out[static_cast<std::size_t>(r)] > 0) {
      char limits[96];
      std::snprintf(limits, sizeof limits, "inner_time_limit %g s, block_time_limit %g s",
                    inner_time_limit, block_time_limit);
      const auto& fw = cut[static_cast<std::size_t>(representative[static_cast<std::size_t>(r)])];
      out.notes.push_back(
          "block " + std::to_string(representative[static_cast<std::size_t>(r)] + 1) + " ('" +
          g.compute(fw.front()).name + "' .. '" + g.compute(fw.back()).name +
          "') and the blocks like it: " + "its solves ran out of their time limit (" + limits +
          ") before any found a plan, so it has its store-all option only");
    }
  }
  out.details.options_time = elapsed();

  // 3. The block chain: a stage per block, store-all as its own F^all / B, the others as its
  // cost set, F^0 as its F^ck / F^none.
  chain& bc = out.details.block_chain;
  bc.name = g.name + " [blocks]";
  for (int d = 0; d < g.data_count(); ++d)
    if (g.is_source(d)) bc.input_bytes += g.data(d).size;
  for (int k = 0; k < nb; ++k) {
    const auto& p = programs[static_cast<std::size_t>(kind_of[static_cast<std::size_t>(k)])];
    const stage_option& own = p.options.front().cost;
    const auto& fw = cut[static_cast<std::size_t>(k)];
    stage st;
    st.name = "block " + std::to_string(k + 1) + " (" + g.compute(fw.front()).name +
              (fw.size() > 1 ? " .. " + g.compute(fw.back()).name : std::string()) + ")";
    st.forward_time = own.forward_time;
    st.backward_time = own.backward_time;
    st.output_bytes = p.output;
    st.saved_bytes = own.saved_bytes;
    st.forward_overhead_bytes = p.fast_overhead;
    st.forward_save_overhead_bytes = own.forward_overhead_bytes;
    st.backward_overhead_bytes = own.backward_overhead_bytes;
    for (std::size_t o = 1; o < p.options.size(); ++o) st.options.push_back(p.options[o].cost);
    bc.stages.push_back(std::move(st));
    out.details.blocks.push_back(
        {fw, kind_of[static_cast<std::size_t>(k)], static_cast<int>(p.options.size()), 0, 0});
  }
  if (auto v = validate(bc); !v)
    return error{status::solver_error,
                 "rockmate: its block chain is not valid (a bug in remat; please report it with "
                 "the graph): " +
                     v.message(),
                 {}};

  // 4. RK-Rotor, and the program.
  // Block k's programs on the whole graph: the representative's, node for node (identical
  // blocks have the same block graph up to names).
  auto on_block = [&](int k, const std::vector<instruction>& ops) {
    const block_graph& rep = blocks[static_cast<std::size_t>(
        representative[static_cast<std::size_t>(kind_of[static_cast<std::size_t>(k)])])];
    const block_graph& b = blocks[static_cast<std::size_t>(k)];
    std::vector<int> compute_back(static_cast<std::size_t>(g.compute_count()), -1),
        data_back(static_cast<std::size_t>(g.data_count()), -1);
    for (std::size_t i = 0; i < rep.compute_in_parent.size(); ++i)
      if (rep.compute_in_parent[i] >= 0)
        compute_back[static_cast<std::size_t>(rep.compute_in_parent[i])] = static_cast<int>(i);
    for (std::size_t i = 0; i < rep.data_in_parent.size(); ++i)
      data_back[static_cast<std::size_t>(rep.data_in_parent[i])] = static_cast<int>(i);
    std::vector<instruction> mapped;
    mapped.reserve(ops.size());
    for (const instruction& i : ops) {
      const int local = i.is_compute() ? compute_back[static_cast<std::size_t>(i.node)]
                                       : data_back[static_cast<std::size_t>(i.node)];
      const auto& map = i.is_compute() ? b.compute_in_parent : b.data_in_parent;
      mapped.push_back({i.op, map[static_cast<std::size_t>(local)]});
    }
    return mapped;
  };
  bool exact_fast = true;  // F^0 costs what the DP charges
  for (int k = 0; k < nb; ++k)
    exact_fast =
        exact_fast &&
        programs[static_cast<std::size_t>(kind_of[static_cast<std::size_t>(k)])].fast_time ==
            bc.stages[static_cast<std::size_t>(k)].forward_time;

  // The block input's node on the whole graph (-1: a graph input, never freed).
  std::vector<int> input_node(static_cast<std::size_t>(nb), -1);
  for (int k = 0; k < nb; ++k) {
    const block_graph& b = blocks[static_cast<std::size_t>(k)];
    for (int d : b.inputs)
      if (b.g.data(d).kind == data_kind::activation &&
          !g.data(b.data_in_parent[static_cast<std::size_t>(d)]).is_protected)
        input_node[static_cast<std::size_t>(k)] = b.data_in_parent[static_cast<std::size_t>(d)];
  }
  std::vector<int> chosen(static_cast<std::size_t>(nb), 0), runs(static_cast<std::size_t>(nb), 0);
  auto assemble = [&](const detail::decisions& d) {
    schedule s;
    std::fill(runs.begin(), runs.end(), 0);
    // Whether block k's input is held plain (from F^ck / F^none, freed by B_k as in the chain
    // notation's lowering) rather than in the previous block's x̄ (freed by its B).
    std::vector<char> plain(static_cast<std::size_t>(nb) + 1, 0);
    for (std::size_t i = 0; i < d.ops.size(); ++i) {
      const chain_op& op = d.ops[i];
      const int k = op.index - 1;
      const int o = d.options.empty() ? 0 : d.options[i];
      const auto& p = programs[static_cast<std::size_t>(kind_of[static_cast<std::size_t>(k)])];
      const std::vector<instruction>* part = nullptr;
      if (op.kind == chain_op_kind::forward) {
        ++runs[static_cast<std::size_t>(k)];
        part = op.mode == forward_mode::save_all ? &p.options[static_cast<std::size_t>(o)].forward
                                                 : &p.fast_forward;
        if (op.mode == forward_mode::save_all) chosen[static_cast<std::size_t>(k)] = o;
      } else {
        part = &p.options[static_cast<std::size_t>(o)].backward;
      }
      const auto mapped = on_block(k, *part);
      s.ops.insert(s.ops.end(), mapped.begin(), mapped.end());
      const auto uk = static_cast<std::size_t>(k);
      if (op.kind == chain_op_kind::forward) {
        plain[uk + 1] = op.mode != forward_mode::save_all;
        if (op.mode == forward_mode::no_save) {
          if (input_node[uk] >= 0) s.ops.push_back(instruction::free(input_node[uk]));
          plain[uk] = 0;
        }
      } else {
        plain[uk + 1] = 0;
        if (plain[uk] && input_node[uk] >= 0) s.ops.push_back(instruction::free(input_node[uk]));
        plain[uk] = 0;
      }
    }
    s.predicted_time = detail::program_time(g, s.ops);
    return s;
  };
  struct target {
    const graph& g;
    bytes budget;
    bool exact_fast;
    decltype(assemble)& program_of;
    [[nodiscard]] bytes store_all_peak() const {
      const chain& c = self_chain;
      return sim::simulate(g, program_of({store_all::program(c), {}, c.ideal_time()}),
                           {.record_timeline = false})
          .peak;
    }
    [[nodiscard]] result<schedule> finish(detail::decisions d) const {
      schedule s = program_of(d);
      const double tol = 1e-9 * std::max(1.0, std::abs(s.predicted_time));
      if (exact_fast && std::abs(s.predicted_time - d.time) > tol)
        return error{status::solver_error,
                     "rockmate: RK-Rotor claimed " + std::to_string(d.time) +
                         " s but its program takes " + std::to_string(s.predicted_time) +
                         " s (a bug in remat; please report it with the graph)",
                     {}};
      return detail::finish(name, g, budget, std::move(s));
    }
    const chain& self_chain;
  };
  const target tg{g, budget, exact_fast, assemble, bc};
  std::optional<detail::rotor_min_memory> exact;
  auto s = detail::solve_discretized<detail::rotor_dp>(
      {.policy = name,
       .problem = &bc,
       .budget = budget,
       .slots = slots,
       .max_table_bytes = max_table_bytes,
       .costs = detail::cost_sets::all,
       .limit = &dl,
       .progress = {},
       .table_cells =
           [](int n, double w) {
             return n * (n + 1) / 2.0 * std::max(w, detail::rotor_min_memory::bytes_per_pair / 8);
           },
       .minimum = [&]() -> std::optional<bytes> {
         exact.emplace(detail::exact_sizes(bc, detail::cost_sets::all), dl);
         if (!exact->complete()) return std::nullopt;
         return bc.a(0) + (*exact)(1, bc.length());
       },
       .fallback = [&]() -> std::optional<detail::decisions> {
         // Within rounding of the minimum: the faster of the minimum-memory schedules with the
         // options and with store-all's only (the recurrence breaks ties by time sub-problem by
         // sub-problem, which more options do not make faster everywhere), when it fits.
         detail::decisions best = exact->schedule();
         const detail::rotor_min_memory own(detail::exact_sizes(bc), dl);
         if (own.complete() && bc.a(0) + own(1, bc.length()) <= budget)
           if (detail::decisions d = own.schedule(); d.time < best.time) best = std::move(d);
         return best;
       },
       .time_limit_advice = "raise time_limit, or use fewer slots"},
      tg);
  if (!s) {
    error e = s.err();
    if (e.code == status::budget_too_small) {
      // The block that needs most on its own (its input, the graph's input and its leanest
      // option's F^all / B): what to look at when the minimum is too high.
      const detail::discrete_chain d = detail::exact_sizes(bc, detail::cost_sets::all);
      int worst = 1;
      bytes worst_need = -1;
      for (int l = 1; l <= bc.length(); ++l) {
        bytes need = std::numeric_limits<bytes>::max();
        for (const auto& o : d.options[static_cast<std::size_t>(l)])
          need = std::min(need, d.m_all(l, l, o));
        need += bc.a(l - 1) + (l > 1 ? bc.a(0) : 0);
        if (need > worst_need) worst = l, worst_need = need;
      }
      e.message = "rockmate: the budget of " + format_bytes(budget) + " is below the minimum of " +
                  format_bytes(e.minimum_budget.value_or(0)) +
                  " that its blocks' options allow for graph '" + g.name +
                  "'; give a budget of at least " + std::to_string(e.minimum_budget.value_or(0)) +
                  " bytes (" + bc.at(worst).name + " alone needs " + format_bytes(worst_need) +
                  " with its leanest option)";
    }
    return e;
  }
  out.program = std::move(s->program);
  out.optimal = out.program.predicted_time <= g.ideal_time();
  for (int k = 0; k < nb; ++k) {
    out.details.blocks[static_cast<std::size_t>(k)].chosen = chosen[static_cast<std::size_t>(k)];
    out.details.blocks[static_cast<std::size_t>(k)].forward_runs =
        runs[static_cast<std::size_t>(k)];
  }
  return out;
}

}  // namespace remat
