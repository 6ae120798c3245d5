// 1F1B*(T) and the search for its smallest period under memory (Alg. 7): every plan is replayed
// by the pipeline simulator, and its NCA compared with the groups, with PipeDream's 1F1B, and
// with an exhaustive search over 1-periodic patterns (Theorem 15).

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/one_f_one_b.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;
using remat::testing::pipe_chain;
using remat::testing::pipe_layer;

namespace {

/// A problem of one-layer stages, one per processor, on a contiguous allocation.
pipeline_problem ofob_problem(const std::vector<pipe_layer>& layers, double bandwidth,
                              bytes memory = unlimited_bytes) {
  pipeline_problem p;
  p.layers = pipe_chain(layers, 1);
  p.processors = p.layers.length();
  p.bandwidth = bandwidth;
  p.memory = memory;
  return p;
}

std::vector<pipeline_stage> ofob_one_layer_stages(int n) {
  std::vector<int> last;
  for (int l = 1; l <= n; ++l) last.push_back(l);
  return contiguous_stages(last);
}

/// The replay of 1F1B*(T), required valid, with period T.
sim::pipeline_report ofob_replay(const pipeline_problem& p, const std::vector<pipeline_stage>& st,
                                 seconds period) {
  auto plan = one_f_one_b_star(p, st, period);
  REQUIRE_MESSAGE(plan.ok(), plan.message());
  auto r = sim::simulate_pipeline(p, *plan);
  INFO("period " << period << ": " << (r.first_violation ? r.first_violation->message : ""));
  REQUIRE(r.valid);
  CHECK(r.period == period);
  return r;
}

/// Random stages: times in 1..4 (F and B), activations and weights in 0..3, a few layers each.
struct ofob_instance {
  pipeline_problem problem;
  std::vector<pipeline_stage> stages;
};

ofob_instance ofob_random(std::mt19937& rng, double bandwidth) {
  std::uniform_int_distribution<int> procs(1, 4), layers(1, 3), time(1, 4), size(0, 3);
  const int p = procs(rng);
  std::vector<pipe_layer> ls;
  std::vector<int> last;
  for (int s = 0; s < p; ++s) {
    const int n = layers(rng);
    for (int i = 0; i < n; ++i)
      ls.push_back({time(rng) * 0.5, time(rng) * 0.5, size(rng), size(rng)});
    last.push_back(static_cast<int>(ls.size()));
  }
  ofob_instance out;
  out.problem.layers = pipe_chain(ls, 2);
  out.problem.processors = p;
  out.problem.bandwidth = bandwidth;
  out.stages = contiguous_stages(last);
  return out;
}

/// The smallest NCA of each stage over the valid 1-periodic patterns of period T whose ops start
/// at whole seconds, for one-layer stages with whole times (transfers too). Every op runs as soon
/// as its inputs are there at its start modulo T: running it a period later only delays what
/// follows, which can only keep more activations. A transfer of length 0 runs at once.
std::vector<int> ofob_exhaustive(const pipeline_problem& p, int period) {
  using k = pipeline_op_kind;
  const int n = p.layers.length();
  struct step {
    k kind;
    int stage;
    seconds length;
  };
  std::vector<step> chain_of_ops;  // one mini-batch's ops in dependency order
  auto transfer = [&](int s) { return static_cast<double>(p.layers.a(s)) / p.bandwidth; };
  for (int s = 1; s <= n; ++s) {
    if (s > 1) chain_of_ops.push_back({k::send_activation, s - 1, transfer(s - 1)});
    chain_of_ops.push_back({k::forward, s, p.layers.uf(s)});
  }
  for (int s = n; s >= 1; --s) {
    if (s < n) chain_of_ops.push_back({k::send_gradient, s, transfer(s)});
    chain_of_ops.push_back({k::backward, s, p.layers.ub(s)});
  }
  std::vector<int> best(static_cast<std::size_t>(n), 1 << 20);
  std::vector<int> slot(chain_of_ops.size(), 0);  // the start modulo T of each op of length > 0
  auto next_at = [&](double ready, int t) {       // first time >= ready, = t mod T
    double x = t;
    while (x < ready) x += period;
    while (x - period >= ready) x -= period;
    return x;
  };
  for (;;) {
    std::vector<pipeline_op> abs;
    double ready = 0;
    for (std::size_t i = 0; i < chain_of_ops.size(); ++i) {
      const step& o = chain_of_ops[i];
      const double at = o.length > 0 ? next_at(ready, slot[i]) : ready;
      abs.push_back({o.kind, o.stage, at, 0});
      ready = at + o.length;
    }
    pipeline_plan plan;
    plan.stages = ofob_one_layer_stages(n);
    plan.period = period;
    plan.ops = testing::from_absolute(abs, period);
    const auto r = sim::simulate_pipeline(p, plan);
    if (r.valid)
      for (std::size_t s = 0; s < best.size(); ++s) best[s] = std::min(best[s], r.nca[s]);
    std::size_t i = 0;  // the next combination of start slots
    while (i < slot.size() && (chain_of_ops[i].length == 0 || ++slot[i] == period)) slot[i++] = 0;
    if (i == slot.size()) break;
  }
  return best;
}

}  // namespace

TEST_CASE("1F1B*: a stage in group g keeps g activations, in the simulator's replay") {
  std::mt19937 rng(12345);
  for (int round = 0; round < 60; ++round) {
    const auto inst = ofob_random(rng, round % 2 ? 2.0 : std::numeric_limits<double>::infinity());
    // From the largest work (below it no pattern) to the whole chain's (one group).
    const auto fit = one_f_one_b_star_fit(inst.problem, inst.stages);
    REQUIRE(fit.ok());
    const seconds lo = fit->period, hi = lo * inst.problem.processors * 3;
    for (seconds t = lo; t <= hi; t += (hi - lo) / 7 + 0.25) {
      CAPTURE(round);
      CAPTURE(t);
      const auto r = ofob_replay(inst.problem, inst.stages, t);
      CHECK(r.nca == *one_f_one_b_star_groups(inst.problem, inst.stages, t));
    }
  }
}

TEST_CASE("1F1B*: NCA does not grow with the period") {
  std::mt19937 rng(777);
  for (int round = 0; round < 30; ++round) {
    const auto inst = ofob_random(rng, 4.0);
    const seconds lo = one_f_one_b_star_fit(inst.problem, inst.stages)->period;
    std::vector<int> before;
    for (seconds t = lo; t <= lo * 8; t += lo / 5) {  // the whole work is below 7 lo
      const auto nca = ofob_replay(inst.problem, inst.stages, t).nca;
      if (!before.empty())
        for (std::size_t s = 0; s < nca.size(); ++s) CHECK(nca[s] <= before[s]);
      before = nca;
    }
    CHECK(std::all_of(before.begin(), before.end(), [](int g) { return g == 1; }));
  }
}

TEST_CASE("1F1B*: with every stage's work above T/2 it is PipeDream's 1F1B, NCA_i = P - i + 1") {
  const double free_links = std::numeric_limits<double>::infinity();
  for (int procs = 1; procs <= 5; ++procs) {
    std::vector<pipe_layer> layers;
    for (int i = 0; i < procs; ++i) layers.push_back({1.0 + 0.25 * i, 2.0 - 0.25 * i, 2, 1});
    const auto p = ofob_problem(layers, free_links);
    const auto st = ofob_one_layer_stages(procs);
    for (seconds t : {3.0, 4.0, 5.9}) {  // each stage's work is 3: more than T / 2
      const auto r = ofob_replay(p, st, t);
      for (int i = 1; i <= procs; ++i)
        CHECK(r.nca[static_cast<std::size_t>(i - 1)] == procs - i + 1);
    }
    // At T = 6 two stages share a group and the NCA drop.
    if (procs >= 2) CHECK(ofob_replay(p, st, 6).nca[0] < procs);
  }
}

TEST_CASE("1F1B* keeps the fewest activations of any 1-periodic pattern (Theorem 15)") {
  const double free_links = std::numeric_limits<double>::infinity();
  struct case_t {
    std::vector<pipe_layer> layers;
    std::vector<int> periods;
  };
  const std::vector<case_t> cases = {
      {{{1, 1, 1, 0}, {1, 1, 1, 0}}, {2, 3, 4, 5}},
      {{{1, 2, 1, 0}, {2, 1, 1, 0}}, {3, 4, 5, 6}},
      {{{1, 2, 1, 0}, {1, 1, 1, 0}, {2, 1, 1, 0}}, {3, 4, 5}},
      {{{1, 1, 1, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}}, {2, 4}},
  };
  for (const auto& c : cases) {
    const auto p = ofob_problem(c.layers, free_links);
    const auto st = ofob_one_layer_stages(p.layers.length());
    for (int t : c.periods) {
      CAPTURE(t);
      const auto mine = ofob_replay(p, st, t).nca;
      CHECK(mine == ofob_exhaustive(p, t));
    }
  }
  // Transfers as pseudo-stages: a = 1 over bandwidth 1, so each transfer takes 1 s and the link
  // between the two stages has work 2, as a stage.
  const auto p = ofob_problem({{1, 1, 1, 0}, {1, 1, 1, 0}}, 1.0);
  const auto st = ofob_one_layer_stages(2);
  for (int t : {2, 3, 4, 5, 6}) {
    CAPTURE(t);
    const auto mine = ofob_replay(p, st, t).nca;
    CHECK(mine == ofob_exhaustive(p, t));
    CHECK(mine == *one_f_one_b_star_groups(p, st, t));
  }
  CHECK(ofob_replay(p, st, 2).nca == std::vector<int>{3, 1});  // three resources, one each
  CHECK(ofob_replay(p, st, 4).nca == std::vector<int>{2, 1});  // the link joins stage 2
}

TEST_CASE("Alg. 7: the smallest period whose 1F1B* fits in M") {
  // Four stages of work 3 (F 1, B 2), activations 4, weights 1, C = 3, free transfers: at
  // T in [3, 6) the NCA are 4 3 2 1, at [6, 9) 2 2 1 1, at [9, 12) 2 1 1 1, from 12 all 1.
  const double free_links = std::numeric_limits<double>::infinity();
  const std::vector<pipe_layer> layers(4, {1, 2, 4, 1});
  const auto st = ofob_one_layer_stages(4);
  // Fixed: 3 x 1 weights and buffers of 8 on each side of a boundary: 11, 19, 19, 11. Stage 1
  // keeps a_0 = 1 per activation, the others 4. Peaks 31 at T = 3, 27 at 6, 23 from 9 on
  // (processor 1 and 2 then keep one activation; processor 0's second costs only 1).
  struct want {
    bytes memory;
    seconds period;
  };
  for (const auto& w :
       {want{1000, 3}, want{31, 3}, want{30, 6}, want{27, 6}, want{26, 9}, want{23, 9}}) {
    CAPTURE(w.memory);
    const auto p = ofob_problem(layers, free_links, w.memory);
    const auto plan = one_f_one_b_star_fit(p, st);
    REQUIRE_MESSAGE(plan.ok(), plan.message());
    CHECK(plan->period == w.period);
    CHECK(sim::simulate_pipeline(p, *plan).valid);
    // Just below, 1F1B* does not fit (or does not exist).
    const auto below = one_f_one_b_star(p, st, w.period - 0.01);
    if (below) CHECK_FALSE(sim::simulate_pipeline(p, *below).valid);
  }
  const auto p = ofob_problem(layers, free_links, 22);
  const auto none = one_f_one_b_star_fit(p, st);
  REQUIRE_FALSE(none.ok());
  CHECK(none.code() == status::budget_too_small);
  CHECK(none.err().minimum_budget == 23);
  CHECK(none.message().find("processor 1") != std::string::npos);
}

TEST_CASE("Theorem 17's costs (1, 2, 1) on 2 processors: contiguous period 3, non-contiguous 2") {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 1, 0}, {1, 1, 1, 0}, {0.5, 0.5, 1, 0}}, 1);
  p.processors = 2;
  for (const auto& last : {std::vector<int>{1, 3}, std::vector<int>{2, 3}}) {
    const auto plan = one_f_one_b_star_fit(p, contiguous_stages(last));
    REQUIRE(plan.ok());
    CHECK(plan->period == 3);
    CHECK(sim::simulate_pipeline(p, *plan).valid);
  }
  const auto r = sim::simulate_pipeline(p, testing::one_three_on_one_processor());
  CHECK(r.valid);
  CHECK(r.normalized_period == 2);
  // 1F1B* is for contiguous allocations only.
  const auto non = one_f_one_b_star(p, testing::one_three_on_one_processor().stages, 2);
  REQUIRE_FALSE(non.ok());
  CHECK(non.code() == status::invalid_problem);
  CHECK(non.message().find("processor 0 holds stages 1 and 3") != std::string::npos);
}

TEST_CASE("Lemma 10: weights (1, 2, 1), M = 2, P = 2: only the non-contiguous allocation fits") {
  pipeline_problem p = testing::weights_one_two_one();
  for (const auto& last : {std::vector<int>{1, 3}, std::vector<int>{2, 3}}) {
    const auto plan = one_f_one_b_star_fit(p, contiguous_stages(last));
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.code() == status::budget_too_small);
    CHECK(plan.err().minimum_budget == 3);
    CHECK(plan.message().find("1 x weights 3 bytes") != std::string::npos);
  }
  CHECK(sim::simulate_pipeline(p, testing::one_three_on_one_processor()).valid);
}

TEST_CASE("Alg. 7's minimum memory counts the activations when the weights alone are over M") {
  // One stage: C W = 3, an activation a_0 = 2; M = 2 is below the weights alone.
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 3}}, 2);
  p.copies = 1;
  p.memory = 2;
  const auto st = contiguous_stages({1});
  const auto none = one_f_one_b_star_fit(p, st);
  REQUIRE_FALSE(none.ok());
  CHECK(none.code() == status::budget_too_small);
  CHECK(none.err().minimum_budget == 5);  // 3 of weights and one activation of 2
  p.memory = 5;
  CHECK(one_f_one_b_star_fit(p, st).ok());
}

TEST_CASE("1F1B*: bad input errors") {
  const auto p = ofob_problem({{1, 2, 1, 0}, {2, 1, 1, 0}}, 1.0);
  const auto st = ofob_one_layer_stages(2);
  // Stage works are 3, the link's (1 + 1) / 1 = 2.
  auto r = one_f_one_b_star(p, st, 2.5);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == status::infeasible);
  CHECK(r.message().find("shorter than the work of stage 1 (3 s") != std::string::npos);
  auto slow = p;
  slow.bandwidth = 0.5;
  r = one_f_one_b_star(slow, st, 3.5);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message().find("the link from stage 1 to stage 2 (4 s") != std::string::npos);
  for (seconds bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    r = one_f_one_b_star(p, st, bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("the period is") != std::string::npos);
  }
  auto gap = st;
  gap[1].first = 3;
  CHECK(one_f_one_b_star_fit(p, gap).message().find("stage 2 starts at layer 3") !=
        std::string::npos);
  auto none = p;
  none.processors = 0;
  CHECK(one_f_one_b_star(none, st, 3).message().find("processors is 0") != std::string::npos);
  CHECK(one_f_one_b_star_groups(p, st, 1).code() == status::infeasible);
}
