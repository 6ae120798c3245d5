#pragma once
// The MILP backend the graph executor's tests plan with: CBC when built in, else lp_solve;
// REMAT_TEST_HAVE_MILP is defined when there is one (tests/CMakeLists.txt links test_exec).

#if defined(REMAT_TEST_HAVE_CBC)
#include <remat/milp/cbc.hpp>
#include <remat/policy/checkmate.hpp>
#define REMAT_TEST_HAVE_MILP 1
using milp_backend = remat::milp::cbc;
#elif defined(REMAT_TEST_HAVE_LPSOLVE)
#include <remat/milp/lpsolve.hpp>
#include <remat/policy/checkmate.hpp>
#define REMAT_TEST_HAVE_MILP 1
using milp_backend = remat::milp::lpsolve;
#endif
