// offmate (include/remat/policy/offmate.hpp) on Llama 2 7B-like decoders (the zoo's generator,
// include/remat/zoo/llama.hpp: width 4096, 32 heads, FFN 11008, vocabulary 32000, batch 4 of 512
// tokens, fp32, RTX 3060 roofline) on the machine of [Offmate24, §5]: 10 GB of GPU memory (the
// 12 GB card less 2 GB), 10.4 GB/s each way, CPU optimizer 1.1 GB/s, GPU optimizer 16.6 GB/s,
// 50 ms of management a step, with CBC on one thread and a 60 s limit. Blocks: the policy's
// default (at most 40, merged a decoder layer at a time from 32 layers on).
//
//   solve/<layers>          the plan's solve time at 8, 16, 32 and 80 layers (80 with 22 GB, the
//                           paper's RTX 3090 less 2 GB: with 33 blocks of 2.5 layers it needs
//                           11.3 GB, more than 10); counters
//                           overhead (the program's simulated iteration / the infinite-memory
//                           iteration - 1: compute and every update on the GPU), ilp_overhead
//                           (the same for the O-ILP's fractional plan), gap (the fractional
//                           plan's, to the solver's bound), optimal, blocks, gpu_gb and host_gb
//                           (the program's simulated peaks)
//   variant/L/<name>        the L-layer model (8, 32) under the paper's ablations and baselines:
//                             offmate           everything on
//                             no_cpu_optimizer  every update on the GPU ("w/o CPU optim")
//                             no_act_offload    no activation offloading ("w/o Act offload")
//                             zero_infinity     ZeRO-Infinity-like: each group on the GPU only
//                                               for its own steps, the CPU updates all it can
//                             zero_2            ZeRO-2-like: the CPU updates all it can, each
//                                               group on the GPU but while awaiting it, the
//                                               activations recomputed (no offload)
//                           counters as above (-1: no plan fits)
//
//   build/bench/bench_offmate --benchmark_filter='variant'
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/milp/cbc.hpp>
#include <remat/policy/offmate.hpp>
#include <remat/zoo/llama.hpp>

namespace {

using remat::bytes;

const remat::graph& llama(int layers) {
  static std::vector<std::pair<int, remat::graph>> cache;
  for (const auto& [l, g] : cache)
    if (l == layers) return g;
  auto f = remat::zoo::llama({.layers = layers}, remat::zoo::devices::rtx3060());
  cache.emplace_back(layers, *remat::build_graph(*f));
  return cache.back().second;
}

remat::offmate<remat::milp::cbc> paper_policy() {
  remat::offmate<remat::milp::cbc> p;
  p.hw = remat::machine::with_bandwidth(10.4e9);
  p.hw.cpu_optimizer_speed = 1.1e9;
  p.hw.gpu_optimizer_speed = 16.6e9;
  p.hw.step_overhead = 0.05;
  p.time_limit = 60;
  return p;
}

void run(benchmark::State& state, const remat::graph& g,
         const remat::offmate<remat::milp::cbc>& policy, bytes budget = 10'000'000'000) {
  double ideal = g.ideal_time();
  for (const auto& w : g.parameters())
    ideal += static_cast<double>(w.trainable ? w.size : 0) / policy.hw.gpu_optimizer_speed;
  for (auto _ : state) {
    const auto a = policy.plan(g, budget);
    if (!a) {
      state.counters["overhead"] = -1;
      continue;
    }
    // The program's (whole tensors, simulated) and the O-ILP's fractional plan's.
    state.counters["overhead"] = a->makespan / ideal - 1;
    state.counters["ilp_overhead"] = a->fractional_makespan / ideal - 1;
    state.counters["gap"] = a->bound ? a->fractional_makespan / *a->bound - 1 : -1;
    state.counters["optimal"] = a->optimal;
    state.counters["blocks"] = a->problem.length();
    state.counters["gpu_gb"] = static_cast<double>(a->peak_bytes) / 1e9;
    state.counters["host_gb"] = static_cast<double>(a->host_peak_bytes) / 1e9;
  }
}

void register_all() {
  for (int layers : {8, 16, 32, 80})
    benchmark::RegisterBenchmark(("solve/" + std::to_string(layers)).c_str(),
                                 [layers](benchmark::State& s) {
                                   run(s, llama(layers), paper_policy(),
                                       layers > 32 ? 22'000'000'000 : 10'000'000'000);
                                 })
        ->Unit(benchmark::kSecond)
        ->Iterations(1);
  const std::pair<const char*, remat::offmate_features> variants[] = {
      {"offmate", {}},
      {"no_cpu_optimizer", {.cpu_optimizer = false}},
      {"no_act_offload", {.activation_offload = false}},
      {"zero_infinity", {.zero_infinity = true}},
      {"zero_2", {.activation_offload = false, .zero_offload = true}},
  };
  for (int layers : {8, 32})
    for (const auto& [name, features] : variants)
      benchmark::RegisterBenchmark(("variant/" + std::to_string(layers) + "/" + name).c_str(),
                                   [layers, features](benchmark::State& s) {
                                     auto p = paper_policy();
                                     p.features = features;
                                     run(s, llama(layers), p);
                                   })
          ->Unit(benchmark::kSecond)
          ->Iterations(1);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
