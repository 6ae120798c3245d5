// checkmate's minimum budget on graphs: the lower bound is a proven bound
// (at most the exhaustive minimum in any order) and at least the old per-node one; the heuristic
// plan (least_memory) is valid, at or above the minimum, and the MILP plans at its peak;
// find_minimum returns the exhaustive minimum of the stage model; budgets below the minimum say
// what the minimum is, or where it lies, never the solver's "infeasible"; relax falls back to
// the exact solve where no rounding fits; fraction_of_store_all.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>

#include "support/graph_brute_force.hpp"
#include "support/random_chain.hpp"
#include "support/random_dag.hpp"
#include "support/side_branch_graph.hpp"

#if defined(REMAT_HAS_LPSOLVE) || defined(REMAT_HAS_CBC)
#include <remat/policy/checkmate.hpp>
#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
using minimum_backend = remat::milp::cbc;
#else
#include <remat/milp/lpsolve.hpp>
using minimum_backend = remat::milp::lpsolve;
#endif
#endif

using namespace remat;

namespace {

forward_op make_op(std::string name, std::vector<std::string> in, double t, bytes out, bytes ph,
                   std::vector<std::string> reads, bytes of = 0, bytes ob = 0) {
  forward_op o;
  o.name = std::move(name);
  o.inputs = std::move(in);
  o.forward_time = t;
  o.backward_time = 2 * t;
  o.output_bytes = out;
  o.phantom_bytes = ph;
  o.backward_reads = std::move(reads);
  o.forward_overhead_bytes = of;
  o.backward_overhead_bytes = ob;
  return o;
}

/// A side-branch DAG, small: a stem (with two blocks or more), `blocks` blocks x -> a -> b, x -> s
/// (the side branch), add(x, b, s) (no phantom, reads nothing for its backward), a loss op; sizes
/// drawn from rng.
graph side_branch_net(std::mt19937& rng, int blocks, int id) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  forward_dag f{"side" + std::to_string(id), pick(1, 2), {}};
  std::string x = "input";
  if (blocks > 1) {
    f.ops.push_back(make_op("stem", {"input"}, pick(1, 3), pick(1, 4), pick(0, 2), {"input"}));
    x = "stem";
  }
  for (int b = 0; b < blocks; ++b) {
    const std::string s = std::to_string(b);
    f.ops.push_back(make_op("a" + s, {x}, pick(1, 3), pick(1, 4), pick(0, 2), {x}, pick(0, 1)));
    f.ops.push_back(
        make_op("b" + s, {"a" + s}, pick(1, 3), pick(1, 4), pick(0, 2), {"a" + s, "output"}));
    f.ops.push_back(make_op("s" + s, {x}, pick(1, 3), pick(1, 4), pick(0, 2), {x}, 0, pick(0, 1)));
    f.ops.push_back(make_op("add" + s, {x, "b" + s, "s" + s}, 1, pick(1, 4), 0, {}));
    x = "add" + s;
  }
  f.ops.push_back(make_op("loss", {x}, 1, 1, 0, {x}));
  auto g = build_graph(f);
  REQUIRE(g.ok());
  return g.value();
}

/// test_checkmate_minimum's random DAGs: ops read up to three earlier values, backwards take twice
/// the forward's time.
[[maybe_unused]] graph random_dag(std::mt19937& rng, int ops, int id) {
  return remat::test::random_dag(rng, ops, id,
                                 {.max_inputs = 3,
                                  .draw_backward_time = false,
                                  .fast_ratios = {0.5, 1.0, 1.5},
                                  .name = "dag"});
}

/// The old lower bound (docs/checkmate.md): per compute node, the graph inputs, its own inputs
/// and outputs, its overhead (a forward's cheaper variant).
[[maybe_unused]] bytes old_lower_bound(const graph& g) {
  bytes best = g.initial_bytes();
  for (int c = 0; c < g.compute_count(); ++c) {
    auto need = [&](bool fast) {
      std::vector<char> in(static_cast<std::size_t>(g.data_count()), 0);
      for (int d = 0; d < g.data_count(); ++d)
        if (g.is_source(d)) in[static_cast<std::size_t>(d)] = 1;
      for (int d : g.inputs(c)) in[static_cast<std::size_t>(d)] = 1;
      for (int d : g.outputs(c))
        if (!fast || g.data(d).kind != data_kind::phantom) in[static_cast<std::size_t>(d)] = 1;
      bytes m = fast ? g.compute(c).fast_overhead : g.compute(c).overhead;
      for (int d = 0; d < g.data_count(); ++d)
        if (in[static_cast<std::size_t>(d)]) m += g.data(d).size;
      return m;
    };
    bytes m = need(false);
    if (g.compute(c).kind == compute_kind::forward) m = std::min(m, need(true));
    best = std::max(best, m);
  }
  return best;
}

/// The smallest budget from `from` up with a schedule, by exhaustive search (any order, or
/// Checkmate's stage model).
[[maybe_unused]] bytes exhaustive_minimum(const graph& g, bytes from, bool in_order) {
  for (bytes b = std::max<bytes>(0, from);; ++b)
    if (std::isfinite(test::graph_brute_force(g, b, true, in_order))) return b;
}

}  // namespace

TEST_CASE("fraction_of_store_all: a budget as a fraction of store-all's peak") {
  std::mt19937 rng(14);
  const graph g = side_branch_net(rng, 2, 0);
  const bytes peak = sim::simulate(g, {store_all_program(g), g.ideal_time(), 0}).peak;
  CHECK(peak_of_store_all(g) == peak);
  CHECK(fraction_of_store_all(g, 1.0) == peak);
  CHECK(fraction_of_store_all(g, 0.4) == static_cast<bytes>(static_cast<long double>(peak) * 0.4));
  CHECK(fraction_of_store_all(g, 0.0) == 0);
  CHECK(fraction_of_store_all(g, -0.1) == -1);
  CHECK(fraction_of_store_all(g, std::nan("")) == -1);
  CHECK(fraction_of_store_all(g, 1e300) == std::numeric_limits<bytes>::max());
  CHECK(store_all{}.solve(g, fraction_of_store_all(g, 1.0)).ok());
  CHECK(store_all{}.solve(g, fraction_of_store_all(g, 0.99)).code() == status::budget_too_small);
  CHECK(store_all{}.solve(g, fraction_of_store_all(g, -1)).code() == status::invalid_problem);
  // A chain: store_all's own plan peaks there.
  testing::chain_generator gen(7);
  const chain c = gen({.min_length = 5, .max_length = 5});
  const auto plan = store_all{}.solve(c, std::numeric_limits<bytes>::max());
  REQUIRE(plan.ok());
  CHECK(peak_of_store_all(c) == plan.value().predicted_peak);
  CHECK(fraction_of_store_all(c, 0.5) == peak_of_store_all(c) / 2);
}

#if defined(REMAT_HAS_LPSOLVE) || defined(REMAT_HAS_CBC)

using cm_t = checkmate<minimum_backend>;

TEST_CASE("checkmate lower bound: at most the exhaustive minimum, at least the old bound") {
  // Random DAGs of 3-4 ops with up to 3 inputs per op, and one-block side-branch nets; the
  // minimum in any order (the bound claims every schedule) by exhaustive search.
  std::mt19937 rng(20261124);
  int tighter = 0;
  for (int id = 0; id < 12; ++id) {
    const graph g = id % 6 == 5 ? side_branch_net(rng, 1, id) : random_dag(rng, 3 + id % 2, id);
    CAPTURE(g.name);
    const bytes lb = cm_t::lower_bound(g), old = old_lower_bound(g);
    CHECK(lb >= old);
    CHECK_FALSE(std::isfinite(test::graph_brute_force(g, lb - 1, true, false)));
    tighter += lb > old ? 1 : 0;
  }
  CHECK(tighter > 0);
  // The residual block's gradient: while the branch's backwards run, the gradient of the block
  // input holds the add's contribution and waits for the branch's.
  std::mt19937 r2(3);
  const graph g = side_branch_net(r2, 1, 99);
  CHECK(cm_t::lower_bound(g) > old_lower_bound(g));
  CHECK(cm_t::lower_bound(g) <= exhaustive_minimum(g, old_lower_bound(g), false));
}

TEST_CASE("checkmate least_memory: a valid plan at or above the minimum, where the MILP plans") {
  std::mt19937 rng(9);
  for (int id = 0; id < 6; ++id) {
    const graph g = id % 3 == 2 ? side_branch_net(rng, 1, id) : random_dag(rng, 3 + id % 2, id);
    CAPTURE(g.name);
    const cm_t cm{};
    const auto plan = cm.least_memory(g);
    REQUIRE(plan.ok());
    const auto rep = sim::simulate(g, plan.value());
    CHECK_MESSAGE(rep.valid, (rep.first_violation ? rep.first_violation->message : ""));
    CHECK(rep.peak == plan.value().predicted_peak);
    CHECK(rep.makespan == doctest::Approx(plan.value().predicted_time));
    CHECK(rep.peak <= peak_of_store_all(g));
    const bytes minimum = exhaustive_minimum(g, cm_t::lower_bound(g), true);
    CHECK(rep.peak >= minimum);
    CHECK(cm.solve(g, rep.peak).ok());
  }
  graph bad = side_branch_net(rng, 1, 0);
  bad.data(0).is_protected = false;
  CHECK(cm_t{}.least_memory(bad).code() == status::invalid_problem);
}

TEST_CASE("checkmate find_minimum: the exhaustive minimum, and clear answers below it") {
  std::mt19937 rng(31);
  for (int id = 0; id < 6; ++id) {
    const graph g = id % 3 == 2 ? side_branch_net(rng, 1, id) : random_dag(rng, 3 + id % 2, id);
    CAPTURE(g.name);
    const bytes minimum = exhaustive_minimum(g, cm_t::lower_bound(g), true);
    cm_t cm{};
    cm.find_minimum = true;
    const auto r = cm.solve(g, 0);
    REQUIRE(r.code() == status::budget_too_small);
    CHECK(r.err().minimum_budget == minimum);
    CHECK(cm.solve(g, minimum).ok());
    // Without find_minimum: the minimum when the bounds meet, else where it lies and the knob;
    // never the solver's words.
    const auto plain = cm_t{}.solve(g, minimum - 1);
    CHECK(plain.message().find("MILP") == std::string::npos);
    CHECK(plain.message().find("CBC") == std::string::npos);
    if (plain.code() == status::budget_too_small) {
      CHECK(plain.err().minimum_budget == minimum);
    } else {
      REQUIRE(plain.code() == status::infeasible);
      CHECK(plain.message().find("between") != std::string::npos);
      CHECK(plain.message().find("set find_minimum = true") != std::string::npos);
    }
  }
}

#if defined(REMAT_HAS_CBC)
TEST_CASE("checkmate relax: where no rounding fits, the exact solve, and a note that says so") {
  // Two blocks of the side-branch shape (23 compute nodes): at the minimum (65536 bytes; the
  // patterns' least peak is 69632) neither the roundings of CBC's LP solution nor the patterns
  // fit (lp_solve's LP solution is another one, and one of its roundings fits).
  const graph g = remat::test::side_branch_graph(2, 3);
  checkmate<milp::cbc> cm{};
  cm.time_limit = 60;
  cm.find_minimum = true;
  const auto m = cm.solve(g, 0);
  REQUIRE(m.code() == status::budget_too_small);
  const bytes minimum = *m.err().minimum_budget;
  CHECK(minimum == 65536);
  CHECK(cm.least_memory(g).value().predicted_peak > minimum);
  cm.find_minimum = false;
  cm.relax = true;
  const auto r = cm.solve_detailed(g, minimum);
  REQUIRE_MESSAGE(r.ok(), r.message());
  REQUIRE(r.value().notes.size() == 1);
  CHECK(r.value().notes.front().find("solved exactly instead") != std::string::npos);
  const auto rep = sim::simulate(g, r.value().program, {.budget = minimum});
  CHECK(rep.valid);
  CHECK(rep.peak <= minimum);
  // Where a rounding fits, no note.
  const auto easy = cm.solve_detailed(g, peak_of_store_all(g));
  REQUIRE(easy.ok());
  CHECK(easy.value().notes.empty());
}
#endif

TEST_CASE("checkmate: out of time before any schedule, the fastest cheap pattern that fits") {
  // Without the automatic warm start, a limit that stops the MILP before it starts: at
  // store-all's peak the store-all pattern fits and comes back, not proven optimal.
  std::mt19937 rng(4);
  const graph g = side_branch_net(rng, 2, 0);
  cm_t cm{};
  cm.auto_warm_start = false;
  cm.time_limit = 1e-9;
  const auto r = cm.solve_detailed(g, peak_of_store_all(g));
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK_FALSE(r.value().optimal);
  CHECK(r.value().program.predicted_time == doctest::Approx(g.ideal_time()));
  // Below every pattern's peak there is nothing to fall back on: time_limit.
  const bytes low = cm.least_memory(g).value().predicted_peak - 1;
  const auto t = cm.solve(g, low);
  CHECK_FALSE(t.ok());
  CHECK_MESSAGE((t.code() == status::time_limit || t.code() == status::infeasible ||
                 t.code() == status::budget_too_small),
                t.message());
}

#endif
