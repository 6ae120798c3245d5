// managed_training on the CUDA backend: offmate's programs over a DAG of toy ops whose parameters
// are vectors in device buffers (y = w * x elementwise) move the weights, gradients and Adam's
// states on the copy streams and run the optimizer steps with the device kernel (cuda/adam.cuh)
// or on the CPU over the pinned host pool; after 5 steps the weights are bitwise those of plain
// training with the device's Adam alone, and every step stays within the budget.
#include <doctest/doctest.h>

#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <remat/exec/adam.hpp>
#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/managed_training.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/exec/train.hpp>
#include <remat/policy/offmate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>

#include "exec/checkmate_backend.hpp"  // milp_backend: CBC, else lp_solve
#include "graph_kernels.hpp"
#include "toy_kernels.hpp"

using namespace remat;
using namespace remat::literals;

namespace {

constexpr int width = 2048;
constexpr bytes tensor_bytes = 4 * width;

struct mtensor {
  cuda::device_buffer buf;
  int n = 0;
  [[nodiscard]] remat::bytes bytes() const { return static_cast<remat::bytes>(4) * n; }
  [[nodiscard]] float* data() const { return buf.as<float>(); }
  cuda::device_buffer& storage() { return buf; }
  static mtensor make(cuda::backend& b, int n) { return {b.allocate(remat::bytes{4} * n), n}; }
};

struct parameter {
  std::string name;
  mtensor value, grad;
};

/// y = w * x elementwise (w: a parameter of `width` floats), or the loss sum x^2 / 2.
struct mop {
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  using inputs = std::span<const mtensor* const>;
  using slots = std::span<std::optional<mtensor>>;
  bool loss = false;
  std::vector<parameter> params;

  [[nodiscard]] exec::backward_needs backward_reads() const { return {true, false}; }
  std::span<parameter> parameters() { return params; }
  void zero_grad() {
    for (auto& p : params)
      if (p.grad.data() != nullptr)
        REMAT_CUDA_CHECK(cudaMemset(p.grad.data(), 0, static_cast<std::size_t>(p.grad.bytes())));
  }
  mtensor compute(inputs x, cuda::backend& b) const {
    if (loss) {
      auto y = mtensor::make(b, 1);
      toy_cuda::half_square_sum(x[0]->data(), y.data(), x[0]->n, b.stream());
      REMAT_CUDA_CHECK(cudaGetLastError());
      return y;
    }
    auto y = mtensor::make(b, width);
    toy_cuda::multiply(y.data(), params[0].value.data(), x[0]->data(), width, b.stream());
    REMAT_CUDA_CHECK(cudaGetLastError());
    return y;
  }
  mtensor forward(inputs x, cuda::backend& b) { return compute(x, b); }
  mtensor forward_save(inputs x, context&, cuda::backend& b) { return compute(x, b); }
  void backward(inputs x, const mtensor*, const context&, const mtensor& dy, slots dx,
                cuda::backend& b) {
    toy_cuda::multiply_accumulate(params[0].grad.data(), dy.data(), x[0]->data(), width,
                                  b.stream());
    dx[0] = mtensor::make(b, width);
    toy_cuda::multiply(dx[0]->data(), dy.data(), params[0].value.data(), width, b.stream());
    REMAT_CUDA_CHECK(cudaGetLastError());
  }
  void backward(inputs x, const mtensor*, const context&, slots dx, cuda::backend& b) {
    dx[0] = mtensor::make(b, x[0]->n);
    REMAT_CUDA_CHECK(cudaMemcpyAsync(dx[0]->data(), x[0]->data(),
                                     static_cast<std::size_t>(x[0]->bytes()),
                                     cudaMemcpyDeviceToDevice, b.stream()));
  }
};

using model = exec::dag_model<std::vector<mop>>;
constexpr int scales = 6;

/// scales x [y = w * x], then the loss; the parameters come from `store` (another backend).
model make_model(cuda::backend& store) {
  model m;
  std::string prev = "input";
  for (int i = 0; i < scales; ++i) {
    mop o;
    std::vector<float> w(width);
    for (int k = 0; k < width; ++k)
      w[static_cast<std::size_t>(k)] = 0.9f + 0.001f * static_cast<float>((k * (i + 3)) % 97);
    parameter p{"w", mtensor::make(store, width), mtensor::make(store, width)};
    REMAT_CUDA_CHECK(cudaMemcpy(p.value.data(), w.data(), tensor_bytes, cudaMemcpyHostToDevice));
    REMAT_CUDA_CHECK(cudaMemset(p.grad.data(), 0, tensor_bytes));
    o.params.push_back(std::move(p));
    const std::string name = "s" + std::to_string(i + 1);
    m.ops.push_back({name, {prev}});
    m.layers.push_back(std::move(o));
    prev = name;
  }
  mop l;
  l.loss = true;
  m.ops.push_back({"loss", {prev}});
  m.layers.push_back(std::move(l));
  return m;
}

mtensor make_input(cuda::backend& b, int k) {
  std::vector<float> h(width);
  for (int i = 0; i < width; ++i)
    h[static_cast<std::size_t>(i)] = 0.01f * static_cast<float>((i + 7 * k) % 53) - 0.2f;
  auto x = mtensor::make(b, width);
  REMAT_CUDA_CHECK(cudaMemcpy(x.data(), h.data(), tensor_bytes, cudaMemcpyHostToDevice));
  return x;
}

std::vector<float> weights(model& m) {
  std::vector<float> out;
  for (auto& o : m.layers)
    for (auto& p : o.params) {
      std::vector<float> w(static_cast<std::size_t>(width));
      REMAT_CUDA_CHECK(cudaMemcpy(w.data(), p.value.data(), tensor_bytes, cudaMemcpyDeviceToHost));
      out.insert(out.end(), w.begin(), w.end());
    }
  return out;
}

graph profiled(cuda::backend& b) {
  cuda::backend store(64_MiB);
  model m = make_model(store);
  exec::profile_options o{.repetitions = 1, .warmup = 0, .name = "scales"};
  for (std::size_t i = 0; i < m.ops.size(); ++i) o.fixed_times.push_back({1e-4, 2e-4});
  const auto x = make_input(b, 0);
  auto f = exec::profile_dag(m, x, b, o);
  REQUIRE_MESSAGE(f.ok(), f.message());
  return build_graph(*f).value();
}

}  // namespace

TEST_CASE("cuda.managed: offmate's programs train bitwise as the device's Adam, within budget") {
  const exec::adam opt{.lr = 1e-2f};
  cuda::backend scratch(64_MiB);
  const graph g = profiled(scratch);
  REQUIRE(g.parameters().size() == static_cast<std::size_t>(scales));

  // Plain training: store-all, the device's Adam on every parameter.
  std::vector<float> reference;
  {
    cuda::backend store(64_MiB), b(64_MiB);
    model m = make_model(store);
    exec::executor ex(m, g, b);
    const schedule sa{store_all_program(g), g.ideal_time(), 0};
    std::map<const void*, cuda::device_buffer> states;
    for (int k = 1; k <= 5; ++k) {
      auto r = exec::train_step(ex, sa, make_input(b, k), [&](mop& o) {
        for (auto& p : o.params) {
          auto& s = states[&p];
          if (s.empty()) {
            s = store.allocate(2 * tensor_bytes);
            store.zero(s);
            store.synchronize();
          }
          b.device_adam(opt, k, p.value.buf, p.grad.buf, s);
        }
      });
      REQUIRE_MESSAGE(r.ok(), r.message());
    }
    b.synchronize();
    reference = weights(m);
  }

  offmate<milp_backend> pol;
  pol.time_limit = 30;
  auto gp = offmate_problem_of(g, pol.blocks, pol.hw);
  REQUIRE_MESSAGE(gp.ok(), gp.message());
  const bytes least = pol.minimum_budget(gp->problem).value();
  int cpu_steps = 0;
  for (const double more : {0.0, 0.5, 3.0}) {
    const bytes budget = least + static_cast<bytes>(more * static_cast<double>(least));
    INFO("budget " << budget);
    const auto a = pol.plan(g, budget);
    REQUIRE_MESSAGE(a.ok(), a.message());
    for (const auto& ins : a->program->ops) cpu_steps += ins.op == op_kind::cpu_update;
    cuda::backend store(64_MiB);
    // Room for the pool's alignment padding; the measured peak is checked against the budget.
    cuda::backend b(budget + 16 * tensor_bytes, {.host_pool = 64_MiB});
    model m = make_model(store);
    exec::executor ex(m, g, b);
    exec::managed_training t(ex, *a->program, opt);
    for (int k = 1; k <= 5; ++k) {
      auto r = t.step(make_input(b, k));
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(r->measured_peak <= budget);
    }
    t.finish();
    b.synchronize();
    CHECK(weights(m) == reference);
  }
  CHECK(cpu_steps > 0);
}

#endif
