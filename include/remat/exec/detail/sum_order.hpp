#pragma once
// The executor's schedule rules beyond the simulator's, which keep its gradients bitwise those of
// plain training: each backward runs at most once (layers accumulate parameter gradients), and
// the contributions to a gradient with three or more producers come in store-all's order (with
// three or more, the sum's last bits depend on the order). A schedule that breaks them is refused
// before anything runs. docs/executor.md, "Bitwise equality with plain training".

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::exec::detail {

/// Why s breaks the rules above on g, naming the instruction, the gradient and the order
/// expected; empty if it passes. Store-all's order is the compute nodes' index order; with one or
/// two contributions any order gives the same bits (c1 + c2 == c2 + c1 exactly), so a gradient
/// with 3+ producers passes when its first two contributions are store-all's first two, in either
/// order, and every later one comes in store-all's position.
inline std::string sum_order_violation(const graph& g, const schedule& s) {
  using ::remat::detail::compute_label;
  using ::remat::detail::compute_list;
  using ::remat::detail::data_label;
  std::vector<int> backward_runs(static_cast<std::size_t>(g.compute_count()), 0);
  std::vector<std::vector<int>> summed(static_cast<std::size_t>(g.data_count()));
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const instruction& ins = s.ops[i];
    const std::string at = "instruction " + std::to_string(i) + " (" + to_string(ins) + ")";
    if (ins.op == op_kind::free && ins.on_data()) {
      summed[static_cast<std::size_t>(ins.node)].clear();
      continue;
    }
    if (!ins.is_compute()) continue;
    const int c = ins.node;
    if (g.compute(c).kind != compute_kind::backward) continue;
    if (backward_runs[static_cast<std::size_t>(c)]++ > 0)
      return at + ": " + compute_label(g, c) +
             " runs a second time; the executor runs each backward once (layers accumulate "
             "parameter gradients, a second run would add them twice)";
    for (int d : g.outputs(c)) {
      std::vector<int> order(g.producers(d).begin(), g.producers(d).end());
      std::sort(order.begin(), order.end());  // store-all's order: compute index
      auto& done = summed[static_cast<std::size_t>(d)];
      done.push_back(c);
      const std::size_t k = done.size();
      const bool ok = order.size() < 3 || (k == 1 && (c == order[0] || c == order[1])) ||
                      (k == 2 && std::is_permutation(done.begin(), done.end(), order.begin())) ||
                      (k > 2 && c == order[k - 1]);
      if (!ok)
        return at + ": " + compute_label(g, c) + " would add its contribution to " +
               data_label(g, d) + " out of store-all's order (" + compute_list(g, order) +
               ", the first two in either order); with 3 or more contributions the sum's last "
               "bits depend on the order, so run these backwards in the graph's order";
    }
  }
  return {};
}

}  // namespace remat::exec::detail
