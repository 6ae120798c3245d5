// A user project: plans a small chain with rotor through the installed package, and solves a tiny
// MILP with lp_solve where the package has remat::lpsolve.
#include <cstdio>

#include <remat/remat.hpp>
#ifdef REMAT_HAS_LPSOLVE
#include <remat/milp/lpsolve.hpp>
#endif

int main() {
  remat::chain c{"tiny", 4, {}};
  for (int i = 0; i < 5; ++i) c.stages.push_back({"s", 1.0, 2.0, 4, 8, 0, 0});
  auto plan = remat::rotor{}.solve(c, 40);
  if (!plan) {
    std::printf("rotor failed: %s\n", plan.message().c_str());
    return 1;
  }
#ifdef REMAT_HAS_LPSOLVE
  remat::milp::model m;
  const auto x = m.add_binary();
  m.maximize(x);
  const auto s = remat::milp::lpsolve{}.solve(m);
  if (!s || s->objective != 1) {
    std::printf("lp_solve failed: %s\n", s ? s->message.c_str() : s.message().c_str());
    return 1;
  }
  std::printf("lp_solve solved a MILP; ");
#endif
  std::printf("planned %zu ops from %s\n", plan->ops.size(), REMAT_INCLUDE_DIRS);
  return 0;
}
