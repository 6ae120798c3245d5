// The executor's dynamic mode (exec::dynamic) on the Eigen example models, chains with dropout
// and a residual DAG: from store-all's peak down to DTR's minimum, plain training's gradients bit
// for bit, the measured peak within the budget; a batch smaller than the profile's is run on its
// real sizes (fewer recomputations than the profile's sizes ask for); below what an op needs,
// budget_too_small names it.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/dtr.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>

using namespace remat;
using remat::exec::host_backend;

namespace {

/// The computes (forwards run again included) of a program.
long computes_of(const schedule& s) {
  return std::count_if(s.ops.begin(), s.ops.end(),
                       [](const instruction& i) { return i.is_compute(); });
}

/// A chain model profiled at batch `profiled`, run in the dynamic mode at batch `batch` (the
/// same layers, the loss's target at that batch): plain training's gradients, the peak within
/// each budget from store-all's down to DTR's minimum (the profile's); returns the computes of
/// each run.
std::vector<long> check_chain(const std::function<eg::model(eg::index)>& build, eg::index profiled,
                              eg::index batch, eg::index width) {
  host_backend pb;
  eg::model pm = build(profiled);
  auto c = exec::profile_chain(pm, eg::make_input(pb, profiled, width, 5), pb,
                               {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(c.ok(), c.message());
  const graph g = build_graph(*c).value();

  eg::model ref = build(batch);
  host_backend rb;
  eg::zero_grad(ref);
  (void)eg::backprop(ref, eg::make_input(rb, batch, width, 5), rb);
  const auto ref_grads = eg::flat_gradients(ref);

  const bytes peak = peak_of_store_all(g);
  const bytes least = dtr<>{}.minimum_budget(g);
  std::vector<long> runs;
  for (int k = 0; k <= 3; ++k) {
    const bytes budget = least + (peak - least) * k / 3;
    INFO("budget ", budget, " (minimum ", least, ", store-all ", peak, ")");
    eg::model m = build(batch);
    eg::zero_grad(m);
    host_backend b(budget);
    exec::executor ex(m, *c, b);
    auto r = ex.run(exec::dynamic(budget), eg::make_input(b, batch, width, 5));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(eg::flat_gradients(m) == ref_grads);
    CHECK(r->measured_peak <= budget);
    REQUIRE(r->decisions);
    runs.push_back(computes_of(*r->decisions));
    if (batch == profiled) {  // the profile's sizes are the real ones: the policy's decisions
      const auto planned = dtr<>{}.solve(g, budget);
      REQUIRE(planned);
      CHECK(r->decisions->ops == planned->ops);
    }
  }
  CHECK(runs.front() > g.compute_count());  // at the minimum, it recomputes
  return runs;
}

}  // namespace

TEST_CASE("eg models, dynamic mode: chains with dropout, plain training's gradients") {
  SUBCASE("mlp, gelu, dropout") {
    check_chain([](eg::index batch) { return eg::make_mlp(4, 16, batch, 3, 0.2f); }, 8, 8, 16);
  }
  SUBCASE("residual stack, dropout") {
    check_chain([](eg::index batch) { return eg::make_residual_stack(4, 16, 48, batch, 5, 0.1f); },
                8, 8, 16);
  }
}

TEST_CASE("eg models, dynamic mode: a smaller batch than profiled runs on its real sizes") {
  auto build = [](eg::index batch) { return eg::make_residual_stack(4, 16, 48, batch, 5, 0.1f); };
  const auto full = check_chain(build, 8, 8, 16);
  const auto half = check_chain(build, 8, 4, 16);
  // The same budgets: with half the bytes per activation, fewer evictions and recomputations.
  REQUIRE(half.size() == full.size());
  for (std::size_t i = 0; i < half.size(); ++i) CHECK(half[i] <= full[i]);
  CHECK(half.front() < full.front());
}

TEST_CASE(
    "eg models, dynamic mode: a residual DAG, plain training's gradients; too small a budget") {
  const eg::index batch = 6, width = 8;
  auto build = [] { return eg::make_residual_dag(3, 8, 16, 6, 3); };
  host_backend pb;
  eg::dag pm = build();
  auto f = exec::profile_dag(pm, eg::make_input(pb, batch, width, 5), pb,
                             {.repetitions = 1, .warmup = 0, .name = "eg dag"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  const graph g = build_graph(*f).value();

  eg::dag ref = build();
  host_backend rb;
  std::optional<eg::tensor> ref_dx;
  eg::zero_grad(ref.layers);
  (void)eg::backprop(ref, eg::make_input(rb, batch, width, 5), rb, &ref_dx);
  REQUIRE(ref_dx);
  const auto ref_grads = eg::flat_gradients(ref.layers);

  const bytes peak = peak_of_store_all(g);
  const bytes least = dtr<>{}.minimum_budget(g);
  int recomputed = 0;
  for (int k = 0; k <= 3; ++k) {
    const bytes budget = least + (peak - least) * k / 3;
    INFO("budget ", budget);
    eg::dag m = build();
    eg::zero_grad(m.layers);
    host_backend b(budget);
    exec::executor ex(m, g, b);
    auto r = ex.run(exec::dynamic(budget, h_lru{}), eg::make_input(b, batch, width, 5));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(eg::flat_gradients(m.layers) == ref_grads);
    CHECK(eg::bitwise_equal(r->input_gradient, *ref_dx));
    CHECK(r->measured_peak <= budget);
    recomputed += computes_of(*r->decisions) > g.compute_count();
  }
  CHECK(recomputed >= 1);

  eg::dag m = build();
  host_backend b;
  exec::executor ex(m, g, b);
  const auto small = ex.run(exec::dynamic(least - 1), eg::make_input(b, batch, width, 5));
  REQUIRE_FALSE(small);
  CHECK(small.code() == status::budget_too_small);
  INFO(small.message());
  CHECK(small.message().find("executor (dynamic): 'fwd ") == 0);
  CHECK(small.message().find(" bytes while it runs") != std::string::npos);
}
