// MadPipe against PipeDream on the zoo's ResNet-50 and ResNet-101 ([Shilova21, ch. 7]'s setting:
// 1000x1000 images, mini-batch 8; here fp32 on the V100 roofline), each as the chain of its
// sequential pieces (39 and 73 layers, weights from the parameters, C = 3): P = 2, 4, 8
// processors of M = 3 to 16 GB, links of 12 or 24 GB/s. Each run plans once and reports the
// simulated period per mini-batch (`period`, seconds; 0 when the planner finds no plan within M),
// the planning time (`plan_s`), the stages and how many recompute. Arguments: depth, P, M in GB,
// bandwidth in GB/s, recompute (0: the thesis' model, every stage stores; 1: stages may
// recompute with rotor). MadPipe's phase 2 (the ILP, CBC) runs for at most 5 s here (the
// thesis gives it 1 min); build with CBC for it, else phase 1 alone.
//
//   build/bench/bench_pipeline_zoo --benchmark_filter='resnet/50/8/'
//   build/bench/bench_pipeline_zoo --benchmark_format=json > out.json   # the table of the docs

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>

#include <remat/policy/madpipe.hpp>
#include <remat/policy/pipedream.hpp>
#include <remat/problem/sequential.hpp>
#include <remat/zoo/resnet.hpp>
#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
#endif

namespace {

#if defined(REMAT_HAS_CBC)
using bench_milp = remat::milp::cbc;
#else
using bench_milp = remat::milp::unavailable;
#endif

const remat::chain& resnet_chain(int depth) {
  static std::map<int, remat::chain> made;
  auto it = made.find(depth);
  if (it == made.end()) {
    auto dag = remat::zoo::resnet({.depth = depth, .batch = 8, .image = 1000},
                                  remat::zoo::devices::v100());
    it = made.emplace(depth, remat::sequential_chain(dag.value()).value()).first;
  }
  return it->second;
}

remat::pipeline_problem problem_of(const benchmark::State& state) {
  remat::pipeline_problem p;
  p.layers = resnet_chain(static_cast<int>(state.range(0)));
  p.processors = static_cast<int>(state.range(1));
  p.memory = static_cast<remat::bytes>(state.range(2)) * 1'000'000'000;
  p.bandwidth = static_cast<double>(state.range(3)) * 1e9;
  return p;
}

template <class Policy>
void report(benchmark::State& state, const remat::result<remat::pipeline_solution>& s,
            double seconds) {
  state.counters["plan_s"] = seconds;
  if (!s) {
    state.counters["period"] = 0;
    state.SetLabel(std::string(remat::to_string(s.code())));
    return;
  }
  int recomputing = 0;
  for (const auto& st : s->plan.stages) recomputing += st.recompute ? 1 : 0;
  state.counters["period"] = s->report.normalized_period;
  state.counters["stages"] = static_cast<double>(s->plan.stages.size());
  state.counters["recomputing"] = recomputing;
  state.SetLabel(s->scheduler);
}

template <class Policy>
void run(benchmark::State& state, Policy policy) {
  const remat::pipeline_problem p = problem_of(state);
  policy.recompute = state.range(4) != 0;
  std::optional<remat::result<remat::pipeline_solution>> s;
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    s.emplace(policy.solve(p));
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  report<Policy>(state, *s, seconds);
}

void BM_pipedream(benchmark::State& state) { run(state, remat::pipedream{}); }

void BM_madpipe(benchmark::State& state) {
  remat::madpipe<bench_milp> m;
  m.phase2_time_limit = 5;
  run(state, m);
}

void resnet_args(benchmark::internal::Benchmark* b) {
  for (int bandwidth : {12, 24})
    for (int depth : {50, 101})
      for (int procs : {2, 4, 8})
        for (int gb : {3, 4, 6, 8, 12, 16})
          for (int recompute : {0, 1}) b->Args({depth, procs, gb, bandwidth, recompute});
}

}  // namespace

BENCHMARK(BM_pipedream)
    ->Name("pipedream/resnet")
    ->Apply(resnet_args)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_madpipe)
    ->Name("madpipe/resnet")
    ->Apply(resnet_args)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
