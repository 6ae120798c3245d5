// The modulo scheduler for any allocation: valid plans on random non-contiguous allocations (the
// simulator replays each; packed placement at every period from the largest work), never fewer
// activations than 1F1B* on contiguous ones (Theorem 15), the thesis' period-2 pattern of {1,
// 3}|{2}, its search under memory, and bad input.

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/pipeline/modulo.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;
using remat::testing::pipe_chain;
using remat::testing::pipe_layer;

namespace {

struct pm_instance {
  pipeline_problem problem;
  std::vector<pipeline_stage> stages;
};

/// Random layers cut into random stages on random processors (a processor may hold several);
/// with `contiguous`, stage s on processor s - 1.
pm_instance pm_random(std::mt19937& rng, bool contiguous) {
  std::uniform_int_distribution<int> len(2, 8), time(1, 6), size(0, 3), coin(0, 2), bw(0, 2);
  const int n = len(rng);
  std::vector<pipe_layer> ls;
  for (int l = 0; l < n; ++l)
    ls.push_back({time(rng) * 0.5, time(rng) * 0.5, size(rng), size(rng)});
  pm_instance out;
  out.problem.layers = pipe_chain(ls, 1);
  const double bandwidths[] = {std::numeric_limits<double>::infinity(), 2, 8};
  out.problem.bandwidth = bandwidths[bw(rng)];
  std::vector<int> last;
  for (int l = 1; l < n; ++l)
    if (coin(rng) > 0) last.push_back(l);
  last.push_back(n);
  out.stages = contiguous_stages(last);
  const int S = static_cast<int>(last.size());
  if (contiguous) {
    out.problem.processors = S;
  } else {
    std::uniform_int_distribution<int> procs(1, std::max(1, S - 1));
    out.problem.processors = procs(rng);
    std::uniform_int_distribution<int> which(0, out.problem.processors - 1);
    for (auto& st : out.stages) st.processor = which(rng);
  }
  return out;
}

seconds pm_largest_load(const pm_instance& in) {
  const auto ops = detail::pipe_chain_ops(in.problem, in.stages);
  const auto load = detail::pipe_resource_loads(in.problem, ops);
  return *std::max_element(load.begin(), load.end());
}

}  // namespace

TEST_CASE("modulo: every plan on random non-contiguous allocations replays valid") {
  std::mt19937 rng(7);
  int built = 0, gaps = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const pm_instance in = pm_random(rng, false);
    const seconds lo = pm_largest_load(in);
    for (double factor : {1.0, 1.25, 1.7, 3.0}) {
      auto plan = pipeline_modulo(in.problem, in.stages, lo * factor);
      if (!plan) {  // a reservation table too fragmented for an op: said so, and only then
        CHECK(plan.code() == status::infeasible);
        CHECK(plan.message().find("no gap") != std::string::npos);
        ++gaps;
        continue;
      }
      ++built;
      const auto r = sim::simulate_pipeline(in.problem, *plan);
      INFO("trial " << trial << " T " << lo * factor << ": "
                    << (r.first_violation ? r.first_violation->message : ""));
      CHECK(r.valid);
      CHECK(r.period == lo * factor);
    }
    // Packed placement never runs out of gaps: at every period from the largest work up.
    for (double factor : {1.0, 1.1, 2.0}) {
      auto packed =
          pipeline_modulo(in.problem, in.stages, lo * factor, pipeline_modulo_placement::packed);
      REQUIRE_MESSAGE(packed.ok(), packed.message());
      const auto r = sim::simulate_pipeline(in.problem, *packed);
      INFO("packed, trial " << trial << ": "
                            << (r.first_violation ? r.first_violation->message : ""));
      CHECK(r.valid);
    }
    // The search, without a memory limit, returns a valid plan at once.
    auto fit = pipeline_modulo_fit(in.problem, in.stages);
    REQUIRE_MESSAGE(fit.ok(), fit.message());
    CHECK(sim::simulate_pipeline(in.problem, *fit).valid);
  }
  CHECK(built > 900);
  MESSAGE("modulo: " << built << " plans built, " << gaps << " periods with no gap left");
}

TEST_CASE("modulo: on contiguous allocations it keeps at least 1F1B*'s activations") {
  std::mt19937 rng(11);
  int compared = 0, equal = 0;
  for (int trial = 0; trial < 300; ++trial) {
    pm_instance in = pm_random(rng, true);
    const seconds lo = pm_largest_load(in);
    for (double factor : {1.0, 1.3, 2.0, 3.5}) {
      const seconds period = lo * factor;
      auto plan = pipeline_modulo(in.problem, in.stages, period);
      auto groups = one_f_one_b_star_groups(in.problem, in.stages, period);
      REQUIRE(groups.ok());
      auto packed =
          pipeline_modulo(in.problem, in.stages, period, pipeline_modulo_placement::packed);
      REQUIRE(packed.ok());
      const auto rp = sim::simulate_pipeline(in.problem, *packed);
      REQUIRE(rp.valid);
      for (std::size_t s = 0; s < in.stages.size(); ++s) CHECK(rp.nca[s] >= (*groups)[s]);
      if (!plan) continue;
      const auto r = sim::simulate_pipeline(in.problem, *plan);
      REQUIRE(r.valid);
      ++compared;
      bool same = true;
      for (std::size_t s = 0; s < in.stages.size(); ++s) {
        CHECK(r.nca[s] >= (*groups)[s]);  // Theorem 15
        same = same && r.nca[s] == (*groups)[s];
      }
      equal += same ? 1 : 0;
    }
    // Under memory, its search never beats Alg. 7's period (the best 1-periodic one).
    std::uniform_int_distribution<int> mem(0, 30);
    in.problem.memory = mem(rng);
    auto alg7 = one_f_one_b_star_fit(in.problem, in.stages);
    auto fit = pipeline_modulo_fit(in.problem, in.stages);
    if (fit) {
      REQUIRE(alg7.ok());
      CHECK(fit->period >= alg7->period * (1 - 1e-9));
      const auto r = sim::simulate_pipeline(in.problem, *fit);
      CHECK(r.valid);
      for (bytes peak : r.processor_peaks) CHECK(peak <= in.problem.memory);
    } else {
      CHECK(fit.code() == status::budget_too_small);
    }
  }
  CHECK(compared > 800);
  MESSAGE("modulo vs 1F1B*: " << equal << " of " << compared << " plans with the same NCA");
}

TEST_CASE("modulo: {1, 3}|{2} with costs (1, 2, 1) at period 2") {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 0, 0}, {1, 1, 0, 0}, {0.5, 0.5, 0, 0}});
  p.processors = 2;
  const std::vector<pipeline_stage> stages{{1, 1, 0}, {2, 2, 1}, {3, 3, 0}};
  auto plan = pipeline_modulo(p, stages, 2);
  REQUIRE(plan.ok());
  const auto r = sim::simulate_pipeline(p, *plan);
  CHECK(r.valid);
  auto fit = pipeline_modulo_fit(p, stages);
  REQUIRE(fit.ok());
  CHECK(fit->period == doctest::Approx(2));
  // Below the processors' work (2 each) there is no plan.
  auto short_period = pipeline_modulo(p, stages, 1.9);
  CHECK(short_period.code() == status::infeasible);
  CHECK(short_period.message().find("processor 0") != std::string::npos);
}

TEST_CASE("modulo: the search under memory, and the smallest memory when nothing fits") {
  // Three stages of one layer, the first and last on processor 0; activations 2 each.
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 2, 1}, {1, 1, 2, 1}, {1, 1, 2, 1}}, 2);
  p.processors = 2;
  const std::vector<pipeline_stage> stages{{1, 1, 0}, {2, 2, 1}, {3, 3, 0}};
  p.memory = 1;
  auto none = pipeline_modulo_fit(p, stages);
  REQUIRE_FALSE(none.ok());
  CHECK(none.code() == status::budget_too_small);
  REQUIRE(none.err().minimum_budget);
  p.memory = *none.err().minimum_budget;
  auto fit = pipeline_modulo_fit(p, stages);
  REQUIRE_MESSAGE(fit.ok(), fit.message());
  const auto r = sim::simulate_pipeline(p, *fit);
  CHECK(r.valid);
  for (bytes peak : r.processor_peaks) CHECK(peak <= p.memory);
  // With unlimited memory the period is the largest processor work (4 on processor 0).
  p.memory = unlimited_bytes;
  auto fast = pipeline_modulo_fit(p, stages);
  REQUIRE(fast.ok());
  CHECK(fast->period == doctest::Approx(4));
  CHECK(fast->period < fit->period + 1e-9);
}

TEST_CASE("modulo: bad input") {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 1}, {1, 1, 1, 1}});
  p.processors = 2;
  CHECK(pipeline_modulo(p, {{1, 1, 0}}, 4).code() == status::invalid_problem);  // a layer left
  CHECK(pipeline_modulo(p, {{1, 1, 0}, {2, 2, 2}}, 4).code() == status::invalid_problem);
  CHECK(pipeline_modulo(p, {{1, 1, 0}, {2, 2, 1}}, 0).code() == status::invalid_problem);
  p.layers = pipe_chain({{0, 0, 1, 1}, {0, 0, 1, 1}});
  CHECK(pipeline_modulo_fit(p, {{1, 1, 0}, {2, 2, 1}}).code() == status::infeasible);
}
