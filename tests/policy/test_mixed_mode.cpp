// mixed_mode (policy/mixed_mode.hpp) on random chains with control-flow stages: every program is
// valid within its budget (the simulator, through finish()), no planned segment holds a
// control-flow stage, the segments' times add up to the program's, the exact DP equals the best
// over every segmentation, mode and split of tiny chains (with the policy's own segment costs),
// it is never slower than DTR alone on the whole chain nor than rotor's DP at the same slots, the
// accelerated searches are never faster than the exact one (and how often they are slower is
// counted), the same input gives the same program, and bad input is named.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/dtr.hpp>
#include <remat/policy/mixed_mode.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/sim/simulate.hpp>

#include "support/random_chain.hpp"

using namespace remat;

namespace {

/// Stages of comparable sizes (256 to 4,096 bytes, what the backward keeps up to 3 times the
/// output), a quarter of them with control flow.
chain mx_random_chain(std::uint64_t seed, int min_len, int max_len) {
  testing::chain_generator gen(seed);
  chain c;
  c.name = "mixed" + std::to_string(seed);
  c.input_bytes = 256 * gen.between(1, 16);
  const int n = gen.between(min_len, max_len);
  for (int l = 1; l <= n; ++l) {
    stage s;
    s.name = "s" + std::to_string(l);
    s.forward_time = 0.01 + gen.unit();
    s.backward_time = 0.01 + 2 * gen.unit();
    s.output_bytes = l == n ? 0 : 256 * gen.between(1, 16);
    s.saved_bytes = s.output_bytes * gen.between(1, 3);
    s.forward_overhead_bytes = gen.chance(0.3) ? 64 * gen.between(1, 8) : 0;
    s.control_flow = l < n && gen.chance(0.25);
    c.stages.push_back(s);
  }
  return c;
}

bytes mx_store_all_peak(const chain& c) {
  return store_all{}.solve(c, unlimited_bytes)->predicted_peak;
}

void mx_check(const chain& c, bytes budget, const solution<mixed_mode_details>& s) {
  const auto rep = sim::simulate(detail::chain_graph(c), s.program,
                                 {.budget = budget, .record_timeline = false});
  CHECK(rep.valid);
  CHECK(rep.peak <= budget);
  int next = 1;
  seconds sum = 0;
  for (const auto& sg : s.details.segments) {
    CHECK(sg.first == next);
    next = sg.last + 1;
    sum += sg.time;
    if (sg.mode == segment_mode::planned)
      for (int l = sg.first; l <= sg.last; ++l) CHECK_FALSE(c.at(l).control_flow);
  }
  CHECK(next == c.length() + 1);
  CHECK(sum == doctest::Approx(s.program.predicted_time));
}

}  // namespace

TEST_CASE("mixed_mode: valid programs within the budget, no control flow planned") {
  int plans = 0, mixed = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const chain c = mx_random_chain(seed, 2, 10);
    const bytes peak = mx_store_all_peak(c);
    for (double f : {1.0, 0.9, 0.8, 0.7, 0.5}) {
      const auto budget = static_cast<bytes>(static_cast<double>(peak) * f);
      CAPTURE(seed);
      CAPTURE(budget);
      // The dynamic runtime costs a tenth of an op's mean time per op it runs.
      const auto s =
          mixed_mode<>{.slots = 40, .dynamic = {.overhead = 0.1}}.solve_detailed(c, budget);
      if (!s) {
        CHECK(s.code() == status::budget_too_small);
        continue;
      }
      ++plans;
      mx_check(c, budget, *s);
      bool dyn = false, pl = false;
      for (const auto& sg : s->details.segments)
        (sg.mode == segment_mode::dynamic ? dyn : pl) = true;
      mixed += dyn && pl;
      // Never slower than DTR alone on the whole chain (a one-segment split), at the same
      // budget, its overhead counted.
      const auto whole = dtr<>{}.solve(detail::chain_graph(c), budget);
      seconds overhead = 0;
      for (const auto& sg : s->details.segments) overhead += sg.overhead;
      if (whole) {
        int runs = 0;
        for (const auto& i : whole->ops) runs += i.is_compute();
        CHECK(s->program.predicted_time + overhead <=
              (whole->predicted_time + 0.1 * runs) * (1 + 1e-12));
      }
    }
  }
  MESSAGE(plans << " plans, " << mixed << " with both modes");
  CHECK(plans > 100);
  CHECK(mixed > 25);
}

TEST_CASE("mixed_mode: without control flow, never slower than rotor's DP at its slots") {
  for (std::uint64_t seed = 40; seed <= 55; ++seed) {
    chain c = mx_random_chain(seed, 2, 12);
    for (auto& s : c.stages) s.control_flow = false;
    const bytes peak = mx_store_all_peak(c);
    for (double f : {0.9, 0.6}) {
      const auto budget = static_cast<bytes>(static_cast<double>(peak) * f);
      const auto r = rotor{.slots = 50, .tolerance = 1e9}.solve_detailed(c, budget);
      const auto s = mixed_mode<>{.slots = 50}.solve_detailed(c, budget);
      if (!r || r->details.slots != 50) continue;  // rotor refined its slots: not comparable
      REQUIRE(s);
      mx_check(c, budget, *s);
      CHECK(s->program.predicted_time <= r->program.predicted_time * (1 + 1e-12));
    }
  }
}

TEST_CASE("mixed_mode: the exact DP is the best segmentation of tiny chains") {
  for (std::uint64_t seed = 60; seed <= 75; ++seed) {
    const chain c = mx_random_chain(seed, 1, 5);
    const bytes budget = mx_store_all_peak(c) * 7 / 10;
    constexpr std::int64_t S = 12;
    const auto d = detail::discretize(c, budget, S);
    const detail::segment_slots q(d, budget);
    const detail::deadline dl(0);
    const auto p = rotor_segments{}.prepare(c, q, dl);
    const auto e = dtr_segments<>{}.prepare(c, q, dl);
    REQUIRE(p);
    REQUIRE(e);
    const int n = c.length();
    // The best over every split into segments, modes and shares.
    std::function<double(int, std::int64_t)> rest = [&](int first, std::int64_t k) -> double {
      if (first > n) return 0;
      double best = std::numeric_limits<double>::infinity();
      for (int last = first; last <= n; ++last) {
        bool cf = false;
        for (int l = first; l <= last; ++l) cf = cf || c.at(l).control_flow;
        for (std::int64_t share = 1; share <= k; ++share) {
          double f = e->cost(first, last, share);
          if (!cf) f = std::min(f, p->cost(first, last, share));
          if (f == std::numeric_limits<double>::infinity()) continue;
          best = std::min(best, f + rest(last + 1, k - share));
        }
      }
      return best;
    };
    const double want = rest(1, d.slots);
    const auto s = mixed_mode<>{.slots = S}.solve_detailed(c, budget);
    CAPTURE(seed);
    if (want == std::numeric_limits<double>::infinity()) {
      CHECK_FALSE(s);
      continue;
    }
    REQUIRE(s);
    CHECK(s->program.predicted_time == doctest::Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("mixed_mode: the accelerated searches against the exact one; the same plan twice") {
  int runs = 0, dc_slower = 0, ternary_slower = 0;
  for (std::uint64_t seed = 80; seed <= 100; ++seed) {
    const chain c = mx_random_chain(seed, 3, 12);
    const bytes budget = mx_store_all_peak(c) * 6 / 10;
    const auto exact = mixed_mode<>{.slots = 30}.solve_detailed(c, budget);
    if (!exact) continue;
    ++runs;
    const auto again = mixed_mode<>{.slots = 30}.solve_detailed(c, budget);
    REQUIRE(again);
    CHECK(again->program == exact->program);
    for (mixed_search how : {mixed_search::dc, mixed_search::dc_ternary}) {
      const auto s = mixed_mode<>{.slots = 30, .search = how}.solve_detailed(c, budget);
      if (!s) {
        ++(how == mixed_search::dc ? dc_slower : ternary_slower);
        continue;
      }
      mx_check(c, budget, *s);
      CHECK(s->program.predicted_time >= exact->program.predicted_time * (1 - 1e-12));
      if (s->program.predicted_time > exact->program.predicted_time * (1 + 1e-12))
        ++(how == mixed_search::dc ? dc_slower : ternary_slower);
    }
  }
  MESSAGE(runs << " chains: dc slower on " << dc_slower << ", dc_ternary on " << ternary_slower);
  CHECK(runs > 10);
}

TEST_CASE("mixed_mode: bad input") {
  chain c = mx_random_chain(3, 4, 6);
  c.stages.back().control_flow = true;
  auto s = mixed_mode<>{}.solve(c, 1 << 20);
  REQUIRE_FALSE(s);
  CHECK(s.err().message.find("control_flow is set on the loss") != std::string::npos);
  c.stages.back().control_flow = false;
  s = mixed_mode<>{}.solve(c, 1);
  REQUIRE_FALSE(s);
  CHECK(s.code() == status::budget_too_small);
  CHECK(s.err().message.find("no split") != std::string::npos);
  s = mixed_mode<>{.slots = 0}.solve(c, 1 << 20);
  REQUIRE_FALSE(s);
  CHECK(s.err().message.find("slots") != std::string::npos);
}
