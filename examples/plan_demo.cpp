// The planning overview (remat-plan-demo): plans the example chains over a range of memory
// budgets and prints, for each policy, the predicted overhead against plain training and the
// peak memory: the memory/time trade-off at a glance. Every number comes from a schedule the
// simulator has checked.
//
//   remat-plan-demo [CHAIN.json ...]     (default: the chains in examples/chains/)

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <remat/io/json.hpp>
#include <remat/remat.hpp>

namespace {

constexpr int budget_points = 9;
// rotor_floating is O(N^6 S): plan it with it only when that takes a moment.
constexpr int floating_max_stages = 24;

double gib(remat::bytes b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

struct cell {
  bool ok = false;
  double overhead = 0;  // predicted time / plain time - 1
  remat::bytes peak = 0;
};

template <remat::ChainPolicy P>
cell plan(const P& policy, const remat::chain& c, remat::bytes budget) {
  auto r = policy.solve(c, budget);
  if (!r) return {};
  // The policy checked its schedule in the simulator already; replay it once more here so the
  // demo prints what the referee says, not what the planner claims.
  const auto rep = remat::sim::simulate(c, *r, {.budget = budget});
  if (!rep.valid) return {};
  double overhead = rep.makespan / c.ideal_time() - 1.0;
  if (std::abs(overhead) < 5e-4) overhead = 0.0;  // rounding of the sums, not a speed-up
  return {true, overhead, rep.peak};
}

void print_cell(const cell& x) {
  if (!x.ok)
    std::printf(" | %-16s", "  -");
  else
    std::printf(" | %+7.1f%% %6.2f ", 100.0 * x.overhead, gib(x.peak));
}

int demo(const std::filesystem::path& file) {
  auto loaded = remat::io::load_chain(file);
  if (!loaded) {
    std::fprintf(stderr, "%s: %s\n", file.string().c_str(), loaded.message().c_str());
    return 1;
  }
  const remat::chain& c = *loaded;
  const auto all = remat::store_all{}.solve(c, remat::unlimited_bytes);
  const remat::bytes peak = all->predicted_peak;
  const remat::bytes lo = remat::rotor{}.minimum_budget(c);
  const bool floating = c.length() <= floating_max_stages;

  std::printf("\n== %s (%d stages, input %.2f GiB)\n", c.name.c_str(), c.length(),
              gib(c.input_bytes));
  std::printf(
      "   plain training: %.3f s per iteration, peak %.2f GiB; rotor needs at least %.2f GiB\n",
      c.ideal_time(), gib(peak), gib(lo));
  std::printf(
      "   each cell: predicted time overhead vs plain training, simulated peak (GiB); - = does not "
      "fit\n\n");
  std::printf("   budget GiB  %%peak | %-16s | %-16s | %-16s | %-16s | %-16s\n", "store_all",
              "periodic", "revolve", "rotor", floating ? "rotor_floating" : "rotor_floating*");
  for (int i = 0; i < budget_points; ++i) {
    const double f = static_cast<double>(i) / (budget_points - 1);
    const auto budget =
        static_cast<remat::bytes>(static_cast<double>(lo) + f * static_cast<double>(peak - lo));
    std::printf("   %10.2f %5.0f%%", gib(budget),
                100.0 * static_cast<double>(budget) / static_cast<double>(peak));
    print_cell(plan(remat::store_all{}, c, budget));
    print_cell(plan(remat::periodic{}, c, budget));
    print_cell(plan(remat::revolve{}, c, budget));
    print_cell(plan(remat::rotor{}, c, budget));
    if (floating)
      print_cell(plan(remat::rotor_floating{}, c, budget));
    else
      std::printf(" | %-16s", "  (skipped)");
    std::printf("\n");
  }
  if (!floating)
    std::printf("   * rotor_floating is O(N^6 S); skipped for chains over %d stages\n",
                floating_max_stages);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) files.emplace_back(argv[i]);
  if (files.empty()) {
    for (const auto& e : std::filesystem::directory_iterator(REMAT_EXAMPLE_CHAINS))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  }
  std::printf("remat demo: the memory/time trade-off of each policy on the example chains\n");
  int rc = 0;
  for (const auto& f : files) rc |= demo(f);
  return rc;
}
