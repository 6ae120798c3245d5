// The training graph (problem/graph.hpp) and its builder (problem/builder.hpp): the nodes a forward
// DAG becomes, every validation error naming the nodes, and chains converted to graphs giving the
// chain's peaks and times (store-all, and every policy's schedules lowered onto the graph).

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/periodic.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/rotor_floating.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

#include "support/chain_reference.hpp"
#include "support/random_chain.hpp"

using namespace remat;

namespace {

forward_op op(std::string name, std::vector<std::string> inputs, bytes out, bytes phantom,
              std::vector<std::string> reads) {
  return {std::move(name), std::move(inputs), 1.0, 2.0, out,
          phantom,         std::move(reads),  0,   0,   std::nullopt};
}

/// input -> a; b(a), c(a); d(b, c) is the loss function.
forward_dag diamond() {
  return {"diamond",
          10,
          {op("a", {"input"}, 20, 5, {"input"}), op("b", {"a"}, 30, 0, {"a", "output"}),
           op("c", {"a"}, 40, 7, {"a"}), op("d", {"b", "c"}, 4, 0, {"b", "c"})}};
}

/// conv1(input), conv2(conv1), add(conv2, input), loss(add).
forward_dag residual() {
  return {"residual",
          8,
          {op("conv1", {"input"}, 16, 16, {"input", "output"}),
           op("conv2", {"conv1"}, 16, 16, {"conv1"}), op("add", {"conv2", "input"}, 16, 0, {}),
           op("loss", {"add"}, 4, 0, {"add"})}};
}

std::vector<int> ints(std::span<const int> s) { return {s.begin(), s.end()}; }
std::vector<int> sorted(std::span<const int> s) {
  std::vector<int> v(s.begin(), s.end());
  std::sort(v.begin(), v.end());
  return v;
}

bool says(const result<void>& r, std::initializer_list<std::string_view> parts) {
  if (r.ok() || r.code() != status::invalid_problem) {
    MESSAGE("expected an invalid_problem error, got " << (r.ok() ? "ok" : r.message()));
    return false;
  }
  for (auto p : parts)
    if (r.message().find(p) == std::string::npos) {
      MESSAGE("message '" << r.message() << "' lacks '" << p << "'");
      return false;
    }
  return true;
}

/// A small hand-made valid graph: x0 -> F -> x1 (+ phantom p) -> loss -> g1 -> B -> g0.
struct tiny {
  graph g{"tiny"};
  int x0, g0, x1, g1, p, f, l, b;
  tiny() {
    x0 = g.add_data({"x0", data_kind::activation, 4, true});
    g0 = g.add_data({"g0", data_kind::gradient, 4, true});
    x1 = g.add_data({"x1", data_kind::activation, 8, false});
    g1 = g.add_data({"g1", data_kind::gradient, 8, false});
    p = g.add_data({"p", data_kind::phantom, 2, false});
    f = g.add_compute({"F", compute_kind::forward, 1, 0, 1, 0});
    l = g.add_compute({"L", compute_kind::loss, 0, 0, 0, 0});
    b = g.add_compute({"B", compute_kind::backward, 2, 0, 0, 0});
    g.add_input(f, x0);
    g.add_output(f, x1);
    g.add_output(f, p);
    g.add_input(l, x1);
    g.add_output(l, g1);
    g.add_input(b, g1);
    g.add_input(b, p);
    g.add_input(b, x0);
    g.add_output(b, g0);
    g.set_backward(f, b);
    g.set_gradient(x0, g0);
    g.set_gradient(x1, g1);
  }
};

}  // namespace

TEST_CASE("builder: a diamond gets a two-producer gradient, one backward per op, phantoms") {
  const auto r = build_graph(diamond());
  REQUIRE_MESSAGE(r.ok(), r.message());
  const graph& g = *r;
  const training_layout lay{4};
  CHECK(g.compute_count() == 9);
  CHECK(g.data_count() == 2 + 3 * 4);
  CHECK(validate(g).ok());
  CHECK(g.loss() == lay.loss());
  CHECK(g.topological_order() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8});

  // Names and kinds follow the layout.
  CHECK(g.compute(lay.forward(1)).name == "fwd b");
  CHECK(g.compute(lay.backward(1)).name == "bwd b");
  CHECK(g.compute(lay.backward(1)).kind == compute_kind::backward);
  CHECK(g.compute(lay.loss()).name == "loss");
  CHECK(g.data(lay.activation(2)).name == "c");
  CHECK(g.data(lay.gradient(2)).name == "grad c");
  CHECK(g.data(lay.phantom(2)).name == "phantom c");
  CHECK(g.data(lay.phantom(2)).size == 7);
  CHECK(g.data(lay.input).is_protected);
  CHECK(g.data(lay.input_gradient).is_protected);
  CHECK_FALSE(g.data(lay.activation(0)).is_protected);
  CHECK(g.find_compute("bwd c") == lay.backward(2));
  CHECK(g.find_data("grad a") == lay.gradient(0));
  CHECK(g.find_data("nope") == -1);

  // 'a' is read by b and c: its gradient has two producers, bwd b and bwd c.
  const int ga = lay.gradient(0);
  CHECK(sorted(g.producers(ga)) == std::vector<int>{lay.backward(2), lay.backward(1)});
  CHECK(ints(g.consumers(ga)) == std::vector<int>{lay.backward(0)});
  CHECK(g.gradient_of(lay.activation(0)) == ga);
  CHECK(g.activation_of(ga) == lay.activation(0));
  // 'a' is needed by fwd b, fwd c and the two backwards that read it.
  CHECK(sorted(g.consumers(lay.activation(0))) ==
        std::vector<int>{lay.forward(1), lay.forward(2), lay.backward(2), lay.backward(1)});
  // bwd b reads grad b, phantom b, a and its own output b; it contributes to grad a only.
  CHECK(sorted(g.inputs(lay.backward(1))) ==
        std::vector<int>{lay.activation(0), lay.activation(1), lay.gradient(1), lay.phantom(1)});
  CHECK(ints(g.outputs(lay.backward(1))) == std::vector<int>{ga});
  // d's backward contributes to both of its inputs' gradients.
  CHECK(sorted(g.outputs(lay.backward(3))) == std::vector<int>{lay.gradient(1), lay.gradient(2)});

  // Pairs and phantoms.
  for (int i = 0; i < 4; ++i) {
    CHECK(g.backward_of(lay.forward(i)) == lay.backward(i));
    CHECK(g.forward_of(lay.backward(i)) == lay.forward(i));
    CHECK(g.phantom_of(lay.forward(i)) == lay.phantom(i));
    CHECK(g.phantom_pair(lay.phantom(i)) == std::pair{lay.forward(i), lay.backward(i)});
  }
  CHECK(g.phantom_of(lay.backward(0)) == -1);
  // The loss reads d and creates its gradient, of 0 bytes (the constant 1 is not stored).
  CHECK(ints(g.inputs(lay.loss())) == std::vector<int>{lay.activation(3)});
  CHECK(ints(g.outputs(lay.loss())) == std::vector<int>{lay.gradient(3)});
  CHECK(g.data(lay.gradient(3)).size == 0);
  CHECK(g.data(lay.gradient(1)).size == 30);

  // Both forward variants: the normal one keeps the save overhead, the fast one the plain one.
  forward_dag f = diamond();
  f.ops[1].forward_overhead_bytes = 3;
  f.ops[1].forward_save_overhead_bytes = 11;
  f.ops[1].forward_time = 1.5;
  const graph g2 = build_graph(f).value();
  CHECK(g2.compute(lay.forward(1)).overhead == 11);
  CHECK(g2.compute(lay.forward(1)).fast_overhead == 3);
  CHECK(g2.compute(lay.forward(1)).time == 1.5);
  CHECK(g2.compute(lay.forward(1)).fast_time == 1.5);
  CHECK(g2.compute(lay.forward(2)).overhead == 0);
  CHECK(g.ideal_time() == doctest::Approx(4 * 1.0 + 4 * 2.0));
  CHECK(g.initial_bytes() == 10);
}

TEST_CASE("builder: a residual block sums two contributions into the protected input gradient") {
  const graph g = build_graph(residual()).value();
  const training_layout lay{4};
  CHECK(validate(g).ok());
  CHECK(sorted(g.producers(lay.input_gradient)) ==
        std::vector<int>{lay.backward(2), lay.backward(0)});
  CHECK(g.consumers(lay.input_gradient).empty());
  CHECK(sorted(g.consumers(lay.input)) ==
        std::vector<int>{lay.forward(0), lay.forward(2), lay.backward(0)});
  // add's backward reads nothing but its gradient and its (0-byte) phantom.
  CHECK(sorted(g.inputs(lay.backward(2))) == std::vector<int>{lay.gradient(2), lay.phantom(2)});
  CHECK(g.data(lay.phantom(2)).size == 0);
  // Store-all is valid and ends holding the input and its gradient.
  const schedule s{store_all_program(g)};
  const auto r = sim::simulate(g, s);
  CHECK_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
  CHECK(r.timeline.back().after == 2 * 8);
  CHECK(r.makespan == doctest::Approx(g.ideal_time()));
}

TEST_CASE("builder: multi-input ops, repeated inputs and listing order") {
  SUBCASE("an attention-like op reads two inputs and its output") {
    const forward_dag f{
        "attn",
        64,
        {op("q", {"input"}, 64, 0, {"input"}), op("k", {"input"}, 64, 0, {"input"}),
         op("v", {"input"}, 64, 0, {"input"}), op("s", {"q", "k"}, 256, 0, {"q", "k", "output"}),
         op("ctx", {"s", "v"}, 64, 0, {"s", "v"}), op("loss", {"ctx"}, 4, 0, {"ctx"})}};
    const graph g = build_graph(f).value();
    const training_layout lay{6};
    CHECK(sorted(g.inputs(lay.forward(3))) ==
          std::vector<int>{lay.activation(0), lay.activation(1)});
    CHECK(sorted(g.inputs(lay.backward(3))) ==
          std::vector<int>{lay.activation(0), lay.activation(1), lay.activation(3), lay.gradient(3),
                           lay.phantom(3)});
    CHECK(sorted(g.outputs(lay.backward(3))) == std::vector<int>{lay.gradient(0), lay.gradient(1)});
    // The input is read by q, k and v: three contributions.
    CHECK(g.producers(lay.input_gradient).size() == 3);
    CHECK(sim::simulate(g, schedule{store_all_program(g)}).valid);
  }
  SUBCASE("x * x contributes once to the gradient of x") {
    const forward_dag f{"square",
                        4,
                        {op("a", {"input"}, 8, 0, {"input"}), op("sq", {"a", "a"}, 8, 0, {"a"}),
                         op("loss", {"sq"}, 4, 0, {"sq"})}};
    const graph g = build_graph(f).value();
    const training_layout lay{3};
    CHECK(ints(g.producers(lay.gradient(0))) == std::vector<int>{lay.backward(1)});
    CHECK(ints(g.inputs(lay.forward(1))) == std::vector<int>{lay.activation(0)});
  }
  SUBCASE("ops listed out of order are sorted, keeping the listing order where possible") {
    const forward_dag f{
        "shuffled",
        4,
        {op("c", {"b"}, 8, 0, {}), op("a", {"input"}, 8, 0, {}), op("b", {"a"}, 8, 0, {}),
         op("x", {"input"}, 8, 0, {}), op("loss", {"c", "x"}, 4, 0, {})}};
    const graph g = build_graph(f).value();
    CHECK(validate(g).ok());
    std::vector<std::string> names;
    for (int i = 0; i < 5; ++i) names.push_back(g.compute(i).name);
    CHECK(names == std::vector<std::string>{"fwd a", "fwd b", "fwd c", "fwd x", "fwd loss"});
  }
}

TEST_CASE("forward DAG errors name the op and the field") {
  auto edit = [](auto change) {
    forward_dag f = diamond();
    change(f);
    return validate(f);
  };
  CHECK(validate(diamond()).ok());
  CHECK(says(edit([](forward_dag& f) {
               f.ops[1].inputs = {"a", "z"};
             }),
             {"op 'b' (ops[1])", "'z'", "dangling input"}));
  CHECK(says(edit([](forward_dag& f) {
               f.ops[0].inputs = {"c"};
               f.ops[0].backward_reads = {"c"};
             }),
             {"ops ", "form a cycle", "'a' -> 'c'", "'c' -> 'a'"}));
  CHECK(says(edit([](forward_dag& f) {
               f.ops[0].inputs = {"input", "b"};
             }),
             {"ops ", "form a cycle", "'a' -> 'b'", "'b' -> 'a'"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[1].inputs = {"b"}; }),
             {"op 'b' (ops[1])", "its own output"}));
  CHECK(says(edit([](forward_dag& f) {
               f.ops[3].inputs = {"b"};
               f.ops[3].backward_reads = {};
             }),
             {"op 'c' (ops[2])", "read by no op", "nothing depends on it", "'d'"}));
  CHECK(says(edit([](forward_dag& f) { f.ops.push_back(op("e", {"a"}, 1, 0, {})); }),
             {"op 'd' (ops[3])", "read by no op", "(the last op, 'e')"}));
  CHECK(says(edit([](forward_dag& f) {
               f.ops.push_back(op("e", {"d"}, 1, 0, {}));
               std::swap(f.ops[3], f.ops[4]);
             }),
             {"the last op 'd'", "op 'e' (ops[3]) reads it"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].name = "b"; }),
             {"op 'b' (ops[2])", "same name as ops[1]"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].name = "input"; }), {"ops[2]", "reserved"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].name = "output"; }), {"ops[2]", "reserved"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].name.clear(); }), {"op 3 at ops[2]", "no name"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].inputs.clear(); }),
             {"op 'c' (ops[2])", "inputs is empty"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].backward_reads = {"b"}; }),
             {"op 'c' (ops[2])", "backward_reads", "'b'", "not one of its inputs"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].forward_time = -1; }),
             {"op 'c' (ops[2])", "forward_time"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].backward_time = std::nan(""); }),
             {"op 'c' (ops[2])", "backward_time"}));
  // Times too large to sum: 1e308 each, one above max_time, or a sum that is.
  CHECK(says(edit([](forward_dag& f) { f.ops[1].forward_time = f.ops[1].backward_time = 1e308; }),
             {"op 'b' (ops[1])", "forward_time is 1e+308 s", "1e+15 s"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].backward_time = 1e25; }),
             {"op 'c' (ops[2])", "backward_time is 1e+25 s"}));
  CHECK(says(
      edit([](forward_dag& f) { f.ops[0].forward_time = f.ops[3].forward_time = 0.6 * max_time; }),
      {"op 'd' (ops[3])", "forward_time 6e+14 s brings the forward DAG's total time"}));
  CHECK(edit([](forward_dag& f) {
          f.ops[0].forward_time = f.ops[3].backward_time = 0.4 * max_time;
        }).ok());
  CHECK(says(edit([](forward_dag& f) { f.ops[2].output_bytes = -3; }),
             {"op 'c' (ops[2])", "output_bytes is negative"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].phantom_bytes = -3; }),
             {"op 'c' (ops[2])", "phantom_bytes"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].forward_save_overhead_bytes = -1; }),
             {"op 'c' (ops[2])", "forward_save_overhead_bytes"}));
  CHECK(says(edit([](forward_dag& f) { f.ops[2].backward_overhead_bytes = bytes{1} << 53; }),
             {"op 'c' (ops[2])", "backward_overhead_bytes", "2^52"}));
  CHECK(says(edit([](forward_dag& f) { f.input_bytes = -1; }), {"input_bytes is negative"}));
  CHECK(says(edit([](forward_dag& f) { f.ops.clear(); }), {"no op"}));
  // build_graph reports the same errors.
  forward_dag bad = diamond();
  bad.ops[1].inputs = {"zz"};
  const auto r = build_graph(bad);
  CHECK(r.code() == status::invalid_problem);
  CHECK(r.message().find("'zz'") != std::string::npos);
}

TEST_CASE("graph validation errors name the nodes involved") {
  {
    tiny t;
    CHECK_MESSAGE(validate(t.g).ok(), validate(t.g).message());
  }
  SUBCASE("two losses, or none") {
    tiny t;
    const int x = t.g.add_data({"extra", data_kind::gradient, 1, true});
    const int l2 = t.g.add_compute({"L2", compute_kind::loss, 0, 0, 0, 0});
    t.g.add_input(l2, t.x1);
    t.g.add_output(l2, x);
    CHECK(says(validate(t.g), {"2 loss nodes", "'L' (compute 1)", "'L2' (compute 3)"}));
    tiny u;
    u.g.compute(u.l).kind = compute_kind::forward;
    CHECK(says(validate(u.g), {"no loss node"}));
  }
  SUBCASE("parameters: sizes, and only forward nodes read them") {
    tiny t;
    const int w = t.g.add_parameter({"w", 64, true, "fp32"});
    t.g.use_parameter(t.f, w);
    t.g.use_parameter(t.f, w);  // twice is once
    CHECK(t.g.parameter_users(w).size() == 1);
    CHECK(validate(t.g).ok());
    t.g.use_parameter(t.b, w);
    CHECK(says(validate(t.g), {"parameter 'w'", "'B' (compute 2)", "not a forward node"}));
    tiny u;
    u.g.add_parameter({"v", -3, true, "fp32"});
    CHECK(says(validate(u.g), {"parameter 'v'", "negative"}));
    CHECK_THROWS_AS(u.g.use_parameter(u.f, 7), std::out_of_range);
  }
  SUBCASE("negative sizes and times") {
    tiny t;
    t.g.data(t.x1).size = -1;
    CHECK(says(validate(t.g), {"'x1' (data 2)", "size is negative"}));
    tiny u;
    u.g.compute(u.b).time = -2;
    CHECK(says(validate(u.g), {"'B' (compute 2)", "time is -2"}));
    tiny v;
    v.g.compute(v.f).fast_overhead = -5;
    CHECK(says(validate(v.g), {"'F' (compute 0)", "fast_overhead is negative"}));
    tiny w;
    w.g.compute(w.f).fast_time = std::numeric_limits<double>::infinity();
    CHECK(says(validate(w.g), {"'F' (compute 0)", "fast_time"}));
  }
  SUBCASE("times too large to sum") {
    tiny t;
    t.g.compute(t.f).time = 1e308;
    t.g.compute(t.b).time = 1e308;
    CHECK(says(validate(t.g), {"'F' (compute 0)", "time is 1e+308 s", "1e+15 s"}));
    tiny u;
    u.g.compute(u.f).fast_time = 1e25;
    CHECK(says(validate(u.g), {"'F' (compute 0)", "fast_time is 1e+25 s"}));
    tiny v;
    v.g.compute(v.f).time = 0.6 * max_time;
    v.g.compute(v.b).time = 0.6 * max_time;
    CHECK(says(validate(v.g), {"'B' (compute 2)", "time 6e+14 s brings the graph's total time"}));
    tiny w;
    w.g.compute(w.f).time = 0.4 * max_time;
    w.g.compute(w.b).time = 0.4 * max_time;
    CHECK(validate(w.g).ok());
  }
  SUBCASE("a dangling input") {
    tiny t;
    const int y = t.g.add_data({"y", data_kind::activation, 1, false});
    t.g.add_input(t.f, y);
    CHECK(says(validate(t.g), {"'y' (data 5)", "dangling input", "'F' (compute 0) needs it"}));
  }
  SUBCASE("a node nothing depends on") {
    tiny t;
    const int y = t.g.add_data({"y", data_kind::activation, 1, false});
    t.g.add_output(t.f, y);
    CHECK(says(validate(t.g),
               {"'y' (data 5)", "needed by no compute node", "nothing depends on it"}));
    tiny u;
    const int c = u.g.add_compute({"idle", compute_kind::backward, 0, 0, 0, 0});
    u.g.add_input(c, u.g1);
    CHECK(says(validate(u.g),
               {"'idle' (compute 3)", "creates no data node", "nothing depends on it"}));
  }
  SUBCASE("a cycle") {
    graph g("loop");
    const int in = g.add_data({"in", data_kind::activation, 1, true});
    const int a = g.add_data({"a", data_kind::activation, 1, false});
    const int b = g.add_data({"b", data_kind::activation, 1, false});
    const int gl = g.add_data({"gl", data_kind::gradient, 1, true});
    const int fa = g.add_compute({"Fa", compute_kind::forward, 1, 0, 1, 0});
    const int fb = g.add_compute({"Fb", compute_kind::forward, 1, 0, 1, 0});
    const int l = g.add_compute({"L", compute_kind::loss, 0, 0, 0, 0});
    g.add_input(fa, in);
    g.add_input(fa, b);
    g.add_output(fa, a);
    g.add_input(fb, a);
    g.add_output(fb, b);
    g.add_input(l, b);
    g.add_output(l, gl);
    CHECK(says(validate(g), {"cycle",
                             "'Fa' (compute 0) -> 'a' (data 1) -> 'Fb' (compute 1) -> 'b' (data 2) "
                             "-> 'Fa' (compute 0)"}));
  }
  SUBCASE("compute nodes out of topological order") {
    graph g("order");
    const int in = g.add_data({"in", data_kind::activation, 1, true});
    const int a = g.add_data({"a", data_kind::activation, 1, false});
    const int gl = g.add_data({"gl", data_kind::gradient, 1, true});
    const int l = g.add_compute({"L", compute_kind::loss, 0, 0, 0, 0});
    const int fa = g.add_compute({"Fa", compute_kind::forward, 1, 0, 1, 0});
    g.add_input(fa, in);
    g.add_output(fa, a);
    g.add_input(l, a);
    g.add_output(l, gl);
    CHECK(says(validate(g), {"'L' (compute 0) needs 'a' (data 1)",
                             "'Fa' (compute 1) produces later", "topological"}));
  }
  SUBCASE("edge kinds, phantoms and pairs") {
    tiny t;
    t.g.add_input(t.f, t.g1);
    CHECK(says(validate(t.g), {"forward node 'F' (compute 0) reads the gradient 'g1' (data 3)"}));
    tiny u;
    u.g.add_output(u.b, u.x1);
    CHECK(says(validate(u.g),
               {"backward node 'B' (compute 2) creates the activation 'x1' (data 2)"}));
    tiny v;
    v.g.set_backward(v.f, v.l);
    CHECK(says(validate(v.g),
               {"'F' (compute 0) and 'L' (compute 1) are paired", "a forward and a loss"}));
    tiny w;
    const int c = w.g.add_compute({"B2", compute_kind::backward, 0, 0, 0, 0});
    w.g.add_input(c, w.p);
    w.g.add_input(c, w.g1);
    w.g.add_output(c, w.g0);
    CHECK(says(validate(w.g), {"phantom 'p' (data 4) has 1 producers and 2 consumers"}));
    tiny x;
    x.g.set_backward(x.f, x.f);
    CHECK(says(validate(x.g), {"'F' (compute 0)", "paired"}));
    tiny y;
    const int f2 = y.g.add_compute({"F2", compute_kind::forward, 0, 0, 0, 0});
    y.g.add_input(f2, y.x0);
    y.g.add_output(f2, y.x1);
    CHECK(says(validate(y.g), {"activation 'x1' (data 2) has 2 producers",
                               "'F' (compute 0) and 'F2' (compute 3)"}));
  }
  SUBCASE("every forward leads to the loss, every backward follows it") {
    tiny t;
    const int side = t.g.add_data({"side", data_kind::activation, 1, false});
    const int fs = t.g.add_compute({"Fside", compute_kind::forward, 0, 0, 0, 0});
    t.g.add_input(fs, t.x0);
    t.g.add_output(fs, side);
    const int bs = t.g.add_compute({"Bside", compute_kind::backward, 0, 0, 0, 0});
    t.g.add_input(bs, side);
    t.g.add_output(bs, t.g0);
    CHECK(says(validate(t.g),
               {"forward 'Fside' (compute 3) does not lead to the loss 'L' (compute 1)"}));
  }
  SUBCASE("out-of-range indices are programming errors") {
    tiny t;
    CHECK_THROWS_AS(t.g.add_input(7, 0), std::out_of_range);
    CHECK_THROWS_AS(t.g.add_output(0, 99), std::out_of_range);
    CHECK_THROWS_AS((void)t.g.inputs(-1), std::out_of_range);
  }
}

TEST_CASE("a chain's graph: the chain's store-all peak and time, and every policy's schedule") {
  chain c{"three", 8, {}};
  c.stages = {
      {"fc1", 1, 2, 16, 32, 4, 8}, {"fc2", 1, 2, 16, 16, 0, 0}, {"loss", 0.5, 0.5, 4, 4, 0, 0}};
  {
    const graph g = build_graph(c).value();
    const training_layout lay{3};
    CHECK(g.compute(lay.forward(0)).name == "fwd fc1");
    CHECK(g.data(lay.phantom(0)).size == 16);  // abar_1 - a_1
    CHECK(g.data(lay.phantom(1)).size == 0);
    CHECK(g.data(lay.gradient(2)).size == 0);  // delta_N = 0
    CHECK(sorted(g.inputs(lay.backward(1))) ==
          std::vector<int>{lay.activation(0), lay.activation(1), lay.gradient(1), lay.phantom(1)});
  }
  SUBCASE("names: empty, duplicate or reserved stage names become 'stage l'") {
    chain d = c;
    d.stages[0].name = "";
    d.stages[1].name = "input";
    d.stages.push_back({"loss", 0, 0, 4, 4, 0, 0});
    const forward_dag f = to_forward_dag(d);
    CHECK(f.ops[0].name == "stage 1");
    CHECK(f.ops[1].name == "stage 2");
    CHECK(f.ops[2].name == "stage 3");
    CHECK(f.ops[3].name == "stage 4");
    CHECK(f.ops[3].inputs == std::vector<std::string>{"stage 3"});
    CHECK(f.ops[3].backward_reads == std::vector<std::string>{"stage 3", "output"});
    CHECK(build_graph(d).ok());
    d.stages[0].saved_bytes = 1;  // below output_bytes: the chain is invalid
    CHECK(build_graph(d).code() == status::invalid_problem);
  }

  testing::chain_generator gen(20240611);
  for (int k = 0; k < 30; ++k) {
    const chain ch = gen({.min_length = 1, .max_length = 8});
    INFO(testing::describe(ch));
    const graph g = build_graph(ch).value();
    const reference::report chain_sa = reference::simulate(ch, store_all::program(ch));
    const sim::report graph_sa = sim::simulate(g, schedule{store_all_program(g)});
    REQUIRE(chain_sa.valid);
    REQUIRE_MESSAGE(graph_sa.valid, graph_sa.first_violation->message);
    CHECK(graph_sa.peak == chain_sa.peak);
    CHECK(graph_sa.makespan == doctest::Approx(chain_sa.makespan).epsilon(1e-12));
    // The chain's own store-all program, lowered, is store_all_program up to the order of frees.
    const schedule mapped = lower(ch.length(), store_all::program(ch)).value();
    const sim::report mapped_r = sim::simulate(g, mapped);
    CHECK(mapped_r.valid);
    CHECK(mapped_r.peak == chain_sa.peak);

    // Every policy's schedule at a few budgets: same validity, peak and makespan.
    const auto at_zero = rotor{}.solve(ch, 0);
    const bytes lo = at_zero ? 0 : at_zero.err().minimum_budget.value_or(0);
    // (The exact minimum is slow for rotor: only a few chains there.)
    std::vector<bytes> budgets{(7 * lo + chain_sa.peak) / 8, (lo + chain_sa.peak) / 2,
                               chain_sa.peak};
    if (k < 1) budgets.push_back(lo);
    for (const bytes budget : budgets) {
      std::vector<result<schedule>> plans{
          rotor{.slots = 100}.solve(ch, budget), rotor_floating{.slots = 100}.solve(ch, budget),
          revolve{}.solve(ch, budget), periodic{}.solve(ch, budget)};
      for (const auto& p : plans) {
        if (!p) continue;
        const auto ops = to_chain_ops(ch.length(), *p);
        REQUIRE(ops);  // a chain policy's program is chain-shaped
        const reference::report cr = reference::simulate(ch, *ops);
        const sim::report gr = sim::simulate(g, *p);
        INFO(to_string(std::span<const chain_op>(*ops)));
        REQUIRE(cr.valid);
        CHECK_MESSAGE(gr.valid, (gr.first_violation ? gr.first_violation->message : ""));
        CHECK(gr.peak == cr.peak);
        CHECK(gr.makespan == doctest::Approx(cr.makespan).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("lower: the mapping of each chain operation") {
  const training_layout lay{2};
  const std::vector<chain_op> s{chain_op::forward(1, forward_mode::save_input),
                                chain_op::forward(2, forward_mode::no_save),
                                chain_op::forward(1, forward_mode::save_all),
                                chain_op::forward(2, forward_mode::save_all),
                                chain_op::backward(2),
                                chain_op::backward(1)};
  // F2_all runs while F2_none's a_2 is stored: the notation's rules reject it.
  const auto rejected = lower(2, s);
  REQUIRE_FALSE(rejected.ok());
  CHECK(rejected.err().message.find("F2_all at op 3: a_2 is already in memory") !=
        std::string::npos);
  using gi = instruction;
  CHECK(lower(2, std::vector<chain_op>(s.begin(), s.begin() + 2)).value().ops ==
        std::vector<gi>{gi::fast_forward(lay.forward(0)), gi::fast_forward(lay.forward(1)),
                        gi::free(lay.activation(0))});
  const std::vector<chain_op> ok{chain_op::forward(1, forward_mode::save_input),
                                 chain_op::offload(1),
                                 chain_op::wait(1),
                                 chain_op::prefetch(1),
                                 chain_op::wait(1),
                                 chain_op::forward(2, forward_mode::save_all),
                                 chain_op::backward(2),
                                 chain_op::forward(1, forward_mode::save_all),
                                 chain_op::backward(1)};
  const auto g = lower(2, ok);
  REQUIRE(g.ok());
  const std::vector<gi> expected{
      gi::fast_forward(lay.forward(0)), gi::offload(lay.activation(0)), gi::wait(lay.activation(0)),
      gi::prefetch(lay.activation(0)),  gi::wait(lay.activation(0)),    gi::compute(lay.forward(1)),
      gi::compute(lay.loss()),          gi::compute(lay.backward(1)),   gi::free(lay.gradient(1)),
      gi::free(lay.phantom(1)),         gi::free(lay.activation(1)),    gi::free(lay.activation(0)),
      gi::compute(lay.forward(0)),      gi::compute(lay.backward(0)),   gi::free(lay.gradient(0)),
      gi::free(lay.phantom(0)),         gi::free(lay.activation(0))};
  CHECK(g->ops == expected);
  chain c{"two", 8, {}};
  c.stages = {{"a", 1, 2, 16, 32, 4, 8}, {"l", 1, 1, 4, 4, 0, 0}};
  CHECK(sim::simulate(c, *g).valid);
  CHECK(to_chain_ops(2, *g) == std::optional(ok));
  // An unknown stage is the notation's error, before any replay.
  CHECK(lower(2, std::vector<chain_op>{chain_op::backward(7)})
            .err()
            .message.find("stage 7 does not exist") != std::string::npos);
}
