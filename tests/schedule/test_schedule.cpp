// Instructions and schedules (schedule/schedule.hpp): text form, parsing, equality.

#include <doctest/doctest.h>

#include <optional>
#include <remat/schedule/schedule.hpp>
#include <sstream>
#include <string>

using namespace remat;

TEST_CASE("instruction text forms") {
  CHECK(to_string(instruction::forward(3, forward_mode::no_save)) == "F3_none");
  CHECK(to_string(instruction::forward(3, forward_mode::save_input)) == "F3_ck");
  CHECK(to_string(instruction::forward(12, forward_mode::save_all)) == "F12_all");
  CHECK(to_string(instruction::backward(4)) == "B4");
  CHECK(to_string(forward_mode::no_save) == "none");
  CHECK(to_string(forward_mode::save_input) == "ck");
  CHECK(to_string(forward_mode::save_all) == "all");
}

TEST_CASE("parse_instruction and to_string round-trip") {
  for (int l : {1, 2, 9, 10, 99, 123456}) {
    for (forward_mode m :
         {forward_mode::no_save, forward_mode::save_input, forward_mode::save_all}) {
      const instruction f = instruction::forward(l, m);
      const auto back = parse_instruction(to_string(f));
      REQUIRE(back.has_value());
      CHECK(*back == f);
      CHECK(back->mode == m);
      CHECK(to_string(*back) == to_string(f));
    }
    const instruction b = instruction::backward(l);
    const auto back = parse_instruction(to_string(b));
    REQUIRE(back.has_value());
    CHECK(*back == b);
    CHECK(back->kind == op_kind::backward);
    CHECK(back->index == l);
  }
}

TEST_CASE("parse_instruction rejects malformed text") {
  for (const char* bad : {"F0_ck",
                          "F3_x",
                          "B",
                          "X1",
                          "B2_all",
                          "",
                          "F",
                          "F3",
                          "F3_",
                          "F3_CK",
                          "f3_ck",
                          "b2",
                          "B0",
                          "B-1",
                          "F-2_ck",
                          "B+2",
                          "F3_ck ",
                          " F3_ck",
                          "F3__ck",
                          "F3_none_",
                          "B2x",
                          "Fx_ck",
                          "B99999999999999999999"}) {
    INFO("text: '", bad, "'");
    CHECK_FALSE(parse_instruction(bad).has_value());
  }
}

TEST_CASE("instruction equality ignores the mode of a backward") {
  CHECK(instruction::forward(2, forward_mode::save_all) ==
        instruction::forward(2, forward_mode::save_all));
  CHECK_FALSE(instruction::forward(2, forward_mode::save_all) ==
              instruction::forward(2, forward_mode::save_input));
  CHECK_FALSE(instruction::forward(2, forward_mode::save_all) ==
              instruction::forward(3, forward_mode::save_all));
  CHECK_FALSE(instruction::forward(2, forward_mode::no_save) == instruction::backward(2));
  instruction b = instruction::backward(2);
  b.mode = forward_mode::save_all;
  CHECK(b == instruction::backward(2));
}

TEST_CASE("schedule text form") {
  schedule s;
  CHECK(to_string(s).empty());
  s.ops = {instruction::forward(1, forward_mode::save_all),
           instruction::forward(2, forward_mode::save_all), instruction::backward(2),
           instruction::backward(1)};
  CHECK(to_string(s) == "F1_all F2_all B2 B1");
  std::ostringstream os;
  os << s << '|' << s.ops[2];
  CHECK(os.str() == "F1_all F2_all B2 B1|B2");

  // Round trip of a whole program through its text.
  schedule back;
  std::istringstream in(to_string(s));
  for (std::string w; in >> w;) back.ops.push_back(parse_instruction(w).value());
  CHECK(back == s);
}

TEST_CASE("transfer instructions: text forms, round trip, equality") {
  CHECK(to_string(instruction::offload(0)) == "O0");
  CHECK(to_string(instruction::prefetch(3)) == "P3");
  CHECK(to_string(instruction::wait(12)) == "W12");
  for (int k : {0, 1, 9, 10, 123456}) {
    for (const instruction& i : {instruction::offload(k), instruction::prefetch(k), instruction::wait(k)}) {
      const auto back = parse_instruction(to_string(i));
      REQUIRE(back.has_value());
      CHECK(*back == i);
      CHECK(back->index == k);
      CHECK_FALSE(back->is_compute());
      CHECK(back->is_transfer() == (i.kind != op_kind::wait));
    }
  }
  CHECK(parse_instruction("O2")->kind == op_kind::offload);
  CHECK(parse_instruction("P2")->kind == op_kind::prefetch);
  CHECK(parse_instruction("W2")->kind == op_kind::wait);
  CHECK(instruction::forward(1, forward_mode::no_save).is_compute());
  CHECK(instruction::backward(1).is_compute());
  CHECK_FALSE(instruction::offload(2) == instruction::prefetch(2));
  CHECK_FALSE(instruction::offload(2) == instruction::offload(3));
  instruction o = instruction::offload(2);
  o.mode = forward_mode::save_all;
  CHECK(o == instruction::offload(2));  // the mode means nothing to a transfer
  for (const char* bad : {"O", "O-1", "O-0", "O+1", "O1_ck", "P2_all", "W", "W3x", "o1", "p1", "w1", "O 1",
                          "O1 ", "X0", "P99999999999999999999"}) {
    INFO("text: '", bad, "'");
    CHECK_FALSE(parse_instruction(bad).has_value());
  }
  schedule s;
  s.ops = {instruction::forward(1, forward_mode::save_input), instruction::offload(0),
           instruction::forward(2, forward_mode::save_all), instruction::backward(2), instruction::wait(0),
           instruction::prefetch(0), instruction::wait(0), instruction::forward(1, forward_mode::save_all),
           instruction::backward(1)};
  CHECK(to_string(s) == "F1_ck O0 F2_all B2 W0 P0 W0 F1_all B1");
  CHECK(parse_schedule(to_string(s)) == s);
  CHECK(parse_schedule("  F1_ck\tO0\nF2_all  B2 W0 P0 W0 F1_all B1\r\n") == s);
  CHECK(parse_schedule("")->ops.empty());
  CHECK_FALSE(parse_schedule("F1_ck O-1 B1").has_value());
  CHECK_FALSE(parse_schedule("F1_ck,O0").has_value());
}
