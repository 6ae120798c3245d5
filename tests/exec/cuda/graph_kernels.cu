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

}  // namespace

void accumulate(float* dst, const float* src, int n, cudaStream_t s) {
  if (n <= 0) return;
  const auto blocks = static_cast<unsigned>((n + accumulate_threads - 1) / accumulate_threads);
  accumulate_k<<<blocks, accumulate_threads, 0, s>>>(dst, src, n);
}

}  // namespace toy_cuda
