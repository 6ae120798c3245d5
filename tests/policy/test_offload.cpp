// The offloading policies (policy/offload.hpp) against the exhaustive oracle of pofo's model
// (support/offload_brute_force.hpp, written apart from the DP), against rotor, and on bad input.
// Exactness is checked where the DP does not round: exact sizes (slots = 0), integer sizes,
// times and bandwidths, so that every computed Δ is an integer.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/offload.hpp>
#include <remat/policy/rotor.hpp>

#include "support/offload_brute_force.hpp"
#include "support/random_chain.hpp"

using namespace remat;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

chain small_chain(remat::testing::chain_generator& g, int n) {
  return remat::testing::small_integer_chain(g, n);
}

bytes store_all_peak(const chain& c) {
  return detail::peak_of(detail::chain_graph(c), store_all::program(c));
}

/// The compute ops of a plan (the oracle's schedules carry no transfers).
test::offload_schedule decisions_of(const offload_plan& p) {
  test::offload_schedule s;
  for (const chain_op& op : p.details.ops)
    if (op.is_compute()) s.ops.push_back(op);
  s.offloaded = p.details.offloaded;
  return s;
}

bool offload_close(double x, double y) {
  return std::abs(x - y) <= 1e-9 * std::max(1.0, std::abs(y));
}

}  // namespace

TEST_CASE("pofo: exact on small chains against exhaustive search in its model") {
  remat::testing::chain_generator g(20261124);
  int compared = 0, offloading = 0, below_rotor = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const chain c = small_chain(g, g.between(1, 5));
    const double beta = static_cast<double>(g.between(1, 3));
    const bytes peak = store_all_peak(c);
    const bytes rotor_min = rotor{}.minimum_budget(c);
    for (bytes m = 0; m <= peak + 1; ++m) {
      const auto best = test::offload_brute_force(c, m, beta, beta, true);
      const auto plan =
          pofo{.hw = machine::with_bandwidth(beta), .slots = 0, .portfolio = false}.solve_detailed(
              c, m);
      CAPTURE(trial);
      CAPTURE(m);
      CAPTURE(beta);
      if (!best.feasible()) {
        REQUIRE_FALSE(plan.ok());
        CHECK(plan.code() == status::budget_too_small);
        continue;
      }
      REQUIRE_MESSAGE(plan.ok(), plan.message());
      ++compared;
      CHECK(offload_close(plan->details.model_time, best.time));
      // The DP's own schedule has its claimed time in the model.
      CHECK(offload_close(test::fluid_time(c, decisions_of(*plan), m, beta, beta),
                          plan->details.model_time));
      CHECK(plan->program.predicted_peak <= m);
      if (!plan->details.offloaded.empty()) ++offloading;
      if (m < rotor_min) ++below_rotor;
    }
  }
  CHECK(compared > 500);
  CHECK(offloading > 100);
  CHECK(below_rotor > 20);
}

TEST_CASE("offload_dynprog is exact without recomputation; greedy and OFF_frac bracket it") {
  remat::testing::chain_generator g(7);
  int compared = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const chain c = small_chain(g, g.between(1, 6));
    const double beta = static_cast<double>(g.between(1, 3));
    const bytes peak = store_all_peak(c);
    for (bytes m = 0; m <= peak + 1; ++m) {
      CAPTURE(trial);
      CAPTURE(m);
      const auto best = test::offload_brute_force(c, m, beta, beta, false);
      const auto dyn =
          offload_dynprog{.hw = machine::with_bandwidth(beta), .slots = 0}.solve_detailed(c, m);
      const auto greedy = offload_greedy{.hw = machine::with_bandwidth(beta)}.solve_detailed(c, m);
      const auto frac = offload_fractional_bound(c, m, machine::with_bandwidth(beta));
      REQUIRE(frac.ok());
      if (!best.feasible()) {
        CHECK_FALSE(dyn.ok());
        CHECK_FALSE(greedy.ok());
        continue;
      }
      REQUIRE_MESSAGE(dyn.ok(), dyn.message());
      ++compared;
      CHECK(offload_close(dyn->details.model_time, best.time));
      CHECK(offload_close(test::fluid_time(c, decisions_of(*dyn), m, beta, beta),
                          dyn->details.model_time));
      // OFF_frac bounds every plan without recomputation.
      CHECK(*frac <= best.time + 1e-9);
      if (greedy.ok()) {
        CHECK(greedy->details.model_time >= best.time - 1e-9);
        CHECK(offload_close(test::fluid_time(c, decisions_of(*greedy), m, beta, beta),
                            greedy->details.model_time));
      }
    }
  }
  CHECK(compared > 300);
}

TEST_CASE("pofo with bandwidth 0 is rotor") {
  remat::testing::chain_generator g(11);
  for (int trial = 0; trial < 60; ++trial) {
    const chain c = g({.min_length = 1, .max_length = 14});
    const bytes lo = rotor{}.minimum_budget(c), peak = store_all_peak(c);
    for (int i = 0; i <= 6; ++i) {
      const bytes m = lo + (peak - lo) * i / 6;
      for (std::int64_t slots : {50, 200}) {
        const auto r = rotor{.slots = slots}.solve(c, m);
        const auto p = pofo{.hw = machine::with_bandwidth(0), .slots = slots}.solve_detailed(c, m);
        CAPTURE(trial);
        CAPTURE(m);
        REQUIRE_EQ(r.ok(), p.ok());
        if (!r.ok()) continue;
        CHECK(p->details.offloaded.empty());
        CHECK(offload_close(p->program.predicted_time, r->predicted_time));
      }
    }
    // Below rotor's minimum nothing fits without transfers.
    if (lo > 0)
      CHECK(pofo{.hw = machine::with_bandwidth(0)}.solve_detailed(c, lo - 1).code() ==
            status::budget_too_small);
  }
}

TEST_CASE(
    "pofo with infinite bandwidth runs at the ideal time down to the memory of offloading alone") {
  remat::testing::chain_generator g(3);
  for (int trial = 0; trial < 80; ++trial) {
    const chain c = small_chain(g, g.between(1, 6));
    const bytes floor =
        detail::pofo_minimum_budget(c, machine::with_bandwidth(inf), detail::recomputation::none);
    for (bytes m = floor; m <= floor + 3; ++m) {
      const auto p = pofo{.hw = machine::with_bandwidth(inf), .slots = 0}.solve_detailed(c, m);
      REQUIRE_MESSAGE(p.ok(), p.message());
      CHECK(offload_close(p->details.model_time, c.ideal_time()));
      CHECK(offload_close(p->program.predicted_time, c.ideal_time()));
    }
    CHECK(pofo{.hw = machine::with_bandwidth(inf)}.minimum_budget(c) <= floor);
  }
}

TEST_CASE("pofo: never slower than rotor at the same slots") {
  remat::testing::chain_generator g(5);
  for (int trial = 0; trial < 30; ++trial) {
    const chain c = g({.min_length = 2, .max_length = 16});
    const bytes lo = rotor{}.minimum_budget(c), peak = store_all_peak(c);
    // From a tenth above rotor's minimum, where neither refines its slots (near the minimum
    // rotor refines to finer slots, and the comparison is no longer at the same slots).
    for (int i = 1; i <= 8; ++i) {
      const bytes m = lo + lo / 10 + (peak - lo - lo / 10) * i / 8;
      if (m < lo + lo / 10) continue;
      // An infinite tolerance: rotor at 50 slots too, not refined towards the exact optimum.
      const auto r =
          rotor{.slots = 50, .tolerance = std::numeric_limits<double>::infinity()}.solve(c, m);
      const double bw = 1e6 * (1 + trial % 3);
      const auto p =
          pofo{.hw = machine::with_bandwidth(bw), .portfolio = false}.solve_detailed(c, m);
      const auto best = pofo{.hw = machine::with_bandwidth(bw)}.solve_detailed(c, m);
      CAPTURE(trial);
      CAPTURE(m);
      REQUIRE_MESSAGE(p.ok(), p.message());
      if (r.ok()) CHECK(p->details.model_time <= r->predicted_time * (1 + 1e-12));
      // The portfolio returns the fastest program of the DP's, rotor's, DYNPROG's and autocapper's.
      REQUIRE(best.ok());
      const double got = best->program.predicted_time * (1 - 1e-12);  // sums in another order
      CHECK(got <= p->program.predicted_time);
      if (const auto r500 = rotor{}.solve(c, m)) CHECK(got <= r500->predicted_time);
      if (const auto a = offload_autocapper{.hw = machine::with_bandwidth(bw)}.solve_detailed(c, m))
        CHECK(got <= a->program.predicted_time);
      CHECK(p->details.model_time >= c.ideal_time() * (1 - 1e-12));
      CHECK(p->program.predicted_peak <= m);
      CHECK(p->details.overlap() >= 0.0);
      CHECK(p->details.overlap() <= 1.0);
    }
  }
}

TEST_CASE("offloading policies: bad input gets a clear error") {
  chain c{"bad", 4, {{"s1", 1, 1, 2, 3}, {"s2", 1, 1, 2, 2}, {"loss", 0, 0, 0, 0}}};
  for (double bw : {-1.0, std::nan("")}) {
    const auto p = pofo{.hw = machine::with_bandwidth(bw)}.solve_detailed(c, 100);
    CHECK(p.code() == status::invalid_problem);
    CHECK(p.message().find("bandwidth") != std::string::npos);
    CHECK(offload_dynprog{.hw = machine::with_bandwidth(bw)}.solve_detailed(c, 100).code() ==
          status::invalid_problem);
    CHECK(offload_greedy{.hw = machine::with_bandwidth(bw)}.solve_detailed(c, 100).code() ==
          status::invalid_problem);
    CHECK(offload_fractional_bound(c, 100, machine::with_bandwidth(bw)).code() ==
          status::invalid_problem);
  }
  const auto h2d =
      pofo{.hw = {.device_to_host = 12e9, .host_to_device = -3}}.solve_detailed(c, 100);
  CHECK(h2d.code() == status::invalid_problem);
  CHECK(h2d.message().find("host-to-device") != std::string::npos);
  // Below the minimum: budget_too_small with a minimum that works.
  const bytes lo = pofo{.hw = machine::with_bandwidth(10)}.minimum_budget(c);
  const auto small = pofo{.hw = machine::with_bandwidth(10), .slots = 0}.solve_detailed(c, lo - 1);
  REQUIRE(small.code() == status::budget_too_small);
  CHECK(small.message().find(std::to_string(lo)) != std::string::npos);
  CHECK(pofo{.hw = machine::with_bandwidth(10), .slots = 0}.solve_detailed(c, lo).ok());
  CHECK(pofo{}.solve_detailed(c, -1).code() == status::invalid_problem);
  chain negative = c;
  negative.stages[0].output_bytes = -2;
  CHECK(pofo{}.solve_detailed(negative, 100).code() == status::invalid_problem);
}

TEST_CASE("pofo: progress reaches 1 and the time limit holds") {
  remat::testing::chain_generator g(9);
  const chain c = g({.min_length = 60, .max_length = 60});
  const bytes lo = rotor{}.minimum_budget(c), peak = store_all_peak(c);
  std::vector<double> seen;
  const auto p = pofo{
      .hw = machine::with_bandwidth(1e6), .progress = [&](double f) {
        seen.push_back(f);
      }}.solve_detailed(c, (lo + peak) / 2);
  REQUIRE_MESSAGE(p.ok(), p.message());
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back() == 1.0);
  for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] >= seen[i - 1]);
  const auto cut =
      pofo{.hw = machine::with_bandwidth(1e6), .slots = 400, .time_limit = 0.05}.solve_detailed(
          c, (lo + peak) / 2);
  CHECK(cut.code() == status::time_limit);
}

TEST_CASE("offloading policies are chain policies that plan for their own machine") {
  static_assert(ChainPolicy<pofo>);
  static_assert(ChainPolicy<offload_dynprog>);
  static_assert(ChainPolicy<offload_greedy>);
  static_assert(ChainPolicy<offload_autocapper>);
  CHECK(machine_of(pofo{.hw = machine::with_bandwidth(5e9)}) == machine::with_bandwidth(5e9));
  CHECK(machine_of(pofo{.hw = {5e9, 7e9, unlimited_bytes}}) == machine{5e9, 7e9, unlimited_bytes});
  CHECK(machine_of(offload_greedy{.hw = machine::without_transfers()}) ==
        machine::with_bandwidth(0));
  CHECK(machine_of(offload_dynprog{}) == machine::with_bandwidth(12e9));
}

TEST_CASE("offload_autocapper: valid plans, the ideal time where everything fits, clear errors") {
  remat::testing::chain_generator g(21);
  int planned = 0, moved = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const chain c = g({.min_length = 2, .max_length = 12});
    const bytes lo = pofo{.hw = machine::with_bandwidth(1e6)}.minimum_budget(c),
                peak = store_all_peak(c);
    for (int i = 0; i <= 5; ++i) {
      const bytes m = lo + (peak - lo) * i / 5;
      const auto a =
          offload_autocapper{.hw = machine::with_bandwidth(1e6), .caps = 10}.solve_detailed(c, m);
      CAPTURE(trial);
      CAPTURE(m);
      if (!a) {
        // Capping moves only what rotor's plans keep across their peak: it may find nothing near
        // the minimum, and says so.
        CHECK((a.code() == status::infeasible || a.code() == status::budget_too_small));
        continue;
      }
      ++planned;
      if (!a->details.offloaded.empty()) ++moved;
      CHECK(a->program.predicted_peak <= m);
      CHECK(sim::simulate(c, a->program, {.budget = m, .hw = machine::with_bandwidth(1e6)}).valid);
      CHECK(sim::simulate(c, a->program, {.budget = m}).valid);  // immediate copies too
      if (m >= peak) CHECK(offload_close(a->program.predicted_time, c.ideal_time()));
    }
  }
  CHECK(planned > 150);
  CHECK(moved > 20);
  const chain c{"bad", 4, {{"s1", 1, 1, 2, 3}, {"s2", 1, 1, 2, 2}, {"loss", 0, 0, 0, 0}}};
  CHECK(offload_autocapper{.hw = machine::with_bandwidth(-1)}.solve_detailed(c, 100).code() ==
        status::invalid_problem);
  CHECK(offload_autocapper{.caps = 0}.solve_detailed(c, 100).code() == status::invalid_problem);
  CHECK(offload_autocapper{}.solve_detailed(c, 1).code() == status::budget_too_small);
}

TEST_CASE("pofo's DP without transfers is rotor's DP at the same slots, or better") {
  // pofo with bandwidth 0 calls rotor; this checks the DP itself at β = 0 (docs/offloading.md,
  // O5: pofo without offloading is C_MP), on the same discretisation. pofo's checkpoint segment
  // checks the F^none ops of its own run, where rotor's C2 (the thesis' m_∅) checks every stage
  // up to t: with F^all's own overhead below F^none's, pofo may plan where rotor does not, or
  // faster; its plan must then be valid.
  remat::testing::chain_generator g(13);
  int compared = 0, equal = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const chain c = g({.min_length = 1, .max_length = 14});
    const graph cg = detail::chain_graph(c);
    const bytes lo = rotor{}.minimum_budget(c), peak = store_all_peak(c);
    for (int i = 0; i <= 6; ++i) {
      const bytes m = lo + (peak - lo) * i / 6;
      for (std::int64_t slots : {50, 200}) {
        const detail::discrete_chain d = detail::discretize(c, m, slots);
        const detail::deadline none(0);
        detail::pofo_dp dp(d, detail::slot_rates{}, detail::recomputation::allowed, none);
        const double v = dp.solve();
        detail::rotor_dp r(d);
        REQUIRE(r.fill(none, {}));
        CAPTURE(trial);
        CAPTURE(m);
        CAPTURE(slots);
        ++compared;
        if (v == r.value() || offload_close(v, r.value())) {
          ++equal;
          continue;
        }
        CHECK(v < r.value());
        const auto plan =
            detail::realize("pofo", c, cg, m, machine::without_transfers(), dp.reconstruct());
        CHECK_MESSAGE(plan.ok(), plan.message());
      }
    }
  }
  CHECK(compared > 500);
  CHECK(equal >= compared * 95 / 100);
  MESSAGE("pofo's DP at bandwidth 0 against rotor's: ", equal, " equal of ", compared);
}
