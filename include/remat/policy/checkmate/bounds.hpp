#pragma once
// Bounds on a training graph's minimum budget that hold for every schedule (any order, any
// recomputation, with or without fast-forwards), so that checkmate answers budgets below them at
// once and starts find_minimum's bisection there. memory_floor(g): the protected data together,
// and per compute node what is alive while it runs in every schedule (the graph inputs, its
// inputs, outputs and overhead, and the gradients alive across it). memory_gcd(g): every peak is
// a multiple of it. docs/checkmate.md.

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
