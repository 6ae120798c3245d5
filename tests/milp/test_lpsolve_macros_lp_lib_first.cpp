// <lp_lib.h> included before <remat/milp/lpsolve.hpp>, for the user's own use of lp_solve: its
// macros come out of the header as they went in, and the backend still works (lpsolve.hpp's own
// #include <lp_lib.h> is then a no-op, and its code must not need the names it undefined).
// clang-format off
#include <climits>  // as lpsolve_macro_state.hpp asks
#include <cstddef>
#include <type_traits>
#include <lp_lib.h>
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

#if !defined(my_sign) || !defined(MSG_LPOPTIMAL)
#error "remat/milp/lpsolve.hpp took away a macro of an lp_lib.h included before it"
#endif
static_assert(TRUE == 1 && LE == 1 && OPTIMAL == 0);
static_assert(std::is_same_v<REAL, double> && std::is_same_v<MYBOOL, unsigned char>);

TEST_CASE("milp::lpsolve: lp_solve's macros stay when lp_lib.h comes first") {
  for (std::size_t i = 0; i < std::size(macros_before); ++i)
    CHECK_MESSAGE(macros_after[i].second == macros_before[i].second, macros_before[i].first);
  // The user's own lp_solve code and remat's backend, side by side.
  lprec* lp = make_lp(0, 1);
  REQUIRE(lp != nullptr);
  CHECK(set_int(lp, 1, TRUE) == TRUE);
  delete_lp(lp);
  remat::milp::model m;
  const auto x = m.add_binary();
  m.maximize(x);
  const auto s = remat::milp::lpsolve{}.solve(m);
  REQUIRE(s.ok());
  CHECK(s->objective == 1);
}
