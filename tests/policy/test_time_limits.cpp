// Every chain policy's time limit holds on chains long enough that the solve would overrun it:
// the policy returns within the limit plus a small margin, either a plan or status::time_limit
// with a message that says what to do. The chains are sized so that
// without the checks each solve takes tens of seconds or more; with them, each check here takes
// well under a second.

#include <chrono>
#include <cstdint>
#include <string>

#include <doctest/doctest.h>

#include <remat/remat.hpp>

using namespace remat;

namespace {

/// A chain of n stages with slightly varying costs (so that no shortcut makes it easy).
chain limits_long_chain(int n) {
  chain c{"long", 1000, {}};
  for (int l = 1; l <= n; ++l)
    c.stages.push_back({"s" + std::to_string(l), 1.0 + 0.001 * (l % 7), 2.0, 1000 + 10 * (l % 5),
                        2000 + 10 * (l % 3), 100, 100});
  return c;
}

/// A budget far below store-all (so that the solve has to search) and above any policy's
/// minimum (a few stages' worth of memory).
constexpr bytes mid_budget = 40 * 3000;

double limits_seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool limits_contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Solves with `policy`, and checks that it returned within `within` seconds with a plan or
/// time_limit (whose message names the limit and the way out).
template <class P>
void check_holds(const P& planner, const chain& c, bytes budget, double within) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = planner.solve(c, budget);
  const double took = limits_seconds_since(t0);
  INFO(P::name, " on ", c.length(), " stages, time_limit ", planner.time_limit, " s: took ", took,
       " s, ", r.ok() ? std::string("ok") : r.message());
  CHECK(took < within);
  CHECK((r.ok() || r.code() == status::time_limit));
  if (!r.ok() && r.code() == status::time_limit) {
    CHECK(limits_contains(r.message(), "time limit"));
    CHECK(limits_contains(r.message(), "raise time_limit"));
  }
  if (r.ok()) CHECK(r->predicted_peak <= budget);
}

}  // namespace

TEST_CASE("time limits: rotor stops within its limit, the minimum-memory step included") {
  // 2,000 stages at 20 slots: the table (336 MB at most, touched only as it fills) is allowed,
  // the minimum-memory step alone took about 15 s and the fill minutes.
  const chain c = limits_long_chain(2000);
  check_holds(rotor{.slots = 20, .time_limit = 0.2}, c, mid_budget, 1.0);
}

TEST_CASE("time limits: rotor checks the table's size before any expensive step") {
  // 2,000 stages at the default 500 slots need an 8 GB table: refused at once (it used to be
  // refused after about 30 s of minimum-memory recurrences), whatever the time limit.
  const chain c = limits_long_chain(2000);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = rotor{}.solve(c, mid_budget);
  const double took = limits_seconds_since(t0);
  INFO("took ", took, " s: ", r.message());
  CHECK(took < 0.5);
  CHECK(r.code() == status::invalid_problem);
  CHECK(limits_contains(r.message(), "max_table_bytes"));
  CHECK(limits_contains(r.message(), "fewer slots"));
}

TEST_CASE("time limits: rotor_floating checks the table's size before any expensive step") {
  // 700 stages at 500 slots need a 212 GiB table: refused at once. The minimum-memory step
  // (O(N^6)) used to run first, for hours, with no time limit.
  const chain c = limits_long_chain(700);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = rotor_floating{}.solve(c, mid_budget);
  const double took = limits_seconds_since(t0);
  INFO("took ", took, " s: ", r.message());
  CHECK(took < 0.5);
  CHECK(r.code() == status::invalid_problem);
  CHECK(limits_contains(r.message(), "max_table_bytes"));
}

TEST_CASE("time limits: rotor_floating stops within its limit on a long chain") {
  const chain c = limits_long_chain(120);
  check_holds(
      rotor_floating{.slots = 4, .time_limit = 0.2, .max_table_bytes = std::int64_t{8} << 30}, c,
      mid_budget, 1.0);
}

TEST_CASE("time limits: periodic stops within its limit") {
  // Trying every k is O(N^2) simulated operations: about 20 s for 8,000 stages.
  const chain c = limits_long_chain(8000);
  check_holds(periodic{.time_limit = 0.2}, c, mid_budget, 1.0);
  // A given k is one program: the limit does not get in its way.
  const auto r = periodic{.segments = 90, .time_limit = 0.2}.solve(c, unlimited_bytes);
  CHECK_MESSAGE(r.ok(), r.message());
}

TEST_CASE("time limits: revolve stops within its limit") {
  // The split table is O(N^3): minutes for 4,000 stages; one program with few snapshots has
  // O(N^2) operations.
  const chain c = limits_long_chain(4000);
  check_holds(revolve{.time_limit = 0.2}, c, mid_budget, 1.0);
  check_holds(revolve{.snapshots = 0, .time_limit = 0.2}, c, unlimited_bytes, 1.0);
  check_holds(revolve{.snapshots = 3, .time_limit = 0.2}, c, unlimited_bytes, 1.0);
}

TEST_CASE("time limits: a generous limit changes nothing") {
  const chain c = limits_long_chain(40);
  const bytes b = mid_budget / 4;
  for (const double limit : {60.0, 0.0}) {
    INFO("time_limit ", limit);
    CHECK(*periodic{.time_limit = limit}.solve(c, b) == *periodic{}.solve(c, b));
    CHECK(*revolve{.time_limit = limit}.solve(c, b) == *revolve{}.solve(c, b));
    CHECK(*rotor{.time_limit = limit}.solve(c, b) == *rotor{}.solve(c, b));
  }
}
