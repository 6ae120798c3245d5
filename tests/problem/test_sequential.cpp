// sequential_chain: a forward DAG cut where one tensor alone crosses, each piece a chain stage
// with its ops' times, saved bytes and weights.

#include <string>

#include <doctest/doctest.h>

#include <remat/problem/sequential.hpp>
#include <remat/zoo/resnet.hpp>

using namespace remat;

namespace {

forward_dag seq_residual() {
  forward_dag f;
  f.name = "residual";
  f.input_bytes = 8;
  f.parameters = {{"w1", 100}, {"w2", 50}};
  f.ops = {
      {.name = "a",
       .inputs = {"input"},
       .forward_time = 1,
       .backward_time = 2,
       .output_bytes = 10,
       .backward_reads = {"input"},
       .parameters = {"w1"}},
      {.name = "b",
       .inputs = {"a"},
       .forward_time = 1,
       .backward_time = 1,
       .output_bytes = 20,
       .backward_reads = {"a"},
       .parameters = {"w2"}},
      {.name = "c",
       .inputs = {"b"},
       .forward_time = 2,
       .backward_time = 3,
       .output_bytes = 30,
       .backward_reads = {"b"},
       .parameters = {"w2"}},
      {.name = "add",
       .inputs = {"a", "c"},
       .forward_time = 0.5,
       .backward_time = 0.5,
       .output_bytes = 10,
       .backward_reads = {}},
      {.name = "d",
       .inputs = {"add"},
       .forward_time = 1,
       .backward_time = 1,
       .output_bytes = 5,
       .backward_reads = {"output"}},
      {.name = "loss",
       .inputs = {"d"},
       .forward_time = 0.1,
       .backward_time = 0.1,
       .output_bytes = 4,
       .backward_reads = {"d"}},
  };
  return f;
}

}  // namespace

TEST_CASE("sequential chain: a residual block is one stage") {
  auto c = sequential_chain(seq_residual());
  REQUIRE(c);
  REQUIRE(c->length() == 4);
  CHECK(c->input_bytes == 8);
  CHECK(c->at(1).name == "a");
  CHECK(c->at(2).name == "b .. add");
  CHECK(c->at(3).name == "d");
  CHECK(c->at(4).name == "loss");
  CHECK(c->uf(2) == 3.5);
  CHECK(c->ub(2) == 4.5);
  CHECK(c->a(2) == 10);
  // b's output (read by c's backward) is kept; c's and add's are not read by a backward, but the
  // stage keeps at least its output.
  CHECK(c->abar(2) == 20);
  CHECK(c->w(1) == 100);
  CHECK(c->w(2) == 50);    // w2 read twice, counted once
  CHECK(c->abar(3) == 5);  // d keeps its own output (d's backward and the loss's read it)
  CHECK(c->abar(1) == 10);
}

TEST_CASE("sequential chain: ResNet's blocks become stages, times and weights preserved") {
  for (int depth : {50, 101}) {
    auto f = zoo::resnet({.depth = depth, .batch = 8, .image = 1000}, zoo::devices::v100());
    REQUIRE(f);
    auto c = sequential_chain(*f);
    REQUIRE(c);
    const int blocks = depth == 50 ? 16 : 33;
    // conv1, bn1, relu, maxpool; each block and its last ReLU; avgpool, fc, loss.
    CHECK(c->length() == 4 + 2 * blocks + 3);
    double fw = 0, cw = 0;
    for (const auto& op : f->ops) fw += op.forward_time;
    for (int l = 1; l <= c->length(); ++l) cw += c->uf(l);
    CHECK(cw == doctest::Approx(fw));
    bytes w = 0, total = 0;
    for (const auto& p : f->parameters) total += p.size;
    for (int l = 1; l <= c->length(); ++l) w += c->w(l);
    CHECK(w == total);
    CHECK(c->at(5).name.find("layer1.0") == 0);
  }
}

TEST_CASE("sequential chain: a bad DAG is refused with the DAG's error") {
  forward_dag f = seq_residual();
  f.ops[1].inputs = {"nowhere"};
  auto c = sequential_chain(f);
  REQUIRE_FALSE(c);
  CHECK(c.message().find("nowhere") != std::string::npos);
}
