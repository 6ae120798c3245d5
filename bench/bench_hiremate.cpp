// hiremate (include/remat/policy/hiremate.hpp) on graphs that are not sequences, at op
// granularity (the zoo's generators, RTX3060 roofline): the encoder-decoder Transformer
// (include/remat/zoo/transformer.hpp; "encdec<L>": L encoder and L decoder layers, the base
// model's shapes) and the U-Net (include/remat/zoo/unet.hpp, its defaults).
//
//   solve/<model>/<percent>   hiremate<cbc> (default knobs) at a percentage of the store-all
//                             peak: its solve time; counters overhead, nodes (ops and data),
//                             levels, level<k>_s (the seconds of level k's options, each level
//                             below the top), top_s (the top's H-ILP), tightened
//   quality/<model>/<policy>/<k>  the policies at five budgets k = 0..4: 90, 75, 60, 45 and
//                             30 % of the store-all peak (budget counter: the fraction):
//                               hiremate   hiremate<cbc>
//                               rockmate   rockmate<checkmate<cbc>> (one block of most of the
//                                          graph: its 600 s limit)
//                               relax      checkmate<cbc> with relax (LP + rounding), 600 s
//                               exact      checkmate<cbc>, 600 s limit; optimal = 1 when proven
//                             overhead = predicted makespan / store-all's - 1, or -1 when the
//                             policy has no plan (below its minimum, or none in its limit)
//   minimum/<model>/<policy>  the policy's minimum budget (budget_too_small's), as a fraction
//   scaling/<model>           hiremate<cbc> at 80% of the store-all peak (the small encoder-
//                             decoders' logits put their minimum above half), the solve time by the
//                             graph's nodes (ops and data): the U-Net with one level (118
//                             nodes), encoder-decoders of 1 + 1, 4 + 4, 12 + 12 and 45 + 45
//                             layers (278, 953, 2,753 and 10,178 nodes)
//
//   threads/<backend>/<n>     hiremate<cbc> or hiremate<lpsolve> with n threads on GPT-2 with
//                             2 layers (the zoo's, RTX3060) at 70 %, limits 8 / 12: the levels'
//                             independent H-ILPs side by side (lp_solve's) or one at a time
//                             (CBC's, serialised: docs/milp.md); counters overhead, level1_s...
//
//   build/bench/bench_hiremate --benchmark_filter='solve/encdec12'
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/milp/cbc.hpp>
#ifdef REMAT_HAS_LPSOLVE
#include <remat/milp/lpsolve.hpp>
#endif
#include <remat/policy/checkmate.hpp>
#include <remat/policy/hiremate.hpp>
#include <remat/policy/rockmate.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/gpt2.hpp>
#include <remat/zoo/transformer.hpp>
#include <remat/zoo/unet.hpp>

#include "graph_planner_bench.hpp"

namespace {

using remat::bytes;
using remat_bench::minimum_of;
using remat_bench::problem;
using remat_bench::report;

/// "encdec<L>" (L + L layers), "unet" (the defaults) or "unet<D>" (D levels).
const problem& model(const std::string& name) {
  static std::vector<std::pair<std::string, problem>> cache;
  for (const auto& [n, p] : cache)
    if (n == name) return p;
  const auto& device = *remat::zoo::find_device("RTX3060");
  remat::result<remat::forward_dag> f = remat::error{};
  if (name == "gpt2_2") {
    f = remat::zoo::gpt2({.layers = 2}, device);
  } else if (name.rfind("encdec", 0) == 0) {
    const int layers = std::stoi(name.substr(6));
    f = remat::zoo::encoder_decoder({.encoder_layers = layers, .decoder_layers = layers}, device);
  } else {
    remat::zoo::unet_config c;
    if (name.size() > 4) c.levels = std::stoi(name.substr(4));
    f = remat::zoo::unet(c, device);
  }
  problem p = remat_bench::make_problem(*remat::build_graph(*f));
  cache.emplace_back(name, std::move(p));
  return cache.back().second;
}

using hiremate_cbc = remat::hiremate<remat::milp::cbc>;
using rockmate_cbc = remat::rockmate<remat::checkmate<remat::milp::cbc>>;

/// hiremate at the budget, with the seconds each level took (from its progress reports).
template <class H = hiremate_cbc>
void planned(benchmark::State& st, const problem& p, bytes budget, H h = {}) {
  std::vector<double> level_start;
  h.progress = [&](const remat::hiremate_progress& r) {
    // The levels below the top (the top's H-ILP is timed apart: top_s).
    while (r.level < r.levels && static_cast<int>(level_start.size()) < r.level)
      level_start.push_back(r.elapsed);
  };
  for (auto _ : st) {
    level_start.clear();
    auto plan = h.solve_detailed(p.g, budget);
    if (!plan) {
      st.SkipWithError(plan.message().c_str());
      return;
    }
    report(st, p, budget, plan->program);
    st.counters["nodes"] = p.g.compute_count() + p.g.data_count();
    st.counters["levels"] = plan->details.levels;
    level_start.push_back(plan->details.options_time);
    for (std::size_t l = 0; l + 1 < level_start.size(); ++l)
      st.counters["level" + std::to_string(l + 1) + "_s"] = level_start[l + 1] - level_start[l];
    st.counters["top_s"] = plan->details.top_time;
    st.counters["tightened"] = plan->details.tightened;
  }
}

void solve(benchmark::State& st, const std::string& name, double fraction) {
  const problem& p = model(name);
  planned(st, p, static_cast<bytes>(fraction * static_cast<double>(p.peak)));
}

template <class Backend>
void threads(benchmark::State& st, int n) {
  const problem& p = model("gpt2_2");
  remat::hiremate<Backend> h;
  h.partitioner.limits = {.lower = 8, .top = 12};
  h.threads = n;
  planned(st, p, p.peak * 7 / 10, h);
}

void quality(benchmark::State& st, const std::string& name, const std::string& policy, int k) {
  const problem& p = model(name);
  constexpr double shares[] = {0.9, 0.75, 0.6, 0.45, 0.3};
  const auto budget =
      static_cast<bytes>(shares[static_cast<std::size_t>(k)] * static_cast<double>(p.peak));
  for (auto _ : st) {
    remat::result<remat::schedule> s = remat::error{};
    if (policy == "hiremate") s = hiremate_cbc{}.solve(p.g, budget);
    if (policy == "rockmate") {
      rockmate_cbc r;
      r.time_limit = 600;
      s = r.solve(p.g, budget);
    }
    if (policy == "relax" || policy == "exact")
      s = remat_bench::checkmate_plan(st, p.g, budget, policy == "relax");
    report(st, p, budget, s);
  }
}

void minimum(benchmark::State& st, const std::string& name, const std::string& policy) {
  const problem& p = model(name);
  for (auto _ : st) {
    bytes m = -1;
    if (policy == "hiremate") m = minimum_of([&](bytes b) { return hiremate_cbc{}.solve(p.g, b); });
    if (policy == "rockmate") {
      rockmate_cbc r;
      r.time_limit = 600;
      m = minimum_of([&](bytes b) { return r.solve(p.g, b); });
    }
    if (policy == "exact")
      m = minimum_of([&](bytes b) {
        return remat::checkmate<remat::milp::cbc>{.time_limit = 600, .find_minimum = true}.solve(
            p.g, b);
      });
    st.counters["budget"] = static_cast<double>(m) / static_cast<double>(p.peak);
    st.counters["bytes"] = static_cast<double>(m);
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto add = [](const std::string& name, auto f) {
    benchmark::RegisterBenchmark(name.c_str(), f)->Iterations(1)->Unit(benchmark::kSecond);
  };
  for (const std::string m : {"encdec12", "encdec6", "unet"})
    for (double f : {0.5, 0.7})
      add("solve/" + m + "/" + std::to_string(static_cast<int>(f * 100)),
          [=](benchmark::State& st) { solve(st, m, f); });
  for (const std::string m : {"encdec6", "unet"}) {
    for (const std::string policy : {"hiremate", "rockmate", "exact"})
      add("minimum/" + m + "/" + policy, [=](benchmark::State& st) { minimum(st, m, policy); });
    for (const std::string policy : {"hiremate", "rockmate", "relax", "exact"})
      for (int k = 0; k < 5; ++k)
        add("quality/" + m + "/" + policy + "/" + std::to_string(k),
            [=](benchmark::State& st) { quality(st, m, policy, k); });
  }
  for (int n : {1, 2}) {
    add("threads/cbc/" + std::to_string(n),
        [=](benchmark::State& st) { threads<remat::milp::cbc>(st, n); });
#ifdef REMAT_HAS_LPSOLVE
    add("threads/lpsolve/" + std::to_string(n),
        [=](benchmark::State& st) { threads<remat::milp::lpsolve>(st, n); });
#endif
  }
  for (const std::string m : {"unet1", "encdec1", "encdec4", "encdec12", "encdec45"})
    add("scaling/" + m, [=](benchmark::State& st) { solve(st, m, 0.8); });
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
