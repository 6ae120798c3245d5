// Forward-DAG JSON (io/graph_json.hpp): the example graphs load, build, simulate and round-trip;
// malformed input comes back as invalid_problem naming the op and the field, without throwing.

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

#include "support/io_checks.hpp"

using namespace remat;
using nlohmann::json;

namespace {

using remat::testing::says;

std::filesystem::path graphs_dir() {
#ifdef REMAT_EXAMPLES_DIR
  return std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs";
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "examples" /
         "graphs";
#endif
}

const char* valid_text = R"({
  "name": "tiny",
  "input_bytes": 64,
  "ops": [
    {"name": "a", "inputs": ["input"], "forward_time": 0.001, "backward_time": 0.002,
     "output_bytes": 128, "phantom_bytes": 32, "backward_reads": ["input", "output"],
     "forward_overhead_bytes": 16, "backward_overhead_bytes": 8},
    {"name": "b", "inputs": ["a", "input"], "forward_time": 0.0005, "backward_time": 0.001,
     "output_bytes": 128, "phantom_bytes": 0, "backward_reads": [], "forward_save_overhead_bytes": 4},
    {"name": "loss", "inputs": ["b"], "forward_time": 0, "backward_time": 0, "output_bytes": 4,
     "phantom_bytes": 0, "backward_reads": ["b"]}
  ]
})";

template <class Edit>
result<forward_dag> edited(Edit edit) {
  json j = json::parse(valid_text);
  edit(j);
  return io::forward_dag_from_json(j);
}

std::filesystem::path scratch(const std::string& name) {
  return testing::scratch("remat_test_graph_json_", name);
}

}  // namespace

TEST_CASE("the example graphs load, build, simulate and round-trip") {
  int seen = 0;
  for (const char* file : {"residual_net.json", "attention_block.json"}) {
    INFO(file);
    const auto path = graphs_dir() / file;
    const auto f = io::load_forward_dag(path);
    REQUIRE_MESSAGE(f.ok(), f.message());
    ++seen;
    CHECK(f->ops.size() >= 8);
    // Round trip through JSON values and through text.
    const auto back = io::forward_dag_from_json(io::to_json(*f));
    REQUIRE(back.ok());
    CHECK(*back == *f);
    const auto text_back = io::parse_forward_dag(io::to_json(*f).dump(2));
    REQUIRE(text_back.ok());
    CHECK(*text_back == *f);
    // The graph, built from the file or from the round-tripped DAG, is the same.
    const auto g = io::load_graph(path);
    REQUIRE_MESSAGE(g.ok(), g.message());
    CHECK(*g == build_graph(*back).value());
    CHECK(validate(*g).ok());
    // Some tensor is read twice (a residual, q/k/v): a gradient with several producers.
    bool multi = false;
    for (int d = 0; d < g->data_count(); ++d) multi = multi || g->producers(d).size() > 1;
    CHECK(multi);
    // Store-all runs; its peak is above the input and below the sum of everything.
    const auto r = sim::simulate(*g, schedule{store_all_program(*g), 0, 0});
    CHECK_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
    CHECK(r.makespan == doctest::Approx(g->ideal_time()));
    CHECK(r.peak > f->input_bytes);
  }
  CHECK(seen == 2);
}

TEST_CASE("the JSON fields map onto forward_op") {
  const auto f = io::parse_forward_dag(valid_text);
  REQUIRE_MESSAGE(f.ok(), f.message());
  CHECK(f->name == "tiny");
  CHECK(f->input_bytes == 64);
  REQUIRE(f->ops.size() == 3);
  const forward_op& a = f->ops[0];
  CHECK(a.inputs == std::vector<std::string>{"input"});
  CHECK(a.backward_reads == std::vector<std::string>{"input", "output"});
  CHECK(a.forward_time == 0.001);
  CHECK(a.phantom_bytes == 32);
  CHECK(a.forward_overhead_bytes == 16);
  CHECK(a.backward_overhead_bytes == 8);
  CHECK_FALSE(a.forward_save_overhead_bytes.has_value());
  CHECK(f->ops[1].forward_save_overhead_bytes == 4);
  CHECK(f->ops[1].forward_overhead_bytes == 0);
  CHECK(f->ops[1].backward_reads.empty());
  const auto g = io::parse_graph(valid_text);
  REQUIRE(g.ok());
  CHECK(g->producers(training_layout::input_gradient).size() == 2);
}

TEST_CASE("malformed forward DAGs name the op and the field") {
  CHECK(says(io::parse_forward_dag(""), {"the text is empty"}));
  CHECK(says(io::parse_forward_dag("{\"ops\": [}"), {"malformed JSON", "line 1"}));
  CHECK(says(io::parse_graph("[1, 2]"), {"must be a JSON object", "an array"}));
  CHECK(says(edited([](json& j) { j["opz"] = 1; }),
             {"unknown field \"opz\"", "did you mean \"ops\""}));
  CHECK(says(edited([](json& j) { j.erase("input_bytes"); }), {"missing field \"input_bytes\""}));
  CHECK(says(edited([](json& j) { j.erase("ops"); }), {"missing field \"ops\""}));
  CHECK(says(edited([](json& j) { j["ops"] = 3; }), {"\"ops\" is an integer (3)"}));
  CHECK(says(edited([](json& j) { j["ops"][1] = "b"; }), {"op 2 at ops[1] is a string"}));
  CHECK(says(edited([](json& j) { j["ops"][1].erase("name"); }),
             {"op 2 at ops[1]", "missing field \"name\""}));
  CHECK(says(edited([](json& j) { j["ops"][1]["name"] = 5; }),
             {"op 2 at ops[1]", "\"name\" is an integer"}));
  CHECK(says(
      edited([](json& j) { j["ops"][1]["ouput_bytes"] = 5; }),
      {"op 2 ('b') at ops[1]", "unknown field \"ouput_bytes\"", "did you mean \"output_bytes\""}));
  CHECK(says(edited([](json& j) { j["ops"][1].erase("phantom_bytes"); }),
             {"op 2 ('b') at ops[1]", "missing field \"phantom_bytes\""}));
  CHECK(says(edited([](json& j) { j["ops"][1].erase("backward_reads"); }),
             {"op 2 ('b') at ops[1]", "missing field \"backward_reads\""}));
  CHECK(says(edited([](json& j) { j["ops"][1]["inputs"] = "a"; }),
             {"op 2 ('b') at ops[1]", "\"inputs\" is a string"}));
  CHECK(says(edited([](json& j) { j["ops"][1]["inputs"][0] = 1; }),
             {"op 2 ('b') at ops[1]", "\"inputs\"[0] is an integer"}));
  CHECK(says(edited([](json& j) { j["ops"][1]["output_bytes"] = 1.5; }),
             {"op 2 ('b') at ops[1]", "\"output_bytes\"", "JSON integers"}));
  CHECK(says(edited([](json& j) { j["ops"][1]["forward_time"] = "1ms"; }),
             {"op 2 ('b') at ops[1]", "\"forward_time\"", "without quotes or units"}));
  // Errors found by the builder's checks name the op too.
  CHECK(says(edited([](json& j) { j["ops"][1]["inputs"][0] = "nope"; }),
             {"op 'b' (ops[1])", "'nope'", "dangling input"}));
  CHECK(says(edited([](json& j) {
               j["ops"][0]["inputs"][0] = "b";
               j["ops"][0]["backward_reads"] = json::array();
             }),
             {"form a cycle", "'a' -> 'b'", "'b' -> 'a'"}));
  CHECK(says(edited([](json& j) { j["ops"][1]["backward_reads"] = {"loss"}; }),
             {"op 'b' (ops[1])", "backward_reads", "'loss'"}));
  CHECK(says(edited([](json& j) { j["ops"][1]["forward_time"] = -1; }),
             {"op 'b' (ops[1])", "forward_time"}));
  CHECK(says(edited([](json& j) { j["ops"][1]["phantom_bytes"] = -1; }),
             {"op 'b' (ops[1])", "phantom_bytes"}));
  CHECK(says(edited([](json& j) {
               j["ops"][2]["inputs"] = {"a"};
               j["ops"][2]["backward_reads"] = {"a"};
             }),
             {"op 'b' (ops[1])", "nothing depends on it"}));
  CHECK(says(edited([](json& j) { j["ops"][1]["name"] = "a"; }), {"same name"}));
}

TEST_CASE("load_graph: files that cannot be read") {
  CHECK(says(io::load_graph(scratch("missing.json")), {"cannot read graph file", "missing.json"}));
  CHECK(says(io::load_graph(std::filesystem::temp_directory_path()), {"it is a directory"}));
  const auto path = scratch("bad.json");
  {
    std::ofstream out(path);
    out << R"({"input_bytes": 1, "ops": [{"name": "x", "inputs": ["input"]}]})";
  }
  CHECK(says(io::load_graph(path),
             {"graph file '", "op 1 ('x') at ops[0]", "missing field \"forward_time\""}));
  std::filesystem::remove(path);
}

TEST_CASE("graph programs: JSON round trip and malformed input") {
  const auto g = io::load_graph(graphs_dir() / "residual_net.json");
  REQUIRE(g.ok());
  schedule s{store_all_program(*g), 0, 0};
  // A fast-forward and transfers too, so that every instruction form goes through.
  s.ops.insert(s.ops.begin(),
               {instruction::fast_forward(0), instruction::free(1), instruction::offload(0),
                instruction::wait(0), instruction::prefetch(0), instruction::wait(0)});
  const auto j = io::to_json(s);
  REQUIRE(j.is_array());
  CHECK(j[0] == "C0_ff");
  CHECK(j[1] == "D1");
  CHECK(j[2] == "O0");
  CHECK(j[3] == "W0");
  CHECK(j[4] == "P0");
  const auto back = io::schedule_from_json(j);
  REQUIRE(back.ok());
  CHECK(back->ops == s.ops);
  const auto wrapped = io::schedule_from_json(nlohmann::json{{"schedule", j}});
  REQUIRE(wrapped.ok());
  CHECK(wrapped->ops == s.ops);

  using nlohmann::json;
  CHECK(says(io::schedule_from_json(json::object()), {"no \"schedule\" field"}));
  CHECK(says(io::schedule_from_json(json{{"schedule", 3}}), {"must be an array"}));
  CHECK(says(io::schedule_from_json(json::array({"C0", "F1_all"})),
             {"schedule[1]", "F1_all", "not an instruction", "C<c>_ff"}));
  CHECK(says(io::schedule_from_json(json::array({"C0", 7})), {"schedule[1]", "an integer (7)"}));
  CHECK(says(io::schedule_from_json(json::array({"D-1"})), {"schedule[0]"}));
  CHECK(says(io::schedule_from_json(json::array({"C2_fast"})), {"schedule[0]"}));
}
