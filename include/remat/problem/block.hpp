#pragma once
// The block view of a training graph [Zhao24, §3.2.1-3.2.2, Lemma 3.2.1]: extract_block(g,
// forwards) makes a set of forward ops, their backwards and the data they touch a training graph of
// its own (its interface protected, a placeholder loss for the rest of the graph), which any
// graph policy plans as it is; lift() maps its programs back onto g, split into the block's
// forward and backward parts; cut_into_blocks cuts a graph at its 1-separators and same_block
// tells identical blocks apart. docs/training-graph.md, "The block view".

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// A block of a training graph as a graph of its own, and where its nodes are in the whole graph.
struct block_graph {
  graph g;
  std::vector<int> compute_in_parent;  ///< per compute node of g: its index in the parent; -1 for
                                       ///< the placeholder loss
  std::vector<int> data_in_parent;     ///< per data node of g: its index in the parent
  std::vector<int>
      inputs;  ///< interface data the block reads and does not make (block graph indices)
  std::vector<int>
      outputs;  ///< interface data the block makes for the rest of the graph (block graph indices)
  int placeholder_loss =
      -1;  ///< the placeholder loss (block graph index), -1 when the block holds g's loss
};

/// The block of `forwards` (forward compute nodes of parent) and their backwards. Errors
/// (status::invalid_problem) name the node at fault: not a forward, out of range, listed twice,
/// or a block whose graph is not a valid training graph (with validate()'s reason).
inline result<block_graph> extract_block(const graph& parent, std::span<const int> forwards) {
  auto bad = [&](std::string msg) {
    return error{status::invalid_problem,
                 "extract_block of graph '" + parent.name + "': " + std::move(msg),
                 {}};
  };
  if (auto v = validate(parent); !v) return v.err();
  if (forwards.empty()) return bad("no forward given; a block has at least one forward op");
  const int nc = parent.compute_count();
  std::vector<char> in_block(static_cast<std::size_t>(nc), 0);
  for (int f : forwards) {
    if (f < 0 || f >= nc)
      return bad("compute node " + std::to_string(f) +
                 " does not exist (the graph has compute nodes 0.." + std::to_string(nc - 1) + ")");
    if (parent.compute(f).kind != compute_kind::forward)
      return bad(detail::compute_label(parent, f) + " is a " +
                 std::string(to_string(parent.compute(f).kind)) +
                 "; give the block's forward ops (their backwards join them)");
    if (in_block[static_cast<std::size_t>(f)])
      return bad(detail::compute_label(parent, f) + " is listed twice");
    in_block[static_cast<std::size_t>(f)] = 1;
    if (const int b = parent.backward_of(f); b >= 0) in_block[static_cast<std::size_t>(b)] = 1;
  }
  // The loss joins a block that makes everything it reads.
  const int parent_loss = parent.loss();
  bool loss_inside = parent_loss >= 0;
  for (int d : parent.inputs(parent_loss))
    for (int p : parent.producers(d))
      loss_inside = loss_inside && in_block[static_cast<std::size_t>(p)];
  if (loss_inside) in_block[static_cast<std::size_t>(parent_loss)] = 1;
  std::vector<int> nodes;  // the block's compute nodes in the parent's (topological) order
  for (int c = 0; c < nc; ++c)
    if (in_block[static_cast<std::size_t>(c)]) nodes.push_back(c);

  // The data touched, and which of it is interface.
  const int nd = parent.data_count();
  std::vector<char> touched(static_cast<std::size_t>(nd), 0), made(touched.size(), 0),
      used_out(touched.size(), 0);
  for (int c : nodes) {
    for (int d : parent.inputs(c)) touched[static_cast<std::size_t>(d)] = 1;
    for (int d : parent.outputs(c))
      touched[static_cast<std::size_t>(d)] = made[static_cast<std::size_t>(d)] = 1;
  }
  for (int d = 0; d < nd; ++d) {
    if (!touched[static_cast<std::size_t>(d)]) continue;
    bool outside = parent.data(d).is_protected;
    for (int c : parent.consumers(d)) outside = outside || !in_block[static_cast<std::size_t>(c)];
    for (int c : parent.producers(d)) outside = outside || !in_block[static_cast<std::size_t>(c)];
    used_out[static_cast<std::size_t>(d)] = outside;
  }

  block_graph out;
  graph& g = out.g;
  g.name = parent.name + " [block]";
  std::vector<int> data_map(static_cast<std::size_t>(nd), -1);
  for (int d = 0; d < nd; ++d) {
    if (!touched[static_cast<std::size_t>(d)]) continue;
    data_node n = parent.data(d);
    n.is_protected = used_out[static_cast<std::size_t>(d)] != 0;
    data_map[static_cast<std::size_t>(d)] = g.add_data(std::move(n));
    out.data_in_parent.push_back(d);
  }
  const bool holds_loss = parent_loss >= 0 && in_block[static_cast<std::size_t>(parent_loss)];
  std::vector<int> compute_map(static_cast<std::size_t>(nc), -1);
  auto add = [&](int c) {
    const int k = g.add_compute(parent.compute(c));
    compute_map[static_cast<std::size_t>(c)] = k;
    out.compute_in_parent.push_back(c);
    for (int d : parent.inputs(c)) g.add_input(k, data_map[static_cast<std::size_t>(d)]);
    for (int d : parent.outputs(c)) g.add_output(k, data_map[static_cast<std::size_t>(d)]);
  };
  bool placed = holds_loss;
  for (int c : nodes) {
    if (!placed && parent.compute(c).kind == compute_kind::backward) {
      out.placeholder_loss = g.add_compute(
          {"loss (the rest of '" + parent.name + "')", compute_kind::loss, 0, 0, 0, 0});
      out.compute_in_parent.push_back(-1);
      placed = true;
    }
    add(c);
  }
  if (!placed) {  // forwards whose backwards are not in the graph
    out.placeholder_loss =
        g.add_compute({"loss (the rest of '" + parent.name + "')", compute_kind::loss, 0, 0, 0, 0});
    out.compute_in_parent.push_back(-1);
  }
  for (int c : nodes) {
    const int b = parent.backward_of(c);
    if (parent.compute(c).kind == compute_kind::forward && b >= 0 &&
        in_block[static_cast<std::size_t>(b)])
      g.set_backward(compute_map[static_cast<std::size_t>(c)],
                     compute_map[static_cast<std::size_t>(b)]);
  }
  for (int d = 0; d < nd; ++d) {
    const int t = parent.gradient_of(d);
    if (t > d && data_map[static_cast<std::size_t>(d)] >= 0 &&
        data_map[static_cast<std::size_t>(t)] >= 0)
      g.set_gradient(data_map[static_cast<std::size_t>(d)], data_map[static_cast<std::size_t>(t)]);
  }
  // The interface, and the placeholder loss's edges: it reads the block outputs that are
  // activations and makes the gradients the block reads from outside.
  for (int d = 0; d < nd; ++d) {
    const int k = data_map[static_cast<std::size_t>(d)];
    if (k < 0) continue;
    const bool is_input = !made[static_cast<std::size_t>(d)] || parent.producers(d).empty();
    if (is_input && g.producers(k).empty()) {
      if (out.placeholder_loss >= 0 && parent.data(d).kind == data_kind::gradient)
        g.add_output(out.placeholder_loss, k);  // from the rest of the graph, "through the loss"
      out.inputs.push_back(k);
    } else if (used_out[static_cast<std::size_t>(d)]) {
      out.outputs.push_back(k);
      if (out.placeholder_loss >= 0 && parent.data(d).kind == data_kind::activation)
        g.add_input(out.placeholder_loss, k);
    }
  }
  if (out.placeholder_loss >= 0 && g.outputs(out.placeholder_loss).empty())
    return bad("the block of " + detail::compute_list(parent, forwards) +
               " reads no gradient from the rest of the graph, so its backwards cannot start; a "
               "block holds "
               "forwards whose outputs the rest of the graph reads");
  if (auto v = validate(g); !v)
    return bad("its graph is not a valid training graph: " + v.message());
  return out;
}

/// The forward ops of g cut into a sequence of blocks ([Rockmate23, §3.2, App. A.4]):
/// block k ends at a forward op every path from the graph's input to the loss goes through (a
/// 1-separator), so that block k+1 depends on block k only through that op's output a_k and
/// block k's backward on block k+1 only through its gradient g_k. Each block lists its forward
/// compute nodes in g's order; the last block ends with the last forward, and the loss joins it
/// in extract_block. A graph with no cut point is one block.
///
/// Decision: the cut is decided on the whole training graph, not on the forward edges alone
/// (the source's BFS over the forward graph, impl find_cutting_points): every data node spans
/// the positions of the compute nodes that make or read it (a backward at its forward's
/// position, the loss after every forward, a graph input from before the first), and a cut
/// after forward op r is allowed when no data node but r's output and its gradient spans across
/// it. On graphs from build_graph the two agree; on hand-made graphs (a backward reading a
/// tensor of another block, a protected output in the middle) this keeps each block's interface
/// to a_{k-1}, g_{k-1}, a_k, g_k, which RK-Rotor's accounting needs. A protected data node that
/// some node makes (a graph output) spans to the end, except the gradient of a graph input,
/// which the first block's backward makes as the chain model's delta_0. The loss's block also
/// absorbs the blocks before it whose output no backward reads (see below).
inline std::vector<std::vector<int>> cut_into_blocks(const graph& g) {
  std::vector<int> forwards, rank(static_cast<std::size_t>(g.compute_count()), -1);
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::forward) {
      rank[static_cast<std::size_t>(c)] = static_cast<int>(forwards.size());
      forwards.push_back(c);
    }
  const int n = static_cast<int>(forwards.size());
  if (n == 0) return {};
  auto position = [&](int c) {
    const compute_node& node = g.compute(c);
    if (node.kind == compute_kind::forward) return rank[static_cast<std::size_t>(c)];
    if (node.kind == compute_kind::backward && g.forward_of(c) >= 0)
      return rank[static_cast<std::size_t>(g.forward_of(c))];
    return n;  // the loss, and a backward without a forward: after every forward
  };
  // crossing[r]: data nodes that span across the cut after forward r (lo <= r < hi), minus
  // forward r's own output and its gradient.
  std::vector<int> crossing(static_cast<std::size_t>(n) + 1, 0);
  auto output_of = [&](int r) {  // the activations forward r makes
    return g.outputs(forwards[static_cast<std::size_t>(r)]);
  };
  for (int d = 0; d < g.data_count(); ++d) {
    int lo = g.producers(d).empty() ? -1 : n, hi = -1;
    for (int c : g.producers(d)) lo = std::min(lo, position(c)), hi = std::max(hi, position(c));
    for (int c : g.consumers(d)) lo = std::min(lo, position(c)), hi = std::max(hi, position(c));
    const int twin = g.gradient_of(d);
    const bool input_gradient =
        twin >= 0 && g.data(d).kind == data_kind::gradient && g.producers(twin).empty();
    if (g.data(d).is_protected && !g.producers(d).empty() && !input_gradient) hi = n;
    if (hi <= lo) continue;  // within one forward's position, or read by nothing
    // Forward r's output (or its gradient) spans from r: it may cross the cut after r.
    bool own = false;
    if (lo >= 0 && lo < n) {
      const int a = g.data(d).kind == data_kind::gradient ? twin : d;
      for (int o : output_of(lo)) own = own || o == a;
    }
    // A graph input (lo = -1) crosses every cut before its last reader.
    for (int r = std::max(lo, 0) + (own ? 1 : 0); r < std::min(hi, n); ++r)
      ++crossing[static_cast<std::size_t>(r)];
  }
  // The loss's block absorbs the blocks before it while the tensor at its cut is read by no
  // backward: RK-Rotor keeps a block's input alive until the block's backward is done (Rotor's
  // persistence: B_l reads a_{l-1}), which would hold a tensor nothing needs through the loss's
  // backward, where memory peaks (GPT-2's logits, read by the loss's forward only, are as large
  // as the loss's saved log-probabilities); inside one block the inner policy frees it after the
  // loss's forward. (Other cuts are kept: between transformer layers the residual stream is often
  // read by no backward either, and small.)
  auto read_by_a_backward = [&](int r) {
    for (int d : output_of(r))
      if (g.data(d).kind == data_kind::activation)
        for (int c : g.consumers(d))
          if (g.compute(c).kind == compute_kind::backward) return true;
    return false;
  };
  for (int r = n - 2; r >= 0; --r) {
    if (crossing[static_cast<std::size_t>(r)] != 0) continue;  // inside the loss's block
    if (read_by_a_backward(r)) break;                          // its first cut
    crossing[static_cast<std::size_t>(r)] = 1;
  }
  std::vector<std::vector<int>> blocks(1);
  for (int r = 0; r < n; ++r) {
    blocks.back().push_back(forwards[static_cast<std::size_t>(r)]);
    if (r + 1 < n && crossing[static_cast<std::size_t>(r)] == 0) blocks.emplace_back();
  }
  return blocks;
}

/// Whether two blocks are the same up to names ([Rockmate23, App. A.5]): node by node in order,
/// the same kinds, costs, sizes, edges and interface. Identical blocks share their options.
inline bool same_block(const block_graph& x, const block_graph& y) {
  const graph &a = x.g, &b = y.g;
  if (a.compute_count() != b.compute_count() || a.data_count() != b.data_count() ||
      x.inputs != y.inputs || x.outputs != y.outputs || x.placeholder_loss != y.placeholder_loss)
    return false;
  auto same_span = [](std::span<const int> p, std::span<const int> q) {
    return std::ranges::equal(p, q);
  };
  for (int c = 0; c < a.compute_count(); ++c) {
    const compute_node &p = a.compute(c), &q = b.compute(c);
    if (p.kind != q.kind || p.time != q.time || p.overhead != q.overhead ||
        p.fast_time != q.fast_time || p.fast_overhead != q.fast_overhead ||
        a.backward_of(c) != b.backward_of(c) || !same_span(a.inputs(c), b.inputs(c)) ||
        !same_span(a.outputs(c), b.outputs(c)))
      return false;
  }
  for (int d = 0; d < a.data_count(); ++d) {
    const data_node &p = a.data(d), &q = b.data(d);
    if (p.kind != q.kind || p.size != q.size || p.is_protected != q.is_protected ||
        a.gradient_of(d) != b.gradient_of(d))
      return false;
  }
  return true;
}

/// A program of the block graph as two programs of the parent graph: the instructions before the
/// placeholder loss (the block's forward part) and after it (its backward part), node indices
/// mapped. Without a placeholder (the block holds the loss) everything is in the first.
inline std::pair<schedule, schedule> lift(const block_graph& b, const schedule& s) {
  std::pair<schedule, schedule> out;
  schedule* part = &out.first;
  for (const instruction& ins : s.ops) {
    if (ins.is_compute() && ins.node == b.placeholder_loss) {
      part = &out.second;
      continue;
    }
    const auto& map = ins.is_compute() ? b.compute_in_parent : b.data_in_parent;
    part->ops.push_back({ins.op, map.at(static_cast<std::size_t>(ins.node))});
  }
  return out;
}

}  // namespace remat
