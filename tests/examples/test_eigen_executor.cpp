// The Eigen example models under the executor: profiled, planned by rotor between its minimum
// and the store-all peak, run, and compared bit for bit with plain training (eg::backprop).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

using namespace remat;
using remat::exec::host_backend;

namespace {

struct outcome {
  std::vector<float> grads;
  std::vector<float> input_grad;
  bytes peak = 0;
};

/// Plain training on a fresh model: the reference.
outcome reference(const std::function<eg::model()>& build, eg::index batch, eg::index width) {
  host_backend b;
  eg::model m = build();
  const auto x = eg::make_input(b, batch, width, 5);
  b.reset_high_water();
  eg::zero_grad(m);
  (void)eg::backprop(m, x, b);
  return {eg::flat_gradients(m), {}, b.high_water()};
}

void check_model(const std::function<eg::model()>& build, eg::index batch, eg::index width) {
  host_backend pb;
  eg::model pm = build();
  const auto sample = eg::make_input(pb, batch, width, 5);
  auto profiled = exec::profile_chain(pm, sample, pb, {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(profiled.ok(), profiled.message());
  const chain& c = *profiled;
  const outcome ref = reference(build, batch, width);

  const bytes peak = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
  CHECK(ref.peak <= peak);  // plain training within what the chain predicts for store-all
  const bytes lo = rotor{}.minimum_budget(c);
  REQUIRE(lo < peak);
  std::vector<float> first_input_grad;
  for (int step = 0; step <= 3; ++step) {
    const bytes budget = lo + (peak - lo) * step / 3;
    const auto s = rotor{.slots = 0}.solve(c, budget);
    REQUIRE_MESSAGE(s.ok(), s.message());
    INFO("budget ", budget, ": ", to_chain_string(c.length(), *s).value_or(to_string(*s)));
    eg::model m = build();
    eg::zero_grad(m);
    host_backend b(budget);
    exec::executor ex(m, c, b);
    auto r = ex.run(*s, eg::make_input(b, batch, width, 5));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(eg::flat_gradients(m) == ref.grads);
    CHECK(r->measured_peak <= budget);
    // The profiler measures F_all's overhead apart from F_none/F_ck's (these layers keep in
    // F_all what they free as temporaries otherwise), so every op's peak is predicted exactly:
    // what the model leaves out is only Eigen's own product workspace, not allocated through
    // the backend, hence not in either number.
    const auto sim = sim::simulate(c, *s);
    CHECK(r->measured_peak == sim.peak);
    REQUIRE(r->op_peaks.size() == sim.timeline.size());
    for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
      INFO("instruction ", i, ": ", to_string(s->ops[i]));
      CHECK(r->op_peaks[i] == sim.timeline[i].peak);
    }
    const auto& dx = r->input_gradient;
    std::vector<float> g(dx.data(), dx.data() + dx.size());
    if (step == 0)
      first_input_grad = g;
    else
      CHECK(g == first_input_grad);
  }
}

}  // namespace

TEST_CASE("eg models under the executor: rotor's schedules give plain training's gradients") {
  SUBCASE("mlp, gelu, dropout") {
    check_model([] { return eg::make_mlp(4, 16, 8, 3, 0.2f); }, 8, 16);
  }
  SUBCASE("mlp, relu") {
    check_model([] { return eg::make_mlp(3, 24, 6, 4, 0.0f, eg::activation::relu); }, 6, 24);
  }
  SUBCASE("residual stack, dropout") {
    check_model([] { return eg::make_residual_stack(4, 16, 48, 8, 5, 0.1f); }, 8, 16);
  }
}

TEST_CASE("eg models with the batch's targets: mse_loss takes them, the loss value comes back") {
  auto build = [] { return eg::make_mlp(3, 16, 8, 6, 0.2f); };
  host_backend pb;
  eg::model pm = build();
  const auto* loss = static_cast<const eg::mse_loss*>(pm.back().get());
  const eg::matrix fixed = loss->target();
  auto c = exec::profile_chain(pm, eg::make_input(pb, 8, 16, 5), fixed, pb,
                               {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(c.ok(), c.message());
  const auto s = rotor{.slots = 0}.solve(*c, rotor{}.minimum_budget(*c));
  REQUIRE(s.ok());
  struct step {
    std::vector<float> grads;
    double loss = 0;
  };
  auto run = [&](const eg::matrix* targets) {
    eg::model m = build();
    host_backend b;
    exec::executor ex(m, *c, b);
    auto r = targets != nullptr ? ex.run(*s, eg::make_input(b, 8, 16, 5), *targets)
                                : ex.run(*s, eg::make_input(b, 8, 16, 5));
    REQUIRE_MESSAGE(r.ok(), r.message());
    REQUIRE(r->loss.has_value());
    CHECK(*r->loss == static_cast<const eg::mse_loss*>(m.back().get())->last_value());
    return step{eg::flat_gradients(m), *r->loss};
  };
  // The fixed target given as the batch's targets: the same bits as without targets.
  const step without = run(nullptr), with_fixed = run(&fixed);
  CHECK(with_fixed.grads == without.grads);
  CHECK(with_fixed.loss == without.loss);
  // Other targets: another loss and other gradients.
  const eg::matrix other = fixed * 0.5f;
  const step with_other = run(&other);
  CHECK(with_other.loss != without.loss);
  CHECK(with_other.grads != without.grads);
}
