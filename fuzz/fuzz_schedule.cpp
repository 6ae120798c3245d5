// Fuzz target: schedule text and JSON (remat::parse_schedule and parse_instruction,
// include/remat/schedule/schedule.hpp; parse_graph_instruction, schedule/graph_schedule.hpp;
// io::schedule_from_json and io::graph_schedule_from_json).
// The input is read as a text program ("F1_ck F2_none ... B1") and as a graph program
// ("C0 C1_ff D2 ...") and, when it is JSON, as both JSON forms. Properties: no crash, abort,
// sanitizer report or exception (but bad_alloc); what parses round-trips through its written form;
// the simulators replay any parsed program on a small chain and a small graph without crashing,
// and a program they call valid stays within their peak.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/schedule/graph_schedule.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/graph_simulate.hpp>
#include <remat/sim/simulate.hpp>

#include "check.hpp"

namespace {

using namespace remat;

const chain& small_chain() {
  static const chain c{"fuzz", 8,
                       {{"a", 1, 2, 16, 32, 4, 8}, {"b", 1, 2, 16, 16, 0, 0}, {"loss", 0.5, 0.5, 4, 4, 0, 0}}};
  return c;
}

const graph& small_graph() {
  static const graph g = [] {
    forward_dag f;
    f.name = "fuzz";
    f.input_bytes = 8;
    f.ops = {{"a", {"input"}, 1, 2, 16, 16, {"input"}, 0, 0, {}},
             {"b", {"a"}, 1, 2, 16, 16, {"a"}, 0, 0, {}},
             {"c", {"a", "b"}, 1, 2, 16, 16, {"a", "b"}, 0, 0, {}},
             {"loss", {"c"}, 0.5, 0.5, 4, 4, {"c"}, 0, 0, {}}};
    auto built = build_graph(f);
    FUZZ_CHECK(built.ok(), built.message());
    return *built;
  }();
  return g;
}

void check_chain_program(const schedule& s, const std::string& where) {
  const auto back = parse_schedule(to_string(s));
  FUZZ_CHECK(back && back->ops == s.ops, where + ": to_string then parse_schedule differ");
  const auto j = io::to_json(s);
  const auto from_json = io::schedule_from_json(j);
  FUZZ_CHECK(from_json.ok() && from_json->ops == s.ops, where + ": to_json then back differ");
  if (s.ops.size() > 20000) return;
  const auto r = sim::simulate(small_chain(), s, {.budget = 1000, .record_timeline = false});
  FUZZ_CHECK(r.valid || r.first_violation, where + ": an invalid replay without a violation");
  if (r.valid) FUZZ_CHECK(r.peak <= 1000, where + ": a valid replay over the budget");
}

void check_graph_program(const graph_schedule& s, const std::string& where) {
  for (const auto& i : s.ops) {
    const auto back = parse_graph_instruction(to_string(i));
    FUZZ_CHECK(back && *back == i, where + ": to_string then parse_graph_instruction differ");
  }
  const auto from_json = io::graph_schedule_from_json(io::to_json(s));
  FUZZ_CHECK(from_json.ok() && from_json->ops == s.ops, where + ": to_json then back differ");
  if (s.ops.size() > 20000) return;
  const auto r = sim::simulate(small_graph(), s, {.budget = 1000, .record_timeline = false});
  FUZZ_CHECK(r.valid || r.first_violation, where + ": an invalid replay without a violation");
  if (r.valid) FUZZ_CHECK(r.peak <= 1000, where + ": a valid replay over the budget");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The chain program's text form.
  if (const auto s = parse_schedule(text)) check_chain_program(*s, "text program");

  // The graph program's text form: words separated by white space, each "C3", "C3_ff" or "D5".
  graph_schedule gs;
  bool graph_ok = true;
  std::size_t words = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r') {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n' && text[j] != '\t' && text[j] != '\r') ++j;
    const std::string_view word = text.substr(i, j - i);
    ++words;
    if (const auto ins = parse_instruction(word)) {
      const auto again = parse_instruction(to_string(*ins));
      FUZZ_CHECK(again && *again == *ins, "instruction '" + std::string(word) + "' round trip");
    }
    if (const auto gi = parse_graph_instruction(word)) {
      if (graph_ok) gs.ops.push_back(*gi);
    } else {
      graph_ok = false;
    }
    i = j;
  }
  if (graph_ok && words > 0) check_graph_program(gs, "graph text program");

  // Both JSON forms, when the input is JSON at all.
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return 0;
  const auto cs = io::schedule_from_json(j);
  if (cs) check_chain_program(*cs, "JSON program");
  else FUZZ_CHECK(cs.code() == status::invalid_problem && !cs.message().empty(), cs.message());
  const auto g = io::graph_schedule_from_json(j);
  if (g) check_graph_program(*g, "JSON graph program");
  else FUZZ_CHECK(g.code() == status::invalid_problem && !g.message().empty(), g.message());
  return 0;
}
