// <remat/milp/lpsolve.hpp> includes lp_solve's lp_lib.h, which defines hundreds of macros
// (TRUE, LE, OPTIMAL, NORMAL, REAL, ...). None of them may outlive the header: the rest of
// remat, and the user's code, may use those names. This file is the proof: it includes the
// backend first, then the umbrella header, then declares and uses the names.
// clang-format off
#include <remat/milp/lpsolve.hpp>
#include <remat/remat.hpp>
#include <doctest/doctest.h>
// clang-format on

#if defined(TRUE) || defined(FALSE) || defined(LE) || defined(GE) || defined(EQ) ||     \
    defined(OPTIMAL) || defined(INFEASIBLE) || defined(UNBOUNDED) || defined(NORMAL) || \
    defined(FULL) || defined(REAL) || defined(MYBOOL) || defined(TIMEOUT) ||            \
    defined(MSG_LPOPTIMAL) || defined(my_chkbnd) || defined(MAX)
#error "remat/milp/lpsolve.hpp leaked an lp_solve macro"
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
  CHECK(static_cast<int>(lp_words::TIMEOUT) == 11);
  CHECK(MAX(MYBOOL, 2) == 3);
  remat::milp::model m;  // and the backend still works in this translation unit
  const auto x = m.add_binary();
  m.maximize(x);
  const auto s = remat::milp::lpsolve{}.solve(m);
  REQUIRE(s.ok());
  CHECK(s->objective == 1);
}
