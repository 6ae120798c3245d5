// rockmate (include/remat/policy/rockmate.hpp) on GPT-2 at op granularity (the zoo's generator,
// include/remat/zoo/gpt2.hpp: width 768, 12 heads, sequence 512, batch 8, fp32, V100 roofline,
// the graphs of examples/graphs/gpt2_*.json) with 2, 4 and 12 layers.
//
//   solve/<layers>/<percent>   rockmate<checkmate<cbc>> (default knobs) at a percentage of the
//                              store-all peak: its solve time; counters overhead, kinds, blocks,
//                              options_s
//   quality/<layers>/<policy>/<k>  the policies at five budgets k = 0..4, evenly spaced from
//                              rockmate's minimum to 90% of the store-all peak (budget counter:
//                              the fraction of the store-all peak):
//                                rockmate      rockmate<checkmate<cbc>>
//                                rotor_blocks  rockmate<store_all>: Rotor on the same blocks
//                                relax         checkmate<cbc> with relax (LP + rounding),
//                                              600 s limit
//                                exact         checkmate<cbc>, 600 s limit (2 and 4 layers
//                                              only); optimal = 1 when proven
//                              overhead = predicted makespan / store-all's - 1, or -1 when the
//                              policy has no plan (below its minimum, or no plan in its limit)
//   minimum/<layers>/<policy>  the policy's minimum budget (budget_too_small's), as a fraction
//
//   build/bench/bench_rockmate --benchmark_filter='solve'
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/milp/cbc.hpp>
#include <remat/policy/checkmate.hpp>
#include <remat/policy/rockmate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/gpt2.hpp>

#include "graph_planner_bench.hpp"

namespace {

using remat::bytes;
using remat_bench::minimum_of;
using remat_bench::problem;
using remat_bench::report;

const problem& gpt2(int layers) {
  static std::vector<std::pair<int, problem>> cache;
  for (const auto& [l, p] : cache)
    if (l == layers) return p;
  remat::zoo::gpt2_config c;
  c.layers = layers;
  c.sequence = 512;
  c.batch = 8;
  auto f = remat::zoo::gpt2(c, *remat::zoo::find_device("V100"));
  problem p = remat_bench::make_problem(*remat::build_graph(*f));
  cache.emplace_back(layers, std::move(p));
  return cache.back().second;
}

using rockmate_cbc = remat::rockmate<remat::checkmate<remat::milp::cbc>>;

void solve(benchmark::State& st, int layers, double fraction) {
  const problem& p = gpt2(layers);
  const auto budget = static_cast<bytes>(fraction * static_cast<double>(p.peak));
  for (auto _ : st) {
    auto plan = rockmate_cbc{}.solve_detailed(p.g, budget);
    if (!plan) {
      st.SkipWithError(plan.message().c_str());
      return;
    }
    report(st, p, budget, plan->program);
    st.counters["kinds"] = plan->details.kinds;
    st.counters["blocks"] = static_cast<double>(plan->details.blocks.size());
    st.counters["options_s"] = plan->details.options_time;
  }
}

void quality(benchmark::State& st, int layers, const std::string& policy, int k) {
  const problem& p = gpt2(layers);
  const bytes budget = remat_bench::quality_budget(p, layers, k, [&] {
    return minimum_of([&](bytes b) { return rockmate_cbc{}.solve(p.g, b); });
  });
  for (auto _ : st) {
    remat::result<remat::schedule> s = remat::error{};
    if (policy == "rockmate") s = rockmate_cbc{}.solve(p.g, budget);
    if (policy == "rotor_blocks") s = remat::rockmate<remat::store_all>{}.solve(p.g, budget);
    if (policy == "relax" || policy == "exact")
      s = remat_bench::checkmate_plan(st, p.g, budget, policy == "relax");
    report(st, p, budget, s);
  }
}

void minimum(benchmark::State& st, int layers, const std::string& policy) {
  const problem& p = gpt2(layers);
  for (auto _ : st) {
    const bytes m = policy == "rockmate"
                        ? minimum_of([&](bytes b) { return rockmate_cbc{}.solve(p.g, b); })
                        : minimum_of([&](bytes b) {
                            return remat::rockmate<remat::store_all>{}.solve(p.g, b);
                          });
    st.counters["budget"] = static_cast<double>(m) / static_cast<double>(p.peak);
    st.counters["bytes"] = static_cast<double>(m);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int layers : {12}) {
    for (double f : {0.5, 0.45})
      benchmark::RegisterBenchmark(
          ("solve/" + std::to_string(layers) + "/" + std::to_string(static_cast<int>(f * 100)))
              .c_str(),
          [=](benchmark::State& st) { solve(st, layers, f); })
          ->Iterations(1)
          ->Unit(benchmark::kSecond);
  }
  for (int layers : {2, 4, 12}) {
    for (const std::string policy : {"rockmate", "rotor_blocks"})
      benchmark::RegisterBenchmark(("minimum/" + std::to_string(layers) + "/" + policy).c_str(),
                                   [=](benchmark::State& st) { minimum(st, layers, policy); })
          ->Iterations(1)
          ->Unit(benchmark::kSecond);
    for (const std::string policy : {"rockmate", "rotor_blocks", "relax", "exact"}) {
      if (policy == "exact" && layers > 4) continue;
      for (int k = 0; k < 5; ++k)
        benchmark::RegisterBenchmark(
            ("quality/" + std::to_string(layers) + "/" + policy + "/" + std::to_string(k)).c_str(),
            [=](benchmark::State& st) { quality(st, layers, policy, k); })
            ->Iterations(1)
            ->Unit(benchmark::kSecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
