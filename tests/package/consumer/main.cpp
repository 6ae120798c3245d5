// A user project: plans a small chain with rotor through the installed package.
#include <cstdio>
#include <remat/remat.hpp>

int main() {
  remat::chain c{"tiny", 4, {}};
  for (int i = 0; i < 5; ++i) c.stages.push_back({"s", 1.0, 2.0, 4, 8, 0, 0});
  auto plan = remat::rotor{}.solve(c, 40);
  if (!plan) {
    std::printf("rotor failed: %s\n", plan.message().c_str());
    return 1;
  }
  std::printf("planned %zu ops from %s\n", plan->ops.size(), REMAT_INCLUDE_DIRS);
  return 0;
}
