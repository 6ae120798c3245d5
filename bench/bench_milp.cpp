// lp_solve against CBC (include/remat/milp/): solve time on random knapsacks, strongly
// correlated knapsacks and set covers of a few sizes (instances from tests/milp/instances.hpp).
// Each solve has a 20 s limit; the counters say whether it proved optimality and what it found.
//   bench/bench_milp --benchmark_filter=knapsack
#include <cstdint>
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

#include <remat/milp/model.hpp>
#ifdef REMAT_HAS_LPSOLVE
#include <remat/milp/lpsolve.hpp>
#endif
#ifdef REMAT_HAS_CBC
#include <remat/milp/cbc.hpp>
#endif

#include "milp/instances.hpp"

namespace {

namespace t = remat::milp::testing;

template <class B>
void solve_loop(benchmark::State& state, const remat::milp::model& m) {
  double optimal = 0, objective = 0;
  for (auto _ : state) {
    const auto s = B{}.solve(m, {.time_limit = 20});
    if (!s) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    optimal = s->is_optimal() ? 1 : 0;
    objective = s->objective;
    benchmark::DoNotOptimize(s->values.data());  // (DoNotOptimize on a double lvalue corrupts it
                                                 // with Debian's Google Benchmark and GCC 12 -O3)
  }
  state.counters["optimal"] = optimal;
  state.counters["objective"] = objective;
  state.counters["vars"] = static_cast<double>(m.num_variables());
  state.counters["rows"] = static_cast<double>(m.num_constraints());
}

/// A knapsack with state.range(0) items (uncorrelated values).
template <class B>
void knapsack(benchmark::State& state) {
  solve_loop<B>(state, t::knapsack(static_cast<int>(state.range(0)), 1));
}

/// Strongly correlated values (v = w + 10): many near-ties, hard for plain branch and bound.
template <class B>
void knapsack_correlated(benchmark::State& state) {
  solve_loop<B>(state, t::knapsack(static_cast<int>(state.range(0)), 2, true));
}

/// A set cover: state.range(0) rows, 3/4 as many columns, each row in about 8% of them.
template <class B>
void set_cover(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  solve_loop<B>(state, t::set_cover(rows, rows * 3 / 4, 0.08, 3));
}

}  // namespace

#ifdef REMAT_HAS_LPSOLVE
using remat::milp::lpsolve;
BENCHMARK(knapsack<lpsolve>)->Arg(20)->Arg(40)->Arg(60)->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK(knapsack_correlated<lpsolve>)->Arg(20)->Arg(40)->Arg(60)->Unit(benchmark::kMillisecond);
BENCHMARK(set_cover<lpsolve>)
    ->Arg(40)
    ->Arg(80)
    ->Arg(120)
    ->Arg(200)
    ->Arg(400)
    ->Unit(benchmark::kMillisecond);
#endif
#ifdef REMAT_HAS_CBC
using remat::milp::cbc;
/// CBC with its preprocessing, which remat::milp::cbc leaves off by default (see cbc.hpp).
struct cbc_preprocess {
  static constexpr std::string_view name = "cbc_preprocess";
  static bool available() { return cbc::available(); }
  [[nodiscard]] remat::result<remat::milp::solution> solve(const remat::milp::model& m,
                                                           const remat::milp::options& o) const {
    return cbc{.preprocess = true}.solve(m, o);
  }
};
BENCHMARK(knapsack<cbc>)->Arg(20)->Arg(40)->Arg(60)->Arg(100)->Unit(benchmark::kMillisecond);
BENCHMARK(knapsack_correlated<cbc>)->Arg(20)->Arg(40)->Arg(60)->Unit(benchmark::kMillisecond);
BENCHMARK(set_cover<cbc>)
    ->Arg(40)
    ->Arg(80)
    ->Arg(120)
    ->Arg(200)
    ->Arg(400)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(knapsack_correlated<cbc_preprocess>)->Arg(60)->Unit(benchmark::kMillisecond);
BENCHMARK(set_cover<cbc_preprocess>)->Arg(120)->Arg(200)->Unit(benchmark::kMillisecond);
#endif

BENCHMARK_MAIN();
