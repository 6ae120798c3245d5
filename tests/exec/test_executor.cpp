#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

#include "toy_layers.hpp"

using namespace remat;
using remat::exec::host_backend;

namespace {

using model = std::vector<toy::stage>;

/// A toy model: n stages, the last a loss; sizes, context and temporaries vary per stage.
model make_model(int n, unsigned seed, bool noisy) { return toy::make_chain_model(n, seed, noisy); }

toy::tensor make_input(host_backend& b, int n) {
  auto x = toy::tensor::make(b, n);
  for (int i = 0; i < n; ++i) x[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  return x;
}

struct outcome {
  std::vector<float> input_grad, param_grads;
  exec::run_result<toy::tensor> run;
};

template <ChainPolicy P>
result<schedule> plan(const P& p, const chain& c, bytes budget) {
  return p.solve(c, budget);
}

}  // namespace

TEST_CASE(
    "executor: every policy gives bitwise the gradients of plain training, within the budget") {
  int runs = 0;
  for (unsigned seed = 1; seed <= 6; ++seed) {
    const int n = 3 + static_cast<int>(seed % 4);
    const bool noisy = seed % 2 == 0;
    host_backend backend;
    model prof_model = make_model(n, seed, noisy);
    const auto sample = make_input(backend, 12);
    auto profiled =
        exec::profile_chain(prof_model, sample, backend, {.repetitions = 1, .warmup = 0});
    REQUIRE_MESSAGE(profiled.ok(), profiled.message());
    const chain& c = *profiled;
    // Layers allocate only through the backend, identically in both forward modes: the profile
    // is exact, so the measured peak must equal the simulator's byte for byte.
    auto run = [&](const schedule& s, bytes budget) -> result<outcome> {
      model m = make_model(n, seed, noisy);
      host_backend b(budget);
      exec::executor ex(m, c, b);
      auto r = ex.run(s, make_input(b, 12));
      if (!r) return r.err();
      outcome o;
      for (int i = 0; i < r->input_gradient.n; ++i) o.input_grad.push_back(r->input_gradient[i]);
      for (const auto& st : m) o.param_grads.push_back(st.gw);
      // The forwards each stage ran are the program's (both variants), counted per op, 0-based.
      const chain_nodes at(n);
      REQUIRE(r->forwards.size() == static_cast<std::size_t>(n));
      for (int l = 1; l <= n; ++l) {
        const auto expected = std::count_if(
            s.ops.begin(), s.ops.end(),
            [&](const instruction& ins) { return ins.is_compute() && ins.node == at.fwd(l); });
        CHECK(m[static_cast<std::size_t>(l - 1)].forward_calls == expected);
        CHECK(r->forwards[static_cast<std::size_t>(l - 1)] == expected);
        CHECK(m[static_cast<std::size_t>(l - 1)].backward_calls == 1);
      }
      CHECK(b.in_use() == r->input_gradient.bytes());  // nothing else kept alive
      r->input_gradient.buf.release();                 // a buffer must not outlive its backend, b
      o.run = std::move(*r);
      return o;
    };
    const bytes peak = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
    const auto reference = run(*store_all{}.solve(c, peak), peak);
    REQUIRE(reference.ok());
    const bytes lo = rotor{}.minimum_budget(c);
    for (int step = 0; step <= 4; ++step) {
      const bytes budget = lo + (peak - lo) * step / 4;
      auto check = [&](const result<schedule>& s, const char* policy) {
        if (!s) return;  // e.g. periodic below its own minimum
        INFO(policy, " budget ", budget, " seed ", seed, ": ",
             to_chain_string(n, *s).value_or(to_string(*s)));
        const auto got = run(*s, budget);
        REQUIRE_MESSAGE(got.ok(), got.message());
        CHECK(got->input_grad == reference->input_grad);
        CHECK(got->param_grads == reference->param_grads);
        CHECK(got->run.measured_peak <= budget);
        const auto sim = sim::simulate(c, *s);
        CHECK(got->run.measured_peak == sim.peak);
        REQUIRE(got->run.op_peaks.size() == sim.timeline.size());
        for (std::size_t i = 0; i < sim.timeline.size(); ++i)
          CHECK(got->run.op_peaks[i] == sim.timeline[i].peak);
        ++runs;
      };
      check(plan(store_all{}, c, budget), "store_all");
      check(plan(periodic{}, c, budget), "periodic");
      check(plan(revolve{}, c, budget), "revolve");
      check(plan(rotor{}, c, budget), "rotor");
      check(plan(rotor{.slots = 0}, c, budget), "rotor exact");
      check(plan(rotor_floating{.slots = 0}, c, budget), "rotor_floating");
    }
  }
  CHECK(runs > 100);
}

TEST_CASE("executor: a layer that throws gives a clear error, and the model is as before") {
  host_backend backend;
  model m = make_model(5, 3, true);
  auto c =
      exec::profile_chain(m, make_input(backend, 12), backend, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  const auto s = rotor{.slots = 0}.solve(*c, rotor{}.minimum_budget(*c));
  REQUIRE(s.ok());
  auto& bad = m[2];
  const auto rng_before = bad.random_state();
  const float w_before = bad.w;
  bad.throw_at_forward = bad.forward_calls;  // its first forward of the run
  exec::executor ex(m, *c, backend);
  auto r = ex.run(*s, make_input(backend, 12));
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == status::execution_error);
  CHECK(r.message().rfind("executor: ", 0) == 0);
  CHECK(r.message().find("'fwd t3'") != std::string::npos);
  CHECK(r.message().find("instruction ") != std::string::npos);
  CHECK(r.message().find("injected failure") != std::string::npos);
  CHECK(bad.w == w_before);
  CHECK(bad.random_state() == rng_before);
  CHECK(backend.in_use() == 0);  // everything the run held was freed
}

TEST_CASE("executor: a layer whose output outgrew its profile is reported, not run past") {
  host_backend backend;
  model m = make_model(4, 5, false);
  auto c =
      exec::profile_chain(m, make_input(backend, 12), backend, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  m[1].grow_by = 3;
  exec::executor ex(m, *c, backend);
  auto r = ex.run(*store_all{}.solve(*c, unlimited_bytes), make_input(backend, 12));
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == status::execution_error);
  CHECK(r.message().find("'fwd t2'") != std::string::npos);
  CHECK(r.message().find("'t2'") != std::string::npos);  // the output, data node a_2
  CHECK(r.message().find("profile the model again") != std::string::npos);
}

TEST_CASE("executor: a budget below the plan's peak stops at the allocation, naming it") {
  host_backend backend;
  model m = make_model(5, 9, false);
  auto c =
      exec::profile_chain(m, make_input(backend, 12), backend, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  const auto s = *store_all{}.solve(*c, unlimited_bytes);
  host_backend tight(s.predicted_peak - 1);
  exec::executor ex(m, *c, tight);
  auto r = ex.run(s, make_input(tight, 12));
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == status::execution_error);
  CHECK(r.message().rfind("executor: ", 0) == 0);
  CHECK(r.message().find("would exceed the budget of " + std::to_string(s.predicted_peak - 1)) !=
        std::string::npos);
  // The instruction and node that allocated: the first whose simulated peak is over the budget.
  const auto sim = sim::simulate(*c, s);
  const auto g = build_graph(*c);
  REQUIRE(g.ok());
  std::size_t first = 0;
  while (sim.timeline[first].peak <= s.predicted_peak - 1) ++first;
  const instruction at = s.ops[first];
  REQUIRE(at.is_compute());
  INFO(r.message());
  CHECK(r.message().find("instruction " + std::to_string(first) + " (" + to_string(at) + "), '" +
                         g->compute(at.node).name + "'") != std::string::npos);
  CHECK(tight.in_use() == 0);
}

TEST_CASE("executor: schedules and models that do not match the chain are rejected up front") {
  host_backend backend;
  model m = make_model(4, 2, false);
  auto c =
      exec::profile_chain(m, make_input(backend, 12), backend, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  exec::executor ex(m, *c, backend);
  // F1_all then B2 (without delta_2, F2 or the loss): the lowering refuses it, and the program
  // written out by hand is refused by the executor (the simulator's message, with graph names).
  CHECK(parse_chain_program(4, "F1_all B2").code() == status::invalid_problem);
  const chain_nodes at(4);
  schedule broken{{instruction::compute(at.fwd(1)), instruction::compute(at.bwd(2))}, 0, 0};
  auto r = ex.run(broken, make_input(backend, 12));
  CHECK(r.code() == status::invalid_problem);
  CHECK(r.message().rfind("executor: ", 0) == 0);
  CHECK(r.message().find("not valid") != std::string::npos);
  CHECK(r.message().find("'bwd t2'") != std::string::npos);
  CHECK(r.message().find("'grad t2'") != std::string::npos);  // delta_2, not in memory
  model shorter = make_model(3, 2, false);
  exec::executor ex2(shorter, *c, backend);
  const auto r2 = ex2.run(*store_all{}.solve(*c, unlimited_bytes), make_input(backend, 12));
  CHECK(r2.code() == status::invalid_problem);
  CHECK(r2.message().find("executor: the model has 3 layers but the chain") != std::string::npos);
  const auto r3 = ex.run(*store_all{}.solve(*c, unlimited_bytes), make_input(backend, 20));
  CHECK(r3.code() == status::execution_error);
  CHECK(r3.message().find("more than the graph input's") != std::string::npos);
  CHECK(backend.in_use() == 0);
}

TEST_CASE("executor: a std::tuple of different layer types is a model") {
  host_backend backend;
  std::tuple<toy::stage, toy::stage, toy::loss> m;
  std::get<0>(m).n_out = 8;
  std::get<1>(m).n_out = 5;
  auto c = exec::profile_chain(m, make_input(backend, 6), backend, {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(c.ok(), c.message());
  const auto s = rotor{.slots = 0}.solve(*c, rotor{}.minimum_budget(*c));
  REQUIRE(s.ok());
  exec::executor ex(m, *c, backend);
  const int profiled = std::get<2>(m).backward_calls;
  auto r = ex.run(*s, make_input(backend, 6));
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(r->input_gradient.n == 6);
  CHECK(std::get<2>(m).backward_calls == profiled + 1);
}

namespace {
/// A tensor that does not allocate through the backend: its floats live in a std::vector.
struct vector_tensor {
  std::vector<float> v;
  [[nodiscard]] remat::bytes bytes() const { return static_cast<remat::bytes>(4 * v.size()); }
};
struct vector_layer {  // y = 2x; the last one is a loss (sum of x)
  bool loss = false;
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  vector_tensor forward(const vector_tensor& x, host_backend&) {
    if (loss) return {{0.0f}};
    vector_tensor y = x;
    for (float& f : y.v) f *= 2;
    return y;
  }
  vector_tensor forward_save(const vector_tensor& x, context&, host_backend& b) {
    return forward(x, b);
  }
  vector_tensor backward(const vector_tensor& x, const vector_tensor&, const context&,
                         const vector_tensor& dy, host_backend&) {
    vector_tensor dx = dy;
    dx.v.resize(x.v.size());
    for (float& f : dx.v) f *= 2;
    return dx;
  }
  vector_tensor backward(const vector_tensor& x, const vector_tensor&, const context&,
                         host_backend&) {
    return {std::vector<float>(x.v.size(), 1.0f)};
  }
};
}  // namespace

TEST_CASE(
    "profile and executor: tensors that do not hold backend memory are refused, saying what to "
    "do") {
  host_backend backend;
  std::vector<vector_layer> m(3);
  m[2].loss = true;
  const vector_tensor x{std::vector<float>(256, 1.0f)};
  auto c = exec::profile_chain(m, x, backend, {.repetitions = 1, .warmup = 0});
  REQUIRE_FALSE(c.ok());
  CHECK(c.code() == status::execution_error);
  INFO(c.message());
  // The first op: its output is the input's size, and sizes alone cannot tell a view.
  CHECK(c.message().rfind("profile_chain: profiling stage 1 claims " + format_bytes(1024), 0) == 0);
  CHECK(c.message().find("the backend saw 0 bytes") != std::string::npos);
  CHECK(c.message().find("b.allocate(n)") != std::string::npos);
  // A chain written by hand: the executor refuses the run the same way.
  const chain hand{
      "hand",
      1024,
      {{"a", 1, 1, 1024, 1024, 0, 0}, {"b", 1, 1, 1024, 1024, 0, 0}, {"l", 1, 1, 4, 4, 0, 0}}};
  exec::executor ex(m, hand, backend);
  auto r = ex.run(*store_all{}.solve(hand, unlimited_bytes), x);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == status::execution_error);
  INFO(r.message());
  CHECK(r.message().rfind("executor: instruction 0 (C0), 'fwd a' (compute 0) claims", 0) == 0);
  CHECK(r.message().find("hold the returned buffer in the tensor") != std::string::npos);
  CHECK(backend.in_use() == 0);
}

TEST_CASE("allocation check: op by op, a view of an input passes, the first culprit is named") {
  exec::detail::allocation_check a;
  CHECK(a.problem().empty());      // a zero-size model
  a.add("a", 0, 100, 100);         // a layer that allocates its output
  a.add("v", 100, 100, 100, 100);  // a view of it: nothing allocated, all of it a view
  a.add("c", 100, 160, 100);       // more than half of its claim: passes
  CHECK(a.problem().empty());
  a.add("f", 160, 170, 100);  // a tenth of its claim
  a.add("g", 170, 170, 100);  // later culprits do not replace the first
  CHECK(a.op == "f");
  CHECK(a.claimed == 100);
  CHECK(a.seen == 10);
  CHECK(a.problem().rfind("f claims 100 bytes", 0) == 0);
  exec::detail::allocation_check b;
  b.add("h", 100, 50, 40);  // a forward that frees more than it keeps counts 0, not less
  CHECK(b.seen == 0);
  // Views are told by storage(): the same buffer as an input's, no larger.
  host_backend backend;
  toy::tensor x = toy::tensor::make(backend, 8), other = toy::tensor::make(backend, 8);
  const toy::tensor* xs[] = {&x};
  CHECK_FALSE(exec::detail::may_be_view(other, std::span<const toy::tensor* const>(xs)));
  CHECK(exec::detail::may_be_view(x, std::span<const toy::tensor* const>(xs)));
}

TEST_CASE(
    "profile and executor: two of seven layers allocating elsewhere are found, and the first "
    "named") {
  host_backend backend, elsewhere;
  model m = make_model(7, 11, false);
  m[2].foreign = &elsewhere;
  m[4].foreign = &elsewhere;
  auto c =
      exec::profile_chain(m, make_input(backend, 12), backend, {.repetitions = 1, .warmup = 0});
  REQUIRE_FALSE(c.ok());
  INFO(c.message());
  CHECK(c.message().find("profiling stage 3 ('t3') claims " + format_bytes(4 * m[2].n_out)) !=
        std::string::npos);
  CHECK(c.message().find("the backend saw 0 bytes allocated by it") != std::string::npos);
  // Profiled without them, the run refuses them the same way.
  model clean = make_model(7, 11, false);
  auto good =
      exec::profile_chain(clean, make_input(backend, 12), backend, {.repetitions = 1, .warmup = 0});
  REQUIRE(good.ok());
  exec::executor ex(m, *good, backend);
  auto r = ex.run(*store_all{}.solve(*good, unlimited_bytes), make_input(backend, 12));
  REQUIRE_FALSE(r.ok());
  INFO(r.message());
  CHECK(r.message().find("'fwd t3'") != std::string::npos);
  // Its output and its context claimed; the backend saw the context only (from the backend).
  CHECK(r.message().find("claims ") != std::string::npos);
  CHECK(r.message().find("but the backend saw ") != std::string::npos);
}

TEST_CASE(
    "executor: a budget error names the bytes held when the run started, and who allocated them") {
  host_backend profiling;
  model m = make_model(4, 5, false);
  auto c =
      exec::profile_chain(m, make_input(profiling, 12), profiling, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  const auto s = *store_all{}.solve(*c, unlimited_bytes);
  host_backend backend(s.predicted_peak);  // room for one step
  exec::executor ex(m, *c, backend);
  auto first = ex.run(s, make_input(backend, 12));
  REQUIRE_MESSAGE(first.ok(), first.message());
  // The first step's input gradient is kept: the second step starts with it in use.
  const bytes kept = first->input_gradient.bytes();
  auto second = ex.run(s, make_input(backend, 12));
  REQUIRE_FALSE(second.ok());
  CHECK(second.code() == status::execution_error);
  INFO(second.message());
  CHECK(second.message().find("; " + format_bytes(kept) +
                              " were already in use in the backend when the run started") !=
        std::string::npos);
  // Who holds them: the backward of stage 1 of the first run (B1 makes the input's gradient).
  CHECK(second.message().find(format_bytes(kept) + " allocated by instruction ") !=
        std::string::npos);
  CHECK(second.message().find("'bwd t1'") != std::string::npos);
  CHECK(second.message().find("input_gradient kept from an earlier step") != std::string::npos);
  // Released, the next step fits again.
  first->input_gradient.buf.release();
  CHECK(ex.run(s, make_input(backend, 12)).ok());
}

TEST_CASE(
    "executor: memory made between two runs, outside any, is named as the likely optimizer "
    "state") {
  host_backend profiling;
  model m = make_model(4, 5, false);
  auto c =
      exec::profile_chain(m, make_input(profiling, 12), profiling, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  const auto s = *store_all{}.solve(*c, unlimited_bytes);
  host_backend backend(s.predicted_peak);  // room for one step
  exec::executor ex(m, *c, backend);
  {
    auto first = ex.run(s, make_input(backend, 12));
    REQUIRE_MESSAGE(first.ok(), first.message());
  }  // its input gradient is freed
  // An optimizer's state, made at its first step between the two runs.
  auto state = backend.allocate(64);
  auto second = ex.run(s, make_input(backend, 12));
  REQUIRE_FALSE(second.ok());
  INFO(second.message());
  CHECK(second.message().find(format_bytes(64) + " of them since the last run ended") !=
        std::string::npos);
  CHECK(second.message().find("optimizer's state") != std::string::npos);
  CHECK(second.message().find("uncounted") != std::string::npos);
  state.release();
  CHECK(ex.run(s, make_input(backend, 12)).ok());
}
