// store_all on training graphs, and the GraphPolicy concept.
#include <doctest/doctest.h>

#include <remat/remat.hpp>

#include "support/random_chain.hpp"

using namespace remat;

static_assert(GraphPolicy<store_all>);
static_assert(ChainPolicy<store_all>);
static_assert(!GraphPolicy<rotor>);
static_assert(!ChainPolicy<int>);

TEST_CASE("store_all on a graph: the store-all program at the ideal time, optimal when it fits") {
  testing::chain_generator gen(23);
  for (int i = 0; i < 100; ++i) {
    const chain c = gen({.max_length = 12});
    INFO(testing::describe(c));
    const graph g = build_graph(c).value();
    const auto r = store_all{}.solve(g, unlimited_bytes);
    REQUIRE(r.ok());
    CHECK(r->ops == store_all_program(g));
    CHECK(r->predicted_time == doctest::Approx(g.ideal_time()));
    const auto rep = sim::simulate(g, *r);
    CHECK(rep.valid);
    CHECK(rep.peak == r->predicted_peak);
    // Its peak is its minimum: the error says so and names the budget that works.
    CHECK(store_all{}.solve(g, rep.peak).ok());
    const auto short_by_one = store_all{}.solve(g, rep.peak - 1);
    REQUIRE(!short_by_one.ok());
    CHECK(short_by_one.code() == status::budget_too_small);
    CHECK(short_by_one.err().minimum_budget == rep.peak);
    CHECK(short_by_one.message().find(std::to_string(rep.peak)) != std::string::npos);
  }
  const graph g = build_graph(gen({.max_length = 4})).value();
  CHECK(store_all{}.solve(g, -1).code() == status::invalid_problem);
}
