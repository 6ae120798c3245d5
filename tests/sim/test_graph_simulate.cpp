// The graph simulator (sim/graph_simulate.hpp): the toy example of [Zhao24, §1.3]
// (Code 1.2 and its re-materialised version Code 1.5), store-all, multi-producer gradients,
// fast-forwards, the timeline, and every kind of violation.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;
using gi = instruction;
using vk = sim::violation_kind;

namespace {

/// The FB-graph of Code 1.2 (Figure 1.4), parameters left out (not in the activation budget):
///   x1 = F1(x0)  [matmul x0^T w1]     B1(x0, g1)     -> g0
///   x2 = F2(x1)  [matmul x1 w2]       B2(x1, g2)     -> g1
///   x3 = F3(x1, x2) [x1 + x2]         B3(x2, x1, g3) -> g2, g1  (as Code 1.5 calls it)
///   x4 = F4(x3)  [matmul x3 w4]       B4(x3, g4)     -> g3      (Code 1.5's B4(x3, g4, w3): w4)
///   Loss(x4) -> g4
/// g1 has two producers, B2 and B3 (§1.3.2 says "B2 and B1": B2 and B3). No phantoms: the thesis
/// draws none for this example. Sizes are ours (the thesis gives none); the loss stands for the
/// rest of the network, so it gets a large overhead.
struct toy {
  graph g{"toy"};
  int x0, x1, x2, x3, x4, g0, g1, g2, g3, g4;
  int f1, f2, f3, f4, loss, b4, b3, b2, b1;
  toy() {
    x0 = g.add_data({"x0", data_kind::activation, 4, true});
    x1 = g.add_data({"x1", data_kind::activation, 8, false});
    x2 = g.add_data({"x2", data_kind::activation, 32, false});
    x3 = g.add_data({"x3", data_kind::activation, 8, false});
    x4 = g.add_data({"x4", data_kind::activation, 2, false});
    g4 = g.add_data({"g4", data_kind::gradient, 2, false});
    g3 = g.add_data({"g3", data_kind::gradient, 8, false});
    g2 = g.add_data({"g2", data_kind::gradient, 32, false});
    g1 = g.add_data({"g1", data_kind::gradient, 8, false});
    g0 = g.add_data({"g0", data_kind::gradient, 4, true});
    f1 = fwd("F1", {x0}, x1);
    f2 = fwd("F2", {x1}, x2);
    f3 = fwd("F3", {x1, x2}, x3);
    f4 = fwd("F4", {x3}, x4);
    loss = g.add_compute({"Loss", compute_kind::loss, 0, 100, 0, 0});
    g.add_input(loss, x4);
    g.add_output(loss, g4);
    b4 = bwd("B4", {x3, g4}, {g3}, f4);
    b3 = bwd("B3", {x2, x1, g3}, {g2, g1}, f3);
    b2 = bwd("B2", {x1, g2}, {g1}, f2);
    b1 = bwd("B1", {x0, g1}, {g0}, f1);
  }
  int fwd(const char* name, std::vector<int> in, int out) {
    const int c = g.add_compute({name, compute_kind::forward, 1, 0, 1, 0});
    for (int d : in) g.add_input(c, d);
    g.add_output(c, out);
    return c;
  }
  int bwd(const char* name, std::vector<int> in, std::vector<int> out, int f) {
    const int c = g.add_compute({name, compute_kind::backward, 2, 0, 0, 0});
    for (int d : in) g.add_input(c, d);
    for (int d : out) g.add_output(c, d);
    g.set_backward(f, c);
    return c;
  }
  /// Code 1.5: x2 deleted after F3, recomputed before B3.
  [[nodiscard]] schedule code_1_5() const {
    return {{gi::compute(f1), gi::compute(f2), gi::compute(f3), gi::free(x2), gi::compute(f4),
             gi::compute(loss), gi::free(x4), gi::compute(b4), gi::free(g4), gi::free(x3),
             gi::compute(f2), gi::compute(b3), gi::free(g3), gi::free(x2), gi::compute(b2),
             gi::free(g2), gi::free(x1), gi::compute(b1), gi::free(g1)},
            0,
            0};
  }
};

sim::report run(const graph& g, const std::vector<gi>& ops, bytes budget = unlimited_bytes) {
  return sim::simulate(g, schedule{ops, 0, 0}, {.budget = budget});
}

bool mentions(const sim::report& r, const std::string& what) {
  if (!r.first_violation) return false;
  if (r.first_violation->message.find(what) != std::string::npos) return true;
  MESSAGE("message '" << r.first_violation->message << "' lacks '" << what << "'");
  return false;
}

/// The timeline's invariants: one point per instruction, contiguous in time and memory; a compute's
/// peak is the memory before it + what it allocates + its overhead; a free takes no time.
void check_timeline(const graph& g, const schedule& s, const sim::report& r) {
  REQUIRE(r.timeline.size() == s.ops.size());
  bytes mem = g.initial_bytes();
  seconds t = 0;
  bytes peak = mem;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const auto& p = r.timeline[i];
    const gi& op = s.ops[i];
    INFO("op ", i, " (", to_string(g, op), ")");
    CHECK(p.op == i);
    CHECK(p.start == t);
    CHECK(p.before == mem);
    if (op.op == op_kind::free) {
      CHECK(p.end == p.start);
      CHECK(p.peak == p.before);
      CHECK(p.after == p.before - g.data(op.node).size);
    } else {
      const compute_node& c = g.compute(op.node);
      const bool fast = op.op == op_kind::fast_forward;
      CHECK(p.end - p.start == (fast ? c.fast_time : c.time));
      CHECK(p.peak == p.after + (fast ? c.fast_overhead : c.overhead));
      CHECK(p.after >= p.before);
    }
    mem = p.after;
    t = p.end;
    peak = std::max(peak, p.peak);
  }
  CHECK(r.makespan == t);
  CHECK(r.peak == peak);
}

}  // namespace

TEST_CASE("the toy example: Code 1.2 (store-all) and Code 1.5 (recompute x2)") {
  const toy t;
  REQUIRE_MESSAGE(validate(t.g).ok(), validate(t.g).message());

  // Store-all: F1..F4, Loss, B4..B1, each tensor freed after its last use.
  const schedule sa{store_all_program(t.g), 0, 0};
  const std::vector<gi> expected{gi::compute(t.f1), gi::compute(t.f2),   gi::compute(t.f3),
                                 gi::compute(t.f4), gi::compute(t.loss), gi::free(t.x4),
                                 gi::compute(t.b4), gi::free(t.x3),      gi::free(t.g4),
                                 gi::compute(t.b3), gi::free(t.x2),      gi::free(t.g3),
                                 gi::compute(t.b2), gi::free(t.x1),      gi::free(t.g2),
                                 gi::compute(t.b1), gi::free(t.g1)};
  CHECK(sa.ops == expected);
  const auto r = sim::simulate(t.g, sa);
  CHECK_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
  // Memory by hand: 4, F1 12, F2 44, F3 52, F4 54, Loss 54+2+100 = 156 (then 54), B4 62 (52),
  // B3 52+32+8 = 92 (52), B2 52 (12, g1's second contribution allocates nothing), B1 16 (8).
  CHECK(r.peak == 156);
  CHECK(r.makespan == 4 * 1 + 4 * 2);
  CHECK(r.timeline.back().after == 8);  // x0 and g0, the protected input and output
  check_timeline(t.g, sa, r);

  // Code 1.5: without x2 between F4 and B4, the loss step needs 32 bytes less; F2 runs twice.
  const schedule c15 = t.code_1_5();
  const auto q = sim::simulate(t.g, c15);
  CHECK_MESSAGE(q.valid, (q.first_violation ? q.first_violation->message : ""));
  CHECK(q.peak == 124);
  CHECK(q.makespan == 5 * 1 + 4 * 2);
  check_timeline(t.g, c15, q);
  std::vector<bytes> peaks;
  for (const auto& p : q.timeline) peaks.push_back(p.peak);
  CHECK(peaks == std::vector<bytes>{12, 44, 52, 52, 22, 124, 24, 30, 30, 28, 52, 92, 92, 84, 52, 52,
                                    20, 16, 16});
  // Exactly the peak fits; one byte less does not, at the loss, and the replay goes on.
  CHECK(run(t.g, c15.ops, 124).valid);
  const auto over = run(t.g, c15.ops, 123);
  CHECK_FALSE(over.valid);
  REQUIRE(over.first_violation);
  CHECK(over.first_violation->kind == vk::over_budget);
  CHECK(over.first_violation->op == 5);
  CHECK(over.peak == 124);
  CHECK(over.timeline.size() == c15.ops.size());
  CHECK(mentions(over, "instruction 5 (C4)"));

  // Without x2 recomputed, B3 misses it.
  std::vector<gi> no_recompute = c15.ops;
  no_recompute.erase(no_recompute.begin() + 10);
  const auto m = run(t.g, no_recompute);
  CHECK(m.first_violation->kind == vk::missing_input);
  CHECK(m.first_violation->op == 10);
  CHECK(mentions(m, "'B3': its input 'x2' is not in memory"));

  // Text forms.
  CHECK(to_string(schedule{{gi::compute(0), gi::fast_forward(3), gi::free(5)}, 0, 0}) ==
        "C0 C3_ff D5");
  CHECK(to_string(t.g, gi::free(t.x2)) == "free x2");
  CHECK(to_string(t.g, gi::compute(t.b3)) == "B3");
  CHECK(to_string(t.g, gi::fast_forward(t.f2)) == "F2 [ff]");
  CHECK(to_string(t.g, gi::free(99)) == "D99");
}

TEST_CASE(
    "a multi-producer gradient is usable only when all its contributions ran since it was "
    "created") {
  const toy t;
  // Up to B3: g1 holds B3's contribution, B2's is missing.
  const std::vector<gi> head{gi::compute(t.f1), gi::compute(t.f2),   gi::compute(t.f3),
                             gi::compute(t.f4), gi::compute(t.loss), gi::compute(t.b4),
                             gi::compute(t.b3)};
  SUBCASE("B1 before B2") {
    std::vector<gi> ops = head;
    ops.push_back(gi::compute(t.b1));
    const auto r = run(t.g, ops);
    CHECK(r.first_violation->kind == vk::incomplete_input);
    CHECK(r.first_violation->op == 7);
    CHECK(mentions(r, "'B1': its input 'g1' is incomplete: the contributions of 'B2' (compute 7)"));
  }
  SUBCASE("the first contribution allocates, the second adds to it") {
    std::vector<gi> ops = head;
    ops.push_back(gi::compute(t.b2));
    ops.push_back(gi::compute(t.b1));
    const auto r = run(t.g, ops);
    REQUIRE(r.timeline.size() == ops.size());
    CHECK(r.timeline[6].after - r.timeline[6].before == 32 + 8);  // B3: g2 and g1
    CHECK(r.timeline[7].after == r.timeline[7].before);           // B2: into g1
    CHECK(r.first_violation->kind == vk::wrong_final_state);      // nothing was freed
  }
  SUBCASE("freeing a partial gradient drops its contributions") {
    std::vector<gi> ops = head;
    ops.push_back(gi::free(t.g1));
    ops.push_back(gi::compute(t.b2));
    ops.push_back(gi::compute(t.b1));
    const auto r = run(t.g, ops);
    CHECK(r.first_violation->kind == vk::incomplete_input);
    CHECK(r.first_violation->op == 9);
    CHECK(mentions(r, "the contributions of 'B3' (compute 6) have not run since it was created"));
  }
  SUBCASE("a contribution summed twice: a backward runs once") {
    // A second B3 would add its contribution to g1 again, and its parameter gradients too: the
    // simulator refuses any second run of a backward, whatever is in memory.
    std::vector<gi> ops = head;
    ops.push_back(gi::compute(t.b3));
    auto r = run(t.g, ops);
    CHECK(r.first_violation->kind == vk::backward_repeated);
    CHECK(r.first_violation->op == 7);
    ops.insert(ops.end() - 1, gi::free(t.g2));
    r = run(t.g, ops);
    CHECK(r.first_violation->kind == vk::backward_repeated);
    CHECK(r.first_violation->op == 8);
  }
  SUBCASE("recomputing a contribution after its gradient was freed and rebuilt is refused") {
    // B3, free g1 and g2, B3 again (g3 and x2 still there): the graph model would allow it, the
    // parameter gradients would not.
    std::vector<gi> ops = head;
    for (gi i : {gi::free(t.g1), gi::free(t.g2), gi::compute(t.b3)}) ops.push_back(i);
    const auto r = run(t.g, ops);
    CHECK(r.first_violation->kind == vk::backward_repeated);
    CHECK(r.first_violation->op == 9);
    CHECK(mentions(r, "'B3': a backward runs exactly once"));
  }
}

TEST_CASE("every kind of violation, with the instruction and the nodes") {
  const toy t;
  const schedule sa{store_all_program(t.g), 0, 0};
  auto with = [&](std::size_t at, std::vector<gi> insert, std::size_t erase = 0) {
    std::vector<gi> ops = sa.ops;
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(at),
              ops.begin() + static_cast<std::ptrdiff_t>(at + erase));
    ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at), insert.begin(), insert.end());
    return run(t.g, ops);
  };
  SUBCASE("invalid graph") {
    toy u;
    u.g.compute(u.loss).kind = compute_kind::backward;
    const auto r = sim::simulate(u.g, sa);
    CHECK(r.first_violation->kind == vk::invalid_graph);
    CHECK(mentions(r, "no loss node"));
    CHECK_FALSE(r.valid);
  }
  SUBCASE("unknown nodes") {
    auto r = with(0, {gi::compute(99)});
    CHECK(r.first_violation->kind == vk::unknown_node);
    CHECK(mentions(
        r,
        "instruction 0 (C99): compute node 99 does not exist (the graph has compute nodes 0..8)"));
    r = with(1, {gi::free(-1)});
    CHECK(r.first_violation->kind == vk::unknown_node);
    CHECK(mentions(r, "data node -1 does not exist"));
  }
  SUBCASE("fast-forward of a node that is not a forward") {
    const auto r = with(4, {gi::fast_forward(t.loss)}, 1);
    CHECK(r.first_violation->kind == vk::invalid_instruction);
    CHECK(mentions(r, "'Loss' is a loss; only forwards have a fast-forward variant"));
  }
  SUBCASE("missing input") {
    const auto r = run(t.g, {gi::compute(t.f2)});
    CHECK(r.first_violation->kind == vk::missing_input);
    CHECK(r.first_violation->op == 0);
    CHECK(mentions(r, "'F2': its input 'x1' is not in memory"));
  }
  SUBCASE("already present") {
    const auto r = with(1, {gi::compute(t.f1)});
    CHECK(r.first_violation->kind == vk::already_present);
    CHECK(r.first_violation->op == 1);
    CHECK(mentions(r, "its output 'x1' is already in memory; free it before recomputing"));
    // Freed first, the recompute is fine (and allocates it again).
    const auto ok = with(1, {gi::free(t.x1), gi::compute(t.f1)});
    CHECK_MESSAGE(ok.valid, (ok.first_violation ? ok.first_violation->message : ""));
    CHECK(ok.makespan == 13);
  }
  SUBCASE("free of data not in memory") {
    const auto r = with(0, {gi::free(t.x1)});
    CHECK(r.first_violation->kind == vk::not_in_memory);
    CHECK(mentions(r, "instruction 0 (D1): 'x1' is not in memory"));
  }
  SUBCASE("free of protected data") {
    const auto r = with(2, {gi::free(t.x0)});
    CHECK(r.first_violation->kind == vk::protected_free);
    CHECK(mentions(r, "'x0' is protected"));
  }
  SUBCASE("the loss twice") {
    const auto r = with(5, {gi::compute(t.loss)});
    CHECK(r.first_violation->kind == vk::loss_repeated);
    CHECK(r.first_violation->op == 5);
    CHECK(mentions(r, "'Loss': the loss runs exactly once"));
    // Even with its output freed in between.
    const auto s = with(6, {gi::free(t.g4), gi::compute(t.loss)});
    CHECK(s.first_violation->kind == vk::loss_repeated);
  }
  SUBCASE("a backward twice") {
    const auto at = static_cast<std::size_t>(
        std::find(sa.ops.begin(), sa.ops.end(), gi::compute(t.b4)) - sa.ops.begin());
    REQUIRE(at < sa.ops.size());
    const auto r = with(at + 1, {gi::compute(t.b4)});
    CHECK(r.first_violation->kind == vk::backward_repeated);
    CHECK(r.first_violation->op == at + 1);
    CHECK(mentions(r, "'B4': a backward runs exactly once"));
  }
  SUBCASE("over budget") {
    const auto r = run(t.g, sa.ops, 155);
    CHECK(r.first_violation->kind == vk::over_budget);
    CHECK(r.first_violation->op == 4);
    CHECK(mentions(r, "needs 156 bytes while it runs, over the budget of 155 bytes"));
    CHECK(r.peak == 156);
  }
  SUBCASE("wrong final state: data left, a node never run") {
    auto r = run(t.g, std::vector<gi>(sa.ops.begin(), sa.ops.end() - 1));
    CHECK(r.first_violation->kind == vk::wrong_final_state);
    CHECK(r.first_violation->op == sa.ops.size() - 1);
    CHECK(mentions(r, "ends with 'g1' still in memory"));
    r = run(t.g, std::vector<gi>(sa.ops.begin(), sa.ops.end() - 2));
    CHECK(r.first_violation->kind == vk::wrong_final_state);
    CHECK(mentions(r, "ends without running 'B1' (compute 8)"));
    CHECK(mentions(r, "memory still holds 'g1'"));
    r = run(t.g, {});
    CHECK(r.first_violation->kind == vk::wrong_final_state);
    CHECK(r.first_violation->op == 0);
    CHECK(r.peak == 4);
  }
}

TEST_CASE(
    "fast-forward: no phantom, its own time and overhead; a backward needs the normal forward") {
  // Two ops and the loss function, through the builder: a (phantom 5), b (phantom 3), l.
  forward_dag f{"ff", 10, {}};
  f.ops.push_back({"a", {"input"}, 1.0, 2.0, 20, 5, {"input"}, 7, 0, 11});
  f.ops.push_back({"b", {"a"}, 1.0, 2.0, 30, 3, {"a"}, 0, 0, std::nullopt});
  f.ops.push_back({"l", {"b"}, 0.5, 0.5, 4, 0, {"b"}, 0, 0, std::nullopt});
  graph g = build_graph(f).value();
  g.compute(0).fast_time = 0.75;
  const training_layout lay{3};
  const int fa = lay.forward(0), fb = lay.forward(1), fl = lay.forward(2);

  // fast a: 10 + 20 + 7 (no phantom, fast overhead), 0.75 s; normal a: 10 + 25 + 11, 1 s.
  auto r = run(g, {gi::fast_forward(fa)});
  CHECK(r.timeline[0].peak == 37);
  CHECK(r.timeline[0].after == 30);
  CHECK(r.timeline[0].end == 0.75);
  r = run(g, {gi::compute(fa)});
  CHECK(r.timeline[0].peak == 46);
  CHECK(r.timeline[0].after == 35);

  // Forward phase in fast mode, then the backward of b misses its phantom.
  const std::vector<gi> fwd{gi::fast_forward(fa), gi::fast_forward(fb), gi::compute(fl),
                            gi::compute(lay.loss()), gi::compute(lay.backward(2))};
  std::vector<gi> ops = fwd;
  ops.push_back(gi::compute(lay.backward(1)));
  r = run(g, ops);
  CHECK(r.first_violation->kind == vk::missing_input);
  CHECK(mentions(r, "'bwd b': its input 'phantom b' is not in memory"));

  // Rerunning b normally while its output is stored: free it first; then the backward runs.
  ops = fwd;
  ops.push_back(gi::compute(fb));
  r = run(g, ops);
  CHECK(r.first_violation->kind == vk::already_present);
  ops = fwd;
  for (gi i : {gi::free(lay.activation(1)), gi::compute(fb), gi::compute(lay.backward(1))})
    ops.push_back(i);
  r = run(g, ops);
  CHECK(r.first_violation->kind == vk::wrong_final_state);  // the rest of the schedule is missing
  CHECK(mentions(r, "ends without running 'bwd a'"));
  // A fast-forward of a whose phantom is stored is fine: it creates no phantom, only a.
  r = run(g, {gi::compute(fa), gi::free(lay.activation(0)), gi::fast_forward(fa)});
  CHECK(r.timeline[2].after == 35);
  CHECK(r.first_violation->kind == vk::wrong_final_state);
}
