// The Eigen example layers as ops of DAG models: the multi-input layers (add, attention) against
// finite differences, and the residual net, the attention block and a U-Net under the executor
// (profiled, planned by checkmate, rockmate and hiremate when a MILP backend is built in), bit
// for bit equal to plain training (eg::backprop on the DAG).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/hiremate.hpp>
#include <remat/policy/rockmate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

#include "exec/checkmate_backend.hpp"
#include "exec/graph_schedules.hpp"
#include "exec/test_offload_schedules.hpp"

using namespace remat;
using remat::exec::host_backend;

static_assert(exec::check_dag_layer<std::unique_ptr<eg::layer>, eg::tensor, host_backend>());
static_assert(exec::DagLayer<eg::attention, eg::tensor, host_backend>);
static_assert(
    exec::ChainLayer<std::unique_ptr<eg::layer>, eg::tensor, host_backend>);  // still a chain layer

namespace {

/// <f(x...), dy> by central differences against the backward, for every element of every
/// input; then the backward again on the filled gradients, which must add the same
/// contribution in place (dx + c, bit for bit).
void check_multi_input(eg::layer& l, std::vector<eg::tensor>& xs, std::uint64_t seed,
                       float h = 2e-3f) {
  host_backend b;
  std::vector<const eg::tensor*> px;
  for (const auto& t : xs) px.push_back(&t);
  eg::context ctx;
  const eg::tensor y = l.forward_save(px, ctx, b);
  const eg::tensor dy = eg::make_input(b, y.rows(), y.cols(), seed);
  const auto reads = l.backward_reads();
  std::vector<const eg::tensor*> rx =
      reads.inputs ? px : std::vector<const eg::tensor*>(px.size(), nullptr);
  std::vector<std::optional<eg::tensor>> dx(xs.size());
  l.backward(rx, reads.output ? &y : nullptr, ctx, dy, dx, b);
  auto f = [&] {
    const eg::tensor out = l.forward(px, b);
    double s = 0;
    for (eg::index i = 0; i < out.size(); ++i)
      s += static_cast<double>(out.data()[i]) * static_cast<double>(dy.data()[i]);
    return s;
  };
  for (std::size_t j = 0; j < xs.size(); ++j) {
    REQUIRE(dx[j].has_value());
    REQUIRE(dx[j]->rows() == xs[j].rows());
    REQUIRE(dx[j]->cols() == xs[j].cols());
    for (eg::index i = 0; i < xs[j].size(); ++i) {
      float& v = xs[j].data()[i];
      const float v0 = v;
      v = v0 + h;
      const double up = f();
      v = v0 - h;
      const double down = f();
      v = v0;
      const double numeric = (up - down) / (2.0 * static_cast<double>(h));
      const double analytic = dx[j]->data()[i];
      INFO(l.name(), " dx", j, "[", i, "]: numeric ", numeric, ", analytic ", analytic);
      CHECK(std::abs(numeric - analytic) <=
            2e-3 + 2e-2 * std::max(std::abs(numeric), std::abs(analytic)));
    }
  }
  std::vector<eg::tensor> once;
  for (const auto& g : dx) once.push_back(g->clone(b));
  l.backward(rx, reads.output ? &y : nullptr, ctx, dy, dx, b);
  for (std::size_t j = 0; j < xs.size(); ++j) {
    const eg::tensor twice = eg::tensor::from(b, once[j].mat() + once[j].mat());
    CHECK(eg::bitwise_equal(*dx[j], twice));
  }
}

}  // namespace

TEST_CASE(
    "eg::add and eg::attention: gradients against finite differences, accumulation in place") {
  host_backend b;
  SUBCASE("add") {
    eg::add l("add");
    std::vector<eg::tensor> xs;
    xs.push_back(eg::make_input(b, 3, 4, 1));
    xs.push_back(eg::make_input(b, 3, 4, 2));
    check_multi_input(l, xs, 3);
    CHECK_THROWS_AS((void)l.forward(xs[0], b), std::invalid_argument);  // not a chain stage
  }
  SUBCASE("attention") {
    eg::attention l("attn");
    std::vector<eg::tensor> xs;
    for (std::uint64_t s = 1; s <= 3; ++s) xs.push_back(eg::make_input(b, 4, 3, 10 + s));
    check_multi_input(l, xs, 5);
  }
}

namespace {

/// Profiles the DAG model, checks store-all against eg::backprop (an independent plain
/// training), then runs every schedule given (plus store-all's) and compares bit for bit.
void check_dag(const std::function<eg::dag()>& build, eg::index batch, eg::index width,
               const std::function<std::vector<schedule>(const graph&)>& schedules) {
  host_backend pb;
  eg::dag pm = build();
  auto f = exec::profile_dag(pm, eg::make_input(pb, batch, width, 5), pb,
                             {.repetitions = 1, .warmup = 0, .name = "eg dag"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  // Fixed times instead of the measured ones, so that the plans (and what runs) are the same in
  // every run of the test: the sizes, which is what the checks below depend on, are measured.
  for (auto& op : f->ops) {
    op.forward_time = 1e-6 + 1e-9 * static_cast<double>(op.output_bytes + op.phantom_bytes);
    op.backward_time = 2 * op.forward_time;
  }
  auto built = build_graph(*f);
  REQUIRE_MESSAGE(built.ok(), built.message());
  const graph& g = *built;

  eg::dag ref_model = build();
  host_backend rb;
  std::optional<eg::tensor> ref_dx;
  eg::zero_grad(ref_model.layers);
  const float ref_loss = eg::backprop(ref_model, eg::make_input(rb, batch, width, 5), rb, &ref_dx);
  REQUIRE(ref_dx.has_value());
  const auto ref_grads = eg::flat_gradients(ref_model.layers);

  std::vector<schedule> all{{store_all_program(g), g.ideal_time(), 0}};
  // Store-all with every activation (the input included) on the host between its uses.
  all.push_back(offload_test::with_graph_offloads(
      g, all.front(), [&](int d) { return g.data(d).kind == data_kind::activation; }));
  REQUIRE(offload_test::transfers_in(all.back()) > 0);
  for (auto& s : schedules(g)) all.push_back(std::move(s));
  int executed = 0;
  for (const auto& s : all) {
    const auto sim = sim::simulate(g, s);
    REQUIRE_MESSAGE(sim.valid, (sim.first_violation ? sim.first_violation->message : ""));
    INFO(to_string(g, s));
    eg::dag m = build();
    eg::zero_grad(m.layers);
    host_backend b(sim.peak);
    exec::executor ex(m, g, b);
    auto r = ex.run(s, eg::make_input(b, batch, width, 5));
    // checkmate may recompute a backward (its MILP allows it); the executor refuses those.
    if (toy::recomputes_a_backward(g, s)) {
      CHECK(r.code() == status::invalid_problem);
      CHECK(r.message().find("runs a second time") != std::string::npos);
      continue;
    }
    ++executed;
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(eg::flat_gradients(m.layers) == ref_grads);
    CHECK(eg::bitwise_equal(r->input_gradient, *ref_dx));
    CHECK(dynamic_cast<const eg::mse_loss&>(*m.layers.back()).last_value() == ref_loss);
    // Within the budget; op by op at most the simulator's peak (the profile takes the larger
    // backward overhead of creating and of accumulating a gradient, and linear accumulates
    // through a temporary), and equal wherever no gradient is accumulated into.
    CHECK(r->measured_peak <= sim.peak);
    CHECK(b.host_in_use() == 0);  // every host copy released
    CHECK(b.host_high_water() == sim.host_peak);
    REQUIRE(r->op_peaks.size() == sim.timeline.size());
    for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
      INFO(to_string(g, s.ops[i]));
      CHECK(r->op_peaks[i] <= sim.timeline[i].peak);
      if (!s.ops[i].is_compute() || g.compute(s.ops[i].node).kind != compute_kind::backward)
        CHECK(r->op_peaks[i] == sim.timeline[i].peak);
    }
  }
  // Store-all, its offloading variant and, with a MILP backend, the plan (with recomputation;
  // with the fixed times, the plans of CBC and of lp_solve run every backward once).
  CHECK(executed >= (all.size() > 2 ? 3 : 2));
}

/// checkmate's plan at `fraction` of store-all's peak: one MILP per model keeps the test quick
/// (with the fixed times, at 80% each solves in under a second with CBC and a few with lp_solve,
/// where lower budgets take tens of seconds, and runs every backward once; the time limit is a
/// guard). Below store-all's peak the plan recomputes: some forward runs more than once.
std::function<std::vector<schedule>(const graph&)> planned_at(double fraction) {
  return [fraction](const graph& g) {
    std::vector<schedule> out;
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
    const bytes peak = sim::simulate(g, {store_all_program(g), 0, 0}).peak;
    const bytes budget = static_cast<bytes>(static_cast<double>(peak) * fraction);
    auto s = checkmate<milp_backend>{.time_limit = 10}.solve(g, budget);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(toy::recomputes(g, *s));
    out.push_back(std::move(*s));
#else
    (void)fraction;
    (void)g;
#endif
    return out;
  };
}

/// rockmate's plans (blocks by checkmate) at the fractions of store-all's peak given, each
/// recomputing something; the lowest fraction is also planned with store_all as the block
/// solver (Rotor on the blocks).
std::function<std::vector<schedule>(const graph&)> rockmate_at(std::vector<double> fractions) {
  return [fractions](const graph& g) {
    std::vector<schedule> out;
    const bytes peak = sim::simulate(g, {store_all_program(g), 0, 0}).peak;
    auto add = [&](const result<rockmate_plan>& p) {
      REQUIRE_MESSAGE(p.ok(), p.message());
      CHECK(toy::recomputes(g, p->program));  // a whole block, or an op inside one (its option)
      out.push_back(p->program);
    };
    for (double f : fractions) {
      const auto budget = static_cast<bytes>(static_cast<double>(peak) * f);
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
      add(rockmate<checkmate<milp_backend>>{
          .peak_budgets = 4, .save_budgets = 4, .inner_time_limit = 10, .threads = 2}
              .solve_detailed(g, budget));
#endif
      if (f == fractions.back()) add(rockmate<store_all>{}.solve_detailed(g, budget));
    }
    return out;
  };
}

/// hiremate's plans at 80 % of store-all's peak and at the minimum it reports for half of it,
/// the graph cut into clusters of at most 4 nodes (6 at the top) so that the plan is made over
/// three or more levels, each recomputing something.
std::vector<schedule> hiremate_plans(const graph& g) {
  std::vector<schedule> out;
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
  const bytes peak = sim::simulate(g, {store_all_program(g), 0, 0}).peak;
  hiremate<milp_backend> h;
  h.partitioner.limits = {4, 6, 0.5};
  h.peak_budgets = 3;
  h.save_budgets = 3;
  h.ilp_time_limit = 20;
  const auto low = h.solve(g, peak / 2);
  REQUIRE(low.code() == status::budget_too_small);
  REQUIRE(low.err().minimum_budget.has_value());
  for (const bytes budget : {peak * 8 / 10, *low.err().minimum_budget}) {
    auto p = h.solve_detailed(g, budget);
    REQUIRE_MESSAGE(p.ok(), p.message());
    CHECK(p->details.levels >= 3);
    CHECK(p->program.predicted_peak <= budget);
    CHECK(toy::recomputes(g, p->program));
    out.push_back(p->program);
  }
#else
  (void)g;
#endif
  return out;
}

}  // namespace

TEST_CASE("eg DAG models under the executor: hiremate's plans of a U-Net, gradients bit for bit") {
  check_dag([] { return eg::make_unet_dag(3, 8, 12, 6, 7); }, 6, 8, hiremate_plans);
}

TEST_CASE(
    "eg DAG models under the executor: rockmate's plans, plain training's gradients bit for bit") {
  SUBCASE("residual net") {
    check_dag([] { return eg::make_residual_dag(3, 8, 16, 6, 3); }, 6, 8, rockmate_at({0.8, 0.6}));
  }
  SUBCASE("attention block") {
    check_dag([] { return eg::make_attention_dag(8, 16, 6, 4); }, 6, 8, rockmate_at({0.9, 0.8}));
  }
}

TEST_CASE("eg DAG models under the executor: plain training's gradients bit for bit") {
  SUBCASE("residual net") {
    check_dag([] { return eg::make_residual_dag(2, 8, 16, 6, 3); }, 6, 8, planned_at(0.8));
  }
  SUBCASE("attention block") {
    check_dag([] { return eg::make_attention_dag(8, 16, 6, 4); }, 6, 8, planned_at(0.8));
  }
}
