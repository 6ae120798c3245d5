#pragma once
// cuBLAS statuses for REMAT_CUDA_CHECK: a failed cuBLAS call becomes a remat::cuda::cuda_error
// that carries the call and cuBLAS's message, as a failed CUDA runtime call does
// (<remat/exec/cuda/error.hpp>).
//
// remat::cuda itself needs only the CUDA runtime; a program that includes this header calls
// cuBLAS and links it: target_link_libraries(app PRIVATE remat::cuda CUDA::cublas).

#if !__has_include(<cublas_api.h>)
#error "remat/exec/cuda/cublas_error.hpp needs cuBLAS; link remat::cuda and CUDA::cublas"
#endif

#include <cublas_api.h>

#include <string>

#include <remat/exec/cuda/error.hpp>

namespace remat::exec::cuda {

/// Throws cuda_error unless `s` is CUBLAS_STATUS_SUCCESS.
inline void check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw cuda_error(call, static_cast<int>(s),
                   std::string(cublasGetStatusString(s)) + " (" + cublasGetStatusName(s) + ", " +
                       std::to_string(static_cast<int>(s)) + ")");
}

}  // namespace remat::exec::cuda
