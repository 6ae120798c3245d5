#pragma once
// store_all: plain training. Every forward keeps everything its backward needs (F^all), then
// every backward runs once: F_1^all .. F_N^all, B_N .. B_1. The baseline the other policies
// are measured against; its peak is the most memory any sensible schedule needs.
//
// On a training graph it is the graph's store-all program (schedule/graph_schedule.hpp): every
// compute node once in topological order, each data node freed after its last consumer. Its
// makespan is the graph's ideal time, a lower bound for any schedule, so whenever it fits it is
// optimal.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/policy/detail/common.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/graph_schedule.hpp>
#include <remat/sim/graph_simulate.hpp>

namespace remat {

struct store_all {
  static constexpr std::string_view name = "store_all";

  [[nodiscard]] static std::vector<instruction> program(const chain& c) {
    std::vector<instruction> ops;
    const int n = c.length();
    ops.reserve(static_cast<std::size_t>(2 * n));
    for (int l = 1; l <= n; ++l) ops.push_back(instruction::forward(l, forward_mode::save_all));
    for (int l = n; l >= 1; --l) ops.push_back(instruction::backward(l));
    return ops;
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    auto ops = program(c);
    const bytes peak = detail::peak_of(c, ops);
    if (peak > budget) return detail::budget_too_small(name, c, budget, peak, "it keeps every activation");
    return detail::finish(name, c, budget, std::move(ops), c.ideal_time());
  }

  [[nodiscard]] result<graph_schedule> solve(const graph& g, bytes budget) const {
    if (auto v = validate(g); !v) return v.err();
    if (budget < 0)
      return error{status::invalid_problem,
                   "the budget is negative (" + std::to_string(budget) +
                       " bytes); give a byte count >= 0",
                   {}};
    graph_schedule s{store_all_program(g), g.ideal_time(), 0};
    const auto r = sim::simulate(g, s, {.budget = unlimited_bytes});
    if (!r.valid)  // a valid graph always has a valid store-all program
      return error{status::solver_error,
                   std::string(name) + ": the store-all program of graph '" + g.name +
                       "' is rejected by the simulator (a bug in remat; please report it with "
                       "the graph): " +
                       r.first_violation->message,
                   {}};
    if (r.peak > budget)
      return error{status::budget_too_small,
                   std::string(name) + ": the budget of " + format_bytes(budget) +
                       " is below the " + format_bytes(r.peak) + " that graph '" + g.name +
                       "' needs when every activation is kept; give a budget of at least " +
                       std::to_string(r.peak) + " bytes, or use a policy that recomputes",
                   r.peak};
    s.predicted_peak = r.peak;
    return s;
  }
};

}  // namespace remat
