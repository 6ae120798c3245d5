// The CBC backend (include/remat/milp/cbc.hpp) on the shared backend checks.
#include <chrono>

#include <doctest/doctest.h>

#include <remat/milp/cbc.hpp>

#include "milp/backend_suite.hpp"

using remat::milp::cbc;
namespace t = remat::milp::testing;

TEST_CASE("milp::cbc: available") { CHECK(cbc::available()); }
TEST_CASE("milp::cbc: knapsack with a known optimum") { t::knapsack_known_optimum<cbc>(); }
TEST_CASE("milp::cbc: an LP and an LP relaxation") { t::lp_and_relaxation<cbc>(); }
TEST_CASE("milp::cbc: infeasible models") { t::infeasible_models<cbc>(); }
TEST_CASE("milp::cbc: unbounded models") { t::unbounded_models<cbc>(); }
TEST_CASE("milp::cbc: equalities and general integers") {
  t::equalities_and_general_integers<cbc>();
}
TEST_CASE("milp::cbc: malformed models and options") { t::malformed_models_and_options<cbc>(); }
TEST_CASE("milp::cbc: tiny binary programs against enumeration") {
  t::exhaustive_tiny_binary<cbc>(40);
}
TEST_CASE("milp::cbc: time limit and progress on a hard instance") {
  t::time_limit_and_progress<cbc>();
}
TEST_CASE("milp::cbc: a relative gap is kept") { t::relative_gap_is_kept<cbc>(); }
TEST_CASE("milp::cbc: a node limit stops at the same point on every run") {
  t::node_limit_is_deterministic<cbc>();
}
TEST_CASE("milp::cbc: a throwing progress callback stops the solve") {
  t::throwing_progress_callback<cbc>();
}
TEST_CASE("milp::cbc: a warm start is accepted") { t::warm_start_is_used<cbc>(); }
TEST_CASE("milp::cbc: parameters reach CBC") {
  // A market split that branch and bound does not close for minutes: stopped after the root
  // ("-maxNodes 0"), CBC returns at once, without proof, well before the time limit.
  const auto hard = remat::milp::testing::market_split(4, 30, 5);
  cbc stopped;
  stopped.parameters = {"-maxNodes", "0"};
  const auto t0 = std::chrono::steady_clock::now();
  const auto s = stopped.solve(hard, {.time_limit = 20});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(took < 10);
  if (s.ok()) {
    CHECK_FALSE(s->is_optimal());
    t::check_consistent(hard, *s);
  } else {
    CHECK(s.code() == remat::status::time_limit);  // stopped before any solution
  }
  // Settings that change how, not what: the same optimum.
  const auto m = remat::milp::testing::knapsack(40, 3, true);
  const auto full = cbc{}.solve(m);
  REQUIRE_MESSAGE(full.ok(), full.message());
  cbc tuned;
  tuned.parameters = {"-cuts", "off", "-strongBranching", "10"};
  const auto r = tuned.solve(m);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(r->is_optimal());
  CHECK(r->objective == doctest::Approx(full->objective));
}
