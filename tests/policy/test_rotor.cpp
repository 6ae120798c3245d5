#include <bit>
#include <cstdint>
#include <utility>

#include <doctest/doctest.h>

#include <remat/remat.hpp>

#include "policy/chain_programs.hpp"
#include "support/random_chain.hpp"

using namespace remat;

TEST_CASE("rotor: the hand-checkable instance of docs/chain-dps.md §8.2") {
  chain c{"hand", 1, {}};
  const double uf[] = {1, 1, 1, 0}, ub[] = {2, 2, 2, 0};
  const bytes a[] = {1, 1, 1, 0}, ab[] = {2, 2, 2, 0};
  for (int i = 0; i < 4; ++i) c.stages.push_back({"s", uf[i], ub[i], a[i], ab[i], 0, 0});
  CHECK(rotor{}.minimum_budget(c) == 6);
  const double expect[] = {12, 11, 10, 9, 9};
  for (bytes m = 6; m <= 10; ++m) {
    auto r = rotor{.slots = 0}.solve(c, m);
    REQUIRE(r.ok());
    CHECK(r->predicted_time == expect[m - 6]);
    CHECK(r->predicted_peak <= m);
  }
  auto small = rotor{.slots = 0}.solve(c, 5);
  CHECK(small.code() == status::budget_too_small);
  CHECK(small.err().minimum_budget == 6);
  CHECK(test::chain_text(c, *rotor{.slots = 0}.solve(c, 7)) ==
        "F1_ck F2_ck F3_all F4_all B4 B3 F2_all B2 F1_all B1");
}

TEST_CASE("rotor: a budget within rounding of the minimum still gets a schedule") {
  // GiB-sized tensors: at the exact minimum, 500 slots round every size up and leave no plan,
  // and exact sizes would need a table of billions of slots. rotor refines the slots while
  // the table stays small, then returns the fastest minimum-memory schedule.
  using namespace remat::literals;
  chain c{"big", 1_GiB, {}};
  for (int i = 0; i < 8; ++i)
    c.stages.push_back({"s", 1.0 + i, 2.0, (1_GiB) + i * 12345, 3 * (1_GiB) + i * 777, 1000, 2000});
  const bytes minimum = rotor{}.minimum_budget(c);
  for (const bytes budget : {minimum, minimum + 1, minimum + 4096}) {
    auto r = rotor{}.solve(c, budget);
    REQUIRE_MESSAGE(r.ok(), r.message());
    const auto rep = sim::simulate(c, *r, {.budget = budget});
    CHECK(rep.valid);
    CHECK(rep.peak <= budget);
    CHECK(rep.makespan == doctest::Approx(r->predicted_time));
    auto f = rotor_floating{}.solve(c, budget);
    REQUIRE_MESSAGE(f.ok(), f.message());
    CHECK(f->predicted_peak <= budget);
    // solve_detailed says which plan it is: here the fastest minimum-memory one, not proven
    // optimal.
    auto d = rotor{}.solve_detailed(c, budget);
    REQUIRE(d.ok());
    CHECK(d->program == *r);
    CHECK(d->details.how == chain_dp_details::method::minimum_memory);
    CHECK_FALSE(d->optimal);
  }
  // Far enough above the minimum, the DP plans at refined slots (rounded sizes: not proven
  // optimal).
  auto above = rotor{}.solve_detailed(c, minimum + minimum / 100);
  REQUIRE(above.ok());
  CHECK(above->details.how == chain_dp_details::method::dp);
  CHECK(above->details.slots >= 500);
  CHECK_FALSE(above->details.exact_sizes);
  CHECK_FALSE(above->optimal);
  CHECK(above->program.predicted_peak <= minimum + minimum / 100);
  CHECK(rotor{}.solve(c, minimum - 1).code() == status::budget_too_small);
}

TEST_CASE(
    "rotor, rotor_floating: when storing everything fits, it is the plan, whatever the slots") {
  // With 500 slots the rounding of sizes would make store-all look infeasible at exactly its
  // peak; its time is a lower bound for any schedule, so it must be found anyway.
  using namespace remat::literals;
  chain c{"gpt-ish", 3_MiB, {}};
  for (int i = 0; i < 14; ++i)
    c.stages.push_back(
        {"b", 0.01 + 0.001 * i, 0.02, (96_MiB) + i * 4099, (1_GiB) + i * 7919, 1234567, 7654321});
  const bytes peak = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
  for (const std::int64_t slots : {100, 500, 2000}) {
    auto r = rotor{.slots = slots}.solve(c, peak);
    REQUIRE(r.ok());
    CHECK(r->predicted_time == c.ideal_time());
    CHECK(test::chain_ops(c, *r) == store_all::program(c));
    auto f = rotor_floating{.slots = slots}.solve(c, peak);
    REQUIRE(f.ok());
    CHECK(f->predicted_time == c.ideal_time());
    auto d = rotor_floating{.slots = slots}.solve_detailed(c, peak);
    REQUIRE(d.ok());
    CHECK(d->details.how == chain_dp_details::method::store_all);
    CHECK(d->optimal);
    // One byte less: something must be recomputed.
    auto tight = rotor{.slots = slots}.solve(c, peak - 1);
    REQUIRE(tight.ok());
    CHECK(tight->predicted_time > c.ideal_time());
  }
}

TEST_CASE(
    "rotor, rotor_floating: solve_detailed says at which slots the DP planned, and exact sizes are "
    "optimal") {
  chain c{"small", 3, {}};
  for (int i = 0; i < 6; ++i) c.stages.push_back({"s", 1.0 + i, 2.0 + i, 5 + i, 9 + 2 * i, 1, 2});
  const bytes all = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
  const bytes budget = (rotor{}.minimum_budget(c) + all) / 2;
  // An infinite tolerance refines only where rounding leaves no plan.
  constexpr double any_gap = std::numeric_limits<double>::infinity();
  for (const std::int64_t slots : {0, 10}) {
    CAPTURE(slots);
    auto r = rotor{.slots = slots, .tolerance = any_gap}.solve_detailed(c, budget);
    auto f = rotor_floating{.slots = slots, .tolerance = any_gap}.solve_detailed(c, budget);
    REQUIRE(r.ok());
    REQUIRE(f.ok());
    for (const auto* d : {&*r, &*f}) {
      CHECK(d->details.how == chain_dp_details::method::dp);
      CHECK(d->details.exact_sizes == (slots == 0));
      CHECK(d->optimal == (slots == 0));
      // Exact: one slot per byte (the sizes' common divisor is 1). Else the knob's slots, times
      // 4 per refinement where rounding left no plan (here 10 slots do not, 40 do).
      CHECK(d->details.slots == (slots == 0 ? budget : 40));
      // The DP with sizes rounded down bounds the optimum.
      REQUIRE(d->bound.has_value());
      CHECK(*d->bound <= d->program.predicted_time);
    }
    CHECK(r->program == *rotor{.slots = slots, .tolerance = any_gap}.solve(c, budget));
    CHECK(f->program == *rotor_floating{.slots = slots, .tolerance = any_gap}.solve(c, budget));
  }
  // The default tolerance (1 %): 40 slots are further from the bound, and refining reaches
  // exact sizes (4 x 40 slots is more than the budget's 72 bytes).
  auto refined = rotor{.slots = 10}.solve_detailed(c, budget);
  REQUIRE(refined.ok());
  CHECK(refined->details.exact_sizes);
  CHECK(refined->details.slots == budget);
  CHECK(refined->optimal);
  CHECK(refined->program.predicted_time == rotor{.slots = 0}.solve(c, budget)->predicted_time);
  // Store-all fits: its plan, optimal, whatever the slots.
  auto s = rotor{.slots = 10}.solve_detailed(c, all);
  REQUIRE(s.ok());
  CHECK(s->details.how == chain_dp_details::method::store_all);
  CHECK(s->optimal);
  // Errors are solve()'s.
  CHECK(rotor{}.solve_detailed(c, 1).code() == status::budget_too_small);
}

namespace {

/// A chain whose activations are all about `size` bytes (page-aligned like real tensors, or
/// not), the budgets just above whole numbers of them: where rounding every size up to 500
/// slots costs one activation and, before the gap was bounded, a much slower plan.
chain near_multiples_chain(testing::chain_generator& g, bool aligned) {
  chain c{"near-multiples", 0, {}};
  const int n = g.between(4, 10);
  const bytes size = aligned ? 4096 * g.between(2, 8) : g.between(3000, 9000);
  c.input_bytes = size;
  for (int l = 1; l <= n; ++l) {
    stage s;
    s.name = "s" + std::to_string(l);
    s.forward_time = 0.01 + 0.02 * g.unit();
    s.backward_time = 2 * s.forward_time;
    s.output_bytes = size;
    s.saved_bytes = size + (g.chance(0.5) ? size / 2 : 0);
    s.forward_overhead_bytes = g.chance(0.3) ? size / 4 : 0;
    s.backward_overhead_bytes = g.chance(0.3) ? size / 4 : 0;
    c.stages.push_back(std::move(s));
  }
  return c;
}

}  // namespace

TEST_CASE(
    "rotor, rotor_floating: the default plan is within its tolerance of the optimum at exact "
    "sizes, even at budgets just above whole numbers of activations") {
  testing::chain_generator g(2511);
  double worst = 0, worst_unbounded = 0;
  int cases = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const chain c = near_multiples_chain(g, trial % 2 == 0);
    const bytes lo = rotor{}.minimum_budget(c);
    const bytes all = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
    const bytes size = c.stages[0].output_bytes;
    for (bytes k = lo / size + 1; k * size < all; ++k) {
      const bytes budget =
          k * size + 1 + static_cast<bytes>(g.unit() * 0.004 * static_cast<double>(size));
      CAPTURE(trial);
      CAPTURE(budget);
      auto exact = rotor{.slots = 0}.solve_detailed(c, budget);
      auto fine = rotor{}.solve_detailed(c, budget);
      REQUIRE(exact.ok());
      REQUIRE_MESSAGE(fine.ok(), fine.message());
      REQUIRE(exact->optimal);
      const double opt = exact->program.predicted_time, t = fine->program.predicted_time;
      CHECK(t <= opt * (1 + rotor{}.tolerance) * (1 + 1e-12));
      CHECK(fine->program.predicted_peak <= budget);
      // The bound is a lower bound on the optimum, and the plan is within it by the tolerance.
      REQUIRE(fine->bound.has_value());
      CHECK(*fine->bound <= opt * (1 + 1e-12));
      CHECK(t <= *fine->bound * (1 + rotor{}.tolerance) * (1 + 1e-12));
      worst = std::max(worst, t / opt - 1);
      // What the plan was before the bound (no refinement for the gap): often much slower.
      auto coarse = rotor{.tolerance = std::numeric_limits<double>::infinity()}.solve(c, budget);
      REQUIRE(coarse.ok());
      worst_unbounded = std::max(worst_unbounded, coarse->predicted_time / opt - 1);
      if (c.length() <= 6) {
        auto floating = rotor_floating{}.solve_detailed(c, budget);
        auto floating_exact = rotor_floating{.slots = 0}.solve(c, budget);
        REQUIRE(floating.ok());
        REQUIRE(floating_exact.ok());
        CHECK(floating->program.predicted_time <=
              floating_exact->predicted_time * (1 + rotor_floating{}.tolerance) * (1 + 1e-12));
      }
      ++cases;
    }
  }
  MESSAGE(cases << " budgets: worst gap to the exact optimum " << 100 * worst
                << " %; without the bound " << 100 * worst_unbounded << " %");
  CHECK(cases > 100);
  CHECK(worst_unbounded > 0.05);  // the instances do catch the rounding
}

TEST_CASE("rotor's table is the same, cell for cell, whatever the tiles of its fill and threads") {
  // The fill relaxes the moves tile by tile (blocks of stages), the tiles of one distance from
  // the diagonal on several threads; a min of doubles is exact and the pruning only skips cells
  // a move cannot lower, so every order gives the same table.
  testing::chain_generator g(4711);
  for (int trial = 0; trial < 12; ++trial) {
    const chain c = g({.min_length = 20, .max_length = 45});
    const bytes all = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
    const bytes lo = rotor{}.minimum_budget(c);
    const bytes budget = lo + (all - lo) * (trial % 3 + 1) / 4;
    const auto d = detail::discretize(c, budget, 40 + 17 * trial);
    CAPTURE(trial);
    CAPTURE(testing::describe(c));
    const detail::deadline dl(0);
    detail::rotor_dp reference(d, c.length());  // one tile: the plain order, t up, s down
    REQUIRE(reference.fill(dl, {}));
    for (const auto& [tile, threads] : {std::pair{1, 1}, {2, 1}, {3, 2}, {7, 3}, {0, 1}, {0, 2}}) {
      CAPTURE(tile);
      CAPTURE(threads);
      detail::rotor_dp dp(d, tile, threads);
      REQUIRE(dp.fill(dl, {}));
      bool same = true;
      for (int s = 1; s <= c.length() && same; ++s)
        for (int t = s; t <= c.length() && same; ++t)
          for (std::int64_t m = 0; m <= d.dp_budget && same; ++m)
            same = std::bit_cast<std::uint64_t>(dp.cost(s, t, m)) ==
                   std::bit_cast<std::uint64_t>(reference.cost(s, t, m));
      CHECK(same);
      CHECK(dp.reconstruct().ops == reference.reconstruct().ops);
    }
  }
}
