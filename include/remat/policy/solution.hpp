#pragma once
// What every policy's solve_detailed(problem, budget) returns: the program, what the policy
// knows of its quality (proven optimal, a lower bound on the best makespan), how long the solve
// took, notes for people, and the policy's own details (rotor's slots, rockmate's blocks, an
// offloading plan's transfer times, ...). solve(problem, budget) is its program alone.

#include <optional>
#include <string>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// The details of a policy that has nothing to add to the common fields.
struct no_details {
  friend bool operator==(const no_details&, const no_details&) = default;
};

template <class Details = no_details>
struct solution {
  schedule program;  ///< checked by the simulator on the policy's machine (predicted_peak set)
  /// No program of the policy's search space is faster: a proof (an exact DP, a MILP solved to
  /// optimality), or a makespan equal to the ideal time, which bounds every program.
  bool optimal = false;
  /// A lower bound on the best makespan of the policy's search space (seconds), when it has one
  /// (a MILP's bound, an LP relaxation's value).
  std::optional<seconds> bound;
  seconds solve_seconds = 0;  ///< wall-clock time of the solve
  /// How the plan was reached when not as asked, or what the user should know (fallbacks,
  /// portfolio choices, one block), for people.
  std::vector<std::string> notes;
  Details details{};

  using details_type = Details;
};

}  // namespace remat
