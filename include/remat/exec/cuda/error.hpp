#pragma once
// CUDA runtime errors become exceptions that carry the call and the CUDA message, so
// a failure deep in the backend reads "cudaMemcpyAsync(...) failed: invalid argument
// (cudaErrorInvalidValue, 1)" instead of an error code nobody looks at. cuBLAS statuses get the
// same treatment from <remat/exec/cuda/cublas_error.hpp>, kept apart so that remat::cuda needs
// the CUDA runtime only.
//
// Part of the opt-in remat::cuda target: no umbrella header includes it.

#if !__has_include(<cuda_runtime_api.h>)
#error "remat/exec/cuda needs the CUDA toolkit; link remat::cuda"
#endif

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace remat::exec::cuda {

/// A failed CUDA runtime (or cuBLAS) call: what was called, and what CUDA said.
class cuda_error : public std::runtime_error {
 public:
  cuda_error(std::string call, int code, std::string message)
      : std::runtime_error(call + " failed: " + message),
        call_(std::move(call)),
        code_(code),
        message_(std::move(message)) {}
  /// The call as written at the check ("cudaMalloc(&p, n)").
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  /// The numeric status (cudaError_t or cublasStatus_t).
  [[nodiscard]] int code() const noexcept { return code_; }
  /// CUDA's description, with the error's name and number.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::string call_;
  int code_;
  std::string message_;
};

/// Throws cuda_error unless `e` is cudaSuccess. Clears the runtime's sticky "last error" of a
/// non-sticky failure so that the next call does not report it again.
inline void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw cuda_error(call, static_cast<int>(e),
                   std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ", " +
                       std::to_string(static_cast<int>(e)) + ")");
}

}  // namespace remat::exec::cuda

namespace remat {
/// remat::cuda is remat::exec::cuda (the folder is exec/cuda; the short name is what users type).
namespace cuda = exec::cuda;
}  // namespace remat

/// Checks a CUDA runtime call, throwing remat::cuda::cuda_error with the call's text (a cuBLAS
/// call too, after <remat/exec/cuda/cublas_error.hpp>: any status type with a check overload).
#define REMAT_CUDA_CHECK(call) ::remat::exec::cuda::check((call), #call)
