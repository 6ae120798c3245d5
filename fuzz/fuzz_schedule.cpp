// Fuzz target: program text and JSON in both notations (include/remat/schedule/schedule.hpp:
// parse_program, parse_instruction; schedule/notation.hpp: parse_chain_ops, parse_chain_op,
// parse_chain_program, lower, to_chain_ops; io::schedule_from_json, with and without a chain).
// The input is read as a program ("C0 C1_ff D2 O3 ...") and as chain notation ("F1_ck F2_none
// ... B1"), and, when it is JSON, as both JSON forms. Properties: no crash, abort, sanitizer report
// or exception (but bad_alloc); what parses round-trips through its written form (text and JSON);
// lowered chain ops that the simulator accepts raise back to the same ops (to_chain_ops), and
// every chain-shaped program prints in the notation and parses back to itself; the simulator
// replays any parsed program on a small chain's graph and a small DAG's graph, with instantaneous
// and with slow transfers, without crashing, and a program it calls valid stays within the budget.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/core/machine.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

#include "check.hpp"

namespace {

using namespace remat;

constexpr bytes budget = 1000;

const chain& small_chain() {
  static const chain c{
      "fuzz",
      8,
      {{"a", 1, 2, 16, 32, 4, 8}, {"b", 1, 2, 16, 16, 0, 0}, {"loss", 0.5, 0.5, 4, 4, 0, 0}}};
  return c;
}

const graph& chain_graph() {
  static const graph g = [] {
    auto built = build_graph(small_chain());
    FUZZ_CHECK(built.ok(), built.message());
    return *built;
  }();
  return g;
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

/// Replays s on g with instantaneous and with slow transfers.
void replay(const graph& g, const schedule& s, const std::string& where) {
  for (const machine& hw : {machine{}, machine::with_bandwidth(3.0)}) {
    const auto r = sim::simulate(g, s, {.budget = budget, .record_timeline = false, .hw = hw});
    FUZZ_CHECK(r.valid || r.first_violation, where + ": an invalid replay without a violation");
    if (r.valid) FUZZ_CHECK(r.peak <= budget, where + ": a valid replay over the budget");
  }
}

/// A program over the small chain's graph that is chain-shaped prints in the chain notation and
/// parses back to itself.
void check_chain_shape(const schedule& s, const std::string& where) {
  const int n = small_chain().length();
  const auto text = to_chain_string(n, s);
  if (!text) return;
  const auto back = parse_chain_program(n, *text);
  FUZZ_CHECK(back.ok() && back->ops == s.ops,
             where + ": to_chain_string then parse_chain_program differ");
}

void check_program(const schedule& s, const std::string& where) {
  const auto back = parse_program(to_string(s));
  FUZZ_CHECK(back && back->ops == s.ops, where + ": to_string then parse_program differ");
  const auto from_json = io::schedule_from_json(io::to_json(s));
  FUZZ_CHECK(from_json.ok() && from_json->ops == s.ops, where + ": to_json then back differ");
  if (s.ops.size() > 20000) return;
  replay(small_graph(), s, where + " on the DAG");
  replay(chain_graph(), s, where + " on the chain's graph");
  check_chain_shape(s, where);
}

void check_chain_ops(const std::vector<chain_op>& ops, const std::string& where) {
  const auto again = parse_chain_ops(to_string(std::span<const chain_op>(ops)));
  FUZZ_CHECK(again && *again == ops, where + ": to_string then parse_chain_ops differ");
  if (ops.size() > 20000) return;
  const int n = small_chain().length();
  const auto s = lower(n, ops);
  if (!s) {
    FUZZ_CHECK(s.code() == status::invalid_problem && !s.message().empty(),
               where + ": " + s.message());
    return;
  }
  // Written back with the chain: the same words; as a program: the same instructions.
  const auto from_json = io::schedule_from_json(io::to_json(*s, small_chain()), small_chain());
  FUZZ_CHECK(from_json.ok() && from_json->ops == s->ops,
             where + ": to_json(s, chain) then back differ");
  check_program(*s, where + " (lowered)");
  const auto r =
      sim::simulate(chain_graph(), *s, {.budget = unlimited_bytes, .record_timeline = false});
  if (r.valid) {
    const auto raised = to_chain_ops(n, *s);
    FUZZ_CHECK(raised && *raised == ops,
               where + ": a valid lowered program does not raise to its chain ops");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (const auto s = parse_program(text)) check_program(*s, "text program");
  if (const auto ops = parse_chain_ops(text)) check_chain_ops(*ops, "chain notation");
  // parse_chain_program agrees with parse_chain_ops + lower, and fails with a message.
  const auto lowered = parse_chain_program(small_chain().length(), text);
  if (!lowered)
    FUZZ_CHECK(lowered.code() == status::invalid_problem && !lowered.message().empty(),
               "parse_chain_program");

  // Word by word: every instruction and chain op round-trips through its text.
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r') {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n' && text[j] != '\t' &&
           text[j] != '\r')
      ++j;
    const std::string_view word = text.substr(i, j - i);
    if (const auto ins = parse_instruction(word)) {
      const auto again = parse_instruction(to_string(*ins));
      FUZZ_CHECK(again && *again == *ins, "instruction '" + std::string(word) + "' round trip");
    }
    if (const auto op = parse_chain_op(word)) {
      const auto again = parse_chain_op(to_string(*op));
      FUZZ_CHECK(again && *again == *op, "chain op '" + std::string(word) + "' round trip");
    }
    i = j;
  }

  // Both JSON forms, when the input is JSON at all.
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return 0;
  const auto p = io::schedule_from_json(j);
  if (p)
    check_program(*p, "JSON program");
  else
    FUZZ_CHECK(p.code() == status::invalid_problem && !p.message().empty(), p.message());
  const auto cs = io::schedule_from_json(j, small_chain());
  if (cs) {
    check_program(*cs, "JSON chain program");
    check_chain_shape(*cs, "JSON chain program");
  } else {
    FUZZ_CHECK(cs.code() == status::invalid_problem && !cs.message().empty(), cs.message());
  }
  return 0;
}
