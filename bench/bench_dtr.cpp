// DTR [DTR21] against the planners, and in the executor's dynamic mode.
//
//   predicted/<problem>/<policy>/<percent>
//       the predicted overhead of a policy's program (its simulated makespan over the ideal time,
//       every op once, minus 1; -1: no plan) at a percentage of store-all's peak (90, 75, 60,
//       45, 30), on the example chains (examples/chains/gpt_like.json, resnet_like.json: rotor on
//       the chain, dtr and rockmate on the chain's graph) and the GPT-2 graph
//       (examples/graphs/gpt2_4layer.json: dtr and rockmate). Policies: dtr (h_dtr), dtr_size,
//       dtr_lru, rotor, rockmate<checkmate<cbc>> (default knobs). <percent> "minimum": at the
//       policy's own minimum budget (dtr's and rotor's minimum_budget, rockmate's
//       budget_too_small). After the run a table of every overhead side by side is printed.
//   step/<mode>/<percent>
//       time per training step of the host demo model (examples/eigen's residual stack with
//       dropout: 8 blocks, width 256, hidden 1024, batch 64) at a percentage of store-all's peak
//       (0: plain training by hand, eg::backprop, no budget):
//         plain    eg::backprop, the reference
//         rotor    rotor's plan at the budget, through the executor
//         dtr      the dtr policy's program at the budget, through the executor (DTR's decisions
//                  taken ahead of time)
//         dynamic  the executor's dynamic mode at the budget (DTR's decisions at run time)
//       counters: computes (instructions that run an op) over the ideal's, measured peak over
//       the budget.
//
//   build/bench/bench_dtr --benchmark_filter=predicted
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>
#include <eigen/models.hpp>

#include <remat/exec.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/milp/cbc.hpp>
#include <remat/policy/checkmate.hpp>
#include <remat/policy/dtr.hpp>
#include <remat/policy/rockmate.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>

#include "host_model.hpp"

namespace {

using remat::bytes;

// --- predicted overheads --------------------------------------------------------------------

struct problem {
  std::string name;
  std::optional<remat::chain> c;  // a chain's; none for a graph file
  remat::graph g;                 // the chain's graph, or the graph file's
};

const std::vector<problem>& problems() {
  static const std::vector<problem> all = [] {
    const std::string dir = REMAT_EXAMPLES_DIR;
    std::vector<problem> v;
    for (const char* name : {"gpt_like", "resnet_like"}) {
      auto c = remat::io::load_chain(dir + "/chains/" + name + ".json").value();
      auto g = remat::build_graph(c).value();
      v.push_back({name, std::move(c), std::move(g)});
    }
    v.push_back({"gpt2_4layer", std::nullopt,
                 remat::io::load_graph(dir + "/graphs/gpt2_4layer.json").value()});
    return v;
  }();
  return all;
}

constexpr int percents[] = {90, 75, 60, 45, 30};
constexpr int at_minimum = 0;  // a policy's own minimum
const std::vector<std::string> policy_names = {"dtr", "dtr_size", "dtr_lru", "rotor", "rockmate"};

/// The program of policy `which` for problem p at `budget` (0: at the policy's own minimum,
/// written to *least); none for rotor on a graph file.
std::optional<remat::result<remat::schedule>> plan_of(const problem& p, const std::string& which,
                                                      bytes budget, bytes* least) {
  auto at = [&](const auto& policy, const auto& problem, bytes minimum) {
    *least = budget > 0 ? budget : minimum;
    return policy.solve(problem, *least);
  };
  auto dtr_with = [&](remat::dtr_heuristic h) {
    remat::dtr<> d;
    d.heuristic = h;
    return at(d, p.g, budget > 0 ? 0 : d.minimum_budget(p.g));
  };
  if (which == "dtr") return dtr_with(remat::h_dtr{});
  if (which == "dtr_size") return dtr_with(remat::h_size{});
  if (which == "dtr_lru") return dtr_with(remat::h_lru{});
  if (which == "rotor") {
    if (!p.c) return std::nullopt;
    return at(remat::rotor{}, *p.c, budget > 0 ? 0 : remat::rotor{}.minimum_budget(*p.c));
  }
  const remat::rockmate<remat::checkmate<remat::milp::cbc>> r;
  bytes minimum = 0;
  if (budget == 0) {
    const auto none = r.solve(p.g, 0);
    minimum = none ? 0 : none.err().minimum_budget.value_or(0);
  }
  return at(r, p.g, minimum);
}

/// (problem, policy, percent) -> (overhead, -1: no plan; budget as a share of store-all's), for
/// the table printed at the end; percent 0 is the policy's own minimum.
std::map<std::tuple<std::string, std::string, int>, std::pair<double, double>>& table() {
  static std::map<std::tuple<std::string, std::string, int>, std::pair<double, double>> t;
  return t;
}

void predicted(benchmark::State& st, const problem* p, std::string policy, int percent) {
  const bytes budget = percent > 0 ? remat::fraction_of_store_all(p->g, percent / 100.0) : 0;
  std::optional<remat::result<remat::schedule>> s;
  bytes used = 0;
  for (auto _ : st) s = plan_of(*p, policy, budget, &used);
  if (!s) {
    st.SkipWithError("rotor plans chains only");
    return;
  }
  const double overhead = *s ? (*s)->predicted_time / p->g.ideal_time() - 1 : -1;
  const double share =
      static_cast<double>(used) / static_cast<double>(remat::peak_of_store_all(p->g));
  st.counters["overhead"] = overhead;
  st.counters["budget_share"] = share;
  if (!*s) st.SetLabel(s->message());
  table()[{p->name, policy, percent}] = {overhead, share};
}

void print_table() {
  if (table().empty()) return;
  std::printf("\npredicted overhead over the ideal time (-: no plan at that budget)\n");
  for (const auto& p : problems()) {
    std::printf("\n%s (store-all's peak %lld bytes, ideal time %.4g s)\n| budget |", p.name.c_str(),
                static_cast<long long>(remat::peak_of_store_all(p.g)), p.g.ideal_time());
    for (const auto& n : policy_names) std::printf(" %s |", n.c_str());
    std::printf("\n|---|");
    for (std::size_t i = 0; i < policy_names.size(); ++i) std::printf("---|");
    for (int percent : percents) {
      std::printf("\n| %d %% |", percent);
      for (const auto& n : policy_names) {
        const auto it = table().find({p.name, n, percent});
        if (it == table().end() || it->second.first < 0)
          std::printf(" - |");
        else
          std::printf(" +%.1f %% |", 100 * it->second.first);
      }
    }
    std::printf("\n| minimum |");
    for (const auto& n : policy_names) {
      const auto it = table().find({p.name, n, 0});
      if (it == table().end() || it->second.first < 0)
        std::printf(" - |");
      else
        std::printf(" %.1f %%: +%.1f %% |", 100 * it->second.second, 100 * it->second.first);
    }
    std::printf("\n");
  }
}

// --- measured time per step -----------------------------------------------------------------

using namespace remat_bench::host_model;
constexpr float dropout = 0.1f;

void step(benchmark::State& st, std::string mode) {
  const remat::chain& c = profiled_chain(dropout);
  static const remat::graph g = remat::build_graph(c).value();
  const bytes budget = remat::fraction_of_store_all(c, static_cast<double>(st.range(0)) / 100.0);
  eg::model m = build(dropout);
  remat::exec::host_backend b;
  if (mode == "plain") {
    for (auto _ : st) {
      st.PauseTiming();
      eg::zero_grad(m);
      eg::tensor x = input(b);
      st.ResumeTiming();
      benchmark::DoNotOptimize(eg::backprop(m, x, b));
    }
    return;
  }
  std::optional<remat::schedule> plan;
  if (mode == "rotor") {
    auto s = remat::rotor{}.solve(c, budget);
    if (!s) return st.SkipWithError(s.message().c_str());
    plan = *s;
  } else if (mode == "dtr") {
    auto s = remat::dtr<>{}.solve(g, budget);
    if (!s) return st.SkipWithError(s.message().c_str());
    plan = *s;
  }
  remat::exec::executor ex(m, c, b);
  double computes = 0, peak = 0;
  for (auto _ : st) {
    st.PauseTiming();
    eg::zero_grad(m);
    eg::tensor x = input(b);
    st.ResumeTiming();
    auto r =
        plan ? ex.run(*plan, std::move(x)) : ex.run(remat::exec::dynamic(budget), std::move(x));
    if (!r) return st.SkipWithError(r.message().c_str());
    const remat::schedule& ran = plan ? *plan : *r->decisions;
    computes = 0;
    for (const auto& i : ran.ops) computes += i.is_compute() ? 1 : 0;
    peak = static_cast<double>(r->measured_peak);
    benchmark::DoNotOptimize(r);
  }
  st.counters["computes_over_ideal"] = computes / g.compute_count();
  st.counters["peak_over_budget"] = peak / static_cast<double>(budget);
}

void register_all() {
  for (const auto& p : problems())
    for (const auto& n : policy_names)
      for (int percent :
           {percents[0], percents[1], percents[2], percents[3], percents[4], at_minimum})
        if (n != "rotor" || p.c)
          benchmark::RegisterBenchmark(("predicted/" + p.name + "/" + n + "/" +
                                        (percent > 0 ? std::to_string(percent) : "minimum"))
                                           .c_str(),
                                       predicted, &p, n, percent)
              ->Iterations(1)
              ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("step/plain", step, std::string("plain"))
      ->Arg(0)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (const char* mode : {"rotor", "dtr", "dynamic"})
    benchmark::RegisterBenchmark((std::string("step/") + mode).c_str(), step, std::string(mode))
        ->Arg(75)
        ->Arg(60)
        ->Arg(45)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_table();
  return 0;
}
