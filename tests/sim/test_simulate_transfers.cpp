// The simulator's transfers (sim/simulate.hpp): offload, prefetch and wait
// on their own lanes, device and host memory, exact timelines, and every violation they bring.

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;

namespace {

std::vector<chain_op> parse(const std::string& text) {
  const auto s = parse_chain_ops(text);
  REQUIRE_MESSAGE(s.has_value(), "bad instruction in test data: " << text);
  return *s;
}

/// a_0 = 100; stage 1: a 100, abar 150, u 1/2; stage 2: a 100, abar 120, u 1/2; the loss: a 4,
/// abar 4, u 1/1. No overheads.
chain small_chain() {
  return chain{
      "t",
      100,
      {{"s1", 1, 2, 100, 150, 0, 0}, {"s2", 1, 2, 100, 120, 0, 0}, {"loss", 1, 1, 4, 4, 0, 0}}};
}

/// a_0 is offloaded during the forward phase and prefetched for B1's recomputation (the first
/// W0 confirms the offload, which ended long before: a prefetch needs its data on the host).
const char* const offload_input = "F1_ck O0 F2_all F3_all B3 B2 W0 P0 W0 F1_all B1";

struct point {
  seconds start, end;
  bytes before, peak, after;
  sim::lane lane;
};

void check_timeline(const sim::report& r, const std::vector<point>& want) {
  REQUIRE(r.timeline.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("op ", i);
    const sim::memory_point& p = r.timeline[i];
    CHECK(p.op == i);
    CHECK(p.start == want[i].start);
    CHECK(p.end == want[i].end);
    CHECK(p.before == want[i].before);
    CHECK(p.peak == want[i].peak);
    CHECK(p.after == want[i].after);
    CHECK(p.lane == want[i].lane);
  }
}

constexpr auto compute = sim::lane::compute;
constexpr auto d2h = sim::lane::device_to_host;
constexpr auto h2d = sim::lane::host_to_device;

sim::report run(const chain& c, const std::string& text, sim::options opt = {}) {
  return sim::simulate(c, parse(text), opt);
}

}  // namespace

TEST_CASE("transfers: infinite bandwidth frees at the offload and reserves at the prefetch") {
  const chain c = small_chain();
  const sim::report r = run(c, offload_input);
  REQUIRE_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
  // The last op, B1, leaves delta_0 and the graph input a_0, which the graph keeps (protected).
  check_timeline(r, {{0, 1, 100, 200, 200, compute},
                     {1, 1, 200, 200, 100, d2h},  // a_0 leaves at once
                     {1, 2, 100, 220, 220, compute},
                     {2, 3, 220, 224, 224, compute},
                     {3, 4, 224, 324, 320, compute},  // B3: +delta_2, -abar_3
                     {4, 6, 320, 420, 100, compute},  // B2: only delta_1 is left
                     {6, 6, 100, 100, 100, compute},
                     {6, 6, 100, 200, 200, h2d},      // a_0 is back
                     {6, 6, 200, 200, 200, compute},  // nothing to wait for
                     {6, 7, 200, 350, 350, compute},
                     {7, 9, 350, 450, 200, compute}});
  CHECK(r.makespan == 9);
  CHECK(r.peak == 450);
  CHECK(r.host_peak == 100);
}

TEST_CASE(
    "transfers: a finite bandwidth overlaps copies with compute; memory moves at their ends") {
  const chain c = small_chain();
  // 40 bytes/s: a_0's 100 bytes take 2.5 s. The offload runs [1, 3.5]: a_0 stays on the device
  // until 3.5, in the middle of B3 [3, 4]; B3's peak is at its start, its end 100 lower. The
  // prefetch [6, 8.5] reserves at its start; the second W0 holds the compute lane until 8.5.
  const sim::report r = run(c, offload_input, {.hw = machine::with_bandwidth(40)});
  REQUIRE_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
  check_timeline(r, {{0, 1, 100, 200, 200, compute},
                     {1, 3.5, 200, 200, 200, d2h},
                     {1, 2, 200, 320, 320, compute},
                     {2, 3, 320, 324, 324, compute},
                     {3, 4, 324, 424, 320, compute},
                     {4, 6, 320, 420, 100, compute},
                     {6, 6, 100, 100, 100, compute},
                     {6, 8.5, 100, 200, 200, h2d},
                     {6, 8.5, 200, 200, 200, compute},
                     {8.5, 9.5, 200, 350, 350, compute},
                     {9.5, 11.5, 350, 450, 200, compute}});
  CHECK(r.makespan == 11.5);
  CHECK(r.peak == 450);
  CHECK(r.host_peak == 100);
  // The slow offload keeps a_0 through F2_all and F3_all (320 and 324 instead of 220 and 224),
  // still under B1's 450: a budget of 449 fails at B1, the first op over it.
  const sim::report tight =
      run(c, offload_input, {.budget = 449, .hw = machine::with_bandwidth(40)});
  CHECK_FALSE(tight.valid);
  REQUIRE(tight.first_violation);
  CHECK(tight.first_violation->kind == sim::violation_kind::over_budget);
  CHECK(tight.first_violation->op == 10);
  CHECK(tight.peak == 450);  // the replay goes on past the budget
}

TEST_CASE(
    "transfers: a prefetch queued behind another reserves its memory in the middle of an op") {
  // Four stages of 100-byte activations (abar 100 more), u_F = 1, u_B = 2; 100 bytes/s.
  chain c{"t4", 100, {}};
  for (int l = 1; l <= 3; ++l) c.stages.push_back({"s" + std::to_string(l), 1, 2, 100, 200, 0, 0});
  c.stages.push_back({"loss", 1, 2, 4, 4, 0, 0});
  const std::string text =
      "F1_ck O0 F2_ck O1 F3_all F4_all W0 W1 P1 P0 B4 B3 W1 F2_all B2 W0 F1_all B1";
  const sim::report r = run(c, text, {.hw = machine::with_bandwidth(100)});
  REQUIRE_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
  REQUIRE(r.timeline.size() == 18);
  // O0 [1, 2] on the D2H lane; O1 is issued at 2 (after F2_ck) and runs [2, 3].
  CHECK(r.timeline[1].start == 1);
  CHECK(r.timeline[1].end == 2);
  CHECK(r.timeline[3].start == 2);
  CHECK(r.timeline[3].end == 3);
  // F3_all [2, 3] starts with a_0 gone (freed at 2) and a_1 still there (until 3).
  CHECK(r.timeline[4].before == 200);  // a_1 and a_2
  CHECK(r.timeline[4].after == 400);   // + abar_3; a_1 leaves at 3, the boundary
  // F4_all [3, 4]; the waits cost nothing: both offloads ended at 3.
  CHECK(r.timeline[6].start == 4);
  CHECK(r.timeline[6].end == 4);
  CHECK(r.timeline[7].end == 4);
  // P1 [4, 5] reserves at once; P0 waits for the H2D lane: [5, 6], in the middle of B4 [4, 6].
  CHECK(r.timeline[8].start == 4);
  CHECK(r.timeline[8].end == 5);
  CHECK(r.timeline[9].start == 5);
  CHECK(r.timeline[9].end == 6);
  CHECK(r.timeline[9].peak == r.timeline[9].before);  // nothing of P0 is reserved yet at 4
  const sim::memory_point& b4 = r.timeline[10];
  CHECK(b4.start == 4);
  CHECK(b4.end == 6);
  // B4 holds delta_3 (100) on top of what is stored; P0's 100 bytes join at 5.
  CHECK(b4.peak == b4.before + 100 + 100);
  CHECK(r.timeline[12].start == 8);  // W1 after B3 [6, 8]: P1 ended long ago
  CHECK(r.timeline[12].end == 8);
  CHECK(r.makespan == r.timeline.back().end);
  CHECK(r.host_peak == 200);
}

TEST_CASE("transfers: a schedule without transfers simulates as before, at any bandwidth") {
  const chain c = small_chain();
  const std::vector<chain_op> s = parse("F1_ck F2_none F3_all B3 F1_all F2_all B2 B1");
  const sim::report inf = sim::simulate(c, s);
  const sim::report slow = sim::simulate(c, s, {.hw = machine::with_bandwidth(1e-3)});
  REQUIRE(inf.valid);
  REQUIRE(slow.valid);
  CHECK(inf.makespan == slow.makespan);
  CHECK(inf.peak == slow.peak);
  CHECK(inf.host_peak == 0);
  REQUIRE(inf.timeline.size() == slow.timeline.size());
  for (std::size_t i = 0; i < inf.timeline.size(); ++i) {
    CHECK(inf.timeline[i].start == slow.timeline[i].start);
    CHECK(inf.timeline[i].peak == slow.timeline[i].peak);
    CHECK(inf.timeline[i].lane == compute);
  }
}

TEST_CASE("transfers: every misuse is a violation naming the op") {
  const chain c = small_chain();
  struct bad_case {
    const char* text;
    sim::violation_kind kind;
    std::size_t op;
    const char* says;
  };
  using vk = sim::violation_kind;
  for (const bad_case& b : {
           // Compute uses an activation that is not resident.
           bad_case{
               "F1_ck O0 F2_all F3_all B3 B2 W0 F1_all B1", vk::not_resident, 7,
               "F1_all: its input 'a_0' is on the host (O0 at op 1); prefetch it and wait for it"},
           bad_case{"F1_ck O0 F2_all F3_all B3 B2 W0 P0 F1_all B1", vk::not_resident, 8,
                    "F1_all: its input 'a_0' is being prefetched (P0 at op 7); wait for it first"},
           bad_case{"F1_ck O1 F2_all", vk::not_resident, 2,
                    "F2_all: its input 'a_1' is being offloaded (O1 at op 1)"},
           bad_case{"F1_ck O1 W1 F2_all", vk::not_resident, 3,
                    "F2_all: its input 'a_1' is on the host"},
           // Offloading twice, or what is not there.
           bad_case{"F1_ck O0 O0", vk::invalid_transfer, 2,
                    "O0: 'a_0' is already offloaded or in transfer (O0 at op 1)"},
           bad_case{"O1", vk::invalid_transfer, 0, "O1: 'a_1' is not in memory"},
           // O1 moves a_1 also when abar_1 is stored (the rest stays); F2 then needs it back.
           bad_case{"F1_all O1 W1 F2_all", vk::not_resident, 3,
                    "its input 'a_1' is on the host (O1 at op 1)"},
           // Prefetching what is not on the host.
           bad_case{"P0", vk::invalid_transfer, 0,
                    "P0: 'a_0' is not on the host (it is on the device; offload it first)"},
           bad_case{"P2", vk::invalid_transfer, 0,
                    "P2: 'a_2' is not on the host (it is not stored at all)"},
           bad_case{"O0 P0", vk::invalid_transfer, 1,
                    "P0: 'a_0' was offloaded (O0 at op 0) but not waited for; wait for it before "
                    "prefetching it"},
           bad_case{"O0 W0 P0 P0", vk::invalid_transfer, 3,
                    "P0: 'a_0' is already being prefetched (P0 at op 2)"},
           // Waiting for nothing.
           bad_case{"W0", vk::invalid_transfer, 0, "W0: 'a_0' has no transfer in flight"},
           bad_case{"O0 W0 W0", vk::invalid_transfer, 2,
                    "W0: 'a_0' has no transfer in flight (its offload was already waited for)"},
           // Unknown activation; a stored tensor recomputed while on the host.
           bad_case{"O4", vk::unknown_node, 0,
                    "O4 at op 0: activation a_4 does not exist (the chain has a_0..a_3)"},
           bad_case{"F1_ck O1 W1 F1_ck", vk::already_present, 3,
                    "F1_ck at op 3: a_1 is already in memory"},
           // Ending with something on the host.
           bad_case{"F1_ck O0 W0 F2_all F3_all B3 B2 F1_ck", vk::not_resident, 7,
                    "F1_ck: its input 'a_0' is on the host"},
           bad_case{"F1_all O0 W0 F2_all F3_all B3 B2", vk::wrong_final_state, 7,
                    "without running 'B1'"},
       }) {
    INFO(b.text);
    const sim::report r = run(c, b.text, {.hw = machine::with_bandwidth(1000)});
    CHECK_FALSE(r.valid);
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == b.kind);
    CHECK(r.first_violation->op == b.op);
    CHECK_MESSAGE(r.first_violation->message.find(b.says) != std::string::npos,
                  r.first_violation->message);
  }
}

TEST_CASE("transfers: an activation makes the round trip as often as the schedule says") {
  const chain c = small_chain();
  const sim::report r = run(c, "F1_ck O1 W1 P1 W1 O1 W1 P1 W1 F2_all F3_all B3 B2 F1_all B1",
                            {.hw = machine::with_bandwidth(50)});
  CHECK_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
  CHECK(r.host_peak == 100);
  // Four 2-second copies, each waited for: compute resumes at 1 + 8.
  CHECK(r.timeline[9].start == 9);
}

TEST_CASE("transfers: a bandwidth is >= 0 (0: no link) or it is refused") {
  const chain c = small_chain();
  for (double bw : {-1.0, -1e-300, std::numeric_limits<double>::quiet_NaN()})
    CHECK_THROWS_AS(run(c, offload_input, {.hw = machine::with_bandwidth(bw)}),
                    std::invalid_argument);
}

TEST_CASE("transfers: a machine without a link (bandwidth 0) refuses offloads and prefetches") {
  const chain c = small_chain();
  for (const machine hw : {machine::without_transfers(), machine{0, 1e9, unlimited_bytes}}) {
    const sim::report r = run(c, offload_input, {.hw = hw});
    CHECK_FALSE(r.valid);
    REQUIRE(r.first_violation);
    CHECK(r.first_violation->kind == sim::violation_kind::invalid_transfer);
    CHECK(r.first_violation->message.find("no device-to-host link (bandwidth 0)") !=
          std::string::npos);
  }
  const sim::report back = run(c, offload_input, {.hw = machine{1e9, 0, unlimited_bytes}});
  REQUIRE(back.first_violation);
  CHECK(back.first_violation->message.find("no host-to-device link") != std::string::npos);
  // A program without transfers runs on it as on any machine.
  const sim::report plain =
      run(c, "F1_all F2_all F3_all B3 B2 B1", {.hw = machine::without_transfers()});
  CHECK(plain.valid);
  CHECK_FALSE(machine::without_transfers().transfers());
  CHECK_FALSE(machine_error(machine::without_transfers()).has_value());
  CHECK(machine_error(machine{-1, 1, 0}).has_value());
}
