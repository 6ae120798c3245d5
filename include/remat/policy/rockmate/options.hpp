#pragma once
// Rockmate's blocks and their options [Zhao24, §2.2, §2.6]: the blocks of a graph and their
// kinds (identical blocks are solved once), a block's programs on the whole graph (F^0, and each
// option's forward and backward parts with the record RK-Rotor reads), and the grid of inner
// solves that makes the options. docs/rockmate.md says how a record is taken and why.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/parallel_for.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

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

namespace detail {

/// One option of a block, on the whole graph: the forward part, the backward part and the
/// frees that follow it, with the record RK-Rotor reads.
struct block_option {
  std::vector<instruction> forward, backward;
  stage_option cost;
  /// The backward part's overhead (as cost.backward_overhead_bytes) when the block's interface
  /// data stay alive through it: the program as its inner planned it, without the releases.
  /// What the part costs where its caller frees the interface itself (hiremate's H-graphs).
  bytes kept_interface_backward_overhead = 0;
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

/// Instructions on the parent graph's nodes as instructions on the block graph's (the inverse
/// of to_parent; a node outside the block becomes -1).
inline std::vector<instruction> to_block(const graph& parent, const block_graph& b,
                                         std::span<const instruction> ops) {
  std::vector<int> cmap(ix(parent.compute_count()), -1), dmap(ix(parent.data_count()), -1);
  for (std::size_t i = 0; i < b.compute_in_parent.size(); ++i)
    if (b.compute_in_parent[i] >= 0) cmap[ix(b.compute_in_parent[i])] = static_cast<int>(i);
  for (std::size_t i = 0; i < b.data_in_parent.size(); ++i)
    dmap[ix(b.data_in_parent[i])] = static_cast<int>(i);
  std::vector<instruction> out;
  out.reserve(ops.size());
  for (const instruction& i : ops)
    out.push_back({i.op, (i.is_compute() ? cmap : dmap)[ix(i.node)], i.part});
  return out;
}

/// Instructions on the nodes of block `from` as the same instructions on those of `to`, a block
/// of the same kind (same_block): node for node.
inline std::vector<instruction> between_blocks(const graph& parent, const block_graph& from,
                                               const block_graph& to,
                                               std::span<const instruction> ops) {
  return to_parent(to, to_block(parent, from, ops));
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
  // The same without the releases: s itself, its interface protected throughout. (The forward
  // part is the same in both: the releases are in the backward part.)
  const sim::report kept = sim::simulate(b.g, s);
  if (k + 1 < s.ops.size()) {
    bytes high = 0;
    for (std::size_t i = k + 1; i < s.ops.size(); ++i) high = std::max(high, kept.timeline[i].peak);
    o.kept_interface_backward_overhead =
        std::max<bytes>(0, high - kept.timeline[k + 1].before - io.input_gradient);
  }
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

/// The blocks of a graph cut at its 1-separators, and their kinds: kind_of[k] is block k's
/// kind, representative[r] the first block of kind r (whose graph the options are made on).
struct block_kinds {
  std::vector<std::vector<int>> cut;  ///< each block's forward compute nodes
  std::vector<block_graph> blocks;
  std::vector<int> kind_of, representative;
  [[nodiscard]] int count() const { return static_cast<int>(blocks.size()); }
  [[nodiscard]] int kinds() const { return static_cast<int>(representative.size()); }
  [[nodiscard]] const block_graph& of_kind(int r) const {
    return blocks[ix(representative[ix(r)])];
  }
};

/// The blocks of `cut` (cut_into_blocks(g)) and their kinds (same_block).
inline result<block_kinds> find_block_kinds(const graph& g, std::vector<std::vector<int>> cut) {
  block_kinds out;
  const int nb = static_cast<int>(cut.size());
  out.kind_of.assign(ix(nb), -1);
  for (int k = 0; k < nb; ++k) {
    auto b = extract_block(g, cut[ix(k)]);
    if (!b) {
      error e = b.err();
      e.message = "rockmate: block " + std::to_string(k + 1) + " of " + std::to_string(nb) + ": " +
                  e.message;
      return e;
    }
    out.blocks.push_back(std::move(*b));
    for (std::size_t r = 0; r < out.representative.size() && out.kind_of[ix(k)] < 0; ++r)
      if (same_block(out.blocks[ix(out.representative[r])], out.blocks.back()))
        out.kind_of[ix(k)] = static_cast<int>(r);
    if (out.kind_of[ix(k)] < 0) {
      out.kind_of[ix(k)] = static_cast<int>(out.representative.size());
      out.representative.push_back(k);
    }
  }
  out.cut = std::move(cut);
  return out;
}

/// What makes the options: the grid, the time limits, the threads, the progress callback.
struct option_request {
  int peak_budgets = 10, save_budgets = 10;
  seconds block_time_limit = std::numeric_limits<double>::infinity(),
          inner_time_limit = std::numeric_limits<double>::infinity(), time_limit = 0;
  std::int64_t node_limit = 0;
  int threads = 0;
  int large_block_ops = 0;
  /// Visit each kind's grid points from the loosest (the largest M_peak, then the largest
  /// M_save), one kind to a thread, and do not solve a point at which a plan found at a looser
  /// point (at least as large in both budgets) fits: its feasible plans are a subset of the
  /// looser point's, so a plan optimal there is optimal at it too (and a plan stopped by a limit
  /// there is one the solver might have found). Nor a point tighter than one whose solve ran out
  /// of its limits without a plan (a harder problem, with the same limits). The options do not
  /// depend on the threads.
  bool reuse_looser = false;
  const deadline* limit = nullptr;
  /// For the notes, where set: the limits of the inner's solves (else rockmate's inner_node_limit,
  /// inner_time_limit, block_time_limit) and a block's name from its index in the cut (else
  /// "block k ('first op' .. 'last op')").
  std::string limits_text;
  std::function<std::string(int)> block_name;
  std::function<void(const rockmate_progress&)> progress;
  std::function<seconds()> elapsed;
};

/// Each kind's programs: F^0, store-all's option and the Pareto set of the options the inner
/// policy found at the grid of (M_peak, M_save) budgets; `notes` says which kinds found none in
/// their time. The grid is visited coarse to fine in both budgets under block_time_limit per
/// kind, a point below a proven infeasible one (in both budgets) is skipped, and the solves run
/// on threads; the plans found are sorted by grid point before they become options, so that
/// the options do not depend on the threads' timing.
template <class Inner, class Large>
result<std::vector<block_programs>> make_block_options(const graph& g, const block_kinds& bk,
                                                       const Inner& inner, const Large& large,
                                                       const option_request& rq,
                                                       std::vector<std::string>& notes) {
  using clock = std::chrono::steady_clock;
  const int kinds = bk.kinds();
  const deadline& dl = *rq.limit;
  std::vector<block_programs> programs(ix(kinds));  // on the representative's nodes
  std::vector<interface_sizes> io(ix(kinds));
  std::vector<std::vector<int>> release(ix(kinds));
  for (int r = 0; r < kinds; ++r) release[ix(r)] = releasable(bk.of_kind(r), g);
  // A grid point: kind, M_peak index i (0 = the store-all peak), M_save index j (0 = M_peak);
  // visited coarse to fine in both (rank), so that a short block_time_limit still spans the grid.
  struct task {
    int kind, i, j, rank;
    bytes peak, save;
  };
  std::vector<task> tasks;
  std::vector<std::vector<std::pair<std::pair<int, int>, schedule>>> found(ix(kinds));
  std::vector<std::vector<std::pair<bytes, bytes>>> found_at(ix(kinds));  // (M_peak, M_save)
  std::vector<int> tasks_left(ix(kinds), 0);
  std::vector<int> timed_out(ix(kinds), 0);
  std::vector<double> solve_seconds(ix(kinds), 0.0);
  for (int r = 0; r < kinds; ++r) {
    const block_graph& b = bk.of_kind(r);
    io[ix(r)] = interface_of(b);
    make_fast_forward(b, io[ix(r)], programs[ix(r)]);
    schedule all{store_all_program(b.g), 0, 0};
    auto o = make_option(b, io[ix(r)], all, release[ix(r)]);
    if (!o)
      return error{
          status::solver_error,
          "rockmate: the store-all program of block " +
              std::to_string(bk.representative[ix(r)] + 1) +
              " is not valid on its graph (a bug in remat; please report it with the graph)",
          {}};
    programs[ix(r)].options.push_back(std::move(*o));
    // The grid of M_peak: a lower bound (the largest single op's need, the input held) to the
    // store-all peak.
    const bytes hi = sim::simulate(b.g, all, {.record_timeline = false}).peak;
    bytes lo = 0;
    for (int c = 0; c < b.g.compute_count(); ++c) {
      bytes need = io[ix(r)].input + b.g.compute(c).overhead;
      for (int d : b.g.inputs(c))
        need += b.g.data(d).is_protected && b.g.data(d).kind == data_kind::activation
                    ? 0
                    : b.g.data(d).size;
      for (int d : b.g.outputs(c)) need += b.g.data(d).size;
      lo = std::max(lo, need);
    }
    lo = std::min(lo, hi);
    const interface_sizes& sz = io[ix(r)];
    const int saves = b.placeholder_loss >= 0 ? rq.save_budgets : 1;
    const std::vector<int> peak_rank = coarse_to_fine(rq.peak_budgets),
                           save_rank = coarse_to_fine(saves);
    for (int i = 0; i < rq.peak_budgets; ++i) {
      const bytes peak = evenly_down(hi, lo, i, rq.peak_budgets);
      const bytes save_lo = std::min(peak, sz.input + sz.output + sz.output_gradient);
      for (int j = 0; j < saves; ++j) {
        const bytes save = evenly_down(peak, save_lo, j, saves);
        if (std::any_of(tasks.begin(), tasks.end(), [&](const task& t) {
              return t.kind == r && t.peak == peak && t.save == save;
            }))
          continue;
        tasks.push_back({r, i, j, std::max(peak_rank[ix(i)], save_rank[ix(j)]), peak, save});
        ++tasks_left[ix(r)];
      }
    }
  }
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const task& x, const task& y) { return x.rank < y.rank; });
  // Proven infeasible points: every point below one in both budgets is infeasible too.
  std::vector<std::vector<std::pair<bytes, bytes>>> failed(ix(kinds));
  std::mutex mutex;
  int kinds_done = 0, solves_done = 0;
  auto run_task = [&](const task& t) {
    const auto k = ix(t.kind);
    double budget_left = 0;
    {
      std::lock_guard lock(mutex);
      for (const auto& [p, q] : failed[k])
        if (t.peak <= p && t.save <= q) return;
      budget_left = rq.block_time_limit - solve_seconds[k];
      if (budget_left <= 0) {
        ++timed_out[k];
        return;
      }
    }
    if (dl.passed()) return;
    const bool large_block =
        rq.large_block_ops > 0 &&
        static_cast<int>(bk.cut[ix(bk.representative[k])].size()) > rq.large_block_ops;
    block_graph limited = bk.of_kind(t.kind);
    if (limited.placeholder_loss >= 0)
      limited.g.compute(limited.placeholder_loss).overhead = t.peak - t.save;
    if (rq.reuse_looser) {  // (only the kind's own thread adds to found[k])
      for (std::size_t q = 0; q < found[k].size(); ++q)
        if (found_at[k][q].first >= t.peak && found_at[k][q].second >= t.save &&
            sim::simulate(limited.g, found[k][q].second,
                          {.budget = t.peak, .record_timeline = false})
                .valid)
          return;  // that plan's option is this point's
    }
    const double left = std::isfinite(rq.time_limit) ? std::max(1e-3, rq.time_limit - dl.elapsed())
                                                     : rq.inner_time_limit;
    auto attempt = [&](auto policy) {
      if constexpr (requires { policy.time_limit; })
        if (const double limit =
                std::min({static_cast<double>(rq.inner_time_limit), left, budget_left});
            std::isfinite(limit))
          policy.time_limit = std::max(1e-3, limit);
      if constexpr (requires { policy.node_limit; })
        if (rq.node_limit > 0) policy.node_limit = rq.node_limit;
      // An inner that plans each kind its own way (hiremate's H-ILP over the cluster's H-graph).
      if constexpr (requires { policy.solve_block(t.kind, limited.g, t.peak); })
        return policy.solve_block(t.kind, limited.g, t.peak);
      else
        return policy.solve(limited.g, t.peak);
    };
    const auto started = clock::now();
    result<schedule> sol = large_block ? attempt(large) : attempt(inner);
    const double took = std::chrono::duration<double>(clock::now() - started).count();
    std::lock_guard lock(mutex);
    solve_seconds[k] += took;
    if (sol && sim::simulate(limited.g, *sol, {.budget = t.peak, .record_timeline = false}).valid) {
      found[k].emplace_back(std::pair{t.i, t.j}, std::move(*sol));
      found_at[k].emplace_back(t.peak, t.save);
    } else if (sol.code() == status::time_limit) {
      ++timed_out[k];
      if (rq.reuse_looser) failed[k].emplace_back(t.peak, t.save);
    } else if (sol.code() == status::budget_too_small || sol.code() == status::infeasible) {
      failed[k].emplace_back(t.peak, t.save);
    }
  };
  auto run_one = [&](const task& t) {
    run_task(t);
    std::lock_guard lock(mutex);
    if (--tasks_left[ix(t.kind)] == 0) ++kinds_done;
    ++solves_done;
    if (rq.progress)
      rq.progress({kinds_done, kinds, rq.elapsed(), solves_done, static_cast<int>(tasks.size())});
  };
  if (rq.reuse_looser) {
    // Each kind's points on one thread, the loosest first.
    std::stable_sort(tasks.begin(), tasks.end(), [](const task& x, const task& y) {
      return std::tie(x.kind, x.i, x.j) < std::tie(y.kind, y.i, y.j);
    });
    parallel_for(ix(kinds), rq.threads, [&](std::size_t r) {
      for (const task& t : tasks)
        if (ix(t.kind) == r) run_one(t);
    });
  } else {
    parallel_for(tasks.size(), rq.threads, [&](std::size_t i) { run_one(tasks[i]); });
  }
  if (dl.passed())
    return time_limit_reached("rockmate", dl, "while making the blocks' options",
                              "raise time_limit, or use a coarser grid (peak_budgets, "
                              "save_budgets)");
  for (int r = 0; r < kinds; ++r) {
    const block_graph& b = bk.of_kind(r);
    auto& opts = programs[ix(r)].options;
    auto& plans = found[ix(r)];
    std::sort(plans.begin(), plans.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [point, s] : plans)
      if (auto o = make_option(b, io[ix(r)], s, release[ix(r)])) opts.push_back(std::move(*o));
    keep_pareto(opts);
    if (opts.size() == 1 && timed_out[ix(r)] > 0) {
      char limits[160];
      std::snprintf(limits, sizeof limits,
                    "inner_node_limit %lld nodes, inner_time_limit %g s, block_time_limit %g s",
                    static_cast<long long>(rq.node_limit), rq.inner_time_limit,
                    rq.block_time_limit);
      const int rep = bk.representative[ix(r)];
      const auto& fw = bk.cut[ix(rep)];
      notes.push_back((rq.block_name ? rq.block_name(rep)
                                     : "block " + std::to_string(rep + 1) + " ('" +
                                           g.compute(fw.front()).name + "' .. '" +
                                           g.compute(fw.back()).name + "')") +
                      " and the blocks like it: its solves ran out of their limits (" +
                      (rq.limits_text.empty() ? std::string(limits) : rq.limits_text) +
                      ") before any found a plan, so it has its store-all option only");
    }
  }
  return programs;
}

}  // namespace detail
}  // namespace remat
