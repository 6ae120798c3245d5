// Rotor solve time over the chain length L and the number of memory slots S (target: L = 100,
// S = 500 in under 50 ms on a 2-core machine). The chains are heterogeneous, with sizes and
// times drawn from a fixed seed, and the budget is half of the store-all peak (rotor_floating:
// half way from its minimum to that peak), where the DP has real choices to make; the
// tolerance is infinite, so that one fill is timed, on one thread. BM_rotor_default: rotor's
// defaults at 30%, on one thread and on every core (threads 0, the default).
//
//   build/bench/bench_rotor --benchmark_filter='BM_rotor/100/500'
//   build/bench/bench_rotor --benchmark_filter='BM_rotor_default/(100|400)/'   (rotor's defaults)

#include <cmath>
#include <random>

#include <benchmark/benchmark.h>

#include <remat/remat.hpp>

namespace {

remat::chain random_chain(int length, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<remat::bytes> size(1 << 20, 64 << 20);
  std::uniform_real_distribution<double> time(1e-3, 1e-2);
  remat::chain c{"bench", size(rng), {}};
  for (int l = 0; l < length; ++l) {
    const remat::bytes a = size(rng);
    c.stages.push_back(
        {"", time(rng), 2 * time(rng), a, a + size(rng), size(rng) / 8, size(rng) / 8});
  }
  return c;
}

remat::bytes half_peak(const remat::chain& c) {
  return remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak / 2;
}

/// Half way between the policy's minimum and the store-all peak (short chains cannot run in
/// half of their peak).
template <class P>
remat::bytes midpoint(const remat::chain& c) {
  const remat::bytes lo = P{}.minimum_budget(c);
  return lo + (2 * half_peak(c) - lo) / 2;
}

void BM_rotor(benchmark::State& state) {
  const auto c = random_chain(static_cast<int>(state.range(0)), 42);
  const auto budget = half_peak(c);
  const remat::rotor policy{.slots = state.range(1), .tolerance = HUGE_VAL, .threads = 1};
  for (auto _ : state) {
    auto r = policy.solve(c, budget);
    if (!r) state.SkipWithError(r.message().c_str());
    benchmark::DoNotOptimize(r);
  }
  state.counters["L"] = static_cast<double>(state.range(0));
  state.counters["S"] = static_cast<double>(state.range(1));
}
BENCHMARK(BM_rotor)
    ->ArgsProduct({{10, 50, 100, 200, 400}, {100, 500, 2000}})
    ->Unit(benchmark::kMillisecond);

/// rotor as a user gets it (500 slots, 1 % tolerance: the DP with sizes rounded up and again
/// rounded down for the bound) at 30% of the store-all peak, on chains of 100 to 1,000 stages,
/// with `threads` (the second argument; 0: every core, the default): counters gap (the plan
/// over its lower bound, - 1) and table_MiB (one fill's table).
void BM_rotor_default(benchmark::State& state) {
  const auto c = random_chain(static_cast<int>(state.range(0)), 42);
  const auto budget = remat::fraction_of_store_all(c, 0.3);
  const remat::rotor policy{.threads = static_cast<int>(state.range(1))};
  double gap = 0;
  for (auto _ : state) {
    auto r = policy.solve_detailed(c, budget);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      break;
    }
    gap = r->bound ? r->program.predicted_time / *r->bound - 1 : 0;
    benchmark::DoNotOptimize(r);
  }
  const double n = static_cast<double>(state.range(0));
  state.counters["gap"] = gap;
  state.counters["table_MiB"] =
      n * (n + 1) / 2 * static_cast<double>(policy.slots + 1) * 8 / (1 << 20);
}
BENCHMARK(BM_rotor_default)->ArgsProduct({{100, 400}, {1, 0}})->Unit(benchmark::kMillisecond);
// 1,000 stages: a table of 1.9 GiB per fill, a minute per solve: one.
BENCHMARK(BM_rotor_default)->Args({1000, 0})->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_rotor_floating(benchmark::State& state) {
  const auto c = random_chain(static_cast<int>(state.range(0)), 42);
  const auto budget = midpoint<remat::rotor_floating>(c);
  const remat::rotor_floating policy{.slots = state.range(1)};
  for (auto _ : state) {
    auto r = policy.solve(c, budget);
    if (!r) state.SkipWithError(r.message().c_str());
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_rotor_floating)
    ->ArgsProduct({{5, 10, 20, 30, 40}, {100, 500}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
