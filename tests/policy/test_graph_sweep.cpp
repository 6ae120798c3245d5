// Every graph policy of the catalogue, as a user gets it, swept over budgets from its minimum to
// the store-all peak on the shipped graphs (examples/graphs) and on random DAGs: every plan is
// valid and within its budget, a larger budget never gives a slower plan, and the same input gives
// the same plan. checkmate is exact, so it is monotone wherever it proves its plans optimal (every
// plan here, on the graphs small enough for the exact MILP); rockmate by construction (its block
// and whole-graph budget grids do not depend on the asked budget), up to RK-Rotor's gap tolerance;
// dtr, the runtime's evictions replayed, does not promise it.
#include <doctest/doctest.h>

#if defined(REMAT_HAS_CBC) && defined(REMAT_EXAMPLES_DIR)

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <remat/io/graph_json.hpp>
#include <remat/milp/cbc.hpp>
#include <remat/policy/graph_catalogue.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>

#include "support/random_dag.hpp"

using namespace remat;

namespace {

graph shipped(const std::string& file) {
  const auto f = io::load_forward_dag(std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs" / file);
  REQUIRE_MESSAGE(f.ok(), f.message());
  auto g = build_graph(*f);
  REQUIRE_MESSAGE(g.ok(), g.message());
  return std::move(*g);
}

/// The policy as the catalogue makes it, bounded in time so that a regression fails instead of
/// hanging (no solve here comes near the bound); checkmate told to find its exact minimum, where
/// the sweep starts. `one_block`: the graphs may have no cut point, which rockmate hands whole to
/// its inner policy (checkmate), so that one too finds its minimum.
template <class P>
P as_shipped(bool one_block) {
  P p{};
  if constexpr (requires { p.time_limit; }) p.time_limit = 120;
  if constexpr (requires { p.find_minimum; }) p.find_minimum = true;
  if constexpr (requires { p.inner.find_minimum; }) p.inner.find_minimum = one_block;
  return p;
}

/// The relative slack of P's monotonicity: RK-Rotor's gap tolerance for rockmate, none else.
template <class P>
double slack_of(const P& p) {
  if constexpr (requires { p.tolerance; })
    return p.tolerance;
  else
    return 0;
}

/// Whether P promises that a larger budget never gives a slower plan (all but dtr, which replays
/// what a runtime would do: docs/dtr.md).
template <class P>
constexpr bool monotone() {
  if constexpr (requires { P::monotone_in_budget; })
    return P::monotone_in_budget;
  else
    return true;
}

/// Sweeps P over `points` budgets from its minimum to the store-all peak of g; returns the number
/// of budgets it planned.
template <class P>
int sweep_graph(const P& p, const graph& g, int points) {
  const bytes top = peak_of_store_all(g);
  const auto below = p.solve(g, 0);
  REQUIRE_FALSE(below.ok());
  REQUIRE(below.code() == status::budget_too_small);
  REQUIRE(below.err().minimum_budget);
  const bytes least = std::min(*below.err().minimum_budget, top);
  double previous = 0;  // the makespan at the previous (smaller) budget
  int planned = 0;
  for (int i = 0; i < points; ++i) {
    const bytes budget = least + (top - least) * i / (points - 1);
    CAPTURE(budget);
    const auto plan = p.solve(g, budget);
    REQUIRE_MESSAGE(plan.ok(), plan.message());  // every budget from the minimum up plans
    const auto sim = sim::simulate(g, *plan, {.hw = machine_of(p)});
    REQUIRE(sim.valid);
    CHECK(sim.peak <= budget);
    CHECK(sim.peak == plan->predicted_peak);
    if (i > 0 && monotone<P>())
      CHECK_MESSAGE(plan->predicted_time <= previous * (1 + slack_of(p) + 1e-12),
                    "a larger budget gave a slower plan: ", plan->predicted_time, " after ",
                    previous);
    previous = plan->predicted_time;
    ++planned;
    if (i == points / 2) {  // the same input, the same plan
      const auto again = p.solve(g, budget);
      REQUIRE(again.ok());
      CHECK(*again == *plan);
    }
  }
  return planned;
}

}  // namespace

TEST_CASE(
    "every graph policy on the shipped graphs and random DAGs: valid plans within the budget "
    "that never get slower with more memory and are the same on every run") {
  using policies = graph_policies<milp::cbc>;
  // The exact MILP on the graphs it proves quickly; rockmate also on the GPT-2 graph of 4 layers.
  const std::vector<std::string> small = {"attention_block.json", "residual_net.json"};
  for_each_policy<policies>([&]<class P>(std::type_identity<P>) {
    CAPTURE(std::string(P::name));
    std::vector<std::string> files = small;
    if constexpr (requires(P p) { p.inner; }) files.push_back("gpt2_4layer.json");
    for (const std::string& file : files) {
      CAPTURE(file);
      sweep_graph(as_shipped<P>(false), shipped(file), 6);
    }
    std::mt19937 rng(2024);
    for (int k = 0; k < 8; ++k) {
      const graph g = test::random_dag(rng, 5 + k % 4, k);
      CAPTURE(g.name);
      sweep_graph(as_shipped<P>(true), g, 5);
    }
  });
}

#endif
