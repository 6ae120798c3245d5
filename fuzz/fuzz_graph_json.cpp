// Fuzz target: graph JSON (remat::io::parse_forward_dag and parse_graph,
// include/remat/io/graph_json.hpp).
// Properties: no crash, abort, sanitizer report or exception (but bad_alloc); a failure is an
// invalid_problem with a message; a forward DAG it accepts round-trips through to_json, builds a
// training graph, and the graph's store-all program replays in the simulator.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <remat/io/graph_json.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/sim/simulate.hpp>

#include "check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace remat;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto f = io::parse_forward_dag(text);
  if (!f) {
    FUZZ_CHECK(f.code() == status::invalid_problem, f.message());
    FUZZ_CHECK(!f.message().empty(), "an error without a message");
    return 0;
  }
  const std::string dumped = io::to_json(*f).dump();
  const auto back = io::parse_forward_dag(dumped);
  FUZZ_CHECK(back.ok(), back.message());
  FUZZ_CHECK(*back == *f, "to_json then parse_forward_dag gave another DAG: " + dumped);
  const auto g = build_graph(*f);
  if (!g) {
    FUZZ_CHECK(g.code() == status::invalid_problem, g.message());
    return 0;
  }
  if (g->compute_count() <= 2000) {
    const schedule s{store_all_program(*g), 0, 0};
    const auto rep = sim::simulate(*g, s, {.record_timeline = false});
    FUZZ_CHECK(rep.valid, "the graph's store-all program is invalid: " +
                              (rep.first_violation ? rep.first_violation->message : std::string()));
  }
  return 0;
}
