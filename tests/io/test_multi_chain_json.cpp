// Multi-chain JSON (io/multi_chain_json.hpp): the example reads, round-trips, and every field's
// error names it.
#include <string>

#include <doctest/doctest.h>

#include <remat/io/multi_chain_json.hpp>

using namespace remat;

TEST_CASE("multi-chain JSON: the example reads and every problem round-trips") {
#ifdef REMAT_EXAMPLES_DIR
  const auto toy = io::load_multi_chain(std::string(REMAT_EXAMPLES_DIR) + "/multi_chains/toy.json");
  REQUIRE_MESSAGE(toy.ok(), toy.message());
  CHECK(toy->lengths == std::vector<int>{4, 10, 12});
  CHECK(toy->slot_bytes == 1048576);
  CHECK(toy->keep.empty());
#endif
  const multi_chain p{"two towers", {3, 0, 5}, 0.5, 1.5, 2, 4096, {true, false, true}};
  const auto back = io::multi_chain_from_json(io::to_json(p));
  REQUIRE_MESSAGE(back.ok(), back.message());
  CHECK(*back == p);
  const auto text = io::parse_multi_chain(io::to_json(multi_chain{"m", {2}}).dump());
  REQUIRE(text.ok());
  CHECK(text->keep.empty());
}

TEST_CASE("multi-chain JSON: errors name the field") {
  const std::string head =
      R"({"name": "m", "forward_time": 1, "backward_time": 1, "loss_time": 1, )";
  auto why = [&](const std::string& rest) { return io::parse_multi_chain(head + rest).message(); };
  CHECK(why(R"("lengths": [2, 3], "slot_bytes": 8, "kep": [true, false]})")
            .find("unknown field \"kep\" (did you mean \"keep\"?)") != std::string::npos);
  CHECK(why(R"("slot_bytes": 8})").find("missing field \"lengths\"") != std::string::npos);
  CHECK(why(R"("lengths": [2, "3"], "slot_bytes": 8})").find("lengths[1] is a string") !=
        std::string::npos);
  CHECK(why(R"("lengths": [2, -3], "slot_bytes": 8})").find("lengths[1] is -3") !=
        std::string::npos);
  CHECK(why(R"("lengths": [], "slot_bytes": 8})").find("no chain") != std::string::npos);
  CHECK(why(R"("lengths": [2], "slot_bytes": 8.5})").find("\"slot_bytes\" is a floating") !=
        std::string::npos);
  CHECK(why(R"("lengths": [2], "slot_bytes": 0})").find("slot_bytes is 0") != std::string::npos);
  CHECK(why(R"("lengths": [2], "slot_bytes": 8, "keep": [1]})").find("keep[0] is an integer") !=
        std::string::npos);
  CHECK(why(R"("lengths": [2], "slot_bytes": 8, "keep": [true, true]})")
            .find("keep has 2 entries for 1 chains") != std::string::npos);
  CHECK(io::parse_multi_chain(R"({"lengths": [2], "slot_bytes": 8})")
            .message()
            .find("missing field \"forward_time\"") != std::string::npos);
  CHECK(io::parse_multi_chain("").message().find("the text is empty") != std::string::npos);
  CHECK(io::load_multi_chain("/nonexistent/m.json").message().find("no such file") !=
        std::string::npos);
}
