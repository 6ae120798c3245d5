// Bad input, for every chain policy: malformed chains and budgets come back as a status with a
// message that names what is wrong (never a crash, a throw, a hang or a huge allocation).

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/rockmate.hpp>
#include <remat/remat.hpp>

using namespace remat;

namespace {

/// Four stages (the last is the loss), all sizes and times nonzero.
chain good_chain() {
  chain c{"good", 100, {}};
  c.stages.push_back({"conv1", 1.0, 2.0, 300, 400, 10, 20});
  c.stages.push_back({"conv2", 1.5, 2.5, 200, 350, 0, 30});
  c.stages.push_back({"fc", 0.5, 1.0, 50, 60, 5, 0});
  c.stages.push_back({"loss", 0.1, 0.1, 4, 8, 0, 0});
  return c;
}

/// A homogeneous chain of n stages.
chain long_chain(int n, bytes size = 1000) {
  chain c{"long", size, {}};
  for (int l = 1; l <= n; ++l)
    c.stages.push_back({"s" + std::to_string(l), 1.0, 2.0, size, 2 * size, size / 10, size / 10});
  return c;
}

/// "Promptly": these calls take milliseconds; without the guard they would run for hours or
/// allocate terabytes. The bound is loose so that a loaded CI machine does not fail it.
constexpr double prompt = 5.0;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Expects invalid_problem with a message containing every one of `parts`.
void expect_invalid(const result<schedule>& r, const std::vector<std::string>& parts) {
  REQUIRE(r.code() == status::invalid_problem);
  for (const auto& p : parts) CHECK_MESSAGE(contains(r.message(), p), r.message(), " lacks ", p);
}

}  // namespace

TEST_CASE_TEMPLATE("bad input: malformed chains are invalid_problem naming the stage and field", P,
                   store_all, periodic, revolve, rotor, rotor_floating) {
  const P policy{};
  const bytes budget = bytes{1} << 20;
  REQUIRE(policy.solve(good_chain(), budget).ok());

  SUBCASE("empty chain") {
    chain c{"empty", 10, {}};
    expect_invalid(policy.solve(c, budget), {"no stage", "empty"});
  }
  SUBCASE("negative input size") {
    chain c = good_chain();
    c.input_bytes = -1;
    expect_invalid(policy.solve(c, budget), {"input_bytes", "negative"});
  }
  SUBCASE("negative sizes") {
    using field = bytes stage::*;
    const std::pair<field, const char*> fields[] = {
        {&stage::output_bytes, "output_bytes"},
        {&stage::saved_bytes, "saved_bytes"},
        {&stage::forward_overhead_bytes, "forward_overhead_bytes"},
        {&stage::backward_overhead_bytes, "backward_overhead_bytes"}};
    // Not `[f, name]`: INFO captures name in a lambda, and Clang 14 cannot capture a structured
    // binding (C++20's P1091, Clang 16).
    for (const auto& field_name : fields) {
      const auto f = field_name.first;
      const char* const name = field_name.second;
      INFO(name);
      chain c = good_chain();
      c.stages[1].*f = -5;
      expect_invalid(policy.solve(c, budget), {"stage 2", "conv2", name, "negative"});
    }
  }
  SUBCASE("sizes too large to sum safely") {
    chain c = good_chain();
    c.stages[2].saved_bytes = bytes{1} << 60;
    expect_invalid(policy.solve(c, budget), {"stage 3", "saved_bytes"});
  }
  SUBCASE("NaN, infinite and negative times") {
    using field = seconds stage::*;
    const std::pair<field, const char*> fields[] = {{&stage::forward_time, "forward_time"},
                                                    {&stage::backward_time, "backward_time"}};
    const double values[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(), -1.0, -0.0 - 1e-300};
    for (const auto& field_name : fields)  // not `[f, name]`: see above
      for (const double v : values) {
        const auto f = field_name.first;
        const char* const name = field_name.second;
        INFO(name, " = ", v);
        chain c = good_chain();
        c.stages[3].*f = v;
        expect_invalid(policy.solve(c, budget), {"stage 4", "loss", name});
      }
  }
  SUBCASE("saved_bytes smaller than output_bytes") {
    chain c = good_chain();
    c.stages[0].saved_bytes = c.stages[0].output_bytes - 1;
    expect_invalid(policy.solve(c, budget), {"stage 1", "saved_bytes", "output_bytes"});
  }
  SUBCASE("negative budget") {
    expect_invalid(policy.solve(good_chain(), -1), {"budget", "negative"});
    expect_invalid(policy.solve(good_chain(), std::numeric_limits<bytes>::min()), {"budget"});
  }
}

TEST_CASE_TEMPLATE("bad input: budgets below the minimum are budget_too_small with the minimum", P,
                   store_all, periodic, revolve, rotor, rotor_floating) {
  const P policy{};
  for (const chain& c : {good_chain(), long_chain(9)}) {
    INFO(c.name);
    const auto r0 = policy.solve(c, 0);
    REQUIRE(r0.code() == status::budget_too_small);
    REQUIRE(r0.err().minimum_budget.has_value());
    const bytes minimum = *r0.err().minimum_budget;
    CHECK(minimum > 0);
    // The message says what to do: the minimum in bytes.
    CHECK(contains(r0.message(), std::to_string(minimum)));
    for (const bytes b : {bytes{1}, minimum / 2, minimum - 1}) {
      INFO("budget ", b);
      const auto r = policy.solve(c, b);
      REQUIRE(r.code() == status::budget_too_small);
      CHECK(r.err().minimum_budget == minimum);
    }
    const auto r = policy.solve(c, minimum);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(r->predicted_peak <= minimum);
  }
}

TEST_CASE_TEMPLATE("bad input: the largest sizes allowed and an unlimited budget", P, store_all,
                   periodic, revolve, rotor, rotor_floating) {
  // 2^52-byte tensors on 10 stages: sums stay far from overflow. Exact-size DPs would need a
  // table with one column per byte: a clear error, not an allocation.
  const chain c = long_chain(10, bytes{1} << 51);
  for (const bytes b : {unlimited_bytes, std::numeric_limits<bytes>::max()}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = P{}.solve(c, b);
    CHECK(seconds_since(t0) < prompt);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(sim::simulate(c, *r).valid);
  }
}

TEST_CASE("bad input: periodic segments out of range") {
  const chain c = good_chain();  // 4 stages
  for (const int k : {0, -1, -1000, 5, 1000, std::numeric_limits<int>::max()}) {
    INFO("segments = ", k);
    expect_invalid(periodic{.segments = k}.solve(c, 1 << 20), {"segments", std::to_string(k)});
  }
  for (int k = 1; k <= 4; ++k) CHECK(periodic{.segments = k}.solve(c, 1 << 20).ok());
  CHECK(periodic{}.solve(c, 1 << 20).ok());  // the best k
}

TEST_CASE("bad input: revolve snapshots below 0") {
  const chain c = good_chain();
  for (const int s : {-1, -2, -1000, std::numeric_limits<int>::min()}) {
    INFO("snapshots = ", s);
    expect_invalid(revolve{.snapshots = s}.solve(c, 1 << 20), {"snapshots"});
  }
  // More snapshots than stages is fine: the extra ones are not used.
  for (const int s : {0, 1, 2, 1000, std::numeric_limits<int>::max()}) {
    INFO("snapshots = ", s);
    CHECK(revolve{.snapshots = s}.solve(c, 1 << 20).ok());
  }
  CHECK(revolve{}.solve(c, 1 << 20).ok());  // the best count
}

TEST_CASE("bad input: a negative thread count is an error naming it") {
  const chain c = good_chain();
  for (const int k : {-1, -1000, std::numeric_limits<int>::min()}) {
    INFO("threads = ", k);
    expect_invalid(rotor{.threads = k}.solve(c, 1 << 20), {"threads", std::to_string(k)});
    expect_invalid(rockmate<store_all>{.threads = k}.solve(c, 1 << 20),
                   {"threads", std::to_string(k)});
  }
  for (const int k : {0, 1, 3}) CHECK(rotor{.threads = k}.solve(c, 1 << 20).ok());
}

TEST_CASE_TEMPLATE("bad input: absurd slot counts give a clear error, not a huge table", P, rotor,
                   rotor_floating) {
  struct request {
    std::int64_t slots;
    std::int64_t max_table_bytes;
    bytes budget;
  };
  const request requests[] = {
      {1'000'000'000'000, std::int64_t{1} << 20, bytes{1} << 41},  // 1e12 slots
      {1'000'000'000'000, std::int64_t{2} << 30, bytes{1} << 41},  // the default cap
      {0, std::int64_t{2} << 30, bytes{1} << 40},                  // exact on a 1 TiB budget
      {std::numeric_limits<std::int64_t>::max(), std::int64_t{2} << 30, unlimited_bytes},
      {0, std::int64_t{2} << 30, std::numeric_limits<bytes>::max()},  // exact, the largest budget
      {500, 0, bytes{1} << 20},                                       // no room for any table
      {500, -1, bytes{1} << 20},                                      // a nonsense cap
  };
  for (const auto& q : requests) {
    INFO("slots ", q.slots, ", max_table_bytes ", q.max_table_bytes, ", budget ", q.budget);
    P policy;
    policy.slots = q.slots;
    policy.max_table_bytes = q.max_table_bytes;
    // A chain the budget lies well inside of (minimum ~6 sizes, store-all ~36), so that the DP
    // table is needed; past 2^52-byte sizes every chain fits, and storing everything, which
    // needs no table, is the answer.
    const bool table_needed = q.budget / 20 <= (bytes{1} << 52);
    chain c = long_chain(12, table_needed ? q.budget / 20 : 1000);
    c.input_bytes = 0;  // so that an exact budget of 2^63-1 leaves 2^63-1 slots besides it
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = policy.solve(c, q.budget);
    CHECK(seconds_since(t0) < prompt);
    if (!table_needed) {
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(r->predicted_time == c.ideal_time());
      continue;
    }
    REQUIRE(!r.ok());
    CHECK(r.code() == status::invalid_problem);
    CHECK(contains(r.message(), "max_table_bytes"));
    CHECK(contains(r.message(), "slots"));
    CHECK(!contains(r.message(), "table of -"));  // the size it would need, never negative
  }
  // Many slots are fine when the budget is small: one slot per byte is the finest there is.
  P policy;
  policy.slots = 1'000'000'000'000;
  const auto r = policy.solve(good_chain(), 2000);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(r->predicted_peak <= 2000);
}

TEST_CASE("bad input: a tiny time limit stops the DPs promptly with status time_limit") {
  const chain c = long_chain(30);
  const bytes budget = rotor{}.minimum_budget(c) * 3 / 2;
  {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = rotor_floating{.time_limit = 1e-9}.solve(c, budget);
    CHECK(seconds_since(t0) < prompt);
    CHECK(r.code() == status::time_limit);
    CHECK(contains(r.message(), "time limit"));
  }
  {
    const chain longer = long_chain(150);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = rotor{.time_limit = 1e-9}.solve(longer, rotor{}.minimum_budget(longer) * 2);
    CHECK(seconds_since(t0) < prompt);
    CHECK(r.code() == status::time_limit);
    CHECK(contains(r.message(), "time limit"));
  }
  // A limit that is not finite or not positive means none.
  for (const double limit : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()}) {
    INFO("time_limit ", limit);
    CHECK(rotor{.time_limit = limit}.solve(c, budget).ok());
    CHECK(rotor_floating{.time_limit = limit}.solve(good_chain(), 2000).ok());
  }
}

namespace {

/// Solves with a progress callback and checks the fractions: in [0, 1], non-decreasing, the
/// last one 1.
template <class P>
void check_progress(P policy, const chain& c, bytes budget) {
  std::vector<double> seen;
  policy.progress = [&](double f) { seen.push_back(f); };
  const auto r = policy.solve(c, budget);
  REQUIRE_MESSAGE(r.ok(), r.message());
  INFO("chain of ", c.length(), " stages, budget ", budget, ", ", seen.size(), " calls");
  CHECK(!seen.empty());
  if (seen.empty()) return;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    INFO("call ", i, ": ", seen[i]);
    CHECK(seen[i] >= 0.0);
    CHECK(seen[i] <= 1.0);
    if (i > 0) CHECK(seen[i] >= seen[i - 1]);
  }
  CHECK(seen.back() == 1.0);
}

}  // namespace

TEST_CASE_TEMPLATE("bad input: progress fractions are non-decreasing and end at 1", P, rotor,
                   rotor_floating) {
  for (const int n : {1, 2, 3, 8}) {
    const chain c = long_chain(n, 997);
    const bytes minimum = P{}.minimum_budget(c);
    check_progress(P{}, c, minimum * 2);
    check_progress(P{.slots = 0}, c, minimum + 1);
    // At the minimum, 500 slots round too coarsely and the solve refines S: several tables.
    check_progress(P{}, c, minimum);
  }
}
