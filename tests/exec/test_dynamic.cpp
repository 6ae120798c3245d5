// The executor's dynamic mode (exec::dynamic): no plan, DTR's evictions and recomputations taken
// as the run goes. On toy chain and DAG models whose layers allocate exactly as profiled, every
// budget from store-all's peak down to DTR's minimum gives bitwise the gradients of store-all,
// a measured peak within the budget, and the very decisions of the dtr policy on the same graph
// (the sizes the run sees are the profile's), instruction by instruction at the simulator's
// peaks. Below the minimum, budget_too_small names the op and what it needs, and the layers'
// random states are as before the run.
#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/exec/train.hpp>
#include <remat/policy/dtr.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

#include "toy_dags.hpp"
#include "toy_layers.hpp"

using namespace remat;
using remat::exec::host_backend;

namespace {

struct dynamic_outcome {
  std::vector<float> input_grad, param_grads;
  exec::run_result<toy::tensor> run;
};

/// Runs `mode` (a schedule, or exec::dynamic) on a fresh model from `make` in a backend limited
/// to `budget`; the forwards each op ran are the program's, each backward ran once, nothing is
/// left but the input gradient.
template <class Make, class Problem, class Mode, class Input>
result<dynamic_outcome> run_mode(Make make, const Problem& p, const Mode& mode, bytes budget,
                                 Input input) {
  auto m = make();
  host_backend b(budget);
  exec::executor ex(m, p, b);
  auto r = ex.run(mode, input(b));
  if (!r) return r.err();
  dynamic_outcome o;
  for (int i = 0; i < r->input_gradient.n; ++i) o.input_grad.push_back(r->input_gradient[i]);
  exec::for_each_layer(m, [&](const auto& layer) {
    o.param_grads.push_back(layer.gw);
    CHECK(layer.backward_calls == 1);
  });
  CHECK(b.in_use() == r->input_gradient.bytes());
  r->input_gradient.buf.release();  // a buffer must not outlive its backend, b
  o.run = std::move(*r);
  return o;
}

/// From store-all's peak down to dtr's minimum: the dynamic mode's gradients are store-all's bit
/// for bit, its peak within the budget, its decisions the dtr policy's on g (each instruction at
/// the simulator's peak); below the minimum, budget_too_small naming an op. Returns how many
/// budgets recomputed.
template <class Make, class Problem, class Input>
int check_dynamic(Make make, const Problem& p, const graph& g, Input input) {
  const bytes peak = peak_of_store_all(g);
  const schedule all{store_all_program(g), g.ideal_time(), 0};
  const auto reference = run_mode(make, p, all, peak, input);
  REQUIRE_MESSAGE(reference.ok(), reference.message());
  int recomputed = 0;
  for (const auto& h : {dtr_heuristic(h_dtr{}), dtr_heuristic(h_size{}), dtr_heuristic(h_lru{})}) {
    dtr<> policy;
    policy.heuristic = h;
    const bytes least = policy.minimum_budget(g);
    for (int k = 0; k <= 4; ++k) {
      const bytes budget = least + (peak - least) * k / 4;
      INFO(h.name(), " budget ", budget, " (minimum ", least, ", store-all ", peak, ")");
      const auto got = run_mode(make, p, exec::dynamic(budget, h), budget, input);
      REQUIRE_MESSAGE(got.ok(), got.message());
      CHECK(got->input_grad == reference->input_grad);
      CHECK(got->param_grads == reference->param_grads);
      CHECK(got->run.measured_peak <= budget);
      REQUIRE(got->run.decisions);
      const schedule& s = *got->run.decisions;
      const auto planned = policy.solve(g, budget);
      REQUIRE_MESSAGE(planned, planned.message());
      CHECK(s.ops == planned->ops);
      CHECK(s.predicted_time == doctest::Approx(planned->predicted_time));
      const auto sim = sim::simulate(g, s, {.budget = budget});
      CHECK(sim.valid);
      CHECK(got->run.measured_peak == sim.peak);
      REQUIRE(got->run.op_peaks.size() == s.ops.size());
      for (std::size_t i = 0; i < s.ops.size(); ++i)
        CHECK(got->run.op_peaks[i] == sim.timeline[i].peak);
      const auto runs = std::count_if(s.ops.begin(), s.ops.end(),
                                      [](const instruction& i) { return i.is_compute(); });
      recomputed += runs > g.compute_count();
    }
    const auto below = run_mode(make, p, exec::dynamic(least - 1, h), least - 1, input);
    REQUIRE_FALSE(below);
    CHECK(below.code() == status::budget_too_small);
    CHECK(below.message().find("executor (dynamic): '") == 0);
    CHECK(below.message().find("' needs ") != std::string::npos);
    REQUIRE(below.err().minimum_budget);
    CHECK(*below.err().minimum_budget >= least);
  }
  return recomputed;
}

}  // namespace

TEST_CASE("executor, dynamic mode: chain models, bitwise store-all's gradients within the budget") {
  int recomputed = 0;
  for (unsigned seed = 1; seed <= 4; ++seed) {
    const int n = 4 + static_cast<int>(seed);
    const bool noisy = seed % 2 == 1;  // noisy stages draw random numbers: replayed on recompute
    INFO("seed ", seed);
    auto make = [&] { return toy::make_chain_model(n, seed, noisy); };
    auto input = [](host_backend& b) {
      auto x = toy::tensor::make(b, 12);
      for (int i = 0; i < 12; ++i) x[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
      return x;
    };
    host_backend pb;
    auto pm = make();
    const auto c = exec::profile_chain(pm, input(pb), pb, {.repetitions = 1, .warmup = 0}).value();
    const graph g = build_graph(c).value();
    recomputed += check_dynamic(make, c, g, input);
  }
  CHECK(recomputed >= 12);
}

TEST_CASE("executor, dynamic mode: DAG models, bitwise store-all's gradients within the budget") {
  using namespace toy::dags;
  int recomputed = 0;
  for (const auto* spec : {&diamond, &residual, &three, &unet})
    for (unsigned seed = 1; seed <= 2; ++seed) {
      INFO("ops ", spec->size(), " seed ", seed);
      auto make = [&] { return make_model(*spec, seed, true); };
      host_backend pb;
      auto pm = make();
      auto f =
          exec::profile_dag(pm, make_input(pb), pb, {.repetitions = 1, .warmup = 0, .name = "toy"});
      REQUIRE_MESSAGE(f.ok(), f.message());
      const graph g = build_graph(*f).value();
      recomputed += check_dynamic(make, g, g, [](host_backend& b) { return make_input(b); });
    }
  CHECK(recomputed >= 12);
}

TEST_CASE("executor, dynamic mode: a failed run leaves the random states; the next run is plain") {
  const auto make = [] { return toy::make_chain_model(6, 3, true); };
  auto input = [](host_backend& b) {
    auto x = toy::tensor::make(b, 12);
    for (int i = 0; i < 12; ++i) x[i] = 0.05f * static_cast<float>(i);
    return x;
  };
  host_backend pb;
  auto pm = make();
  const auto c = exec::profile_chain(pm, input(pb), pb, {.repetitions = 1, .warmup = 0}).value();
  const graph g = build_graph(c).value();
  const bytes least = dtr<>{}.minimum_budget(g);
  auto m = make();
  host_backend b;
  exec::executor ex(m, c, b);
  auto failed = ex.run(exec::dynamic(least / 2), input(b));
  REQUIRE_FALSE(failed);
  CHECK(failed.code() == status::budget_too_small);
  // The same model then runs as a fresh one: its random layers were put back.
  exec::zero_grad(m);
  auto ok = ex.run(exec::dynamic(least), input(b));
  REQUIRE_MESSAGE(ok, ok.message());
  std::vector<float> got;
  for (int i = 0; i < ok->input_gradient.n; ++i) got.push_back(ok->input_gradient[i]);
  const auto fresh = run_mode(make, c, exec::dynamic(least), least, input);
  REQUIRE(fresh);
  CHECK(got == fresh->input_grad);
}
