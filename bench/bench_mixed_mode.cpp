// Mixed Mode (docs/mixed-mode.md), in one run:
//   dp/<search>/<N>            the DP alone on the paper's two-mode operator chain
//                              (mixed_op_costs: N random ops, one in 10 with control flow, graph
//                              times 1-4, eager times +0-50 %, kept outputs of 1-3 slots) at 500
//                              slots: exact, dc (divide and conquer, Assumption 1) and
//                              dc_ternary (plus the ternary search over the split), N = 100,
//                              500, 2,000; the counter `cost` is the plan's, to set the
//                              accelerated searches' plans beside the exact one
//   chain_run/<chain>/<pct>/<o>  mixed_mode on an example chain (examples/chains/resnet_like.json,
//                              gpt_like.json) with every fourth stage marked control flow, at 90,
//                              75, 60 and 45 % of the store-all peak, with a dynamic runtime
//                              costing o = 1 or 10 % of the mean op's time per op it runs,
//                              against all-dynamic (dtr on the whole chain, that overhead on
//                              each op it runs) and all-planned (rotor, as if the flagged stages
//                              were static: what Mixed Mode may not do). The table is printed
//                              after the runs.
//
//   build/bench/bench_mixed_mode                                  (about 25 s on 2 cores, the
//                                                                 exact and dc DPs at 2,000 most)
//   build/bench/bench_mixed_mode --benchmark_filter=chain_run     (the table only)

#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/io/json.hpp>
#include <remat/policy/dtr.hpp>
#include <remat/policy/mixed_mode.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>

#ifndef REMAT_EXAMPLES_DIR
#error "bench_mixed_mode needs REMAT_EXAMPLES_DIR (bench/CMakeLists.txt)"
#endif

namespace {

using remat::bytes;

remat::mixed_op_costs op_chain(int n) {
  std::mt19937_64 rng(20261128);
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  remat::mixed_op_chain c;
  for (int l = 0; l < n; ++l) {
    const double tf = 1 + 3 * unit();
    c.graph_time.push_back(tf);
    c.eager_time.push_back(tf * (1 + 0.5 * unit()));
    c.kept_slots.push_back(1 + static_cast<std::int64_t>(rng() % 3));
    c.recompute_time.push_back(0.5 * tf);
    c.control_flow.push_back(rng() % 10 == 0 ? 1 : 0);
  }
  c.graph_segment_time = 2;
  c.eager_segment_time = 1;
  return *remat::mixed_op_costs::make(c);
}

void dp(benchmark::State& state, remat::mixed_search how) {
  const auto costs = op_chain(static_cast<int>(state.range(0)));
  std::optional<remat::mixed_plan> p;
  for (auto _ : state) {
    p = remat::mixed_dp(costs, 500, {.search = how});
    benchmark::ClobberMemory();
  }
  // (Not through DoNotOptimize: Google Benchmark 1.7's "+r,m" on a double read back garbage.)
  state.counters["cost"] = p ? p->cost : -1.0;
}

const remat::chain& example(const std::string& name) {
  static std::map<std::string, remat::chain> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  auto c = remat::io::load_chain(std::string(REMAT_EXAMPLES_DIR) + "/chains/" + name + ".json");
  if (!c) {
    std::fprintf(stderr, "bench_mixed_mode: %s\n", c.message().c_str());
    std::exit(1);
  }
  for (int l = 4; l < c->length(); l += 4)
    c->stages[static_cast<std::size_t>(l - 1)].control_flow = true;
  return cache.emplace(name, *c).first->second;
}

struct row {
  std::string chain;
  int pct = 0, overhead_pct = 0;
  std::string mixed, segments, dynamic, planned;
};
std::vector<row>& table() {
  static std::vector<row> t;
  return t;
}

std::string over(double time, double ideal) {
  char b[32];
  std::snprintf(b, sizeof b, "+%.1f %%", 100.0 * (time / ideal - 1));
  return b;
}

/// Args: the budget in % of the store-all peak, the dynamic runtime's overhead per op in % of the
/// mean op's time. Times count that overhead on every op a dynamic segment (or DTR) runs.
void chain_run(benchmark::State& state, const std::string& name) {
  const remat::chain& c = example(name);
  const int pct = static_cast<int>(state.range(0));
  const int overhead_pct = static_cast<int>(state.range(1));
  const bytes peak = remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak;
  const bytes budget = peak / 100 * pct;
  const double ideal = c.ideal_time();
  const double per_op = overhead_pct / 100.0 * ideal / (2.0 * c.length());
  const remat::mixed_mode<> policy{.dynamic = {.overhead = per_op}};
  remat::result<remat::solution<remat::mixed_mode_details>> s =
      remat::error{remat::status::infeasible, "not run", {}};
  for (auto _ : state) s = policy.solve_detailed(c, budget);
  row r{name, pct, overhead_pct, "", "", "no plan", "no plan"};
  if (s) {
    double extra = 0;
    int dyn = 0;
    for (const auto& sg : s->details.segments) {
      extra += sg.overhead;
      dyn += sg.mode == remat::segment_mode::dynamic;
    }
    r.mixed = over(s->program.predicted_time + extra, ideal);
    r.segments =
        std::to_string(s->details.segments.size()) + " (" + std::to_string(dyn) + " dynamic)";
  } else {
    r.mixed = std::string(remat::to_string(s.code()));
  }
  if (const auto d = remat::dtr<>{}.solve(remat::detail::chain_graph(c), budget)) {
    int runs = 0;
    for (const auto& i : d->ops) runs += i.is_compute() ? 1 : 0;
    r.dynamic = over(d->predicted_time + per_op * runs, ideal);
  }
  remat::chain plain = c;
  for (auto& st : plain.stages) st.control_flow = false;
  if (const auto p = remat::rotor{}.solve(plain, budget))
    r.planned = over(p->predicted_time, ideal);
  table().push_back(r);
}

void chain_args(benchmark::internal::Benchmark* b) {
  for (int overhead : {1, 10})
    for (int pct : {90, 75, 60, 45}) b->Args({pct, overhead});
  b->Iterations(1)->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(chain_run, resnet_like, std::string("resnet_like"))->Apply(chain_args);
BENCHMARK_CAPTURE(chain_run, gpt_like, std::string("gpt_like"))->Apply(chain_args);

}  // namespace

int main(int argc, char** argv) {
  for (auto how :
       {remat::mixed_search::exact, remat::mixed_search::dc, remat::mixed_search::dc_ternary})
    benchmark::RegisterBenchmark(("dp/" + std::string(remat::to_string(how))).c_str(), dp, how)
        ->Arg(100)
        ->Arg(500)
        ->Arg(2000)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!table().empty()) {
    std::printf(
        "\n| chain | budget | runtime overhead per op | mixed_mode | segments | all-dynamic "
        "(dtr) | all-planned (rotor, flags ignored) |\n| --- | --- | --- | --- | --- | --- | --- "
        "|\n");
    for (const row& r : table())
      std::printf("| %s | %d %% | %d %% | %s | %s | %s | %s |\n", r.chain.c_str(), r.pct,
                  r.overhead_pct, r.mixed.c_str(), r.segments.c_str(), r.dynamic.c_str(),
                  r.planned.c_str());
  }
}
