// checkmate at real byte sizes, time limits and odd times: properties over random chains with
// sizes across 10^0-10^11 bytes. A chain's training graph holds every chain schedule,
// so on a chain the exact MILP must plan wherever rotor or store-all plans, never slower; a
// reported minimum must be a budget at which checkmate then plans; a time limit is kept.
#include <doctest/doctest.h>

#if defined(REMAT_HAS_LPSOLVE) || defined(REMAT_HAS_CBC)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <remat/policy/checkmate.hpp>
#include <remat/policy/periodic.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>

#include "support/random_chain.hpp"

#if defined(REMAT_HAS_LPSOLVE)
#include <remat/milp/lpsolve.hpp>
#endif
#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
#endif

using namespace remat;

namespace {

graph graph_of(const chain& c) {
  auto g = build_graph(c);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.err().message));
  return std::move(g.value());
}

bytes checkmate_store_all_peak(const graph& g) {
  schedule s{store_all_program(g), g.ideal_time(), 0};
  return sim::simulate(g, s).peak;
}

/// A reproducer: rotor and store_all plan at 1091786 bytes (the store-all peak);
/// checkmate said infeasible with memory in rounded-up units of 16 bytes.
chain reproducer() {
  chain c{"repro", 4, {}};
  c.stages = {{"s1", 0, 0, 542949, 542949, 15, 0}, {"loss", 1e-5, 1e-5, 5884, 5884, 0, 0}};
  return c;
}

template <class Backend>
void check_plans(const checkmate<Backend>& cm, const graph& g, bytes budget, double rival_time,
                 const std::string& what) {
  CAPTURE(what);
  CAPTURE(budget);
  const auto r = cm.solve_detailed(g, budget);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.err().message));
  const auto rep = sim::simulate(g, r.value().program, {.budget = budget});
  CHECK_MESSAGE(rep.valid, (rep.first_violation ? rep.first_violation->message : ""));
  CHECK(rep.peak <= budget);
  CHECK(r.value().optimal);
  CHECK(r.value().program.predicted_time <= rival_time * (1 + 1e-9) + 1e-12);
}

template <class Backend>
void real_size_properties(const char* backend_name, int chains) {
  CAPTURE(backend_name);
  testing::chain_generator gen(20261124);
  const checkmate<Backend> cm{};
  const rotor ro{};  // 500 slots: its plans are valid schedules, rounded up
  for (int n = 0; n < chains; ++n) {
    const int decades = n % 12;  // sizes up to 10^0 .. 10^11 bytes
    testing::chain_shape sh;
    sh.min_length = 2;
    sh.max_length = 4;
    sh.max_bytes = static_cast<bytes>(std::pow(10.0, decades));
    const chain c = gen(sh, "r" + std::to_string(n));
    CAPTURE(testing::describe(c));
    const graph g = graph_of(c);
    const bytes hi = checkmate_store_all_peak(g);
    // store-all's peak: store_all plans there, so must checkmate (at store-all's time).
    check_plans(cm, g, hi, g.ideal_time(), "store-all peak");
    // Midway between rotor's minimum and the store-all peak, and exactly at the peak of rotor's
    // plan there (a budget some chain schedule meets to the byte).
    const auto mn = ro.solve(c, 0);
    REQUIRE((mn.ok() || mn.code() == status::budget_too_small));
    const bytes lo = mn.ok() ? 0 : *mn.err().minimum_budget;
    if (lo > hi) continue;
    const bytes mid = lo + (hi - lo) / 2;
    const auto rp = ro.solve(c, mid);
    REQUIRE_MESSAGE(rp.ok(), (rp.ok() ? "" : rp.err().message));
    check_plans(cm, g, mid, rp.value().predicted_time, "midway, against rotor");
    // Every chain policy's plan at these budgets is within them (replayed in the simulator).
    for (const bytes b : {lo, mid, hi}) {
      CAPTURE(b);
      auto fits = [&](const result<schedule>& r) {
        if (!r) return;
        const auto rep = sim::simulate(c, r.value(), {.budget = b});
        CHECK(rep.valid);
        CHECK(rep.peak <= b);
      };
      fits(ro.solve(c, b));
      fits(periodic{}.solve(c, b));
      fits(revolve{}.solve(c, b));
      fits(store_all{}.solve(c, b));
    }
    check_plans(cm, g, rp.value().predicted_peak, rp.value().predicted_time,
                "at the peak of rotor's plan");
    // A reported minimum is a budget at which checkmate plans (checked below it too).
    checkmate<Backend> fm = cm;
    fm.find_minimum = true;
    const auto below = fm.solve(g, std::max<bytes>(0, checkmate<Backend>::lower_bound(g) - 1));
    REQUIRE_MESSAGE((below.ok() || below.code() == status::budget_too_small),
                    (below.ok() ? "" : below.err().message));
    const bytes minimum = below.ok() ? 0 : *below.err().minimum_budget;
    CHECK(minimum <= rp.value().predicted_peak);
    CHECK(cm.solve(g, minimum).ok());
    if (minimum > 0) {  // infeasible, or the minimum itself where checkmate's bounds meet
      const auto under = cm.solve(g, minimum - 1);
      CHECK((under.code() == status::infeasible || under.code() == status::budget_too_small));
      if (under.code() == status::budget_too_small) CHECK(under.err().minimum_budget == minimum);
    }
  }
}

/// A long chain with sizes of 10^5-10^9 bytes (a probe: CBC kept a 1 s limit for 9 s at
/// 40 stages, 48 s at 60, in its root LP).
chain checkmate_long_chain(int stages) {
  testing::chain_generator gen(static_cast<std::uint64_t>(stages));
  chain c{"long" + std::to_string(stages), 1000000, {}};
  for (int l = 1; l <= stages; ++l) {
    const bytes a = 100000 + static_cast<bytes>(gen.unit() * 1e9);
    c.stages.push_back({"s" + std::to_string(l), 1e-4 + gen.unit() * 1e-2, 2e-4 + gen.unit() * 2e-2,
                        a, a + static_cast<bytes>(gen.unit() * 1e8), 0, 0});
  }
  c.stages.back().output_bytes = 4;
  c.stages.back().saved_bytes = 4;
  return c;
}

template <class Backend>
void keeps_time_limit(const char* backend_name) {
  CAPTURE(backend_name);
  for (int stages : {40, 60}) {
    CAPTURE(stages);
    const graph g = graph_of(checkmate_long_chain(stages));
    checkmate<Backend> cm{};
    cm.time_limit = 0.5;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = cm.solve_detailed(g, checkmate_store_all_peak(g) / 2);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(took < 1.2);  // the limit plus the stated margin, with room for a loaded machine
    REQUIRE_MESSAGE((r.ok() || r.code() == status::time_limit), (r.ok() ? "" : r.err().message));
    if (r.ok()) {
      const auto rep =
          sim::simulate(g, r.value().program, {.budget = checkmate_store_all_peak(g) / 2});
      CHECK(rep.valid);
    }
  }
}

/// The same chain with every time multiplied by `f`.
chain scaled_times(chain c, double f) {
  for (auto& st : c.stages) {
    st.forward_time *= f;
    st.backward_time *= f;
  }
  return c;
}

template <class Backend>
void time_scale_invariant(const char* backend_name) {
  CAPTURE(backend_name);
  testing::chain_generator gen(7);
  testing::chain_shape sh;
  sh.min_length = 3;
  sh.max_length = 4;
  sh.max_bytes = 1 << 20;
  sh.p_zero_time = 0;
  for (int n = 0; n < 4; ++n) {
    const chain c = gen(sh);
    CAPTURE(testing::describe(c));
    const graph g1 = graph_of(c);
    checkmate<Backend> fm{};
    fm.find_minimum = true;
    const auto mn = fm.solve(g1, 0);
    const bytes lo = mn.ok() ? 0 : *mn.err().minimum_budget;
    const bytes budget = lo + (checkmate_store_all_peak(g1) - lo) / 3;
    const auto base = checkmate<Backend>{}.solve_detailed(g1, budget);
    REQUIRE_MESSAGE(base.ok(), (base.ok() ? "" : base.err().message));
    // 1e-12 s ops are below the solvers' absolute tolerances in seconds, 1e14 s ops above
    // every gap: the objective's unit makes both the same problem.
    for (double f : {1e-12, 1e14}) {
      CAPTURE(f);
      const graph g = graph_of(scaled_times(c, f));
      const auto r = checkmate<Backend>{}.solve_detailed(g, budget);
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.err().message));
      CHECK(r.value().optimal);
      CHECK(r.value().program.predicted_time / f ==
            doctest::Approx(base.value().program.predicted_time).epsilon(1e-9));
      CHECK(r.value().bound <= r.value().program.predicted_time * (1 + 1e-9));
    }
  }
}

}  // namespace

TEST_CASE("checkmate refuses at once a graph whose MILP would not fit in memory") {
#if defined(REMAT_HAS_CBC)
  using backend = milp::cbc;
#else
  using backend = milp::lpsolve;
#endif
  // A 500-stage chain's MILP (1001 compute nodes) ran out of memory after 72 s.
  const graph g = graph_of(checkmate_long_chain(500));
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = checkmate<backend>{}.solve(g, checkmate_store_all_peak(g) / 2);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.code() == status::invalid_problem);
  CHECK(r.err().message.find("max_variables") != std::string::npos);
  CHECK(took < 1.0);
}

#if defined(REMAT_HAS_CBC)
TEST_CASE("checkmate (cbc) keeps its time limit on long chains") {
  keeps_time_limit<milp::cbc>("cbc");
}
TEST_CASE("checkmate (cbc): the same plans with times scaled by 1e-12 and 1e14") {
  time_scale_invariant<milp::cbc>("cbc");
}
#endif
#if defined(REMAT_HAS_LPSOLVE)
TEST_CASE("checkmate (lpsolve) keeps its time limit on long chains") {
  keeps_time_limit<milp::lpsolve>("lpsolve");
}
TEST_CASE("checkmate (lpsolve): the same plans with times scaled by 1e-12 and 1e14") {
  time_scale_invariant<milp::lpsolve>("lpsolve");
}
#endif

#if defined(REMAT_HAS_CBC)
TEST_CASE("checkmate (cbc) at real sizes: plans wherever rotor or store-all does, never slower") {
  const graph g = graph_of(reproducer());
  CHECK(checkmate_store_all_peak(g) == 1091786);
  check_plans(checkmate<milp::cbc>{}, g, 1091786, g.ideal_time(), "the reproducer");
  real_size_properties<milp::cbc>("cbc", 48);
}
#endif

#if defined(REMAT_HAS_LPSOLVE)
TEST_CASE(
    "checkmate (lpsolve) at real sizes: plans wherever rotor or store-all does, never slower") {
  const graph g = graph_of(reproducer());
  check_plans(checkmate<milp::lpsolve>{}, g, 1091786, g.ideal_time(), "the reproducer");
  real_size_properties<milp::lpsolve>("lpsolve", 24);
}
#endif

#endif
