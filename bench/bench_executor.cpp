// Executor overhead on the host (target: within 2% of a hand-written loop), and measured vs
// predicted time of rotor schedules.
//
//   BM_handwritten      store-all written by hand over the same layers (eg::backprop)
//   BM_executor/0       the store-all schedule through remat::exec::executor
//   BM_executor/F       rotor at F% of the way from its minimum budget to the store-all peak;
//                       the counter `predicted_over_measured` compares the plan with reality
//
// The model is examples/eigen's transformer-like residual stack (8 blocks, width 256, hidden
// 1024, batch 64, no dropout), profiled once through the host backend.

#include <benchmark/benchmark.h>
#include <eigen/models.hpp>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

#include "host_model.hpp"

namespace {

using namespace remat_bench::host_model;

void BM_handwritten(benchmark::State& state) {
  eg::model m = build();
  remat::exec::host_backend b;
  for (auto _ : state) {
    state.PauseTiming();
    eg::zero_grad(m);
    eg::tensor x = input(b);
    state.ResumeTiming();
    benchmark::DoNotOptimize(eg::backprop(m, x, b));
  }
}
BENCHMARK(BM_handwritten)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_executor(benchmark::State& state) {
  const remat::chain& c = profiled_chain();
  const remat::bytes peak = remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak;
  const remat::bytes lo = remat::rotor{}.minimum_budget(c);
  const auto fraction = static_cast<double>(state.range(0)) / 100.0;
  const remat::schedule s =
      state.range(0) == 0
          ? *remat::store_all{}.solve(c, peak)
          : *remat::rotor{}.solve(
                c, lo + static_cast<remat::bytes>(fraction * static_cast<double>(peak - lo)));
  eg::model m = build();
  remat::exec::host_backend b;
  remat::exec::executor ex(m, c, b);
  double measured = 0;
  for (auto _ : state) {
    state.PauseTiming();
    eg::zero_grad(m);
    eg::tensor x = input(b);
    state.ResumeTiming();
    auto r = ex.run(s, std::move(x));
    if (!r) state.SkipWithError(r.message().c_str());
    measured += r ? r->elapsed : 0;
    benchmark::DoNotOptimize(r);
  }
  state.counters["predicted_over_measured"] =
      s.predicted_time / (measured / static_cast<double>(state.iterations()));
  state.counters["recompute_ratio"] = s.predicted_time / c.ideal_time();
}
BENCHMARK(BM_executor)
    ->Arg(0)
    ->Arg(25)
    ->Arg(50)
    ->Arg(75)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
