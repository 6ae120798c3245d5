// offmate's program (policy/offmate/program.hpp) on small Llama-like graphs: valid for the one
// simulator at every budget from the least to plenty, within the budget, its predicted time and
// peak the simulator's, each trainable parameter updated once (on the GPU or on the CPU), the
// same program for the same input, and where the fractions are tight the CPU at work.
#include <doctest/doctest.h>

#if defined(REMAT_HAS_LPSOLVE) || defined(REMAT_HAS_CBC)

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <remat/policy/offmate.hpp>
#include <remat/sim/simulate.hpp>

#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
using program_backend = remat::milp::cbc;
#else
#include <remat/milp/lpsolve.hpp>
using program_backend = remat::milp::lpsolve;
#endif

#include "support/small_llama.hpp"

using namespace remat;

namespace {

graph small_llama(int layers, bool tied) {
  return build_graph(testing::small_llama(layers, tied)).value();
}

}  // namespace

TEST_CASE("offmate program: valid, within the budget, each parameter updated once") {
  int cpu_updates = 0, offloaded = 0, plans = 0, activations_moved = 0, made_again = 0;
  for (const bool tied : {false, true}) {
    const graph g = small_llama(2, tied);
    offmate<program_backend> pol;
    pol.time_limit = 30;
    auto gp = offmate_problem_of(g, pol.blocks, pol.hw);
    REQUIRE(gp);
    const bytes least = pol.minimum_budget(gp->problem).value();
    for (const double more : {0.0, 0.3, 1.0, 3.0}) {
      const bytes budget = least + static_cast<bytes>(more * static_cast<double>(least));
      const auto a = pol.plan(g, budget);
      INFO((tied ? "tied" : "untied") << ", budget " << budget);
      REQUIRE(a);
      REQUIRE(a->program);
      const schedule& s = *a->program;
      ++plans;
      // The simulator again, from outside: valid, within the budget, as predicted.
      const auto r = sim::simulate(g, s, {.budget = budget, .hw = pol.hw});
      INFO((r.first_violation ? r.first_violation->message : std::string()));
      CHECK(r.valid);
      CHECK(r.peak <= budget);
      CHECK(r.peak == s.predicted_peak);
      CHECK(r.makespan == doctest::Approx(s.predicted_time));
      CHECK(a->makespan == doctest::Approx(r.makespan));
      CHECK(a->peak_bytes == r.peak);
      CHECK(a->host_peak_bytes == r.host_peak);
      CHECK(a->makespan >= g.ideal_time());
      // One update per trainable parameter read by an op.
      REQUIRE(s.parameters.managed);
      for (std::size_t p = 0; p < g.parameters().size(); ++p) {
        const auto n = static_cast<int>(p);
        const auto updates = std::ranges::count_if(s.ops, [&](const instruction& i) {
          return (i.op == op_kind::update || i.op == op_kind::cpu_update) && i.node == n;
        });
        const bool read = !g.parameter_users(n).empty();
        CHECK(updates == (g.parameters()[p].trainable && read ? 1 : 0));
      }
      cpu_updates += static_cast<int>(std::ranges::count_if(
          s.ops, [](const instruction& i) { return i.op == op_kind::cpu_update; }));
      offloaded += static_cast<int>(std::ranges::count_if(s.ops, [](const instruction& i) {
        return i.op == op_kind::offload && i.part == tensor_part::weight;
      }));
      activations_moved += static_cast<int>(std::ranges::count_if(s.ops, [](const instruction& i) {
        return i.op == op_kind::offload && i.part == tensor_part::data;
      }));
      // Offloading blocks make their cheap operations again (their forwards run twice).
      std::vector<int> runs(static_cast<std::size_t>(g.compute_count()), 0);
      for (const instruction& i : s.ops)
        if (i.op == op_kind::compute) ++runs[static_cast<std::size_t>(i.node)];
      for (int k = 0; k < a->problem.length(); ++k)
        if (a->problem.option(k, a->plan.option[static_cast<std::size_t>(k)]).name == "offload")
          for (int f : a->blocks[static_cast<std::size_t>(k)])
            made_again += runs[static_cast<std::size_t>(f)] > 1;
      // The same input, the same program.
      const auto again = pol.plan(g, budget);
      REQUIRE(again);
      CHECK(again->program->ops == s.ops);
      CHECK(*again->program == s);
    }
  }
  CHECK(plans == 8);
  CHECK(cpu_updates > 0);
  CHECK(offloaded > 0);
  CHECK(activations_moved > 0);
  CHECK(made_again > 0);
}

TEST_CASE("offmate program: the paper's literal semantics plans without one") {
  const graph g = small_llama(1, false);
  offmate<program_backend> pol;
  pol.time_limit = 30;
  pol.semantics = offmate_semantics::literal;
  const auto a = pol.plan(g, 64ll << 20);
  REQUIRE(a);
  CHECK_FALSE(a->program);
  CHECK(a->makespan == a->fractional_makespan);
  CHECK(std::ranges::any_of(a->notes, [](const std::string& n) {
    return n.find("literal semantics") != std::string::npos;
  }));
}

#endif

TEST_CASE("offmate batch size from a graph: a program for the graph at the batch it chose") {
  const graph g = small_llama(2, false);
  offmate<program_backend> pol;
  pol.time_limit = 30;
  auto gp = offmate_problem_of(g, pol.blocks, pol.hw);
  REQUIRE(gp);
  const bytes least = pol.minimum_budget(gp->problem).value();
  int above_one = 0;
  for (const double more : {0.0, 1.0, 4.0}) {
    const bytes budget = least + static_cast<bytes>(more * static_cast<double>(least));
    INFO("budget " << budget);
    const auto v = pol.plan_batch(g, budget, 4);
    REQUIRE_MESSAGE(v.ok(), v.message());
    REQUIRE(v->answer.program);
    CHECK(v->batch >= 1);
    CHECK(v->batch <= 4);
    above_one += v->batch > 1;
    // The program is the graph's at that batch: valid there, within the budget, as predicted.
    const graph at = at_batch(g, v->batch);
    const auto r = sim::simulate(at, *v->answer.program, {.budget = budget, .hw = pol.hw});
    INFO((r.first_violation ? r.first_violation->message : std::string()));
    CHECK(r.valid);
    CHECK(r.peak <= budget);
    CHECK(r.makespan == doctest::Approx(v->answer.makespan));
    // Never slower per sample than the graph's own batch.
    const auto one = pol.plan(g, budget);
    REQUIRE(one.ok());
    CHECK(v->samples_per_second() >= 1 / one->makespan * (1 - 1e-9));
    CHECK(v->answer.makespan / v->batch >= v->time_per_sample * (1 - 1e-6));
  }
  CHECK(above_one > 0);
}
