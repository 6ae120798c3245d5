#pragma once
// The CUDA backend's Adam step (cuda::backend::device_adam, the GPU's optimizer steps of a program
// that manages the parameters): a kernel that runs exec::adam::update_one on each element with
// CUDA's round-to-nearest intrinsics, so that no multiply and add fuse (nvcc makes a * b + c one
// FMA by default) and each element gets the bits of the host's step (exec/adam.hpp). Include it
// in exactly one .cu file of a program that runs managed_training on the CUDA backend: it defines
// remat::exec::cuda::adam_step_async, which cuda/backend.hpp declares. docs/executor.md, "The CUDA
// backend".

#if !defined(__CUDACC__)
#error "remat/exec/cuda/adam.cuh holds a kernel: include it in a .cu file compiled by nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>

#include <remat/exec/adam.hpp>
#include <remat/exec/cuda/error.hpp>

namespace remat::exec::cuda {

namespace detail {
/// IEEE single precision, round to nearest, each operation rounded on its own: the host's
/// arithmetic (adam_arithmetic) on the device.
struct device_arithmetic {
  __device__ static float add(float a, float b) { return __fadd_rn(a, b); }
  __device__ static float sub(float a, float b) { return __fsub_rn(a, b); }
  __device__ static float mul(float a, float b) { return __fmul_rn(a, b); }
  __device__ static float div(float a, float b) { return __fdiv_rn(a, b); }
  __device__ static float sqrt(float a) { return __fsqrt_rn(a); }
};

__global__ void adam_kernel(adam opt, float c1, float c2, float* w, const float* g, float* m,
                            float* v, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) opt.update_one<device_arithmetic>(w[i], g[i], m[i], v[i], c1, c2);
}
}  // namespace detail

void adam_step_async(const adam& opt, long t, float* w, const float* g, float* states,
                     std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr unsigned threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  detail::adam_kernel<<<blocks, threads, 0, stream>>>(opt, opt.correction1(t), opt.correction2(t),
                                                      w, g, states, states + n, n);
  REMAT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace remat::exec::cuda
