#pragma once
// OFFMATE's problem from a training graph with parameters [Offmate24, §4]: rockmate's blocks (the
// graph cut at its 1-separators, identical blocks found once; policy/rockmate/options.hpp),
// optionally merged into at most `max_blocks` consecutive runs with the longest run as short as
// possible, each with up to three options made on the block's own graph: store-all (everything
// its backward reads stays on the GPU), recompute (the forward keeps only the block's output,
// and the backward runs the forward again first) and offload (the forward sends what store-all
// keeps, its output excepted, to the host; the backward brings it back). The interface bytes
// are the graph's input, and in a backward step the gradients of the block's output and input;
// the parameter groups are the parameters read by the same set of blocks. docs/offmate.md,
// "From a graph".

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/offmate/problem.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>
#include <remat/problem/graph.hpp>

namespace remat {

/// How a training graph becomes an OFFMATE problem.
struct offmate_graph_options {
  /// Merge consecutive blocks into at most this many, the longest (in compute time) as short as
  /// possible; 0 keeps every block of the cut (a decoder layer is two: attention and MLP).
  int max_blocks = 0;
  bool recompute = true;  ///< each block may recompute its forward in its backward
  bool offload = true;    ///< each block may offload what it keeps
};

/// The problem, and the blocks' forward nodes (each block's, in order).
struct offmate_graph_problem {
  offmate_problem problem;
  std::vector<std::vector<int>> blocks;
};

namespace detail {

/// Consecutive runs of `times` in at most `parts` runs with the largest sum smallest (the linear
/// partition DP); returns each run's end (exclusive).
inline std::vector<std::size_t> balanced_runs(const std::vector<seconds>& times, int parts) {
  const std::size_t n = times.size(), k = std::min<std::size_t>(n, static_cast<std::size_t>(parts));
  std::vector<seconds> prefix(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + times[i];
  const seconds inf = std::numeric_limits<seconds>::infinity();
  // best[j][i]: the smallest largest run of the first i items in j runs; from[j][i]: its last
  // run's start.
  std::vector<std::vector<seconds>> best(k + 1, std::vector<seconds>(n + 1, inf));
  std::vector<std::vector<std::size_t>> from(k + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0;
  for (std::size_t j = 1; j <= k; ++j)
    for (std::size_t i = j; i <= n; ++i)
      for (std::size_t s = j - 1; s < i; ++s) {
        const seconds v = std::max(best[j - 1][s], prefix[i] - prefix[s]);
        if (v < best[j][i]) {
          best[j][i] = v;
          from[j][i] = s;
        }
      }
  std::vector<std::size_t> ends;
  for (std::size_t j = k, i = n; j > 0; --j) {
    ends.push_back(i);
    i = from[j][i];
  }
  std::reverse(ends.begin(), ends.end());
  return ends;
}

}  // namespace detail

/// The OFFMATE problem of g (see the top of this header). Errors: a graph that is not valid, a
/// negative max_blocks, a block whose store-all program fails (a bug).
inline result<offmate_graph_problem> offmate_problem_of(const graph& g,
                                                        const offmate_graph_options& o = {}) {
  if (auto v = validate(g); !v) return v.err();
  if (o.max_blocks < 0)
    return error{status::invalid_problem,
                 "offmate: max_blocks must be >= 0 (0: every block of the cut), not " +
                     std::to_string(o.max_blocks),
                 {}};
  std::vector<std::vector<int>> cut = cut_into_blocks(g);
  if (o.max_blocks > 0 && static_cast<int>(cut.size()) > o.max_blocks) {
    std::vector<seconds> times;
    for (const auto& b : cut) {
      seconds t = 0;
      for (int f : b) t += g.compute(f).time + g.compute(g.backward_of(f)).time;
      times.push_back(t);
    }
    std::vector<std::vector<int>> merged;
    std::size_t start = 0;
    for (std::size_t end : detail::balanced_runs(times, o.max_blocks)) {
      auto& run = merged.emplace_back();
      for (std::size_t i = start; i < end; ++i) run.insert(run.end(), cut[i].begin(), cut[i].end());
      start = end;
    }
    cut = std::move(merged);
  }
  auto kinds = detail::find_block_kinds(g, cut);
  if (!kinds) return kinds.err();
  const detail::block_kinds& bk = *kinds;

  // Each kind's options, made on its representative's graph.
  std::vector<std::vector<offmate_option>> options(static_cast<std::size_t>(bk.kinds()));
  std::vector<detail::interface_sizes> io(static_cast<std::size_t>(bk.kinds()));
  for (int r = 0; r < bk.kinds(); ++r) {
    const block_graph& b = bk.of_kind(r);
    const auto ri = static_cast<std::size_t>(r);
    io[ri] = detail::interface_of(b);
    const auto all = detail::make_option(b, io[ri], schedule{store_all_program(b.g), 0, 0},
                                         detail::releasable(b, g));
    if (!all)
      return error{status::solver_error,
                   "offmate: the store-all program of a block of graph '" + g.name +
                       "' is not valid (a bug in remat; please report it with the graph)",
                   {}};
    detail::block_programs ff;
    detail::make_fast_forward(b, io[ri], ff);
    const stage_option& c = all->cost;
    const bytes out = io[ri].output;
    // store-all; recompute: F^0, then F^all and B in the backward; offload: what store-all keeps
    // besides the output goes to the host and comes back.
    options[ri].push_back({"store-all", c.forward_time, c.backward_time, c.saved_bytes, 0,
                           c.forward_overhead_bytes, c.backward_overhead_bytes});
    const bytes kept = c.saved_bytes - out;
    if (o.recompute && kept > 0)
      options[ri].push_back({"recompute", ff.fast_time, c.forward_time + c.backward_time, out, 0,
                             ff.fast_overhead,
                             kept + std::max(c.forward_overhead_bytes, c.backward_overhead_bytes)});
    if (o.offload && kept > 0)
      options[ri].push_back({"offload", c.forward_time, c.backward_time, out, kept,
                             kept + c.forward_overhead_bytes, kept + c.backward_overhead_bytes});
  }

  offmate_graph_problem out;
  offmate_problem& p = out.problem;
  p.name = g.name;
  const int L = bk.count();
  std::vector<int> block_of_forward(static_cast<std::size_t>(g.compute_count()), -1);
  for (int k = 0; k < L; ++k) {
    const auto r = static_cast<std::size_t>(bk.kind_of[static_cast<std::size_t>(k)]);
    const auto& fwd = bk.cut[static_cast<std::size_t>(k)];
    for (int f : fwd) block_of_forward[static_cast<std::size_t>(f)] = k;
    p.blocks.push_back(
        {g.compute(fwd.front()).name + " .. " + g.compute(fwd.back()).name, options[r]});
  }
  bytes sources = 0;  // the graph's inputs, alive throughout
  for (int d = 0; d < g.data_count(); ++d)
    if (g.is_source(d)) sources += g.data(d).size;
  p.interface_bytes.assign(static_cast<std::size_t>(p.steps()), sources);
  for (int k = 0; k < L; ++k) {
    const auto& s = io[static_cast<std::size_t>(bk.kind_of[static_cast<std::size_t>(k)])];
    p.interface_bytes[static_cast<std::size_t>(p.backward_step(k))] +=
        s.output_gradient + s.input_gradient;
  }
  // Groups: the parameters read by the same set of blocks, in order of first appearance.
  std::map<std::vector<int>, std::size_t> group_of;
  for (int w = 0; w < static_cast<int>(g.parameters().size()); ++w) {
    std::vector<int> users;
    for (int f : g.parameter_users(w))
      users.push_back(block_of_forward[static_cast<std::size_t>(f)]);
    std::sort(users.begin(), users.end());
    users.erase(std::unique(users.begin(), users.end()), users.end());
    if (users.empty()) continue;  // read by no op: nothing plans it
    auto [it, fresh] = group_of.emplace(users, p.groups.size());
    if (fresh) {
      std::string name = "block " + std::to_string(users.front());
      for (std::size_t i = 1; i < users.size(); ++i) name += "+" + std::to_string(users[i]);
      p.groups.push_back({name, {}, users});
    }
    const parameter& pw = g.parameters()[static_cast<std::size_t>(w)];
    p.groups[it->second].tensors.push_back({pw.name, pw.size, pw.trainable ? pw.size : 0});
  }
  out.blocks = bk.cut;
  return out;
}

}  // namespace remat
