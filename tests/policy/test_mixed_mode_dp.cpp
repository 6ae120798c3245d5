// Mixed Mode's DP (policy/mixed_mode/dp.hpp) on the two-mode operator chain: the hand-checked
// values of a 3-op chain (with and without a control-flow op), the exact search against every
// segmentation, mode and budget split of tiny random chains, the plan's segments adding up to its
// cost within the budget, and how often the paper's two accelerations (quadrangle inequality,
// ternary search over the split) miss the optimum: never below it, and counted, since the paper
// admits its Assumption 1 may fail.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/mixed_mode/dp.hpp>

using namespace remat;

namespace {

constexpr double mm_inf = std::numeric_limits<double>::infinity();

mixed_op_costs mm_costs(const mixed_op_chain& c) {
  auto r = mixed_op_costs::make(c);
  REQUIRE(r);
  return *r;
}

/// The least cost over every segmentation, every mode per segment and every split of m slots
/// (each share >= delta_min), by enumeration.
double mm_brute_force(const mixed_op_costs& c, std::int64_t m, std::int64_t delta_min) {
  const int n = c.size();
  double best = mm_inf;
  // seg(j, k): the least cost of ops [j, n) with k slots left.
  std::function<double(int, std::int64_t)> rest = [&](int j, std::int64_t k) -> double {
    if (j == n) return 0;
    double b = mm_inf;
    for (int i = j + 1; i <= n; ++i)
      for (std::int64_t d = delta_min; d <= k; ++d)
        for (segment_mode md : {segment_mode::planned, segment_mode::dynamic}) {
          const double f = c.cost(md, j, i, d);
          if (f == mm_inf) continue;
          const double tail = rest(i, k - d);
          if (tail < mm_inf) b = std::min(b, f + tail);
        }
    return b;
  };
  best = rest(0, m);
  return best;
}

/// The plan's segments cover the ops in order, fit the slots, and add up to its cost.
void mm_check_plan(const mixed_op_costs& c, const mixed_plan& p, std::int64_t m) {
  REQUIRE(p.feasible());
  int at = 0;
  std::int64_t used = 0;
  double sum = 0;
  for (const auto& s : p.segments) {
    CHECK(s.first == at);
    CHECK(s.last > s.first);
    at = s.last;
    used += s.slots;
    CHECK(c.cost(s.mode, s.first, s.last, s.slots) == doctest::Approx(s.cost));
    sum += s.cost;
  }
  CHECK(at == c.size());
  CHECK(used <= m);
  CHECK(sum == doctest::Approx(p.cost));
}

mixed_op_chain mm_hand_chain() {
  return {.graph_time = {2, 2, 2},
          .eager_time = {3, 3, 3},
          .kept_slots = {2, 2, 2},
          .recompute_time = {1, 1, 1},
          .control_flow = {},
          .graph_segment_time = 1,
          .eager_segment_time = 0};
}

}  // namespace

TEST_CASE("mixed_dp: the hand-checked 3-op chain, every search") {
  const std::vector<double> expect = {mm_inf, mm_inf, 11, 11, 10, 10, 7, 7, 7};
  const auto c = mm_costs(mm_hand_chain());
  for (mixed_search how : {mixed_search::exact, mixed_search::dc, mixed_search::dc_ternary})
    for (std::int64_t m = 0; m <= 8; ++m) {
      CAPTURE(to_string(how));
      CAPTURE(m);
      const auto p = mixed_dp(c, m, {.search = how});
      REQUIRE(p);
      CHECK(p->cost == expect[static_cast<std::size_t>(m)]);
      if (p->feasible()) mm_check_plan(c, *p, m);
    }
  // M = 2: one eager segment; M >= 6: one graph segment.
  const auto two = mixed_dp(c, 2);
  REQUIRE(two->segments.size() == 1);
  CHECK(two->segments[0].mode == segment_mode::dynamic);
  const auto six = mixed_dp(c, 6);
  REQUIRE(six->segments.size() == 1);
  CHECK(six->segments[0].mode == segment_mode::planned);
  CHECK(six->segments[0].slots == 6);
}

TEST_CASE("mixed_dp: a control-flow op is never inside a graph segment") {
  auto chain = mm_hand_chain();
  chain.control_flow = {0, 1, 0};
  const auto c = mm_costs(chain);
  const std::vector<double> expect = {mm_inf, mm_inf, 11, 11, 10, 10, 9, 9, 9};
  for (std::int64_t m = 0; m <= 8; ++m) {
    const auto p = mixed_dp(c, m);
    REQUIRE(p);
    CHECK(p->cost == expect[static_cast<std::size_t>(m)]);
    if (!p->feasible()) continue;
    mm_check_plan(c, *p, m);
    for (const auto& s : p->segments)
      if (s.first <= 1 && 1 < s.last) CHECK(s.mode == segment_mode::dynamic);
  }
}

TEST_CASE("mixed_dp: exact equals enumeration; the accelerations never beat it") {
  std::mt19937 rng(20261128);
  std::uniform_int_distribution<int> len(1, 5), slots(0, 3), time(1, 9), coin(0, 5);
  int runs = 0, dc_off = 0, ternary_off = 0;
  for (int trial = 0; trial < 120; ++trial) {
    mixed_op_chain ch;
    const int n = len(rng);
    for (int l = 0; l < n; ++l) {
      const double tf = time(rng);
      ch.graph_time.push_back(tf);
      ch.eager_time.push_back(tf + time(rng) % 4);
      ch.kept_slots.push_back(slots(rng));
      ch.recompute_time.push_back(time(rng) % 5);
      ch.control_flow.push_back(coin(rng) == 0 ? 1 : 0);
    }
    ch.graph_segment_time = time(rng) % 3;
    ch.eager_segment_time = time(rng) % 2;
    const auto c = mm_costs(ch);
    for (std::int64_t dmin : {std::int64_t{1}, std::int64_t{0}})
      for (std::int64_t m = 0; m <= 9; ++m) {
        CAPTURE(trial);
        CAPTURE(m);
        CAPTURE(dmin);
        const double want = mm_brute_force(c, m, dmin);
        const auto exact = mixed_dp(c, m, {.search = mixed_search::exact, .delta_min = dmin});
        REQUIRE(exact);
        if (want == mm_inf) {
          CHECK(!exact->feasible());
          continue;
        }
        CHECK(exact->cost == doctest::Approx(want).epsilon(1e-12));
        mm_check_plan(c, *exact, m);
        ++runs;
        for (mixed_search how : {mixed_search::dc, mixed_search::dc_ternary}) {
          const auto p = mixed_dp(c, m, {.search = how, .delta_min = dmin});
          REQUIRE(p);
          if (!p->feasible()) {
            ++(how == mixed_search::dc ? dc_off : ternary_off);
            continue;
          }
          mm_check_plan(c, *p, m);
          CHECK(p->cost >= exact->cost - 1e-9);
          if (p->cost > exact->cost + 1e-9) ++(how == mixed_search::dc ? dc_off : ternary_off);
        }
      }
  }
  MESSAGE("feasible budgets: " << runs << "; dc above the optimum on " << dc_off
                               << ", dc_ternary on " << ternary_off);
  CHECK(runs > 500);
  // The accelerations are heuristics, but not wild ones on these chains.
  CHECK(dc_off * 10 < runs);
  CHECK(ternary_off * 4 < runs);
}

TEST_CASE("mixed_dp: more slots never cost more (exact); a deadline stops it") {
  mixed_op_chain ch;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> sz(0, 4), t(1, 6);
  for (int l = 0; l < 300; ++l) {
    ch.graph_time.push_back(t(rng));
    ch.eager_time.push_back(t(rng) + 2);
    ch.kept_slots.push_back(sz(rng));
    ch.recompute_time.push_back(t(rng));
    ch.control_flow.push_back(l % 9 == 4 ? 1 : 0);
  }
  const auto c = mm_costs(ch);
  double prev = mm_inf;
  for (std::int64_t m = 0; m <= 120; m += 20) {
    const auto p = mixed_dp(c, m);
    REQUIRE(p);
    CHECK(p->cost <= prev);
    prev = p->cost;
  }
  CHECK(prev < mm_inf);
  // An expired deadline: no plan.
  CHECK_FALSE(mixed_dp(c, 120, {}, detail::deadline(1e-9)).has_value());
}

TEST_CASE("mixed_op_costs: bad chains are named") {
  mixed_op_chain ch = mm_hand_chain();
  ch.eager_time.pop_back();
  auto r = mixed_op_costs::make(ch);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("eager_time") != std::string::npos);
  ch = mm_hand_chain();
  ch.kept_slots[1] = -1;
  r = mixed_op_costs::make(ch);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("kept_slots of op 1") != std::string::npos);
  ch = mm_hand_chain();
  ch.graph_time[2] = std::nan("");
  r = mixed_op_costs::make(ch);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("graph_time of op 2") != std::string::npos);
}
