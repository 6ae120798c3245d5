// The user's own macros of lp_solve's names, defined before <remat/milp/lpsolve.hpp>, come out of
// it as they went in (test_lpsolve_macros.cpp has the case where none is defined): object-like
// and function-like, names lp_solve defines unconditionally (TRUE, LE) and names it defines only
// where undefined (REAL, MYBOOL, INLINE), which must not reach lp_lib.h either: lp_solve is built
// with REAL double, and the backend compiles and solves here.
// clang-format off
#include <climits>  // as lpsolve_macro_state.hpp asks
#include <cstddef>
#include <type_traits>
#define TRUE true
#define LE 42
#define OPTIMAL "the user's"
#define NORMAL
#define MAX(a, b) ((a) < (b) ? (b) : (a))
#define my_if user_if
#define REAL float
#define MYBOOL int
#define INLINE static
#define LINEARSEARCH 7
#define REMAT_TEST_MACRO_STATE macros_before
#include "milp/lpsolve_macro_state.hpp"
#undef REMAT_TEST_MACRO_STATE
#include <remat/milp/lpsolve.hpp>
#define REMAT_TEST_MACRO_STATE macros_after
#include "milp/lpsolve_macro_state.hpp"
#undef REMAT_TEST_MACRO_STATE
#include <remat/remat.hpp>
#include <doctest/doctest.h>
// clang-format on

#if defined(GE) || defined(FALSE) || defined(INFEASIBLE) || defined(my_sign)
#error "remat/milp/lpsolve.hpp leaked an lp_solve macro"
#endif

static_assert(TRUE == true && LE == 42 && MAX(2, 3) == 3 && LINEARSEARCH == 7);
static_assert(std::is_same_v<REAL, float> && std::is_same_v<MYBOOL, int>);
static_assert(std::string_view(OPTIMAL) == "the user's");

namespace {
int user_if = 5;
INLINE int user_function(int v NORMAL) { return v + my_if; }
}  // namespace

TEST_CASE("milp::lpsolve: the user's macros of lp_solve's names survive the header") {
  for (std::size_t i = 0; i < std::size(macros_before); ++i)
    CHECK_MESSAGE(macros_after[i].second == macros_before[i].second, macros_before[i].first);
  CHECK(user_function(1) == 6);
  remat::milp::model m;  // lp_lib.h saw lp_solve's REAL and MYBOOL, not these: the backend works
  const auto x = m.add_continuous(0, 2.5), y = m.add_binary();
  m.add(x + y <= 3);
  m.maximize(x + 2 * y);
  const auto s = remat::milp::lpsolve{}.solve(m);
  REQUIRE(s.ok());
  CHECK(s->objective == doctest::Approx(4));
}
