// The block view (problem/block.hpp): a block of a chain's graph and of a residual graph as
// training graphs of their own, planned as they are, and their programs lifted back.

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>
#include <remat/problem/builder.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;

namespace {

std::vector<std::string> names_of(const block_graph& b, const std::vector<int>& data) {
  std::vector<std::string> out;
  for (int d : data) out.push_back(b.g.data(d).name);
  std::sort(out.begin(), out.end());
  return out;
}

forward_dag residual() {
  forward_dag f{"res", 64, {}};
  auto op = [](std::string n, std::vector<std::string> in, bytes out) {
    forward_op o;
    o.name = std::move(n);
    o.inputs = in;
    o.forward_time = 1;
    o.backward_time = 2;
    o.output_bytes = out;
    o.phantom_bytes = out / 2;
    o.backward_reads = in;
    return o;
  };
  f.ops = {op("a", {"input"}, 100), op("b", {"a"}, 100), op("c", {"b"}, 100),
           op("add", {"a", "c"}, 100), op("loss", {"add"}, 4)};
  return f;
}

}  // namespace

TEST_CASE("block view: two stages of a chain, planned on their own and lifted back") {
  chain c{"c", 10, {}};
  for (int l = 1; l <= 4; ++l)
    c.stages.push_back({"s" + std::to_string(l), 1, 2, 100 * l, 150 * l, 0, 0});
  const graph g = *build_graph(c);
  const chain_nodes at(4);
  const std::vector<int> fwds{at.fwd(2), at.fwd(3)};
  auto b = extract_block(g, fwds);
  REQUIRE_MESSAGE(b.ok(), b.message());
  CHECK(validate(b->g).ok());
  // Interface: the block reads a_1 and delta_3, makes a_3 (read by stage 4) and delta_1.
  CHECK(names_of(*b, b->inputs) == std::vector<std::string>{"grad s3", "s1"});
  CHECK(names_of(*b, b->outputs) == std::vector<std::string>{"grad s1", "s3"});
  REQUIRE(b->placeholder_loss >= 0);
  CHECK(b->g.compute(b->placeholder_loss).kind == compute_kind::loss);
  CHECK(b->g.compute_count() == 5);  // 2 forwards, the placeholder, 2 backwards
  for (int d : b->inputs) CHECK(b->g.data(d).is_protected);
  for (int d : b->outputs) CHECK(b->g.data(d).is_protected);

  // Planned as it is: store-all's program of the block graph is valid, and never frees the
  // interface; lifted, its two parts are the block's forward and backward in the parent graph.
  const schedule s{store_all_program(b->g), b->g.ideal_time(), 0};
  const auto r = sim::simulate(b->g, s);
  CHECK_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
  const auto [fwd, bwd] = lift(*b, s);
  CHECK(fwd.ops.front() == instruction::compute(at.fwd(2)));
  CHECK(std::find(fwd.ops.begin(), fwd.ops.end(), instruction::compute(at.fwd(3))) !=
        fwd.ops.end());
  CHECK(bwd.ops.front() == instruction::compute(at.bwd(3)));
  for (const auto& part : {fwd, bwd})
    for (const auto& ins : part.ops) CHECK(ins.node >= 0);

  // Spliced into the parent's store-all order (stage 1 and 4 around it), the program is valid.
  schedule whole;
  whole.ops.push_back(instruction::compute(at.fwd(1)));
  whole.ops.insert(whole.ops.end(), fwd.ops.begin(), fwd.ops.end());
  const auto tail = *parse_chain_program(4, "F1_all F2_all F3_all F4_all B4");
  // F4_all, loss, B4 and its frees, as lowered:
  whole.ops.insert(whole.ops.end(), tail.ops.begin() + 3, tail.ops.end());
  whole.ops.insert(whole.ops.end(), bwd.ops.begin(), bwd.ops.end());
  // The block never frees its interface: the enclosing program frees a_3 and delta_3 after it.
  whole.ops.push_back(instruction::free(at.a(3)));
  whole.ops.push_back(instruction::free(at.delta(3)));
  const auto head = *parse_chain_program(4, "F1_all F2_all F3_all F4_all B4 B3 B2 B1");
  whole.ops.insert(whole.ops.end(), head.ops.end() - 4, head.ops.end());  // B1 and its frees
  const auto wr = sim::simulate(g, whole);
  CHECK_MESSAGE(wr.valid, (wr.first_violation ? wr.first_violation->message : "")
                              << "\n"
                              << to_string(g, whole));
  CHECK(wr.makespan == doctest::Approx(c.ideal_time()));
}

TEST_CASE("block view: the inner ops of a residual graph; a gradient summed inside and outside") {
  const graph g = *build_graph(residual());
  const int b_fwd = g.find_compute("fwd b"), c_fwd = g.find_compute("fwd c");
  auto blk = extract_block(g, std::vector<int>{b_fwd, c_fwd});
  REQUIRE_MESSAGE(blk.ok(), blk.message());
  // It reads 'a' and 'grad c' (from add's backward), makes 'c' (read by add) and a contribution to
  // 'grad a' (add's backward contributes too, outside).
  CHECK(names_of(*blk, blk->inputs) == std::vector<std::string>{"a", "grad c"});
  CHECK(names_of(*blk, blk->outputs) == std::vector<std::string>{"c", "grad a"});
  const schedule s{store_all_program(blk->g), blk->g.ideal_time(), 0};
  CHECK(sim::simulate(blk->g, s).valid);

  // The whole graph with its loss: no placeholder.
  std::vector<int> all;
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::forward) all.push_back(c);
  auto whole = extract_block(g, all);
  REQUIRE(whole.ok());
  CHECK(whole->placeholder_loss == -1);
  CHECK(whole->g.compute_count() == g.compute_count());
}

TEST_CASE("block view: bad blocks say what is wrong") {
  const graph g = *build_graph(residual());
  auto msg = [&](std::vector<int> f) {
    auto r = extract_block(g, f);
    return r ? std::string("ok") : r.err().message;
  };
  CHECK(msg({}).find("no forward given") != std::string::npos);
  CHECK(msg({99}).find("does not exist") != std::string::npos);
  CHECK(msg({g.find_compute("bwd b")}).find("is a backward") != std::string::npos);
  CHECK(msg({g.find_compute("fwd b"), g.find_compute("fwd b")}).find("listed twice") !=
        std::string::npos);
}
