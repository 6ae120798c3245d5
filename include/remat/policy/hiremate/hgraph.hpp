#pragma once
// The H-graph of a cluster [Zhao24, §3.2, Def. 3.2.2]: the cluster's block graph (extract_block
// of its forward ops, problem/block.hpp) with each sub-cluster j collapsed into a forward F_j
// and a backward B_j, its internal data into one phantom per option of j (what the option's
// forward leaves alive inside j for its backward), its interface data kept. Each node has run
// variants for checkmate's MILP (policy/checkmate/formulation.hpp): an op its own (normal run,
// fast-forward), F_j one per option and a fast-forward (no phantom), B_j one per option (reading
// that option's phantom and the interface data its backward part reads). lower() turns a
// program of the H-graph (instructions whose `part` is unused and a variant per run) back into a
// program of the block graph, each run of F_j or B_j replaced by its option's part. docs/
// hiremate.md, "H-graphs".

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/checkmate/formulation.hpp>
#include <remat/policy/hiremate/partition.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/problem/block.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// A run of an H-graph program: an instruction on the H-graph and, for a compute, its variant
/// (the checkmate MILP's run record).
using hiremate_run = detail::checkmate_formulation::run_record;

struct hiremate_hgraph {
  using run_variant = detail::checkmate_formulation::run_variant;
  block_graph block;  ///< the cluster's block graph (B)
  graph g;            ///< the H-graph
  /// Per compute node of g, its variants (0: the normal run or the first option).
  std::vector<std::vector<run_variant>> variants;
  /// Per compute node of g: B's compute node it is (an op), or -1 for F_j and B_j.
  std::vector<int> compute_in_block;
  /// Per compute node of g: the item of the cluster it stands for (an index into items), and
  /// whether it is that item's backward.
  std::vector<int> item_of;
  std::vector<char> is_backward;
  /// Per data node of g: B's data node it is, or -1 for an option's phantom.
  std::vector<int> data_in_block;
  /// Per data node of B: its data node in g, or -1 inside a sub-cluster.
  std::vector<int> data_in_h;
  /// Per item: its option phantoms (data nodes of g; empty for an op).
  std::vector<std::vector<int>> option_phantoms;
  /// Per item and option: the data of B that the option's forward part leaves alive inside
  /// the sub-cluster (its phantom).
  std::vector<std::vector<std::vector<int>>> kept;
  /// Per item: its programs on B's nodes (empty options for an op).
  std::vector<detail::block_programs> programs;
};

/// The H-graph of cluster `c` of partition `p` of `parent`; `sub[k]` are the programs of
/// cluster k (its options and fast-forward, on the parent's nodes, as rockmate's block options:
/// detail::block_programs), read for the sub-clusters of c. Errors (status::invalid_problem): a
/// cluster out of range, a sub-cluster without an option, a block extract_block refuses.
inline result<hiremate_hgraph> hiremate_hgraph_of(const graph& parent, const hiremate_partition& p,
                                                  int c,
                                                  std::span<const detail::block_programs> sub) {
  using detail::ix;
  auto bad = [&](std::string m) {
    return error{status::invalid_problem, "hiremate H-graph: " + std::move(m), {}};
  };
  if (c < 0 || c >= static_cast<int>(p.clusters.size()))
    return bad("cluster " + std::to_string(c) + " does not exist (the partition has " +
               std::to_string(p.clusters.size()) + ")");
  const hiremate_cluster& cl = p.clusters[ix(c)];
  auto blk = extract_block(parent, cl.forwards);
  if (!blk) return blk.err();
  hiremate_hgraph h;
  h.block = std::move(*blk);
  const block_graph& B = h.block;
  const graph& bg = B.g;
  const int items = static_cast<int>(cl.items.size());
  // B's nodes per parent node.
  std::vector<int> cmap(ix(parent.compute_count()), -1);
  for (std::size_t i = 0; i < B.compute_in_parent.size(); ++i)
    if (B.compute_in_parent[i] >= 0) cmap[ix(B.compute_in_parent[i])] = static_cast<int>(i);
  // Each of B's compute nodes: its item.
  std::vector<int> item_of_node(ix(bg.compute_count()), -1);
  h.programs.assign(ix(items), {});
  for (int it = 0; it < items; ++it) {
    const hiremate_item& item = cl.items[ix(it)];
    std::vector<int> fw =
        item.is_cluster ? p.clusters[ix(item.index)].forwards : std::vector<int>{item.index};
    for (int f : fw) {
      item_of_node[ix(cmap[ix(f)])] = it;
      if (const int b = parent.backward_of(f); b >= 0 && cmap[ix(b)] >= 0)
        item_of_node[ix(cmap[ix(b)])] = it;
    }
    if (item.is_cluster) {
      if (item.index >= static_cast<int>(sub.size()) || sub[ix(item.index)].options.empty())
        return bad("sub-cluster " + std::to_string(item.index) + " of cluster " +
                   std::to_string(c) + " has no option; plan the clusters below first");
      detail::block_programs bp = sub[ix(item.index)];
      bp.fast_forward = detail::to_block(parent, B, bp.fast_forward);
      for (auto& o : bp.options) {
        o.forward = detail::to_block(parent, B, o.forward);
        o.backward = detail::to_block(parent, B, o.backward);
      }
      h.programs[ix(it)] = std::move(bp);
    }
  }
  // The graph's loss joins the sub-cluster that makes everything it reads (as extract_block
  // puts it in that sub-cluster's block): its runs are in that sub-cluster's options, and the
  // H-graph gets a loss of its own between that sub-cluster's forward and backward.
  const int loss = B.placeholder_loss >= 0 ? B.placeholder_loss : bg.loss();
  int loss_item = -1;
  if (B.placeholder_loss < 0) {
    std::vector<int> makers;
    for (int d : bg.inputs(loss))
      for (int k : bg.producers(d)) makers.push_back(item_of_node[ix(k)]);
    if (!makers.empty() && std::ranges::all_of(makers, [&](int it) {
          return it == makers.front() && it >= 0 && cl.items[ix(it)].is_cluster;
        })) {
      loss_item = makers.front();
      item_of_node[ix(loss)] = loss_item;
    }
  }
  // B's data: internal to a sub-cluster (touched by its nodes alone, not protected), or kept.
  std::vector<int> owner(ix(bg.data_count()), -1);  // the sub-cluster item it is internal to
  for (int d = 0; d < bg.data_count(); ++d) {
    int only = -2;  // -2: untouched yet; -1: several items or an op
    auto see = [&](int k) {
      const int it = item_of_node[ix(k)];
      const bool sub_item = it >= 0 && cl.items[ix(it)].is_cluster;
      if (!sub_item)
        only = -1;
      else if (only == -2)
        only = it;
      else if (only != it)
        only = -1;
    };
    for (int k : bg.producers(d)) see(k);
    for (int k : bg.consumers(d)) see(k);
    if (only >= 0 && !bg.data(d).is_protected) owner[ix(d)] = only;
  }
  // The H-graph's data: B's kept data, then each sub-cluster's option phantoms.
  graph& g = h.g;
  g.name = bg.name + " [H-graph]";
  std::vector<int> dmap(ix(bg.data_count()), -1);
  for (int d = 0; d < bg.data_count(); ++d)
    if (owner[ix(d)] < 0) {
      dmap[ix(d)] = g.add_data(bg.data(d));
      h.data_in_block.push_back(d);
    }
  int to_loss = -1, from_loss = -1;  // the H-graph's own loss's input and output
  if (loss_item >= 0) {
    to_loss = g.add_data({"to the loss", data_kind::activation, 0, false});
    from_loss = g.add_data({"from the loss", data_kind::gradient, 0, false});
    h.data_in_block.push_back(-1);
    h.data_in_block.push_back(-1);
  }
  h.option_phantoms.assign(ix(items), {});
  h.kept.assign(ix(items), {});
  for (int it = 0; it < items; ++it) {
    if (!cl.items[ix(it)].is_cluster) continue;
    for (std::size_t o = 0; o < h.programs[ix(it)].options.size(); ++o) {
      // What the option's forward part leaves alive inside the sub-cluster.
      std::vector<char> alive(ix(bg.data_count()), 0);
      for (const instruction& i : h.programs[ix(it)].options[o].forward) {
        if (i.is_compute()) {
          for (int d : bg.outputs(i.node))  // a fast-forward makes no phantom
            if (i.op != op_kind::fast_forward || bg.data(d).kind != data_kind::phantom)
              alive[ix(d)] = 1;
        } else if (i.op == op_kind::free)
          alive[ix(i.node)] = 0;
      }
      std::vector<int> kept;
      bytes size = 0;
      for (int d = 0; d < bg.data_count(); ++d)
        if (alive[ix(d)] && owner[ix(d)] == it) {
          kept.push_back(d);
          size += bg.data(d).size;
        }
      h.kept[ix(it)].push_back(std::move(kept));
      h.option_phantoms[ix(it)].push_back(
          g.add_data({"option " + std::to_string(o) + " of sub-cluster " +
                          std::to_string(cl.items[ix(it)].index),
                      data_kind::phantom, size, false}));
      h.data_in_block.push_back(-1);
    }
  }
  // Compute nodes: the items' forwards in the cluster's order, the loss, their backwards in
  // the reverse order.
  auto add = [&](int it, bool backward) {
    const hiremate_item& item = cl.items[ix(it)];
    if (!item.is_cluster) {
      const int f = cmap[ix(item.index)];
      const int k = backward ? bg.backward_of(f) : f;
      if (k < 0) return -1;
      const int n = g.add_compute(bg.compute(k));
      for (int d : bg.inputs(k)) g.add_input(n, dmap[ix(d)]);
      for (int d : bg.outputs(k)) g.add_output(n, dmap[ix(d)]);
      h.compute_in_block.push_back(k);
      h.item_of.push_back(it);
      h.is_backward.push_back(backward ? 1 : 0);
      h.variants.emplace_back();  // checkmate's, once the graph is whole
      return n;
    }
    // A sub-cluster: its interface as the inputs and outputs of F_j or B_j.
    const detail::block_programs& bp = h.programs[ix(it)];
    std::vector<int> ins, outs;
    bool has_backward = false;
    for (int k = 0; k < bg.compute_count(); ++k) {
      if (item_of_node[ix(k)] != it) continue;
      const bool bwd = bg.compute(k).kind != compute_kind::forward;
      has_backward = has_backward || bwd;
      if (bwd != backward) continue;
      for (int d : bg.inputs(k))
        if (owner[ix(d)] != it) ins.push_back(dmap[ix(d)]);
      for (int d : bg.outputs(k))
        if (owner[ix(d)] != it) outs.push_back(dmap[ix(d)]);
    }
    if (backward && !has_backward) return -1;
    // What an option's backward part reads before it makes it (a forward it runs again reads
    // the sub-cluster's inputs): B_j's inputs, those of each option ([Zhao24, §3.4]: d ->^o B_j).
    auto needs = [&](const std::vector<instruction>& part) {
      std::vector<char> made(ix(bg.data_count()), 0), need(ix(bg.data_count()), 0);
      for (const instruction& i : part) {
        if (!i.is_compute()) continue;
        for (int d : bg.inputs(i.node))
          if (!made[ix(d)]) need[ix(d)] = 1;
        for (int d : bg.outputs(i.node)) made[ix(d)] = 1;
      }
      return need;
    };
    if (backward)
      for (const auto& o : bp.options) {
        const auto need = needs(o.backward);
        for (int d = 0; d < bg.data_count(); ++d)
          if (need[ix(d)] && owner[ix(d)] != it) ins.push_back(dmap[ix(d)]);
      }
    // Inputs the sub-cluster makes itself (an output its backward reads) are F_j's outputs.
    std::sort(outs.begin(), outs.end());
    outs.erase(std::unique(outs.begin(), outs.end()), outs.end());
    std::sort(ins.begin(), ins.end());
    ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
    // Data the sub-cluster both makes and reads: in the forward, an output (read inside too);
    // in the backward, a gradient others contribute to as well is an input (the sub-cluster's
    // own contribution happens inside it), one only it makes an output.
    std::vector<int> both;
    std::ranges::set_intersection(ins, outs, std::back_inserter(both));
    for (int d : both) {
      const bool outside =
          backward && std::ranges::any_of(bg.producers(h.data_in_block[ix(d)]),
                                          [&](int k) { return item_of_node[ix(k)] != it; });
      std::erase(outside ? outs : ins, d);
    }
    if (it == loss_item) (backward ? ins : outs).push_back(backward ? from_loss : to_loss);
    seconds longest = 0;
    for (const auto& o : bp.options)
      longest = std::max(longest, backward ? o.cost.backward_time : o.cost.forward_time);
    const std::string name = "sub-cluster " + std::to_string(cl.items[ix(it)].index) +
                             (backward ? " backward" : " forward");
    const int n = g.add_compute({name, backward ? compute_kind::backward : compute_kind::forward,
                                 longest, 0, backward ? 0 : bp.fast_time, 0});
    for (int d : ins) g.add_input(n, d);
    for (int d : outs) g.add_output(n, d);
    const auto& ph = h.option_phantoms[ix(it)];
    for (int d : ph) (backward ? g.add_input(n, d) : g.add_output(n, d));
    h.compute_in_block.push_back(-1);
    h.item_of.push_back(it);
    h.is_backward.push_back(backward ? 1 : 0);
    auto& vs = h.variants.emplace_back();
    const auto io_in = g.inputs(n);
    const auto io_out = g.outputs(n);
    for (std::size_t o = 0; o < bp.options.size(); ++o) {
      const auto& opt = bp.options[o];
      std::vector<char> reads(io_in.size(), 1), makes(io_out.size(), 1);
      if (backward) {
        // Its phantom, the interface data its backward part reads, and a gradient it adds to
        // that others add to as well (what they added is read, even where the part's own
        // contribution comes first).
        const std::vector<char> read = needs(opt.backward);
        auto accumulated = [&](int d) {
          const auto pr = bg.producers(d);
          return std::ranges::any_of(pr, [&](int k) { return item_of_node[ix(k)] == it; }) &&
                 std::ranges::any_of(pr, [&](int k) { return item_of_node[ix(k)] != it; });
        };
        for (std::size_t q = 0; q < io_in.size(); ++q) {
          const int d = io_in[q];
          const int in_block = h.data_in_block[ix(d)];  // -1: a phantom, or from the loss
          const auto at = std::ranges::find(ph, d);
          reads[q] = at != ph.end() ? (at - ph.begin() == static_cast<std::ptrdiff_t>(o))
                     : in_block < 0 ? 1
                                    : read[ix(in_block)] || accumulated(in_block);
        }
      } else {
        for (std::size_t q = 0; q < io_out.size(); ++q) {
          const auto at = std::ranges::find(ph, io_out[q]);
          makes[q] = at == ph.end() || at - ph.begin() == static_cast<std::ptrdiff_t>(o);
        }
      }
      // The backward part as lower() runs it: the interface frees are the H-graph's own.
      vs.push_back(
          {backward ? opt.cost.backward_time : opt.cost.forward_time,
           backward ? opt.kept_interface_backward_overhead : opt.cost.forward_overhead_bytes,
           std::move(makes), std::move(reads), op_kind::compute});
      // An option of the sub-cluster with the graph's loss runs the loss: once.
      vs.back().once = !backward && it == loss_item;
    }
    if (!backward) {  // the fast-forward: its outputs, no phantom (and no loss)
      std::vector<char> makes(io_out.size(), 1);
      for (std::size_t q = 0; q < io_out.size(); ++q)
        makes[q] = std::ranges::find(ph, io_out[q]) == ph.end() && io_out[q] != to_loss;
      vs.push_back({bp.fast_time, bp.fast_overhead, std::move(makes),
                    std::vector<char>(io_in.size(), 1), op_kind::fast_forward});
    }
    return n;
  };
  std::vector<int> fwd(ix(items), -1), bwd(ix(items), -1);
  for (int it = 0; it < items; ++it) fwd[ix(it)] = add(it, false);
  if (loss_item < 0) {
    const int n = g.add_compute(bg.compute(loss));
    for (int d : bg.inputs(loss)) g.add_input(n, dmap[ix(d)]);
    for (int d : bg.outputs(loss)) g.add_output(n, dmap[ix(d)]);
    h.compute_in_block.push_back(loss);
  } else {  // the loss runs inside loss_item's options: a loss of no cost that lowers to nothing
    const int n = g.add_compute(
        {"loss (in sub-cluster " + std::to_string(cl.items[ix(loss_item)].index) + ")",
         compute_kind::loss, 0, 0, 0, 0});
    g.add_input(n, to_loss);
    g.add_output(n, from_loss);
    h.compute_in_block.push_back(-1);
  }
  h.item_of.push_back(-1);
  h.is_backward.push_back(0);
  h.variants.emplace_back();
  for (int it = items - 1; it >= 0; --it) {
    bwd[ix(it)] = add(it, true);
    if (fwd[ix(it)] >= 0 && bwd[ix(it)] >= 0) g.set_backward(fwd[ix(it)], bwd[ix(it)]);
  }
  for (int d = 0; d < bg.data_count(); ++d) {
    const int t = bg.gradient_of(d);
    if (t > d && dmap[ix(d)] >= 0 && dmap[ix(t)] >= 0) g.set_gradient(dmap[ix(d)], dmap[ix(t)]);
  }
  if (auto v = validate(g); !v)
    return bad("the H-graph of cluster " + std::to_string(c) + " is not a valid training graph (" +
               v.message() + "); a bug in remat, please report it with the graph");
  // An op's variants are checkmate's (its normal run, and its fast-forward where it helps).
  const auto base = detail::checkmate_formulation{}.variants_of(g);
  for (int n = 0; n < g.compute_count(); ++n)
    if (h.compute_in_block[ix(n)] >= 0 || h.item_of[ix(n)] < 0) h.variants[ix(n)] = base[ix(n)];
  h.data_in_h = std::move(dmap);
  return h;
}

/// A program of the H-graph as a program of its cluster's block graph: an op's runs and frees
/// as they are; F_j's run in option o, its option's forward part, in the fast-forward, the
/// sub-cluster's fast-forward program; B_j's run in option o, its option's backward part, which
/// frees what the option kept; a free of option o's phantom before that, the frees of what it
/// keeps (after it, nothing). The frees of the sub-cluster's interface inside its parts are
/// dropped: the H-graph's program frees its data itself. A forward part run while j's data are
/// alive (F_j again, fast-forwarded, while an option's phantom holds what it kept: the H-graph
/// sees only j's outputs) skips the ops whose outputs are all alive, frees those partly alive
/// before it recomputes them, and keeps what the live option kept: B_j reads it later.
[[nodiscard]] inline std::vector<instruction> lower(const hiremate_hgraph& h,
                                                    std::span<const hiremate_run> runs) {
  using detail::ix;
  const graph& b = h.block.g;
  std::vector<instruction> out;
  std::vector<char> consumed(h.data_in_block.size(), 0);  // a phantom its backward has freed
  std::vector<char> alive(ix(b.data_count()), 0);         // made by the program, not freed
  std::vector<int> live(h.option_phantoms.size(), -1);    // per item: the option its data keep
  auto emit = [&](const instruction& i) {
    if (i.is_compute()) {
      for (int d : b.outputs(i.node))
        if (i.op == op_kind::compute || b.data(d).kind != data_kind::phantom) alive[ix(d)] = 1;
    } else if (i.op == op_kind::free) {
      alive[ix(i.node)] = 0;
    }
    out.push_back(i);
  };
  auto kept_live = [&](int it, int d) {
    const int o = live[ix(it)];
    return o >= 0 && std::find(h.kept[ix(it)][ix(o)].begin(), h.kept[ix(it)][ix(o)].end(), d) !=
                         h.kept[ix(it)][ix(o)].end();
  };
  auto part = [&](const std::vector<instruction>& ops, int it, bool forward) {
    for (const instruction& i : ops) {
      if (i.op == op_kind::free && h.data_in_h[ix(i.node)] >= 0) continue;  // the H-graph's
      if (forward && i.is_compute()) {
        bool all = true;
        std::vector<int> stale;  // outputs alive already: freed before they are made again
        for (int d : b.outputs(i.node))
          if (i.op == op_kind::compute || b.data(d).kind != data_kind::phantom) {
            if (alive[ix(d)]) stale.push_back(d);
            all = all && alive[ix(d)];
          }
        if (all) continue;
        for (int d : stale) emit(instruction::free(d));
      } else if (forward && i.op == op_kind::free &&
                 (kept_live(it, i.node) || !alive[ix(i.node)])) {
        continue;
      }
      emit(i);
    }
  };
  for (const hiremate_run& r : runs) {
    const instruction& i = r.ins;
    if (i.is_compute()) {
      const int k = i.node;
      if (h.compute_in_block[ix(k)] >= 0) {
        emit({h.variants[ix(k)][ix(r.variant)].op, h.compute_in_block[ix(k)]});
        continue;
      }
      const int it = h.item_of[ix(k)];
      if (it < 0) continue;  // a loss inside a sub-cluster: it runs in that sub-cluster's option
      const auto& bp = h.programs[ix(it)];
      const auto& ph = h.option_phantoms[ix(it)];
      if (h.is_backward[ix(k)]) {
        part(bp.options[ix(r.variant)].backward, it, false);
        consumed[ix(ph[ix(r.variant)])] = 1;
        live[ix(it)] = -1;
      } else if (r.variant == static_cast<int>(bp.options.size())) {
        part(bp.fast_forward, it, true);
      } else {
        part(bp.options[ix(r.variant)].forward, it, true);
        consumed[ix(ph[ix(r.variant)])] = 0;
        live[ix(it)] = r.variant;
      }
      continue;
    }
    if (i.op != op_kind::free) {
      emit({i.op, h.data_in_block[ix(i.node)], i.part});
      continue;
    }
    if (const int d = h.data_in_block[ix(i.node)]; d >= 0) {
      emit(instruction::free(d));
      continue;
    }
    if (consumed[ix(i.node)]) continue;
    for (std::size_t it = 0; it < h.option_phantoms.size(); ++it)
      for (std::size_t o = 0; o < h.option_phantoms[it].size(); ++o)
        if (h.option_phantoms[it][o] == i.node) {
          for (int d : h.kept[it][o])
            if (alive[ix(d)]) emit(instruction::free(d));
          if (live[it] == static_cast<int>(o)) live[it] = -1;
        }
  }
  return out;
}

}  // namespace remat
