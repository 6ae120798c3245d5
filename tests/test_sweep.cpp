// remat::sweep (<remat/sweep.hpp>): every chain policy of the catalogue at the same budgets, each
// point the simulator's replay of the policy's plan on its machine; what it leaves out, and its
// options.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <remat/remat.hpp>
#include <remat/sweep.hpp>

#include "support/io_checks.hpp"
#include "support/random_chain.hpp"
#include "support/small_chain.hpp"

using namespace remat;
using remat::testing::small_chain;

namespace {

/// Policy p's points of the sweep are its plans at each budget, replayed on its machine.
template <class P>
void check_policy_points(const chain& c, const sweep_result& sw, const P& p) {
  std::size_t k = 0;
  while (k < sw.policies.size() && sw.policies[k] != P::name) ++k;
  REQUIRE_MESSAGE(k < sw.policies.size(), P::name << " was not swept");
  for (std::size_t b = 0; b < sw.budgets.size(); ++b) {
    const sweep_point& pt = sw.at(k, b);
    CAPTURE(P::name);
    CAPTURE(pt.budget);
    CHECK(pt.policy == P::name);
    CHECK(pt.budget == sw.budgets[b]);
    auto s = p.solve(c, pt.budget);
    REQUIRE(s.code() == pt.code);
    if (!s) {
      CHECK(pt.message == s.message());
      continue;
    }
    const auto r =
        sim::simulate(c, *s, {.budget = pt.budget, .record_timeline = false, .hw = machine_of(p)});
    CHECK(r.valid);
    CHECK(pt.peak == r.peak);
    CHECK(pt.peak <= pt.budget);
    CHECK(pt.makespan == r.makespan);
    CHECK(pt.overhead == r.makespan / sw.store_all_time - 1.0);
  }
}

}  // namespace

TEST_CASE("sweep: every point is the simulator's replay of the policy's plan at that budget") {
  chain c = small_chain(7);
  c.stages[2].control_flow = true;  // so that mixed_mode is swept too
  const machine hw = machine::with_bandwidth(1e6);
  const auto sw = sweep(c, {.budgets = 6, .hw = hw});
  REQUIRE(sw.ok());
  CHECK(sw->problem == c.name);
  REQUIRE(sw->budgets.size() == 6);
  CHECK(sw->budgets.back() == sw->store_all_peak);
  CHECK(sw->budgets.front() <
        std::min(rotor{}.minimum_budget(c), pofo{.hw = hw}.minimum_budget(c)));
  for (std::size_t b = 1; b < sw->budgets.size(); ++b) CHECK(sw->budgets[b] > sw->budgets[b - 1]);
  CHECK(sw->points.size() == sw->policies.size() * sw->budgets.size());
  const auto base = sim::simulate(c, *lower(c.length(), store_all::program(c)));
  CHECK(sw->store_all_time == base.makespan);
  CHECK(sw->store_all_peak == base.peak);
  // The lowest budget is below every minimum: nothing plans; store-all plans at its own peak.
  for (std::size_t k = 0; k < sw->policies.size(); ++k) CHECK_FALSE(sw->at(k, 0).ok());
  CHECK(sw->at(0, sw->budgets.size() - 1).ok());
  // Every policy of the catalogue, in its order, each on the sweep's machine.
  CHECK(sw->policies ==
        std::vector<std::string>(chain_policies::names.begin(), chain_policies::names.end()));
  for_each_policy<chain_policies>([&]<class P>(std::type_identity<P>) {
    P p{};
    if constexpr (PlansTransfers<P>) p.hw = hw;
    check_policy_points(c, *sw, p);
  });
}

TEST_CASE("sweep: options, and what it leaves out") {
  const chain c = small_chain(8);
  const auto none =
      sweep(c, {.budgets = 3, .hw = machine::without_transfers(), .practical_stages = 2});
  REQUIRE(none.ok());
  CHECK(none->policies == std::vector<std::string>{"store_all", "periodic", "revolve", "rotor"});
  CHECK(none->notes.size() == 3);  // rotor_floating, mixed_mode, the offloading policies
  const auto range = sweep(c, {.budgets = 2, .lowest = 1000, .highest = 5000});
  REQUIRE(range.ok());
  CHECK(range->budgets == std::vector<bytes>{1000, 5000});
  CHECK(remat::testing::says(sweep(c, {.budgets = 1}), {"budgets is 1", "at least 2"}));
  CHECK(remat::testing::says(sweep(c, {.lowest = 10, .highest = 5}), {"must be below"}));
  CHECK(remat::testing::says(sweep(c, {.hw = machine{-1, 1, 0}}), {"hw:", "device-to-host"}));
  chain broken = c;
  broken.stages[0].forward_time = -1;
  CHECK(sweep(broken).code() == status::invalid_problem);
}

TEST_CASE(
    "sweep: a larger budget never gives a slower plan (rotor, rotor_floating: by at most their "
    "tolerance; the offloading policies: by at most 1 %)") {
  // Exact or family-based policies are monotone: what fits a budget fits a larger one. The
  // discretised DPs round sizes to slots of the budget, so two budgets round differently; the
  // gap to the exact optimum is bounded by their tolerance, and so is any step back.
  testing::chain_generator g(4242);
  for (int trial = 0; trial < 12; ++trial) {
    const chain c = g({.min_length = 3, .max_length = 9});
    CAPTURE(trial);
    const auto sw = sweep(c, {.budgets = 14, .hw = machine::with_bandwidth(1e7)});
    REQUIRE(sw.ok());
    for (std::size_t k = 0; k < sw->policies.size(); ++k) {
      const std::string& name = sw->policies[k];
      CAPTURE(name);
      // Those that do not promise it (mixed_mode: its dynamic segments are DTR's evictions).
      bool monotone = true;
      with_policy<chain_policies>(name, [&]<class P>(std::type_identity<P>) {
        if constexpr (requires { P::monotone_in_budget; }) monotone = P::monotone_in_budget;
      });
      if (!monotone) continue;
      double slack = 1e-12;
      if (name == rotor::name || name == rotor_floating::name)
        slack += rotor{}.tolerance;
      else if (name != store_all::name && name != periodic::name && name != revolve::name)
        slack += 0.01;  // the offloading policies: measured, not proven (docs/offloading.md)
      double best = std::numeric_limits<double>::infinity();
      for (std::size_t b = 0; b < sw->budgets.size(); ++b) {
        const sweep_point& p = sw->at(k, b);
        if (!p.ok()) continue;
        CAPTURE(p.budget);
        CHECK(p.makespan <= best * (1 + slack));
        best = std::min(best, p.makespan);
      }
    }
  }
}
