// The executor on DAG models on the CUDA backend, with a small DAG of deterministic CUDA toy ops:
// "a" is read by three ops (its gradient sums three contributions), "sum" adds three inputs and
// "res" two (the graph input is read twice), then a chain of five. Store-all, hand-written
// recomputing and fast-forward schedules and (with a MILP backend) checkmate's give store-all's
// gradients bit for bit, with a measured peak within the budget and equal to the graph simulator's;
// a recorded run's static placement is replayed; activations offloaded on the copy streams and
// prefetched back give the same gradients; profile_dag measures the ops' sizes exactly, with
// CUDA-event times.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

#include "exec/checkmate_backend.hpp"
#include "exec/graph_schedules.hpp"
#include "exec/test_offload_schedules.hpp"
#include "graph_kernels.hpp"
#include "toy_kernels.hpp"

using namespace remat;
using namespace remat::literals;

namespace {

struct gtensor {
  cuda::device_buffer buf;
  int n = 0;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
  [[nodiscard]] float* data() const { return buf.as<float>(); }
  /// The buffer holding the data, for offload and prefetch.
  cuda::device_buffer& storage() { return buf; }
  static gtensor make(cuda::backend& b, int n) { return {b.allocate(remat::bytes{4} * n), n}; }
};

enum class op_type { tanh, add, loss };

/// One op of the toy DAG, every kernel on the backend's stream:
///   tanh  y = tanh(w x0), with a forward scratch the size of y; the backward computes its
///         contribution into a scratch the size of x0 and creates or adds into dx0 from it (the
///         same allocations either way, so the simulator's peak is the measured one), and adds
///         to the parameter gradient gw (on the device)
///   add   y = x0 + x1 (+ x2); its backward reads nothing: dx_j created from or added to dy
///   loss  L = sum x0^2 / 2 (one float); dx0 created from or added to x0
struct gop {
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  using inputs = std::span<const gtensor* const>;
  using slots = std::span<std::optional<gtensor>>;
  op_type type = op_type::tanh;
  float w = 0.5f;
  cuda::device_buffer gw;  // tanh only: one float

  [[nodiscard]] exec::backward_needs backward_reads() const {
    if (type == op_type::add) return {false, false};
    return {true, type == op_type::tanh};
  }
  void zero_grad() {
    // The default stream, as a user might write it: the profiler and train_step wait for the
    // backend first (SynchronizingBackend).
    if (!gw.empty()) REMAT_CUDA_CHECK(cudaMemset(gw.data(), 0, 4));
  }

  gtensor compute(inputs x, cuda::backend& b) const {
    const int n = x[0]->n;
    if (type == op_type::loss) {
      auto y = gtensor::make(b, 1);
      toy_cuda::half_square_sum(x[0]->data(), y.data(), n, b.stream());
      REMAT_CUDA_CHECK(cudaGetLastError());
      return y;
    }
    if (type == op_type::add) {
      auto y = gtensor::make(b, n);
      REMAT_CUDA_CHECK(cudaMemcpyAsync(y.data(), x[0]->data(), static_cast<std::size_t>(y.bytes()),
                                       cudaMemcpyDeviceToDevice, b.stream()));
      for (std::size_t j = 1; j < x.size(); ++j)
        toy_cuda::accumulate(y.data(), x[j]->data(), n, b.stream());
      REMAT_CUDA_CHECK(cudaGetLastError());
      return y;
    }
    const auto scratch = b.allocate(x[0]->bytes());
    auto y = gtensor::make(b, n);
    toy_cuda::tanh_forward(x[0]->data(), y.data(), n, w, b.stream());
    REMAT_CUDA_CHECK(cudaGetLastError());
    return y;
  }
  gtensor forward(inputs x, cuda::backend& b) { return compute(x, b); }
  gtensor forward_save(inputs x, context&, cuda::backend& b) { return compute(x, b); }

  /// Creates dx from the n floats at c, or adds them to it in place.
  static void contribute(std::optional<gtensor>& dx, const float* c, int n, cuda::backend& b) {
    if (dx) {
      toy_cuda::accumulate(dx->data(), c, n, b.stream());
      REMAT_CUDA_CHECK(cudaGetLastError());
      return;
    }
    dx = gtensor::make(b, n);
    REMAT_CUDA_CHECK(cudaMemcpyAsync(dx->data(), c, static_cast<std::size_t>(dx->bytes()),
                                     cudaMemcpyDeviceToDevice, b.stream()));
  }
  void backward(inputs x, const gtensor* y, const context&, const gtensor& dy, slots dx,
                cuda::backend& b) {
    if (type == op_type::add) {
      for (auto& d : dx) contribute(d, dy.data(), dy.n, b);
      return;
    }
    if (type == op_type::loss) throw std::logic_error("the toy loss has no backward with dy");
    const int n = x[0]->n;
    const auto c = b.allocate(x[0]->bytes());
    toy_cuda::tanh_backward(x[0]->data(), y->data(), dy.data(), c.as<float>(), gw.as<float>(), n, w,
                            b.stream());
    REMAT_CUDA_CHECK(cudaGetLastError());
    contribute(dx[0], c.as<float>(), n, b);
  }
  void backward(inputs x, const gtensor*, const context&, slots dx, cuda::backend& b) {
    if (type != op_type::loss)
      throw std::logic_error("loss backward on a toy op that is not the loss");
    contribute(dx[0], x[0]->data(), x[0]->n, b);
  }
};

using model = exec::dag_model<std::vector<gop>>;
constexpr int width = 4096;
constexpr bytes tensor_bytes = 4 * width;
/// Room in the pool past the plan's budget for alignment padding (the loss's 4 bytes take a
/// 256-byte block) and best fit's fragmentation; the measured peak is checked against the budget.
constexpr bytes slack = 4 * tensor_bytes;

/// A chain after the adds, so that recomputation has something to save.
const std::vector<exec::dag_op> dag_ops = {{"a", {"input"}},
                                           {"q", {"a"}},
                                           {"k", {"a"}},
                                           {"v", {"a"}},
                                           {"sum", {"q", "k", "v"}},
                                           {"res", {"sum", "input"}},
                                           {"h1", {"res"}},
                                           {"h2", {"h1"}},
                                           {"h3", {"h2"}},
                                           {"h4", {"h3"}},
                                           {"h5", {"h4"}},
                                           {"loss", {"h5"}}};

op_type type_of(std::size_t i) {
  if (i + 1 == dag_ops.size()) return op_type::loss;
  return dag_ops[i].inputs.size() > 1 ? op_type::add : op_type::tanh;
}

/// Parameter gradients come from `params`, so the budgeted backend holds only what the graph
/// counts.
model make_model(cuda::backend& params) {
  model m;
  m.ops = dag_ops;
  for (std::size_t i = 0; i < dag_ops.size(); ++i) {
    gop o;
    o.type = type_of(i);
    o.w = 0.55f + 0.07f * static_cast<float>(i);
    if (o.type == op_type::tanh) {
      o.gw = params.allocate(4);
      REMAT_CUDA_CHECK(cudaMemsetAsync(o.gw.data(), 0, 4, params.stream()));
    }
    m.layers.push_back(std::move(o));
  }
  REMAT_CUDA_CHECK(cudaStreamSynchronize(params.stream()));
  return m;
}

gtensor make_input(cuda::backend& b) {
  std::vector<float> h(width);
  for (int i = 0; i < width; ++i)
    h[static_cast<std::size_t>(i)] = 0.002f * static_cast<float>(i % 61) - 0.05f;
  auto x = gtensor::make(b, width);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(x.data(), h.data(), h.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, b.stream()));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  return x;
}

/// Each tanh op's parameter gradient.
std::vector<float> parameter_gradients(const model& m, cuda::backend& b) {
  b.synchronize();
  std::vector<float> g;
  for (const auto& o : m.layers) {
    if (o.gw.empty()) continue;
    float v = 0;
    REMAT_CUDA_CHECK(cudaMemcpy(&v, o.gw.data(), 4, cudaMemcpyDeviceToHost));
    g.push_back(v);
  }
  return g;
}

/// The input gradient, then the parameter gradients.
std::vector<float> gradients(const gtensor& dx, const model& m, cuda::backend& b) {
  std::vector<float> g = parameter_gradients(m, b);
  std::vector<float> all(static_cast<std::size_t>(dx.n));
  REMAT_CUDA_CHECK(cudaMemcpy(all.data(), dx.data(), static_cast<std::size_t>(dx.bytes()),
                              cudaMemcpyDeviceToHost));
  all.insert(all.end(), g.begin(), g.end());
  return all;
}

/// What profile_dag must measure: the sizes the ops allocate, known exactly; the times are
/// fixed (not measured) so that the plans are the same on every machine.
forward_dag expected_dag() {
  forward_dag f{"toy cuda dag", tensor_bytes, {}};
  for (std::size_t i = 0; i < dag_ops.size(); ++i) {
    forward_op o;
    o.name = dag_ops[i].name;
    o.inputs = dag_ops[i].inputs;
    o.forward_time = 1e-4 * static_cast<double>(1 + i % 3);
    o.backward_time = 2 * o.forward_time;
    const op_type t = type_of(i);
    o.output_bytes = t == op_type::loss ? 4 : tensor_bytes;
    const bytes scratch = t == op_type::tanh ? tensor_bytes : 0;
    o.forward_overhead_bytes = scratch;
    o.forward_save_overhead_bytes = scratch;
    o.backward_overhead_bytes = scratch;
    if (t != op_type::add) o.backward_reads = o.inputs;
    if (t == op_type::tanh) o.backward_reads.emplace_back("output");
    f.ops.push_back(std::move(o));
  }
  return f;
}

graph toy_graph() {
  auto g = build_graph(expected_dag());
  REQUIRE_MESSAGE(g.ok(), g.message());
  return *g;
}

schedule store_all_of(const graph& g) { return {store_all_program(g), g.ideal_time(), 0}; }

/// Runs s on a fresh model in b; returns the gradients. The run's result is checked against the
/// graph simulator: peak within `budget`, equal to the simulator's, instruction by instruction.
std::vector<float> run_checked(const graph& g, const schedule& s, bytes budget, cuda::backend& b,
                               cuda::backend& params) {
  INFO(to_string(g, s));
  const auto sim = sim::simulate(g, s, {.budget = budget});
  REQUIRE_MESSAGE(sim.valid, (sim.first_violation ? sim.first_violation->message : ""));
  model m = make_model(params);
  exec::executor ex(m, g, b);
  const auto r = ex.run(s, make_input(b));
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(r->measured_peak <= budget);
  CHECK(r->measured_peak == sim.peak);
  REQUIRE(r->op_peaks.size() == sim.timeline.size());
  for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
    INFO("instruction ", i, ": ", to_string(g, s.ops[i]));
    CHECK(r->op_peaks[i] == sim.timeline[i].peak);
  }
  CHECK(r->op_times.size() == s.ops.size());
  CHECK(r->elapsed > 0.0);  // CUDA-event time of the run's kernels
  CHECK(b.run_extent() <= budget + slack);
  return gradients(r->input_gradient, m, b);
}

/// Store-all's gradients, the reference of every other schedule.
std::vector<float> reference_gradients(const graph& g, cuda::backend& params) {
  const auto sa = store_all_of(g);
  const bytes peak = sim::simulate(g, sa).peak;
  cuda::backend b(peak + slack);
  return run_checked(g, sa, peak, b, params);
}

}  // namespace

TEST_CASE("cuda.graph: profile_dag measures the toy ops exactly, with CUDA-event times") {
  cuda::backend params(1_MiB);
  cuda::backend probe(64_MiB);
  model m = make_model(params);
  const auto sample = make_input(probe);
  const auto f =
      exec::profile_dag(m, sample, probe, {.repetitions = 2, .warmup = 1, .name = "toy cuda dag"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  const forward_dag want = expected_dag();
  CHECK(f->input_bytes == want.input_bytes);
  REQUIRE(f->ops.size() == want.ops.size());
  for (std::size_t i = 0; i < want.ops.size(); ++i) {
    const auto &got = f->ops[i], &op = want.ops[i];
    INFO(op.name);
    CHECK(got.inputs == op.inputs);
    CHECK(got.output_bytes == op.output_bytes);
    CHECK(got.phantom_bytes == op.phantom_bytes);
    CHECK(got.forward_overhead_bytes == op.forward_overhead_bytes);
    CHECK(got.forward_save_overhead_bytes == op.forward_save_overhead_bytes);
    CHECK(got.backward_overhead_bytes == op.backward_overhead_bytes);
    CHECK(got.backward_reads == op.backward_reads);
    CHECK(got.forward_time > 0.0);
    CHECK(got.backward_time > 0.0);
  }
  // zero_grad() cleared what the profiling backwards accumulated.
  const auto gw = parameter_gradients(m, probe);
  CHECK(gw.size() == 9);
  CHECK(std::all_of(gw.begin(), gw.end(), [](float v) { return v == 0.0f; }));
  CHECK(probe.in_use() == sample.bytes());
}

TEST_CASE(
    "cuda.graph: store-all, recomputing and fast-forward schedules give store-all's gradients bit "
    "for bit") {
  cuda::backend params(1_MiB);
  const graph g = toy_graph();
  const auto reference = reference_gradients(g, params);
  for (int keep : {0, 2, 3}) {
    INFO("recompute_all keeping every ", keep, "th activation");
    const schedule s = toy::recompute_all(g, keep);
    CHECK(std::any_of(s.ops.begin(), s.ops.end(),
                      [](const instruction& i) { return i.op == op_kind::fast_forward; }));
    const bytes budget = sim::simulate(g, s).peak;
    cuda::backend b(budget + slack);
    CHECK(run_checked(g, s, budget, b, params) == reference);
  }
}

#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
TEST_CASE("cuda.graph: checkmate's schedules from a hand-written schedule's peak to store-all's") {
  cuda::backend params(1_MiB);
  const graph g = toy_graph();
  const auto reference = reference_gradients(g, params);
  const bytes hi = sim::simulate(g, store_all_of(g)).peak;
  bytes lo = hi;  // the lowest peak of a hand-written schedule: a feasible budget
  for (int keep : {0, 2, 3}) lo = std::min(lo, sim::simulate(g, toy::recompute_all(g, keep)).peak);
  REQUIRE(lo < hi);
  for (int step = 0; step <= 3; ++step) {
    const bytes budget = lo + (hi - lo) * step / 3;
    INFO("budget ", budget, " (recompute-all ", lo, ", store-all ", hi, ")");
    const auto s = checkmate<milp_backend>{.time_limit = 30}.solve(g, budget);
    REQUIRE_MESSAGE(s.ok(), s.message());
    cuda::backend b(budget + slack);
    CHECK(run_checked(g, *s, budget, b, params) == reference);
  }
}
#endif

TEST_CASE(
    "cuda.graph: a recorded graph run's placement is replayed; the pool extent is the placed "
    "peak") {
  cuda::backend params(1_MiB);
  const graph g = toy_graph();
  const auto reference = reference_gradients(g, params);
  const schedule s = toy::recompute_all(g, 2);
  const bytes budget = sim::simulate(g, s).peak;
  REQUIRE(budget < sim::simulate(g, store_all_of(g)).peak);
  cuda::backend b(budget + slack);
  b.record_next_run();
  CHECK(run_checked(g, s, budget, b, params) == reference);
  const auto report = b.plan_placement();
  REQUIRE_MESSAGE(report.ok(), report.message());
  CHECK(report->placed_peak >= report->live_peak);
  CHECK(report->placed_peak <= report->recorded_extent);
  for (int rep = 0; rep < 2; ++rep) {
    CHECK(run_checked(g, s, budget, b, params) == reference);
    CHECK(b.run_extent() == report->placed_peak);
  }
  MESSAGE("graph placement: placed peak ", report->placed_peak, ", live peak ", report->live_peak,
          ", best fit ", report->recorded_extent, ", planned peak ", budget);
}

static_assert(exec::TransferableTensor<gtensor, cuda::backend>);

TEST_CASE(
    "cuda.graph: activations offloaded on the copy streams give store-all's gradients bit for "
    "bit") {
  cuda::backend params(1_MiB);
  const graph g = toy_graph();
  const auto reference = reference_gradients(g, params);
  const auto activation = [&](int d) { return g.data(d).kind == data_kind::activation; };
  for (const schedule& base : {store_all_of(g), toy::recompute_all(g, 2)})
    for (const bool before_free : {false, true}) {
      const schedule s = offload_test::with_graph_offloads(g, base, activation, before_free);
      INFO(to_string(g, s));
      REQUIRE(offload_test::transfers_in(s) > 0);
      const auto sim = sim::simulate(g, s);
      REQUIRE_MESSAGE(sim.valid, (sim.first_violation ? sim.first_violation->message : ""));
      const bytes planned = sim::simulate(g, base).peak;
      // Room on the host for every tensor of the graph at once.
      cuda::backend b(planned + slack,
                      {.host_pool = static_cast<bytes>(g.data_count()) * tensor_bytes + slack});
      model m = make_model(params);
      exec::executor ex(m, g, b);
      const auto r = ex.run(s, make_input(b));
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(gradients(r->input_gradient, m, b) == reference);
      // An offload frees its buffer once its copy is seen done, at the latest at its wait: never
      // later than the program without transfers, never earlier than the simulator's instant
      // copies.
      CHECK(r->measured_peak <= planned);
      CHECK(r->measured_peak >= sim.peak);
      REQUIRE(r->op_peaks.size() == s.ops.size());
      CHECK(b.host_in_use() == 0);
      CHECK(b.host_high_water() > 0);
    }
}
