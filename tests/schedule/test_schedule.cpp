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
