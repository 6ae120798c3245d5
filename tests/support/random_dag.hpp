#pragma once
// Random tiny DAGs for the exact-against-exhaustive tests of checkmate (test_checkmate,
// test_checkmate_minimum): one generator, the shapes and cost ranges its options.

#include <algorithm>
#include <array>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <remat/problem/builder.hpp>

namespace remat::test {

struct random_dag_options {
  int max_inputs = 2;              ///< each op after the first reads 1 to max_inputs earlier values
  bool draw_backward_time = true;  ///< a backward time of its own (1-3), else twice the forward's
  std::vector<double> fast_ratios{0.5, 1.0, 1.0,
                                  1.5};  ///< fast-forward time / time, one drawn per forward
  std::string name = "random";           ///< the graph is named name + id
};

/// A random DAG of `ops` forward ops, each reading earlier values or the input (every op but the
/// last is read: the last reads what nothing reads yet), with costs drawn so that the model's
/// reductions are all exercised: times 1-3, outputs 1-3 bytes, empty and non-empty phantoms (0-2),
/// overheads 0-1, backwards that read some of their inputs and output, fast-forwards cheaper, as
/// cheap and dearer than the normal run. Every draw is its own statement, so that a seed gives
/// the same DAG with every compiler (function arguments are evaluated in no fixed order).
inline graph random_dag(std::mt19937& rng, int ops, int id, const random_dag_options& opt = {}) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  forward_dag f{opt.name + std::to_string(id), 1 + pick(2), {}};
  std::vector<int> read(static_cast<std::size_t>(ops), 0);
  for (int j = 0; j < ops; ++j) {
    forward_op o;
    o.name = "op" + std::to_string(j);
    const int n_in = j == 0 ? 1 : 1 + pick(opt.max_inputs);
    for (int r = 0; r < n_in; ++r) {
      const int src = pick(j + 1) - 1;  // -1: the graph input
      const std::string name = src < 0 ? "input" : "op" + std::to_string(src);
      if (std::find(o.inputs.begin(), o.inputs.end(), name) != o.inputs.end()) continue;
      o.inputs.push_back(name);
      if (src >= 0) read[static_cast<std::size_t>(src)] = 1;
    }
    if (j == ops - 1)
      for (int k = 0; k + 1 < ops; ++k)
        if (!read[static_cast<std::size_t>(k)]) o.inputs.push_back("op" + std::to_string(k));
    for (const auto& x : o.inputs)
      if (pick(2)) o.backward_reads.push_back(x);
    if (pick(2)) o.backward_reads.push_back("output");
    o.forward_time = 1 + pick(3);
    o.backward_time = opt.draw_backward_time ? 1 + pick(3) : 2 * o.forward_time;
    o.output_bytes = 1 + pick(3);
    o.phantom_bytes = pick(3);
    o.forward_overhead_bytes = pick(2);
    o.backward_overhead_bytes = pick(2);
    f.ops.push_back(std::move(o));
  }
  auto built = build_graph(f);
  if (!built) throw std::logic_error("random_dag: " + built.message());
  graph g = std::move(*built);
  for (int c = 0; c < g.compute_count(); ++c) {
    auto& n = g.compute(c);
    if (n.kind != compute_kind::forward) continue;
    n.fast_time =
        n.time *
        opt.fast_ratios[static_cast<std::size_t>(pick(static_cast<int>(opt.fast_ratios.size())))];
    n.fast_overhead = std::max<bytes>(0, n.overhead + pick(3) - 1);
  }
  return g;
}

}  // namespace remat::test
