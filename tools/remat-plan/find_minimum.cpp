// remat-plan --find-minimum without --budget: the smallest budget the policy plans the problem
// with. A policy that knows it (minimum_budget) says it; any other is asked for a plan at a
// budget of 0 bytes and reports its minimum in the refusal (budget_too_small), checkmate with
// its find_minimum bisection. Either way the policy then plans at that budget, so the answer is
// a budget at which a plan was seen, and the plan's makespan and peak are printed with it.

#include <cstdio>
#include <iostream>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include <remat/sim/simulate.hpp>

#include "policies.hpp"
#include "remat_plan.hpp"

namespace remat_plan {

namespace {

template <class P>
int minimum_with(const options& o, const loaded_problem& lp) {
  const remat::chain* c = lp.chain ? &*lp.chain : nullptr;
  const remat::graph& g = *lp.graph;
  P p = configured<P>(o);
  if constexpr (requires { p.find_minimum = true; }) p.find_minimum = true;
  auto minimum_on = [&](const auto& problem) -> remat::result<remat::bytes> {
    if constexpr (remat::HasMinimumBudget<P, std::remove_cvref_t<decltype(problem)>>) {
      return p.minimum_budget(problem);
    } else {
      auto r = p.solve(problem, 0);
      if (r) return remat::bytes{0};
      if (r.code() == remat::status::budget_too_small && r.err().minimum_budget)
        return *r.err().minimum_budget;
      return r.err();
    }
  };
  auto report = [&](const auto& problem, bool on_chain) -> int {
    const auto minimum = minimum_on(problem);
    if (!minimum) return fail(o, c, minimum.err());
    // A plan at the minimum: the answer is a budget that plans.
    auto plan = p.solve(problem, *minimum);
    if (!plan)
      return fail(o, c,
                  remat::error{remat::status::solver_error,
                               o.policy + " gave " + std::to_string(*minimum) +
                                   " bytes as its minimum but does not plan with it (a bug in "
                                   "remat; please report it with the problem): " +
                                   plan.message(),
                               {}});
    const remat::sim::report r = remat::sim::simulate(
        g, *plan, {.budget = *minimum, .record_timeline = false, .hw = remat::machine_of(p)});
    const remat::schedule all{remat::store_all_program(g), g.ideal_time(), 0};
    const remat::bytes store_all_peak =
        remat::sim::simulate(g, all, {.record_timeline = false}).peak;
    if (o.json) {
      nlohmann::ordered_json j;
      j["status"] = "ok";
      j["policy"] = o.policy;
      if (c) j["chain"] = c->name;
      if (!on_chain) j["graph"] = g.name;
      j["minimum_budget_bytes"] = *minimum;
      j["store_all_peak_bytes"] = store_all_peak;
      j["makespan"] = r.makespan;
      j["peak_bytes"] = r.peak;
      j["store_all_time"] = g.ideal_time();
      print_json_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return exit_ok;
    }
    if (c)
      std::cout << "chain     " << c->name << " (" << c->length() << " stages)"
                << (on_chain ? "" : ", planned as its training graph") << '\n';
    else
      std::cout << "graph     " << g.name << " (" << g.compute_count() << " compute nodes, "
                << g.data_count() << " data nodes)\n";
    char share[32];
    std::snprintf(share, sizeof share, "%.1f%%",
                  100.0 * static_cast<double>(*minimum) / static_cast<double>(store_all_peak));
    std::cout << "policy    " << o.policy << '\n'
              << "minimum   " << remat::format_bytes(*minimum) << ": the smallest budget "
              << o.policy << " plans with (" << share << " of store-all's "
              << remat::format_size(store_all_peak) << ")\n"
              << "there     makespan " << remat::format_seconds(r.makespan) << ", "
              << format_overhead(r.makespan, g.ideal_time()) << " over store-all, peak "
              << remat::format_bytes(r.peak) << '\n';
    return exit_ok;
  };
  if constexpr (remat::Policy<P, remat::chain>) {
    if (c) return report(*c, true);
  }
  if constexpr (remat::Policy<P, remat::graph>) {
    return report(g, false);
  } else {
    return fail(o, c,
                remat::error{remat::status::invalid_problem,
                             o.policy + " plans chains only; for --graph use a graph policy",
                             {}});
  }
}

}  // namespace

int run_find_minimum(const options& o) {
  const loaded_problem lp = load_problem(o);
  if (!lp.graph) return fail(o, lp.chain ? &*lp.chain : nullptr, lp.graph.err());
  int code = exit_failed;
  if (!with_policy(o, !lp.chain,
                   [&]<class P>(std::type_identity<P>) { code = minimum_with<P>(o, lp); }))
    return fail(o, nullptr,
                remat::error{remat::status::invalid_problem,
                             "the policy '" + o.policy + "' is not in this build",
                             {}});
  return code;
}

}  // namespace remat_plan
