#include <string>
#include <utility>

#include <doctest/doctest.h>

#include <remat/exec/host_backend.hpp>

using namespace remat;
using remat::exec::host_backend;

TEST_CASE("host_backend counts, frees and records the high-water mark") {
  host_backend b(1000);
  {
    auto x = b.allocate(300);
    CHECK(b.in_use() == 300);
    auto y = b.allocate(500);
    CHECK(b.in_use() == 800);
    CHECK(b.high_water() == 800);
    y.release();
    CHECK(b.in_use() == 300);
    auto z = std::move(x);
    CHECK(b.in_use() == 300);
    CHECK(x.empty());
    CHECK(z.size() == 300);
    CHECK(reinterpret_cast<std::uintptr_t>(z.data()) % host_backend::alignment == 0);
  }
  CHECK(b.in_use() == 0);
  CHECK(b.high_water() == 800);
  b.reset_high_water();
  CHECK(b.high_water() == 0);
  CHECK(b.allocations() == 2);
}

TEST_CASE("host_backend: an allocation past the budget is an error naming the activity and bytes") {
  host_backend b(1000);
  auto x = b.allocate(900);
  b.set_activity("F3_all of stage 3 ('fc2')");
  try {
    auto y = b.allocate(200);
    FAIL("no error");
  } catch (const exec::out_of_budget& e) {
    const std::string msg = e.what();
    CHECK(msg.find("F3_all of stage 3 ('fc2')") != std::string::npos);
    CHECK(msg.find("200 bytes") != std::string::npos);
    CHECK(msg.find("1000 bytes") != std::string::npos);
    CHECK(e.requested() == 200);
    CHECK(e.in_use() == 900);
  }
  CHECK(b.in_use() == 900);  // nothing leaked
  CHECK_THROWS_AS((void)b.allocate(-1), std::invalid_argument);
  auto empty = b.allocate(0);
  CHECK(empty.empty());
}

TEST_CASE("host_backend: live_summary names the activities holding the most bytes now") {
  host_backend b;
  CHECK(b.live_summary().empty());
  auto x = b.allocate(10);  // "an allocation"
  b.set_activity("fwd a");
  auto y = b.allocate(30);
  auto h = b.host_allocate(1000);  // the host store is not the budget's: not counted
  b.set_activity("bwd b");
  auto z = b.allocate(20);
  auto w = b.allocate(15);
  b.set_activity("fwd a");  // the same activity again: the same entry
  auto v = b.allocate(1);
  auto s = b.live_summary(2);
  REQUIRE(s.size() == 2);
  CHECK(s[0].activity == "bwd b");
  CHECK(s[0].size == 35);
  CHECK(s[1].activity == "fwd a");
  CHECK(s[1].size == 31);
  z.release();
  w = {};                                                  // freed by assignment
  remat::exec::host_backend::buffer moved = std::move(y);  // a move keeps its owner
  s = b.live_summary();
  REQUIRE(s.size() == 2);
  CHECK(s[0].activity == "fwd a");
  CHECK(s[0].size == 31);
  CHECK(s[1].activity == "an allocation");
  CHECK(s[1].size == 10);
}
