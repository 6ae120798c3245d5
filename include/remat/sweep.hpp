#pragma once
// remat::sweep: the budget -> overhead curve of every chain policy of the catalogue
// (policy/catalogue.hpp) on one chain. Each policy plans the chain at the same budgets, evenly
// spaced from below the smallest budget rotor (or pofo, with transfers) plans with up to
// store-all's peak; every plan is replayed by the simulator on the machine the policy planned for
// (machine_of), and the point holds the simulator's peak and makespan, not the policy's claim. A
// budget a policy cannot plan gives a point with the policy's status and message, so the curve
// shows where each policy stops.
//
// A policy that plans transfers is swept on `hw`, and left out on a machine without a link; one
// that declares practical_stages (rotor_floating) only on chains up to that length; one that
// declares left_out_of_sweep(chain) (mixed_mode: chains without control flow) where it says. The
// graph
// planners (checkmate, rockmate) are not swept: they need a MILP backend and take seconds to
// minutes per budget; plan them with remat-plan at the budgets of interest.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/policy/catalogue.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>
#include <remat/sweep_result.hpp>

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

/// Policy P configured for a sweep: the sweep's machine and time limit.
template <class P>
P swept(const sweep_options& opt) {
  P p{};
  if constexpr (PlansTransfers<P>) p.hw = opt.hw;
  if constexpr (requires { p.time_limit = seconds{}; }) p.time_limit = opt.time_limit;
  return p;
}
}  // namespace detail

/// Plans c with every chain policy (header comment) at opt.budgets budgets and simulates each
/// plan. Fails (invalid_problem) on an invalid chain or options, never for a budget a policy
/// cannot plan.
inline result<sweep_result> sweep(const chain& c, const sweep_options& opt = {}) {
  if (auto v = validate(c); !v) return v.err();
  auto bad = [](const std::string& why) {
    return error{status::invalid_problem, "remat::sweep: " + why, {}};
  };
  if (opt.budgets < 2)
    return bad("budgets is " + std::to_string(opt.budgets) + "; a curve needs at least 2");
  if (auto why = machine_error(opt.hw)) return bad("hw: " + *why);
  if (opt.lowest < 0 || opt.highest < 0)
    return bad("lowest and highest are budgets in bytes, >= 0 (0: automatic)");

  sweep_result out;
  out.problem = c.name;
  out.hw = opt.hw;
  const auto all = lower(c.length(), store_all::program(c));
  const auto base = sim::simulate(c, *all, {.record_timeline = false});
  out.store_all_time = base.makespan;
  out.store_all_peak = base.peak;

  // rotor's minimum is the least of every persistent schedule (store_all, periodic, revolve's),
  // pofo's of every offloading plan's.
  const bool transfers = opt.hw.transfers();
  bytes minimum = rotor{}.minimum_budget(c);
  if (transfers) minimum = std::min(minimum, detail::swept<pofo>(opt).minimum_budget(c));
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

  bool transfer_planners_left_out = false;
  for_each_policy<chain_policies>([&]<class P>(std::type_identity<P>) {
    if constexpr (PlansTransfers<P>) {
      if (!transfers) {
        transfer_planners_left_out = true;
        return;
      }
    }
    if constexpr (requires { P::practical_stages; }) {
      const int limit = opt.practical_stages.value_or(P::practical_stages);
      if (c.length() > limit) {
        out.notes.push_back(std::string(P::name) + " left out: its DP is " +
                            std::string(P::complexity) + " and the chain has " +
                            std::to_string(c.length()) +
                            " stages (practical_stages = " + std::to_string(limit) + ")");
        return;
      }
    }
    if constexpr (requires { P::left_out_of_sweep(c); }) {
      if (const auto why = P::left_out_of_sweep(c)) {
        out.notes.push_back(std::string(P::name) + " left out: " + *why);
        return;
      }
    }
    detail::sweep_policy(c, detail::swept<P>(opt), out);
  });
  if (transfer_planners_left_out)
    out.notes.push_back("the offloading policies left out: no bandwidth (0)");
  return out;
}

}  // namespace remat
