#pragma once
// OFFMATE's problem from a training graph with parameters [Offmate24, §4]: rockmate's blocks (the
// graph cut at its 1-separators, identical blocks found once; policy/rockmate/options.hpp),
// optionally merged into at most `max_blocks` runs of equally many consecutive blocks placed where
// they repeat most, each with up to three options made on the block's own graph: store-all
// (everything its backward reads stays on the GPU), recompute (the forward keeps only the block's
// output, and the backward runs the forward again first) and offload (the forward sends what
// store-all keeps, its output excepted, to the host, but for the outputs of cheap operations,
// freed and made again at the start of the backward; the backward brings it back). The interface
// bytes are the graph's input, and in a backward step the gradients of the block's output and
// input; the parameter groups are the parameters read by the same set of blocks. docs/offmate.md,
// "From a graph".

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/policy/offmate/problem.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>
#include <remat/problem/graph.hpp>

namespace remat {

/// How a training graph becomes an OFFMATE problem.
struct offmate_graph_options {
  /// Merge consecutive blocks into at most this many runs of equally many, placed where the
  /// merged blocks repeat most (detail::merge_blocks); 0 keeps every block of the cut (a
  /// decoder layer is two: attention and MLP).
  int max_blocks = 0;
  /// Merge runs of this many consecutive blocks (placed as above) instead of the fewest that
  /// fit max_blocks; 0: the fewest.
  int run_length = 0;
  bool recompute = true;  ///< each block may recompute its forward in its backward
  bool offload = true;    ///< each block may offload what it keeps
  /// The offload option makes the outputs of its cheap operations again in the backward
  /// instead of moving them [Offmate24, §4.1]: an operation is cheap where it takes less time
  /// than its outputs' offload and prefetch on the machine the problem is made for.
  bool recompute_cheap = true;
};

/// The problem, and the blocks' forward nodes (each block's, in order).
struct offmate_graph_problem {
  offmate_problem problem;
  std::vector<std::vector<int>> blocks;
  int run_length = 1;  ///< how many blocks of the cut each block is (at most)
  int cut_blocks = 0;  ///< the blocks of the cut
  // How the options run, for the program (policy/offmate/program.hpp): the blocks and their
  // kinds, each kind's programs (on its representative's nodes: options[0] store-all's, and
  // where the kind may offload, options[1] the offload option's), and the activations its
  // offload option sends to the host.
  detail::block_kinds kinds;
  std::vector<detail::block_programs> programs;
  std::vector<std::vector<int>> offloaded;
};

namespace detail {

/// The blocks of `cut` merged into runs of `r` consecutive ones (the first run `offset` long, the
/// last what remains).
inline std::vector<std::vector<int>> merge_runs(const std::vector<std::vector<int>>& cut,
                                                std::size_t r, std::size_t offset) {
  std::vector<std::vector<int>> out;
  for (std::size_t i = 0; i < cut.size();) {
    const std::size_t len = out.empty() && offset > 0 ? offset : r;
    auto& run = out.emplace_back();
    for (std::size_t j = i; j < std::min(cut.size(), i + len); ++j)
      run.insert(run.end(), cut[j].begin(), cut[j].end());
    i += len;
  }
  return out;
}

/// The cut merged into runs of r = ceil(blocks / max_blocks) consecutive blocks, the runs placed
/// (the first one 1..r long) where they make the fewest kinds of block: aligned with the model's
/// repeating unit (a decoder layer's attention and MLP blocks together), so that the merged
/// blocks repeat too.
inline result<std::vector<std::vector<int>>> merge_blocks(const graph& g,
                                                          std::vector<std::vector<int>> cut,
                                                          int max_blocks, int run_length = 0) {
  if (run_length <= 1 && (max_blocks <= 0 || static_cast<int>(cut.size()) <= max_blocks))
    return cut;
  const std::size_t m = max_blocks > 0 ? static_cast<std::size_t>(max_blocks) : cut.size();
  const std::size_t r =
      run_length > 0 ? static_cast<std::size_t>(run_length) : (cut.size() + m - 1) / m;
  std::vector<std::vector<int>> best;
  int fewest = std::numeric_limits<int>::max();
  for (std::size_t offset = 0; offset < r; ++offset) {
    auto runs = merge_runs(cut, r, offset);
    if (runs.size() > m && run_length <= 0) continue;
    auto kinds = find_block_kinds(g, runs);
    if (!kinds) return kinds.err();
    if (kinds->kinds() < fewest) {
      fewest = kinds->kinds();
      best = std::move(runs);
    }
  }
  return best;
}

/// The activations (nodes of g) that block b's forward part `forward` (on g) leaves alive, its
/// output and g's protected data excepted, into `out`; their bytes.
inline bytes offloaded_activations(const graph& g, const block_graph& b,
                                   std::span<const instruction> forward, std::vector<int>& out) {
  std::vector<char> alive(static_cast<std::size_t>(g.data_count()), 0);
  for (const instruction& i : forward) {
    if (i.is_compute())
      for (int d : g.outputs(i.node)) alive[static_cast<std::size_t>(d)] = 1;
    else if (i.op == op_kind::free)
      alive[static_cast<std::size_t>(i.node)] = 0;
  }
  for (int d : b.outputs) alive[static_cast<std::size_t>(b.data_in_parent[ix(d)])] = 0;
  out.clear();
  bytes sum = 0;
  for (int d = 0; d < g.data_count(); ++d)
    if (alive[static_cast<std::size_t>(d)] && g.data(d).kind == data_kind::activation &&
        !g.data(d).is_protected && g.data(d).size > 0) {
      out.push_back(d);
      sum += g.data(d).size;
    }
  return sum;
}

/// The offload option of block b [Offmate24, §4.1], `all` its store-all option. Of `moved`
/// (offloaded_activations of its store-all forward, nodes of g), the outputs of cheap
/// operations -- forward operations of the block whose time is below their outputs' offload and
/// prefetch on hw, whose outputs are in `moved` or are their own phantoms (kept on the GPU
/// otherwise), and all of whose inputs the backward has (kept, brought back, or made again
/// before them) -- are freed at the end of the forward, phantoms too, and made again, in order,
/// at the start of the backward; `moved` keeps the rest. The
/// option's program is store-all's with those frees and operations, costed as every block
/// option (make_option), and taken where its forward and backward need no more memory than
/// store-all's (making an output again may need temporaries the backward did not); else `all`.
inline block_option offload_option(const graph& g, const block_graph& b, const interface_sizes& io,
                                   const machine& hw, bool recompute_cheap, const block_option& all,
                                   std::vector<int>& moved) {
  const std::vector<instruction> ops = store_all_program(b.g);
  const double round_trip = 1 / hw.device_to_host + 1 / hw.host_to_device;
  const int loss = block_loss(b);
  std::size_t k = 0;
  while (k < ops.size() && !(ops[k].is_compute() && ops[k].node == loss)) ++k;
  if (!recompute_cheap || !(round_trip > 0) || k == ops.size()) return all;
  std::map<int, int> local;
  for (std::size_t i = 0; i < b.data_in_parent.size(); ++i)
    local[b.data_in_parent[i]] = static_cast<int>(i);
  std::vector<char> candidate(ix(b.g.data_count()), 0), alive(ix(b.g.data_count()), 0);
  for (int d : moved) candidate[ix(local.at(d))] = 1;
  for (int d = 0; d < b.g.data_count(); ++d) alive[ix(d)] = b.g.is_source(d) ? 1 : 0;
  for (std::size_t i = 0; i < k; ++i) {
    if (ops[i].is_compute())
      for (int d : b.g.outputs(ops[i].node)) alive[ix(d)] = 1;
    else if (ops[i].op == op_kind::free)
      alive[ix(ops[i].node)] = 0;
  }
  std::vector<int> cheap;  // operations made again, in order
  std::vector<char> again(ix(b.g.data_count()), 0);
  for (std::size_t i = 0; i < k; ++i) {
    if (!ops[i].is_compute()) continue;
    const int c = ops[i].node;
    const auto outs = b.g.outputs(c);
    double out_bytes = 0;
    bool ok = !outs.empty();
    for (int d : outs) {  // activations that would move, and the op's own phantoms
      const data_node& n = b.g.data(d);
      const bool phantom = n.kind == data_kind::phantom && !n.is_protected &&
                           !g.data(b.data_in_parent[ix(d)]).is_protected;
      ok = ok && alive[ix(d)] && (candidate[ix(d)] || phantom);
      if (candidate[ix(d)]) out_bytes += static_cast<double>(n.size);
    }
    for (int d : b.g.inputs(c)) ok = ok && alive[ix(d)];
    if (!ok || !(b.g.compute(c).time < out_bytes * round_trip)) continue;
    cheap.push_back(c);
    for (int d : outs) again[ix(d)] = 1;
  }
  if (cheap.empty()) return all;
  std::vector<instruction> with;
  with.reserve(ops.size() + 2 * cheap.size());
  with.insert(with.end(), ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(k));
  for (int d = 0; d < b.g.data_count(); ++d)
    if (again[ix(d)]) with.push_back(instruction::free(d));
  std::size_t after = k + 1;  // the loss and the frees that follow it
  while (after < ops.size() && ops[after].op == op_kind::free) ++after;
  with.insert(with.end(), ops.begin() + static_cast<std::ptrdiff_t>(k),
              ops.begin() + static_cast<std::ptrdiff_t>(after));
  for (int c : cheap) with.push_back(instruction::compute(c));
  with.insert(with.end(), ops.begin() + static_cast<std::ptrdiff_t>(after), ops.end());
  auto o = make_option(b, io, schedule{std::move(with), 0, 0}, releasable(b, g));
  const stage_option &f = o ? o->cost : all.cost, &a = all.cost;
  if (!o || f.saved_bytes + f.forward_overhead_bytes > a.saved_bytes + a.forward_overhead_bytes ||
      f.saved_bytes + f.backward_overhead_bytes > a.saved_bytes + a.backward_overhead_bytes)
    return all;
  std::erase_if(moved, [&](int d) { return again[ix(local.at(d))] != 0; });
  return *o;
}

}  // namespace detail

/// The OFFMATE problem of g (see the top of this header) for a machine hw (its bandwidths say
/// which operations the offload option makes again rather than moving: none on the default
/// machine, whose link costs nothing). Errors: a graph that is not valid, a negative
/// max_blocks, a block whose store-all program fails (a bug).
inline result<offmate_graph_problem> offmate_problem_of(const graph& g,
                                                        const offmate_graph_options& o = {},
                                                        const machine& hw = {}) {
  if (auto v = validate(g); !v) return v.err();
  if (o.max_blocks < 0 || o.run_length < 0)
    return error{status::invalid_problem,
                 "offmate: max_blocks and run_length must be >= 0 (0: every block of the cut, the "
                 "fewest that fit), not " +
                     std::to_string(o.max_blocks) + " and " + std::to_string(o.run_length),
                 {}};
  auto whole = cut_into_blocks(g);
  const int cut_blocks = static_cast<int>(whole.size());
  auto cut = detail::merge_blocks(g, std::move(whole), o.max_blocks, o.run_length);
  if (!cut) return cut.err();
  auto kinds = detail::find_block_kinds(g, std::move(*cut));
  if (!kinds) return kinds.err();
  const detail::block_kinds& bk = *kinds;

  // Each kind's options, made on its representative's graph.
  std::vector<std::vector<offmate_option>> options(static_cast<std::size_t>(bk.kinds()));
  std::vector<detail::block_programs> programs(static_cast<std::size_t>(bk.kinds()));
  std::vector<std::vector<int>> offloaded(static_cast<std::size_t>(bk.kinds()));
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
    detail::block_programs& ff = programs[ri];
    detail::make_fast_forward(b, io[ri], ff);
    ff.options.push_back(*all);
    const stage_option& c = all->cost;
    const bytes out = io[ri].output;
    // What store-all keeps that can go to the host: the activations its forward leaves alive,
    // the block's output and the graph's protected data excepted (a phantom, a layer's own
    // saved context, stays on the GPU).
    detail::offloaded_activations(g, b, all->forward, offloaded[ri]);
    // store-all; recompute: F^0, then F^all and B in the backward; offload: those activations
    // (but for the cheap operations' outputs) go to the host in the forward and come back for
    // the backward.
    options[ri].push_back({"store-all", c.forward_time, c.backward_time, c.saved_bytes, 0,
                           c.forward_overhead_bytes, c.backward_overhead_bytes});
    const bytes kept = c.saved_bytes - out;
    if (o.recompute && kept > 0)
      options[ri].push_back({"recompute", ff.fast_time, c.forward_time + c.backward_time, out, 0,
                             ff.fast_overhead,
                             kept + std::max(c.forward_overhead_bytes, c.backward_overhead_bytes)});
    if (!o.offload || offloaded[ri].empty()) {
      offloaded[ri].clear();
      continue;
    }
    const detail::block_option off =
        detail::offload_option(g, b, io[ri], hw, o.recompute_cheap, *all, offloaded[ri]);
    bytes act = 0;
    for (int dn : offloaded[ri]) act += g.data(dn).size;
    const stage_option& f = off.cost;  // saved_bytes: what stays or moves
    ff.options.push_back(off);
    options[ri].push_back({"offload", f.forward_time, f.backward_time, f.saved_bytes - act, act,
                           act + f.forward_overhead_bytes, act + f.backward_overhead_bytes});
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
    p.blocks.push_back({g.compute(fwd.front()).name +
                            (fwd.size() > 1 ? " .. " + g.compute(fwd.back()).name : std::string()),
                        options[r]});
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
  out.cut_blocks = cut_blocks;
  out.run_length = (cut_blocks + L - 1) / L;
  out.kinds = std::move(*kinds);
  out.programs = std::move(programs);
  out.offloaded = std::move(offloaded);
  return out;
}

/// The graph at `batch` times its batch size [Offmate24, App. A]: every data node (activations,
/// their gradients, the layers' contexts) and every compute node's time and temporaries scaled by
/// it, linearly as the paper assumes; the parameters do not depend on it. The batch-size variant
/// (offmate::plan_batch) plans multiples of a graph's batch this way.
[[nodiscard]] inline graph at_batch(const graph& g, int batch) {
  graph out = g;
  const auto k = static_cast<bytes>(batch);
  for (int d = 0; d < out.data_count(); ++d) out.data(d).size *= k;
  for (int c = 0; c < out.compute_count(); ++c) {
    compute_node& n = out.compute(c);
    n.time *= batch;
    n.fast_time *= batch;
    n.overhead *= k;
    n.fast_overhead *= k;
  }
  return out;
}

}  // namespace remat
