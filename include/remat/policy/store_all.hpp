#pragma once
// store_all: plain training. Every forward keeps everything its backward needs (F^all), then
// every backward runs once: F_1^all .. F_N^all, B_N .. B_1. The baseline the other policies
// are measured against; its peak is the most memory any sensible schedule needs.
//
// On a training graph it is the graph's store-all program (store_all_program, below): every
// compute node once in topological order, each data node freed after its last consumer. Its
// makespan is the graph's ideal time, a lower bound for any schedule, so whenever it fits it is
// optimal.

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/policy/detail/common.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat {

/// Plain training as a graph program: every compute node once, in the graph's (topological)
/// order, forwards in normal mode (for a built graph: the forwards, the loss, the backwards in
/// reverse), and every data node that is not protected freed right after its last consumer.
/// Data freed after the same node are freed in index order. Valid for any graph that passes
/// validate(); its time is g.ideal_time().
[[nodiscard]] inline std::vector<instruction> store_all_program(const graph& g) {
  // last[c]: the data nodes whose last use is compute node c.
  std::vector<std::vector<int>> last(static_cast<std::size_t>(g.compute_count()));
  for (int d = 0; d < g.data_count(); ++d) {
    if (g.data(d).is_protected) continue;
    int at = -1;
    for (int c : g.consumers(d)) at = c > at ? c : at;
    if (at < 0)  // nothing reads it (an invalid graph): free it once made
      for (int c : g.producers(d)) at = c > at ? c : at;
    if (at >= 0) last[static_cast<std::size_t>(at)].push_back(d);
  }
  std::vector<instruction> ops;
  ops.reserve(static_cast<std::size_t>(g.compute_count() + g.data_count()));
  for (int c = 0; c < g.compute_count(); ++c) {
    ops.push_back(instruction::compute(c));
    for (int d : last[static_cast<std::size_t>(c)]) ops.push_back(instruction::free(d));
  }
  return ops;
}

/// Store-all's peak on a graph: the memory of plain training (store_all_program, replayed by
/// the simulator), the most any sensible schedule needs. g must be valid (validate()).
[[nodiscard]] inline bytes peak_of_store_all(const graph& g) {
  const schedule s{store_all_program(g), g.ideal_time(), 0};
  return sim::simulate(g, s, {.record_timeline = false}).peak;
}

/// Store-all's peak on a chain (F_1^all .. F_N^all, B_N .. B_1 on the chain's graph, as
/// store_all plans it). c must be valid (validate()).
[[nodiscard]] inline bytes peak_of_store_all(const chain& c);

/// A budget as a fraction of store-all's peak, in bytes rounded down: fraction_of_store_all(g,
/// 0.4) is "40% of the memory plain training needs" (graph or chain). A negative or NaN fraction
/// gives -1, which every policy refuses (invalid_problem: the budget is negative); a fraction
/// so large that the product exceeds the largest byte count gives that count.
template <class Problem>
requires requires(const Problem& p) { peak_of_store_all(p); }
[[nodiscard]] bytes fraction_of_store_all(const Problem& p, double fraction) {
  if (!(fraction >= 0)) return -1;
  const long double b = static_cast<long double>(peak_of_store_all(p)) * fraction;
  constexpr bytes most = std::numeric_limits<bytes>::max();
  if (!(b < static_cast<long double>(most))) return most;
  return static_cast<bytes>(b);  // truncation: rounded down
}

struct store_all {
  static constexpr std::string_view name = "store_all";
  static constexpr std::string_view summary =
      "plain training: every activation kept, nothing recomputed (chains and graphs)";

  [[nodiscard]] static std::vector<chain_op> program(const chain& c) {
    std::vector<chain_op> ops;
    const int n = c.length();
    ops.reserve(static_cast<std::size_t>(2 * n));
    for (int l = 1; l <= n; ++l) ops.push_back(chain_op::forward(l, forward_mode::save_all));
    for (int l = n; l >= 1; --l) ops.push_back(chain_op::backward(l));
    return ops;
  }

  /// The smallest budget with which store_all plans: the store-all peak.
  [[nodiscard]] bytes minimum_budget(const chain& c) const { return peak_of_store_all(c); }
  [[nodiscard]] bytes minimum_budget(const graph& g) const { return peak_of_store_all(g); }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }
  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    return detail::program_of(solve_detailed(g, budget));
  }

  /// Its makespan is the ideal time, a lower bound for every schedule: always optimal.
  [[nodiscard]] result<solution<>> solve_detailed(const chain& c, bytes budget) const {
    return detail::timed([&]() -> result<solution<>> {
      if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
      auto ops = program(c);
      const graph g = detail::chain_graph(c);
      const bytes peak = detail::peak_of(g, ops);
      if (peak > budget)
        return detail::budget_too_small(name, c, budget, peak, "it keeps every activation");
      return optimal(detail::finish(name, g, budget, std::move(ops), c.ideal_time()));
    });
  }

  [[nodiscard]] result<solution<>> solve_detailed(const graph& g, bytes budget) const {
    return detail::timed([&]() -> result<solution<>> {
      if (auto v = validate(g); !v) return v.err();
      if (budget < 0)
        return error{
            status::invalid_problem,
            "the budget is negative (" + std::to_string(budget) + " bytes); give a byte count >= 0",
            {}};
      schedule s{store_all_program(g), g.ideal_time(), 0};
      const bytes peak = sim::simulate(g, s, {.record_timeline = false}).peak;
      if (peak > budget)
        return error{status::budget_too_small,
                     std::string(name) + ": the budget of " + format_bytes(budget) +
                         " is below the " + format_bytes(peak) + " that graph '" + g.name +
                         "' needs when every activation is kept; give a budget of at least " +
                         std::to_string(peak) + " bytes, or use a policy that recomputes",
                     peak};
      return optimal(detail::finish(name, g, budget, std::move(s)));
    });
  }

 private:
  static result<solution<>> optimal(result<schedule> s) {
    if (!s) return s.err();
    solution<> out;
    out.program = std::move(*s);
    out.optimal = true;
    return out;
  }
};

inline bytes peak_of_store_all(const chain& c) {
  return detail::peak_of(detail::chain_graph(c), store_all::program(c));
}

}  // namespace remat
