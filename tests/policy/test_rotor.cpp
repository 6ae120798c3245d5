#include <doctest/doctest.h>

#include <remat/remat.hpp>

using namespace remat;

TEST_CASE("rotor: hand-checkable instance of shilova-spec §7.3") {
  chain c{"hand", 1, {}};
  const double uf[] = {1, 1, 1, 0}, ub[] = {2, 2, 2, 0};
  const bytes a[] = {1, 1, 1, 0}, ab[] = {2, 2, 2, 0};
  for (int i = 0; i < 4; ++i) c.stages.push_back({"s", uf[i], ub[i], a[i], ab[i], 0, 0});
  CHECK(rotor::minimum_budget(c) == 6);
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
  CHECK(to_string(*rotor{.slots = 0}.solve(c, 7)) == "F1_ck F2_ck F3_all F4_all B4 B3 F2_all B2 F1_all B1");
}
