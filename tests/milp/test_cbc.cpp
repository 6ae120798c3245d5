// The CBC backend (include/remat/milp/cbc.hpp) on the shared backend checks.
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
TEST_CASE("milp::cbc: a throwing progress callback stops the solve") {
  t::throwing_progress_callback<cbc>();
}
TEST_CASE("milp::cbc: a warm start is accepted") { t::warm_start_is_used<cbc>(); }
