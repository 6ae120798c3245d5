// mixed_mode's programs under the executor: the Eigen example models, profiled, some stages
// marked as control flow, planned by mixed_mode at budgets from its minimum to the store-all
// peak (with a dynamic runtime's overhead, so that planned and dynamic segments mix), run, and
// compared bit for bit with plain training; the measured peak is the simulated one, within the
// budget.
#include <cstddef>
#include <functional>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec.hpp>
#include <remat/policy/mixed_mode.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;
using remat::exec::host_backend;

namespace {

void check_mixed_model(const std::function<eg::model()>& build, eg::index batch, eg::index width,
                       const std::vector<int>& control_flow) {
  host_backend pb;
  eg::model pm = build();
  auto profiled = exec::profile_chain(pm, eg::make_input(pb, batch, width, 5), pb,
                                      {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(profiled.ok(), profiled.message());
  chain c = *profiled;
  for (int l : control_flow) c.stages[static_cast<std::size_t>(l - 1)].control_flow = true;

  std::vector<float> reference;
  {
    host_backend b;
    eg::model m = build();
    eg::zero_grad(m);
    (void)eg::backprop(m, eg::make_input(b, batch, width, 5), b);
    reference = eg::flat_gradients(m);
  }
  // The runtime's overhead: a tenth of the mean op's time.
  const mixed_mode<> policy{.slots = 40,
                            .dynamic = {.overhead = c.ideal_time() / (20.0 * c.length())}};
  const bytes peak = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
  const bytes lo = policy.minimum_budget(c);
  REQUIRE(lo < peak);
  int mixed = 0;
  for (int step = 0; step <= 2; ++step) {
    const bytes budget = lo + (peak - lo) * step / 2;
    const auto s = policy.solve_detailed(c, budget);
    if (!s && s.code() == status::infeasible) continue;  // a hole above the minimum, said
    REQUIRE_MESSAGE(s.ok(), s.message());
    bool planned = false, dynamic = false;
    for (const auto& sg : s->details.segments) {
      (sg.mode == segment_mode::planned ? planned : dynamic) = true;
      for (int l = sg.first; l <= sg.last; ++l)
        if (sg.mode == segment_mode::planned) CHECK_FALSE(c.at(l).control_flow);
    }
    mixed += planned && dynamic;
    INFO("budget ", budget, ": ", to_string(s->program));
    eg::model m = build();
    eg::zero_grad(m);
    host_backend b(budget);
    exec::executor ex(m, c, b);
    auto r = ex.run(s->program, eg::make_input(b, batch, width, 5));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(eg::flat_gradients(m) == reference);
    CHECK(r->measured_peak <= budget);
    CHECK(r->measured_peak == sim::simulate(c, s->program).peak);
  }
  MESSAGE(mixed << " of the budgets mix planned and dynamic segments");
}

}  // namespace

TEST_CASE("mixed_mode under the executor: plain training's gradients, within the budget") {
  SUBCASE("mlp, dropout, a control-flow stage") {
    check_mixed_model([] { return eg::make_mlp(6, 16, 8, 3, 0.2f); }, 8, 16, {3});
  }
  SUBCASE("residual stack, dropout, two control-flow stages") {
    check_mixed_model([] { return eg::make_residual_stack(6, 16, 48, 8, 5, 0.1f); }, 8, 16, {2, 5});
  }
}
