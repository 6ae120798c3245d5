#pragma once
// The MILP backend the graph executor's tests plan with: CBC when the program links remat::cbc
// (REMAT_HAS_CBC), else lp_solve (remat::lpsolve, REMAT_HAS_LPSOLVE); with neither there is no
// milp_backend and the tests that need one compile to nothing.

#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
#include <remat/policy/checkmate.hpp>
using milp_backend = remat::milp::cbc;
#elif defined(REMAT_HAS_LPSOLVE)
#include <remat/milp/lpsolve.hpp>
#include <remat/policy/checkmate.hpp>
using milp_backend = remat::milp::lpsolve;
#endif
