// The CUDA backend on a GPU: budget, high-water mark, fragmentation, copies and their ordering.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec/adam.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/cuda/backend.hpp>

#include "toy_kernels.hpp"

using namespace remat;
using namespace remat::literals;

static_assert(exec::Backend<cuda::backend>);
static_assert(exec::TimingBackend<cuda::backend>);
static_assert(exec::RunAwareBackend<cuda::backend>);
static_assert(exec::ParameterBackend<cuda::backend>);

namespace {
std::vector<float> to_host(const cuda::device_buffer& d, cudaStream_t s) {
  std::vector<float> h(static_cast<std::size_t>(d.size()) / sizeof(float));
  REMAT_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.data(), static_cast<std::size_t>(d.size()),
                                   cudaMemcpyDeviceToHost, s));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(s));
  return h;
}
}  // namespace

TEST_CASE("cuda.backend: the budget is a hard limit, and the error names the activity") {
  cuda::backend b(1_MiB);
  b.set_activity("F3 of stage 3 ('fc')");
  auto x = b.allocate(512_KiB);
  auto y = b.allocate(512_KiB);
  CHECK(x.data() != nullptr);
  CHECK(static_cast<char*>(y.data()) - static_cast<char*>(x.data()) == 512_KiB);
  CHECK(b.in_use() == 1_MiB);
  try {
    (void)b.allocate(1);
    FAIL("no out_of_budget");
  } catch (const exec::out_of_budget& e) {
    CHECK(std::string(e.what()).find("F3 of stage 3 ('fc')") != std::string::npos);
    CHECK(e.requested() == 1);
    CHECK(e.budget() == 1_MiB);
  }
  CHECK(b.allocate(0).empty());
  // Fragmentation: two free 256 KiB holes apart; 512 KiB fits the total, not a block.
  x.release();
  y.release();
  auto a1 = b.allocate(256_KiB), a2 = b.allocate(256_KiB), a3 = b.allocate(256_KiB),
       a4 = b.allocate(256_KiB);
  a1.release();
  a3.release();
  CHECK_THROWS_WITH_AS((void)b.allocate(512_KiB), doctest::Contains("fragmented"),
                       exec::out_of_budget);
  CHECK(b.worst_fragmentation().stranded() == 256_KiB);
}

TEST_CASE("cuda.backend: high-water mark and extent") {
  cuda::backend b(4_MiB);
  {
    auto x = b.allocate(1000);
    auto y = b.allocate(3000);
    CHECK(b.in_use() == 4000);
    CHECK(b.reserved() == 1024 + 3072);
  }
  CHECK(b.in_use() == 0);
  CHECK(b.high_water() == 4000);
  CHECK(b.extent_high_water() == 4096);
  b.reset_high_water();
  CHECK(b.high_water() == 0);
  auto z = b.allocate(10);
  CHECK(b.high_water() == 10);
}

TEST_CASE("cuda.backend: offload and prefetch round trips are bitwise exact") {
  cuda::backend b(8_MiB, {.host_pool = 8_MiB});
  std::mt19937 rng(3);
  const int n = 300001;  // not a multiple of anything
  std::vector<float> src(static_cast<std::size_t>(n));
  for (auto& v : src) {
    const auto bits = static_cast<std::uint32_t>(rng());
    std::memcpy(&v, &bits, sizeof v);  // every bit pattern, NaNs included
  }
  auto d = b.allocate(static_cast<bytes>(sizeof(float)) * n);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(d.data(), src.data(), src.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, b.stream()));
  auto [h, t_out] = b.offload(d);
  CHECK(b.host_in_use() == d.size());
  b.release_after(std::move(d), t_out);
  t_out.wait_host();
  CHECK(t_out.ready());
  CHECK(std::memcmp(h.data(), src.data(), src.size() * sizeof(float)) == 0);
  CHECK(b.in_use() == 0);
  auto [d2, t_in] = b.prefetch(h);
  b.wait(t_in);
  const auto back = to_host(d2, b.stream());
  CHECK(std::memcmp(back.data(), src.data(), src.size() * sizeof(float)) == 0);
  b.release_after(std::move(h), t_in);
  CHECK(b.host_in_use() == 0);
  CHECK_THROWS_WITH_AS((void)b.host_allocate(9_MiB), doctest::Contains("options::host_pool"),
                       std::runtime_error);
}

TEST_CASE(
    "cuda.backend: copies start after the compute stream's work, and the compute stream waits for "
    "them") {
  cuda::backend b(1_MiB, {.host_pool = 1_MiB});
  const int n = 1024;
  auto d = b.allocate(4 * n);
  // A slow kernel writes 7s; the offload, queued right after, must see them.
  toy_cuda::slow_fill(d.as<float>(), n, 7.0f, 50'000'000, b.stream());
  REMAT_CUDA_CHECK(cudaGetLastError());
  auto [h, t] = b.offload(d);
  t.wait_host();
  for (int i = 0; i < n; ++i) REQUIRE(h.as<float>()[i] == 7.0f);
  // A kernel writes -1s, then a copy to the device (queued after it) writes the 7s back; the
  // compute stream, told to wait for the copy, adds 1: 8 everywhere, never 0 or -1.
  toy_cuda::slow_fill(d.as<float>(), n, -1.0f, 1000, b.stream());
  auto t2 = b.copy_to_device(h, d);
  b.wait(t2);
  toy_cuda::add(d.as<float>(), n, 1.0f, b.stream());
  REMAT_CUDA_CHECK(cudaGetLastError());
  const auto got = to_host(d, b.stream());
  for (int i = 0; i < n; ++i) REQUIRE(got[static_cast<std::size_t>(i)] == 8.0f);
  // Timing marks measure the compute stream's work.
  const auto m0 = b.mark_time();
  toy_cuda::slow_fill(d.as<float>(), n, 0.0f, 20'000'000, b.stream());
  const auto m1 = b.mark_time();
  CHECK(b.seconds_between(m0, m1) > 0.0);
  b.synchronize();
}

TEST_CASE("cuda.backend: device_adam gives the host's Adam steps bit for bit") {
  // Gradients of every magnitude, weights and states from earlier steps, weight decay or not:
  // the kernel's round-to-nearest arithmetic is the host's (exec/adam.hpp).
  constexpr std::size_t n = 3001;  // not a multiple of the block
  for (const float decay : {0.0f, 0.01f}) {
    const exec::adam opt{.lr = 3e-3f, .weight_decay = decay};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> w(n), states(2 * n, 0.0f);
    for (auto& x : w) x = u(rng);
    cuda::backend b(1_MiB);
    auto dw = b.allocate(static_cast<bytes>(n * sizeof(float)));
    auto dg = b.allocate(static_cast<bytes>(n * sizeof(float)));
    auto ds = b.allocate(static_cast<bytes>(2 * n * sizeof(float)));
    REMAT_CUDA_CHECK(cudaMemcpy(dw.data(), w.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    b.zero(ds);
    for (long t = 1; t <= 5; ++t) {
      std::vector<float> g(n);
      for (std::size_t i = 0; i < n; ++i)
        g[i] = u(rng) * std::ldexp(1.0f, static_cast<int>(i % 40) - 20);
      REMAT_CUDA_CHECK(cudaMemcpy(dg.data(), g.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      b.device_adam(opt, t, dw, dg, ds);
      opt.step(w.data(), g.data(), states.data(), n, t);
    }
    CHECK(to_host(dw, b.stream()) == w);
    CHECK(to_host(ds, b.stream()) == states);
  }
}
