// checkmate (include/remat/policy/checkmate.hpp): solve time and optimum of the RK-Checkmate MILP
// with lp_solve and CBC, exact and relaxed (LP + two-phase rounding), on training graphs of about
// 10, 20, 40 and 80 compute nodes: chains and residual nets of 5, 10, 20 and 40 ops (a graph of
// n ops has 2n + 1 compute nodes: n forwards, the loss, n backwards).
//
// The budget is 50% of store-all's peak; where that is below the graph's minimum (the largest
// working set of one compute node, checkmate's lower bound), the minimum is used instead and the
// counter `at_minimum` says so. Each solve has a 60 s limit. Counters:
//   optimal    1 when the solver proved optimality (always 0 for relaxed solutions)
//   makespan   the schedule's makespan (ms)
//   bound      the best proven bound on the makespan (ms): the solver's, or the LP's for relax
//   overhead   makespan / store-all's makespan - 1 (the price of the budget)
//   budget     the budget as a fraction of store-all's peak; at_minimum as above
//   compute_nodes
//   bench/bench_checkmate --benchmark_filter='cbc.*exact'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <remat/policy/checkmate.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/graph_simulate.hpp>
#include <string>
#include <string_view>
#include <vector>
#ifdef REMAT_BENCH_LPSOLVE
#include <remat/milp/lpsolve.hpp>
#endif
#ifdef REMAT_BENCH_CBC
#include <remat/milp/cbc.hpp>
#endif

namespace {

using remat::bytes;

constexpr bytes MiB = bytes{1} << 20;

/// An op with costs drawn from rng: forward 1-5 ms, backward 1-2x that, output 1-8 MiB, phantom
/// 0-2x the output, small overheads.
remat::forward_op random_op(std::mt19937_64& rng, std::string name, std::vector<std::string> inputs,
                            std::vector<std::string> reads) {
  std::uniform_int_distribution<int> ms(1, 5), mib(1, 8), ratio(0, 4), over(0, 2);
  remat::forward_op o;
  o.name = std::move(name);
  o.inputs = std::move(inputs);
  o.forward_time = ms(rng) * 1e-3;
  o.backward_time = o.forward_time * (1.0 + ratio(rng) / 4.0);
  o.output_bytes = mib(rng) * MiB;
  o.phantom_bytes = o.output_bytes * ratio(rng) / 2;
  o.backward_reads = std::move(reads);
  o.forward_overhead_bytes = over(rng) * MiB;
  o.backward_overhead_bytes = over(rng) * MiB;
  return o;
}

/// A chain of n ops, the last one the loss.
remat::graph chain_graph(int n) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(1000 + n));
  remat::forward_dag f{"chain" + std::to_string(n), 2 * MiB, {}};
  std::string prev = "input";
  for (int i = 0; i < n; ++i) {
    const std::string name = "op" + std::to_string(i);
    f.ops.push_back(random_op(rng, name, {prev}, {prev, "output"}));
    prev = name;
  }
  return remat::build_graph(f).value();
}

/// A residual net of n ops: a stem, then blocks x -> f1 -> f2 -> add(x, f2) while they fit, the
/// ops left over as a plain chain, the last one the loss. The add keeps no phantom and reads
/// nothing for its backward.
remat::graph residual_graph(int n) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(2000 + n));
  remat::forward_dag f{"residual" + std::to_string(n), 2 * MiB, {}};
  f.ops.push_back(random_op(rng, "stem", {"input"}, {"input"}));
  std::string x = "stem";
  int b = 0;
  while (static_cast<int>(f.ops.size()) + 3 <= n - 1) {
    const std::string s = std::to_string(b++);
    f.ops.push_back(random_op(rng, "f1_" + s, {x}, {x}));
    f.ops.push_back(random_op(rng, "f2_" + s, {"f1_" + s}, {"f1_" + s, "output"}));
    auto add = random_op(rng, "add" + s, {x, "f2_" + s}, {});
    add.phantom_bytes = 0;
    add.output_bytes = f.ops.back().output_bytes;
    f.ops.push_back(add);
    x = "add" + s;
  }
  while (static_cast<int>(f.ops.size()) < n) {
    const std::string name = "op" + std::to_string(f.ops.size());
    f.ops.push_back(random_op(rng, name, {x}, {x, "output"}));
    x = name;
  }
  return remat::build_graph(f).value();
}

template <class Backend>
void run(benchmark::State& state, const remat::graph& g, bool relax, bool warm = true) {
  const remat::graph_schedule sa{remat::store_all_program(g), g.ideal_time(), 0};
  const auto all = remat::sim::simulate(g, sa);
  const bytes floor = remat::checkmate<Backend>::lower_bound(g);
  const bytes half = all.peak / 2;
  bytes budget = std::max(half, floor);
  if (budget > half) {
    // 50% is below the per-node floor, and the floor itself may have no schedule (every backward
    // runs once): the smallest budget that has one, found once outside the timing.
    remat::checkmate<Backend> probe{};
    probe.time_limit = 60;
    probe.find_minimum = true;
    if (auto p = probe.solve_detailed(g, budget); !p && p.err().minimum_budget)
      budget = *p.err().minimum_budget;
  }
  remat::checkmate<Backend> cm{};
  cm.time_limit = 60;
  cm.relax = relax;
  cm.auto_warm_start = warm;
  double optimal = 0, makespan = 0, bound = 0;
  for (auto _ : state) {
    const auto r = cm.solve_detailed(g, budget);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    optimal = r->optimal ? 1 : 0;
    makespan = r->schedule.predicted_time;
    bound = r->bound;
    benchmark::DoNotOptimize(r->schedule.ops.data());
  }
  state.counters["optimal"] = optimal;
  state.counters["makespan"] = makespan * 1e3;
  state.counters["bound"] = bound * 1e3;
  state.counters["overhead"] = makespan / all.makespan - 1;
  state.counters["budget"] = static_cast<double>(budget) / static_cast<double>(all.peak);
  state.counters["at_minimum"] = budget > half ? 1 : 0;
  state.counters["compute_nodes"] = g.compute_count();
}

template <class Backend>
void chain_exact(benchmark::State& s) {
  run<Backend>(s, chain_graph(static_cast<int>(s.range(0))), false);
}
template <class Backend>
void chain_relaxed(benchmark::State& s) {
  run<Backend>(s, chain_graph(static_cast<int>(s.range(0))), true);
}
/// Without the automatic warm start, to measure what it brings.
template <class Backend>
void chain_exact_cold(benchmark::State& s) {
  run<Backend>(s, chain_graph(static_cast<int>(s.range(0))), false, false);
}
template <class Backend>
void residual_exact_cold(benchmark::State& s) {
  run<Backend>(s, residual_graph(static_cast<int>(s.range(0))), false, false);
}
template <class Backend>
void residual_exact(benchmark::State& s) {
  run<Backend>(s, residual_graph(static_cast<int>(s.range(0))), false);
}
template <class Backend>
void residual_relaxed(benchmark::State& s) {
  run<Backend>(s, residual_graph(static_cast<int>(s.range(0))), true);
}

/// Ops per graph: 5, 10, 20, 40 (11, 21, 41, 81 compute nodes). One iteration each: a solve
/// takes up to 60 s.
void sizes(benchmark::internal::Benchmark* b) {
  for (int n : {5, 10, 20, 40}) b->Arg(n);
  b->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
}

/// The automatic warm start's effect, where solves end before the limit.
void small_sizes(benchmark::internal::Benchmark* b) {
  for (int n : {5, 10}) b->Arg(n);
  b->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

#ifdef REMAT_BENCH_CBC
using remat::milp::cbc;
BENCHMARK(chain_exact<cbc>)->Apply(sizes);
BENCHMARK(residual_exact<cbc>)->Apply(sizes);
BENCHMARK(chain_exact_cold<cbc>)->Apply(small_sizes);
BENCHMARK(residual_exact_cold<cbc>)->Apply(small_sizes);
BENCHMARK(chain_relaxed<cbc>)->Apply(sizes);
BENCHMARK(residual_relaxed<cbc>)->Apply(sizes);
#endif
#ifdef REMAT_BENCH_LPSOLVE
using remat::milp::lpsolve;
BENCHMARK(chain_exact<lpsolve>)->Apply(sizes);
BENCHMARK(residual_exact<lpsolve>)->Apply(sizes);
BENCHMARK(chain_exact_cold<lpsolve>)->Apply(small_sizes);
BENCHMARK(residual_exact_cold<lpsolve>)->Apply(small_sizes);
BENCHMARK(chain_relaxed<lpsolve>)->Apply(sizes);
BENCHMARK(residual_relaxed<lpsolve>)->Apply(sizes);
#endif

BENCHMARK_MAIN();
