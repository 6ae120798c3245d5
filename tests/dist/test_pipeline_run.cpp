// The MPI-free core of the distributed runner (dist/pipeline_run.hpp): each rank's actions for one
// training step of a plan, checked by playing every rank at once (no deadlock, every message
// matched), by a value-level replay (every F gets its input from the stage before on the same
// micro-batch, every B after its F), and the plan's predicted step time.

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include <remat/dist/pipeline_run.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;
using remat::testing::pipe_chain;
using dist_k = remat::dist::action_kind;
using dist_opk = pipeline_op_kind;

namespace {

/// Replays the actions with values: a stage's output on micro-batch m is known once its F ran
/// (with its input there), a gradient once its B ran; checks every data dependency and that each
/// stage runs F and B on micro-batches 0..n-1 in increasing order, once each.
void dist_replay(const dist::pipeline_run& run, int stages) {
  const int n = run.micro_batches;
  // Which (stage, micro-batch) outputs and gradients exist, and which ranks hold them.
  std::map<std::tuple<int, int, int>, bool> have;        // (0 = output / 1 = input gradient, s, m)
  std::map<std::tuple<int, int, int, int>, bool> inbox;  // (kind, stage, m, rank): received
  std::vector<int> next_f(static_cast<std::size_t>(stages), 0), next_b(next_f);
  // Follow the global order that check_deadlock_free found possible: step ranks round-robin.
  std::vector<std::size_t> pc(run.ranks.size(), 0);
  std::map<std::tuple<int, int, int, int>, bool> sent;  // (recv kind, stage, m, receiver)
  bool moved = true;
  while (moved) {
    moved = false;
    for (std::size_t r = 0; r < run.ranks.size(); ++r)
      while (pc[r] < run.ranks[r].size()) {
        const auto& a = run.ranks[r][pc[r]];
        const int me = static_cast<int>(r);
        if (a.kind == dist_k::recv_activation || a.kind == dist_k::recv_gradient) {
          if (!sent[{static_cast<int>(a.kind), a.stage, a.micro_batch, me}]) break;
          inbox[{static_cast<int>(a.kind), a.stage, a.micro_batch, me}] = true;
        } else if (a.kind == dist_k::forward) {
          CHECK(a.micro_batch == next_f[static_cast<std::size_t>(a.stage - 1)]++);
          if (a.stage > 1)
            CHECK(inbox[{static_cast<int>(dist_k::recv_activation), a.stage, a.micro_batch, me}]);
          have[{0, a.stage, a.micro_batch}] = true;
        } else if (a.kind == dist_k::backward) {
          CHECK(a.micro_batch == next_b[static_cast<std::size_t>(a.stage - 1)]++);
          CHECK(have[{0, a.stage, a.micro_batch}]);  // its own F ran
          if (a.stage < stages)
            CHECK(inbox[{static_cast<int>(dist_k::recv_gradient), a.stage, a.micro_batch, me}]);
          have[{1, a.stage, a.micro_batch}] = true;
        } else if (a.kind == dist_k::send_activation) {
          CHECK(have[{0, a.stage, a.micro_batch}]);
          CHECK(run.stage_rank[static_cast<std::size_t>(a.stage)] == a.peer);
          sent[{static_cast<int>(dist_k::recv_activation), a.stage + 1, a.micro_batch, a.peer}] =
              true;
        } else if (a.kind == dist_k::send_gradient) {
          CHECK(have[{1, a.stage, a.micro_batch}]);
          CHECK(run.stage_rank[static_cast<std::size_t>(a.stage - 2)] == a.peer);
          sent[{static_cast<int>(dist_k::recv_gradient), a.stage - 1, a.micro_batch, a.peer}] =
              true;
        }
        ++pc[r];
        moved = true;
      }
  }
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    CHECK(pc[r] == run.ranks[r].size());
    REQUIRE(run.ranks[r].size() >= 2);
    CHECK(run.ranks[r][run.ranks[r].size() - 2].kind == dist_k::flush);
    CHECK(run.ranks[r].back().kind == dist_k::optimizer_step);
  }
  for (int s = 0; s < stages; ++s) {
    CHECK(next_f[static_cast<std::size_t>(s)] == n);
    CHECK(next_b[static_cast<std::size_t>(s)] == n);
  }
}

/// Four one-layer stages on four processors: layer times (F, B) and activations 1.
pipeline_problem dist_four(bytes memory = unlimited_bytes) {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 2, 1, 1}, {1, 2, 1, 1}, {2, 2, 1, 1}, {1, 1, 1, 1}}, 1);
  p.processors = 4;
  p.memory = memory;
  return p;
}

}  // namespace

TEST_CASE("pipeline run: 1F1B* on four processors, fill, steady state and drain") {
  const pipeline_problem p = dist_four();
  auto plan = one_f_one_b_star_fit(p, contiguous_stages({1, 2, 3, 4}));
  REQUIRE(plan);
  for (int n : {1, 2, 3, 4, 7, 12}) {
    CAPTURE(n);
    auto run = dist::make_pipeline_run(*plan, 4, n);
    REQUIRE(run);
    CHECK(run->stage_rank == std::vector<int>{0, 1, 2, 3});
    CHECK(dist::check_deadlock_free(*run));
    dist_replay(*run, 4);
    // Rank 0: recv-free; per micro-batch one F with its send, one B after the gradient.
    const auto& r0 = run->ranks[0];
    CHECK(r0.front() == dist::action{dist_k::forward, 1, 0, -1});
    CHECK(r0[1] == dist::action{dist_k::send_activation, 1, 0, 1});
    CHECK(static_cast<int>(r0.size()) == 4 * n + 2);
    // The last rank: F then B of each micro-batch, never two activations.
    const auto& r3 = run->ranks[3];
    CHECK(r3[0] == dist::action{dist_k::recv_activation, 4, 0, 2});
    CHECK(r3[1] == dist::action{dist_k::forward, 4, 0, -1});
    CHECK(r3[2] == dist::action{dist_k::backward, 4, 0, -1});
    CHECK(r3[3] == dist::action{dist_k::send_gradient, 4, 0, 2});
  }
}

TEST_CASE("pipeline run: 1F1B keeps at most NCA micro-batches in flight per stage") {
  const pipeline_problem p = dist_four();
  auto plan = one_f_one_b_star_fit(p, contiguous_stages({1, 2, 3, 4}));
  REQUIRE(plan);
  const auto rep = sim::simulate_pipeline(p, *plan);
  REQUIRE(rep.valid);
  auto run = dist::make_pipeline_run(*plan, 4, 10);
  REQUIRE(run);
  for (int s = 1; s <= 4; ++s) {
    int alive = 0, most = 0;
    for (const auto& a : run->ranks[static_cast<std::size_t>(s - 1)]) {
      if (a.kind == dist_k::forward) most = std::max(most, ++alive);
      if (a.kind == dist_k::backward) --alive;
    }
    CHECK(most == rep.nca[static_cast<std::size_t>(s - 1)]);
  }
}

TEST_CASE("pipeline run: a non-contiguous allocation, stages 1 and 3 on one rank") {
  const pipeline_plan plan = remat::testing::one_three_on_one_processor();
  for (int n : {1, 2, 5}) {
    CAPTURE(n);
    auto run = dist::make_pipeline_run(plan, 2, n);
    REQUIRE(run);
    CHECK(run->stages_of(0) == std::vector<int>{1, 3});
    CHECK(run->stages_of(1) == std::vector<int>{2});
    CHECK(dist::check_deadlock_free(*run));
    dist_replay(*run, 3);
  }
  // Stages 1 and 3 on rank 0, 2 on rank 1; the hand-overs 2 -> 3 and 3 -> 2 cross ranks.
  pipeline_plan local = plan;
  local.stages = {{1, 1, 0}, {2, 2, 0}, {3, 3, 1}};
  // A plan whose stages 1 and 2 share a rank: a local hand-over (peer = the rank itself).
  local.ops.clear();
  for (int s = 1; s <= 3; ++s) {
    local.ops.push_back(place_op(dist_opk::forward, s, s - 1, 0, 10));
    local.ops.push_back(place_op(dist_opk::backward, s, 9 - s, 0, 10));
  }
  auto run = dist::make_pipeline_run(local, 2, 3);
  REQUIRE(run);
  CHECK(run->ranks[0][1] == dist::action{dist_k::send_activation, 1, 0, 0});
  CHECK(run->ranks[0][2] == dist::action{dist_k::recv_activation, 2, 0, 0});
  CHECK(dist::check_deadlock_free(*run));
  dist_replay(*run, 3);
}

TEST_CASE("pipeline run: k-periodic patterns run each stage's micro-batches in order") {
  // One stage, k = 2, B of odd micro-batches a period late: in time B(2) runs before B(1). The
  // run gives the B slots micro-batches 0, 1, 2, ... in order.
  pipeline_plan plan;
  plan.stages = {{1, 1, 0}};
  plan.period = 5;
  plan.k = 2;
  plan.ops = {{dist_opk::forward, 1, 0, 0},
              {dist_opk::backward, 1, 1, 0},
              {dist_opk::forward, 1, 3, 1},
              {dist_opk::backward, 1, 4, -1}};
  auto run = dist::make_pipeline_run(plan, 1, 5);
  REQUIRE(run);
  std::vector<dist::action> fb;
  for (const auto& a : run->ranks[0])
    if (a.kind == dist_k::forward || a.kind == dist_k::backward) fb.push_back(a);
  REQUIRE(fb.size() == 10);
  // Times: F0 0, B0 1, F1 3, F2 5, B2 6, F3 8, B1 9, F4 10, B4 11, B3 14.
  const std::vector<std::pair<dist_k, int>> want = {
      {dist_k::forward, 0},  {dist_k::backward, 0}, {dist_k::forward, 1},  {dist_k::forward, 2},
      {dist_k::backward, 1}, {dist_k::forward, 3},  {dist_k::backward, 2}, {dist_k::forward, 4},
      {dist_k::backward, 3}, {dist_k::backward, 4}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(fb[i].kind == want[i].first);
    CHECK(fb[i].micro_batch == want[i].second);
  }
  dist_replay(*run, 1);

  // Theorem 16's 3-periodic pattern on four stages (tests/sim/test_pipeline.cpp).
  pipeline_plan three;
  three.stages = contiguous_stages({1, 2, 3, 4});
  three.period = 8;
  three.k = 3;
  for (int m = 0; m < 3; ++m)
    for (int s = 1; s <= 4; ++s) {
      three.ops.push_back(place_op(dist_opk::forward, s, 2 * m + s - 1, m, 8, 3));
      three.ops.push_back(place_op(dist_opk::backward, s, 2 * m + 8 - s, m, 8, 3));
      if (s < 4) {
        three.ops.push_back(place_op(dist_opk::send_activation, s, 2 * m + s, m, 8, 3));
        three.ops.push_back(place_op(dist_opk::send_gradient, s, 2 * m + 8 - s, m, 8, 3));
      }
    }
  for (int n : {1, 3, 4, 8}) {
    CAPTURE(n);
    auto r3 = dist::make_pipeline_run(three, 4, n);
    REQUIRE(r3);
    CHECK(dist::check_deadlock_free(*r3));
    dist_replay(*r3, 4);
  }
}

TEST_CASE("pipeline run: the deadlock check finds ranks that wait for each other") {
  dist::pipeline_run run;
  run.processors = 2;
  run.micro_batches = 1;
  run.stage_rank = {0, 1};
  // Rank 0 waits for the gradient before sending the activation that rank 1 waits for.
  run.ranks = {{{dist_k::forward, 1, 0, -1},
                {dist_k::recv_gradient, 1, 0, 1},
                {dist_k::send_activation, 1, 0, 1},
                {dist_k::backward, 1, 0, -1},
                {dist_k::flush, 0, -1, -1}},
               {{dist_k::recv_activation, 2, 0, 0},
                {dist_k::forward, 2, 0, -1},
                {dist_k::backward, 2, 0, -1},
                {dist_k::send_gradient, 2, 0, 0},
                {dist_k::flush, 0, -1, -1}}};
  auto r = dist::check_deadlock_free(run);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == status::invalid_problem);
  CHECK(r.message().find("wait for each other forever") != std::string::npos);
  CHECK(r.message().find("rank 0 waits at action 1 (recv_gradient stage 1 micro-batch 0 peer 1)") !=
        std::string::npos);
  CHECK(r.message().find("rank 1 waits at action 0 (recv_activation stage 2") != std::string::npos);
  // A send nobody receives.
  run.ranks[1].erase(run.ranks[1].begin());
  auto u = dist::check_deadlock_free(run);
  REQUIRE_FALSE(u);
  CHECK(u.message().find("has no matching receive on rank 1") != std::string::npos);
}

TEST_CASE("pipeline run: the predicted step time is the unrolled plan's makespan") {
  const pipeline_problem p = dist_four();
  auto plan = one_f_one_b_star_fit(p, contiguous_stages({1, 2, 3, 4}));
  REQUIRE(plan);
  // 1F1B*(T) with T the whole work is one group: one micro-batch runs every F then every B,
  // back to back (free transfers).
  const seconds whole = p.layers.ideal_time();
  auto seq = one_f_one_b_star(p, contiguous_stages({1, 2, 3, 4}), whole);
  REQUIRE(seq);
  auto one = dist::predicted_step_time(p, *seq, 1);
  REQUIRE(one);
  CHECK(*one == doctest::Approx(whole));
  // The fitted plan's backwards wait for their group's window: at least the whole work.
  auto fit_one = dist::predicted_step_time(p, *plan, 1);
  REQUIRE(fit_one);
  CHECK(*fit_one >= whole);
  // Each further micro-batch adds one period in the steady state.
  auto t10 = dist::predicted_step_time(p, *plan, 10);
  auto t11 = dist::predicted_step_time(p, *plan, 11);
  REQUIRE(t10);
  REQUIRE(t11);
  CHECK(*t11 - *t10 == doctest::Approx(plan->normalized_period()));
  // With transfers that take time, one micro-batch pays the six of them.
  pipeline_problem slow = p;
  slow.bandwidth = 2;  // a = 1 byte: 0.5 s per transfer
  auto seq_slow = one_f_one_b_star(slow, contiguous_stages({1, 2, 3, 4}), whole + 3);
  REQUIRE(seq_slow);
  auto t1 = dist::predicted_step_time(slow, *seq_slow, 1);
  REQUIRE(t1);
  CHECK(*t1 == doctest::Approx(whole + 6 * 0.5));
}

TEST_CASE("pipeline run: a recomputing stage's backward takes its program's makespan") {
  const pipeline_problem p = dist_four();
  std::vector<pipeline_stage> stages = contiguous_stages({2, 4});
  const chain seg = remat::detail::segment_chain(p.layers, 1, 2);
  const rotor r;
  auto program = r.solve(seg, r.minimum_budget(seg));
  REQUIRE(program);
  stages[0].recompute = *program;
  auto cost = sim::stage_cost(p.layers, stages[0]);
  REQUIRE(cost);
  // The least memory recomputes a forward: B is longer than the layers' backwards.
  CHECK(cost->backward > p.layers.ub(1) + p.layers.ub(2));
  // One group: one micro-batch runs every F then every B, back to back.
  const seconds work = cost->forward + cost->backward + p.layers.uf(3) + p.layers.uf(4) +
                       p.layers.ub(3) + p.layers.ub(4);
  auto seq = one_f_one_b_star(p, stages, work);
  REQUIRE(seq);
  auto one = dist::predicted_step_time(p, *seq, 1);
  REQUIRE(one);
  CHECK(*one == doctest::Approx(work));
}

TEST_CASE("pipeline run: bad input is refused, naming what is wrong") {
  const pipeline_plan plan = remat::testing::one_three_on_one_processor();
  auto zero = dist::make_pipeline_run(plan, 2, 0);
  REQUIRE_FALSE(zero);
  CHECK(zero.message().find("micro_batches is 0") != std::string::npos);
  auto few = dist::make_pipeline_run(plan, 1, 2);
  REQUIRE_FALSE(few);
  CHECK(few.message().find("stage 2 is on processor 1 but the run has processors 0..0") !=
        std::string::npos);
  pipeline_plan missing = plan;
  missing.ops.erase(missing.ops.begin());  // F of stage 1
  auto m = dist::make_pipeline_run(missing, 2, 2);
  REQUIRE_FALSE(m);
  CHECK(m.message().find("F of stage 1 occurs 0 times") != std::string::npos);
  pipeline_plan bad_period = plan;
  bad_period.period = 0;
  CHECK_FALSE(dist::make_pipeline_run(bad_period, 2, 2));
}
