#pragma once
// The points of a budget -> overhead sweep (remat::sweep, <remat/sweep.hpp>), apart from the
// sweep itself so that what only draws or prints them (io/svg.hpp) does not include every policy.

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>

namespace remat {

/// One policy at one budget.
struct sweep_point {
  std::string policy;
  bytes budget = 0;
  status code = status::ok;  ///< ok: planned, and the simulator accepts the plan within the budget
  std::string message;       ///< why there is no plan (the policy's message), when not ok
  bytes peak = 0;            ///< simulated peak of the plan (0 when not ok)
  seconds makespan = 0;      ///< simulated makespan, on the policy's machine (0 when not ok)
  double overhead = 0;       ///< makespan / store-all's makespan - 1 (0 when not ok)
  [[nodiscard]] bool ok() const noexcept { return code == status::ok; }
};

struct sweep_options {
  int budgets = 12;  ///< how many budgets, >= 2
  /// The lowest budget; 0: 90% of the smallest budget that rotor (or pofo, with transfers) plans
  /// with, so that the first points show where the policies stop.
  bytes lowest = 0;
  bytes highest = 0;  ///< the highest budget; 0: store-all's peak
  /// The machine of the policies that plan transfers (their `hw`); without a link
  /// (machine::without_transfers()) they are left out.
  machine hw = machine::with_bandwidth(pcie3_x16_bandwidth);
  /// A policy that declares practical_stages (rotor_floating, whose DP is O(N^6 S): 24) is swept
  /// only on chains up to that length; this overrides it for every such policy.
  std::optional<int> practical_stages = std::nullopt;
  seconds time_limit = std::numeric_limits<double>::infinity();  ///< each solve's limit
};

struct sweep_result {
  std::string problem;                ///< the chain's name
  std::vector<std::string> policies;  ///< the policies swept, in the order of the points
  std::vector<bytes> budgets;         ///< ascending
  std::vector<sweep_point> points;    ///< policy-major: points[p * budgets.size() + b]
  seconds store_all_time = 0;         ///< store-all's simulated makespan: the overheads' baseline
  bytes store_all_peak = 0;           ///< store-all's simulated peak
  machine hw;                         ///< the transfer planners' machine (no link: not swept)
  std::vector<std::string> notes;     ///< policies left out, and why

  /// The point of policy p at budget b.
  [[nodiscard]] const sweep_point& at(std::size_t p, std::size_t b) const {
    return points[p * budgets.size() + b];
  }
};

}  // namespace remat
