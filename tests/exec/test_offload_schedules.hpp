#pragma once
// Hand-written offloading schedules for the executor's tests (host and CUDA):
//   * with_offloads(s, n): a chain policy's program with its kept plain activations moved to the
//     host and back, written in the chain notation and lowered (schedule/notation.hpp);
//   * with_graph_offloads(g, s, movable): any program on a training graph with the tensors
//     `movable` picks moved to the host between their uses.

#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

namespace offload_test {

/// The chain ops `ops` with every plain activation a kept input (of F_ck, F_all or B) offloaded
/// right after the op that keeps it, and brought back (W, P, W) just before the next op that
/// reads it.
inline std::vector<remat::chain_op> with_offloads(std::span<const remat::chain_op> ops, int n) {
  using remat::chain_op;
  enum form { none, plain, full };
  std::vector<form> held(static_cast<std::size_t>(n + 1), none);
  std::vector<char> away(static_cast<std::size_t>(n + 1), 0);
  held[0] = plain;
  std::vector<chain_op> out;
  auto at = [](int k) { return static_cast<std::size_t>(k); };
  auto bring_back = [&](int k) {
    if (!away[at(k)]) return;
    out.insert(out.end(), {chain_op::wait(k), chain_op::prefetch(k), chain_op::wait(k)});
    away[at(k)] = 0;
  };
  for (const chain_op& op : ops) {
    if (!op.is_compute())
      throw std::invalid_argument("with_offloads: the chain ops already move data");
    const int l = op.index;
    bring_back(l - 1);
    out.push_back(op);
    if (op.kind == remat::chain_op_kind::forward) {
      held[at(l)] = op.mode == remat::forward_mode::save_all ? full : plain;
      if (op.mode == remat::forward_mode::no_save) held[at(l - 1)] = none;
    } else {
      held[at(l)] = none;
      if (held[at(l - 1)] == plain) held[at(l - 1)] = none;
    }
    if (held[at(l - 1)] == plain) {
      out.push_back(chain_op::offload(l - 1));
      away[at(l - 1)] = 1;
    }
  }
  return out;
}

/// A chain policy's program (over build_graph(chain) of an n-stage chain) with offloads as above,
/// lowered again.
inline remat::schedule with_offloads(const remat::schedule& s, int n) {
  const auto ops = remat::to_chain_ops(n, s);
  if (!ops) throw std::invalid_argument("with_offloads: the program is not chain-shaped");
  auto lowered = remat::lower(n, with_offloads(std::span<const remat::chain_op>(*ops), n));
  if (!lowered) throw std::invalid_argument("with_offloads: " + lowered.message());
  return *lowered;
}

/// Program `s` on graph `g` with every tensor d that `movable(d)` picks (never a phantom: it
/// cannot move) offloaded right after a compute node that reads it, when it is read or written
/// again later (with `before_free`, also when it is only freed later), and brought back (W, P, W)
/// just before the next instruction that uses it; one freed while away is waited for, then freed
/// on the host (its host copy released).
inline remat::schedule with_graph_offloads(const remat::graph& g, const remat::schedule& s,
                                           const std::function<bool(int)>& movable,
                                           bool before_free = false) {
  using remat::instruction;
  const auto nd = static_cast<std::size_t>(g.data_count());
  std::vector<char> alive(nd, 0), away(nd, 0);
  auto at = [](int d) { return static_cast<std::size_t>(d); };
  for (int d = 0; d < g.data_count(); ++d) alive[at(d)] = g.is_source(d) ? 1 : 0;
  // The data an instruction uses: a compute node's inputs and outputs (a fast-forward does not
  // make its phantoms), a free's node.
  auto uses = [&](const instruction& ins) {
    std::vector<int> u;
    if (!ins.is_compute()) {
      u.push_back(ins.node);
      return u;
    }
    for (int d : g.inputs(ins.node)) u.push_back(d);
    for (int d : g.outputs(ins.node))
      if (ins.op != remat::op_kind::fast_forward || g.data(d).kind != remat::data_kind::phantom)
        u.push_back(d);
    return u;
  };
  auto used_later = [&](std::size_t i, int d) {
    for (std::size_t j = i + 1; j < s.ops.size(); ++j)
      for (int x : uses(s.ops[j]))
        if (x == d) return before_free || s.ops[j].op != remat::op_kind::free;
    return false;
  };
  remat::schedule out;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const instruction& ins = s.ops[i];
    if (!ins.is_compute() && ins.op != remat::op_kind::free)
      throw std::invalid_argument("with_graph_offloads: the program already moves data");
    for (int d : uses(ins)) {
      if (!away[at(d)]) continue;
      if (ins.op == remat::op_kind::free) {
        out.ops.push_back(instruction::wait(d));  // then freed on the host
      } else {
        out.ops.insert(out.ops.end(),
                       {instruction::wait(d), instruction::prefetch(d), instruction::wait(d)});
      }
      away[at(d)] = 0;
    }
    out.ops.push_back(ins);
    if (ins.op == remat::op_kind::free) {
      alive[at(ins.node)] = 0;
      continue;
    }
    for (int d : uses(ins)) alive[at(d)] = 1;
    for (int d : g.inputs(ins.node))
      if (alive[at(d)] && !away[at(d)] && g.data(d).kind != remat::data_kind::phantom &&
          movable(d) && used_later(i, d)) {
        out.ops.push_back(instruction::offload(d));
        away[at(d)] = 1;
      }
  }
  for (int d = 0; d < g.data_count(); ++d)  // protected data ends on the device
    if (away[at(d)])
      out.ops.insert(out.ops.end(),
                     {instruction::wait(d), instruction::prefetch(d), instruction::wait(d)});
  return out;
}

/// The transfers (offload, prefetch, wait) of a program.
inline int transfers_in(const remat::schedule& s) {
  int t = 0;
  for (const auto& i : s.ops) t += i.is_compute() || i.op == remat::op_kind::free ? 0 : 1;
  return t;
}

}  // namespace offload_test
