// The lp_solve backend (include/remat/milp/lpsolve.hpp) on the shared backend checks.
#include <doctest/doctest.h>

#include <remat/milp/lpsolve.hpp>

#include "milp/backend_suite.hpp"

using remat::milp::lpsolve;
namespace t = remat::milp::testing;

TEST_CASE("milp::lpsolve: available") { CHECK(lpsolve::available()); }
TEST_CASE("milp::lpsolve: knapsack with a known optimum") { t::knapsack_known_optimum<lpsolve>(); }
TEST_CASE("milp::lpsolve: an LP and an LP relaxation") { t::lp_and_relaxation<lpsolve>(); }
TEST_CASE("milp::lpsolve: infeasible models") { t::infeasible_models<lpsolve>(); }
TEST_CASE("milp::lpsolve: unbounded models") { t::unbounded_models<lpsolve>(); }
TEST_CASE("milp::lpsolve: equalities and general integers") {
  t::equalities_and_general_integers<lpsolve>();
}
TEST_CASE("milp::lpsolve: malformed models and options") {
  t::malformed_models_and_options<lpsolve>();
}
TEST_CASE("milp::lpsolve: tiny binary programs against enumeration") {
  t::exhaustive_tiny_binary<lpsolve>(40);
}
TEST_CASE("milp::lpsolve: time limit and progress on a hard instance") {
  t::time_limit_and_progress<lpsolve>();
}
TEST_CASE("milp::lpsolve: a relative gap is kept") { t::relative_gap_is_kept<lpsolve>(); }
TEST_CASE("milp::lpsolve: a node limit stops at the same point on every run") {
  t::node_limit_is_deterministic<lpsolve>();
}
TEST_CASE("milp::lpsolve: a throwing progress callback stops the solve") {
  t::throwing_progress_callback<lpsolve>();
}
TEST_CASE("milp::lpsolve: a warm start is a cutoff and a fallback") {
  t::warm_start_is_used<lpsolve>();
}
