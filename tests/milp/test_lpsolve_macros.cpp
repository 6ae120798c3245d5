// <remat/milp/lpsolve.hpp> includes lp_solve's lp_lib.h, which defines some 500 macros (TRUE,
// LE, OPTIMAL, NORMAL, REAL, ...). None of them may outlive the header: the rest of remat, and the
// user's code, may use those names. This file is the proof where none of them is defined before
// the header: every name of its list is as before (no macro), the commonest are declared and
// used, and the backend still works in this translation unit. test_lpsolve_macros_user.cpp
// defines the user's own macros of those names first, test_lpsolve_macros_lp_lib_first.cpp
// lp_solve's.
// clang-format off
#include <climits>  // as lpsolve_macro_state.hpp asks
#include <cstddef>
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

#if defined(TRUE) || defined(FALSE) || defined(LE) || defined(GE) || defined(EQ) ||     \
    defined(OPTIMAL) || defined(INFEASIBLE) || defined(UNBOUNDED) || defined(NORMAL) || \
    defined(FULL) || defined(REAL) || defined(MYBOOL) || defined(TIMEOUT) ||            \
    defined(MSG_LPOPTIMAL) || defined(my_sign) || defined(MAX) || defined(my_if) ||     \
    defined(REMAT_LPSOLVE_MACRO) || defined(REMAT_DETAIL_LPSOLVE_PRAGMA)
#error "remat/milp/lpsolve.hpp leaked an lp_solve macro, or one of its own"
#endif

namespace {
enum class lp_words {
  TRUE,
  FALSE,
  LE,
  GE,
  EQ,
  OPTIMAL,
  INFEASIBLE,
  UNBOUNDED,
  NORMAL,
  FULL,
  REAL,
  TIMEOUT
};
constexpr int MYBOOL = 3;
int MAX(int a, int b) { return a > b ? a : b; }
}  // namespace

TEST_CASE("milp::lpsolve: lp_solve's macros do not outlive the header") {
  static_assert(std::size(macros_before) > 400);  // the whole list, not a part of it
  for (std::size_t i = 0; i < std::size(macros_before); ++i)
    CHECK_MESSAGE(macros_after[i].second == macros_before[i].second, macros_before[i].first);
  CHECK(static_cast<int>(lp_words::TIMEOUT) == 11);
  CHECK(MAX(MYBOOL, 2) == 3);
  remat::milp::model m;  // and the backend still works in this translation unit
  const auto x = m.add_binary();
  m.maximize(x);
  const auto s = remat::milp::lpsolve{}.solve(m);
  REQUIRE(s.ok());
  CHECK(s->objective == 1);
}
