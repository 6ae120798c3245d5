// The multi-chain DP's table fill (Theorem 3 of [Shilova21]): K chains of L stages each at S slots,
// b = 0 (MULTI-∅), timed once per iteration; the top's forward count is reported as a counter.
// The table holds (L + 1)^K (S + 1) counts of 4 bytes and its fill is O(S K L^(K+1)): 2 chains
// of 100 stages at 100 slots take well under a second, 3 chains a table of 416 MB, and 4 chains
// (41 GB) do not fit; docs/multi-chain.md has the figures.
//
//   build/bench/bench_multi_chain --benchmark_filter='BM_multi_chain/2/100/100'

#include <vector>

#include <benchmark/benchmark.h>

#include <remat/policy/multi_chain.hpp>

namespace {

void BM_multi_chain(benchmark::State& state) {
  const auto k = static_cast<std::size_t>(state.range(0));
  const int length = static_cast<int>(state.range(1));
  const int slots = static_cast<int>(state.range(2));
  const std::vector<int> lengths(k, length);
  std::int32_t forwards = 0;
  for (auto _ : state) {
    const remat::multi_chain_dp::table t(lengths, {}, slots);
    forwards = t.forwards();
    benchmark::DoNotOptimize(forwards);
  }
  state.counters["forwards"] = forwards;
  state.counters["table_MB"] = remat::multi_chain_dp::table::bytes_needed(lengths, slots) / 1e6;
}

}  // namespace

// K x L x S: the three requested sizes (K = 4 at 100 x 100 needs a 41 GB table and is left out),
// and what four chains reach.
BENCHMARK(BM_multi_chain)
    ->Args({2, 100, 100})
    ->Args({3, 100, 100})
    ->Args({3, 50, 100})
    ->Args({4, 20, 100})
    ->Args({4, 30, 100})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

BENCHMARK_MAIN();
