// The executor on DAG models (exec/executor.hpp): toy DAGs (a diamond, a residual net, a node with
// 3 consumers, a U-Net) whose layers allocate exactly: store-all, hand-written programs with
// recomputation, fast-forwards and offloads to the host, checkmate's and hiremate's at several
// budgets give bitwise the gradients of store-all, with a measured peak equal to the simulator's
// instruction by instruction; failures come back as statuses.
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/hiremate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

#include "checkmate_backend.hpp"
#include "graph_schedules.hpp"
#include "test_offload_schedules.hpp"
#include "toy_dags.hpp"
#include "toy_graph_layers.hpp"

using namespace remat;
using remat::exec::host_backend;
using toy::program_in_order;
using toy::recompute_all;
using namespace toy::dags;

namespace {

graph profiled_graph(const std::vector<op_spec>& spec, unsigned seed, bool noisy) {
  host_backend b;
  model m = make_model(spec, seed, noisy);
  auto f = exec::profile_dag(m, make_input(b), b, {.repetitions = 1, .warmup = 0, .name = "toy"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  auto g = build_graph(*f);
  REQUIRE_MESSAGE(g.ok(), g.message());
  return *g;
}

struct outcome {
  std::vector<float> input_grad, param_grads;
  exec::run_result<toy::tensor> run;
  bytes host_high_water = 0;
};

/// Runs s on a fresh model in a backend limited to the budget.
result<outcome> execute(const std::vector<op_spec>& spec, unsigned seed, bool noisy, const graph& g,
                        const schedule& s, bytes budget = unlimited_bytes) {
  model m = make_model(spec, seed, noisy);
  host_backend b(budget);
  exec::executor ex(m, g, b);
  auto r = ex.run(s, make_input(b));
  if (!r) return r.err();
  outcome o;
  for (int i = 0; i < r->input_gradient.n; ++i) o.input_grad.push_back(r->input_gradient[i]);
  for (const auto& n : m.layers) o.param_grads.push_back(n.gw);
  // The forwards each op ran are the schedule's; each backward ran once; nothing is left.
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const int fwd = g.find_compute("fwd " + m.ops[i].name);
    const auto runs = std::count_if(s.ops.begin(), s.ops.end(), [&](const instruction& ins) {
      return ins.is_compute() && ins.node == fwd;
    });
    CHECK(m.layers[i].forward_calls == runs);
    CHECK(r->forwards[i] == runs);
    CHECK(m.layers[i].backward_calls == 1);
  }
  CHECK(b.in_use() == r->input_gradient.bytes());
  CHECK(b.host_in_use() == 0);  // every host copy released
  o.host_high_water = b.host_high_water();
  r->input_gradient.buf.release();  // a buffer must not outlive its backend, b
  o.run = std::move(*r);
  return o;
}

schedule store_all_of(const graph& g) { return {store_all_program(g), g.ideal_time(), 0}; }

/// Gradients equal store-all's bit for bit; peak within the budget and equal to the simulator's
/// instruction by instruction, and the host's peak the simulator's. Returns the host's peak.
bytes check_schedule(const std::vector<op_spec>& spec, unsigned seed, bool noisy, const graph& g,
                     const schedule& s, bytes budget, const outcome& reference) {
  INFO(to_string(g, s));
  const auto sim = sim::simulate(g, s, {.budget = budget});
  REQUIRE_MESSAGE(sim.valid, (sim.first_violation ? sim.first_violation->message : ""));
  const auto got = execute(spec, seed, noisy, g, s, budget);
  REQUIRE_MESSAGE(got.ok(), got.message());
  CHECK(got->input_grad == reference.input_grad);
  CHECK(got->param_grads == reference.param_grads);
  CHECK(got->run.measured_peak <= budget);
  CHECK(got->run.measured_peak == sim.peak);
  REQUIRE(got->run.op_peaks.size() == sim.timeline.size());
  for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
    INFO("instruction ", i, ": ", to_string(g, s.ops[i]));
    CHECK(got->run.op_peaks[i] == sim.timeline[i].peak);
  }
  CHECK(got->host_high_water == sim.host_peak);
  return got->host_high_water;
}

struct toy_case {
  const char* name;
  const std::vector<op_spec>* spec;
};
const toy_case cases[] = {
    {"diamond", &diamond}, {"residual", &residual}, {"three consumers", &three}};

}  // namespace

TEST_CASE(
    "executor on DAGs: store-all and recomputing schedules give store-all's gradients bit for "
    "bit") {
  for (const auto& tc : cases)
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const bool noisy = seed != 2;
      INFO(tc.name, " seed ", seed);
      const graph g = profiled_graph(*tc.spec, seed, noisy);
      const schedule sa = store_all_of(g);
      const bytes peak = sim::simulate(g, sa).peak;
      const auto reference = execute(*tc.spec, seed, noisy, g, sa, peak);
      REQUIRE_MESSAGE(reference.ok(), reference.message());
      check_schedule(*tc.spec, seed, noisy, g, sa, peak, *reference);
      for (int keep : {0, 2, 3}) {
        const schedule s = recompute_all(g, keep);
        CHECK(std::any_of(s.ops.begin(), s.ops.end(),
                          [](const auto& i) { return i.op == op_kind::fast_forward; }));
        check_schedule(*tc.spec, seed, noisy, g, s, sim::simulate(g, s).peak, *reference);
      }
    }
}

TEST_CASE("executor on DAGs: activations offloaded to the host and prefetched back, as simulated") {
  int runs = 0;
  for (const auto& tc : cases)
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const bool noisy = seed != 2;
      INFO(tc.name, " seed ", seed);
      const graph g = profiled_graph(*tc.spec, seed, noisy);
      const schedule sa = store_all_of(g);
      const auto reference = execute(*tc.spec, seed, noisy, g, sa);
      REQUIRE_MESSAGE(reference.ok(), reference.message());
      CHECK(reference->host_high_water == 0);
      // Every activation (the graph input included) between its uses, or every other one; and
      // also before it is freed (a tensor freed on the host: its host copy released).
      const std::function<bool(int)> all = [&](int d) {
        return g.data(d).kind == data_kind::activation;
      };
      const std::function<bool(int)> every_other = [&](int d) { return all(d) && d % 2 == 0; };
      for (const schedule& base : {sa, recompute_all(g, 0), recompute_all(g, 2)})
        for (const auto* movable : {&all, &every_other})
          for (const bool before_free : {false, true}) {
            const schedule s = offload_test::with_graph_offloads(g, base, *movable, before_free);
            REQUIRE(offload_test::transfers_in(s) > 0);
            const auto sim = sim::simulate(g, s);
            INFO(to_string(g, s));
            REQUIRE_MESSAGE(sim.valid, (sim.first_violation ? sim.first_violation->message : ""));
            CHECK(sim.peak <=
                  sim::simulate(g, base).peak);  // moving data out never raises the peak
            CHECK(sim.host_peak > 0);
            // A finite link changes the times, not the validity.
            const auto slow = sim::simulate(g, s, {.hw = machine::with_bandwidth(1e4)});
            CHECK_MESSAGE(slow.valid, (slow.first_violation ? slow.first_violation->message : ""));
            // Bitwise store-all's gradients, the simulator's memory instruction by instruction,
            // in a backend whose budget is exactly the simulated peak.
            CHECK(check_schedule(*tc.spec, seed, noisy, g, s, sim.peak, *reference) > 0);
            ++runs;
          }
    }
  CHECK(runs == 3 * 3 * 3 * 2 * 2);
}

TEST_CASE("executor on DAGs: transfers on a backend that cannot move data are refused up front") {
  const graph g = profiled_graph(diamond, 2, false);
  const schedule s = offload_test::with_graph_offloads(
      g, store_all_of(g), [&](int d) { return g.data(d).kind == data_kind::activation; });
  REQUIRE(sim::simulate(g, s).valid);
  // host_backend moves data; one with its transfers hidden does not (the toy layers take any
  // host_backend).
  struct plain_backend : host_backend {
    using host_backend::host_backend;
    void offload() = delete;
    void prefetch() = delete;
    void wait() = delete;
  };
  static_assert(!exec::TransferBackend<plain_backend>);
  model m = make_model(diamond, 2, false);
  plain_backend b;
  exec::executor ex(m, g, b);
  const auto r = ex.run(s, make_input(b));
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == status::invalid_problem);
  CHECK(r.message().find("executor: instruction ") != std::string::npos);
  CHECK(r.message().find("moves a tensor, but the backend has no offload/prefetch/wait") !=
        std::string::npos);
  for (const auto& n : m.layers) CHECK(n.forward_calls == 0);
  CHECK(b.in_use() == 0);
}

TEST_CASE("executor on DAGs: a 3-contribution gradient is summed in store-all's order or refused") {
  const graph g = profiled_graph(three, 4, false);
  const auto sa = store_all_of(g);
  const auto reference = execute(three, 4, false, g, sa);
  REQUIRE(reference.ok());
  const int q = g.find_compute("bwd q"), k = g.find_compute("bwd k"), v = g.find_compute("bwd v");
  REQUIRE((v < k && k < q));  // store-all: bwd v, bwd k, bwd q
  auto order_with = [&](std::vector<int> bwd) {
    std::vector<int> order;
    for (int c = 0; c < g.compute_count(); ++c)
      if (c != q && c != k && c != v) order.push_back(c);
    const auto at = std::find(order.begin(), order.end(), g.find_compute("bwd a"));
    order.insert(at, bwd.begin(), bwd.end());
    return program_in_order(g, order);
  };
  // The first two in either order: the same bits.
  const auto swapped = order_with({k, v, q});
  check_schedule(three, 4, false, g, swapped, unlimited_bytes, *reference);
  // The third before the second: refused before anything runs.
  for (const auto& bwd : {std::vector{v, q, k}, std::vector{q, k, v}}) {
    const auto s = order_with(bwd);
    REQUIRE(sim::simulate(g, s).valid);
    model m = make_model(three, 4, false);
    host_backend b;
    exec::executor ex(m, g, b);
    auto r = ex.run(s, make_input(b));
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("'grad a'") != std::string::npos);
    CHECK(r.message().find("store-all's order") != std::string::npos);
    CHECK(r.message().find("instruction ") != std::string::npos);
    for (const auto& n : m.layers) CHECK(n.forward_calls == 0);
    CHECK(b.in_use() == 0);
  }
}

TEST_CASE("executor on DAGs: a backward run twice is refused (parameter gradients would double)") {
  const graph g = profiled_graph(three, 5, false);
  // bwd v, bwd k, bwd q, then free grad a and run the three again.
  std::vector<int> order;
  for (int c = 0; c < g.compute_count(); ++c) {
    order.push_back(c);
    if (c == g.find_compute("bwd q"))
      order.insert(order.end(), {-1 - g.find_data("grad a"), g.find_compute("bwd v"),
                                 g.find_compute("bwd k"), g.find_compute("bwd q")});
  }
  const schedule s2 = program_in_order(g, order);
  // The simulator refuses it too (every backward runs once), and so does the executor.
  const auto rep = sim::simulate(g, s2);
  REQUIRE_FALSE(rep.valid);
  CHECK(rep.first_violation->kind == sim::violation_kind::backward_repeated);
  model m = make_model(three, 5, false);
  host_backend b;
  exec::executor ex(m, g, b);
  auto r = ex.run(s2, make_input(b));
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == status::invalid_problem);
  CHECK(r.message().find("'bwd v'") != std::string::npos);
  for (const auto& n : m.layers) CHECK(n.forward_calls == 0);
}

#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
TEST_CASE("executor on DAGs: checkmate's schedules from low budgets to store-all's peak") {
  int runs = 0;
  for (const auto& tc : cases) {
    const unsigned seed = 7;
    INFO(tc.name);
    const graph g = profiled_graph(*tc.spec, seed, true);
    const schedule sa = store_all_of(g);
    const bytes peak = sim::simulate(g, sa).peak;
    const auto reference = execute(*tc.spec, seed, true, g, sa);
    REQUIRE(reference.ok());
    // From the peak of maximal recomputation (a feasible budget; finding the exact minimum
    // takes a bisection of MILPs) to store-all's.
    const bytes lo = sim::simulate(g, recompute_all(g, 0)).peak;
    for (int step = 0; step <= 3; ++step) {
      const bytes budget = lo + (peak - lo) * step / 3;
      INFO("budget ", budget, " (recompute-all ", lo, ", store-all ", peak, ")");
      const auto s = checkmate<milp_backend>{}.solve(g, budget);
      REQUIRE_MESSAGE(s.ok(), s.message());
      check_schedule(*tc.spec, seed, true, g, *s, budget, *reference);
      ++runs;
    }
  }
  CHECK(runs == 12);
}

TEST_CASE("executor on DAGs: hiremate's plans of a U-Net, cut into three levels and more") {
  const unsigned seed = 5;
  const graph g = profiled_graph(unet, seed, true);
  const schedule sa = store_all_of(g);
  const bytes peak = sim::simulate(g, sa).peak;
  const auto reference = execute(unet, seed, true, g, sa);
  REQUIRE(reference.ok());
  hiremate<milp_backend> h;
  h.partitioner.limits = {3, 4, 0.5};
  h.peak_budgets = 3;
  h.save_budgets = 3;
  // Two budgets, then one below hiremate's minimum: planned at the minimum it reports.
  std::vector<bytes> budgets{peak * 9 / 10, peak * 8 / 10};
  const auto low = h.solve_detailed(g, peak / 2);
  REQUIRE(low.code() == status::budget_too_small);
  REQUIRE(low.err().minimum_budget.has_value());
  budgets.push_back(*low.err().minimum_budget);
  int recomputing = 0;
  for (const bytes budget : budgets) {
    INFO("budget ", budget, " (store-all ", peak, ")");
    const auto p = h.solve_detailed(g, budget);
    REQUIRE_MESSAGE(p.ok(), p.message());
    CHECK(p->details.levels >= 3);
    check_schedule(unet, seed, true, g, p->program, budget, *reference);
    recomputing += toy::recomputes(g, p->program) ? 1 : 0;
  }
  CHECK(recomputing == 3);
}
#endif

TEST_CASE("executor on DAGs: a layer that throws, outgrows its profile or forgets a gradient") {
  const graph g = profiled_graph(residual, 3, true);
  const auto s = recompute_all(g, 0);
  SUBCASE("throws: the instruction and node are named, random states are as before") {
    model m = make_model(residual, 3, true);
    auto& bad = m.layers[2];
    const auto rng_before = bad.random_state();
    bad.throw_at_forward = 1;  // its recomputation
    host_backend b;
    exec::executor ex(m, g, b);
    auto r = ex.run(s, make_input(b));
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == status::execution_error);
    CHECK(r.message().find("'fwd f2'") != std::string::npos);
    CHECK(r.message().find("instruction ") != std::string::npos);
    CHECK(r.message().find("injected failure") != std::string::npos);
    CHECK(bad.random_state() == rng_before);
    CHECK(b.in_use() == 0);
  }
  SUBCASE("outgrows") {
    model m = make_model(residual, 3, true);
    m.layers[1].grow_by = 2;
    host_backend b;
    exec::executor ex(m, g, b);
    auto r = ex.run(s, make_input(b));
    CHECK(r.code() == status::execution_error);
    CHECK(r.message().find("'fwd f1'") != std::string::npos);
    CHECK(r.message().find("profile the model again") != std::string::npos);
  }
  SUBCASE("forgets a gradient") {
    model m = make_model(residual, 3, true);
    m.layers[2].leave_empty = true;  // f2: the only reader of f1, its gradient starts empty
    host_backend b;
    exec::executor ex(m, g, b);
    auto r = ex.run(s, make_input(b));
    CHECK(r.code() == status::execution_error);
    CHECK(r.message().find("'bwd f2'") != std::string::npos);
    CHECK(r.message().find("empty") != std::string::npos);
  }
  SUBCASE("out of budget: the allocation that does not fit is named") {
    model m = make_model(residual, 3, true);
    const bytes peak = sim::simulate(g, s).peak;
    host_backend b(peak - 1);
    exec::executor ex(m, g, b);
    auto r = ex.run(s, make_input(b));
    CHECK(r.code() == status::execution_error);
    CHECK(r.message().find("would exceed the budget of") != std::string::npos);
    CHECK(r.message().find("instruction ") != std::string::npos);
    CHECK(b.in_use() == 0);
  }
}

TEST_CASE(
    "executor on DAGs: schedules and models that do not match the graph are refused up front") {
  const graph g = profiled_graph(diamond, 2, false);
  host_backend b;
  SUBCASE("a schedule the simulator rejects") {
    model m = make_model(diamond, 2, false);
    exec::executor ex(m, g, b);
    schedule broken{{instruction::compute(g.find_compute("fwd b"))}, 0, 0};
    auto r = ex.run(broken, make_input(b));
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("not valid") != std::string::npos);
    CHECK(r.message().find("'fwd b'") != std::string::npos);
  }
  SUBCASE("a model with other edges") {
    auto other = diamond;
    other[3].inputs = {"c", "b"};
    model m = make_model(other, 2, false);
    exec::executor ex(m, g, b);
    auto r = ex.run(store_all_of(g), make_input(b));
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("was not built from this model") != std::string::npos);
  }
  SUBCASE("fewer layers than ops") {
    model m = make_model(diamond, 2, false);
    m.layers.pop_back();
    exec::executor ex(m, g, b);
    auto r = ex.run(store_all_of(g), make_input(b));
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("4 layers but 5 ops") != std::string::npos);
  }
  SUBCASE("an op reading a tensor twice") {
    model m = make_model(diamond, 2, false);
    m.ops[3].inputs = {"b", "b"};
    exec::executor ex(m, g, b);
    auto r = ex.run(store_all_of(g), make_input(b));
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("reads 'b' twice") != std::string::npos);
  }
  SUBCASE("an input larger than planned") {
    model m = make_model(diamond, 2, false);
    exec::executor ex(m, g, b);
    auto r = ex.run(store_all_of(g), toy::tensor::make(b, input_floats + 1));
    CHECK(r.code() == status::execution_error);
  }
  CHECK(b.in_use() == 0);
}

namespace {

/// A host backend with the optional hooks of the CUDA backend: a clock that advances a quarter
/// of a second per mark (so times can only come from the marks), and a record of the run's
/// begin and end (what was in use then).
class hooked_backend : public host_backend {
 public:
  using host_backend::host_backend;
  int mark_time() { return marks++; }
  [[nodiscard]] seconds seconds_between(int from, int to) const { return 0.25 * (to - from); }
  void begin_run() {
    ++begins;
    in_use_at_begin = in_use();
  }
  void end_run() {
    ++ends;
    in_use_at_end = in_use();
  }
  int marks = 0, begins = 0, ends = 0;
  bytes in_use_at_begin = -1, in_use_at_end = -1;
};
static_assert(exec::TimingBackend<hooked_backend>);
static_assert(exec::RunAwareBackend<hooked_backend>);

}  // namespace

TEST_CASE("executor on DAGs and profile_dag: a backend's timing marks and run hooks") {
  hooked_backend probe;
  model pm = make_model(diamond, 6, true);
  const auto f = exec::profile_dag(pm, make_input(probe), probe, {.repetitions = 3, .warmup = 1});
  REQUIRE_MESSAGE(f.ok(), f.message());
  for (const auto& op : f->ops) {
    CHECK(op.forward_time == 0.25);  // one mark before, one after: the backend's clock
    CHECK(op.backward_time == 0.25);
  }
  CHECK(probe.begins == 0);  // profiling is not a run
  const auto g = build_graph(*f);
  REQUIRE_MESSAGE(g.ok(), g.message());
  const auto s = recompute_all(*g, 2);

  SUBCASE("a run: marks around every instruction, begin and end around the run") {
    model m = make_model(diamond, 6, true);
    hooked_backend b;
    exec::executor ex(m, *g, b);
    const auto r = ex.run(s, make_input(b));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(b.marks == static_cast<int>(s.ops.size()) + 1);
    REQUIRE(r->op_times.size() == s.ops.size());
    for (const seconds t : r->op_times) CHECK(t == 0.25);
    CHECK(r->elapsed == 0.25 * static_cast<double>(s.ops.size()));
    CHECK(b.begins == 1);
    CHECK(b.ends == 1);
    CHECK(b.in_use_at_begin == 4 * input_floats);  // the input is there before the run begins
    CHECK(b.in_use_at_end ==
          4 * input_floats + r->input_gradient.bytes());  // the input is freed after
    CHECK(b.in_use() == r->input_gradient.bytes());
  }
  SUBCASE("a failed run ends too, before its leftovers are freed") {
    model m = make_model(diamond, 6, true);
    m.layers[2].throw_at_forward = 0;
    hooked_backend b;
    exec::executor ex(m, *g, b);
    const auto r = ex.run(s, make_input(b));
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == status::execution_error);
    CHECK(b.begins == 1);
    CHECK(b.ends == 1);
    CHECK(b.in_use_at_end > 0);
    CHECK(b.in_use() == 0);
  }
  SUBCASE("a schedule refused up front is no run") {
    model m = make_model(diamond, 6, true);
    hooked_backend b;
    exec::executor ex(m, *g, b);
    const schedule broken{{instruction::compute(g->find_compute("fwd b"))}, 0, 0};
    CHECK(ex.run(broken, make_input(b)).code() == status::invalid_problem);
    CHECK(b.begins == 0);
    CHECK(b.ends == 0);
    CHECK(b.marks == 0);
  }
}
