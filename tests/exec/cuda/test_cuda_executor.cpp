// The chain executor on the CUDA backend with a small CUDA toy layer: every schedule's gradients
// are bitwise those of store-all, the pool's peak stays within the budget, and a replayed static
// placement takes exactly the planned pool.
#include <cstddef>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

#include "exec/test_offload_schedules.hpp"
#include "toy_kernels.hpp"

using namespace remat;
using namespace remat::literals;

namespace {

struct dtensor {
  cuda::device_buffer buf;
  int n = 0;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
  [[nodiscard]] float* data() const { return buf.as<float>(); }
  /// The buffer holding the data, for offload and prefetch.
  cuda::device_buffer& storage() { return buf; }
  static dtensor make(cuda::backend& b, int n) { return {b.allocate(remat::bytes{4} * n), n}; }
};

/// y = tanh(w x) elementwise, with a forward temporary (a scratch the size of y) and, for
/// forward_save, nothing more (x and y are what the backward needs); the last stage is the loss
/// L = sum x^2 / 2. The parameter gradient lives on the device.
struct layer {
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  float w = 0.5f;
  bool loss = false;
  cuda::device_buffer gw;  // one float

  dtensor compute(const dtensor& x, cuda::backend& b) {
    auto scratch = b.allocate(x.bytes());
    if (loss) {
      auto y = dtensor::make(b, 1);
      toy_cuda::half_square_sum(x.data(), y.data(), x.n, b.stream());
      REMAT_CUDA_CHECK(cudaGetLastError());
      return y;
    }
    auto y = dtensor::make(b, x.n);
    toy_cuda::tanh_forward(x.data(), y.data(), x.n, w, b.stream());
    REMAT_CUDA_CHECK(cudaGetLastError());
    return y;
  }
  dtensor forward(const dtensor& x, cuda::backend& b) { return compute(x, b); }
  dtensor forward_save(const dtensor& x, context&, cuda::backend& b) { return compute(x, b); }
  dtensor backward(const dtensor& x, const dtensor& y, const context&, const dtensor& dy,
                   cuda::backend& b) {
    auto dx = dtensor::make(b, x.n);
    toy_cuda::tanh_backward(x.data(), y.data(), dy.data(), dx.data(), gw.as<float>(), x.n, w,
                            b.stream());
    REMAT_CUDA_CHECK(cudaGetLastError());
    return dx;
  }
  dtensor backward(const dtensor& x, const dtensor&, const context&, cuda::backend& b) {
    auto dx = dtensor::make(b, x.n);
    REMAT_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.data(), static_cast<std::size_t>(x.bytes()),
                                     cudaMemcpyDeviceToDevice, b.stream()));
    return dx;
  }
};

constexpr int width = 4096;
constexpr int stages = 10;
/// Room in the pool past the plan's budget for what the plan does not count: alignment padding
/// (the loss output's 4 bytes take a 256-byte block) and best fit's fragmentation. The measured
/// peak (requested bytes) is still checked against the plan's budget.
constexpr bytes slack = 64 * 1024;

/// Parameters and their gradients come from a separate unbudgeted-enough backend, so the
/// budgeted one holds only what the schedule counts.
std::vector<layer> make_model(cuda::backend& params) {
  std::vector<layer> m(stages);
  for (int l = 0; l < stages; ++l) {
    auto& s = m[static_cast<std::size_t>(l)];
    s.w = 0.6f + 0.03f * static_cast<float>(l);
    s.gw = params.allocate(4);
    REMAT_CUDA_CHECK(cudaMemsetAsync(s.gw.data(), 0, 4, params.stream()));
  }
  m.back().loss = true;
  REMAT_CUDA_CHECK(cudaStreamSynchronize(params.stream()));
  return m;
}

dtensor make_input(cuda::backend& b) {
  std::vector<float> h(width);
  for (int i = 0; i < width; ++i)
    h[static_cast<std::size_t>(i)] = 0.001f * static_cast<float>(i % 97) - 0.04f;
  auto x = dtensor::make(b, width);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(x.data(), h.data(), h.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, b.stream()));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  return x;
}

std::vector<float> gradients(const dtensor& dx, const std::vector<layer>& m, cuda::backend& b) {
  b.synchronize();
  std::vector<float> g(static_cast<std::size_t>(dx.n) + m.size());
  REMAT_CUDA_CHECK(cudaMemcpy(g.data(), dx.data(), static_cast<std::size_t>(dx.bytes()),
                              cudaMemcpyDeviceToHost));
  for (std::size_t l = 0; l < m.size(); ++l)
    REMAT_CUDA_CHECK(cudaMemcpy(&g[static_cast<std::size_t>(dx.n) + l], m[l].gw.data(), 4,
                                cudaMemcpyDeviceToHost));
  return g;
}

/// The gradients of store-all: the reference of every schedule.
std::vector<float> store_all_gradients(const chain& c, cuda::backend& params) {
  const bytes all = store_all{}.solve(c, unlimited_bytes)->predicted_peak;
  cuda::backend b(all + slack);
  auto m = make_model(params);
  exec::executor ex(m, c, b);
  const auto r = ex.run(*store_all{}.solve(c, all), make_input(b));
  REQUIRE_MESSAGE(r.ok(), r.message());
  return gradients(r->input_gradient, m, b);
}

}  // namespace

TEST_CASE(
    "cuda.executor: chain schedules on the CUDA backend give store-all's gradients bit for bit") {
  cuda::backend params(1_MiB);
  cuda::backend probe(64_MiB);
  auto prof_model = make_model(params);
  const auto sample = make_input(probe);
  const auto c = exec::profile_chain(prof_model, sample, probe, {.repetitions = 2, .warmup = 1});
  REQUIRE_MESSAGE(c.ok(), c.message());
  CHECK(c->stages[0].forward_time > 0.0);  // CUDA-event timings

  const bytes all = store_all{}.solve(*c, unlimited_bytes)->predicted_peak;
  const std::vector<float> reference = store_all_gradients(*c, params);
  const bytes lo = rotor{}.minimum_budget(*c);
  for (const bytes budget : {lo, (lo + all) / 2, all}) {
    for (const auto& s : {rotor{}.solve(*c, budget), revolve{}.solve(*c, budget)}) {
      if (!s) continue;
      INFO("budget ", budget, ": ", to_chain_string(stages, *s).value_or(to_string(*s)));
      cuda::backend b(budget + slack);
      auto m = make_model(params);
      exec::executor ex(m, *c, b);
      const auto r = ex.run(*s, make_input(b));
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(gradients(r->input_gradient, m, b) == reference);
      CHECK(r->measured_peak <= budget);
      CHECK(b.run_extent() <= budget + slack);
      CHECK(r->measured_peak == sim::simulate(*c, *s).peak);
      CHECK(r->elapsed > 0.0);
    }
  }
}

TEST_CASE(
    "cuda.executor: a recorded run's placement is replayed; the pool extent is the placed peak") {
  cuda::backend params(1_MiB);
  cuda::backend probe(64_MiB);
  auto prof_model = make_model(params);
  const auto c =
      exec::profile_chain(prof_model, make_input(probe), probe, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  const bytes lo = rotor{}.minimum_budget(*c);
  const auto s = rotor{}.solve(*c, lo);
  REQUIRE(s.ok());
  cuda::backend b(lo + slack);
  b.record_next_run();
  std::vector<float> first;
  {
    auto m = make_model(params);
    exec::executor ex(m, *c, b);
    const auto r = ex.run(*s, make_input(b));
    REQUIRE_MESSAGE(r.ok(), r.message());
    first = gradients(r->input_gradient, m, b);
  }
  const auto report = b.plan_placement();
  REQUIRE_MESSAGE(report.ok(), report.message());
  CHECK(report->placed_peak <= report->recorded_extent);
  CHECK(report->placed_peak <= lo + slack);
  for (int rep = 0; rep < 2; ++rep) {
    auto m = make_model(params);
    exec::executor ex(m, *c, b);
    const auto r = ex.run(*s, make_input(b));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(gradients(r->input_gradient, m, b) == first);
    CHECK(b.run_extent() == report->placed_peak);
    MESSAGE("placed peak ", report->placed_peak, ", live peak ", report->live_peak, ", best fit ",
            report->recorded_extent, ", measured peak ", r->measured_peak);
  }
}

static_assert(exec::TransferBackend<cuda::backend>);
static_assert(exec::TransferableTensor<dtensor, cuda::backend>);

TEST_CASE(
    "cuda.executor: offloading schedules on the copy streams give store-all's gradients bit for "
    "bit") {
  cuda::backend params(1_MiB);
  cuda::backend probe(64_MiB);
  auto prof_model = make_model(params);
  const auto c =
      exec::profile_chain(prof_model, make_input(probe), probe, {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(c.ok(), c.message());
  const bytes all = store_all{}.solve(*c, unlimited_bytes)->predicted_peak;
  const std::vector<float> reference = store_all_gradients(*c, params);
  const bytes lo = rotor{}.minimum_budget(*c);
  for (const bytes budget : {lo, (lo + all) / 2, all}) {
    const auto planned = rotor{}.solve(*c, budget);
    REQUIRE(planned.ok());
    const schedule s = offload_test::with_offloads(*planned, stages);
    INFO("budget ", budget, ": ", to_chain_string(stages, s).value_or(to_string(s)));
    REQUIRE(offload_test::transfers_in(s) > 0);
    const auto sim = sim::simulate(*c, s);
    REQUIRE_MESSAGE(sim.valid, sim.first_violation->message);
    // Room on the host for every activation at once.
    cuda::backend b(budget + slack, {.host_pool = 4 * (stages + 1) * width * 4 + slack});
    auto m = make_model(params);
    exec::executor ex(m, *c, b);
    const auto r = ex.run(s, make_input(b));
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(gradients(r->input_gradient, m, b) == reference);
    // An offload frees its buffer once its copy is seen done, at the latest at its wait: never
    // later than the plan without transfers, never earlier than the simulator's instant copies.
    CHECK(r->measured_peak <= planned->predicted_peak);
    CHECK(r->measured_peak >= sim.peak);
    CHECK(b.host_in_use() == 0);
    CHECK(b.host_high_water() > 0);
  }
}
