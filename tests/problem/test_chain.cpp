#include <cmath>
#include <limits>
#include <string>

#include <doctest/doctest.h>

#include <remat/policy/rotor.hpp>
#include <remat/problem/chain.hpp>

using namespace remat;

namespace {
chain three() {
  chain c{"three", 8, {}};
  c.stages = {
      {"fc1", 1, 2, 16, 32, 4, 8}, {"fc2", 1, 2, 16, 16, 0, 0}, {"loss", 0.5, 0.5, 4, 4, 0, 0}};
  return c;
}
bool mentions(const result<void>& r, const std::string& what) {
  return !r && r.message().find(what) != std::string::npos;
}
}  // namespace

TEST_CASE("chain accessors follow the thesis' notation") {
  const chain c = three();
  CHECK(c.length() == 3);
  CHECK(c.a(0) == 8);
  CHECK(c.abar(0) == 8);
  CHECK(c.a(1) == 16);
  CHECK(c.abar(1) == 32);
  CHECK(c.delta(1) == 16);
  CHECK(c.delta(3) == 0);  // delta_N = 0: the initial gradient is the constant 1
  CHECK(c.delta(0) == 8);
  CHECK(c.of(1) == 4);
  CHECK(c.ob(1) == 8);
  CHECK(c.ideal_time() == doctest::Approx(7.0));
  CHECK(validate(c).ok());
}

TEST_CASE("chain validation names the stage and the field") {
  SUBCASE("empty") {
    chain c{"empty", 1, {}};
    CHECK(mentions(validate(c), "no stage"));
    CHECK(validate(c).code() == status::invalid_problem);
  }
  SUBCASE("negative input") {
    chain c = three();
    c.input_bytes = -1;
    CHECK(mentions(validate(c), "input_bytes is negative"));
  }
  SUBCASE("negative size") {
    chain c = three();
    c.stages[1].output_bytes = -5;
    CHECK(mentions(validate(c), "stage 2 ('fc2'): output_bytes is negative"));
  }
  SUBCASE("negative overhead") {
    chain c = three();
    c.stages[0].backward_overhead_bytes = -1;
    CHECK(mentions(validate(c), "stage 1 ('fc1'): backward_overhead_bytes"));
  }
  SUBCASE("non-finite time") {
    chain c = three();
    c.stages[2].forward_time = std::numeric_limits<double>::quiet_NaN();
    CHECK(mentions(validate(c), "stage 3 ('loss'): forward_time"));
    c.stages[2].forward_time = std::numeric_limits<double>::infinity();
    CHECK(mentions(validate(c), "forward_time"));
  }
  SUBCASE("negative time") {
    chain c = three();
    c.stages[0].backward_time = -0.1;
    CHECK(mentions(validate(c), "stage 1 ('fc1'): backward_time"));
  }
  SUBCASE("saved smaller than output") {
    chain c = three();
    c.stages[1].saved_bytes = 8;
    CHECK(mentions(validate(c),
                   "stage 2 ('fc2'): saved_bytes (8) is smaller than output_bytes (16)"));
  }
  SUBCASE("absurd size") {
    chain c = three();
    c.stages[0].saved_bytes = bytes{1} << 60;
    CHECK(mentions(validate(c), "exceeds"));
  }
}

TEST_CASE("chain validation: times too large for any sum are invalid_problem, naming the field") {
  // Two stages of 1e308 s each once planned "ok" with an infinite makespan.
  SUBCASE("finite times whose sum overflows") {
    chain c = three();
    c.stages[0].forward_time = 1e308;
    c.stages[0].backward_time = 1e308;
    CHECK(validate(c).code() == status::invalid_problem);
    CHECK(mentions(validate(c), "stage 1 ('fc1'): forward_time is 1e+308 s"));
    CHECK(mentions(validate(c), "1e+15 s"));
  }
  SUBCASE("one time no solver takes (CBC aborts on 1e25)") {
    chain c = three();
    c.stages[2].backward_time = 1e25;
    CHECK(mentions(validate(c), "stage 3 ('loss'): backward_time is 1e+25 s"));
    c.stages[2].backward_time = max_time;
    CHECK(mentions(validate(c), "stage 3 ('loss'): backward_time is 1e+15 s"));
  }
  SUBCASE("times below the limit each whose sum is not") {
    chain c = three();
    c.stages[0].forward_time = 0.6 * max_time;
    c.stages[1].forward_time = 0.6 * max_time;
    CHECK(mentions(validate(c),
                   "stage 2 ('fc2'): forward_time 6e+14 s brings chain 'three''s total time"));
  }
  SUBCASE("large times below the limit are fine") {
    chain c = three();
    c.stages[0].forward_time = 0.4 * max_time;
    c.stages[1].backward_time = 0.4 * max_time;
    CHECK(validate(c).ok());
    CHECK(std::isfinite(c.ideal_time()));
  }
}

TEST_CASE(
    "cost sets: several options per stage; option 0 is the stage's own; checked like stages") {
  chain c{"opts", 10, {{"s1", 1, 2, 100, 150, 5, 6}, {"loss", 1, 1, 4, 4, 0, 0}}};
  CHECK(c.option_count(1) == 1);
  CHECK(c.option(1, 0) == stage_option{1, 2, 150, 5, 6});
  c.stages[0].options = {{0.5, 3, 400, 0, 8}, {2, 1, 100, 1, 1}};
  CHECK(validate(c).ok());
  CHECK(c.option_count(1) == 3);
  CHECK(c.option(1, 2) == stage_option{2, 1, 100, 1, 1});
  CHECK(c.ideal_time() == 5);  // option 0's times
  auto bad = c;
  bad.stages[0].options[1].saved_bytes = 99;
  CHECK(validate(bad).message().find(
            "stage 1 ('s1'), option 2: saved_bytes (99) is smaller than the stage's "
            "output_bytes (100)") != std::string::npos);
  bad = c;
  bad.stages[0].options[0].backward_overhead_bytes = -1;
  CHECK(validate(bad).message().find("option 1: backward_overhead_bytes is negative") !=
        std::string::npos);
  bad = c;
  bad.stages[0].options[0].forward_time = -1;
  CHECK_FALSE(validate(bad).ok());
}

TEST_CASE("cost sets: a chain policy plans with option 0, so extra options change nothing for it") {
  chain c{"opts", 10, {}};
  for (int l = 1; l <= 6; ++l)
    c.stages.push_back({"s" + std::to_string(l), 1.0 + l, 2.0, 100 * l, 150 * l, 3, 4});
  chain with = c;
  for (auto& s : with.stages)
    s.options = {{0.5, 1, s.output_bytes, 0, 0}, {3, 3, s.saved_bytes * 2, 1, 1}};
  const bytes budget = 2500;  // store-all needs 3664
  const auto a = rotor{}.solve(c, budget);
  const auto b = rotor{}.solve(with, budget);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
}
