// The GPU tests' toy kernels (see toy_kernels.hpp).
#ifndef __CUDACC__
#error "toy_kernels.cu must be compiled by nvcc"
#endif

#include "toy_kernels.hpp"

namespace toy_cuda {
namespace {

constexpr int threads = 256;

__global__ void tanh_forward_k(const float* x, float* y, int n, float w) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = tanhf(w * x[i]);
}

__global__ void tanh_backward_k(const float* x, const float* y, const float* dy, float* dx,
                                float* gw, int n, float w) {
  // One block: each thread sums a fixed stride, then a fixed tree; the same order every run.
  __shared__ float part[threads];
  float acc = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += threads) {
    const float g = dy[i] * (1.0f - y[i] * y[i]);
    dx[i] = g * w;
    acc += g * x[i];
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *gw += part[0];
}

__global__ void half_square_sum_k(const float* x, float* y, int n) {
  __shared__ float part[threads];
  float acc = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += threads) acc += x[i] * x[i] * 0.5f;
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[0] = part[0];
}

__global__ void slow_fill_k(float* p, int n, float v, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int i = static_cast<int>(threadIdx.x); i < n; i += threads) p[i] = v;
}

__global__ void add_k(float* p, int n, float v) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) p[i] += v;
}

unsigned blocks(int n) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void tanh_forward(const float* x, float* y, int n, float w, cudaStream_t s) {
  if (n > 0) tanh_forward_k<<<blocks(n), threads, 0, s>>>(x, y, n, w);
}
void tanh_backward(const float* x, const float* y, const float* dy, float* dx, float* gw, int n,
                   float w, cudaStream_t s) {
  tanh_backward_k<<<1, threads, 0, s>>>(x, y, dy, dx, gw, n, w);
}
void half_square_sum(const float* x, float* y, int n, cudaStream_t s) {
  half_square_sum_k<<<1, threads, 0, s>>>(x, y, n);
}
void slow_fill(float* p, int n, float v, long long cycles, cudaStream_t s) {
  slow_fill_k<<<1, threads, 0, s>>>(p, n, v, cycles);
}
void add(float* p, int n, float v, cudaStream_t s) {
  if (n > 0) add_k<<<blocks(n), threads, 0, s>>>(p, n, v);
}

}  // namespace toy_cuda
