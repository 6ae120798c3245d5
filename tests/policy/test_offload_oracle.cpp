// The oracle of pofo's model itself (tests/support/offload_brute_force.hpp): hand-computed
// timelines, the grammar, the reduction to rematerialization without transfers (against the
// exhaustive oracle of tests/support/brute_force.hpp), the reduction to offloading without
// rematerialization at infinite bandwidth (a closed form), and the monotonicity properties of
// the optimum (in the budget, in each bandwidth, and in the permission to recompute).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "support/brute_force.hpp"
#include "support/offload_brute_force.hpp"
#include "support/random_chain.hpp"

using namespace remat;
using remat::test::fluid_time;
using remat::test::offload_brute_force;
using remat::test::offload_schedule;

namespace {

constexpr double oracle_inf = std::numeric_limits<double>::infinity();

struct st {
  double uf, ub;
  bytes a, abar, of = 0, ob = 0;
};

/// A chain from a_0 and (uF, uB, a, abar, oF, oB) per stage; the last stage is the loss.
chain make_chain(bytes a0, const std::vector<st>& stages) {
  chain c{"hand", a0, {}};
  int l = 0;
  for (const st& s : stages)
    c.stages.push_back({"s" + std::to_string(++l), s.uf, s.ub, s.a, s.abar, s.of, s.ob});
  return c;
}

offload_schedule sched(const std::string& text, std::vector<int> offloaded = {}) {
  const auto ops = parse_chain_ops(text);
  REQUIRE_MESSAGE(ops.has_value(), "bad chain notation in test data: ", text);
  return {*ops, std::move(offloaded)};
}

chain oracle_small_chain(remat::testing::chain_generator& g, int n) {
  return remat::testing::small_integer_chain(g, n);
}

/// The peak of store-all without transfers ([Shilova21, Eq. 3.3], delta_N = 0): F_l^all needs
/// a_0 + abar_1..abar_{l-1} + abar_l + of_all(l); B_l needs a_0 + abar_1..abar_l + delta_l +
/// delta_{l-1} + ob(l).
bytes oracle_store_all_peak(const chain& c) {
  bytes peak = 0, below = c.a(0);
  for (int l = 1; l <= c.length(); ++l) {
    peak = std::max(peak, below + c.abar(l) + c.of_all(l));
    below += c.abar(l);
    peak = std::max(peak, below + c.delta(l) + c.delta(l - 1) + c.ob(l));
  }
  return peak;
}

/// Store-all with every segment input's plain part offloaded and instantaneous transfers: only
/// the contexts abar_k - a_k of the inputs that are away stay, and an op's own input is there
/// (F_l counts it in full; B_l's segment work has started). F_l^all needs
/// ctx(1..l-2) + abar_{l-1} + abar_l + of_all(l); B_l needs ctx(1..l-2) + abar_{l-1} + abar_l +
/// delta_l + delta_{l-1} + ob(l), with ctx(k) = abar_k - a_k and abar_0 = a_0.
bytes store_all_offloaded_peak(const chain& c) {
  bytes peak = 0, ctx = 0;  // ctx = sum of abar_k - a_k, k = 1..l-2
  for (int l = 1; l <= c.length(); ++l) {
    if (l >= 3) ctx += c.abar(l - 2) - c.a(l - 2);
    const bytes base = ctx + c.abar(l - 1) + c.abar(l);
    peak = std::max({peak, base + c.of_all(l), base + c.delta(l) + c.delta(l - 1) + c.ob(l)});
  }
  return peak;
}

// H1: a_0 = 2; stage 1 (uF 1, uB 1, a 1, abar 1); stage 2 (uF 1, uB 2, a 1, abar 4); the loss
// (all 0). Store-all, no transfer: F1all 2+1 = 3, F2all 3+4 = 7, F3all 7, B3 7+delta_2 = 8,
// B2 a_0 2 + abar_1 1 + abar_2 4 + delta_2 1 + delta_1 1 = 9, B1 2+1+1+delta_0 2 = 6. Peak 9,
// ideal time 2 + 3 = 5. With a_0 away, B2 needs 7, and no schedule does better at B2 (B2 needs
// its input a_1/abar_1, abar_2, delta_2, delta_1 whatever was recomputed).
chain h1() { return make_chain(2, {{1, 1, 1, 1}, {1, 2, 1, 4}, {0, 0, 0, 0}}); }

}  // namespace

TEST_CASE(
    "offload oracle: an offloaded a_0 makes an infeasible budget feasible (H1, hand-computed)") {
  const chain c = h1();
  const offload_schedule all = sched("F1_all F2_all F3_all B3 B2 B1");
  const offload_schedule off0 = sched("F1_all F2_all F3_all B3 B2 B1", {0});
  CHECK(oracle_store_all_peak(c) == 9);
  CHECK(fluid_time(c, all, 9, 1, 1) == 5);
  CHECK(fluid_time(c, all, 8, 1, 1) == oracle_inf);
  // M = 7, beta = 1, a_0 offloaded.
  // Forward: F1all at 0 (needs a_0 2 in full + abar_1 1 = 3); Q = 2, F1 drains 1: Q = 1 at 1.
  //   F2all needs abar_1 1 + abar_2 4 = 5, + Q 1 = 6 <= 7: starts at 1, Q = 0 at 2. F3all at 2.
  // Backward, reverse: B1 (needs a_0 2 + abar_1 1 + delta_1 1 + delta_0 2 = 6), then a_0 joins
  //   R = 2; B2 needs 7, 7 + 2 > 7: idle (2 bytes at 1/s) 2 s after B2, R = 0; B3 needs
  //   abar_1 + abar_2 + delta_2 = 6. Nothing left for the gap.
  // Makespan = 2 (F) + 0 + 2 (B2) + 2 (idle) + 1 (B1) = 7.
  CHECK(fluid_time(c, off0, 7, 1, 1) == 7);
  // beta_p = 2: the idle is 1 s -> 6. beta_p = oracle_inf: no idle -> 5, whatever beta_o (F2all's
  // check 5 + Q 1 <= 7 never waits).
  CHECK(fluid_time(c, off0, 7, 1, 2) == 6);
  CHECK(fluid_time(c, off0, 7, 1, oracle_inf) == 5);
  CHECK(fluid_time(c, off0, 7, oracle_inf, 1) == 7);
  // M = 8: B2's 7 + R <= 8 lets R = 1 remain: idle 1 s, R drains during B2 (2 s) -> 6.
  CHECK(fluid_time(c, off0, 8, 1, 1) == 6);
  // M = 6: B2 needs 7 even with a_0 away.
  CHECK(fluid_time(c, off0, 6, 1, 1) == oracle_inf);
  // No transfer possible.
  CHECK(fluid_time(c, off0, 100, 0, 1) == oracle_inf);
  CHECK(fluid_time(c, off0, 100, 1, 0) == oracle_inf);

  // The optimum, over every schedule. At M = 7 B2 fits only with all of a_0 away until B2 ends,
  // and segment 1's work needs a_0 at its start, right after B2: an idle of >= 2 / beta_p after
  // B2 in every schedule; every F and B runs at least once (5). So 7 at beta 1, 6 at beta 2, 5 at
  // beta_p = oracle_inf. At M = 8, R <= 1 at B2's end: idle >= 1 -> 6. At M = 9 store-all fits: 5.
  // At M = 6 nothing fits.
  for (bool recompute : {true, false}) {
    CAPTURE(recompute);
    CHECK(offload_brute_force(c, 6, 1, 1, recompute).time == oracle_inf);
    CHECK(offload_brute_force(c, 7, 1, 1, recompute).time == 7);
    CHECK(offload_brute_force(c, 7, 2, 2, recompute).time == 6);
    CHECK(offload_brute_force(c, 7, 1, oracle_inf, recompute).time == 5);
    CHECK(offload_brute_force(c, 8, 1, 1, recompute).time == 6);
    CHECK(offload_brute_force(c, 9, 1, 1, recompute).time == 5);
    CHECK(offload_brute_force(c, 7, 0, 0, recompute).time == oracle_inf);
    CHECK(offload_brute_force(c, 8, 0, 0, recompute).time == oracle_inf);
  }
  const auto best = offload_brute_force(c, 7, 1, 1, false);
  CHECK(to_string(std::span<const chain_op>(best.best.ops)) == "F1_all F2_all F3_all B3 B2 B1");
  CHECK(best.best.offloaded == std::vector<int>{0});
}

TEST_CASE("offload oracle: a forward-phase wait for the offload queue (H2, hand-computed)") {
  // H1 with uF_1 = 0 and stage 2's forward overhead 1. F2all now needs abar_1 1 + abar_2 4 + 1
  // = 6 (a_0 away) while F1 (0 s) has left all of a_0 in the queue.
  const chain c = make_chain(2, {{0, 1, 1, 1}, {1, 2, 1, 4, 1, 0}, {0, 0, 0, 0}});
  const offload_schedule off0 = sched("F1_all F2_all F3_all B3 B2 B1", {0});
  // M = 7, beta = 1. F1all at 0, Q = 2. F2all: 6 + 2 > 7: waits 1 s (Q = 1), runs [1, 2], Q = 0.
  // F3all needs 5. Backward as in H1: 2 s idle after B2. 1 (wait) + 1 (F2) + 2 (B2) + 2 (idle)
  // + 1 (B1) = 7.
  CHECK(fluid_time(c, off0, 7, 1, 1) == 7);
  // beta = 2: wait 0.5 s, idle 1 s: 4 + 1.5 = 5.5.
  CHECK(fluid_time(c, off0, 7, 2, 2) == 5.5);
  // beta_o = 2, beta_p = 1: wait 0.5, idle 2 -> 6.5; beta_o = 1, beta_p = 2 -> 6.
  CHECK(fluid_time(c, off0, 7, 2, 1) == 6.5);
  CHECK(fluid_time(c, off0, 7, 1, 2) == 6);
  // The optimum. As in H1 a_0 must be away at B2 (idle >= 2/beta_p after it). Either F2 runs
  // once, as an F^all segment, and then F2all starts when Q <= 1, at >= 1/beta_o (F1 takes 0 s
  // and is all that precedes it): >= 4 + 1/beta_o + 2/beta_p; or it runs twice: >= 5 + 2/beta_p.
  // beta 1: min(7, 7) = 7; beta 2: min(5.5, 6) = 5.5.
  for (bool recompute : {true, false}) {
    CAPTURE(recompute);
    CHECK(offload_brute_force(c, 7, 1, 1, recompute).time == 7);
    CHECK(offload_brute_force(c, 7, 2, 2, recompute).time == 5.5);
  }
}

TEST_CASE("offload oracle: the gap before B_N (hand-computed)") {
  // a_0 = 2; stage 1 (uF 1, uB 1, a 1, abar 1); the loss (all 0). Ideal 2.
  const chain c = make_chain(2, {{1, 1, 1, 1}, {0, 0, 0, 0}});
  const offload_schedule off0 = sched("F1_all F2_all B2 B1", {0});
  CHECK(fluid_time(c, sched("F1_all F2_all B2 B1"), 100, 1, 1) == 2);
  // beta 1: Q = 2 at 0, 1 left after F1 and F2 (0 s): the offloads end 1 s later. Reverse: B1,
  // then a_0 joins R = 2; B2 takes 0 s: 2 bytes are left for the gap, 2 s. 1 + 1 + 2 + 0 + 1 = 5.
  CHECK(fluid_time(c, off0, 100, 1, 1) == 5);
  CHECK(fluid_time(c, off0, 100, 2, 1) == 4);           // the offload ends with F1
  CHECK(fluid_time(c, off0, 100, 1, 2) == 4);           // the prefetch takes 1 s
  CHECK(fluid_time(c, off0, 100, 1, oracle_inf) == 3);  // only the offload wait
  CHECK(fluid_time(c, off0, 100, oracle_inf, 1) == 4);  // only the prefetch gap
  CHECK(fluid_time(c, off0, 100, oracle_inf, oracle_inf) == 2);
  CHECK(offload_brute_force(c, 100, 1, 1).time == 2);  // nothing worth offloading

  // Offloading the loss's input (allowed, never useful): F1ck [0, 1]; F2all starts at 1 and a_1
  // joins Q (its 1 byte takes 1 s after F2's 0 s); B2's work needs it back: 1 s of gap.
  // 1 (F1) + 1 (offload) + 1 (prefetch) + 0 (B2) + 1 (F1all) + 1 (B1) = 5.
  CHECK(fluid_time(c, sched("F1_ck F2_all B2 F1_all B1", {1}), 100, 1, 1) == 5);
  CHECK(fluid_time(c, sched("F1_ck F2_all B2 F1_all B1"), 100, 1, 1) == 3);
}

TEST_CASE("offload oracle: schedules outside the grammar are infinite") {
  const chain c = make_chain(1, {{1, 1, 1, 2}, {1, 1, 1, 2}, {1, 1, 1, 2}, {0, 0, 0, 0}});
  const bytes big = 1000;
  // In the grammar (checked first, so that the infinities below are the grammar's).
  // Ideal 6; each recomputed forward adds 1.
  CHECK(fluid_time(c, sched("F1_all F2_all F3_all F4_all B4 B3 B2 B1"), big, 1, 1) == 6);
  CHECK(fluid_time(c, sched("F1_ck F2_none F3_all F4_all B4 B3 F1_ck F2_all B2 F1_all B1"), big, 1,
                   1) == 9);
  CHECK(fluid_time(c, sched("F1_ck F2_none F3_none F4_all B4 F1_all F2_all F3_all B3 B2 B1"), big,
                   1, 1) == 9);
  CHECK(fluid_time(
            c, sched("F1_ck F2_none F3_none F4_all B4 F1_ck F2_ck F3_all B3 F2_all B2 F1_all B1"),
            big, 1, 1) == 11);
  // Segments [1], [2,2], [3], the loss: inputs a_0, abar_1, a_2, abar_3.
  CHECK(fluid_time(c, sched("F1_all F2_ck F3_all F4_all B4 B3 F2_all B2 B1", {0, 1, 2, 3}), big,
                   oracle_inf, oracle_inf) == 7);
  const char* bad[] = {
      "",
      "F1_all F2_all F3_all F4_all",                                   // no backward phase
      "F1_none F2_all F3_all F4_all B4 B3 B2 B1",                      // F_1^none
      "F1_ck F2_none F3_none F4_ck B4 F1_all F2_all F3_all B3 B2 B1",  // the loss is F_N^all
      "F1_ck F2_none F3_none F4_none",                                 // a segment ending at N
      "F1_all F2_all F3_all F4_all B4 B3 B1 B2",                       // segment order
      "F1_all F2_all F3_all F4_all B4 B3 B2",                          // B1 missing
      "F1_all F2_all F3_all F4_all B4 B3 B2 B1 B1",                    // trailing op
      "F1_ck F2_all F3_all F4_all B4 B3 B2 B1",                        // sub(1,1) is F1all B1
      "F1_ck F2_all F3_all F4_all B4 B3 B2 F1_ck B1",                  // F_s^ck in sub(s,s)
      "F1_all F3_all F4_all B4 B3 B1",                                 // a stage skipped
      "F1_ck F2_none F3_all F4_all B4 B3 F1_all B1 F2_all B2",         // the sub-schedule's order
      "F1_ck F2_none F3_all F4_all B4 B3 F1_ck F2_none F2_all B2 F1_all B1",  // sub(1,2) with s' =
                                                                              // t
      "F1_ck F2_none F3_all F4_all B4 B3 F1_all F2_ck F2_all B2 B1",          // F_t^ck in sub(t,t)
      "F1_all F2_all F3_all F4_all O0 B4 B3 B2 B1",  // transfers are not ops here
  };
  for (const char* text : bad) {
    CAPTURE(text);
    const auto ops = parse_chain_ops(text);
    REQUIRE(ops.has_value());
    CHECK(fluid_time(c, {*ops, {}}, big, 1, 1) == oracle_inf);
  }
  // Offload sets: ascending inputs of segments only.
  const std::string ck =
      "F1_ck F2_none F3_all F4_all B4 B3 F1_ck F2_all B2 F1_all B1";  // inputs a_0, a_2, abar_3
  CHECK(fluid_time(c, sched(ck, {0, 2, 3}), big, oracle_inf, oracle_inf) == 9);
  CHECK(fluid_time(c, sched(ck, {1}), big, oracle_inf, oracle_inf) == oracle_inf);
  CHECK(fluid_time(c, sched(ck, {2, 0}), big, oracle_inf, oracle_inf) == oracle_inf);
  CHECK(fluid_time(c, sched(ck, {0, 0}), big, oracle_inf, oracle_inf) == oracle_inf);
  CHECK(fluid_time(c, sched(ck, {4}), big, oracle_inf, oracle_inf) == oracle_inf);
  CHECK(fluid_time(c, sched(ck, {-1}), big, oracle_inf, oracle_inf) == oracle_inf);
}

TEST_CASE("offload oracle: the hand-checkable instance without transfers") {
  // N = 4, uF = (1,1,1,0), uB = (2,2,2,0), a_0..a_4 = (1,1,1,1,0), abar = (2,2,2,0), no
  // overhead: the persistent optimum is oracle_inf, 12, 11, 10, 9 at M = 5..9.
  const chain c = make_chain(1, {{1, 2, 1, 2}, {1, 2, 1, 2}, {1, 2, 1, 2}, {0, 0, 0, 0}});
  const double want[] = {oracle_inf, 12, 11, 10, 9};
  const test::brute_force exhaustive(c);
  for (bytes m = 5; m <= 9; ++m) {
    CAPTURE(m);
    CHECK(offload_brute_force(c, m, 0, 0).time == want[m - 5]);
    CHECK(exhaustive.optimum(m).time == want[m - 5]);
  }
  // Its sequences, at their budget and one below.
  const struct {
    bytes m;
    const char* text;
  } seqs[] = {{8, "F1_all F2_ck F3_all F4_all B4 B3 F2_all B2 B1"},
              {7, "F1_ck F2_ck F3_all F4_all B4 B3 F2_all B2 F1_all B1"},
              {6, "F1_ck F2_none F3_all F4_all B4 B3 F1_ck F2_all B2 F1_all B1"}};
  for (const auto& s : seqs) {
    CAPTURE(s.text);
    CHECK(fluid_time(c, sched(s.text), s.m, 0, 0) == want[s.m - 5]);
    CHECK(fluid_time(c, sched(s.text), s.m - 1, 0, 0) == oracle_inf);
  }
  // M = 5 is infeasible without transfers (a_0 stays); offloading a_0 helps.
  CHECK(offload_brute_force(c, 5, 1, 1).feasible());
}

TEST_CASE("offload oracle: without transfers it is the exhaustive remat optimum (random chains)") {
  // brute_force searches every Table 2.1 sequence (floating ones included); the oracle only the
  // persistent grammar, so it is >= brute_force, and equal wherever persistence loses nothing
  // ([Shilova21, §2.4.3] found it lost nothing on the networks tried).
  remat::testing::chain_generator g(20240611);
  int pairs = 0, equal = 0;
  for (int i = 0; i < 150; ++i) {
    const chain c = oracle_small_chain(g, g.between(1, 5));
    const test::brute_force exhaustive(c);
    const bytes lo = exhaustive.minimum_budget();
    const bytes hi = oracle_store_all_peak(c);
    for (bytes m = lo - 1; m <= hi + 1; ++m) {
      CAPTURE(remat::testing::describe(c));
      CAPTURE(m);
      const auto bf = exhaustive.optimum(m, true);
      const double ours = offload_brute_force(c, m, 0, 0).time;
      CHECK(ours >= bf.time);
      ++pairs;
      equal += ours == bf.time;
      // Where persistence loses, brute force's sequence is not one of the grammar (it moves a
      // checkpoint with an F^none of the backward phase, the floating move).
      if (ours != bf.time) CHECK(fluid_time(c, {bf.ops, {}}, m, 0, 0) == oracle_inf);
      // Without recomputation: store-all, feasible iff M >= its peak.
      CHECK(offload_brute_force(c, m, 0, 0, false).time == (m >= hi ? c.ideal_time() : oracle_inf));
    }
    CHECK(offload_brute_force(c, lo - 1, 0, 0).time == oracle_inf);
    CHECK(offload_brute_force(c, hi, 0, 0).time == c.ideal_time());
  }
  // Seed 20240611 has one floating gap in 829 pairs: a0=4, (uF uB a abar oF oB oF_all) =
  // (2 1 1 1 0 0 0) (1 0 2 4 1 0 1) (3 2 4 4 1 0 1) (1 0 1 2 0 0 0) (0 2 4 4 1 0 0), M = 16:
  // brute force 19 with F1_ck F2_ck F3_none F4_all F5_all B5 B4 F2_none F3_all B3 F1_all F2_all
  // B2 B1 (the checkpoint a_1 is consumed by F2_none, then recomputed), the grammar 21.
  MESSAGE(equal, " of ", pairs, " (chain, budget) pairs: persistent optimum = exhaustive optimum");
  CHECK(equal * 100 >= pairs * 99);
}

TEST_CASE(
    "offload oracle: infinite bandwidth without recomputation is a closed form (random chains)") {
  // At beta = oracle_inf, offloading every segment input costs nothing, so store-all is feasible
  // iff M >= store_all_offloaded_peak and then takes the ideal time; recomputing cannot do better.
  remat::testing::chain_generator g(77);
  for (int i = 0; i < 150; ++i) {
    const chain c = oracle_small_chain(g, g.between(1, 6));
    const bytes p = store_all_offloaded_peak(c);
    CAPTURE(remat::testing::describe(c));
    for (bytes m : {p - 1, p, p + 1}) {
      CAPTURE(m);
      CHECK(offload_brute_force(c, m, oracle_inf, oracle_inf, false).time ==
            (m >= p ? c.ideal_time() : oracle_inf));
    }
    CHECK(offload_brute_force(c, p, oracle_inf, oracle_inf, true).time == c.ideal_time());
    CHECK(offload_brute_force(c, oracle_store_all_peak(c), 0, 0).time == c.ideal_time());
  }
}

TEST_CASE(
    "offload oracle: monotone in the budget, the bandwidths and recomputation (random chains)") {
  remat::testing::chain_generator g(4242);
  const double betas[] = {0, 0.25, 0.5, 1, 2, 4, oracle_inf};
  constexpr double tol = 1e-9;
  for (int i = 0; i < 60; ++i) {
    const chain c = oracle_small_chain(g, g.between(1, 5));
    CAPTURE(remat::testing::describe(c));
    const bytes hi = oracle_store_all_peak(c);
    const double ideal = c.ideal_time();
    for (bytes m = 0; m <= hi + 1; ++m) {
      CAPTURE(m);
      double prev_beta = oracle_inf;  // the optimum at the previous (smaller) beta
      for (double beta : betas) {
        CAPTURE(beta);
        const auto r = offload_brute_force(c, m, beta, beta);
        const auto r_more_mem = offload_brute_force(c, m + 1, beta, beta);
        const auto r_norec = offload_brute_force(c, m, beta, beta, false);
        CHECK(r_more_mem.time <= r.time + tol);
        CHECK(r.time <= prev_beta + tol);
        CHECK(r.time <= r_norec.time + tol);
        CHECK(r.time >= ideal - tol);
        // Without recomputation, store-all's peak op sheds at least peak - M bytes, all of them
        // offloaded before the loss and prefetched after it (OR.3): the thesis' Prop. 3 bound.
        if (m < hi && beta > 0) CHECK(r_norec.time >= static_cast<double>(hi - m) * 2 / beta - tol);
        if (r.feasible()) {
          CHECK(fluid_time(c, r.best, m, beta, beta) == r.time);
          // One lane faster at a time.
          CHECK(offload_brute_force(c, m, beta * 2, beta).time <= r.time + tol);
          CHECK(offload_brute_force(c, m, beta, beta * 2).time <= r.time + tol);
        }
        prev_beta = r.time;
      }
      // Infinite bandwidth and store-all's budget: the ideal time.
      if (m >= hi) CHECK(offload_brute_force(c, m, oracle_inf, oracle_inf).time == ideal);
    }
  }
}

TEST_CASE("offload oracle: six stages take well under a second") {
  remat::testing::chain_generator g(6);
  const chain c = oracle_small_chain(g, 6);
  (void)offload_brute_force(c, 1, 1, 1);  // the grammar's schedules are enumerated once per N
  double worst = 0;
  int slower = 0;  // budgets where the optimum is above the ideal time
  for (bytes m = 0; m <= oracle_store_all_peak(c); ++m) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = offload_brute_force(c, m, 1, 1);
    worst = std::max(worst,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    slower += r.feasible() && r.time > c.ideal_time();
  }
  MESSAGE("6 stages: at most ", worst, " s per budget; ", slower, " budgets above the ideal time");
  CHECK(slower > 0);
  CHECK(worst < 1.0);
}
