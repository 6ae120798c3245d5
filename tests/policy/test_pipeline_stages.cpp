// A pipeline stage's costs (sim::stage_cost): kept bytes from each layer's saved bytes, and a
// stage that recomputes with a chain policy's program: it keeps its input only, its backward takes
// the program's makespan and works in its peak; 1F1B* and the simulator use those costs.

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/madpipe.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/pipedream.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;

namespace {

/// Eight layers of times (1, 2), outputs 10 and saved bytes 25 (a layer keeps more than its
/// output), weights 5, input 10; the loss last, outputs 0.
chain pst_chain() {
  chain c = remat::testing::pipe_chain({{1, 2, 10, 5},
                                        {1, 2, 10, 5},
                                        {1, 2, 10, 5},
                                        {1, 2, 10, 5},
                                        {1, 2, 10, 5},
                                        {1, 2, 10, 5},
                                        {1, 2, 10, 5},
                                        {1, 2, 0, 5}},
                                       10);
  for (int l = 1; l < c.length(); ++l) c.stages[static_cast<std::size_t>(l - 1)].saved_bytes = 25;
  return c;
}

}  // namespace

TEST_CASE("pipeline stages: a stored stage keeps its input and each layer's saved bytes") {
  const chain c = pst_chain();
  auto cost = sim::stage_cost(c, {2, 4, 0});
  REQUIRE(cost);
  CHECK(cost->forward == 3);
  CHECK(cost->backward == 6);
  // a_1 + abar_2 + abar_3 + abar_4 - a_4 = 10 + 75 - 10.
  CHECK(cost->kept == 75);
  CHECK(cost->working == 0);
  // With abar = a, the thesis' sum a_{l-1}.
  const chain t = remat::testing::pipe_chain({{1, 1, 3, 0}, {1, 1, 4, 0}, {1, 1, 0, 0}}, 2);
  auto thesis = sim::stage_cost(t, {1, 3, 0});
  REQUIRE(thesis);
  CHECK(thesis->kept == 2 + 3 + 4);
}

TEST_CASE("pipeline stages: a recomputing stage runs rotor's program in its backward") {
  const chain c = pst_chain();
  const chain seg = detail::segment_chain(c, 1, 6);
  const bytes share = 70;  // below store-all's 10 + 6 x 25
  auto program = rotor{}.solve(seg, share);
  REQUIRE(program);
  pipeline_stage st{1, 6, 0, *program};
  auto cost = sim::stage_cost(c, st);
  REQUIRE(cost);
  CHECK(cost->forward == 6);
  CHECK(cost->backward == doctest::Approx(program->predicted_time));
  CHECK(cost->backward > 12);  // some forwards run again
  CHECK(cost->kept == 10);
  CHECK(cost->working + cost->kept <= share);

  // 1F1B* and the simulator read the same costs: the recomputing stage fits where storing does
  // not.
  pipeline_problem p;
  p.layers = c;
  p.processors = 2;
  p.copies = 1;
  std::vector<pipeline_stage> stored{{1, 6, 0}, {7, 8, 1}};
  std::vector<pipeline_stage> recomputed{st, {7, 8, 1}};
  auto a = one_f_one_b_star_fit(p, stored);
  auto b = one_f_one_b_star_fit(p, recomputed);
  REQUIRE(a);
  REQUIRE(b);
  const auto ra = sim::simulate_pipeline(p, *a);
  const auto rb = sim::simulate_pipeline(p, *b);
  REQUIRE(ra.valid);
  REQUIRE(rb.valid);
  CHECK(rb.processor_peaks[0] < ra.processor_peaks[0]);
  p.memory = rb.processor_peaks[0] + 20;  // enough for the recomputing stage, not for storing
  REQUIRE(p.memory < ra.processor_peaks[0]);
  CHECK(one_f_one_b_star_fit(p, recomputed));
  auto none = one_f_one_b_star_fit(p, stored);
  REQUIRE_FALSE(none);
  CHECK(none.code() == status::budget_too_small);
}

TEST_CASE("pipeline stages: a recomputation program that does not run is named") {
  const chain c = pst_chain();
  auto program = rotor{}.solve(detail::segment_chain(c, 1, 3), 1000);
  REQUIRE(program);
  // The program of layers 1..3 given to layers 1..4: its graph is not the stage's.
  pipeline_stage st{1, 4, 0, *program};
  auto cost = sim::stage_cost(c, st);
  REQUIRE_FALSE(cost);
  CHECK(cost.message().find("recomputation program of layers 1..4") != std::string::npos);
  pipeline_problem p;
  p.layers = c;
  p.processors = 2;
  pipeline_plan plan;
  plan.stages = {st, {5, 8, 1}};
  plan.period = 100;
  const auto rep = sim::simulate_pipeline(p, plan);
  CHECK_FALSE(rep.valid);
  REQUIRE(rep.first_violation);
  CHECK(rep.first_violation->message.find("stage 1") != std::string::npos);
}

namespace {

/// Random chains whose layers keep 1 to 4 times their output (saved bytes), 4 to 8 layers.
pipeline_problem pst_random(std::mt19937& rng) {
  return remat::testing::random_pipeline_problem(rng, remat::testing::pipe_keeping_knobs());
}

template <class P>
bytes pst_minimum(P policy, const pipeline_problem& p) {
  pipeline_problem q = p;
  q.memory = 0;
  auto r = policy.solve(q);
  REQUIRE_FALSE(r);
  REQUIRE(r.code() == status::budget_too_small);
  REQUIRE(r.err().minimum_budget);
  return *r.err().minimum_budget;
}

}  // namespace

TEST_CASE("pipeline stages: recomputing stages plan where storing cannot, never slower") {
  std::mt19937 rng(77);
  pipedream pd_store, pd_any;
  pd_store.recompute = false;
  madpipe<> mp_store, mp_any;
  mp_store.recompute = false;
  int below = 0, recomputing = 0;
  for (int trial = 0; trial < 25; ++trial) {
    pipeline_problem p = pst_random(rng);
    INFO("trial " << trial);
    const bytes store_min = pst_minimum(pd_store, p);
    const bytes any_min = pst_minimum(pd_any, p);
    CHECK(any_min <= store_min);
    for (double f : {0.8, 1.0, 1.5}) {
      p.memory = static_cast<bytes>(static_cast<double>(store_min) * f);
      auto a = pd_store.solve(p);
      auto b = pd_any.solve(p);
      auto c = mp_store.solve(p);
      auto d = mp_any.solve(p);
      for (auto* r : {&a, &b, &c, &d}) {
        if (!*r) continue;
        const auto rep = sim::simulate_pipeline(p, (*r)->plan);
        CHECK(rep.valid);
        CHECK(rep.normalized_period == doctest::Approx((*r)->report.normalized_period));
        for (bytes peak : rep.processor_peaks) CHECK(peak <= p.memory);
        for (const auto& st : (*r)->plan.stages) recomputing += st.recompute ? 1 : 0;
      }
      if (a) {
        REQUIRE(b);
        CHECK(b->predicted_period <= a->predicted_period + 1e-9);
      }
      if (c) {
        REQUIRE(d);
        CHECK(d->report.normalized_period <= c->report.normalized_period + 1e-9);
      }
      if (!a && b) ++below;
    }
  }
  MESSAGE("recomputing stages: " << below << " plans below the thesis' minimum, " << recomputing
                                 << " recomputing stages in all");
  CHECK(below >= 5);
  CHECK(recomputing >= 5);
}
