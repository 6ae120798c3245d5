// Any chain policy inside a pipeline stage: policy_segments<P> as the recomputing stages' segment
// policy (its costs the simulator's times of P's programs, each program over the segment chain),
// pipedream and madpipe with revolve's stages (every plan valid within M, never slower than the
// thesis' model), and Mixed Mode with revolve as its planned segments.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/madpipe.hpp>
#include <remat/policy/mixed_mode.hpp>
#include <remat/policy/pipedream.hpp>
#include <remat/policy/policy_segments.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor_segments.hpp>
#include <remat/sim/pipeline.hpp>
#include <remat/sim/simulate.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;

namespace {

/// Seven layers of times (1, 2), outputs 10 and saved bytes 20, weights 5, input 10; the loss
/// last.
chain pseg_chain() {
  std::vector<remat::testing::pipe_layer> ls(6, {1, 2, 10, 5});
  ls.push_back({1, 2, 0, 5});
  chain c = remat::testing::pipe_chain(ls, 10);
  for (int l = 1; l < c.length(); ++l) c.stages[static_cast<std::size_t>(l - 1)].saved_bytes = 20;
  return c;
}

/// The plan replays valid within M, with the period it says, and each recomputing stage's
/// program runs on its segment chain.
void pseg_check(const pipeline_problem& p, const pipeline_solution& s, int& recomputing) {
  const auto rep = sim::simulate_pipeline(p, s.plan);
  INFO((rep.first_violation ? rep.first_violation->message : std::string()));
  CHECK(rep.valid);
  CHECK(rep.normalized_period == doctest::Approx(s.report.normalized_period));
  for (bytes peak : rep.processor_peaks) CHECK(peak <= p.memory);
  for (const auto& st : s.plan.stages) {
    if (!st.recompute) continue;
    ++recomputing;
    const sim::report r =
        sim::simulate(detail::segment_chain(p.layers, st.first, st.last), *st.recompute);
    CHECK(r.valid);
    CHECK(sim::stage_cost(p.layers, st));
  }
}

}  // namespace

TEST_CASE("pipeline segments: policy_segments' costs are the simulated times of its programs") {
  const chain c = pseg_chain();
  const int n = c.length();
  const bytes memory = 150;
  const detail::discrete_chain d = detail::discretize(c, memory, 30);
  const detail::segment_slots q(d, memory);
  auto t = policy_segments<revolve>{}.prepare(c, q, detail::deadline(0));
  REQUIRE(t);
  int finite = 0, infinite = 0;
  for (int last = 1; last <= n; ++last)
    for (int first = 1; first <= last; ++first)
      for (std::int64_t share : {std::int64_t{0}, q.count / 3, q.count / 2, q.count}) {
        INFO(first << ".." << last << " at share " << share);
        const double cost = t->cost(first, last, share);
        CHECK(t->cost(first, last, share) == cost);  // the same when asked again
        auto prog = t->program(c, first, last, share);
        if (!(cost < detail::segment_inf)) {
          ++infinite;
          CHECK_FALSE(prog);
          continue;
        }
        ++finite;
        REQUIRE(prog);
        const chain seg = detail::segment_chain(c, first, last);
        const sim::report rep = sim::simulate(seg, *prog);
        REQUIRE(rep.valid);
        CHECK(rep.makespan == doctest::Approx(cost));
        CHECK(prog->predicted_time == doctest::Approx(cost));
        CHECK(rep.peak <= q.bytes_of(share));
        seconds once = 0;  // every forward and backward at least once
        for (int l = first; l <= last; ++l) once += c.uf(l) + c.ub(l);
        CHECK(cost >= once - 1e-9);
        // A recomputing stage of those layers runs the program in its B.
        auto sc = sim::stage_cost(c, pipeline_stage{first, last, 0, *prog});
        REQUIRE(sc);
        CHECK(sc->backward == doctest::Approx(cost));
        CHECK(sc->kept + sc->working <= q.bytes_of(share));
      }
  CHECK(finite > 20);
  CHECK(infinite > 5);  // share 0 holds no input

  auto other = t->program(pseg_chain(), 1, 2, q.count + 1);
  REQUIRE_FALSE(other);
  CHECK(other.code() == status::invalid_problem);
  CHECK(other.message().find("shares 0..") != std::string::npos);
  chain shorter = c;
  shorter.stages.pop_back();
  auto wrong = t->program(shorter, 1, 2, q.count);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.code() == status::invalid_problem);
}

TEST_CASE("pipeline segments: the planners with revolve's stages plan valid, never slower") {
  std::mt19937 rng(41);
  const auto k = remat::testing::pipe_keeping_knobs();
  pipedream<> pd_store;
  pd_store.recompute = false;
  pipedream<policy_segments<revolve>> pd_rev;
  pd_rev.recompute_knobs.slots = 30;  // fewer shares, fewer solves of revolve: a quick test
  madpipe<> mp_store;
  mp_store.recompute = false;
  madpipe<milp::unavailable, policy_segments<revolve>> mp_rev;
  mp_rev.recompute_knobs.slots = 30;
  int below = 0, recomputing = 0, plans = 0;
  for (int trial = 0; trial < 12; ++trial) {
    pipeline_problem p = remat::testing::random_pipeline_problem(rng, k);
    INFO("trial " << trial);
    pipeline_problem none = p;
    none.memory = 0;
    const auto least = pd_store.solve(none);
    REQUIRE_FALSE(least);
    REQUIRE(least.err().minimum_budget);
    const bytes store_min = *least.err().minimum_budget;
    for (double f : {0.8, 1.0, 1.3}) {
      p.memory = static_cast<bytes>(static_cast<double>(store_min) * f);
      INFO("memory " << p.memory);
      const auto a = pd_store.solve(p);
      const auto b = pd_rev.solve(p);
      const auto c = mp_store.solve(p);
      const auto d = mp_rev.solve(p);
      for (const auto* r : {&a, &b, &c, &d}) {
        if (!*r) {
          CHECK((*r).code() == status::budget_too_small);
          continue;
        }
        ++plans;
        int dummy = 0;
        pseg_check(p, **r, r == &b || r == &d ? recomputing : dummy);
      }
      if (a) {
        REQUIRE(b);
        CHECK(b->report.normalized_period <= a->report.normalized_period + 1e-9);
      }
      if (c) {
        REQUIRE(d);
        CHECK(d->report.normalized_period <= c->report.normalized_period + 1e-9);
      }
      if (!a && b) ++below;
      if (!c && d) ++below;
    }
  }
  MESSAGE("revolve's stages: " << plans << " plans, " << below
                               << " below the thesis' model's minimum, " << recomputing
                               << " recomputing stages");
  CHECK(below >= 5);
  CHECK(recomputing >= 8);
}

TEST_CASE("pipeline segments: Mixed Mode plans with revolve as its planned segments") {
  chain c = pseg_chain();
  c.stages[2].control_flow = true;  // a dynamic segment there, planned ones around it
  using mm = mixed_mode<policy_segments<revolve>>;
  const bytes least = mm{.slots = 20, .dynamic = {.overhead = 0.5}}.minimum_budget(c);
  for (double f : {1.0, 2.0, 4.0}) {
    const auto budget = static_cast<bytes>(static_cast<double>(least) * f);
    INFO("budget " << budget);
    const auto s = mm{.slots = 20, .dynamic = {.overhead = 0.5}}.solve_detailed(c, budget);
    REQUIRE(s);
    const sim::report rep = sim::simulate(c, s->program);
    CHECK(rep.valid);
    CHECK(rep.peak <= budget);
    int planned = 0;
    for (const auto& sg : s->details.segments) planned += sg.mode == segment_mode::planned;
    if (f >= 2) CHECK(planned >= 1);  // at the least budget DTR runs it all
    CHECK(s->notes.front().find("planned (revolve)") != std::string::npos);
  }
}
