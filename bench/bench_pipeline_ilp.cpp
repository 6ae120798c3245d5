// The pipeline ILP (include/remat/policy/pipeline/ilp.hpp, MadPipe's phase 2) with CBC: solve
// time for 4, 6, 8 and 10 stages on P = 4 processors, with a 60 s limit (the thesis' phase 2).
// Each stage is two layers of a random chain: forward 1-5 ms, backward twice that, activations
// 1-8 MiB, weights 1-16 MiB, C = 3, links of 12 GB/s.
//   unlimited/N  memory unlimited: the allocation balances the loads of processors and links
//   memory/N     M = 85% of the largest processor peak of the best contiguous plan without a
//                memory limit (1F1B*, PipeDream's kind of plan): that plan no longer fits
//   memory_warm/N  the same, with the best contiguous 1F1B* plan that fits (its stages split
//                into the partition's) as the warm start (what contiguous_start_limit does by
//                itself when there are few contiguous allocations)
// Counters:
//   optimal      1 when CBC proved optimality within the limit
//   period_ms    the plan's period (replayed valid by the simulator)
//   bound_ms     CBC's proven lower bound; gap = (period - bound) / period
//   contiguous_ms  the best 1F1B* (Alg. 7) over the contiguous allocations of the same stages
//                (0 when none fits)
//   processors   processors the plan uses; solve_s the MILP's wall-clock time
//   bench/bench_pipeline_ilp --benchmark_filter='unlimited'
#include <algorithm>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/milp/cbc.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/pipeline/ilp.hpp>
#include <remat/sim/pipeline.hpp>

namespace {

using remat::bytes;
using remat::seconds;

constexpr bytes MiB = bytes{1} << 20;

remat::pipeline_problem random_pipeline(int layers, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ms(1, 5), act(1, 8), weights(1, 16);
  remat::chain c{"bench", 4 * MiB, {}};
  for (int l = 0; l < layers; ++l) {
    remat::stage s;
    s.forward_time = 1e-3 * ms(rng);
    s.backward_time = 2 * s.forward_time;
    s.output_bytes = act(rng) * MiB;
    s.saved_bytes = s.output_bytes;
    s.weight_bytes = weights(rng) * MiB;
    c.stages.push_back(s);
  }
  remat::pipeline_problem p;
  p.layers = std::move(c);
  p.processors = 4;
  p.bandwidth = 12e9;
  p.copies = 3;
  return p;
}

std::vector<std::pair<int, int>> two_layer_stages(int stages) {
  std::vector<std::pair<int, int>> out;
  for (int s = 0; s < stages; ++s) out.emplace_back(2 * s + 1, 2 * s + 2);
  return out;
}

/// The best 1F1B* plan (Alg. 7) over the contiguous allocations of the partition's stages.
std::optional<remat::pipeline_plan> best_contiguous(const remat::pipeline_problem& p,
                                                    const std::vector<std::pair<int, int>>& part) {
  const int n = static_cast<int>(part.size());
  std::optional<remat::pipeline_plan> best;
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    std::vector<int> lasts;
    for (int s = 0; s + 1 < n; ++s)
      if (mask & (1 << s)) lasts.push_back(part[static_cast<std::size_t>(s)].second);
    lasts.push_back(part.back().second);
    if (static_cast<int>(lasts.size()) > p.processors) continue;
    auto plan = remat::one_f_one_b_star_fit(p, remat::contiguous_stages(lasts));
    if (plan && (!best || plan->period < best->period)) best = *plan;
  }
  return best;
}

/// The plan on the partition's stages: each merged stage's F runs its parts' forwards back to
/// back, its B their backwards, at the same times.
remat::pipeline_plan split(const remat::pipeline_problem& p, const remat::pipeline_plan& plan,
                           const std::vector<std::pair<int, int>>& part) {
  using k = remat::pipeline_op_kind;
  remat::pipeline_plan out;
  out.period = plan.period;
  std::vector<int> first_part;  // per merged stage, its first part (0-based)
  for (const auto& st : plan.stages) {
    first_part.push_back(static_cast<int>(out.stages.size()));
    for (const auto& [f, l] : part)
      if (f >= st.first && l <= st.last) out.stages.push_back({f, l, st.processor});
  }
  auto add = [&](k kind, int stage, seconds start, int shift) {
    for (; start >= plan.period; --shift) start -= plan.period;  // a period later
    out.ops.push_back({kind, stage, start, shift});
  };
  auto work = [&](int s, bool fwd) {
    seconds t = 0;
    const auto& st = out.stages[static_cast<std::size_t>(s)];
    for (int l = st.first; l <= st.last; ++l) t += fwd ? p.layers.uf(l) : p.layers.ub(l);
    return t;
  };
  for (const auto& op : plan.ops) {
    const int lo = first_part[static_cast<std::size_t>(op.stage - 1)];
    const int hi = op.stage < static_cast<int>(plan.stages.size())
                       ? first_part[static_cast<std::size_t>(op.stage)]
                       : static_cast<int>(out.stages.size());
    seconds t = op.start;
    if (op.kind == k::forward)
      for (int s = lo; s < hi; t += work(s, true), ++s) add(k::forward, s + 1, t, op.shift);
    else if (op.kind == k::backward)
      for (int s = hi - 1; s >= lo; t += work(s, false), --s) add(k::backward, s + 1, t, op.shift);
    else
      add(op.kind, hi, op.start, op.shift);
  }
  return out;
}

void run(benchmark::State& state, bool limited, bool warm = false) {
  const int n = static_cast<int>(state.range(0));
  remat::pipeline_problem p = random_pipeline(2 * n, 2021);
  const auto part = two_layer_stages(n);
  if (limited) {
    const auto free_plan = best_contiguous(p, part);
    const auto peaks = remat::sim::simulate_pipeline(p, *free_plan).processor_peaks;
    p.memory = static_cast<bytes>(
        0.85 * static_cast<double>(*std::max_element(peaks.begin(), peaks.end())));
    state.counters["memory_MiB"] = static_cast<double>(p.memory) / MiB;
  }
  remat::pipeline_ilp_options o;
  o.contiguous_start_limit = 0;  // the ILP alone, unless warm
  if (warm) {
    const auto fit = best_contiguous(p, part);
    if (!fit) {
      state.SkipWithError("no contiguous plan fits");
      return;
    }
    o.warm_start = split(p, *fit, part);
  }
  remat::result<remat::pipeline_ilp_result> r = remat::error{remat::status::solver_error, "", {}};
  for (auto _ : state) {
    r = remat::pipeline_ilp_schedule<remat::milp::cbc>(p, part, o);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
  }
  state.counters["optimal"] = r->optimal ? 1 : 0;
  state.counters["period_ms"] = r->plan.period * 1e3;
  state.counters["bound_ms"] = r->bound * 1e3;
  state.counters["gap"] = r->gap;
  state.counters["solve_s"] = r->solve_seconds;
  state.counters["processors"] = r->processors_used;
  const auto c = best_contiguous(p, part);
  state.counters["contiguous_ms"] = c ? c->period * 1e3 : 0;
}

void unlimited(benchmark::State& state) { run(state, false); }
void memory(benchmark::State& state) { run(state, true); }
void memory_warm(benchmark::State& state) { run(state, true, true); }

}  // namespace

BENCHMARK(unlimited)->Arg(4)->Arg(6)->Arg(8)->Arg(10)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(memory)->Arg(4)->Arg(6)->Arg(8)->Arg(10)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(memory_warm)->Arg(4)->Arg(6)->Arg(8)->Arg(10)->Iterations(1)->Unit(benchmark::kSecond);

BENCHMARK_MAIN();
