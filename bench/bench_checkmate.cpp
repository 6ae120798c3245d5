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
// side_branch_find_minimum: find_minimum's time on the DAG shape (blocks with a side branch and
// a 3-input add), with the lower bound, the heuristic plan's peak and the minimum.
// Besides: chain_exact_threads2 (CBC with two threads), and chain_exact_spread /
// residual_exact_spread (eight graphs of 10 ops drawn with different seeds, one after the other,
// each at 50% or the smallest budget that has a schedule; counters mean_s, max_s, optimal) for
// the spread of solve times at one size; profiles_spread (20 profiles of one encoder-decoder,
// its times measured again: each scaled by a factor in [0.95, 1.05]) for the spread between
// profiles of one model, without and with a relative gap of 1 %.
//   bench/bench_checkmate --benchmark_filter='cbc.*exact'
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/policy/checkmate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>

#include "support/side_branch_graph.hpp"
#ifdef REMAT_HAS_LPSOLVE
#include <remat/milp/lpsolve.hpp>
#endif
#ifdef REMAT_HAS_CBC
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

/// A chain of n ops, the last one the loss; `seed` draws another one of the same size.
remat::graph chain_graph(int n, int seed = 0) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(1000 + n + 7919 * seed));
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
remat::graph residual_graph(int n, int seed = 0) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(2000 + n + 7919 * seed));
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

/// find_minimum from 10% of store-all's peak on side_branch_graph(blocks, seed)
/// (tests/support/side_branch_graph.hpp): the time of the whole call. Counters: minimum,
/// lower_bound and least_memory (the heuristic plan's peak) in KiB, store-all's peak in KiB,
/// compute_nodes. Before the heuristic upper end, the tighter bound and the gcd steps, 4
/// blocks seed 2: 6.2 s; 6 blocks seed 3: 28.5 s.
template <class Backend>
void side_branch_find_minimum(benchmark::State& state) {
  const auto g = remat::test::side_branch_graph(static_cast<int>(state.range(0)),
                                                static_cast<int>(state.range(1)));
  const bytes all = remat::peak_of_store_all(g);
  remat::checkmate<Backend> cm{};
  cm.time_limit = 120;
  cm.find_minimum = true;
  bytes minimum = 0;
  for (auto _ : state) {
    const auto r = cm.solve(g, remat::fraction_of_store_all(g, 0.1));
    if (r || !r.err().minimum_budget) {
      state.SkipWithError(r ? "10% of store-all has a schedule" : r.message().c_str());
      return;
    }
    minimum = *r.err().minimum_budget;
  }
  state.counters["minimum_KiB"] = static_cast<double>(minimum) / 1024;
  state.counters["lower_bound_KiB"] = static_cast<double>(cm.lower_bound(g)) / 1024;
  state.counters["least_memory_KiB"] =
      static_cast<double>(cm.least_memory(g).value().predicted_peak) / 1024;
  state.counters["store_all_KiB"] = static_cast<double>(all) / 1024;
  state.counters["compute_nodes"] = g.compute_count();
}

/// How a benchmark solves: exact or relaxed, with the automatic warm start or not, threads.
struct how {
  bool relax = false;
  bool warm = true;
  int threads = 1;
};

/// The smallest budget from `budget` up that has a schedule (a solve with find_minimum).
template <class Backend>
bytes smallest_fitting(const remat::graph& g, bytes budget) {
  remat::checkmate<Backend> probe{};
  probe.time_limit = 60;
  probe.find_minimum = true;
  if (auto p = probe.solve_detailed(g, budget); !p && p.err().minimum_budget)
    return *p.err().minimum_budget;
  return budget;
}

/// The budget: 50% of store-all's peak, or the smallest budget with a schedule where that is
/// below the per-node floor (the floor itself may have none now that every backward runs once),
/// found outside the timing. Also store-all's peak and makespan.
template <class Backend>
struct setting {
  bytes budget, peak;
  double ideal;
  explicit setting(const remat::graph& g) {
    const remat::schedule sa{remat::store_all_program(g), g.ideal_time(), 0};
    const auto all = remat::sim::simulate(g, sa);
    peak = all.peak;
    ideal = all.makespan;
    const bytes half = all.peak / 2;
    budget = std::max(half, remat::checkmate<Backend>::lower_bound(g));
    if (budget > half) budget = smallest_fitting<Backend>(g, budget);
  }
  [[nodiscard]] bool at_minimum() const { return budget > peak / 2; }
};

template <class Backend>
remat::checkmate<Backend> planner(how h) {
  remat::checkmate<Backend> cm{};
  cm.time_limit = 60;
  cm.relax = h.relax;
  cm.auto_warm_start = h.warm;
  cm.threads = h.threads;
  return cm;
}

template <class Backend>
void run(benchmark::State& state, const remat::graph& g, how h) {
  const setting<Backend> at(g);
  const auto cm = planner<Backend>(h);
  double optimal = 0, makespan = 0, bound = 0;
  for (auto _ : state) {
    const auto r = cm.solve_detailed(g, at.budget);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    optimal = r->optimal ? 1 : 0;
    makespan = r->program.predicted_time;
    bound = r->bound.value_or(-std::numeric_limits<double>::infinity());
    benchmark::DoNotOptimize(r->program.ops.data());
  }
  state.counters["optimal"] = optimal;
  state.counters["makespan"] = makespan * 1e3;
  state.counters["bound"] = bound * 1e3;
  state.counters["overhead"] = makespan / at.ideal - 1;
  state.counters["budget"] = static_cast<double>(at.budget) / static_cast<double>(at.peak);
  state.counters["at_minimum"] = at.at_minimum() ? 1 : 0;
  state.counters["compute_nodes"] = g.compute_count();
}

/// Eight graphs of one size drawn with different seeds (seed 0 is the one the other benchmarks
/// use), solved exactly one after the other: the spread of solve times. Counters: mean_s and
/// max_s (seconds per solve, the budget search outside the timing), optimal (how many proven).
template <class Backend>
void spread(benchmark::State& state, bool residual) {
  const int n = static_cast<int>(state.range(0));
  std::vector<remat::graph> graphs;
  std::vector<bytes> budgets;
  for (int seed = 0; seed < 8; ++seed) {
    graphs.push_back(residual ? residual_graph(n, seed) : chain_graph(n, seed));
    // 50% may be infeasible above the per-node floor too: then the smallest budget that fits.
    budgets.push_back(
        smallest_fitting<Backend>(graphs.back(), setting<Backend>(graphs.back()).budget));
  }
  const auto cm = planner<Backend>({});
  double total = 0, worst = 0, optimal = 0;
  for (auto _ : state) {
    total = worst = optimal = 0;
    for (std::size_t i = 0; i < graphs.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto r = cm.solve_detailed(graphs[i], budgets[i]);
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r) {
        state.SkipWithError(r.message().c_str());
        return;
      }
      total += took;
      worst = std::max(worst, took);
      optimal += r->optimal ? 1 : 0;
    }
  }
  state.counters["mean_s"] = total / static_cast<double>(graphs.size());
  state.counters["max_s"] = worst;
  state.counters["optimal"] = optimal;
  state.counters["compute_nodes"] = graphs.front().compute_count();
}

template <class Backend>
void chain_exact(benchmark::State& s) {
  run<Backend>(s, chain_graph(static_cast<int>(s.range(0))), {});
}
template <class Backend>
void chain_relaxed(benchmark::State& s) {
  run<Backend>(s, chain_graph(static_cast<int>(s.range(0))), {.relax = true});
}
/// Without the automatic warm start, to measure what it brings.
template <class Backend>
void chain_exact_cold(benchmark::State& s) {
  run<Backend>(s, chain_graph(static_cast<int>(s.range(0))), {.warm = false});
}
/// Two solver threads (CBC's parallel tree search; lp_solve has one).
template <class Backend>
void chain_exact_threads2(benchmark::State& s) {
  run<Backend>(s, chain_graph(static_cast<int>(s.range(0))), {.threads = 2});
}
template <class Backend>
void chain_exact_spread(benchmark::State& s) {
  spread<Backend>(s, false);
}
template <class Backend>
void residual_exact_cold(benchmark::State& s) {
  run<Backend>(s, residual_graph(static_cast<int>(s.range(0))), {.warm = false});
}
template <class Backend>
void residual_exact(benchmark::State& s) {
  run<Backend>(s, residual_graph(static_cast<int>(s.range(0))), {});
}
template <class Backend>
void residual_relaxed(benchmark::State& s) {
  run<Backend>(s, residual_graph(static_cast<int>(s.range(0))), {.relax = true});
}
template <class Backend>
void residual_exact_spread(benchmark::State& s) {
  spread<Backend>(s, true);
}

/// An encoder-decoder of 2 + 2 layers (14 ops; every decoder layer reads the encoder's output),
/// with round times (profile 0) or those times each scaled by a factor drawn from [0.95, 1.05]
/// (profiles 1..: what measuring the same model again gives).
remat::graph encoder_decoder_profile(int profile) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(4000 + profile));
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  remat::forward_dag f{"encoder-decoder", 8 * MiB, {}};
  auto add = [&](std::string name, std::vector<std::string> in, double ms, bytes phantom_mib,
                 std::vector<std::string> reads) {
    const double t = profile == 0 ? ms * 1e-3 : ms * 1e-3 * noise(rng);
    f.ops.push_back({std::move(name), std::move(in), t, 2 * t, 32 * MiB, phantom_mib * MiB,
                     std::move(reads), 16 * MiB, 32 * MiB});
  };
  add("src", {"input"}, 1, 0, {});
  std::string enc = "src";
  for (int i = 1; i <= 2; ++i) {
    const std::string p = "enc" + std::to_string(i) + ".";
    add(p + "attn", {enc}, 3, 64, {enc, "output"});
    add(p + "mlp", {p + "attn"}, 4, 128, {p + "attn"});
    enc = p + "mlp";
  }
  add("tgt", {"input"}, 1, 0, {});
  std::string dec = "tgt";
  for (int i = 1; i <= 2; ++i) {
    const std::string p = "dec" + std::to_string(i) + ".";
    add(p + "self", {dec}, 3, 64, {dec});
    add(p + "cross", {p + "self", enc}, 3, 64, {p + "self", enc});
    add(p + "mlp", {p + "cross"}, 4, 128, {p + "cross"});
    dec = p + "mlp";
  }
  add("head", {dec}, 2, 0, {dec});
  add("loss", {"head"}, 0.5, 64, {});
  return remat::build_graph(f).value();
}

/// checkmate on 20 profiles of encoder_decoder_profile at 70 % of store-all, with relative_gap
/// range(0) / 1000: the spread of solve times between profiles of one model. Counters: min_s,
/// median_s, max_s, and worst_gap (the largest (makespan - bound) / makespan reported).
/// Before CBC's gap was checked during the root (CBC itself checks it between nodes only), a
/// gap of 1 % did not shorten the solves whose bound sat within it from the root on.
template <class Backend>
void profiles_spread(benchmark::State& state) {
  std::vector<double> took;
  double worst_gap = 0;
  remat::checkmate<Backend> cm{};
  cm.relative_gap = static_cast<double>(state.range(0)) / 1000;
  for (auto _ : state) {
    took.clear();
    worst_gap = 0;
    for (int p = 0; p < 20; ++p) {
      const remat::graph g = encoder_decoder_profile(p);
      const auto budget =
          static_cast<bytes>(0.7 * static_cast<double>(remat::peak_of_store_all(g)));
      const auto t0 = std::chrono::steady_clock::now();
      const auto r = cm.solve_detailed(g, budget);
      took.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!r) {
        state.SkipWithError(r.message().c_str());
        return;
      }
      if (r->bound)
        worst_gap = std::max(worst_gap,
                             (r->program.predicted_time - *r->bound) / r->program.predicted_time);
    }
  }
  std::sort(took.begin(), took.end());
  state.counters["min_s"] = took.front();
  state.counters["median_s"] = took[took.size() / 2];
  state.counters["max_s"] = took.back();
  state.counters["worst_gap"] = worst_gap;
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

#ifdef REMAT_HAS_CBC
using remat::milp::cbc;
BENCHMARK(chain_exact<cbc>)->Apply(sizes);
BENCHMARK(residual_exact<cbc>)->Apply(sizes);
BENCHMARK(chain_exact_cold<cbc>)->Apply(small_sizes);
BENCHMARK(residual_exact_cold<cbc>)->Apply(small_sizes);
BENCHMARK(chain_relaxed<cbc>)->Apply(sizes);
BENCHMARK(residual_relaxed<cbc>)->Apply(sizes);
BENCHMARK(chain_exact_threads2<cbc>)->Apply(small_sizes);
BENCHMARK(chain_exact_spread<cbc>)
    ->Arg(10)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(residual_exact_spread<cbc>)
    ->Arg(10)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(profiles_spread<cbc>)
    ->Arg(0)
    ->Arg(10)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(side_branch_find_minimum<cbc>)
    ->Args({4, 2})
    ->Args({6, 3})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif
#ifdef REMAT_HAS_LPSOLVE
using remat::milp::lpsolve;
BENCHMARK(chain_exact<lpsolve>)->Apply(sizes);
BENCHMARK(residual_exact<lpsolve>)->Apply(sizes);
BENCHMARK(chain_exact_cold<lpsolve>)->Apply(small_sizes);
BENCHMARK(residual_exact_cold<lpsolve>)->Apply(small_sizes);
BENCHMARK(chain_relaxed<lpsolve>)->Apply(sizes);
BENCHMARK(residual_relaxed<lpsolve>)->Apply(sizes);
#endif

BENCHMARK_MAIN();
