#pragma once
// remat::sweep: the budget -> overhead curve of every chain policy on one chain (issue 15 §2).
// Each policy plans the chain at the same budgets, evenly spaced from below the smallest budget
// any of them plans with up to store-all's peak; every plan is replayed by the simulator on the
// machine the policy planned for (machine_of), and the point holds the simulator's peak and
// makespan, not the policy's claim. A budget a policy cannot plan gives a point with the
// policy's status and message, so the curve shows where each policy stops.
//
// Which policies: the chain policies of <remat/remat.hpp>: store_all, periodic, revolve, rotor,
// rotor_floating (its DP is O(N^6 S): only on chains up to `floating_max_stages` stages), and the
// offloading ones, pofo, offload_dynprog, offload_greedy, offload_autocapper, at `bandwidth`
// (0 leaves them out). The graph planners (checkmate, rockmate) are not swept: they need a MILP
// backend (an opt-in header and library) and take seconds to minutes per budget, where the whole
// sweep of the chain policies takes a second or two on the example chains (12 budgets); plan them
// with remat-plan at the budgets of interest.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/offload.hpp>
#include <remat/policy/periodic.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/rotor_floating.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>
#include <remat/sweep_result.hpp>
#include <string>
#include <vector>

namespace remat {

namespace detail {
/// One policy at every budget: planned, replayed by the simulator on its machine.
template <ChainPolicy P>
void sweep_policy(const chain& c, const P& policy, sweep_result& out) {
  out.policies.emplace_back(P::name);
  for (const bytes budget : out.budgets) {
    sweep_point pt;
    pt.policy = P::name;
    pt.budget = budget;
    auto s = policy.solve(c, budget);
    if (!s) {
      pt.code = s.code();
      pt.message = s.message();
    } else {
      const auto r = sim::simulate(
          c, *s, {.budget = budget, .record_timeline = false, .hw = machine_of(policy)});
      if (!r.valid) {
        // finish() replays every plan before returning it: a rejected plan is a bug in remat.
        pt.code = status::solver_error;
        pt.message = std::string(P::name) +
                     " returned a plan the simulator rejects (a bug in remat): " +
                     (r.first_violation ? r.first_violation->message : std::string("?"));
      } else {
        pt.peak = r.peak;
        pt.makespan = r.makespan;
        pt.overhead = out.store_all_time > 0 ? r.makespan / out.store_all_time - 1.0 : 0.0;
      }
    }
    out.points.push_back(std::move(pt));
  }
}
}  // namespace detail

/// Plans c with every chain policy (header comment) at opt.budgets budgets and simulates each plan.
/// Fails (invalid_problem) on an invalid chain or options, never for a budget a policy cannot plan.
inline result<sweep_result> sweep(const chain& c, const sweep_options& opt = {}) {
  if (auto v = validate(c); !v) return v.err();
  auto bad = [](const std::string& why) {
    return error{status::invalid_problem, "remat::sweep: " + why, {}};
  };
  if (opt.budgets < 2)
    return bad("budgets is " + std::to_string(opt.budgets) + "; a curve needs at least 2");
  if (!(opt.bandwidth >= 0))
    return bad("bandwidth must be >= 0 bytes per second (0: no offloading policies)");
  if (opt.lowest < 0 || opt.highest < 0)
    return bad("lowest and highest are budgets in bytes, >= 0 (0: automatic)");

  sweep_result out;
  out.problem = c.name;
  out.bandwidth = opt.bandwidth;
  const auto all = lower(c.length(), store_all::program(c));
  const auto base = sim::simulate(c, *all, {.record_timeline = false});
  out.store_all_time = base.makespan;
  out.store_all_peak = base.peak;

  const bool offloading = opt.bandwidth > 0;
  const pofo off{.bandwidth = opt.bandwidth, .time_limit = opt.time_limit};
  bytes minimum = rotor::minimum_budget(c);
  if (offloading) minimum = std::min(minimum, off.minimum_budget(c));
  const bytes hi = opt.highest > 0 ? opt.highest : out.store_all_peak;
  const bytes lo = opt.lowest > 0 ? opt.lowest : minimum / 10 * 9;
  if (lo >= hi)
    return bad("the lowest budget (" + format_bytes(lo) + ") must be below the highest (" +
               format_bytes(hi) + ")");
  const auto n = static_cast<bytes>(opt.budgets);
  // lo + (hi - lo) * i / (n - 1), exactly and without overflow.
  const bytes step = (hi - lo) / (n - 1), rest = (hi - lo) % (n - 1);
  for (bytes i = 0; i < n; ++i) out.budgets.push_back(lo + step * i + rest * i / (n - 1));
  out.budgets.erase(std::unique(out.budgets.begin(), out.budgets.end()), out.budgets.end());

  const seconds t = opt.time_limit;
  detail::sweep_policy(c, store_all{}, out);
  detail::sweep_policy(c, periodic{.time_limit = t}, out);
  detail::sweep_policy(c, revolve{.time_limit = t}, out);
  detail::sweep_policy(c, rotor{.time_limit = t}, out);
  if (c.length() <= opt.floating_max_stages)
    detail::sweep_policy(c, rotor_floating{.time_limit = t}, out);
  else
    out.notes.push_back("rotor_floating left out: its DP is O(N^6 S) and the chain has " +
                        std::to_string(c.length()) + " stages (floating_max_stages = " +
                        std::to_string(opt.floating_max_stages) + ")");
  if (offloading) {
    detail::sweep_policy(c, off, out);
    detail::sweep_policy(c, offload_dynprog{.bandwidth = opt.bandwidth, .time_limit = t}, out);
    detail::sweep_policy(c, offload_greedy{.bandwidth = opt.bandwidth}, out);
    detail::sweep_policy(c, offload_autocapper{.bandwidth = opt.bandwidth, .time_limit = t}, out);
  } else {
    out.notes.push_back("the offloading policies left out: no bandwidth (0)");
  }
  return out;
}

}  // namespace remat
