#pragma once
// The one kernel the GPU graph tests add to toy_kernels.hpp's: in-place accumulation, for the
// multi-input toy ops and the gradients several ops contribute to (exec/concepts.hpp asks for
// one rounding per contribution and element). Built by nvcc (graph_kernels.cu).

#include <cuda_runtime_api.h>

namespace toy_cuda {

/// dst[i] = dst[i] + src[i], i < n (elementwise: deterministic).
void accumulate(float* dst, const float* src, int n, cudaStream_t s);

}  // namespace toy_cuda
