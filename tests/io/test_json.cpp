#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include <remat/io/json.hpp>
#include <remat/remat.hpp>

#include "support/io_checks.hpp"

using namespace remat;
using nlohmann::json;

namespace {

using remat::testing::says;

chain small_chain() {
  chain c{"small", 8, {}};
  c.stages = {{"fc1", 0.25, 0.5, 16, 32, 4, 8},
              {"fc2", 1e-7, 3.0000000000000004, 16, 16, 0, 0},
              {"", 0.125, 0.125, 4, 4, 0, 0}};
  return c;
}

const char* valid_text = R"({
  "name": "tiny",
  "input_bytes": 64,
  "stages": [
    {"name": "conv", "forward_time": 0.001, "backward_time": 0.002, "output_bytes": 128,
     "saved_bytes": 384, "forward_overhead_bytes": 16, "backward_overhead_bytes": 32},
    {"name": "fc", "forward_time": 0.0005, "backward_time": 0.001, "output_bytes": 32,
     "saved_bytes": 64},
    {"name": "loss", "forward_time": 0, "backward_time": 0, "output_bytes": 4, "saved_bytes": 36}
  ]
})";

/// The valid chain with one change applied to its JSON.
template <class Edit>
result<chain> edited(Edit edit) {
  json j = json::parse(valid_text);
  edit(j);
  return io::chain_from_json(j);
}

std::filesystem::path scratch(const std::string& name) {
  return testing::scratch("remat_test_json_", name);
}

}  // namespace

TEST_CASE("json: a chain round-trips through JSON, exactly") {
  const chain c = small_chain();
  const json j = io::to_json(c);
  auto back = io::chain_from_json(j);
  REQUIRE(back.ok());
  CHECK(*back == c);
  // Through text too: doubles are written with enough digits to read back bit for bit.
  auto again = io::parse_chain(j.dump(2));
  REQUIRE(again.ok());
  CHECK(*again == c);
}

TEST_CASE("json: the documented format reads, overheads and names optional") {
  auto r = io::parse_chain(valid_text);
  REQUIRE(r.ok());
  CHECK(r->name == "tiny");
  CHECK(r->input_bytes == 64);
  REQUIRE(r->length() == 3);
  CHECK(r->at(1).forward_overhead_bytes == 16);
  CHECK(r->at(1).backward_overhead_bytes == 32);
  CHECK(r->at(2).forward_overhead_bytes == 0);
  CHECK(r->at(3).forward_time == 0.0);
  auto unnamed = edited([](json& j) {
    j.erase("name");
    j["stages"][0].erase("name");
  });
  REQUIRE(unnamed.ok());
  CHECK(unnamed->name.empty());
  CHECK(unnamed->at(1).name.empty());
}

TEST_CASE("json: wrong types name the stage, the field and what would work") {
  CHECK(says(edited([](json& j) { j["stages"][1]["output_bytes"] = "32MB"; }),
             {"stage 2 ('fc') at stages[1]", "\"output_bytes\"", "a string (\"32MB\")", "integer",
              "without quotes or units"}));
  CHECK(says(edited([](json& j) { j["stages"][0]["saved_bytes"] = 383.6; }),
             {"stage 1 ('conv')", "\"saved_bytes\"", "floating-point", "write 384"}));
  CHECK(says(edited([](json& j) { j["stages"][0]["saved_bytes"] = 1e9; }),
             {"\"saved_bytes\"", "JSON integers", "write 1000000000"}));
  CHECK(says(edited([](json& j) { j["stages"][2]["forward_time"] = "3ms"; }),
             {"stage 3 ('loss')", "\"forward_time\"", "seconds", "a string (\"3ms\")"}));
  CHECK(says(edited([](json& j) { j["stages"][2]["backward_time"] = true; }),
             {"stage 3", "\"backward_time\"", "a boolean"}));
  CHECK(says(edited([](json& j) { j["stages"][1]["output_bytes"] = nullptr; }),
             {"stage 2", "\"output_bytes\" is null"}));
  CHECK(says(edited([](json& j) { j["input_bytes"] = json::array(); }),
             {"chain", "\"input_bytes\" is an array"}));
  CHECK(says(edited([](json& j) { j["stages"][0]["output_bytes"] = 18446744073709551615ull; }),
             {"stage 1", "\"output_bytes\"", "too large"}));
  CHECK(says(edited([](json& j) { j["name"] = 3; }), {"chain", "\"name\"", "string"}));
  CHECK(says(edited([](json& j) { j["stages"][1]["name"] = json::object(); }),
             {"stage 2 at stages[1]", "\"name\" is an object"}));
}

TEST_CASE("json: negative sizes and inconsistent sizes get validate()'s messages") {
  CHECK(says(edited([](json& j) { j["stages"][1]["output_bytes"] = -5; }),
             {"stage 2 ('fc')", "output_bytes", "negative"}));
  CHECK(says(edited([](json& j) { j["stages"][1]["forward_time"] = -0.5; }),
             {"stage 2 ('fc')", "forward_time", ">= 0"}));
  CHECK(says(edited([](json& j) { j["input_bytes"] = -1; }), {"input_bytes", "negative"}));
  CHECK(says(edited([](json& j) { j["stages"][0]["saved_bytes"] = 100; }),
             {"stage 1 ('conv')", "saved_bytes", "smaller than output_bytes"}));
  CHECK(says(edited([](json& j) { j["stages"] = json::array(); }), {"no stage"}));
}

TEST_CASE("json: missing and unknown fields are named") {
  CHECK(says(edited([](json& j) { j["stages"][1].erase("saved_bytes"); }),
             {"stage 2 ('fc')", "missing field \"saved_bytes\"", "output included"}));
  CHECK(says(edited([](json& j) { j["stages"][0].erase("backward_time"); }),
             {"stage 1 ('conv')", "missing field \"backward_time\""}));
  CHECK(says(edited([](json& j) { j.erase("input_bytes"); }), {"missing field \"input_bytes\""}));
  CHECK(says(edited([](json& j) { j.erase("stages"); }), {"missing field \"stages\""}));
  // A typo is caught as unknown, with the closest field, before it shows up as missing.
  CHECK(says(edited([](json& j) {
               auto& s = j["stages"][1];
               s["ouput_bytes"] = s["output_bytes"];
               s.erase("output_bytes");
             }),
             {"stage 2 ('fc')", "unknown field \"ouput_bytes\"", "did you mean \"output_bytes\"",
              "forward_overhead_bytes"}));
  CHECK(says(edited([](json& j) { j["stage"] = j["stages"]; }),
             {"unknown field \"stage\"", "did you mean \"stages\""}));
  CHECK(says(edited([](json& j) { j["stages"][2]["saved"] = 36; }),
             {"stage 3 ('loss')", "unknown field \"saved\"", "did you mean \"saved_bytes\""}));
  CHECK(says(edited([](json& j) { j["stages"][0]["color"] = "blue"; }),
             {"stage 1 ('conv')", "unknown field \"color\"", "a stage has the fields"}));
}

TEST_CASE("json: weight_bytes, a byte count >= 0, default 0; written when not 0") {
  CHECK(says(edited([](json& j) { j["stages"][1]["weight_bytes"] = -1; }),
             {"stage 2 ('fc')", "weight_bytes is negative"}));
  CHECK(says(edited([](json& j) { j["stages"][0]["weight_bytes"] = 1.5; }),
             {"stage 1 ('conv')", "\"weight_bytes\"", "JSON integers"}));
  CHECK(says(edited([](json& j) { j["stages"][0]["weigth_bytes"] = 4; }),
             {"unknown field \"weigth_bytes\"", "did you mean \"weight_bytes\""}));
  json j = json::parse(valid_text);
  j["stages"][0]["weight_bytes"] = 4096;
  auto c = io::chain_from_json(j);
  REQUIRE(c.ok());
  CHECK(c->w(1) == 4096);
  CHECK(c->w(2) == 0);
  const json back = io::to_json(*c);
  CHECK(back["stages"][0]["weight_bytes"] == 4096);
  CHECK_FALSE(back["stages"][1].contains("weight_bytes"));
  CHECK(*io::chain_from_json(back) == *c);
}

TEST_CASE("json: control_flow, a boolean, never on the loss; written when set") {
  CHECK(says(edited([](json& j) { j["stages"][0]["control_flow"] = 1; }),
             {"stage 1 ('conv')", "\"control_flow\" is an integer", "control flow"}));
  CHECK(says(edited([](json& j) { j["stages"][2]["control_flow"] = true; }),
             {"stage 3 ('loss')", "control_flow is set on the loss"}));
  json j = json::parse(valid_text);
  j["stages"][1]["control_flow"] = true;
  auto c = io::chain_from_json(j);
  REQUIRE(c.ok());
  CHECK(c->at(2).control_flow);
  CHECK_FALSE(c->at(1).control_flow);
  const json back = io::to_json(*c);
  CHECK(back["stages"][1]["control_flow"] == true);
  CHECK_FALSE(back["stages"][0].contains("control_flow"));
  CHECK(*io::chain_from_json(back) == *c);
}

TEST_CASE("json: wrong shapes") {
  CHECK(says(io::chain_from_json(json::array()), {"must be a JSON object", "an array"}));
  CHECK(says(io::chain_from_json(json(42)), {"must be a JSON object"}));
  CHECK(says(edited([](json& j) { j["stages"] = json::object(); }),
             {"\"stages\" is an object", "array of stage objects"}));
  CHECK(says(edited([](json& j) { j["stages"][1] = 7; }),
             {"stage 2 at stages[1] is an integer", "must be an object"}));
}

TEST_CASE("json: malformed text reports the position") {
  CHECK(says(io::parse_chain(R"({"name": "x", "input_bytes": 8,)"),
             {"malformed JSON", "line 1", "column"}));
  CHECK(says(io::parse_chain("{\n  \"name\": \"x\"\n  \"input_bytes\": 8}"),
             {"malformed JSON", "line 3"}));
  CHECK(says(io::parse_chain(""), {"malformed JSON", "empty"}));
  CHECK(says(io::parse_chain(" \n"), {"malformed JSON", "empty"}));
  CHECK(says(io::parse_chain("{\"name\": \"\xff\"}"), {"malformed JSON"}));
  CHECK(says(io::parse_chain("[1, 2] trailing"), {"malformed JSON"}));
  // Deep nesting neither overflows the stack nor throws.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(says(io::parse_chain(deep), {"must be a JSON object"}));
}

TEST_CASE("json: no mutation of a valid document throws or crashes") {
  const std::string base = valid_text;
  std::mt19937 rng(12345);
  const std::string alphabet = "{}[]\":,.-+eE0123456789 truefalsnl_abcxyz\\";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string t = base;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t pos = rng() % t.size();
      switch (rng() % 3) {
        case 0:
          t.erase(pos, 1 + rng() % 4);
          break;
        case 1:
          t.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          t[pos] = alphabet[rng() % alphabet.size()];
          break;
      }
    }
    result<chain> r = chain{};
    CHECK_NOTHROW(r = io::parse_chain(t));
    if (r.ok()) {
      CHECK(validate(*r).ok());
    } else {
      CHECK(r.code() == status::invalid_problem);
      CHECK(!r.message().empty());
    }
  }
}

TEST_CASE("json: load_chain names the file") {
  const auto missing = scratch("does_not_exist.json");
  std::filesystem::remove(missing);
  CHECK(says(io::load_chain(missing), {"cannot read chain file", missing.string()}));
  CHECK(says(io::load_chain(std::filesystem::temp_directory_path()), {"directory"}));

  const auto bad = scratch("bad.json");
  {
    std::ofstream out(bad);
    out << "{\n  \"input_bytes\": 8,\n  \"stages\": [\n    {\"forward_time\": 1,}\n  ]\n}\n";
  }
  CHECK(says(io::load_chain(bad), {bad.string(), "malformed JSON", "line 4"}));

  const auto typo = scratch("typo.json");
  {
    std::ofstream out(typo);
    out << R"({"input_bytes": 8, "stages": [{"forward_time": 1, "backward_time": 1,
              "output_bytes": 4, "saved_bytes": 4, "forward_overhead": 3}]})";
  }
  CHECK(says(io::load_chain(typo),
             {typo.string(), "stage 1 at stages[0]", "unknown field \"forward_overhead\"",
              "did you mean \"forward_overhead_bytes\""}));

  const auto good = scratch("good.json");
  {
    std::ofstream out(good);
    out << io::to_json(small_chain()).dump(2);
  }
  auto r = io::load_chain(good);
  REQUIRE(r.ok());
  CHECK(*r == small_chain());
  for (const auto& p : {bad, typo, good}) std::filesystem::remove(p);
}

TEST_CASE("json: schedules round-trip as arrays of instruction strings") {
  const chain c = small_chain();
  auto s = rotor{.slots = 0}.solve(c, 200);
  REQUIRE(s.ok());
  const auto ops = to_chain_ops(c.length(), *s);
  REQUIRE(ops.has_value());

  // A chain's program in the chain notation: one word per chain op.
  const json j = io::to_json(*s, c);
  REQUIRE(j.is_array());
  CHECK(j.size() == ops->size());
  CHECK(j.front().get<std::string>().front() == 'F');
  auto back = io::schedule_from_json(j, c);
  REQUIRE(back.ok());
  CHECK(back->ops == s->ops);
  CHECK(sim::simulate(c, *back, {.budget = 200}).valid);

  // The same program in the program's own text form: one word per instruction.
  const json p = io::to_json(*s);
  REQUIRE(p.is_array());
  CHECK(p.size() == s->ops.size());
  CHECK(p.front().get<std::string>().front() == 'C');
  auto from_program = io::schedule_from_json(p);
  REQUIRE(from_program.ok());
  CHECK(from_program->ops == s->ops);
  // Without the chain only program text is read; with it, either (told apart by the F and B words).
  CHECK(!io::schedule_from_json(j).ok());
  auto program_with_chain = io::schedule_from_json(p, c);
  REQUIRE(program_with_chain.ok());
  CHECK(program_with_chain->ops == s->ops);

  const json literal =
      json::parse(R"(["F1_ck", "F2_none", "F3_all", "B3", "F1_all", "F2_all", "B2", "B1"])");
  auto lit = io::schedule_from_json(literal, c);
  REQUIRE(lit.ok());
  const auto lit_ops = to_chain_ops(c.length(), *lit);
  REQUIRE(lit_ops.has_value());
  CHECK((*lit_ops)[0] == chain_op::forward(1, forward_mode::save_input));
  CHECK((*lit_ops)[1] == chain_op::forward(2, forward_mode::no_save));
  CHECK((*lit_ops)[3] == chain_op::backward(3));
  // F1_ck, then F2_none: a fast-forward of stage 2 and the free of a_1.
  const chain_nodes at(c.length());
  CHECK(lit->ops[0] == instruction::fast_forward(at.fwd(1)));
  CHECK(lit->ops[1] == instruction::fast_forward(at.fwd(2)));
  CHECK(lit->ops[2] == instruction::free(at.a(1)));
  CHECK(io::to_json(*lit, c) == literal);
  CHECK(sim::simulate(c, *lit).valid);

  // The object remat-plan --json prints is accepted too.
  auto wrapped = io::schedule_from_json(json{{"status", "ok"}, {"schedule", literal}}, c);
  REQUIRE(wrapped.ok());
  CHECK(wrapped->ops == lit->ops);
  auto wrapped_program = io::schedule_from_json(json{{"status", "ok"}, {"schedule", p}});
  REQUIRE(wrapped_program.ok());
  CHECK(wrapped_program->ops == s->ops);

  // A program that is not chain-shaped (here: a_1 freed by hand, then the same program) is
  // written in the program's text form even when the chain is given.
  schedule odd = *lit;
  odd.ops.insert(odd.ops.begin() + 1,
                 {instruction::free(at.a(1)), instruction::fast_forward(at.fwd(1))});
  CHECK(!to_chain_ops(c.length(), odd).has_value());
  CHECK(io::to_json(odd, c) == io::to_json(odd));
}

TEST_CASE("json: with the chain, every program round-trips, chain-shaped or not") {
  const chain c = small_chain();
  const graph g = *build_graph(c);
  const chain_nodes at(c.length());

  // A graph policy's program over the chain's graph (store_all's, as checkmate would plan it:
  // its frees are not in the lowering's order), and the same with an offload of a gradient,
  // which the chain notation cannot name (delta_1, from B2 to B1): neither is chain-shaped.
  const schedule graph_plan{store_all_program(g), 0, 0};
  schedule offloading = graph_plan;
  const auto bwd2 =
      std::find(offloading.ops.begin(), offloading.ops.end(), instruction::compute(at.bwd(2)));
  REQUIRE(bwd2 != offloading.ops.end());
  offloading.ops.insert(bwd2 + 1,
                        {instruction::offload(at.delta(1)), instruction::wait(at.delta(1))});
  const auto bwd1 =
      std::find(offloading.ops.begin(), offloading.ops.end(), instruction::compute(at.bwd(1)));
  REQUIRE(bwd1 != offloading.ops.end());
  offloading.ops.insert(bwd1, {instruction::prefetch(at.delta(1)), instruction::wait(at.delta(1))});
  for (const schedule& s : {graph_plan, offloading}) {
    INFO("program: ", to_string(s));
    REQUIRE(sim::simulate(g, s).valid);
    CHECK_FALSE(to_chain_ops(c.length(), s).has_value());
    const json j = io::to_json(s, c);
    CHECK(j == io::to_json(s));  // program text: "C0", "C1", ...
    auto back = io::schedule_from_json(j, c);
    REQUIRE_MESSAGE(back.ok(), back.message());
    CHECK(back->ops == s.ops);
    // The object remat-plan --json prints for checkmate on a --chain, too.
    auto wrapped = io::schedule_from_json(json{{"status", "ok"}, {"schedule", j}}, c);
    REQUIRE(wrapped.ok());
    CHECK(wrapped->ops == s.ops);
  }

  // A chain-shaped program still writes, and reads back, in the chain notation (lowered).
  const json literal = json::parse(
      R"(["F1_ck", "O0", "F2_none", "F3_all", "B3", "W0", "F1_all", "F2_all", "B2", "B1"])");
  auto lowered = io::schedule_from_json(literal, c);
  REQUIRE_MESSAGE(lowered.ok(), lowered.message());
  CHECK(lowered->ops ==
        parse_chain_program(c.length(), "F1_ck O0 F2_none F3_all B3 W0 F1_all F2_all B2 B1")->ops);
  CHECK(lowered->ops[1] == instruction::offload(at.a(0)));
  CHECK(io::to_json(*lowered, c) == literal);
  CHECK(io::schedule_from_json(io::to_json(*lowered, c), c)->ops == lowered->ops);

  // A chain-shaped program of transfers alone has no F or B word to mark the notation: it is
  // written as program text ("O5", a_2's data node, not "O2"), so that it reads back as itself.
  const schedule transfers{{instruction::offload(at.a(2)), instruction::wait(at.a(2))}, 0, 0};
  REQUIRE(to_chain_ops(c.length(), transfers).has_value());
  const json tj = io::to_json(transfers, c);
  CHECK(tj == json::array({"O" + std::to_string(at.a(2)), "W" + std::to_string(at.a(2))}));
  CHECK(io::schedule_from_json(tj, c)->ops == transfers.ops);
  // The empty program, either way.
  CHECK(io::schedule_from_json(io::to_json(schedule{}, c), c)->ops.empty());

  // Program text that is not, with the chain's notation named as the alternative.
  CHECK(says(io::schedule_from_json(json::parse(R"(["C0", "X1"])"), c),
             {"schedule[1]", "not an instruction", "\"C<c>_ff\"", "or the chain notation",
              "\"F<l>_ck\""}));
}

TEST_CASE("json: malformed schedules are rejected with the position") {
  const chain c = small_chain();  // 3 stages
  auto bad = [&](const json& j, std::initializer_list<std::string_view> parts,
                 bool chain_notation = true) {
    auto r = chain_notation ? io::schedule_from_json(j, c) : io::schedule_from_json(j);
    if (r.ok() || r.code() != status::invalid_problem) return false;
    for (auto p : parts)
      if (r.message().find(p) == std::string::npos) {
        MESSAGE("message '" << r.message() << "' lacks '" << p << "'");
        return false;
      }
    return true;
  };
  CHECK(bad(json::parse(R"(["F1_ck", "F3_save"])"),
            {"schedule[1]", "F3_save", "not an instruction"}));
  CHECK(bad(json::parse(R"(["F1_ck", 3])"), {"schedule[1]", "an integer", "\"B<l>\""}));
  CHECK(bad(json::parse(R"(["F0_ck"])"), {"schedule[0]", "l >= 1"}));
  CHECK(bad(json("F1_ck"), {"schedule is a string", "array"}));
  CHECK(bad(json::object(), {"no \"schedule\" field"}));
  CHECK(bad(json{{"schedule", 1}}, {"schedule is an integer"}));
  // Words of the notation that break its rules on this chain: the lowering names the op.
  CHECK(bad(json::parse(R"(["F4_ck"])"), {"F4_ck at op 0", "stage 4 does not exist"}));
  CHECK(bad(json::parse(R"(["F1_ck", "F3_ck"])"), {"F3_ck at op 1", "a_2 is not in memory"}));
  CHECK(bad(json::parse(R"(["F1_ck", "B1"])"), {"B1 at op 1", "delta_1"}));
  // The program's text form has its own words.
  CHECK(bad(json::parse(R"(["C0", "F1_ck"])"),
            {"schedule[1]", "F1_ck", "not an instruction", "\"C<c>_ff\""}, false));
  CHECK(bad(json::parse(R"(["C0", 7])"), {"schedule[1]", "an integer (7)"}, false));
  CHECK(bad(json::parse(R"(["D-1"])"), {"schedule[0]"}, false));
  CHECK(bad(json::object(), {"no \"schedule\" field"}, false));
}

TEST_CASE("json: schedules with transfers round-trip, and bad transfers name the position") {
  const chain c{"two", 8, {{"s1", 1, 1, 8, 12, 0, 0}, {"loss", 1, 1, 4, 4, 0, 0}}};
  const json literal =
      json::parse(R"(["F1_ck", "O0", "F2_all", "B2", "W0", "P0", "W0", "F1_all", "B1"])");
  auto s = io::schedule_from_json(literal, c);
  REQUIRE(s.ok());
  const auto ops = to_chain_ops(c.length(), *s);
  REQUIRE(ops.has_value());
  CHECK((*ops)[1] == chain_op::offload(0));
  CHECK((*ops)[5] == chain_op::prefetch(0));
  CHECK((*ops)[6] == chain_op::wait(0));
  const chain_nodes at(c.length());
  CHECK(std::count(s->ops.begin(), s->ops.end(), instruction::offload(at.a(0))) == 1);
  CHECK(std::count(s->ops.begin(), s->ops.end(), instruction::wait(at.a(0))) == 2);
  CHECK(io::to_json(*s, c) == literal);
  CHECK(sim::simulate(c, *s).valid);
  // The program text form carries the transfers too.
  auto p = io::schedule_from_json(io::to_json(*s));
  REQUIRE(p.ok());
  CHECK(p->ops == s->ops);
  for (const char* bad : {R"(["O-1"])", R"(["O1_ck"])", R"(["W"])"}) {
    auto r = io::schedule_from_json(json::parse(bad), c);
    CHECK_FALSE(r.ok());
    CHECK(r.message().find("schedule[0]") != std::string::npos);
    CHECK(r.message().find("\"O<k>\"") != std::string::npos);
  }
  auto missing = io::schedule_from_json(json::parse(R"(["F1_ck", "O3"])"), c);
  CHECK(says(missing, {"O3 at op 1", "a_3 does not exist"}));
  // Without an F or B word, O, P and W words are program text: data node 3, not a_3.
  auto program = io::schedule_from_json(json::parse(R"(["O3"])"), c);
  REQUIRE(program.ok());
  CHECK(program->ops == std::vector{instruction::offload(3)});
  // O_k moves the tensor a_k also when abar_k is stored (its context stays on the device).
  auto whole = io::schedule_from_json(json::parse(R"(["F1_all", "O1"])"), c);
  REQUIRE_MESSAGE(whole.ok(), whole.message());
  CHECK(whole->ops.back() == instruction::offload(chain_nodes(c.length()).a(1)));
}

#ifdef REMAT_EXAMPLES_DIR
TEST_CASE("json: the example chains load, validate and look like their networks") {
  const std::filesystem::path dir = std::filesystem::path(REMAT_EXAMPLES_DIR) / "chains";
  auto resnet = io::load_chain(dir / "resnet_like.json");
  REQUIRE_MESSAGE(resnet.ok(), resnet.message());
  CHECK(validate(*resnet).ok());
  CHECK(resnet->length() == 20);
  CHECK(resnet->input_bytes == 32 * 3 * 224 * 224 * 4);  // the image batch, fp32
  // Bottleneck blocks keep several times their output for the backward.
  for (int l = 3; l <= 18; ++l) CHECK(resnet->abar(l) >= 3 * resnet->a(l));
  // Activations shrink through the network.
  CHECK(resnet->a(1) > resnet->a(10));
  CHECK(resnet->a(10) > resnet->a(18));
  CHECK(resnet->at(20).name == "cross_entropy");

  auto gpt = io::load_chain(dir / "gpt_like.json");
  REQUIRE_MESSAGE(gpt.ok(), gpt.message());
  CHECK(validate(*gpt).ok());
  CHECK(gpt->length() == 15);
  CHECK(gpt->input_bytes == 8 * 1024 * 8);  // int64 token ids
  for (int l = 2; l <= 13; ++l) {
    CHECK(gpt->abar(l) >= 10 * gpt->a(l));
    CHECK(gpt->at(l).forward_time > 0);
  }
  CHECK(gpt->a(14) == bytes{8} * 1024 * 50257 * 4);  // the logits, fp32
  CHECK(gpt->at(15).name == "cross_entropy");

  // Both are plannable by the optimal DP at a budget between the minimum and store-all.
  for (const chain* c : {&*resnet, &*gpt}) {
    const bytes lo = rotor{}.minimum_budget(*c);
    const bytes hi = sim::simulate(*c, *lower(c->length(), store_all::program(*c))).peak;
    CHECK(lo < hi);
    auto s = rotor{}.solve(*c, (lo + hi) / 2);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(s->predicted_time > c->ideal_time());
  }
}
#endif

TEST_CASE("chain JSON: stages' options (cost sets) round-trip, and bad ones are named") {
  chain c{"opts", 10, {{"s1", 1, 2, 100, 150, 5, 6}, {"loss", 1, 1, 4, 4, 0, 0}}};
  c.stages[0].options = {{0.5, 3, 400, 0, 8}, {2, 1, 100, 1, 1}};
  const auto back = io::chain_from_json(io::to_json(c));
  REQUIRE_MESSAGE(back.ok(), back.message());
  CHECK(*back == c);
  // Without options, nothing is written: older files and tools see the same JSON.
  c.stages[0].options.clear();
  CHECK_FALSE(io::to_json(c)["stages"][0].contains("options"));
  auto msg = [](const char* opts) {
    const std::string text =
        std::string(R"({"name": "x", "input_bytes": 1, "stages": [{"forward_time": 1, )"
                    R"("backward_time": 1, "output_bytes": 4, "saved_bytes": 4, "options": )") +
        opts + "}]}";
    return io::parse_chain(text).message();
  };
  CHECK(msg("3").find("\"options\" is an integer (3); it must be an array of option objects") !=
        std::string::npos);
  CHECK(msg(R"([{"forward_time": 1, "backward_time": 1}])")
            .find("options[0]: missing field \"saved_bytes\"") != std::string::npos);
  CHECK(msg(R"([{"forward_time": 1, "backward_time": 1, "saved_bytes": 8, "saved": 1}])")
            .find("options[0]: unknown field \"saved\"") != std::string::npos);
  CHECK(msg(R"([{"forward_time": 1, "backward_time": 1, "saved_bytes": 2}])")
            .find("option 1: saved_bytes (2)") != std::string::npos);
  CHECK(msg(R"([{"forward_time": 1, "backward_time": 1, "saved_bytes": 8}])") == "");
}
