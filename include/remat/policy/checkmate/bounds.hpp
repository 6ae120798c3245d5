#pragma once
// Bounds on a training graph's minimum budget that hold for every schedule (any order of compute
// nodes, any recomputation, with or without fast-forwards), so checkmate can answer budgets
// below them at once and start find_minimum's bisection there. Not a template, no solver.
//
// memory_floor(g), the largest of:
//   * the protected data together: all of it is alive at the end;
//   * per compute node c, what is alive while c runs in every schedule: the graph inputs, c's
//     inputs and outputs (a forward's phantoms not with its fast-forward, when that needs less),
//     c's overhead, and, when c runs once (the loss, a backward: every backward runs once), each
//     gradient g that c does not touch but that is alive across c's run in every schedule.
//     A gradient's producers and consumers run once (forwards read no gradients), so it is
//     alive, without a break, from its first contribution to its last reader (or to the end,
//     when protected): nothing can make it again. It is alive across c when one of its
//     producers must run before c and, for an unprotected one, one of its readers after c.
//     "Must run before": the once-run nodes are ordered by their gradients alone (a reader needs
//     every contribution to a gradient, and a contribution cannot be made twice); activations
//     impose no order, since forwards can run again.
//   In a residual block, the gradient of the block input collects the add's contribution first
//   and the branch's last: it is alive during every backward of the branch, which the old bound
//   (c's own inputs and outputs only) missed.
// memory_gcd(g): every step's memory is a sum of data sizes and an overhead, so every peak, and
// the minimum budget, is a multiple of the gcd of the sizes and overheads (find_minimum bisects
// over those multiples only).

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/problem/graph.hpp>

namespace remat::detail {

/// The gcd of every data size and compute overhead (both variants); 1 when all are 0.
[[nodiscard]] inline bytes memory_gcd(const graph& g) {
  bytes u = 0;
  for (const auto& d : g.data_nodes()) u = std::gcd(u, d.size);
  for (const auto& c : g.compute_nodes()) u = std::gcd(std::gcd(u, c.overhead), c.fast_overhead);
  return std::max<bytes>(u, 1);
}

/// A budget below which no schedule of g exists (see the header comment). g must be valid.
[[nodiscard]] inline bytes memory_floor(const graph& g) {
  const int C = g.compute_count();
  const int D = g.data_count();
  auto at = [](int v) { return static_cast<std::size_t>(v); };
  auto once = [&](int c) { return g.compute(c).kind != compute_kind::forward; };
  // before[c][p]: once-run node p runs before once-run node c in every schedule. The order is
  // topological, so one pass over c's gradient inputs' producers closes it transitively.
  std::vector<std::vector<char>> before(at(C), std::vector<char>(at(C), 0));
  for (int c = 0; c < C; ++c) {
    if (!once(c)) continue;
    for (int d : g.inputs(c))
      for (int p : g.producers(d)) {
        if (!once(p)) continue;
        before[at(c)][at(p)] = 1;
        for (int q = 0; q < p; ++q)
          if (before[at(p)][at(q)]) before[at(c)][at(q)] = 1;
      }
  }
  bytes floor = 0;
  for (int d = 0; d < D; ++d)
    if (g.data(d).is_protected) floor += g.data(d).size;
  std::vector<char> in(at(D));
  for (int c = 0; c < C; ++c) {
    std::fill(in.begin(), in.end(), 0);
    for (int d = 0; d < D; ++d)
      if (g.is_source(d)) in[at(d)] = 1;
    for (int d : g.inputs(c)) in[at(d)] = 1;
    if (once(c))
      for (int d = 0; d < D; ++d) {
        if (in[at(d)] || g.is_source(d) || g.producers(d).empty()) continue;
        bool made = false, read_after = g.data(d).is_protected;
        for (int p : g.producers(d)) made = made || (once(p) && before[at(c)][at(p)]);
        for (int q : g.consumers(d)) read_after = read_after || (once(q) && before[at(q)][at(c)]);
        bool fixed = true;
        for (int p : g.producers(d)) fixed = fixed && once(p);
        if (fixed && made && read_after) in[at(d)] = 1;
      }
    auto need = [&](bool fast) {
      bytes m = fast ? g.compute(c).fast_overhead : g.compute(c).overhead;
      std::vector<char> all = in;
      for (int d : g.outputs(c))
        if (!fast || g.data(d).kind != data_kind::phantom) all[at(d)] = 1;
      for (int d = 0; d < D; ++d)
        if (all[at(d)]) m += g.data(d).size;
      return m;
    };
    bytes m = need(false);
    if (g.compute(c).kind == compute_kind::forward) m = std::min(m, need(true));
    floor = std::max(floor, m);
  }
  return floor;
}

}  // namespace remat::detail
