// The MILP model builder (include/remat/milp/model.hpp): expressions, constraints, relaxation,
// validation, and the backend concept. No solver needed.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/milp/detail/backend.hpp>
#include <remat/milp/model.hpp>

using namespace remat::milp;

namespace {

struct fake_backend {
  static constexpr std::string_view name = "fake";
  static bool available() { return true; }
  [[nodiscard]] remat::result<solution> solve(const model&, const options&) const {
    solution s;
    s.status = solve_status::optimal;
    return s;
  }
};
struct no_available {
  static constexpr std::string_view name = "x";
  [[nodiscard]] remat::result<solution> solve(const model&, const options&) const {
    return solution{};
  }
};
struct wrong_return {
  static constexpr std::string_view name = "x";
  static bool available() { return true; }
  [[nodiscard]] solution solve(const model&, const options&) const { return {}; }
};

}  // namespace

TEST_CASE("milp::model: expressions read as written and merge repeated variables") {
  model m;
  const auto x = m.add_binary("x");
  const auto y = m.add_integer(0, 5, "y");
  const auto z = m.add_continuous(-1, 2, "z");
  CHECK(m.num_variables() == 3);
  CHECK(m.num_integers() == 2);
  CHECK(m.info(y).type == var_type::integer);
  CHECK(m.info(z).lower == -1);

  linear_expr e = x + 2 * y - z + 3;
  CHECK(e.terms.size() == 3);
  CHECK(e.constant == 3);
  const std::vector<double> at{1, 2, 0.5};
  CHECK(e.value(at) == doctest::Approx(1 + 4 - 0.5 + 3));
  CHECK((3 * (x - y) / 2).value(at) == doctest::Approx(-1.5));
  CHECK((-x).value(at) == -1);

  const auto c = m.add(x + 2 * y - z + x <= 3 + y, "cap");
  const constraint& k = m.constraints()[c];
  CHECK(k.name == "cap");
  CHECK(k.rel == relation::less_equal);
  CHECK(k.rhs == 3);
  REQUIRE(k.lhs.terms.size() == 3);  // 2x + y - z, sorted by variable
  CHECK(k.lhs.terms[0].index == x.index);
  CHECK(k.lhs.terms[0].coef == 2);
  CHECK(k.lhs.terms[1].coef == 1);
  CHECK(k.lhs.terms[2].coef == -1);
  CHECK(k.violation(at) == doctest::Approx(2 + 2 - 0.5 - 3));

  m.add(x - x + y >= 1);  // x cancels out
  CHECK(m.constraints()[1].lhs.terms.size() == 1);
  CHECK(m.constraints()[1].rel == relation::greater_equal);
  m.add(4 == x + y);
  CHECK(m.constraints()[2].rel == relation::equal);
  CHECK(m.constraints()[2].rhs == -4);  // the comparison keeps the sides: 4 - x - y == 0
  CHECK(m.constraints()[2].lhs.terms[0].coef == -1);
}

TEST_CASE("milp::model: sums over ranges, objective and sense") {
  model m;
  const auto xs = m.add_binaries(4, "b");
  CHECK(m.info(xs[2]).name == "b2");
  const std::vector<double> w{1, 2, 3, 4};
  m.maximize(
      sum(xs) +
      sum(std::vector<int>{0, 1, 2, 3},
          [&](int i) { return w[static_cast<std::size_t>(i)] * xs[static_cast<std::size_t>(i)]; }) -
      1);
  CHECK(m.sense() == objective_sense::maximize);
  CHECK(m.objective().terms.size() == 4);
  CHECK(m.objective().constant == -1);
  CHECK(m.objective_value(std::vector<double>{1, 1, 0, 0}) == doctest::Approx(2 + 3 - 1));
  m.minimize(xs[0]);
  CHECK(m.sense() == objective_sense::minimize);
}

TEST_CASE("milp::model: relax drops integrality and keeps bounds") {
  model m;
  const auto b = m.add_binary();
  const auto i = m.add_integer(-2, 7);
  m.add(b + i <= 3);
  const model r = m.relax();
  CHECK(r.num_integers() == 0);
  CHECK(r.info(b).upper == 1);
  CHECK(r.info(i).lower == -2);
  CHECK(r.num_constraints() == 1);
  CHECK(m.num_integers() == 2);  // the original is untouched
}

TEST_CASE("milp::model: max_violation checks bounds, integrality and constraints") {
  model m;
  const auto b = m.add_binary();
  const auto c = m.add_continuous(0, 10);
  m.add(b + c <= 4);
  CHECK(m.max_violation(std::vector<double>{1, 3}) == 0);
  CHECK(m.max_violation(std::vector<double>{0.5, 0}) == doctest::Approx(0.5));
  CHECK(m.max_violation(std::vector<double>{1, 5}) == doctest::Approx(2));
  CHECK(m.max_violation(std::vector<double>{1, -1}) == doctest::Approx(1));
  CHECK(m.max_violation(std::vector<double>{1}) == infinity);
}

TEST_CASE("milp::model: validation names what is malformed") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto message_of = [](const model& m) {
    const auto v = m.validate();
    REQUIRE_FALSE(v.ok());
    CHECK(v.code() == remat::status::invalid_problem);
    return v.message();
  };
  {
    model m;
    m.add_continuous(0, 1, "fine");
    CHECK(m.validate().ok());
  }
  {
    model m;
    m.add_continuous(3, 1, "w");
    CHECK(message_of(m).find("'w' has lower bound 3 above its upper bound 1") != std::string::npos);
  }
  {
    model m;
    m.add_integer(nan, 1);
    CHECK(message_of(m).find("#0 has a NaN bound") != std::string::npos);
  }
  {
    model m;
    m.add_continuous(infinity, infinity, "v");
    CHECK(message_of(m).find("'v'") != std::string::npos);
  }
  {
    model m;
    const auto x = m.add_binary("x");
    m.set_bounds(x, -1, 1);
    CHECK(message_of(m).find("binary") != std::string::npos);
  }
  {
    model m;
    const auto x = m.add_binary("x");
    m.add(nan * x <= 1, "c");
    CHECK(message_of(m).find("constraint 'c' has coefficient nan on variable 'x'") !=
          std::string::npos);
  }
  {
    model m;
    const auto x = m.add_binary("x");
    m.add(x <= infinity, "open");
    CHECK(message_of(m).find("'open' has right-hand side inf") != std::string::npos);
  }
  {
    model m;
    const auto x = m.add_binary("x");
    m.minimize(x + infinity * x);
    CHECK(message_of(m).find("the objective has coefficient inf") != std::string::npos);
  }
  {
    model m;
    m.add_binary();
    model other;
    other.add_binary();
    const auto foreign = other.add_binary();
    m.add(foreign <= 1, "cross");
    CHECK(message_of(m).find("constraint 'cross' uses variable #1, which is not in this model") !=
          std::string::npos);
  }
  {
    model m;
    m.add_binary();
    m.minimize(variable{});  // default-constructed handle
    CHECK(message_of(m).find("<none>") != std::string::npos);
  }
  {
    model m;
    CHECK_THROWS_AS(m.set_bounds(variable{3}, 0, 1), std::out_of_range);
    CHECK_THROWS_AS((void)m.info(variable{}), std::out_of_range);
  }
}

TEST_CASE("milp: options are checked before any solver runs") {
  model m;
  const auto x = m.add_binary();
  m.minimize(x);
  auto code_of = [&](const options& o) { return detail::check_request(m, o).code(); };
  CHECK(code_of({}) == remat::status::ok);
  CHECK(code_of({.time_limit = -1}) == remat::status::invalid_problem);
  CHECK(code_of({.time_limit = 0}) == remat::status::invalid_problem);
  CHECK(code_of({.time_limit = std::nan("")}) == remat::status::invalid_problem);
  CHECK(code_of({.relative_gap = -0.1}) == remat::status::invalid_problem);
  CHECK(code_of({.threads = -2}) == remat::status::invalid_problem);
  CHECK(code_of({.warm_start = std::vector<double>{1, 0}}) == remat::status::invalid_problem);
  CHECK(code_of({.warm_start = std::vector<double>{std::nan("")}}) ==
        remat::status::invalid_problem);
  CHECK(code_of({.warm_start = std::vector<double>{1}}) == remat::status::ok);
}

TEST_CASE("milp: to_result maps outcomes onto statuses") {
  solution s;
  s.status = solve_status::optimal;
  CHECK(to_result(s, "x").ok());
  s.status = solve_status::feasible;
  CHECK(to_result(s, "x").ok());
  s.status = solve_status::infeasible;
  CHECK(to_result(s, "x").code() == remat::status::infeasible);
  s.status = solve_status::unbounded;
  CHECK(to_result(s, "x").code() == remat::status::invalid_problem);
  s.status = solve_status::time_limit;
  s.bound = 12.5;
  const auto r = to_result(s, "x");
  CHECK(r.code() == remat::status::time_limit);
  CHECK(r.message().find("best bound 12.5") != std::string::npos);
  s.status = solve_status::error;
  CHECK(to_result(s, "x").code() == remat::status::solver_error);
}

TEST_CASE("milp: MilpBackend states what a backend offers") {
  static_assert(MilpBackend<fake_backend>);
  static_assert(!MilpBackend<no_available>);
  static_assert(!MilpBackend<wrong_return>);
  static_assert(!MilpBackend<int>);
  model m;
  CHECK(solve<fake_backend>(m).ok());
}

TEST_CASE("milp: the progress sink throttles, keeps bound <= incumbent, and keeps exceptions") {
  model m;
  m.add_binary();
  int calls = 0;
  std::vector<progress_report> seen;
  options o;
  o.progress_interval = 10;  // only new incumbents and the final call
  o.progress = [&](const progress_report& r) {
    ++calls;
    seen.push_back(r);
  };
  detail::stopwatch clock;
  {
    detail::progress_sink sink(o, -1.0, clock);  // a maximisation: the solver minimises -f
    sink.report(infinity, -20);                  // first call (nothing reported yet)
    sink.report(infinity, -19);                  // throttled
    sink.finish(-5, -3);                         // bound above incumbent in the solver's sense
  }
  REQUIRE(calls == 2);
  CHECK_FALSE(seen[0].has_incumbent());
  CHECK(seen[0].incumbent == -infinity);
  CHECK(seen[0].bound == 20);
  CHECK(seen[1].incumbent == 5);
  CHECK(seen[1].bound == 5);  // clamped: never on the wrong side
  o.progress = [](const progress_report&) { throw std::runtime_error("stop it"); };
  detail::progress_sink sink(o, 1.0, clock);
  sink.report(1, 0);
  CHECK(sink.stop());
  CHECK_THROWS_WITH_AS(sink.rethrow(), "stop it", std::runtime_error);
}

TEST_CASE("milp: flatten makes single-variable rows bounds and leaves out implied rows") {
  model m;
  const auto x = m.add_integer(0, 10, "x");
  const auto y = m.add_continuous(0, 8, "y");
  const auto z = m.add_binary("z");
  m.add(2 * x <= 7);          // x <= 3 (rounded down: x is integral)
  m.add(-1 * x <= -1.5);      // x >= 2 (rounded up)
  m.add(3 * y == 6);          // y == 2
  m.add(x + y + z <= 100);    // implied by the bounds: at most 3 + 2 + 1
  m.add(x + y >= 1);          // implied: at least 2 + 2
  m.add(x - 2 * z >= 1);      // kept: 2 - 2 < 1 is possible
  m.add(x + x - 2 * x <= 0);  // empty once merged: 0 <= 0 holds
  m.minimize(x + y + z);
  const auto f = detail::flatten(m);
  CHECK(f.lower[x.index] == 2);
  CHECK(f.upper[x.index] == 3);
  CHECK(f.lower[y.index] == 2);
  CHECK(f.upper[y.index] == 2);
  CHECK(f.lower[z.index] == 0);
  CHECK(f.upper[z.index] == 1);
  REQUIRE(f.rows() == 1);
  CHECK(f.rhs[0] == 1);
  CHECK(f.dropped_rows == 6);
  CHECK(f.impossible_row == variable::none);
  CHECK(f.violated_empty_row == variable::none);
  // The model itself keeps its bounds and rows.
  CHECK(m.info(x).upper == 10);
  CHECK(m.num_constraints() == 7);

  SUBCASE("a row the bounds cannot meet is found") {
    m.add(x + y + z >= 7, "too much");  // at most 3 + 2 + 1
    const auto g = detail::flatten(m);
    CHECK(g.impossible_row == 7);
  }
  SUBCASE("single-variable rows that contradict each other") {
    m.add(x >= 4);  // with x <= 3
    const auto g = detail::flatten(m);
    CHECK(g.impossible_row == 7);
  }
  SUBCASE("an integer whose single-variable rows leave no integer") {
    model n;
    const auto w = n.add_integer(0, 5);
    n.add(4 * w >= 5);  // w >= 1.25
    n.add(4 * w <= 7);  // w <= 1.75
    n.minimize(w);
    CHECK(detail::flatten(n).impossible_row == 1);
  }
}
