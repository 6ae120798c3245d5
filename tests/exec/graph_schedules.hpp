#pragma once
// Hand-written programs for the executor's tests on DAG models (host and GPU): any built graph
// (build_graph's layout, training_layout), freeing as early as the simulator allows.

#include <cstddef>
#include <functional>
#include <vector>

#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace toy {

using remat::data_kind;
using remat::graph;
using remat::instruction;
using remat::schedule;
using remat::training_layout;

/// Runs the compute nodes in `order` (an entry -1 - d frees data node d there), freeing each data
/// node after its last reader in it.
inline schedule program_in_order(const graph& g, const std::vector<int>& order) {
  std::vector<int> last(static_cast<std::size_t>(g.data_count()), -1);
  for (std::size_t p = 0; p < order.size(); ++p)
    if (order[p] >= 0)
      for (int d : g.inputs(order[p])) last[static_cast<std::size_t>(d)] = static_cast<int>(p);
  schedule s;
  for (std::size_t p = 0; p < order.size(); ++p) {
    if (order[p] < 0) {
      s.ops.push_back(instruction::free(-1 - order[p]));
      continue;
    }
    s.ops.push_back(instruction::compute(order[p]));
    for (int d = 0; d < g.data_count(); ++d)
      if (last[static_cast<std::size_t>(d)] == static_cast<int>(p) && !g.data(d).is_protected)
        s.ops.push_back(instruction::free(d));
  }
  return s;
}

/// Maximal recomputation: a fast-forward pass that frees each activation once its forward readers
/// ran (every `keep`-th op's output kept), then for each backward, its forward recomputed in
/// normal mode from recomputed (fast-forwarded) ancestors, and everything freed again.
inline schedule recompute_all(const graph& g, int keep) {
  const training_layout lay{g.loss()};
  const int n = g.loss();
  schedule s;
  std::vector<char> alive(static_cast<std::size_t>(g.data_count()), 0);
  alive[0] = 1;
  auto at = [&](int d) -> char& { return alive[static_cast<std::size_t>(d)]; };
  auto run = [&](int c, bool fast) {
    s.ops.push_back(fast ? instruction::fast_forward(c) : instruction::compute(c));
    for (int d : g.outputs(c))
      if (!fast || g.data(d).kind != data_kind::phantom) at(d) = 1;
  };
  auto drop = [&](int d) {
    if (!at(d) || g.data(d).is_protected) return;
    s.ops.push_back(instruction::free(d));
    at(d) = 0;
  };
  auto kept = [&](int p) { return keep > 0 && p % keep == 0; };
  std::vector<int> readers_left(static_cast<std::size_t>(g.data_count()), 0);
  for (int p = 0; p < n; ++p)
    for (int d : g.inputs(lay.forward(p))) ++readers_left[static_cast<std::size_t>(d)];
  for (int p = 0; p < n; ++p) {
    run(lay.forward(p), true);
    for (int d : g.inputs(lay.forward(p)))
      if (--readers_left[static_cast<std::size_t>(d)] == 0 && d != lay.activation(n - 1) &&
          !kept((d - 2) / 3))
        drop(d);
  }
  run(lay.loss(), false);
  drop(lay.activation(n - 1));
  std::function<void(int)> materialize = [&](int d) {
    if (at(d)) return;
    const int f = g.producers(d)[0];
    for (int in : g.inputs(f)) materialize(in);
    run(f, true);
  };
  for (int p = n - 1; p >= 0; --p) {
    const int f = lay.forward(p);
    for (int in : g.inputs(f)) materialize(in);
    drop(lay.activation(p));
    run(f, false);
    for (int in : g.inputs(lay.backward(p))) materialize(in);
    run(lay.backward(p), false);
    drop(lay.gradient(p));
    drop(lay.phantom(p));
    for (int q = 0; q < n; ++q)
      if (!kept(q) || q >= p) drop(lay.activation(q));
  }
  for (int q = 0; q < n; ++q) drop(lay.activation(q));
  return s;
}

/// How many times each compute node of g runs in s (a fast-forward counts).
inline std::vector<int> compute_runs(const graph& g, const schedule& s) {
  std::vector<int> runs(static_cast<std::size_t>(g.compute_count()), 0);
  for (const auto& ins : s.ops)
    if (ins.is_compute()) ++runs[static_cast<std::size_t>(ins.node)];
  return runs;
}

/// Whether s recomputes some forward of g (some forward runs more than once).
inline bool recomputes(const graph& g, const schedule& s) {
  const auto runs = compute_runs(g, s);
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == remat::compute_kind::forward && runs[static_cast<std::size_t>(c)] > 1)
      return true;
  return false;
}

/// Whether s runs some backward of g more than once (the executor refuses such a program: layers
/// accumulate parameter gradients).
inline bool recomputes_a_backward(const graph& g, const schedule& s) {
  const auto runs = compute_runs(g, s);
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == remat::compute_kind::backward && runs[static_cast<std::size_t>(c)] > 1)
      return true;
  return false;
}

}  // namespace toy
