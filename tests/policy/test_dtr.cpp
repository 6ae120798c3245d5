// dtr (policy/dtr.hpp): Dynamic Tensor Rematerialization replayed on training graphs. Every
// program is valid within its budget and, DTR being a heuristic, never faster than the optimum
// (exhaustive search on tiny random DAGs); with room for everything it recomputes nothing; the
// same graph and budget give the same program; below what an op needs, budget_too_small names
// the op, and the minimum it reports runs.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/dtr.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>
#include <remat/zoo/gpt2.hpp>

#include "support/graph_brute_force.hpp"
#include "support/random_dag.hpp"

using namespace remat;

namespace {

void check_dtr_valid(const graph& g, const schedule& s, bytes budget) {
  const auto rep = sim::simulate(g, s, {.budget = budget, .record_timeline = false});
  INFO((rep.first_violation ? rep.first_violation->message : std::string()));
  CHECK(rep.valid);
  CHECK(rep.peak == s.predicted_peak);
  CHECK(rep.peak <= budget);
  CHECK(rep.makespan == doctest::Approx(s.predicted_time));
}

/// Every datum's bytes and the largest scratch: a budget at which nothing is evicted.
bytes room_for_everything(const graph& g) {
  bytes b = 0, scratch = 0;
  for (int d = 0; d < g.data_count(); ++d) b += g.data(d).size;
  for (const auto& c : g.compute_nodes())
    scratch = std::max({scratch, c.overhead, c.fast_overhead});
  return b + scratch;
}

template <class P>
void dtr_never_below_the_optimum(const std::string& heuristic) {
  INFO(heuristic);
  std::mt19937 rng(5);
  const P p{};
  int compared = 0, planned = 0, recomputed = 0, optimal = 0;
  for (int i = 0; i < 12; ++i) {
    const graph g = test::random_dag(rng, 3 + i % 3, i);
    const bytes hi = peak_of_store_all(g);
    for (int k = 0; k <= 6; ++k) {
      const bytes b = hi - hi * k / 10;
      INFO("graph " << i << ", budget " << b);
      const double best = test::graph_brute_force(g, b);
      const auto x = p.solve_detailed(g, b);
      if (!x) {
        CHECK(x.code() == status::budget_too_small);
        REQUIRE(x.err().minimum_budget);
        CHECK(*x.err().minimum_budget > b);
        CHECK(p.solve(g, *x.err().minimum_budget));
        continue;
      }
      ++planned;
      check_dtr_valid(g, x->program, b);
      REQUIRE(std::isfinite(best));  // dtr ran, so a schedule exists
      CHECK(x->program.predicted_time >= best - 1e-9);
      ++compared;
      recomputed += x->program.predicted_time > g.ideal_time() + 1e-9;
      optimal += x->program.predicted_time <= best + 1e-9;
    }
  }
  CHECK(compared >= 30);
  CHECK(recomputed >= 10);  // evictions and remakes exercised
  MESSAGE(heuristic << ": " << planned << " budgets run, " << recomputed << " with recomputation, "
                    << optimal << " at the optimum");
}

}  // namespace

TEST_CASE("dtr: valid within the budget and never faster than the optimum, every heuristic") {
  dtr_never_below_the_optimum<dtr<h_dtr>>("h_dtr");
  dtr_never_below_the_optimum<dtr<h_size>>("size");
  dtr_never_below_the_optimum<dtr<h_lru>>("lru");
}

TEST_CASE("dtr: GPT-2 from room for everything down to its minimum; the same program each time") {
  const graph g = build_graph(*zoo::gpt2({.layers = 2}, zoo::devices::rtx3060())).value();
  const dtr<> p;
  const auto all = p.solve_detailed(g, room_for_everything(g));
  REQUIRE(all);
  CHECK(all->program.predicted_time == doctest::Approx(g.ideal_time()));
  const bytes least = p.minimum_budget(g);
  CHECK(least < peak_of_store_all(g));
  seconds previous = 0;
  for (const double share : {1.0, 0.8, 0.6, 0.4}) {
    const bytes b =
        std::max(least, static_cast<bytes>(share * static_cast<double>(peak_of_store_all(g))));
    INFO("budget " << b);
    const auto x = p.solve_detailed(g, b);
    REQUIRE_MESSAGE(x, x.message());
    check_dtr_valid(g, x->program, b);
    CHECK(x->program.predicted_time >= g.ideal_time() - 1e-12);
    const auto again = p.solve(g, b);
    REQUIRE(again);
    CHECK(again->ops == x->program.ops);
    previous = x->program.predicted_time;
  }
  CHECK(previous > g.ideal_time());  // at 40 % it recomputes
}

TEST_CASE("dtr: below what an op needs, budget_too_small names it; the minimum runs") {
  const graph g = build_graph(*zoo::gpt2({.layers = 1}, zoo::devices::rtx3060())).value();
  const dtr<> p;
  const auto x = p.solve_detailed(g, 1000);
  REQUIRE_FALSE(x);
  CHECK(x.code() == status::budget_too_small);
  CHECK(x.message().find("needs") != std::string::npos);
  CHECK(x.message().find("smallest budget") != std::string::npos);
  REQUIRE(x.err().minimum_budget);
  const bytes least = *x.err().minimum_budget;
  CHECK(least == p.minimum_budget(g));
  const auto y = p.solve_detailed(g, least);
  REQUIRE_MESSAGE(y, y.message());
  check_dtr_valid(g, y->program, least);
  CHECK_FALSE(p.solve(g, least - 1));
  const auto negative = p.solve(g, -1);
  REQUIRE_FALSE(negative);
  CHECK(negative.code() == status::invalid_problem);
}

TEST_CASE("dtr: a heuristic chosen by name plans as the heuristic's own type") {
  CHECK(dtr_heuristic::names() == std::vector<std::string_view>{"h_dtr", "size", "lru"});
  CHECK(dtr_heuristic{}.name() == "h_dtr");
  CHECK_FALSE(dtr_heuristic::named("h_size"));
  CHECK_FALSE(dtr_heuristic::named(""));
  REQUIRE(dtr_heuristic::named("lru"));
  CHECK(*dtr_heuristic::named("lru") == dtr_heuristic(h_lru{}));
  CHECK(dtr_heuristic(h_size{}).name() == "size");
  const graph g = build_graph(*zoo::gpt2({.layers = 2}, zoo::devices::rtx3060())).value();
  const bytes least = dtr<>{}.minimum_budget(g);
  const bytes b = least + (peak_of_store_all(g) - least) / 3;
  auto same = [&]<class H>(H h, std::string_view name) {
    INFO(name);
    dtr<> by_name;
    by_name.heuristic = *dtr_heuristic::named(name);
    const auto x = by_name.solve_detailed(g, b);
    const auto y = dtr<H>{h}.solve_detailed(g, b);
    REQUIRE_MESSAGE(x, x.message());
    REQUIRE_MESSAGE(y, y.message());
    CHECK(x->program.ops == y->program.ops);
    CHECK(x->notes == y->notes);
    return x->program;
  };
  const auto by_dtr = same(h_dtr{}, "h_dtr");
  const auto by_size = same(h_size{}, "size");
  const auto by_lru = same(h_lru{}, "lru");
  CHECK(by_dtr.ops != by_size.ops);  // the choice reaches the evictions
  CHECK(by_size.ops != by_lru.ops);
}
