// The simulator (sim/simulate.hpp): the example sequences of [Shilova21, §2.1.2], the
// timeline, and every kind of violation.

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;

namespace {

/// The chain of the example sequences (docs/chain-dps.md §8.1):
/// L = 4 stages plus the loss (N = 5), every u = 1,
/// every a = 1 (a_0 and a_5 included), every abar = 2, no overhead. delta_5 = 0 (remat's and the
/// thesis' convention).
chain example_chain() {
  chain c{"example", 1, {}};
  for (int l = 1; l <= 5; ++l) c.stages.push_back({"s" + std::to_string(l), 1, 1, 1, 2, 0, 0});
  return c;
}

std::vector<chain_op> parse(const std::string& text) {
  const auto s = parse_chain_ops(text);
  REQUIRE_MESSAGE(s.has_value(), "bad instruction in test data: " << text);
  return *s;
}

// (2.1) single pass (Chen et al.), (2.2) Revolve with F^all before each B, (2.3) F^all in the
// forward phase ([Shilova21, §2.1.2]; clean forms: docs/chain-dps.md §8.1).
const char* const seq_2_1 = "F1_ck F2_none F3_ck F4_all F5_all B5 B4 F3_all B3 F1_all F2_all B2 B1";
const char* const seq_2_2 =
    "F1_ck F2_none F3_ck F4_ck F5_all B5 F4_all B4 F3_all B3 F1_ck F2_all B2 F1_all B1";
const char* const seq_2_3 = "F1_ck F2_none F3_all F4_ck F5_all B5 F4_all B4 B3 F1_all F2_all B2 B1";

/// The timeline's invariants: one point per op, in order, contiguous in time and memory.
void check_timeline(const chain& c, const std::vector<chain_op>& s, const sim::report& r) {
  REQUIRE(r.timeline.size() == s.size());
  bytes mem = c.a(0) + c.delta(c.length());
  seconds t = 0;
  bytes peak = mem;
  for (std::size_t i = 0; i < r.timeline.size(); ++i) {
    const sim::memory_point& p = r.timeline[i];
    INFO("op ", i, " (", to_string(s[i]), ")");
    CHECK(p.op == i);
    CHECK(p.start == t);
    const chain_op& op = s[i];
    CHECK(p.end - p.start == (op.kind == chain_op_kind::forward ? c.uf(op.index) : c.ub(op.index)));
    CHECK(p.before == mem);
    CHECK(p.peak >= p.before);
    CHECK(p.peak >= p.after);
    // The peak is the stored data plus the op's output and overhead.
    if (op.kind == chain_op_kind::forward) {
      const bool all = op.mode == forward_mode::save_all;
      const bytes out = all ? c.abar(op.index) : c.a(op.index);
      CHECK(p.peak == p.before + out + (all ? c.of_all(op.index) : c.of(op.index)));
    } else {
      CHECK(p.peak == p.before + c.delta(op.index - 1) + c.ob(op.index));
    }
    mem = p.after;
    t = p.end;
    peak = std::max(peak, p.peak);
  }
  CHECK(r.makespan == t);
  CHECK(r.peak == peak);
}

std::size_t index_of_op(const std::vector<chain_op>& s, const std::string& name) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (to_string(s[i]) == name) return i;
  return s.size();
}

bool mentions(const sim::report& r, const std::string& what) {
  return r.first_violation && r.first_violation->message.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("the example sequences (2.1), (2.2), (2.3)") {
  const chain c = example_chain();
  struct expected {
    const char* text;
    seconds makespan;
    bytes peak;       // remat: delta_5 = 0
    bytes spec_peak;  // with delta_5 of a_5's size (docs/chain-dps.md §8.1)
  };
  for (const expected& e :
       {expected{seq_2_1, 13, 8, 9}, expected{seq_2_2, 15, 7, 8}, expected{seq_2_3, 13, 8, 9}}) {
    INFO(e.text);
    const std::vector<chain_op> s = parse(e.text);
    const sim::report r = sim::simulate(c, s);
    CHECK(r.valid);
    CHECK_FALSE(r.first_violation.has_value());
    CHECK(r.makespan == e.makespan);
    CHECK(r.peak == e.peak);
    check_timeline(c, s, r);
    CHECK(r.timeline.back().after ==
          2 * c.a(0));  // delta_0, of a_0's size, and a_0 (the graph keeps its input)

    // The peaks 9, 8, 9: add a 1-byte delta_5 to every op up to B5, which consumes it. All
    // three peaks are at B5.
    const std::size_t b5 = index_of_op(s, "B5");
    REQUIRE(b5 < s.size());
    CHECK(r.timeline[b5].peak == r.peak);
    bytes spec_peak = 0;
    for (std::size_t i = 0; i < r.timeline.size(); ++i)
      spec_peak = std::max(spec_peak, r.timeline[i].peak + (i <= b5 ? c.a(5) : 0));
    CHECK(spec_peak == e.spec_peak);

    // Exactly the peak fits; one byte less does not.
    CHECK(sim::simulate(c, s, {.budget = e.peak}).valid);
    CHECK_FALSE(sim::simulate(c, s, {.budget = e.peak - 1}).valid);
  }
}

TEST_CASE("timeline values of (2.3) step by step") {
  const chain c = example_chain();
  const std::vector<chain_op> s = parse(seq_2_3);
  const sim::report r = sim::simulate(c, s);
  // before / peak / after of each op, computed by hand (a = 1, abar = 2, delta_5 = 0).
  const bytes expect[][3] = {
      {1, 2, 2},  // F1_ck:   a0 + a1
      {2, 3, 2},  // F2_none: a0 a1 + a2, a1 consumed
      {2, 4, 4},  // F3_all:  a0 a2 + abar3
      {4, 5, 5},  // F4_ck:   + a4
      {5, 7, 7},  // F5_all:  + abar5
      {7, 8, 5},  // B5:      + delta4; abar5 and the plain a4 consumed
      {5, 7, 7},  // F4_all:  + abar4
      {7, 8, 5},  // B4:      + delta3; abar4 and delta4 consumed, abar3 kept
      {5, 6, 2},  // B3:      + delta2; abar3, delta3 and the plain a2 consumed
      {2, 4, 4},  // F1_all
      {4, 6, 6},  // F2_all
      {6, 7, 4},  // B2:      abar1 kept
      {4, 5, 2},  // B1:      delta0 and the graph input a0 (protected: the graph keeps it) remain
  };
  REQUIRE(r.timeline.size() == 13);
  for (std::size_t i = 0; i < 13; ++i) {
    INFO("op ", i);
    CHECK(r.timeline[i].before == expect[i][0]);
    CHECK(r.timeline[i].peak == expect[i][1]);
    CHECK(r.timeline[i].after == expect[i][2]);
    CHECK(r.timeline[i].start == static_cast<seconds>(i));
    CHECK(r.timeline[i].end == static_cast<seconds>(i + 1));
  }
}

TEST_CASE("without a timeline the totals are the same") {
  const chain c = example_chain();
  const std::vector<chain_op> s = parse(seq_2_2);
  const sim::report with = sim::simulate(c, s);
  const sim::report without = sim::simulate(c, s, {.record_timeline = false});
  CHECK(without.timeline.empty());
  CHECK(without.valid);
  CHECK(without.makespan == with.makespan);
  CHECK(without.peak == with.peak);
}

TEST_CASE("times and overheads enter the timeline") {
  chain c{"timed", 3, {}};
  c.stages = {{"fc", 0.5, 1.5, 4, 6, 2, 3}, {"loss", 0.25, 0.125, 1, 1, 1, 0}};
  const std::vector<chain_op> s = parse("F1_all F2_all B2 B1");
  const sim::report r = sim::simulate(c, s);
  CHECK(r.valid);
  CHECK(r.makespan == 0.5 + 0.25 + 0.125 + 1.5);
  check_timeline(c, s, r);
  CHECK(r.timeline[0].peak == 3 + 6 + 2);          // a0 + abar1 + oF1
  CHECK(r.timeline[1].peak == 3 + 6 + 1 + 1);      // + abar2 + oF2 (delta_2 = 0)
  CHECK(r.timeline[2].peak == 3 + 6 + 1 + 4);      // B2: + delta1 (oB2 = 0)
  CHECK(r.timeline[3].peak == 3 + 6 + 4 + 3 + 3);  // B1: a0 abar1 delta1 + delta0 + oB1
  CHECK(r.peak == 19);
}

TEST_CASE("violations: unknown stage") {
  const chain c = example_chain();
  std::vector<chain_op> s = parse("F1_ck");
  s.push_back(chain_op::forward(6, forward_mode::save_input));
  sim::report r = sim::simulate(c, s);
  CHECK_FALSE(r.valid);
  REQUIRE(r.first_violation);
  CHECK(r.first_violation->kind == sim::violation_kind::unknown_node);
  CHECK(r.first_violation->op == 1);
  CHECK(mentions(r, "stage 6"));
  CHECK(mentions(r, "1..5"));
  CHECK(r.timeline.empty());  // the notation's rules are checked before the replay

  s = {chain_op::backward(0)};
  r = sim::simulate(c, s);
  REQUIRE(r.first_violation);
  CHECK(r.first_violation->kind == sim::violation_kind::unknown_node);
  CHECK(r.first_violation->op == 0);
  CHECK(mentions(r, "B0"));
}

TEST_CASE("violations: missing input") {
  const chain c = example_chain();
  auto first = [&](const std::string& text) { return sim::simulate(c, parse(text)); };

  SUBCASE("a forward without its input") {
    const auto r = first("F1_ck F3_ck");
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::missing_input);
    CHECK(r.first_violation->op == 1);
    CHECK(mentions(r, "a_2 is not in memory"));
  }
  SUBCASE("the input consumed by F_none is gone") {
    const auto r = first("F1_ck F2_none F2_ck");
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::missing_input);
    CHECK(r.first_violation->op == 2);
    CHECK(mentions(r, "a_1 is not in memory"));
  }
  SUBCASE("F1_none would lose the chain's input a_0, which B1 needs: a rule of the notation") {
    const auto r = first("F1_none F2_ck");
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::missing_input);
    CHECK(r.first_violation->op == 0);
    CHECK(mentions(r, "F1_none consumes a_0, the chain's input"));
    CHECK(mentions(r, "use F1_ck"));
  }
  SUBCASE("a backward without its gradient") {
    const auto r = first("F1_all B1");
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::missing_input);
    CHECK(r.first_violation->op == 1);
    CHECK(mentions(r, "delta_1"));
  }
  SUBCASE("a backward without abar") {
    const auto r = first("B5");
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::missing_input);
    CHECK(r.first_violation->op == 0);
    CHECK(mentions(r, "abar_5"));
  }
  SUBCASE("a backward with a plain a only") {
    const auto r = first("F1_ck F2_ck F3_ck F4_ck F5_ck B5");
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::missing_input);
    CHECK(r.first_violation->op == 5);
    CHECK(mentions(r, "abar_5"));
    CHECK(mentions(r, "only a_5 is stored"));
  }
  SUBCASE("F_none on an abar input") {
    const auto r = first("F1_all F2_none");
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::missing_input);
    CHECK(r.first_violation->op == 1);
    CHECK(mentions(r, "abar_1"));
    CHECK(mentions(r, "F2_none consumes a plain a_1"));
  }
}

TEST_CASE("violations: already present") {
  const chain c = example_chain();
  auto r = sim::simulate(c, parse("F1_ck F1_ck"));
  REQUIRE(r.first_violation);
  CHECK(r.first_violation->kind == sim::violation_kind::already_present);
  CHECK(r.first_violation->op == 1);
  CHECK(mentions(r, "a_1 is already in memory"));

  // abar_1 contains a_1: neither may be produced while the other is stored.
  r = sim::simulate(c, parse("F1_all F1_ck"));
  REQUIRE(r.first_violation);
  CHECK(r.first_violation->kind == sim::violation_kind::already_present);
  CHECK(mentions(r, "abar_1 is already in memory"));
  r = sim::simulate(c, parse("F1_ck F1_all"));
  REQUIRE(r.first_violation);
  CHECK(r.first_violation->kind == sim::violation_kind::already_present);
  CHECK(mentions(r, "a_1 is already in memory"));
}

TEST_CASE("violations: over budget, the replay goes on") {
  const chain c = example_chain();
  const std::vector<chain_op> s = parse(seq_2_1);  // peak 8, at B5 (op 5); F5_all peaks at 7
  const sim::report r = sim::simulate(c, s, {.budget = 7});
  CHECK_FALSE(r.valid);
  REQUIRE(r.first_violation);
  CHECK(r.first_violation->kind == sim::violation_kind::over_budget);
  CHECK(r.first_violation->op == 5);
  CHECK(mentions(r, "B5"));
  CHECK(mentions(r, "needs 8 bytes"));
  CHECK(mentions(r, "budget of 7 bytes"));
  // Replayed to the end: the true peak and makespan, a full timeline.
  CHECK(r.peak == 8);
  CHECK(r.makespan == 13);
  check_timeline(c, s, r);

  // The first violation is kept when a later op also exceeds the budget.
  const sim::report tight = sim::simulate(c, s, {.budget = 3});
  REQUIRE(tight.first_violation);
  CHECK(tight.first_violation->kind == sim::violation_kind::over_budget);
  CHECK(tight.first_violation->op == 3);  // F4_all: 3 + 2 = 5 > 3 (earlier ops peak at 3)
  CHECK(tight.peak == 8);
}

TEST_CASE("violations: wrong final state") {
  const chain c = example_chain();
  SUBCASE("no delta_0: names what is left") {
    const std::vector<chain_op> s = parse("F1_ck");
    const sim::report r = sim::simulate(c, s);
    CHECK_FALSE(r.valid);
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::wrong_final_state);
    CHECK(r.first_violation->op == s.size());
    CHECK(mentions(r, "without running 'F2'"));
    CHECK(mentions(r, "'B1'"));
    CHECK(mentions(r, "still holds 'a_1'"));
    CHECK(r.timeline.size() == 1);
  }
  SUBCASE("the empty schedule") {
    const sim::report r = sim::simulate(c, std::vector<chain_op>{});
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::wrong_final_state);
    CHECK(r.first_violation->op == 0);
    CHECK(mentions(r, "without running 'F1'"));
    CHECK(r.makespan == 0);
  }
  SUBCASE("delta_0 and leftovers") {
    // After B2 memory holds a_0, abar_1, delta_1; F2_ck from abar_1 leaves a_2 behind.
    const std::vector<chain_op> s =
        parse("F1_ck F2_none F3_ck F4_all F5_all B5 B4 F3_all B3 F1_all F2_all B2 F2_ck B1");
    const sim::report r = sim::simulate(c, s);
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::wrong_final_state);
    CHECK(r.first_violation->op == s.size());
    CHECK(mentions(r, "'a_2' still in memory"));
    CHECK(mentions(r, "only the protected data"));
    CHECK(r.makespan == 14);
  }
}

TEST_CASE("simulate: F_all uses its own overhead when the chain gives one") {
  chain c{"own", 2, {{"s1", 1, 1, 4, 10, 8, 0}, {"loss", 1, 1, 1, 1, 0, 0}}};
  const std::vector<chain_op> s{chain_op::forward(1, forward_mode::save_all),
                                chain_op::forward(2, forward_mode::save_all), chain_op::backward(2),
                                chain_op::backward(1)};
  CHECK(sim::simulate(c, s).timeline[0].peak == 2 + 10 + 8);  // the thesis' single o_F
  c.stages[0].forward_save_overhead_bytes = 1;
  CHECK(sim::simulate(c, s).timeline[0].peak == 2 + 10 + 1);
  const std::vector<chain_op> ck{
      chain_op::forward(1, forward_mode::save_input), chain_op::forward(2, forward_mode::save_all),
      chain_op::backward(2), chain_op::forward(1, forward_mode::save_all), chain_op::backward(1)};
  CHECK(sim::simulate(c, ck).timeline[0].peak == 2 + 4 + 8);  // F_ck keeps o_F
  c.stages[0].forward_save_overhead_bytes = -1;
  CHECK(validate(c).message().find("forward_save_overhead_bytes") != std::string::npos);
}
