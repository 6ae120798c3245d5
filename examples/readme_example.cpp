// The README's example, compiled and run by the test suite so that it stays true.
#include <iostream>

#include <remat/remat.hpp>
using namespace remat::literals;

int main() {
  // A small MLP and its loss; per stage: name, forward and backward time (s), output bytes,
  // bytes kept for the backward (output included), forward and backward scratch bytes.
  remat::chain net{"mlp",
                   64_MiB,
                   {{"fc1", 2e-3, 4e-3, 256_MiB, 512_MiB, 0, 0},
                    {"fc2", 2e-3, 4e-3, 256_MiB, 512_MiB, 0, 0},
                    {"fc3", 2e-3, 4e-3, 256_MiB, 512_MiB, 0, 0},
                    {"fc4", 1e-3, 2e-3, 64_MiB, 128_MiB, 0, 0},
                    {"loss", 1e-4, 1e-4, 4, 4, 0, 0}}};
  auto plan = remat::rotor{}.solve(net, 1536_MiB);  // 500 slots; .slots = 0 for exact sizes
  if (!plan) {  // e.g. status::budget_too_small, with err().minimum_budget
    std::cerr << plan.message() << '\n';
    return 1;
  }
  const auto report = remat::sim::simulate(net, *plan, {.budget = 1536_MiB});
  std::cout << *remat::to_chain_string(net.length(), *plan) << "\n"
            << "time " << report.makespan << " s (plain training " << net.ideal_time()
            << " s), peak " << report.peak / (1 << 20) << " MiB\n";
}
