// lp_solve and CBC on the same models: the same status and the same optimum. Both backends in one
// translation unit (CBC's headers first, then lp_solve's, whose macros end with its header).
#include <cmath>
#include <cstdint>

#include <doctest/doctest.h>

#include <remat/milp/cbc.hpp>
#include <remat/milp/lpsolve.hpp>

#include "milp/backend_suite.hpp"

namespace t = remat::milp::testing;
using remat::milp::cbc;
using remat::milp::lpsolve;
using remat::milp::model;

namespace {
void agree(const model& m, const char* what) {
  const auto a = lpsolve{}.solve(m);
  const auto b = cbc{}.solve(m);
  CAPTURE(what);
  CAPTURE(a.message());
  CAPTURE(b.message());
  REQUIRE(a.code() == b.code());
  if (!a.ok()) return;
  CHECK(a->is_optimal());
  CHECK(b->is_optimal());
  CHECK(a->objective == doctest::Approx(b->objective).epsilon(1e-9));
  t::check_consistent(m, *a);
  t::check_consistent(m, *b);
}
}  // namespace

TEST_CASE("milp: lp_solve and CBC agree on random small MILPs") {
  int feasible = 0;
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const model m = t::random_milp(seed);
    agree(m, "random_milp");
    agree(m.relax(), "its relaxation");
    feasible += lpsolve{}.solve(m).ok() ? 1 : 0;
  }
  CHECK(feasible >= 10);  // the family is not mostly infeasible
}

TEST_CASE("milp: lp_solve and CBC agree on knapsacks and set covers") {
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    agree(t::knapsack(30, seed), "knapsack");
    agree(t::knapsack(15, seed, true), "correlated knapsack");
    agree(t::set_cover(20, 15, 0.2, seed), "set cover");
  }
}
