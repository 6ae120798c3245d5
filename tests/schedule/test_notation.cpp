// The chain notation and its one fixed lowering (schedule/notation.hpp) against the thesis' chain
// simulator (tests/support/chain_reference.hpp, remat's earlier chain simulator): over
// thousands of random chain programs with transfers, the lowered program replayed by the one
// simulator agrees with it on validity, peak and makespan, and the printer gives the chain ops
// back.

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/problem/builder.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

#include "support/chain_reference.hpp"
#include "support/random_chain.hpp"

using namespace remat;

namespace {

chain three_stages() {
  chain c{"three", 100, {}};
  c.stages.push_back({"s1", 1, 2, 100, 150, 10, 20});
  c.stages.push_back({"s2", 1, 2, 200, 260, 0, 5, 30});
  c.stages.push_back({"loss", 0.5, 0.25, 8, 8, 0, 0});
  return c;
}

/// A random chain program: mostly ops whose inputs are there (so that a good share is valid),
/// sometimes any op at all, transfers included.
std::vector<chain_op> random_program(int n, std::mt19937_64& rng) {
  enum class held { none, plain, full };
  enum class place { device, offloading, host, prefetching };
  std::vector<held> act(static_cast<std::size_t>(n + 1), held::none);
  std::vector<place> where(act.size(), place::device);
  std::vector<char> grad(act.size(), 0);
  act[0] = held::plain;
  grad[static_cast<std::size_t>(n)] = 1;
  auto k = [](int i) { return static_cast<std::size_t>(i); };
  auto pick = [&](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  std::vector<chain_op> ops;
  const int max_ops = 12 * n + 20;
  int transfers = 0;
  const int wild_at =
      pick(0, 9) == 0 ? pick(0, 4 * n) : -1;  // one program in ten gets any op there
  while (static_cast<int>(ops.size()) < max_ops && !grad[0]) {
    if (static_cast<int>(ops.size()) == wild_at) {  // anything
      // The program ends with this op. An F1_none here, which lower() rejects (it would free a_0),
      // leaves a program without B1, which the reference finds invalid too (no delta_0 at the end).
      const int kind = pick(0, 4);
      const int idx = kind < 2 ? pick(0, n + 1) : pick(-1, n + 1);
      ops.push_back(kind == 0   ? chain_op::forward(idx, static_cast<forward_mode>(pick(0, 2)))
                    : kind == 1 ? chain_op::backward(idx)
                    : kind == 2 ? chain_op::offload(idx)
                    : kind == 3 ? chain_op::prefetch(idx)
                                : chain_op::wait(idx));
      break;  // the state is unknown from here
    }
    std::vector<chain_op> options;
    int frontier = n;  // the stage whose backward comes next: forwards past it are wasted
    while (frontier > 0 && !grad[k(frontier)]) --frontier;
    for (int l = 1; l <= n; ++l) {
      const held in = act[k(l - 1)];
      const bool resident = where[k(l - 1)] == place::device;
      if (in != held::none && resident && act[k(l)] == held::none && l <= frontier) {
        // F^none loses a_{l-1}: only when an earlier activation can recompute it (never a_0).
        bool earlier = false;
        for (int j = 0; j < l - 1; ++j) earlier = earlier || act[k(j)] != held::none;
        if (in == held::plain && earlier)
          options.push_back(chain_op::forward(l, forward_mode::no_save));
        options.push_back(chain_op::forward(l, forward_mode::save_input));
        options.push_back(chain_op::forward(l, forward_mode::save_all));
      }
      if (grad[k(l)] && act[k(l)] == held::full && in != held::none && resident &&
          !grad[k(l - 1)] && where[k(l)] == place::device)
        for (int rep = 0; rep < 3; ++rep) options.push_back(chain_op::backward(l));
    }
    for (int i = 0; i <= n; ++i) {
      if (act[k(i)] == held::none) continue;
      if (act[k(i)] == held::plain && where[k(i)] == place::device && transfers < 2 * n + 4 &&
          pick(0, 3) == 0)
        options.push_back(chain_op::offload(i));
      if (where[k(i)] == place::offloading || where[k(i)] == place::prefetching)
        options.push_back(chain_op::wait(i));
      if (where[k(i)] == place::host) options.push_back(chain_op::prefetch(i));
    }
    if (options.empty()) break;
    const chain_op op =
        options[static_cast<std::size_t>(pick(0, static_cast<int>(options.size()) - 1))];
    ops.push_back(op);
    const int l = op.index;
    switch (op.kind) {
      case chain_op_kind::forward:
        act[k(l)] = op.mode == forward_mode::save_all ? held::full : held::plain;
        where[k(l)] = place::device;
        if (op.mode == forward_mode::no_save) act[k(l - 1)] = held::none;
        break;
      case chain_op_kind::backward:
        act[k(l)] = held::none;
        grad[k(l)] = 0;
        grad[k(l - 1)] = 1;
        if (act[k(l - 1)] == held::plain) act[k(l - 1)] = held::none;
        break;
      case chain_op_kind::offload:
        where[k(l)] = place::offloading;
        ++transfers;
        break;
      case chain_op_kind::prefetch:
        where[k(l)] = place::prefetching;
        break;
      case chain_op_kind::wait:
        where[k(l)] = where[k(l)] == place::offloading ? place::host : place::device;
        break;
    }
  }
  return ops;
}

}  // namespace

TEST_CASE(
    "chain notation: a program with transfers lowers to transfers and replays as the "
    "thesis says") {
  const chain c = three_stages();
  const std::string text = "F1_ck F2_all O1 W1 F3_all B3 P1 W1 B2 F1_all B1";
  const auto s = parse_chain_program(c.length(), text);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const chain_nodes at(c.length());
  // O1, P1 and W1 act on a_1's data node; they once became backwards.
  CHECK(s->ops[2] == instruction::offload(at.a(1)));
  CHECK(s->ops[3] == instruction::wait(at.a(1)));
  for (double bw : {std::numeric_limits<double>::infinity(), 100.0, 7.5}) {
    const auto ops = *parse_chain_ops(text);
    const auto ref = reference::simulate(c, ops, {.bandwidth = bw});
    const auto got = sim::simulate(c, *s, {.hw = machine::with_bandwidth(bw)});
    REQUIRE(ref.valid);
    CHECK(got.valid);
    CHECK(got.peak == ref.peak);
    CHECK(got.host_peak == ref.host_peak);
    CHECK(got.makespan == doctest::Approx(ref.makespan).epsilon(1e-12));
  }
  CHECK(to_chain_string(c.length(), *s) == text);
}

TEST_CASE("chain notation: random programs with transfers agree with the thesis' chain simulator") {
  testing::chain_generator gen(11);
  std::mt19937_64 rng(5);
  int valid = 0, over_budget = 0, invalid = 0, with_transfers = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const chain c = gen({.min_length = 1, .max_length = 6, .max_bytes = 1 << 12});
    const int n = c.length();
    const graph g = *build_graph(c);
    const std::vector<chain_op> ops = random_program(n, rng);
    const double bw = trial % 3 == 0 ? std::numeric_limits<double>::infinity()
                                     : std::ldexp(1.0, static_cast<int>(rng() % 12));
    const auto ref_free = reference::simulate(c, ops, {.bandwidth = bw});
    const bytes budget = trial % 4 == 0   ? unlimited_bytes
                         : trial % 4 == 1 ? ref_free.peak
                                          : ref_free.peak - 1;
    const auto ref = reference::simulate(c, ops, {.budget = budget, .bandwidth = bw});
    INFO("chain of ", n, " stages, program: ", to_string(std::span<const chain_op>(ops)),
         ", bandwidth ", bw, ", budget ", budget, "; the reference says: ",
         ref.first_violation ? ref.first_violation->message : std::string("valid"));
    for (const auto& op : ops) with_transfers += !op.is_compute() ? 1 : 0;

    const auto lowered = lower(n, ops);
    // The chain-op report of the one simulator (lowering included).
    const auto got = sim::simulate(c, std::span<const chain_op>(ops),
                                   {.budget = budget, .hw = machine::with_bandwidth(bw)});
    const auto got_free =
        sim::simulate(c, std::span<const chain_op>(ops), {.hw = machine::with_bandwidth(bw)});
    CHECK(got.valid == ref.valid);
    // Structurally valid (valid without a budget) for both, or for neither.
    CHECK(got_free.valid == ref_free.valid);
    if (ref_free.valid) {
      REQUIRE(lowered.ok());
      const auto direct =
          sim::simulate(g, *lowered, {.budget = budget, .hw = machine::with_bandwidth(bw)});
      CHECK(direct.valid == ref.valid);
      CHECK(direct.peak == ref.peak);
      CHECK(direct.host_peak == ref.host_peak);
      CHECK(direct.makespan == doctest::Approx(ref.makespan).epsilon(1e-12));
      // The chain-op timeline is the reference's, point for point.
      REQUIRE(got.timeline.size() == ref.timeline.size());
      for (std::size_t i = 0; i < ref.timeline.size(); ++i) {
        INFO("op ", i, " (", to_string(ops[i]), ")");
        CHECK(got.timeline[i].op == ref.timeline[i].op);
        CHECK(got.timeline[i].lane == ref.timeline[i].lane);
        CHECK(got.timeline[i].start == doctest::Approx(ref.timeline[i].start).epsilon(1e-12));
        CHECK(got.timeline[i].end == doctest::Approx(ref.timeline[i].end).epsilon(1e-12));
        CHECK(got.timeline[i].before == ref.timeline[i].before);
        CHECK(got.timeline[i].peak == ref.timeline[i].peak);
        // The chain's B_1 consumes a_0; the graph keeps its protected input (notation.hpp).
        const bool b1 = ops[i] == chain_op::backward(1);
        CHECK(got.timeline[i].after == ref.timeline[i].after + (b1 ? c.a(0) : 0));
      }
      if (ref.valid)
        ++valid;
      else
        ++over_budget;
    } else {
      ++invalid;
    }
    // The printer gives the chain ops back from every lowered program.
    if (lowered) CHECK(to_chain_ops(n, *lowered) == std::optional(ops));
  }
  MESSAGE("valid ", valid, ", over budget only ", over_budget, ", structurally invalid ", invalid,
          ", transfer ops ", with_transfers);
  // The comparison is meaningful: every kind of outcome is well represented.
  CHECK(valid > 250);
  CHECK(over_budget > 250);
  CHECK(invalid > 100);
  CHECK(with_transfers > 1000);
}

TEST_CASE("chain notation: the lowering's own rules, with the thesis' names") {
  const chain c = three_stages();
  auto why = [&](const std::string& text) {
    const auto s = parse_chain_program(c.length(), text);
    return s ? std::string("valid") : s.err().message;
  };
  CHECK(why("F1_ck F2_all O2") == "valid");  // a_2 moves, the rest of abar_2 stays
  CHECK(why("F1_all F2_none").find("F2_none consumes a plain a_1") != std::string::npos);
  // F1_none would free a_0, the chain's input: B1 needs it and nothing can recompute it.
  CHECK(why("F1_none F2_all F3_all B3 B2")
            .find("F1_none at op 0: F1_none consumes a_0, the chain's input, which B1 "
                  "needs and nothing can recompute; use F1_ck") != std::string::npos);
  lowering_failure failure;
  CHECK_FALSE(lower(c.length(), *parse_chain_ops("F1_ck F2_ck F1_none"), nullptr, &failure));
  CHECK(failure.op == 2);
  CHECK(failure.rule == chain_rule::missing_input);
  CHECK(why("F2_ck").find("a_1 is not in memory") != std::string::npos);
  CHECK(why("F1_ck F1_ck").find("a_1 is already in memory") != std::string::npos);
  CHECK(why("F1_ck F2_ck F3_ck B3").find("needs abar_3") != std::string::npos);
  CHECK(why("F4_ck").find("stage 4 does not exist") != std::string::npos);
  CHECK(why("O7").find("a_7 does not exist") != std::string::npos);
  CHECK(why("F1_ck X2").find("'X2' is not an instruction") != std::string::npos);
  // A program that is not chain-shaped does not print in the chain notation.
  const auto g = *build_graph(c);
  CHECK_FALSE(
      to_chain_string(c.length(), schedule{{instruction::compute(0), instruction::free(0)}, 0, 0}));
  (void)g;
}

TEST_CASE("chain notation: words parse and print back") {
  for (const char* w : {"F1_none", "F12_ck", "F3_all", "B4", "O0", "P2", "W2"}) {
    const auto op = parse_chain_op(w);
    REQUIRE(op);
    CHECK(to_string(*op) == w);
  }
  for (const char* w : {"F0_ck", "B0", "F1", "F1_xx", "O-1", "Q1", "", "F", "B1x"})
    CHECK_FALSE(parse_chain_op(w));
  for (const char* w : {"C0", "C3_ff", "D5", "O5", "P5", "W5"}) {
    const auto i = parse_instruction(w);
    REQUIRE(i);
    CHECK(to_string(*i) == w);
  }
  for (const char* w : {"C", "C-1", "C3_f", "D5x", "F1_ck", "X1"})
    CHECK_FALSE(parse_instruction(w));
}
