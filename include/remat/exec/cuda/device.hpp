#pragma once
// Is there a GPU? Asked without throwing: on a machine without a driver cudaGetDeviceCount
// returns cudaErrorInsufficientDriver (35), not cudaErrorNoDevice, so every
// error counts as "no device". GPU test programs exit 77 (skipped) when device_count() is 0.

#if !__has_include(<cuda_runtime_api.h>)
#error "remat/exec/cuda needs the CUDA toolkit; link remat::cuda"
#endif

#include <cuda_runtime_api.h>

#include <remat/exec/cuda/error.hpp>

namespace remat::exec::cuda {

/// The number of usable CUDA devices; 0 when the call fails for any reason (no driver, no
/// device, a driver older than the runtime). Never throws. Asked once, then cached.
inline int device_count() noexcept {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // leave no sticky error behind for the next call
      return 0;
    }
    return n;
  }();
  return count;
}

/// True when at least one CUDA device is usable.
inline bool device_available() noexcept { return device_count() > 0; }

}  // namespace remat::exec::cuda
