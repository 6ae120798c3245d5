// The GPT-like DAG model of the Eigen examples at op granularity (eg::make_gpt_dag): the attention
// ops (scores, softmax, attention_context, and dropout on the scores' shape) against finite
// differences and a direct computation of their forward, plain training run twice, the profile
// and the training graph, and the executor running store-all and a checkmate plan at about 60%
// of store-all's peak, bit for bit equal to plain training with the simulator's peak.
// The tiny configuration: 2 blocks, width 16, 2 heads, sequences of 4 tokens, batch 2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/rockmate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

#include "exec/checkmate_backend.hpp"
#include "exec/graph_schedules.hpp"

using namespace remat;
using remat::exec::host_backend;

static_assert(exec::DagLayer<eg::scores, eg::tensor, host_backend>);
static_assert(exec::DagLayer<eg::softmax, eg::tensor, host_backend>);
static_assert(exec::DagLayer<eg::attention_context, eg::tensor, host_backend>);
static_assert(exec::ChainLayer<eg::softmax, eg::tensor, host_backend>);  // a single-input layer

namespace {

constexpr int gpt_layers = 2;
constexpr eg::index width = 16, heads = 2, sequence = 4, batch = 2;
constexpr eg::index tokens = batch * sequence;
constexpr float dropout_p = 0.1f;
constexpr std::uint64_t seed = 7;

eg::dag tiny_gpt() {
  return eg::make_gpt_dag(gpt_layers, width, heads, sequence, batch, dropout_p, seed);
}

/// Checks a layer's backward against central differences of <f(x...), dy> on every `stride`-th
/// element of each input (f evaluated in float, summed in double over the finite outputs: a
/// causal mask's -inf does not depend on the inputs), with the layer's random state restored
/// before every forward. Also: forward and forward_save give the same bits; the backward reads
/// only what backward_reads() says (the rest is passed as null); run again on the filled
/// gradients, it adds the same contribution in place (dx + c, bit for bit). The tolerance is
/// checked not to be vacuous: the gradients checked are not all (near) zero. (With h = 1e-2 the
/// largest error seen was 0.3% of the tolerance, and a missing 1/sqrt(d) in scores' dk, a wrong
/// row sum in softmax's backward or an untransposed P in attention_context's dv each broke it
/// by 20 to 60 times.)
void check_gradients(eg::layer& l, std::vector<eg::tensor>& xs, std::uint64_t dy_seed,
                     eg::index stride, float h = 1e-2f) {
  host_backend b;
  std::vector<const eg::tensor*> px;
  for (const auto& t : xs) px.push_back(&t);
  const eg::rng_state state = l.random_state();
  eg::context ctx;
  const eg::tensor y = l.forward_save(px, ctx, b);
  l.set_random_state(state);
  CHECK(eg::bitwise_equal(l.forward(px, b), y));
  const eg::tensor dy = eg::make_input(b, y.rows(), y.cols(), dy_seed);
  const auto reads = l.backward_reads();
  const std::vector<const eg::tensor*> rx =
      reads.inputs ? px : std::vector<const eg::tensor*>(px.size(), nullptr);
  std::vector<std::optional<eg::tensor>> dx(xs.size());
  l.backward(rx, reads.output ? &y : nullptr, ctx, dy, dx, b);
  auto f = [&] {
    l.set_random_state(state);
    const eg::tensor out = l.forward(px, b);
    double s = 0;
    for (eg::index i = 0; i < out.size(); ++i)
      if (std::isfinite(out.data()[i]))
        s += static_cast<double>(out.data()[i]) * static_cast<double>(dy.data()[i]);
    return s;
  };
  double magnitude = 0;
  int checked = 0;
  for (std::size_t j = 0; j < xs.size(); ++j) {
    REQUIRE(dx[j].has_value());
    REQUIRE(dx[j]->rows() == xs[j].rows());
    REQUIRE(dx[j]->cols() == xs[j].cols());
    for (eg::index i = j % 3; i < xs[j].size(); i += stride) {
      float& v = xs[j].data()[i];
      const float v0 = v;
      v = v0 + h;
      const double up = f();
      v = v0 - h;
      const double down = f();
      v = v0;
      const double numeric = (up - down) / (2.0 * static_cast<double>(h));
      const double analytic = dx[j]->data()[i];
      INFO(l.name(), " dx", j, "[", i, "]: numeric ", numeric, ", analytic ", analytic);
      CHECK(std::abs(numeric - analytic) <=
            1e-4 + 1e-3 * std::max(std::abs(numeric), std::abs(analytic)));
      magnitude += std::abs(analytic);
      ++checked;
    }
  }
  INFO(l.name(), ": ", checked, " elements checked");
  CHECK(checked >= 8);
  CHECK(magnitude / checked > 0.05);  // the tolerance above is small against the values checked
  std::vector<eg::tensor> once;
  for (const auto& g : dx) once.push_back(g->clone(b));
  l.backward(rx, reads.output ? &y : nullptr, ctx, dy, dx, b);
  for (std::size_t j = 0; j < xs.size(); ++j) {
    const eg::tensor twice = eg::tensor::from(b, once[j].mat() + once[j].mat());
    CHECK(eg::bitwise_equal(*dx[j], twice));
  }
}

std::vector<eg::tensor> inputs(host_backend& b,
                               std::initializer_list<std::pair<eg::index, eg::index>> shapes,
                               std::uint64_t first_seed, float scale = 1.0f) {
  std::vector<eg::tensor> xs;
  for (auto [r, c] : shapes) {
    xs.push_back(eg::make_input(b, r, c, first_seed++));
    xs.back().mat() *= scale;
  }
  return xs;
}

}  // namespace

TEST_CASE("eg gpt ops: forward by definition, gradients against finite differences") {
  host_backend b;
  const eg::index d = width / heads, rows = batch * heads * sequence;
  SUBCASE("scores") {
    for (bool causal : {false, true}) {
      CAPTURE(causal);
      eg::scores l(heads, sequence, causal, "scores");
      auto xs = inputs(b, {{tokens, width}, {tokens, width}}, 11);
      // By definition, in double: S_nh(i, j) = q_nh(i) . k_nh(j) / sqrt(d), -inf above the
      // diagonal.
      const eg::tensor s = l.forward(std::vector<const eg::tensor*>{&xs[0], &xs[1]}, b);
      REQUIRE(s.rows() == rows);
      REQUIRE(s.cols() == sequence);
      for (eg::index n = 0; n < batch; ++n)
        for (eg::index hd = 0; hd < heads; ++hd)
          for (eg::index i = 0; i < sequence; ++i)
            for (eg::index j = 0; j < sequence; ++j) {
              double dot = 0;
              for (eg::index c = hd * d; c < (hd + 1) * d; ++c)
                dot += static_cast<double>(xs[0].mat()(n * sequence + i, c)) *
                       xs[1].mat()(n * sequence + j, c);
              const float got = s.mat()((n * heads + hd) * sequence + i, j);
              if (causal && j > i)
                CHECK(got == -std::numeric_limits<float>::infinity());
              else
                CHECK(std::abs(got - dot / std::sqrt(static_cast<double>(d))) < 1e-5);
            }
      check_gradients(l, xs, 13, 5);
    }
  }
  SUBCASE("softmax") {
    eg::softmax l("softmax");
    auto xs = inputs(b, {{rows, sequence}}, 21, 2.0f);
    const eg::tensor y = l.forward(xs[0], b);  // as a chain stage too
    for (eg::index r = 0; r < rows; ++r) {
      double sum = 0, ref_sum = 0;
      for (eg::index c = 0; c < sequence; ++c) {
        sum += y.mat()(r, c);
        ref_sum += std::exp(static_cast<double>(xs[0].mat()(r, c)));
      }
      CHECK(std::abs(sum - 1) < 1e-6);
      CHECK(std::abs(y.mat()(r, 1) - std::exp(static_cast<double>(xs[0].mat()(r, 1))) / ref_sum) <
            1e-6);
    }
    check_gradients(l, xs, 23, 3);
    // On causal scores: 0 above the diagonal, rows that sum to 1.
    eg::scores sc(heads, sequence, true, "scores");
    auto qk = inputs(b, {{tokens, width}, {tokens, width}}, 25);
    const eg::tensor p =
        l.forward(sc.forward(std::vector<const eg::tensor*>{&qk[0], &qk[1]}, b), b);
    for (eg::index r = 0; r < rows; ++r)
      for (eg::index c = r % sequence + 1; c < sequence; ++c) CHECK(p.mat()(r, c) == 0.0f);
  }
  SUBCASE("dropout on the scores' shape") {
    eg::dropout l(0.25f, 3, "drop");
    auto xs = inputs(b, {{rows, sequence}}, 31);
    const auto state = l.random_state();
    const eg::tensor y = l.forward(xs[0], b);
    int dropped = 0;
    for (eg::index i = 0; i < y.size(); ++i) {
      const float v = y.data()[i];
      CHECK((v == 0.0f || v == xs[0].data()[i] * (1.0f / 0.75f)));
      dropped += v == 0.0f ? 1 : 0;
    }
    CHECK(dropped > 0);
    CHECK(dropped < y.size() / 2);
    l.set_random_state(state);
    check_gradients(l, xs, 33, 3);
  }
  SUBCASE("attention_context") {
    eg::attention_context l(heads, "context");
    auto xs = inputs(b, {{rows, sequence}, {tokens, width}}, 41);
    const eg::tensor y = l.forward(std::vector<const eg::tensor*>{&xs[0], &xs[1]}, b);
    REQUIRE(y.rows() == tokens);
    REQUIRE(y.cols() == width);
    // By definition: y(n s + i, h d + c) = sum_j P_nh(i, j) v(n s + j, h d + c).
    for (eg::index n = 0; n < batch; ++n)
      for (eg::index hd = 0; hd < heads; ++hd)
        for (eg::index i = 0; i < sequence; ++i)
          for (eg::index c = 0; c < d; ++c) {
            double ref = 0;
            for (eg::index j = 0; j < sequence; ++j)
              ref += static_cast<double>(xs[0].mat()((n * heads + hd) * sequence + i, j)) *
                     xs[1].mat()(n * sequence + j, hd * d + c);
            CHECK(std::abs(y.mat()(n * sequence + i, hd * d + c) - ref) < 1e-5);
          }
    check_gradients(l, xs, 43, 5);
  }
  SUBCASE("shapes that do not fit") {
    eg::scores sc(heads, sequence, true, "scores");
    auto bad = inputs(b, {{tokens, width}, {tokens + 1, width}}, 51);
    CHECK_THROWS_AS((void)sc.forward(std::vector<const eg::tensor*>{&bad[0], &bad[1]}, b),
                    std::invalid_argument);
    eg::attention_context cx(heads, "context");
    auto bad2 = inputs(b, {{rows, sequence + 1}, {tokens, width}}, 53);
    CHECK_THROWS_AS((void)cx.forward(std::vector<const eg::tensor*>{&bad2[0], &bad2[1]}, b),
                    std::invalid_argument);
    CHECK_THROWS_AS((void)eg::make_gpt_dag(1, 15, 2, 4, 2, 0.1f, 1), std::invalid_argument);
  }
}

TEST_CASE("eg::make_gpt_dag: the ops, and plain training gives the same bits twice") {
  eg::dag d = tiny_gpt();
  REQUIRE(d.ops.size() == 17 * gpt_layers + 2);
  CHECK(d.ops.size() == d.layers.size());
  CHECK(d.ops[0].name == "h0.ln1");
  CHECK(d.ops[0].inputs == std::vector<std::string>{"input"});
  CHECK(d.ops[4].name == "h0.scores");
  CHECK(d.ops[4].inputs == std::vector<std::string>{"h0.q", "h0.k"});
  CHECK(d.ops[7].name == "h0.context");
  CHECK(d.ops[7].inputs == std::vector<std::string>{"h0.attn_drop", "h0.v"});
  CHECK(d.ops[10].inputs == std::vector<std::string>{"h0.proj_drop", "input"});
  CHECK(d.ops[17].inputs == std::vector<std::string>{"h0.res2"});
  CHECK(d.ops[d.ops.size() - 2].name == "ln_f");
  CHECK(d.ops.back().name == "loss");
  for (std::size_t i = 0; i < d.ops.size(); ++i) CHECK(d.layers[i]->name() == d.ops[i].name);
  CHECK(eg::make_gpt_dag(gpt_layers, width, heads, sequence, batch, 0.0f, seed).ops.size() ==
        14 * gpt_layers + 2);

  // Twice on fresh models, and twice on one model with its random states restored.
  host_backend b;
  auto train = [&b](eg::dag& m, std::optional<eg::tensor>& dx) {
    eg::zero_grad(m.layers);
    const float loss = eg::backprop(m, eg::make_input(b, tokens, width, 5), b, &dx);
    REQUIRE(dx.has_value());
    return loss;
  };
  std::optional<eg::tensor> dx1, dx2, dx3;
  eg::dag m1 = tiny_gpt(), m2 = tiny_gpt();
  const auto states = eg::random_states(m1.layers);
  const float l1 = train(m1, dx1);
  const auto g1 = eg::flat_gradients(m1.layers);
  CHECK(std::isfinite(l1));
  CHECK(std::any_of(g1.begin(), g1.end(), [](float v) { return v != 0.0f; }));
  CHECK(train(m2, dx2) == l1);
  CHECK(eg::flat_gradients(m2.layers) == g1);
  CHECK(eg::bitwise_equal(*dx1, *dx2));
  eg::set_random_states(m1.layers, states);
  CHECK(train(m1, dx3) == l1);
  CHECK(eg::flat_gradients(m1.layers) == g1);
  CHECK(eg::bitwise_equal(*dx1, *dx3));
}

namespace {

/// The profiled forward DAG of the tiny model, with fixed times instead of the measured ones (so
/// that the plans, and what runs, are the same in every run; the sizes are measured).
forward_dag profiled_gpt() {
  host_backend pb;
  eg::dag pm = tiny_gpt();
  auto f = exec::profile_dag(pm, eg::make_input(pb, tokens, width, 5), pb,
                             {.repetitions = 1, .warmup = 0, .name = "eg gpt"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  for (auto& op : f->ops) {
    op.forward_time = 1e-6 + 1e-9 * static_cast<double>(op.output_bytes + op.phantom_bytes);
    op.backward_time = 2 * op.forward_time;
  }
  return *f;
}

}  // namespace

TEST_CASE("eg::make_gpt_dag: profile_dag, then build_graph") {
  const forward_dag f = profiled_gpt();
  REQUIRE(f.ops.size() == 17 * gpt_layers + 2);
  CHECK(f.input_bytes == eg::tensor::byte_size(tokens, width));
  const bytes act = eg::tensor::byte_size(tokens, width);
  const bytes score = eg::tensor::byte_size(batch * heads * sequence, sequence);
  auto op = [&](const std::string& name) -> const forward_op& {
    const auto it = std::find_if(f.ops.begin(), f.ops.end(),
                                 [&](const forward_op& o) { return o.name == name; });
    REQUIRE(it != f.ops.end());
    return *it;
  };
  using names = std::vector<std::string>;
  // Sizes, contexts and what each backward reads: what lets a planner free or recompute each op.
  CHECK(op("h0.scores").output_bytes == score);
  CHECK(op("h0.scores").phantom_bytes == 0);
  CHECK(op("h0.scores").backward_reads == names{"h0.q", "h0.k"});
  CHECK(op("h0.softmax").output_bytes == score);
  CHECK(op("h0.softmax").phantom_bytes == 0);
  CHECK(op("h0.softmax").backward_reads.size() == 1);  // its own output only
  CHECK(op("h0.attn_drop").phantom_bytes == score);    // the mask
  CHECK(op("h0.attn_drop").backward_reads.empty());
  CHECK(op("h0.context").output_bytes == act);
  CHECK(op("h0.context").phantom_bytes == 0);
  CHECK(op("h0.context").backward_reads == names{"h0.attn_drop", "h0.v"});
  CHECK(op("h1.fc").output_bytes == 4 * act);
  CHECK(op("h1.gelu").backward_reads == names{"h1.fc"});
  CHECK(op("h1.res2").backward_reads.empty());
  CHECK(op("loss").output_bytes == eg::tensor::byte_size(1, 1));
  auto g = build_graph(f);
  REQUIRE_MESSAGE(g.ok(), g.message());
  CHECK(validate(*g).ok());
  CHECK(g->compute_count() == 2 * static_cast<int>(f.ops.size()) + 1);  // forwards, loss, backwards
  const auto sim = sim::simulate(*g, {store_all_program(*g), 0, 0});
  CHECK(sim.valid);
  CHECK(sim.peak > g->initial_bytes());
}

TEST_CASE(
    "eg::make_gpt_dag under the executor: store-all and checkmate at 60%, plain training's bits") {
  const forward_dag f = profiled_gpt();
  auto built = build_graph(f);
  REQUIRE_MESSAGE(built.ok(), built.message());
  const graph& g = *built;

  // The reference: plain training.
  eg::dag ref = tiny_gpt();
  host_backend rb;
  std::optional<eg::tensor> ref_dx;
  eg::zero_grad(ref.layers);
  const float ref_loss = eg::backprop(ref, eg::make_input(rb, tokens, width, 5), rb, &ref_dx);
  REQUIRE(ref_dx.has_value());
  const auto ref_grads = eg::flat_gradients(ref.layers);

  const bytes store_all_peak = sim::simulate(g, {store_all_program(g), 0, 0}).peak;
  std::vector<std::pair<std::string, schedule>> programs{
      {"store-all", {store_all_program(g), g.ideal_time(), store_all_peak}}};
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
  // The LP relaxation and its rounding: about 0.2 s with CBC (Clp). lp_solve alone does not
  // finish the LP within the limit, and checkmate returns its best schedule by then (a valid plan
  // within the budget, which is all the checks below rely on).
  const bytes budget = static_cast<bytes>(static_cast<double>(store_all_peak) * 0.6);
  auto planned = checkmate<milp_backend>{.time_limit = 2, .relax = true}.solve(g, budget);
  REQUIRE_MESSAGE(planned.ok(), planned.message());
  CHECK(planned->predicted_peak <= budget);
  programs.emplace_back("checkmate (relaxed) at 60%", *planned);
  // rockmate: blocks planned by checkmate, then RK-Rotor; at 60%, or at its minimum when that
  // is higher (the chain of blocks keeps each block's input through its backward).
  const rockmate<checkmate<milp_backend>> rk{
      .inner = {.relax = true}, .peak_budgets = 4, .save_budgets = 3};
  auto rk_plan = rk.solve_detailed(g, budget);
  if (rk_plan.code() == status::budget_too_small)
    rk_plan = rk.solve_detailed(g, *rk_plan.err().minimum_budget);
  REQUIRE_MESSAGE(rk_plan.ok(), rk_plan.message());
  CHECK(rk_plan->details.blocks.size() >= 3);
  CHECK(rk_plan->details.kinds <
        static_cast<int>(rk_plan->details.blocks.size()));  // the two layers are one kind
  programs.emplace_back("rockmate", rk_plan->program);
#else
  MESSAGE("no MILP backend (CBC or lp_solve) built in: store-all only");
#endif

  for (const auto& [what, s] : programs) {
    INFO(what, ": ", to_string(g, s));
    const auto sim = sim::simulate(g, s);
    REQUIRE_MESSAGE(sim.valid, (sim.first_violation ? sim.first_violation->message : ""));
    CHECK(s.predicted_peak == sim.peak);
    eg::dag m = tiny_gpt();
    eg::zero_grad(m.layers);
    host_backend b(sim.peak);
    exec::executor ex(m, g, b);
    auto r = ex.run(s, eg::make_input(b, tokens, width, 5));
    // A rounded plan may recompute a backward (the MILP allows it); the executor refuses those.
    if (toy::recomputes_a_backward(g, s)) {
      CHECK(r.code() == status::invalid_problem);
      MESSAGE(what, " recomputes a backward: refused by the executor, not run");
      continue;
    }
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(eg::flat_gradients(m.layers) == ref_grads);
    CHECK(eg::bitwise_equal(r->input_gradient, *ref_dx));
    CHECK(dynamic_cast<const eg::mse_loss&>(*m.layers.back()).last_value() == ref_loss);
    CHECK(r->measured_peak == sim.peak);
    if (what != "store-all") {  // below store-all's peak, some forward runs again
      CHECK(sim.peak < store_all_peak);
      CHECK(std::any_of(r->forwards.begin(), r->forwards.end(), [](int n) { return n > 1; }));
    }
  }
}
