// Fuzz target: chain JSON (remat::io::parse_chain, include/remat/io/json.hpp).
// Properties: no crash, abort, sanitizer report or exception (but bad_alloc); a failure is an
// invalid_problem with a message; a chain it accepts passes validate(), round-trips through
// to_json, and its store-all program replays in the simulator.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <remat/io/json.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/sim/simulate.hpp>

#include "check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace remat;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = io::parse_chain(text);
  if (!r) {
    FUZZ_CHECK(r.code() == status::invalid_problem, r.message());
    FUZZ_CHECK(!r.message().empty(), "an error without a message");
    return 0;
  }
  const chain& c = *r;
  FUZZ_CHECK(validate(c).ok(), validate(c).message());
  const std::string dumped = io::to_json(c).dump();
  const auto back = io::parse_chain(dumped);
  FUZZ_CHECK(back.ok(), back.message());
  FUZZ_CHECK(*back == c, "to_json then parse_chain gave another chain: " + dumped);
  if (c.stages.size() <= 1000) {
    const auto s = lower(c.length(), store_all::program(c));
    FUZZ_CHECK(s.ok(), "store-all's chain ops do not lower: " + s.message());
    const auto rep = sim::simulate(c, *s, {.record_timeline = false});
    FUZZ_CHECK(rep.valid, "store-all's program is invalid: " +
                              (rep.first_violation ? rep.first_violation->message : std::string()));
  }
  return 0;
}
