// The GPU graph tests' kernel (see graph_kernels.hpp).
#ifndef __CUDACC__
#error "graph_kernels.cu must be compiled by nvcc"
#endif

#include "graph_kernels.hpp"

namespace toy_cuda {
namespace {

constexpr int accumulate_threads = 256;

__global__ void accumulate_k(float* dst, const float* src, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) dst[i] = dst[i] + src[i];
}

__global__ void multiply_k(float* y, const float* a, const float* b, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = __fmul_rn(a[i], b[i]);
}

__global__ void multiply_accumulate_k(float* acc, const float* a, const float* b, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) acc[i] = __fadd_rn(acc[i], __fmul_rn(a[i], b[i]));
}

unsigned blocks_for(int n) {
  return static_cast<unsigned>((n + accumulate_threads - 1) / accumulate_threads);
}

}  // namespace

void accumulate(float* dst, const float* src, int n, cudaStream_t s) {
  if (n <= 0) return;
  const auto blocks = static_cast<unsigned>((n + accumulate_threads - 1) / accumulate_threads);
  accumulate_k<<<blocks, accumulate_threads, 0, s>>>(dst, src, n);
}

void multiply(float* y, const float* a, const float* b, int n, cudaStream_t s) {
  if (n > 0) multiply_k<<<blocks_for(n), accumulate_threads, 0, s>>>(y, a, b, n);
}

void multiply_accumulate(float* acc, const float* a, const float* b, int n, cudaStream_t s) {
  if (n > 0) multiply_accumulate_k<<<blocks_for(n), accumulate_threads, 0, s>>>(acc, a, b, n);
}

}  // namespace toy_cuda
