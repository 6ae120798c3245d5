// The pipeline planners' planning time on a 100-layer chain (random layer times in [0.5, 2] s
// forward and twice that backward, activations and weights of 10..100 KB, 1 MB/s links), at P =
// 2, 4 and 8 processors and M at 60% and 25% of C x the weights plus the activations:
// PipeDream's DP with 1F1B* (Alg. 7), and MadPipe (its DP at the default grids, 101 x 11 x 51,
// Alg. 8's two passes of K = 10, and the schedule of its allocations). The counters are the
// plan's period and the DP's predicted one. BM_madpipe_stages: MadPipe on the first 36 layers
// with the recomputing stages' programs rotor's (rotor_segments, 0) or revolve's
// (policy_segments<revolve>, 1). docs/pipeline.md has the figures.
//
//   build/bench/bench_pipeline --benchmark_filter='BM_madpipe/8/25'

#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/policy/madpipe.hpp>
#include <remat/policy/pipedream.hpp>
#include <remat/policy/policy_segments.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/problem/pipeline.hpp>

namespace {

remat::pipeline_problem bench_pipe_chain(int processors, int memory_percent, int layers = 100) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  std::uniform_int_distribution<int> size(10, 100);
  remat::chain c{"bench-pipe", 1000, {}};
  remat::bytes weights = 0, activations = 0;
  for (int l = 0; l < layers; ++l) {
    remat::stage s;
    s.forward_time = time(rng);
    s.backward_time = 2 * time(rng);
    s.output_bytes = s.saved_bytes = size(rng) * 1000;
    s.weight_bytes = size(rng) * 1000;
    weights += s.weight_bytes;
    activations += s.output_bytes;
    c.stages.push_back(s);
  }
  remat::pipeline_problem p;
  p.layers = std::move(c);
  p.processors = processors;
  p.bandwidth = 1e6;
  p.memory = (p.copies * weights + activations) * memory_percent / 100;
  return p;
}

template <class Planner>
void bench_planner(benchmark::State& state, const Planner& planner, int layers = 100) {
  const remat::pipeline_problem p =
      bench_pipe_chain(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), layers);
  double period = 0, predicted = 0;
  for (auto _ : state) {
    auto s = planner.solve(p);
    if (!s) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    period = s->plan.period;
    predicted = s->predicted_period;
    benchmark::DoNotOptimize(s->plan.ops.data());
  }
  state.counters["period"] = benchmark::Counter(period);
  state.counters["predicted"] = benchmark::Counter(predicted);
}

void BM_pipedream(benchmark::State& state) { bench_planner(state, remat::pipedream{}); }
void BM_madpipe(benchmark::State& state) { bench_planner(state, remat::madpipe<>{}); }
void BM_madpipe_stages(benchmark::State& state) {
  if (state.range(2) == 0)
    bench_planner(state, remat::madpipe<>{}, 36);
  else
    bench_planner(
        state, remat::madpipe<remat::milp::unavailable, remat::policy_segments<remat::revolve>>{},
        36);
}

}  // namespace

// P x M in percent of C x the weights plus the activations.
BENCHMARK(BM_pipedream)->ArgsProduct({{2, 4, 8}, {60, 25}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_madpipe)
    ->ArgsProduct({{2, 4, 8}, {60, 25}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// P x M percent x the segment policy (0 rotor, 1 revolve).
BENCHMARK(BM_madpipe_stages)
    ->ArgsProduct({{4}, {30, 45}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

BENCHMARK_MAIN();
