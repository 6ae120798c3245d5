// Instructions and schedules (schedule/schedule.hpp): text form, parsing, equality.

#include <optional>
#include <span>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

using namespace remat;

TEST_CASE("instruction text forms") {
  CHECK(to_string(chain_op::forward(3, forward_mode::no_save)) == "F3_none");
  CHECK(to_string(chain_op::forward(3, forward_mode::save_input)) == "F3_ck");
  CHECK(to_string(chain_op::forward(12, forward_mode::save_all)) == "F12_all");
  CHECK(to_string(chain_op::backward(4)) == "B4");
  CHECK(to_string(forward_mode::no_save) == "none");
  CHECK(to_string(forward_mode::save_input) == "ck");
  CHECK(to_string(forward_mode::save_all) == "all");
}

TEST_CASE("parse_instruction and to_string round-trip") {
  for (int l : {1, 2, 9, 10, 99, 123456}) {
    for (forward_mode m :
         {forward_mode::no_save, forward_mode::save_input, forward_mode::save_all}) {
      const chain_op f = chain_op::forward(l, m);
      const auto back = parse_chain_op(to_string(f));
      REQUIRE(back.has_value());
      CHECK(*back == f);
      CHECK(back->mode == m);
      CHECK(to_string(*back) == to_string(f));
    }
    const chain_op b = chain_op::backward(l);
    const auto back = parse_chain_op(to_string(b));
    REQUIRE(back.has_value());
    CHECK(*back == b);
    CHECK(back->kind == chain_op_kind::backward);
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
    CHECK_FALSE(parse_chain_op(bad).has_value());
  }
}

TEST_CASE("instruction equality ignores the mode of a backward") {
  CHECK(chain_op::forward(2, forward_mode::save_all) ==
        chain_op::forward(2, forward_mode::save_all));
  CHECK_FALSE(chain_op::forward(2, forward_mode::save_all) ==
              chain_op::forward(2, forward_mode::save_input));
  CHECK_FALSE(chain_op::forward(2, forward_mode::save_all) ==
              chain_op::forward(3, forward_mode::save_all));
  CHECK_FALSE(chain_op::forward(2, forward_mode::no_save) == chain_op::backward(2));
  chain_op b = chain_op::backward(2);
  b.mode = forward_mode::save_all;
  CHECK(b == chain_op::backward(2));
}

TEST_CASE("chain program text form, and the program's") {
  std::vector<chain_op> s;
  CHECK(to_string(std::span<const chain_op>(s)).empty());
  s = {chain_op::forward(1, forward_mode::save_all), chain_op::forward(2, forward_mode::save_all),
       chain_op::backward(2), chain_op::backward(1)};
  CHECK(to_string(std::span<const chain_op>(s)) == "F1_all F2_all B2 B1");
  // Round trip of a whole program through its text, and through the lowering and the printer.
  CHECK(parse_chain_ops(to_string(std::span<const chain_op>(s))) == std::optional(s));
  const auto low = lower(2, s);
  REQUIRE(low.ok());
  CHECK(to_chain_string(2, *low) == "F1_all F2_all B2 B1");
  // The program's own text form.
  CHECK(to_string(*low) == "C0 C1 C2 C3 D6 D7 D5 C4 D3 D4 D2");
  std::ostringstream os;
  os << *low << '|' << low->ops[2];
  CHECK(os.str() == "C0 C1 C2 C3 D6 D7 D5 C4 D3 D4 D2|C2");
  CHECK(parse_program(to_string(*low)) == std::optional(schedule{low->ops, 0, 0}));
  CHECK(parse_program(" C0\tC1_ff\nD2 O3 P3 W3 ")->ops ==
        std::vector<instruction>{instruction::compute(0), instruction::fast_forward(1),
                                 instruction::free(2), instruction::offload(3),
                                 instruction::prefetch(3), instruction::wait(3)});
  CHECK_FALSE(parse_program("C0 F1_ck"));
}

TEST_CASE("transfer instructions: text forms, round trip, equality") {
  CHECK(to_string(chain_op::offload(0)) == "O0");
  CHECK(to_string(chain_op::prefetch(3)) == "P3");
  CHECK(to_string(chain_op::wait(12)) == "W12");
  for (int k : {0, 1, 9, 10, 123456}) {
    for (const chain_op& i : {chain_op::offload(k), chain_op::prefetch(k), chain_op::wait(k)}) {
      const auto back = parse_chain_op(to_string(i));
      REQUIRE(back.has_value());
      CHECK(*back == i);
      CHECK(back->index == k);
      CHECK_FALSE(back->is_compute());
    }
  }
  CHECK(parse_chain_op("O2")->kind == chain_op_kind::offload);
  CHECK(parse_chain_op("P2")->kind == chain_op_kind::prefetch);
  CHECK(parse_chain_op("W2")->kind == chain_op_kind::wait);
  CHECK(chain_op::forward(1, forward_mode::no_save).is_compute());
  CHECK(chain_op::backward(1).is_compute());
  CHECK_FALSE(chain_op::offload(2) == chain_op::prefetch(2));
  CHECK_FALSE(chain_op::offload(2) == chain_op::offload(3));
  chain_op o = chain_op::offload(2);
  o.mode = forward_mode::save_all;
  CHECK(o == chain_op::offload(2));  // the mode means nothing to a transfer
  for (const char* bad : {"O", "O-1", "O-0", "O+1", "O1_ck", "P2_all", "W", "W3x", "o1", "p1", "w1",
                          "O 1", "O1 ", "X0", "P99999999999999999999"}) {
    INFO("text: '", bad, "'");
    CHECK_FALSE(parse_chain_op(bad).has_value());
  }
  std::vector<chain_op> s;
  s = {chain_op::forward(1, forward_mode::save_input),
       chain_op::offload(0),
       chain_op::forward(2, forward_mode::save_all),
       chain_op::backward(2),
       chain_op::wait(0),
       chain_op::prefetch(0),
       chain_op::wait(0),
       chain_op::forward(1, forward_mode::save_all),
       chain_op::backward(1)};
  CHECK(to_string(std::span<const chain_op>(s)) == "F1_ck O0 F2_all B2 W0 P0 W0 F1_all B1");
  CHECK(parse_chain_ops(to_string(std::span<const chain_op>(s))) == s);
  CHECK(parse_chain_ops("  F1_ck\tO0\nF2_all  B2 W0 P0 W0 F1_all B1\r\n") == s);
  CHECK(parse_chain_ops("")->empty());
  CHECK_FALSE(parse_chain_ops("F1_ck O-1 B1").has_value());
  CHECK_FALSE(parse_chain_ops("F1_ck,O0").has_value());
}
