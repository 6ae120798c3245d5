// The offloading policies (docs/offloading.md) against rotor, in one run:
//   curve/<chain>/<GB/s>/<k>   budget -> overhead (time / sum(u_F + u_B)) of rotor, offload_dynprog
//                              and pofo on the example chains (examples/chains/resnet_like.json,
//                              gpt_like.json) at 12, 24 and 36 GB/s, at 8 budgets from the smallest
//                              any of them plans to the store-all peak; the Markdown table of the
//                              whole curve is printed after the benchmarks, with the plan pofo's
//                              portfolio kept (its DP's, or rotor's, DYNPROG's, autocapper's)
//   threshold/resnet_like/12   pofo on resnet_like at 12 GB/s at budgets 1% of the store-all peak
//                              apart, from the smallest it plans up: the smallest within 20%
//                              overhead and the factor it divides the activation memory by there
//                              (printed after the table, with the largest single stage's need)
//   solve/<policy>/<N>         solve time at the default slots on chains of 20, 50 and 100 stages
//                              (resnet_like's stages repeated), 12 GB/s: pofo (with its portfolio)
//                              and pofo_dp (portfolio = false: the DP alone) at 40% of the
//                              store-all peak; offload_dynprog there (it does not fit: the time of
//                              its refusal, planned = 0) and half way from its own minimum to the
//                              peak
//
//   build/bench/bench_offload                     (everything: about 3 minutes on 2 cores)
//   build/bench/bench_offload --benchmark_filter='curve|threshold'   (the tables only)

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <remat/io/json.hpp>
#include <remat/policy/offload.hpp>
#include <remat/policy/rotor.hpp>

#ifndef REMAT_EXAMPLES_DIR
#error "bench_offload needs REMAT_EXAMPLES_DIR (bench/CMakeLists.txt)"
#endif

namespace {

using remat::bytes;

const remat::chain& example(const std::string& name) {
  static std::map<std::string, remat::chain> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  auto c = remat::io::load_chain(std::string(REMAT_EXAMPLES_DIR) + "/chains/" + name + ".json");
  if (!c) {
    std::fprintf(stderr, "bench_offload: %s\n", c.message().c_str());
    std::exit(1);
  }
  return cache.emplace(name, *c).first->second;
}

bytes store_all_peak(const remat::chain& c) {
  return remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak;
}

/// resnet_like's stages but the loss, repeated to n - 1 stages, then its loss.
remat::chain repeated(int n) {
  const remat::chain& base = example("resnet_like");
  remat::chain c = base;
  c.name = "resnet_like x" + std::to_string(n);
  c.stages.clear();
  for (int i = 0; static_cast<int>(c.stages.size()) < n - 1; i = (i + 1) % (base.length() - 1))
    c.stages.push_back(base.stages[static_cast<std::size_t>(i)]);
  c.stages.push_back(base.stages.back());
  return c;
}

struct point {
  std::string chain;
  double gbps = 0;
  bytes budget = 0;
  double fraction = 0;                         // of the store-all peak
  double rotor = -1, dynprog = -1, pofo = -1;  // overheads; -1: does not fit (plans: >= 0)
  double pofo_model = -1, overlap = 0;
  bytes offloaded = 0;
  std::string kept = {};  // the plan pofo's portfolio returned
};
std::vector<point> curve;

/// Which plan pofo returned: its DP's, or the portfolio's (its notes say which).
std::string kept_plan(const remat::offload_plan& q) {
  for (const std::string& n : q.notes) {
    if (n.rfind("rotor's plan", 0) == 0) return "rotor";
    if (n.rfind("DYNPROG's plan", 0) == 0) return "DYNPROG";
    if (n.rfind("autocapper's plan", 0) == 0) return "autocapper";
    if (n.find("within rounding of the minimum") != std::string::npos)
      return n.find("rotor's plan") != std::string::npos ? "rotor (fallback)" : "min-memory";
  }
  return "DP";
}

/// Overheads below a nanosecond's worth are rounding: 0.
double overhead_of(double time, double ideal) {
  const double o = time / ideal - 1;
  return o < 1e-9 ? 0.0 : o;
}

bytes lowest(const remat::chain& c, double bw) {
  return std::min(remat::rotor{}.minimum_budget(c),
                  remat::pofo{.hw = remat::machine::with_bandwidth(bw)}.minimum_budget(c));
}

void curve_point(benchmark::State& st, const std::string& name, double gbps, int k) {
  const remat::chain& c = example(name);
  const double bw = gbps * 1e9;
  const bytes peak = store_all_peak(c), lo = lowest(c, bw);
  const bytes budget = lo + (peak - lo) * k / 7;
  point p{.chain = name,
          .gbps = gbps,
          .budget = budget,
          .fraction = static_cast<double>(budget) / static_cast<double>(peak)};
  const double ideal = c.ideal_time();
  for (auto _ : st) {
    if (auto r = remat::rotor{}.solve(c, budget)) p.rotor = overhead_of(r->predicted_time, ideal);
    if (auto d = remat::offload_dynprog{.hw = remat::machine::with_bandwidth(bw)}.solve_detailed(
            c, budget))
      p.dynprog = overhead_of(d->program.predicted_time, ideal);
    auto q = remat::pofo{.hw = remat::machine::with_bandwidth(bw)}.solve_detailed(c, budget);
    if (!q) {
      st.SkipWithError(q.message().c_str());
      return;
    }
    p.pofo = overhead_of(q->program.predicted_time, ideal);
    p.pofo_model = overhead_of(q->details.model_time, ideal);
    p.overlap = q->details.overlap();
    p.offloaded = q->details.offloaded_bytes;
    p.kept = kept_plan(*q);
  }
  st.counters["budget"] = p.fraction;
  st.counters["rotor"] = p.rotor;
  st.counters["dynprog"] = p.dynprog;
  st.counters["pofo"] = p.pofo;
  st.counters["overlap"] = p.overlap;
  curve.push_back(p);
}

/// pofo on resnet_like at 12 GB/s, budgets 1% of the peak apart from the smallest it plans: the
/// first within 20% overhead (0: none).
struct threshold_result {
  bytes budget = 0;
  double overhead = -1;
  std::string kept;
  int solves = 0;
} threshold;

void threshold_scan(benchmark::State& st) {
  const remat::chain& c = example("resnet_like");
  const bytes peak = store_all_peak(c),
              lo = remat::pofo{.hw = remat::machine::with_bandwidth(12e9)}.minimum_budget(c);
  const double ideal = c.ideal_time();
  for (auto _ : st) {
    threshold = {};
    for (int i = 0;; ++i) {
      const bytes budget = std::min(peak, lo + peak * i / 100);
      ++threshold.solves;
      auto q = remat::pofo{.hw = remat::machine::with_bandwidth(12e9)}.solve_detailed(c, budget);
      if (q && overhead_of(q->program.predicted_time, ideal) <= 0.2) {
        threshold.budget = budget;
        threshold.overhead = overhead_of(q->program.predicted_time, ideal);
        threshold.kept = kept_plan(*q);
        break;
      }
      if (budget == peak) break;
    }
  }
  st.counters["budget"] = static_cast<double>(threshold.budget) / static_cast<double>(peak);
  st.counters["overhead"] = threshold.overhead;
  st.counters["factor"] =
      threshold.budget > 0 ? static_cast<double>(peak) / static_cast<double>(threshold.budget) : 0;
  st.counters["solves"] = threshold.solves;
}

enum class solver { pofo, pofo_dp, dynprog, dynprog_fits };

void solve_time(benchmark::State& st, solver which, int n) {
  const remat::chain c = repeated(n);
  const bytes peak = store_all_peak(c);
  bytes budget = peak * 2 / 5;
  if (which == solver::dynprog_fits) {
    // Half way from DYNPROG's minimum (its refusal says it) to the store-all peak.
    const auto r =
        remat::offload_dynprog{.hw = remat::machine::with_bandwidth(12e9)}.solve_detailed(c, 1);
    budget = r ? 1 : r.err().minimum_budget.value_or(peak);
    budget += (peak - budget) / 2;
  }
  bool planned = false;
  for (auto _ : st) {
    remat::result<remat::offload_plan> p = remat::error{};
    if (which == solver::pofo)
      p = remat::pofo{.hw = remat::machine::with_bandwidth(12e9)}.solve_detailed(c, budget);
    if (which == solver::pofo_dp)
      p = remat::pofo{.hw = remat::machine::with_bandwidth(12e9), .portfolio = false}
              .solve_detailed(c, budget);
    if (which == solver::dynprog || which == solver::dynprog_fits)
      p = remat::offload_dynprog{.hw = remat::machine::with_bandwidth(12e9)}.solve_detailed(c,
                                                                                            budget);
    planned = static_cast<bool>(p);
    if (!p && which != solver::dynprog) st.SkipWithError(p.message().c_str());
    benchmark::DoNotOptimize(p);
  }
  st.counters["N"] = n;
  st.counters["budget"] = static_cast<double>(budget) / static_cast<double>(peak);
  st.counters["planned"] = planned;
}

std::string cell(double overhead) {
  if (overhead < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", 100 * overhead);
  return b;
}

void print_curve() {
  if (curve.empty()) return;
  std::printf(
      "\n| chain | GB/s | budget MiB | of peak | rotor | DYNPROG | pofo | pofo (model) | pofo's "
      "plan | pofo offloads MiB | hidden |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const point& p : curve)
    std::printf("| %s | %.0f | %.0f | %.2f | %s | %s | %s | %s | %s | %.0f | %.0f%% |\n",
                p.chain.c_str(), p.gbps, static_cast<double>(p.budget) / (1 << 20), p.fraction,
                cell(p.rotor).c_str(), cell(p.dynprog).c_str(), cell(p.pofo).c_str(),
                cell(p.pofo_model).c_str(), p.kept.c_str(),
                static_cast<double>(p.offloaded) / (1 << 20), 100 * p.overlap);
  std::printf(
      "\noverheads: program time / sum(u_F + u_B) - 1 (the simulator's, whole-tensor transfers); "
      "pofo (model): "
      "the time of the plan pofo kept in the model that planned it (its DP's: pofo's model); -: no "
      "plan\n");
  // The thesis' claim (ch. 4): activation memory divided by 4-6 for under 20% overhead at 12 GB/s.
  const remat::chain& c = example("resnet_like");
  const bytes peak = store_all_peak(c);
  for (const point& p : curve) {
    if (p.chain != "resnet_like" || p.gbps != 12 || p.pofo < 0 || p.pofo > 0.2) continue;
    std::printf(
        "\nresnet_like at 12 GB/s: the smallest budget of the curve with pofo within 20%%: %.0f "
        "MiB, %.2fx "
        "less than store-all (%+.1f%%)\n",
        static_cast<double>(p.budget) / (1 << 20),
        static_cast<double>(peak) / static_cast<double>(p.budget), 100 * p.pofo);
    break;
  }
  if (threshold.solves > 0) {
    if (threshold.budget > 0)
      std::printf(
          "resnet_like at 12 GB/s, budgets 1%% of the peak apart (%d solves): the smallest with "
          "pofo within 20%%: "
          "%.0f MiB (%.3f of the peak), %+.1f%% (%s's plan): activation memory divided by %.2f\n",
          threshold.solves, static_cast<double>(threshold.budget) / (1 << 20),
          static_cast<double>(threshold.budget) / static_cast<double>(peak),
          100 * threshold.overhead, threshold.kept.c_str(),
          static_cast<double>(peak) / static_cast<double>(threshold.budget));
    else
      std::printf("resnet_like at 12 GB/s: no budget within 20%% below the peak\n");
  }
  // What no schedule can go below: one stage's own working set (its input a_{l-1}, abar_l, and
  // for B_l the gradients and overhead).
  bytes stage = 0;
  int largest = 0;
  for (int l = 1; l <= c.length(); ++l) {
    const bytes need = std::max(c.a(l - 1) + c.abar(l) + c.of_all(l),
                                c.a(l - 1) + c.abar(l) + c.delta(l) + c.delta(l - 1) + c.ob(l));
    if (need > stage) {
      stage = need;
      largest = l;
    }
  }
  std::printf(
      "resnet_like: store-all %.0f MiB, rotor's minimum %.0f MiB, pofo's %.0f MiB (%.2fx less than "
      "store-all); the largest single stage alone (its input, all it keeps for its backward, the "
      "gradients, "
      "its overhead) needs %.0f MiB: stage %d '%s', so no schedule divides the activation memory "
      "by more than "
      "%.2f\n",
      static_cast<double>(peak) / (1 << 20),
      static_cast<double>(remat::rotor{}.minimum_budget(c)) / (1 << 20),
      static_cast<double>(remat::pofo{}.minimum_budget(c)) / (1 << 20),
      static_cast<double>(peak) / static_cast<double>(remat::pofo{}.minimum_budget(c)),
      static_cast<double>(stage) / (1 << 20), largest, c.at(largest).name.c_str(),
      static_cast<double>(peak) / static_cast<double>(stage));
}

}  // namespace

int main(int argc, char** argv) {
  for (const std::string name : {"resnet_like", "gpt_like"})
    for (double gbps : {12.0, 24.0, 36.0})
      for (int k = 0; k <= 7; ++k)
        benchmark::RegisterBenchmark(
            ("curve/" + name + "/" + std::to_string(static_cast<int>(gbps)) + "/" +
             std::to_string(k))
                .c_str(),
            [=](benchmark::State& st) { curve_point(st, name, gbps, k); })
            ->Iterations(1)
            ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("threshold/resnet_like/12", threshold_scan)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  const std::pair<solver, const char*> solvers[] = {{solver::pofo, "pofo"},
                                                    {solver::pofo_dp, "pofo_dp"},
                                                    {solver::dynprog, "offload_dynprog"},
                                                    {solver::dynprog_fits, "offload_dynprog_fits"}};
  for (int n : {20, 50, 100})
    for (const auto& [which, name] : solvers)
      benchmark::RegisterBenchmark((std::string("solve/") + name + "/" + std::to_string(n)).c_str(),
                                   [=](benchmark::State& st) { solve_time(st, which, n); })
          // A few solves each, one at 100 stages where pofo takes about a minute.
          ->Iterations(n >= 100 && (which == solver::pofo || which == solver::pofo_dp) ? 1 : 3)
          ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_curve();
}
