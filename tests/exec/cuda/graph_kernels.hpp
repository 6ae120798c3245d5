#pragma once
// The kernels the GPU graph tests add to toy_kernels.hpp's: in-place accumulation, for the
// multi-input toy ops and the gradients several ops contribute to (exec/concepts.hpp asks for
// one rounding per contribution and element), and the elementwise products of the toy op with a
// parameter vector (test_cuda_managed.cpp). Built by nvcc (graph_kernels.cu).

#include <cuda_runtime_api.h>

namespace toy_cuda {

/// dst[i] = dst[i] + src[i], i < n (elementwise: deterministic).
void accumulate(float* dst, const float* src, int n, cudaStream_t s);
/// y[i] = a[i] b[i], i < n.
void multiply(float* y, const float* a, const float* b, int n, cudaStream_t s);
/// acc[i] = acc[i] + a[i] b[i], i < n, the product rounded before the sum.
void multiply_accumulate(float* acc, const float* a, const float* b, int n, cudaStream_t s);

}  // namespace toy_cuda
