// The CUDA backend's Adam kernel, for the GPU tests (remat::exec::cuda::adam_step_async, which
// cuda/backend.hpp declares and cuda/adam.cuh defines).
#include <remat/exec/cuda/adam.cuh>
