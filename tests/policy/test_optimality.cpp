// Optimality of the Rotor dynamic programs against the exhaustive oracle of
// tests/support/brute_force.hpp, and the numeric oracles of docs/chain-dps.md §8.
//
//   * rotor_floating (Alg. 1 with the C3 move of rotor_floating.hpp, exact slots) is optimal
//     among all Table 2.1 sequences: its value equals brute force for every budget, and its
//     minimum budget is brute force's (without C3 it was above brute force in ~0.6% of pairs);
//   * rotor (Alg. 3, memory-persistent) is never better than rotor_floating;
//   * the hand-checkable instance, the Fig. 2.3 counterexample family, the no-recompute
//     threshold (§8.3), Griewank's forward counts and Opt_0 (§8.5), and the memory mapping under
//     which rotor on a homogeneous chain is Opt_0 / Revolve.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/remat.hpp>

#include "policy/chain_programs.hpp"
#include "support/brute_force.hpp"

using namespace remat;

namespace {

constexpr double optimality_inf = std::numeric_limits<double>::infinity();

std::string describe(const chain& c) {
  std::ostringstream os;
  os << "a_0=" << c.input_bytes << " stages(uF,uB,a,abar,oF,oB):";
  for (const stage& s : c.stages)
    os << " (" << s.forward_time << "," << s.backward_time << "," << s.output_bytes << ","
       << s.saved_bytes << "," << s.forward_overhead_bytes << "," << s.backward_overhead_bytes
       << ","
       << (s.forward_save_overhead_bytes ? std::to_string(*s.forward_save_overhead_bytes) : "-")
       << ")";
  return os.str();
}

/// Deterministic small random chains (the mapping from the engine's output is ours, so the
/// instances are the same with every standard library).
class chain_source {
 public:
  explicit chain_source(std::uint64_t seed) : rng_(seed) {}
  int pick(int lo, int hi) {
    return lo + static_cast<int>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
  }

  /// n stages (the last is the loss), sizes 0..6 with abar >= a, times 0..4 (uF from
  /// min_forward), overheads 0/1, and a third of the stages with F_all's own overhead 0..2.
  chain make(int n, int min_forward = 0) {
    chain c{"random", pick(0, 6), {}};
    for (int l = 1; l <= n; ++l) {
      const bytes a = pick(0, 6);
      const bytes abar = pick(static_cast<int>(a), 6);
      c.stages.push_back({"s" + std::to_string(l), static_cast<double>(pick(min_forward, 4)),
                          static_cast<double>(pick(0, 4)), a, abar, pick(0, 1), pick(0, 1)});
      if (pick(0, 2) == 0) c.stages.back().forward_save_overhead_bytes = pick(0, 2);
    }
    return c;
  }

 private:
  std::mt19937_64 rng_;
};

using test::chain_text;

bytes optimality_store_all_peak(const chain& c) {
  return sim::simulate(c, test::program(c, store_all::program(c)), {.record_timeline = false}).peak;
}

/// Replays a program written in the chain notation, in its own terms (one timeline point per
/// chain op).
sim::report replay(const chain& c, const std::string& text, bytes budget) {
  const auto ops = parse_chain_ops(text);
  REQUIRE_MESSAGE(ops.has_value(), "bad chain notation in test data: ", text);
  return sim::simulate(c, std::span<const chain_op>(*ops), {.budget = budget});
}

/// The hand-checkable instance of docs/chain-dps.md §8.2: N = 4, uF = (1,1,1,0), uB = (2,2,2,0),
/// a_0..a_4 = (1,1,1,1,0), abar_1..abar_4 = (2,2,2,0), no overhead.
chain hand_instance() {
  chain c{"hand", 1, {}};
  const double uf[] = {1, 1, 1, 0}, ub[] = {2, 2, 2, 0};
  const bytes a[] = {1, 1, 1, 0}, ab[] = {2, 2, 2, 0};
  for (int i = 0; i < 4; ++i)
    c.stages.push_back({"s" + std::to_string(i + 1), uf[i], ub[i], a[i], ab[i], 0, 0});
  return c;
}

/// Fig. 2.3 ([Shilova21, §2.3.1]): L = n+2 stages plus the loss; uB = 0; uF_1 = n-2, uF_2 = 2,
/// other uF = 0; a_0 = a_{L+1} = 0, a_1 = 1, a_L = 4, other a = 3; abar = a; no overhead.
chain counterexample(int n) {
  chain c{"fig2.3 n=" + std::to_string(n), 0, {}};
  const int L = n + 2;
  for (int l = 1; l <= L + 1; ++l) {
    const double uf = l == 1 ? n - 2 : l == 2 ? 2 : 0;
    const bytes a = l == 1 ? 1 : l == L ? 4 : l == L + 1 ? 0 : 3;
    c.stages.push_back({"s" + std::to_string(l), uf, 0, a, a, 0, 0});
  }
  return c;
}

// Griewank's t(l, c): minimal forward steps to reverse l steps with c snapshots
// (docs/chain-dps.md §8.5).
// beta(c, r) = C(c+r, c); r with beta(c, r-1) < l <= beta(c, r); t = r*l - beta(c+1, r-1).
long binomial(long n, long k) {
  long r = 1;
  for (long i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}
long griewank_t(long l, long c) {
  if (l <= 1) return 0;
  long r = 1;
  while (!(binomial(c + r - 1, c) < l && l <= binomial(c + r, c))) ++r;
  return r * l - binomial(c + 1 + r - 1, c + 1);
}

/// Opt_0(l, m) by [Shilova21, Thm 1] (Eqs. 1.1-1.3, range 1 <= i <= l: docs/chain-dps.md, D17).
class opt0_table {
 public:
  opt0_table(int l_max, int m_max, double uf, double ub)
      : m_max_(m_max), v_(static_cast<std::size_t>((l_max + 1) * (m_max + 1)), optimality_inf) {
    for (int m = 2; m <= m_max; ++m) at(0, m) = ub;
    for (int l = 1; l <= l_max; ++l) {
      if (m_max >= 3) at(l, 3) = l * (l + 1) / 2.0 * uf + (l + 1) * ub;
      for (int m = 4; m <= m_max; ++m)
        for (int i = 1; i <= l; ++i)
          at(l, m) = std::min(at(l, m), i * uf + at(l - i, m - 1) + at(i - 1, m));
    }
  }
  [[nodiscard]] double operator()(int l, int m) const { return v_[idx(l, m)]; }

 private:
  [[nodiscard]] std::size_t idx(int l, int m) const {
    return static_cast<std::size_t>(l * (m_max_ + 1) + m);
  }
  double& at(int l, int m) { return v_[idx(l, m)]; }
  int m_max_;
  std::vector<double> v_;
};

/// A homogeneous chain: a = delta = 1, abar = B, uF, uB, no overhead except oB = 1 on the loss
/// (it stands for the delta_N that the thesis' AD model stores and Rotor's model does not).
chain homogeneous(int n, bytes abar, double uf, double ub, bytes loss_ob) {
  chain c{"homogeneous", 1, {}};
  for (int l = 1; l <= n; ++l)
    c.stages.push_back({"s" + std::to_string(l), uf, ub, 1, abar, 0, l == n ? loss_ob : 0});
  return c;
}

double value(const result<schedule>& r) { return r.ok() ? r->predicted_time : optimality_inf; }

}  // namespace

TEST_CASE("a case where deletions help, under both delta_N conventions") {
  // N = 3, uF = (1,2,0), uB = (2,0,1), a = (2,1,1,1), abar = (.,2,2,3), M = 9. Its known
  // optima (9 within the Table 2.1 ops, 7 with explicit deletions) take delta_3 = a_3 = 1
  // (docs/chain-dps.md §8.4). With remat's delta_N = 0 the loss gradient is free and
  // 7 is reached without deletions; rotor_floating finds it.
  chain c{"del", 2, {}};
  c.stages = {{"s1", 1, 2, 1, 2, 0, 0}, {"s2", 2, 0, 1, 2, 0, 0}, {"s3", 0, 1, 1, 3, 0, 0}};
  CHECK(test::brute_force(c, /*loss_gradient_bytes=*/1).optimum(9).time == 9);
  CHECK(test::brute_force(c).optimum(9).time == 7);
  CHECK(value(rotor_floating{.slots = 0}.solve(c, 9)) == 7);
}

TEST_CASE("rotor_floating needs the floating move that stores nothing (C3)") {
  // Found by brute force; rotor_floating without C3 (the thesis' C1 + C2) gives 18. The
  // optimal sequence moves the floating activation a_1 to a_2 (F2_none) after B4.
  chain c{"c3", 3, {}};
  c.stages = {{"s1", 2, 3, 1, 1, 0, 0},
              {"s2", 0, 1, 4, 6, 0, 0},
              {"s3", 2, 0, 6, 6, 1, 0},
              {"s4", 4, 0, 6, 6, 1, 0}};
  const test::brute_force bf(c);
  CHECK(bf.optimum(23).time == 16);
  const auto fl = rotor_floating{.slots = 0}.solve(c, 23);
  REQUIRE(fl.ok());
  CHECK(fl->predicted_time == 16);
  CHECK(chain_text(c, *fl) ==
        "F1_ck F2_ck F3_none F4_all B4 F2_none F3_all B3 F1_all F2_all B2 B1");
  CHECK(value(rotor{.slots = 0}.solve(c, 23)) == 18);
}

TEST_CASE("rotor_floating equals brute force on random small chains; rotor is never better") {
  chain_source src(20210417);
  int pairs = 0, separated = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const chain c = src.make(2 + iter % 4);
    INFO("chain: ", describe(c));
    const test::brute_force bf(c);
    const graph g = test::graph_of(c);  // the oracle's sequences are replayed on it
    const bytes bf_min = bf.minimum_budget();
    const bytes fl_min = rotor_floating{}.minimum_budget(c);
    const bytes ro_min = rotor{}.minimum_budget(c);
    CHECK(fl_min == bf_min);
    CHECK(ro_min >= fl_min);
    const bytes top = optimality_store_all_peak(c);
    CHECK(bf_min <= top);
    double prev_fl = optimality_inf, prev_ro = optimality_inf;
    for (bytes m = std::max<bytes>(0, bf_min - 2); m <= top + 2; ++m) {
      INFO("budget ", m);
      ++pairs;
      // Cross-check the oracle against the simulator on its own optimal sequence.
      const test::brute_force_result best = bf.optimum(m, /*with_ops=*/true);
      if (best.feasible()) {
        const sim::report rep = sim::simulate(g, test::program(c, best.ops), {.budget = m});
        CHECK(rep.valid);
        CHECK(rep.makespan == best.time);
        CHECK(best.time >= c.ideal_time());
      }
      CHECK(best.feasible() == (m >= bf_min));

      const auto fl = rotor_floating{.slots = 0}.solve(c, m);
      const auto ro = rotor{.slots = 0}.solve(c, m);
      if (!best.feasible()) {
        CHECK(fl.code() == status::budget_too_small);
        if (!fl.ok()) CHECK(fl.err().minimum_budget == bf_min);
      } else {
        REQUIRE_MESSAGE(fl.ok(), fl.message());
        CHECK(fl->predicted_time == best.time);
        CHECK(fl->predicted_peak <= m);
      }
      if (ro.ok()) {
        CHECK(ro->predicted_time >= value(fl));
        CHECK(ro->predicted_peak <= m);
        if (ro->predicted_time > value(fl)) ++separated;
      } else {
        CHECK(ro.code() == status::budget_too_small);
        CHECK(m < ro_min);
        CHECK(ro.err().minimum_budget == ro_min);
      }
      // Both are non-increasing in the budget.
      CHECK(value(fl) <= prev_fl);
      CHECK(value(ro) <= prev_ro);
      prev_fl = value(fl);
      prev_ro = value(ro);
    }
    CHECK(prev_fl == c.ideal_time());  // above the store-all peak nothing is recomputed
  }
  MESSAGE(pairs << " (chain, budget) pairs; rotor worse than rotor_floating in " << separated);
}

TEST_CASE("hand-checkable instance (docs/chain-dps.md §8.2)") {
  const chain c = hand_instance();
  const test::brute_force bf(c);
  CHECK(bf.minimum_budget() == 6);
  CHECK(rotor_floating{}.minimum_budget(c) == 6);
  CHECK(rotor{}.minimum_budget(c) == 6);
  for (bytes m = 0; m <= 11; ++m) {
    INFO("budget ", m);
    const double expect = m <= 5 ? optimality_inf : m == 6 ? 12 : m == 7 ? 11 : m == 8 ? 10 : 9;
    CHECK(bf.optimum(m).time == expect);
    CHECK(value(rotor_floating{.slots = 0}.solve(c, m)) == expect);
    CHECK(value(rotor{.slots = 0}.solve(c, m)) == expect);
  }

  // Its optimal sequences are valid, reach the stated makespans, and peak 8 at B3 for M = 8.
  const auto s8 = replay(c, "F1_all F2_ck F3_all F4_all B4 B3 F2_all B2 B1", 8);
  CHECK(s8.valid);
  CHECK(s8.makespan == 10);
  CHECK(s8.peak == 8);
  CHECK(s8.timeline[5].peak == 8);  // B3
  const auto s7 = replay(c, "F1_ck F2_ck F3_all F4_all B4 B3 F2_all B2 F1_all B1", 7);
  CHECK(s7.valid);
  CHECK(s7.makespan == 11);
  const auto s6 = replay(c, "F1_ck F2_none F3_all F4_all B4 B3 F1_ck F2_all B2 F1_all B1", 6);
  CHECK(s6.valid);
  CHECK(s6.makespan == 12);

  // rotor_floating finds those sequences for M = 6 and 7. For M = 8 it finds another one
  // with the same makespan (F1_ck F2_all ... B2 F1_all B1 instead of F1_all F2_ck ... F2_all
  // B2 B1; ties in the DP), so there only its makespan and validity are checked.
  CHECK(chain_text(c, *rotor_floating{.slots = 0}.solve(c, 6)) ==
        "F1_ck F2_none F3_all F4_all B4 B3 F1_ck F2_all B2 F1_all B1");
  CHECK(chain_text(c, *rotor_floating{.slots = 0}.solve(c, 7)) ==
        "F1_ck F2_ck F3_all F4_all B4 B3 F2_all B2 F1_all B1");
  const auto f8 = rotor_floating{.slots = 0}.solve(c, 8);
  REQUIRE(f8.ok());
  const auto f8_rep = sim::simulate(c, *f8, {.budget = 8});
  CHECK(f8_rep.valid);
  CHECK(f8_rep.makespan == 10);
}

TEST_CASE("Fig. 2.3 counterexample family, M = 15") {
  const double persistent[] = {7, 10, 13, 16, 19};
  const double floating[] = {7, 10, 12, 14, 16};
  for (int n = 3; n <= 7; ++n) {
    INFO("n = ", n);
    const chain c = counterexample(n);
    const auto ro = rotor{.slots = 0}.solve(c, 15);
    const auto fl = rotor_floating{.slots = 0}.solve(c, 15);
    REQUIRE(ro.ok());
    REQUIRE(fl.ok());
    CHECK(ro->predicted_time == 3 * n - 2);
    CHECK(ro->predicted_time == persistent[n - 3]);
    CHECK(fl->predicted_time == floating[n - 3]);
    CHECK(fl->predicted_time == std::min(3 * n - 2, 2 * n + 2));
    CHECK(fl->predicted_peak <= 15);
    CHECK(ro->predicted_peak <= 15);
    // Exhaustive search over the Table 2.1 ops agrees (7, 10, 12, 14, 16).
    const test::brute_force bf(c);
    CHECK(bf.optimum(15).time == floating[n - 3]);
    CHECK(bf.minimum_budget() == rotor_floating{}.minimum_budget(c));
  }

  // docs/chain-dps.md §8.4 gives a floating sequence for n = 6.
  // n = 6: that floating sequence is valid with makespan 14. rotor_floating returns a
  // different sequence of the same makespan: it ends "F3_ck F4_all B4 F3_all B3" where that
  // one has "F3_all F4_all B4 B3" (uF_3 = uF_4 = 0, so both cost the same; a DP tie). So the
  // makespan, validity and the floating move F2_none after B8 are checked instead.
  const chain c6 = counterexample(6);
  const auto spec =
      replay(c6,
             "F1_ck F2_ck F3_none F4_none F5_none F6_none F7_none F8_ck F9_all B9 F8_all B8 "
             "F2_none F3_ck F4_none F5_none F6_none F7_all B7 F3_ck F4_none F5_none F6_all B6 "
             "F3_ck F4_none F5_all B5 F3_all F4_all B4 B3 F1_all F2_all B2 B1",
             15);
  CHECK(spec.valid);
  CHECK(spec.makespan == 14);
  const auto fl6 = rotor_floating{.slots = 0}.solve(c6, 15);
  REQUIRE(fl6.ok());
  const auto rep = sim::simulate(c6, *fl6, {.budget = 15});
  CHECK(rep.valid);
  CHECK(rep.makespan == 14);
  const std::string text = chain_text(c6, *fl6);
  CHECK(text.find("B8 F2_none F3_ck") != std::string::npos);  // a_1 -> a_2: the floating move
}

TEST_CASE("Fig. 2.3 family: rotor_floating equals brute force for every budget") {
  for (int n = 3; n <= 5; ++n) {
    const chain c = counterexample(n);
    const test::brute_force bf(c);
    const bytes top = optimality_store_all_peak(c);
    for (bytes m = bf.minimum_budget() - 1; m <= top; ++m) {
      INFO("n = ", n, ", budget ", m);
      CHECK(value(rotor_floating{.slots = 0}.solve(c, m)) == bf.optimum(m).time);
      CHECK(value(rotor{.slots = 0}.solve(c, m)) >= bf.optimum(m).time);
    }
  }
}

TEST_CASE("no-recompute threshold (docs/chain-dps.md §8.3), all uF > 0") {
  chain_source src(7031);
  for (int iter = 0; iter < 200; ++iter) {
    const chain c = src.make(2 + iter % 6, /*min_forward=*/1);
    INFO("chain: ", describe(c));
    const int n = c.length();
    // max over l of max(a_0 + sum_{k<l} abar_k + delta_N + abar_l + oF_l,
    //                   a_0 + sum_{k<=l} abar_k + delta_l + delta_{l-1} + oB_l)
    bytes threshold = 0, prefix = c.a(0);
    for (int l = 1; l <= n; ++l) {
      threshold = std::max(threshold, prefix + c.delta(n) + c.abar(l) + c.of_all(l));
      prefix += c.abar(l);
      threshold = std::max(threshold, prefix + c.delta(l) + c.delta(l - 1) + c.ob(l));
    }
    CHECK(threshold == optimality_store_all_peak(c));
    const bool small = n <= 5;
    const test::brute_force bf(c);
    for (bytes m = std::max<bytes>(0, threshold - 4); m <= threshold + 2; ++m) {
      INFO("budget ", m, ", threshold ", threshold);
      const bool above = m >= threshold;
      CHECK((value(rotor{.slots = 0}.solve(c, m)) == c.ideal_time()) == above);
      if (small) {
        CHECK((value(rotor_floating{.slots = 0}.solve(c, m)) == c.ideal_time()) == above);
        CHECK((bf.optimum(m).time == c.ideal_time()) == above);
      }
    }
  }
}

TEST_CASE("revolve::table is Griewank's t(n, c+1)") {
  const revolve::table tab(60, 8);
  for (int n = 1; n <= 60; ++n)
    for (int c = 0; c <= 8; ++c) {
      INFO("n = ", n, ", c = ", c);
      CHECK(tab.forwards(n, c) == griewank_t(n, c + 1));
    }
  // docs/chain-dps.md §8.5 has this table.
  // The table of forward counts of Opt_0(l, m) (uf = 1, ub = 0), columns m = 3..8:
  // Opt_0 forwards = t(l+1, m-2) = forwards(l+1, m-3).
  const int rows[] = {1, 2, 3, 4, 5, 6, 8, 10};
  const long proto[][6] = {{1, 1, 1, 1, 1, 1},       {3, 2, 2, 2, 2, 2},      {6, 4, 3, 3, 3, 3},
                           {10, 6, 5, 4, 4, 4},      {15, 8, 7, 6, 5, 5},     {21, 11, 9, 8, 7, 6},
                           {36, 17, 13, 12, 11, 10}, {55, 24, 18, 16, 15, 14}};
  const opt0_table opt0(60, 11, 1, 0);
  for (int r = 0; r < 8; ++r)
    for (int m = 3; m <= 8; ++m) {
      INFO("l = ", rows[r], ", m = ", m);
      CHECK(tab.forwards(rows[r] + 1, m - 3) == proto[r][m - 3]);
      CHECK(opt0(rows[r], m) == proto[r][m - 3]);
    }
  // Theorem 1's recurrence equals Griewank's closed form (m = 3..11, l = 0..59) and is
  // infinite below 3 slots.
  for (int l = 0; l <= 59; ++l)
    for (int m = 3; m <= 11; ++m) CHECK(opt0(l, m) == griewank_t(l + 1, m - 2));
  CHECK(opt0(1, 2) == optimality_inf);
  CHECK(opt0(0, 1) == optimality_inf);
}

TEST_CASE("revolve schedules run n + t(n, c+1) forwards and simulate valid") {
  for (int n = 1; n <= 30; ++n) {
    const chain c = homogeneous(n, 2, 1, 0, 0);
    for (int snaps = 0; snaps <= std::min(8, std::max(0, n - 2)); ++snaps) {
      INFO("n = ", n, ", snapshots = ", snaps);
      const auto ops = revolve::program(c, snaps);
      CHECK(test::count_forwards(ops) == n + griewank_t(n, snaps + 1));
      const auto rep = sim::simulate(c, test::program(c, ops), {.record_timeline = false});
      CHECK(rep.valid);
      const auto r = revolve{.snapshots = snaps}.solve(c, unlimited_bytes);
      REQUIRE(r.ok());
      CHECK(r->predicted_time == static_cast<double>(n + griewank_t(n, snaps + 1)));
    }
  }
}

// When is rotor on a homogeneous chain the thesis' AD problem Opt_0 (Revolve)?
//
// The AD model ([Shilova21, §1.1.2]) has unit slots, in-place ops and a separate op buffer; its
// backward B_l needs only a_{l-1} and delta_l. Rotor's B_l needs abar_l, so an AD backward is
// Rotor's F_l^all B_l (as in sequence (2.2)). Rotor's DP C2 move is then exactly Griewank's
// split, i + T(n-i, c') + T(i, c), with T counting all forwards. Rotor has one move AD lacks:
// C1, F_s^all in a forward sweep, which keeps abar_s until B_s and saves its recomputation.
// With abar = a (the natural "unit" mapping) C1 is cheap and rotor beats Revolve, so there is
// no mapping with abar = a. There is one when two abar's can never be held at once:
//   a = delta = 1, abar = B, no overhead except oB = 1 on the loss (standing for the delta_N
//   of the AD model, which Rotor's convention delta_N = 0 drops), a_0 = 1, and
//   M = B + 1 + m   (m = the AD model's slots; the B + 1 is the op buffer: abar and delta_out),
// for m - 3 <= B - 2 (else C1 becomes feasible). Then, for N = l + 1 stages,
//   rotor(M) = Opt_0(l, m) with u_f = uF and u_b = uF + uB, i.e. N + t(N, m-2) forwards.
// Brute force confirms the mapped values are also optimal among all Table 2.1 sequences.
TEST_CASE("rotor on a homogeneous chain is Opt_0 / Revolve under M = abar + 1 + m") {
  constexpr bytes B = 10;
  const opt0_table opt0(40, 12, 1.0, 3.0);  // u_f = uF = 1, u_b = uF + uB = 1 + 2
  for (int n = 2; n <= 30; ++n) {
    const chain unit = homogeneous(n, B, 1, 0, 1);
    const chain timed = homogeneous(n, B, 1, 2, 1);
    CHECK(rotor{}.minimum_budget(unit) == B + 1 + 3);
    for (int m = 3; m - 3 <= std::min<bytes>(8, B - 2); ++m) {
      INFO("n = ", n, ", AD slots m = ", m);
      const bytes M = B + 1 + m;
      CHECK(value(rotor{.slots = 0}.solve(unit, M)) ==
            static_cast<double>(n + griewank_t(n, m - 2)));
      CHECK(value(rotor{.slots = 0}.solve(timed, M)) == opt0(n - 1, m));
      if (n <= 5)
        CHECK(test::brute_force(unit).optimum(M).time ==
              static_cast<double>(n + griewank_t(n, m - 2)));
    }
  }
  for (int n = 2; n <= 5; ++n)
    CHECK(test::brute_force(homogeneous(n, B, 1, 0, 1)).minimum_budget() == B + 4);

  // Without the mapping's conditions rotor is strictly better than Revolve: abar = a = 1
  // (C1 is cheap), n = 3, M = 1 + 1 + 4 (m = 4 slots): Revolve needs 3 + t(3, 2) = 5 forwards.
  const chain cheap = homogeneous(3, 1, 1, 0, 1);
  CHECK(value(rotor{.slots = 0}.solve(cheap, 6)) < 3 + griewank_t(3, 2));
}
