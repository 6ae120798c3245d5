#pragma once
// The checks every MILP backend passes; tests/milp/test_<backend>.cpp runs them for its backend
// (compiled only when that backend is found).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/milp/model.hpp>

#include "milp/instances.hpp"

namespace remat::milp::testing {

template <class B>
result<solution> run(const model& m, const options& o = {}) {
  static_assert(MilpBackend<B>);
  return B{}.solve(m, o);
}

/// The solution is what the model says: feasible values, objective = model objective at them,
/// bound on the right side of it.
inline void check_consistent(const model& m, const solution& s) {
  REQUIRE(s.values.size() == m.num_variables());
  CHECK(m.max_violation(s.values) <= 1e-6);
  CHECK(s.objective == doctest::Approx(m.objective_value(s.values)));
  if (m.sense() == objective_sense::minimize)
    CHECK(s.bound <= s.objective + 1e-9);
  else
    CHECK(s.bound >= s.objective - 1e-9);
  CHECK(s.seconds >= 0);
}

template <class B>
void knapsack_known_optimum() {
  model m;  // the textbook instance: items (60, 10), (100, 20), (120, 30), capacity 50
  const auto x = m.add_binaries(3, "x");
  m.add(10 * x[0] + 20 * x[1] + 30 * x[2] <= 50, "capacity");
  m.maximize(60 * x[0] + 100 * x[1] + 120 * x[2]);
  const auto s = run<B>(m);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(s->is_optimal());
  CHECK(s->objective == doctest::Approx(220));
  CHECK(s->bound == doctest::Approx(220));
  CHECK(s->value(x[0]) == 0);
  CHECK(s->value(x[1]) == 1);
  CHECK(s->value(x[2]) == 1);
  check_consistent(m, *s);
}

template <class B>
void lp_and_relaxation() {
  {  // max 3x + 2y, x + y <= 4, x + 3y <= 6, x <= 3: optimum 11 at (3, 1)
    model m;
    const auto x = m.add_continuous(0, 3, "x");
    const auto y = m.add_continuous(0, infinity, "y");
    m.add(x + y <= 4);
    m.add(x + 3 * y <= 6);
    m.maximize(3 * x + 2 * y);
    const auto s = run<B>(m);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->is_optimal());
    CHECK(s->objective == doctest::Approx(11));
    CHECK(s->value(x) == doctest::Approx(3));
    CHECK(s->value(y) == doctest::Approx(1));
    check_consistent(m, *s);
  }
  {  // max x + y, 2x + 2y <= 3: the MILP reaches 1, its relaxation 1.5; a constant shifts both
    model m;
    const auto x = m.add_integer(0, 10, "x");
    const auto y = m.add_integer(0, 10, "y");
    m.add(2 * x + 2 * y <= 3);
    m.maximize(x + y + 0.25);
    const auto s = run<B>(m);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->objective == doctest::Approx(1.25));
    const auto r = run<B>(m.relax());
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(r->is_optimal());
    CHECK(r->objective == doctest::Approx(1.75));
    check_consistent(m.relax(), *r);
  }
}

template <class B>
void infeasible_models() {
  {
    model m;
    const auto x = m.add_binary();
    const auto y = m.add_binary();
    m.add(x + y >= 3);
    m.minimize(x);
    const auto s = run<B>(m);
    CHECK(s.code() == status::infeasible);
    CHECK(s.message().find("infeasible") != std::string::npos);
  }
  {  // an infeasible LP
    model m;
    const auto x = m.add_continuous(0, 10);
    m.add(x >= 2);
    m.add(x <= 1);
    m.maximize(x);
    CHECK(run<B>(m).code() == status::infeasible);
  }
  {  // integrality makes it infeasible: 2x == 3 has no integer solution
    model m;
    const auto x = m.add_integer(0, 5);
    m.add(2 * x == 3);
    m.minimize(x);
    CHECK(run<B>(m).code() == status::infeasible);
  }
  {  // an empty constraint that cannot hold
    model m;
    const auto x = m.add_binary();
    m.add(x - x >= 1, "never");
    m.minimize(x);
    const auto s = run<B>(m);
    CHECK(s.code() == status::infeasible);
    CHECK(s.message().find("'never'") != std::string::npos);
  }
}

template <class B>
void unbounded_models() {
  {  // an LP
    model m;
    const auto x = m.add_continuous();
    const auto y = m.add_continuous();
    m.add(x - y <= 1);
    m.maximize(x + y);
    const auto s = run<B>(m);
    CHECK(s.code() == status::invalid_problem);
    CHECK(s.message().find("unbounded") != std::string::npos);
  }
  {  // a MILP
    model m;
    const auto x = m.add_integer(0, infinity);
    const auto y = m.add_binary();
    m.add(x + y >= 1);
    m.minimize(-x + y);
    const auto s = run<B>(m);
    CHECK(s.code() == status::invalid_problem);
    CHECK(s.message().find("unbounded") != std::string::npos);
  }
}

template <class B>
void equalities_and_general_integers() {
  {  // exactly two of four, cheapest pair: costs 4, 1, 3, 2 -> 1 + 2
    model m;
    const auto x = m.add_binaries(4);
    m.add(sum(x) == 2);
    m.minimize(4 * x[0] + x[1] + 3 * x[2] + 2 * x[3]);
    const auto s = run<B>(m);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->objective == doctest::Approx(3));
    CHECK(s->value(x[1]) == 1);
    CHECK(s->value(x[3]) == 1);
    check_consistent(m, *s);
  }
  {  // min 3x + 2y + z, 2x + 5y >= 17, x - y + z == 1, x, y in [0, 10] integers, z in [-4, 4]
    model m;
    const auto x = m.add_integer(0, 10, "x");
    const auto y = m.add_integer(0, 10, "y");
    const auto z = m.add_integer(-4, 4, "z");
    m.add(2 * x + 5 * y >= 17);
    m.add(x - y + z == 1);
    m.minimize(3 * x + 2 * y + z);
    double best = infinity;
    for (int a = 0; a <= 10; ++a)
      for (int b = 0; b <= 10; ++b)
        for (int c = -4; c <= 4; ++c)
          if (2 * a + 5 * b >= 17 && a - b + c == 1) best = std::min(best, 3.0 * a + 2 * b + c);
    const auto s = run<B>(m);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->is_optimal());
    CHECK(s->objective == doctest::Approx(best));
    check_consistent(m, *s);
    for (double v : s->values) CHECK(v == std::round(v));
  }
  {  // no variables: the constant is the optimum
    model m;
    m.minimize(linear_expr(4.5));
    const auto s = run<B>(m);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->objective == 4.5);
  }
}

template <class B>
void malformed_models_and_options() {
  model m;
  const auto x = m.add_binary("x");
  m.add(x <= 1);
  m.minimize(x);
  model bad = m;
  bad.set_type(x, var_type::integer);
  bad.set_bounds(x, 2, 1);
  CHECK(run<B>(bad).code() == status::invalid_problem);
  model nan = m;
  nan.add(std::nan("") * x >= 0);
  CHECK(run<B>(nan).code() == status::invalid_problem);
  model foreign = m;
  foreign.add(variable{7} <= 1);
  CHECK(run<B>(foreign).code() == status::invalid_problem);
  CHECK(run<B>(m, {.time_limit = -1}).code() == status::invalid_problem);
  CHECK(run<B>(m, {.warm_start = std::vector<double>{1, 1}}).code() == status::invalid_problem);
}

/// The enumeration oracle: tiny binary programs, every assignment tried.
template <class B>
void exhaustive_tiny_binary(int instances) {
  for (int k = 0; k < instances; ++k) {
    const int n = 3 + k % 8;  // 3..10 variables
    const auto seed = static_cast<std::uint32_t>(1000 + k);
    const model m = tiny_binary(n, seed);
    const auto truth = brute_force_binary(m);
    const auto s = run<B>(m);
    CAPTURE(k);
    CAPTURE(n);
    if (!truth) {
      CHECK(s.code() == status::infeasible);
      continue;
    }
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->is_optimal());
    CHECK(s->objective == doctest::Approx(*truth));
    check_consistent(m, *s);
  }
}

/// A hard instance under a time limit: back within the limit plus a small slack, with a best
/// solution (feasible) or none (time_limit), and progress reported during the search with the
/// bound never above the incumbent (a minimisation).
template <class B>
void time_limit_and_progress() {
  const model m = market_split(4, 34, 7);
  std::mutex mu;
  std::vector<progress_report> seen;
  const double limit = 1.0;
  options o;
  o.time_limit = limit;
  o.progress_interval = 0.1;
  o.progress = [&](const progress_report& r) {
    std::lock_guard lock(mu);
    seen.push_back(r);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const auto s = run<B>(m, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(took <= limit + 0.5);
  if (s.ok()) {
    CHECK(s->status == solve_status::feasible);  // this instance is not solved in a second
    check_consistent(m, *s);
    CHECK(s->bound >= 0);
    CHECK(s->seconds <= limit + 0.5);
  } else {
    CHECK(s.code() == status::time_limit);
  }
  REQUIRE(seen.size() >= 2);
  int during = 0;
  double last_incumbent = infinity;
  for (const auto& r : seen) {
    CHECK(r.bound <= r.incumbent);
    CHECK(r.incumbent <=
          last_incumbent + 1e-9 * std::max(1.0, std::abs(last_incumbent)));  // only improve
    last_incumbent = r.incumbent;
    if (r.elapsed < limit) ++during;
  }
  CHECK(during >= 1);
  if (s.ok()) {
    CHECK(seen.back().incumbent == doctest::Approx(s->objective));
  }
}

/// A relative gap: the solve is reported optimal once its bound is within the gap, and the
/// answer is within the gap of the exact optimum (correlated knapsacks, whose bound lags).
template <class B>
void relative_gap_is_kept() {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    const model m = knapsack(40, seed, true);
    const auto exact = run<B>(m, {.time_limit = 60});
    const auto within = run<B>(m, {.time_limit = 60, .relative_gap = 0.02});
    REQUIRE_MESSAGE(exact.ok(), exact.message());
    REQUIRE_MESSAGE(within.ok(), within.message());
    REQUIRE(exact->is_optimal());
    CHECK(within->is_optimal());
    check_consistent(m, *within);
    // Maximising: the objective is at most the optimum and at least 98 % of it.
    CHECK(within->objective <= exact->objective + 1e-6);
    CHECK(within->objective >= exact->objective * (1 - 0.02) - 1e-6);
    if (std::isfinite(within->bound))
      CHECK(within->bound >= exact->objective - 1e-6 * std::max(1.0, exact->objective));
  }
}

/// A node limit stops a hard search at the same point on every run: two solves give the same
/// answer (the same values, or both no solution), and a stop without a solution says to raise
/// node_limit.
template <class B>
void node_limit_is_deterministic() {
  const model m = market_split(4, 30, 5);
  options o;
  o.node_limit = 200;
  o.time_limit = 60;  // a guard only: 200 nodes take well under a second
  const auto t0 = std::chrono::steady_clock::now();
  const auto a = run<B>(m, o);
  const auto b = run<B>(m, o);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 30);
  REQUIRE(a.ok() == b.ok());
  if (a.ok()) {
    CHECK(a->status == solve_status::feasible);  // 200 nodes do not prove this instance
    CHECK(a->node_limit_reached);
    check_consistent(m, *a);
    CHECK(a->values == b->values);
    CHECK(a->message.find("node limit") != std::string::npos);
  } else {
    CHECK(a.code() == status::time_limit);
    CHECK(a.err().message.find("node_limit") != std::string::npos);
    CHECK(a.err().message == b.err().message);
  }
  o.node_limit = -1;
  const auto bad = run<B>(m, o);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == status::invalid_problem);
  CHECK(bad.err().message.find("node_limit") != std::string::npos);
}

/// An exception thrown by the progress callback stops the search and comes out of solve().
template <class B>
void throwing_progress_callback() {
  const model m = market_split(4, 34, 11);
  options o;
  o.time_limit = 20;
  o.progress_interval = 0.05;
  o.progress = [](const progress_report& r) {
    if (r.elapsed > 0.1) throw std::runtime_error("user stop");
  };
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS((void)run<B>(m, o), "user stop", std::runtime_error);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 2);
}

/// A warm start never makes the answer worse: with the optimum as the start, the optimum comes
/// back; with a feasible start under a short limit, the result is at least as good.
template <class B>
void warm_start_is_used() {
  {
    const model m = knapsack(25, 3);
    const auto exact = run<B>(m);
    REQUIRE_MESSAGE(exact.ok(), exact.message());
    const auto s = run<B>(m, {.warm_start = exact->values});
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->is_optimal());
    CHECK(s->objective == doctest::Approx(exact->objective));
  }
  {
    const model m = market_split(4, 34, 7);
    std::vector<double> start(m.num_variables(), 0.0);  // all x = 0, slacks = the right-hand sides
    for (const auto& c : m.constraints())
      for (const term& t : c.lhs.terms)
        if (m.variables()[t.index].name.rfind("sp", 0) == 0) start[t.index] = c.rhs;
    REQUIRE(m.max_violation(start) <= 1e-9);
    const double start_obj = m.objective_value(start);
    std::vector<progress_report> seen;
    const auto s = run<B>(m, {.time_limit = 0.5,
                              .progress = [&](const progress_report& r) { seen.push_back(r); },
                              .progress_interval = 0.05,
                              .warm_start = start});
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->objective <= start_obj + 1e-9);
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.back().has_incumbent());
    for (const auto& r : seen)
      if (r.has_incumbent()) CHECK(r.incumbent <= start_obj + 1e-9);
  }
  {  // a solution that branch and bound would take long to find: with it, optimal at once
    const auto p = planted_split(4, 40, 5);
    const auto s = run<B>(p.m, {.time_limit = 5, .warm_start = p.solution});
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->is_optimal());
    CHECK(s->objective == 0);
    CHECK(p.m.max_violation(s->values) == 0);
    CHECK(s->seconds < 1.0);
  }
  {  // an infeasible warm start is ignored, not an error
    const model m = knapsack(12, 5);
    const auto s = run<B>(m, {.warm_start = std::vector<double>(m.num_variables(), 1.0)});
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->is_optimal());
  }
}

}  // namespace remat::milp::testing
