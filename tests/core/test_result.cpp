#include <string>

#include <doctest/doctest.h>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>

using namespace remat;
using namespace remat::literals;

TEST_CASE("result holds a value or an error") {
  result<int> good = 3;
  CHECK(good.ok());
  CHECK(good.code() == status::ok);
  CHECK(*good == 3);
  result<int> bad = error{status::budget_too_small, "too small", 42};
  CHECK_FALSE(bad.ok());
  CHECK(bad.code() == status::budget_too_small);
  CHECK(bad.err().minimum_budget == 42);
  CHECK(bad.message() == "too small");
  CHECK_THROWS_AS((void)bad.value(), bad_result_access);
  CHECK_THROWS_AS((void)good.err(), std::logic_error);
  CHECK_THROWS_AS((result<int>(error{status::ok, "", {}})), std::logic_error);
  result<void> v;
  CHECK(v.ok());
  result<void> e = error{status::invalid_problem, "no", {}};
  CHECK(e.code() == status::invalid_problem);
}

TEST_CASE("status names and byte literals") {
  CHECK(to_string(status::time_limit) == "time_limit");
  CHECK(to_string(status::budget_too_small) == "budget_too_small");
  CHECK(3_KiB == 3072);
  CHECK(2_MiB == 2 * 1024 * 1024);
  CHECK(1_GiB == bytes{1} << 30);
}
