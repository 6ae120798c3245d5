#pragma once
// Launchers for the CUDA toy layers of the GPU tests (toy_kernels.cu, built by nvcc); callable
// from plain C++. Every kernel is deterministic (no atomics; reductions in one block in a fixed
// order), so recomputation and store-all give bitwise equal results.

#include <cuda_runtime_api.h>

namespace toy_cuda {

/// y[i] = tanhf(w * x[i]), i < n.
void tanh_forward(const float* x, float* y, int n, float w, cudaStream_t s);
/// dx[i] = dy[i] (1 - y[i]^2) w; *gw += sum_i dy[i] (1 - y[i]^2) x[i].
void tanh_backward(const float* x, const float* y, const float* dy, float* dx, float* gw, int n,
                   float w, cudaStream_t s);
/// y[0] = sum_i x[i]^2 / 2.
void half_square_sum(const float* x, float* y, int n, cudaStream_t s);
/// Spins for about `cycles` clock cycles, then writes v to p[0..n): a slow producer.
void slow_fill(float* p, int n, float v, long long cycles, cudaStream_t s);
/// p[i] += v.
void add(float* p, int n, float v, cudaStream_t s);

}  // namespace toy_cuda
