// The pipeline problem's validation and the pipeline simulator: valid patterns replay with the
// NCA and peaks they must have; hand-made invalid ones are rejected, naming what is wrong.

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;
using remat::testing::pipe_chain;
using pipe_vk = sim::pipeline_violation_kind;
using pipe_opk = pipeline_op_kind;

namespace {

/// The costs (1, 2, 1) split evenly between F and B, activations 1, weights (1, 2, 1).
pipeline_problem sim_one_two_one(bytes memory = unlimited_bytes, int copies = 3) {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 1, 1}, {1, 1, 1, 2}, {0.5, 0.5, 1, 1}}, 1);
  p.processors = 2;
  p.memory = memory;
  p.copies = copies;
  return p;
}

/// The report failed with `kind` and its message holds every part (says which is missing).
bool sim_says(const sim::pipeline_report& r, pipe_vk kind,
              std::initializer_list<std::string_view> parts) {
  if (r.valid || !r.first_violation) {
    MESSAGE("expected a violation, the plan is valid");
    return false;
  }
  const auto& v = *r.first_violation;
  if (v.kind != kind) {
    MESSAGE("wrong kind " << static_cast<int>(v.kind) << ": " << v.message);
    return false;
  }
  for (auto p : parts)
    if (v.message.find(p) == std::string::npos) {
      MESSAGE("message '" << v.message << "' lacks '" << std::string(p) << "'");
      return false;
    }
  return true;
}

/// The index of the op of that kind and stage in the plan (its first occurrence).
std::size_t sim_op(const pipeline_plan& plan, pipe_opk kind, int stage) {
  for (std::size_t i = 0; i < plan.ops.size(); ++i)
    if (plan.ops[i].kind == kind && plan.ops[i].stage == stage) return i;
  FAIL("no such op");
  return 0;
}

}  // namespace

TEST_CASE("pipeline problem: validation names the field at fault") {
  const pipeline_problem ok = sim_one_two_one();
  CHECK(validate(ok).ok());
  auto says = [&](auto edit, std::initializer_list<std::string_view> parts) {
    pipeline_problem p = ok;
    edit(p);
    const auto r = validate(p);
    if (r.ok() || r.code() != status::invalid_problem) return false;
    for (auto part : parts)
      if (r.message().find(part) == std::string::npos) {
        MESSAGE(r.message() << " lacks " << std::string(part));
        return false;
      }
    return true;
  };
  CHECK(says([](auto& p) { p.processors = 0; }, {"processors is 0", "at least 1"}));
  CHECK(says([](auto& p) { p.processors = 4; },
             {"processors is 4", "has 3 layers", "at most 3 processors"}));
  CHECK(says([](auto& p) { p.bandwidth = 0; }, {"bandwidth is 0", "> 0"}));
  CHECK(says([](auto& p) { p.bandwidth = -2; }, {"bandwidth is -2"}));
  CHECK(says([](auto& p) { p.bandwidth = std::nan(""); }, {"bandwidth is nan"}));
  CHECK(says([](auto& p) { p.memory = -1; }, {"memory is negative (-1)"}));
  CHECK(says([](auto& p) { p.copies = 0; }, {"copies is 0"}));
  CHECK(says([](auto& p) { p.layers.stages[1].weight_bytes = -3; },
             {"stage 2", "weight_bytes is negative"}));
  CHECK(says([](auto& p) { p.layers.stages.clear(); }, {"no stage"}));
  pipeline_problem finite = ok;
  finite.bandwidth = 1e9;
  CHECK(validate(finite).ok());
}

TEST_CASE("pipeline sim: a non-contiguous pattern of period 2 replays with the NCA it implies") {
  const pipeline_problem p = sim_one_two_one();
  const pipeline_plan plan = testing::one_three_on_one_processor();
  const auto r = sim::simulate_pipeline(p, plan);
  INFO((r.first_violation ? r.first_violation->message : ""));
  REQUIRE(r.valid);
  CHECK(r.period == 2);
  CHECK(r.normalized_period == 2);
  CHECK(r.mini_batches > 10);
  // Stage 1 keeps a_0 from its F (at 2m) to the end of its B (at 2m + 5.5): 3 at once; stage 2
  // from 2m + 0.5 to 2m + 4.5: 2; stage 3 from 2m + 1.5 to 2m + 3: 1.
  CHECK(r.nca == std::vector<int>{3, 2, 1});
  // Processor 0: 3 x (1 + 1) weights, buffers a_1 + delta_1 and a_2 + delta_2, and at most
  // 3 + 1 activations (stage 1's third starts at 2m while stage 3's lives over [2m-0.5, 2m+1)).
  CHECK(r.processor_peaks[0] == 6 + 4 + 4);
  // Processor 1: 3 x 2, buffers on both sides, 2 activations.
  CHECK(r.processor_peaks[1] == 6 + 4 + 2);
  // More mini-batches change nothing.
  const auto longer = sim::simulate_pipeline(p, plan, {200});
  CHECK(longer.mini_batches == 200);
  CHECK(longer.nca == r.nca);
  CHECK(longer.processor_peaks == r.processor_peaks);
}

TEST_CASE("pipeline sim: a k-periodic pattern covers each mini-batch once") {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 4, 0}}, 8);
  pipeline_plan plan;
  plan.stages = {{1, 1, 0}};
  plan.period = 5;
  plan.k = 2;
  // F0 B0 (idle) F1 B1 in a period of 5: two mini-batches per period.
  plan.ops = {{pipe_opk::forward, 1, 0, 0},
              {pipe_opk::backward, 1, 1, 0},
              {pipe_opk::forward, 1, 3, 1},
              {pipe_opk::backward, 1, 4, 1}};
  auto r = sim::simulate_pipeline(p, plan);
  REQUIRE(r.valid);
  CHECK(r.normalized_period == 2.5);
  CHECK(r.nca == std::vector<int>{1});
  CHECK(r.processor_peaks == std::vector<bytes>{8});
  plan.ops[3].shift = -1;  // still the odd ones, but B of 2j + 1 a period later: 2 alive at once
  r = sim::simulate_pipeline(p, plan);
  REQUIRE(r.valid);
  CHECK(r.nca == std::vector<int>{2});
  CHECK(r.processor_peaks == std::vector<bytes>{16});
  plan.ops[2].shift = 2;  // F of odd mini-batches never runs
  CHECK(sim_says(sim::simulate_pipeline(p, plan), pipe_vk::missing_op,
                 {"F of stage 1 (layer 1)", "shifts 0 and 2", "modulo k = 2"}));
  plan.ops[2].shift = 1;
  plan.ops.pop_back();
  CHECK(sim_says(sim::simulate_pipeline(p, plan), pipe_vk::missing_op,
                 {"B of stage 1 (layer 1) occurs 1 times", "exactly 2 times"}));
}

TEST_CASE("pipeline sim: two ops at once on a processor") {
  const pipeline_problem p = sim_one_two_one();
  pipeline_plan plan = testing::one_three_on_one_processor();
  plan.ops[sim_op(plan, pipe_opk::backward, 1)].start = 1.5;  // over F of stage 3
  CHECK(sim_says(
      sim::simulate_pipeline(p, plan), pipe_vk::processor_overlap,
      {"processor 0", "B of stage 1 (layer 1)", "F of stage 3 (layer 3)", "one op at a time"}));
}

TEST_CASE("pipeline sim: two transfers at once on a link") {
  pipeline_problem p = sim_one_two_one();
  p.bandwidth = 1;  // each transfer takes 1 s: the link carries 4 s of transfers a period of 2
  const auto r = sim::simulate_pipeline(p, testing::one_three_on_one_processor());
  CHECK_FALSE(r.valid);
  REQUIRE(r.first_violation);
  // The replay meets the first fault: a transfer now ends after the op that waits for it.
  CHECK(r.first_violation->kind == pipe_vk::dependency);
  CHECK(r.first_violation->message.find("send_activation from stage 1 to stage 2") !=
        std::string::npos);
  // Transfers on the link alone: two one-layer stages, transfers of 1 s each, period 4.
  pipeline_problem two;
  two.layers = pipe_chain({{1, 1, 1, 0}, {1, 1, 1, 0}}, 1);
  two.processors = 2;
  two.bandwidth = 1;
  // Every op as soon as it can, on mini-batch 0: F1 [0, 1), a_1 [1, 2), F2, B2, delta_1 [4, 5), B1.
  auto as_soon_as_possible = [](seconds period) {
    pipeline_plan plan;
    plan.stages = {{1, 1, 0}, {2, 2, 1}};
    plan.period = period;
    plan.ops = testing::from_absolute({{pipe_opk::forward, 1, 0, 0},
                                       {pipe_opk::send_activation, 1, 1, 0},
                                       {pipe_opk::forward, 2, 2, 0},
                                       {pipe_opk::backward, 2, 3, 0},
                                       {pipe_opk::send_gradient, 1, 4, 0},
                                       {pipe_opk::backward, 1, 5, 0}},
                                      period);
    return plan;
  };
  REQUIRE(sim::simulate_pipeline(two, as_soon_as_possible(4)).valid);
  // Period 3.5: delta_1 of mini-batch 0 over [4, 5) meets a_1 of mini-batch 1 from 4.5.
  const pipeline_plan plan = as_soon_as_possible(3.5);
  CHECK(sim_says(sim::simulate_pipeline(two, plan), pipe_vk::link_overlap,
                 {"the link between processors 0 and 1", "send_activation from stage 1 to stage 2",
                  "send_gradient from stage 2 to stage 1", "one transfer at a time"}));
}

TEST_CASE("pipeline sim: a broken dependency names both ops and the mini-batch") {
  const pipeline_problem p = sim_one_two_one();
  pipeline_plan plan = testing::one_three_on_one_processor();
  plan.ops[sim_op(plan, pipe_opk::forward, 2)].shift += 1;  // F of stage 2 one period too early
  CHECK(sim_says(sim::simulate_pipeline(p, plan), pipe_vk::dependency,
                 {"mini-batch 0", "F of stage 2 (layer 2) starts at",
                  "before send_activation from stage 1 to stage 2 ends", "activation sent"}));
  plan = testing::one_three_on_one_processor();
  plan.ops[sim_op(plan, pipe_opk::backward, 3)].shift += 1;  // B before its F
  CHECK(sim_says(sim::simulate_pipeline(p, plan), pipe_vk::dependency,
                 {"B of stage 3 (layer 3)", "before F of stage 3 (layer 3)", "needs its forward"}));
}

TEST_CASE("pipeline sim: memory over M names the processor and what it holds") {
  // Lemma 10's weights (1, 2, 1) on 2 processors of memory 2, one copy, no activations: the
  // non-contiguous allocation {1, 3} | {2} fits exactly.
  pipeline_problem p = testing::weights_one_two_one();
  const pipeline_plan plan = testing::one_three_on_one_processor();
  auto r = sim::simulate_pipeline(p, plan);
  REQUIRE(r.valid);
  CHECK(r.processor_peaks == std::vector<bytes>{2, 2});
  p.memory = 1;
  CHECK(sim_says(
      sim::simulate_pipeline(p, plan), pipe_vk::over_memory,
      {"processor 0 needs 2 bytes", "1 x weights 2 bytes", "alone", "over its memory 1 bytes"}));
  // Activations: with a = 1 the peaks are 14 and 12 (above); 13 leaves processor 0 short once
  // stage 1 holds its third activation.
  pipeline_problem q = sim_one_two_one(13);
  r = sim::simulate_pipeline(q, plan);
  CHECK(sim_says(r, pipe_vk::over_memory,
                 {"processor 0 holds 14 bytes", "over its memory 13 bytes", "3 x weights 2 bytes",
                  "communication buffers 4 bytes", "4 stored activations of 4 bytes"}));
  CHECK(r.processor_peaks == std::vector<bytes>{14, 12});
  CHECK(r.nca == std::vector<int>{3, 2, 1});
  q.memory = 14;
  CHECK(sim::simulate_pipeline(q, plan).valid);
}

TEST_CASE("pipeline sim: a malformed plan is rejected before the replay") {
  const pipeline_problem p = sim_one_two_one();
  const pipeline_plan good = testing::one_three_on_one_processor();
  auto with = [&](auto edit) {
    pipeline_plan plan = good;
    edit(plan);
    return sim::simulate_pipeline(p, plan);
  };
  CHECK(sim_says(with([](auto& pl) { pl.stages[1].first = 3; }), pipe_vk::invalid_plan,
                 {"stage 2 starts at layer 3", "must start at layer 2"}));
  CHECK(sim_says(with([](auto& pl) { pl.stages.pop_back(); }), pipe_vk::invalid_plan,
                 {"the stages end at layer 2", "has 3 layers"}));
  CHECK(sim_says(with([](auto& pl) { pl.stages[2].processor = 2; }), pipe_vk::invalid_plan,
                 {"stage 3 is on processor 2", "processors are 0..1"}));
  CHECK(
      sim_says(with([](auto& pl) { pl.period = 0; }), pipe_vk::invalid_plan, {"the period is 0"}));
  CHECK(sim_says(with([](auto& pl) { pl.k = 0; }), pipe_vk::invalid_plan, {"k is 0"}));
  CHECK(sim_says(with([](auto& pl) { pl.ops[0].start = 2; }), pipe_vk::invalid_plan,
                 {"op 0 (F of stage 1 (layer 1)) starts at 2", "[0, 2)"}));
  CHECK(sim_says(with([](auto& pl) { pl.ops[0].stage = 4; }), pipe_vk::invalid_plan,
                 {"op 0 (F) is on stage 4", "stages are 1..3"}));
  CHECK(sim_says(with([](auto& pl) {
                   pl.ops.push_back({pipe_opk::send_activation, 3, 0, 0});
                 }),
                 pipe_vk::invalid_plan, {"the last stage sends nothing"}));
  CHECK(sim_says(with([](auto& pl) { pl.ops.erase(pl.ops.begin() + 1); }), pipe_vk::missing_op,
                 {"send_activation from stage 1 to stage 2 occurs 0 times"}));
  // Stages 1 and 2 on one processor: nothing travels between them.
  CHECK(sim_says(with([](auto& pl) { pl.stages[1].processor = 0; }), pipe_vk::invalid_plan,
                 {"stages 1 and 2 are both on processor 0", "nothing travels between them"}));
  pipeline_problem bad = p;
  bad.processors = 0;
  CHECK(sim_says(sim::simulate_pipeline(bad, good), pipe_vk::invalid_problem, {"processors is 0"}));
  CHECK(sim_says(with([](auto& pl) { pl.ops[0].shift = 900000; }), pipe_vk::invalid_plan,
                 {"would hold", "the shifts span 900002 mini-batches"}));
  pipeline_problem huge;  // a_0 = 2^52 on 2000 mini-batches: sums past 2^62
  huge.layers = pipe_chain({{1, 1, 0, 0}}, bytes{1} << 52);
  pipeline_plan alone;
  alone.stages = {{1, 1, 0}};
  alone.period = 2;
  alone.ops = {{pipe_opk::forward, 1, 0, 0}, {pipe_opk::backward, 1, 1, 0}};
  CHECK(sim::simulate_pipeline(huge, alone).valid);
  CHECK(sim_says(sim::simulate_pipeline(huge, alone, {2000}), pipe_vk::invalid_problem,
                 {"processor 0", "2000 mini-batches", "beyond 2^62"}));
  CHECK(sim_says(sim::simulate_pipeline(p, good, {-1}), pipe_vk::invalid_plan,
                 {"mini_batches to replay is -1"}));
}

TEST_CASE("pipeline sim: Theorem 16's 3-periodic pattern keeps fewer activations than 1F1B") {
  // Four one-layer stages of unit times, a = 1. 1F1B runs mini-batch m's F of stage s at
  // 2m + s - 1 and its B at 2m + 8 - s (period 2). Dropping every fourth mini-batch of four
  // periods gives a 3-periodic pattern of period 8: normalized period 8/3 instead of 2.
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 2}, {1, 1, 1, 3}}, 1);
  p.processors = 4;
  p.copies = 1;
  auto pattern = [](seconds period, int k, int kept) {
    pipeline_plan plan;
    plan.stages = contiguous_stages({1, 2, 3, 4});
    plan.period = period;
    plan.k = k;
    for (int m = 0; m < kept; ++m)
      for (int s = 1; s <= 4; ++s) {
        plan.ops.push_back(place_op(pipe_opk::forward, s, 2 * m + s - 1, m, period, k));
        plan.ops.push_back(place_op(pipe_opk::backward, s, 2 * m + 8 - s, m, period, k));
        if (s < 4) {
          plan.ops.push_back(place_op(pipe_opk::send_activation, s, 2 * m + s, m, period, k));
          plan.ops.push_back(place_op(pipe_opk::send_gradient, s, 2 * m + 8 - s, m, period, k));
        }
      }
    return plan;
  };
  const auto one = sim::simulate_pipeline(p, pattern(2, 1, 1));
  REQUIRE(one.valid);
  CHECK(one.nca == std::vector<int>{4, 3, 2, 1});
  const auto three = sim::simulate_pipeline(p, pattern(8, 3, 3));
  INFO((three.first_violation ? three.first_violation->message : ""));
  REQUIRE(three.valid);
  CHECK(three.normalized_period == doctest::Approx(8.0 / 3));
  // The thesis' bounds NCA_1 <= k and NCA_{l+1} <= k + 1 - l, met exactly: with the buffers
  // (2, 4, 4, 2) set aside every processor holds W + activations = k + 1 = 4, its M.
  CHECK(three.nca == std::vector<int>{3, 3, 2, 1});
  CHECK(three.processor_peaks == std::vector<bytes>{6, 8, 8, 6});
  CHECK(one.processor_peaks == std::vector<bytes>{7, 8, 8, 6});
}
