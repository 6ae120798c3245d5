// The executor's offload, prefetch and wait on host_backend (exec/executor.hpp), on chain models:
// hand-written offloading programs (chain notation, lowered) on toy layers and on an Eigen model,
// and the program F1_ck F2_all O1 W1 F3_all B3 P1 W1 B2 F1_all B1, give bitwise the gradients of
// plain training, the measured memory equals the simulator's instruction by instruction, round
// trips are exact, and a program with transfers is refused where the backend or the tensor cannot
// move data. (Transfers on DAG models: test_graph_executor.cpp.)
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec.hpp>
#include <remat/exec/measured.hpp>
#include <remat/io/trace.hpp>
#include <remat/remat.hpp>

#include "test_offload_schedules.hpp"
#include "toy_layers.hpp"

using namespace remat;
using remat::exec::host_backend;

static_assert(exec::TransferBackend<host_backend>);
static_assert(exec::TransferableTensor<toy::tensor, host_backend>);
static_assert(exec::TransferableTensor<eg::tensor, host_backend>);

namespace {

using toy_model = std::vector<toy::stage>;

toy_model make_toy(int n, unsigned seed) { return toy::make_chain_model(n, seed, true); }

/// A toy chain's parameter gradients and input gradient, to compare runs bit for bit.
std::vector<float> grads(const toy_model& m, const toy::tensor& dx) {
  std::vector<float> g;
  for (const auto& st : m) g.push_back(st.gw);
  for (int i = 0; i < dx.n; ++i) g.push_back(dx[i]);
  return g;
}

toy::tensor toy_input(host_backend& b) {
  auto x = toy::tensor::make(b, 12);
  for (int i = 0; i < 12; ++i) x[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  return x;
}

}  // namespace

TEST_CASE("offload: host_backend round trips are bitwise exact and counted in the right store") {
  host_backend b(1000);
  auto d = b.allocate(400);
  for (int i = 0; i < 100; ++i) d.as<float>()[i] = std::ldexp(1.0f + static_cast<float>(i), -i);
  d.as<float>()[7] = -0.0f;
  std::vector<char> before(400);
  std::memcpy(before.data(), d.data(), 400);
  auto [h, out] = b.offload(d);
  CHECK(out.ready());
  CHECK(h.on_host());
  CHECK(h.size() == 400);
  CHECK(b.host_in_use() == 400);
  CHECK(b.in_use() == 400);  // the device copy is the caller's to release
  d.release();
  CHECK(b.in_use() == 0);
  auto [back, in] = b.prefetch(h);
  CHECK(in.ready());
  CHECK_FALSE(back.on_host());
  CHECK(b.in_use() == 400);
  CHECK(std::memcmp(back.data(), before.data(), 400) == 0);
  h.release();
  CHECK(b.host_in_use() == 0);
  CHECK(b.host_high_water() == 400);
  // The host store is unbudgeted; the budgeted one is not.
  auto big = b.host_allocate(5000);
  CHECK(big.size() == 5000);
  b.set_activity("P7 of a_7");
  auto [hb, x] = b.offload(back);
  CHECK_THROWS_WITH_AS((void)b.prefetch(back),
                       "P7 of a_7: prefetch of a buffer that is not on the host",
                       std::invalid_argument);
  CHECK_THROWS_AS((void)b.offload(hb), std::invalid_argument);
  const auto hold = b.allocate(600);
  CHECK_THROWS_AS((void)b.prefetch(hb), exec::out_of_budget);  // 400 more than the 1000 budget
}

TEST_CASE(
    "offload: toy chains under offloading schedules: bitwise gradients, the simulator's memory") {
  int runs = 0;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const int n = 3 + static_cast<int>(seed % 4);
    host_backend pb;
    toy_model pm = make_toy(n, seed);
    auto profiled = exec::profile_chain(pm, toy_input(pb), pb, {.repetitions = 1, .warmup = 0});
    REQUIRE_MESSAGE(profiled.ok(), profiled.message());
    const chain& c = *profiled;
    auto run = [&](const schedule& s, host_backend& b, toy_model& m) {
      exec::executor ex(m, c, b);
      return ex.run(s, toy_input(b));
    };
    toy_model rm = make_toy(n, seed);
    host_backend rb;
    const auto ref = run(*store_all{}.solve(c, unlimited_bytes), rb, rm);
    REQUIRE(ref.ok());
    const auto want = grads(rm, ref->input_gradient);

    const bytes peak = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
    const bytes lo = rotor{}.minimum_budget(c);
    for (int step = 0; step <= 2; ++step) {
      const auto planned = rotor{.slots = 0}.solve(c, lo + (peak - lo) * step / 2);
      REQUIRE(planned.ok());
      const schedule s = offload_test::with_offloads(*planned, n);
      INFO("seed ", seed, ": ", to_chain_string(n, s).value_or(to_string(s)));
      REQUIRE(offload_test::transfers_in(s) > 0);
      const auto sim = sim::simulate(c, s);
      REQUIRE_MESSAGE(sim.valid, sim.first_violation->message);
      CHECK(sim.peak <= planned->predicted_peak);  // offloading never raises the peak
      toy_model m = make_toy(n, seed);
      host_backend b(sim.peak);  // exactly the simulated peak
      const auto r = run(s, b, m);
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(grads(m, r->input_gradient) == want);
      CHECK(r->measured_peak == sim.peak);
      REQUIRE(r->op_peaks.size() == sim.timeline.size());
      for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
        INFO("instruction ", i, " ", to_string(s.ops[i]));
        CHECK(r->op_peaks[i] == sim.timeline[i].peak);
      }
      CHECK(b.in_use() == r->input_gradient.bytes());
      CHECK(b.host_in_use() == 0);  // every host copy released
      CHECK(b.host_high_water() > 0);
      ++runs;
    }
  }
  CHECK(runs == 15);
}

TEST_CASE("offload: pofo's plans train toy chains with bitwise gradients and the simulated peak") {
  // pofo moves a_k also while abar_k is stored (F_k^all): the executor must copy the tensor and
  // keep the layer's context. Budgets from pofo's minimum (below rotor's when offloading helps)
  // to the store-all peak, at a bandwidth that makes copies cost about a forward, and infinite.
  int runs = 0, with_transfers = 0, below_rotor = 0;
  for (unsigned seed = 1; seed <= 4; ++seed) {
    const int n = 4 + static_cast<int>(seed % 3);
    host_backend pb;
    toy_model pm = make_toy(n, seed);
    auto profiled = exec::profile_chain(pm, toy_input(pb), pb, {.repetitions = 1, .warmup = 0});
    REQUIRE_MESSAGE(profiled.ok(), profiled.message());
    const chain& c = *profiled;
    toy_model rm = make_toy(n, seed);
    host_backend rb;
    const auto ref =
        exec::executor(rm, c, rb).run(*store_all{}.solve(c, unlimited_bytes), toy_input(rb));
    REQUIRE(ref.ok());
    const auto want = grads(rm, ref->input_gradient);
    const bytes peak = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
    const double beta = static_cast<double>(c.a(1)) / std::max(c.uf(1), 1e-9);
    for (double bw : {beta, std::numeric_limits<double>::infinity()}) {
      const pofo policy{.hw = machine::with_bandwidth(bw), .slots = 0};
      const bytes lo = policy.minimum_budget(c);
      for (int step = 0; step <= 3; ++step) {
        const bytes budget = lo + (peak - lo) * step / 3;
        const auto plan = policy.solve_detailed(c, budget);
        REQUIRE_MESSAGE(plan.ok(), plan.message());
        const schedule& s = plan->program;
        INFO("seed ", seed, " budget ", budget, ": ",
             to_string(std::span<const chain_op>(plan->details.ops)));
        // host_backend copies synchronously: its memory is the simulator's with immediate copies.
        const auto sim = sim::simulate(c, s, {.budget = budget});
        REQUIRE_MESSAGE(sim.valid, sim.first_violation->message);
        toy_model m = make_toy(n, seed);
        host_backend b(budget);
        const auto r = exec::executor(m, c, b).run(s, toy_input(b));
        REQUIRE_MESSAGE(r.ok(), r.message());
        CHECK(grads(m, r->input_gradient) == want);
        CHECK(r->measured_peak == sim.peak);
        CHECK(r->measured_peak <= budget);
        CHECK(b.host_in_use() == 0);
        ++runs;
        if (!plan->details.offloaded.empty()) ++with_transfers;
        if (budget < rotor{}.minimum_budget(c)) ++below_rotor;
      }
    }
  }
  CHECK(runs == 32);
  CHECK(with_transfers >= 8);
  MESSAGE("pofo plans trained: ", runs, ", with transfers: ", with_transfers,
          ", below rotor's minimum: ", below_rotor);
}

TEST_CASE(
    "offload: the chain program F1_ck F2_all O1 W1 F3_all B3 P1 W1 B2 F1_all B1 runs as "
    "simulated") {
  const char* text = "F1_ck F2_all O1 W1 F3_all B3 P1 W1 B2 F1_all B1";
  for (unsigned seed = 1; seed <= 3; ++seed) {
    INFO("seed ", seed);
    host_backend pb;
    toy_model pm = make_toy(3, seed);
    auto profiled = exec::profile_chain(pm, toy_input(pb), pb, {.repetitions = 1, .warmup = 0});
    REQUIRE_MESSAGE(profiled.ok(), profiled.message());
    const chain& c = *profiled;
    const auto s = parse_chain_program(3, text);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(to_chain_string(3, *s) == text);
    CHECK(offload_test::transfers_in(*s) == 4);
    const auto sim = sim::simulate(c, *s);
    REQUIRE_MESSAGE(sim.valid, sim.first_violation->message);
    CHECK(sim.host_peak == c.at(1).output_bytes);  // a_1 on the host
    // With a finite link the program stays valid, only its time changes.
    const auto slow = sim::simulate(c, *s, {.hw = machine::with_bandwidth(1e3)});
    REQUIRE_MESSAGE(slow.valid, slow.first_violation->message);
    CHECK(slow.makespan > sim.makespan);

    // The reference: plain training (store-all).
    toy_model rm = make_toy(3, seed);
    host_backend rb;
    exec::executor ref_ex(rm, c, rb);
    const auto ref = ref_ex.run(*store_all{}.solve(c, unlimited_bytes), toy_input(rb));
    REQUIRE_MESSAGE(ref.ok(), ref.message());

    toy_model m = make_toy(3, seed);
    host_backend b(sim.peak);  // exactly the simulated peak
    exec::executor ex(m, c, b);
    const auto r = ex.run(*s, toy_input(b));
    REQUIRE_MESSAGE(r.ok(), r.message());
    for (std::size_t l = 0; l < 3; ++l) CHECK(m[l].gw == rm[l].gw);
    REQUIRE(r->input_gradient.n == ref->input_gradient.n);
    for (int i = 0; i < r->input_gradient.n; ++i)
      CHECK(r->input_gradient[i] == ref->input_gradient[i]);
    CHECK(r->forwards == std::vector<int>{2, 1, 1});  // F1_ck and F1_all
    CHECK(r->measured_peak == sim.peak);
    REQUIRE(r->op_peaks.size() == sim.timeline.size());
    for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
      INFO("instruction ", i, " ", to_string(s->ops[i]));
      CHECK(r->op_peaks[i] == sim.timeline[i].peak);
    }
    CHECK(b.in_use() == r->input_gradient.bytes());
    CHECK(b.host_in_use() == 0);
    CHECK(b.host_high_water() == c.at(1).output_bytes);
  }
}

TEST_CASE(
    "offload: measured_report of a run: one point per instruction on its lane, the measured peak, "
    "traced beside the plan") {
  host_backend pb;
  toy_model pm = make_toy(3, 1);
  auto profiled = exec::profile_chain(pm, toy_input(pb), pb, {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(profiled.ok(), profiled.message());
  const chain& c = *profiled;
  const auto s = parse_chain_program(3, "F1_ck F2_all O1 W1 F3_all B3 P1 W1 B2 F1_all B1");
  REQUIRE_MESSAGE(s.ok(), s.message());
  const auto planned = sim::simulate(c, *s);
  REQUIRE(planned.valid);
  toy_model m = make_toy(3, 1);
  host_backend b(planned.peak);
  exec::executor ex(m, c, b);
  const auto run = ex.run(*s, toy_input(b));
  REQUIRE_MESSAGE(run.ok(), run.message());

  const auto measured = exec::measured_report(*s, *run);
  REQUIRE_MESSAGE(measured.ok(), measured.message());
  CHECK(measured->valid);
  CHECK(measured->peak == run->measured_peak);
  CHECK(measured->makespan == run->elapsed);
  REQUIRE(measured->timeline.size() == s->ops.size());
  seconds t = 0;
  for (std::size_t i = 0; i < s->ops.size(); ++i) {
    const auto& p = measured->timeline[i];
    CAPTURE(i);
    CHECK(p.op == i);
    CHECK(p.lane == planned.timeline[i].lane);  // O1 and P1 on their lanes
    CHECK(p.start == t);
    CHECK(p.end == t + run->op_times[i]);
    CHECK(p.peak == run->op_peaks[i]);
    t = p.end;
  }
  // Planned and measured side by side: one process each, an event per instruction in each.
  const std::vector<io::trace_process> both{io::trace_of(c, *s, planned, "planned"),
                                            io::trace_of(c, *s, *measured, "measured")};
  const auto trace = io::chrome_trace(both);
  REQUIRE_MESSAGE(trace.ok(), trace.message());
  const std::string complete = "{\"ph\":\"X\",";  // each event begins with its ph, then its pid
  for (const std::string pid : {"\"pid\":1,", "\"pid\":2,"}) {
    std::size_t events = 0;
    for (auto at = trace->find(complete); at != std::string::npos;
         at = trace->find(complete, at + 1))
      events += trace->compare(at + complete.size(), pid.size(), pid) == 0;
    CHECK(events == s->ops.size());
  }
  // A run of another schedule is refused.
  const schedule other{{s->ops.begin(), s->ops.begin() + 3}, 0, 0};
  CHECK(exec::measured_report(other, *run).code() == status::invalid_problem);
}

TEST_CASE("offload: an Eigen MLP with its input and checkpoints on the host") {
  constexpr eg::index batch = 4, width = 16;
  auto build = [] { return eg::make_mlp(3, width, batch, 11, 0.25f); };
  host_backend pb;
  eg::model pm = build();
  auto profiled = exec::profile_chain(pm, eg::make_input(pb, batch, width, 5), pb,
                                      {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(profiled.ok(), profiled.message());
  const chain& c = *profiled;
  const int n = c.length();

  // Plain training: the reference.
  host_backend rb;
  eg::model rm = build();
  eg::zero_grad(rm);
  (void)eg::backprop(rm, eg::make_input(rb, batch, width, 5), rb);
  const auto want = eg::flat_gradients(rm);

  const bytes peak = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
  const bytes lo = rotor{}.minimum_budget(c);
  for (const bytes budget : {lo, (lo + peak) / 2, peak}) {
    const auto planned = rotor{.slots = 0}.solve(c, budget);
    REQUIRE(planned.ok());
    const schedule s = offload_test::with_offloads(*planned, n);
    INFO(to_chain_string(n, s).value_or(to_string(s)));
    REQUIRE(offload_test::transfers_in(s) > 0);
    const auto sim = sim::simulate(c, s);
    REQUIRE_MESSAGE(sim.valid, sim.first_violation->message);
    eg::model m = build();
    eg::zero_grad(m);
    host_backend b(sim.peak);
    exec::executor ex(m, c, b);
    const auto r = ex.run(s, eg::make_input(b, batch, width, 5));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(eg::flat_gradients(m) == want);
    CHECK(r->measured_peak == sim.peak);
    REQUIRE(r->op_peaks.size() == sim.timeline.size());
    for (std::size_t i = 0; i < sim.timeline.size(); ++i)
      CHECK(r->op_peaks[i] == sim.timeline[i].peak);
    CHECK(b.host_in_use() == 0);
  }
}

namespace {

/// A backend without transfers (only the Backend concept), and a tensor on it.
struct plain_backend {
  host_backend inner;
  host_backend::buffer allocate(bytes n) { return inner.allocate(n); }
  [[nodiscard]] bytes in_use() const { return inner.in_use(); }
  [[nodiscard]] bytes high_water() const { return inner.high_water(); }
  [[nodiscard]] bytes budget() const { return inner.budget(); }
  void reset_high_water() { inner.reset_high_water(); }
  void set_activity(std::string s) { inner.set_activity(std::move(s)); }
  [[nodiscard]] const std::string& activity() const { return inner.activity(); }
};
static_assert(!exec::TransferBackend<plain_backend>);

/// A tensor that does not name its buffer.
struct sealed {
  host_backend::buffer buf;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
};
static_assert(!exec::TransferableTensor<sealed, host_backend>);

/// y = x (a copy); the loss's backward returns x. Works with any backend of host buffers.
struct copy_layer {
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  template <class T, class B>
  T forward(const T& x, B& b) {
    T y{b.allocate(x.bytes())};
    if (x.bytes() > 0) std::memcpy(y.buf.data(), x.buf.data(), static_cast<std::size_t>(x.bytes()));
    return y;
  }
  template <class T, class B>
  T forward_save(const T& x, context&, B& b) {
    return forward(x, b);
  }
  template <class T, class B>
  T backward(const T& x, const T&, const context&, const T&, B& b) {
    return forward(x, b);
  }
  template <class T, class B>
  T backward(const T& x, const T&, const context&, B& b) {
    return forward(x, b);
  }
};

}  // namespace

TEST_CASE("offload: a schedule with transfers where data cannot move is an invalid_problem") {
  const chain c{"copy", 8, {{"c1", 1, 1, 8, 8, 0, 0}, {"loss", 1, 1, 8, 8, 0, 0}}};
  std::vector<copy_layer> m(2);
  const char* text = "F1_ck O0 F2_all B2 W0 P0 W0 F1_all B1";
  const auto lowered = parse_chain_program(2, text);
  REQUIRE_MESSAGE(lowered.ok(), lowered.message());
  const schedule with = *lowered;
  REQUIRE(sim::simulate(c, with).valid);
  CHECK(to_chain_string(2, with) == text);
  const schedule without = *store_all{}.solve(c, unlimited_bytes);
  {
    plain_backend b;
    exec::executor ex(m, c, b);
    const auto r = ex.run(with, toy::tensor{b.allocate(8), 2});
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("executor: instruction 1 (O0) moves a tensor, but the backend has no "
                           "offload/prefetch/wait") != std::string::npos);
    CHECK(ex.run(without, toy::tensor{b.allocate(8), 2}).ok());  // the rest still runs
  }
  {
    host_backend b;
    exec::executor ex(m, c, b);
    const auto r = ex.run(with, sealed{b.allocate(8)});
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("the tensor type does not name its backend buffer") !=
          std::string::npos);
    CHECK(ex.run(without, sealed{b.allocate(8)}).ok());
  }
  {
    // The simulator's violations come back as before, transfers included.
    host_backend b;
    exec::executor ex(m, c, b);
    const auto bad =
        parse_chain_program(2, "F1_ck O0 F2_all B2 P0 W0 F1_all B1");  // no W0 before P0
    REQUIRE(bad.ok());  // the lowering leaves transfers to the simulator
    const auto r = ex.run(*bad, toy::tensor{b.allocate(8), 2});
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("executor: the schedule is not valid") != std::string::npos);
    CHECK(
        r.message().find(
            "instruction 9 (P0): 'input' was offloaded (instruction 1 (O0)) but not waited for") !=
        std::string::npos);
  }
}
