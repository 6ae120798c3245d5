#pragma once
// gpt::tensor: the tensor type of the CUDA example layers, written as a user of remat would write
// their own. A row-major matrix of 4-byte elements (floats, or int32 token ids) whose storage is a
// remat::cuda::device_buffer from the backend's budgeted pool, so every activation, context and
// temporary is counted by the backend. It meets remat::exec::Tensor through the members the
// default tensor_traits look for: it is movable and has `bytes() const`.
//
// Parameters, their gradients, the loss targets and cuBLAS's workspace are not activations: they
// live in gpt::device_array (plain cudaMalloc, owned by the layers), outside the budget, as the
// chain model expects (weights are subtracted from the device memory beforehand).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/cuda/error.hpp>

namespace gpt {

using backend = remat::cuda::backend;

enum class dtype { f32, i32 };

class tensor {
 public:
  /// An empty 0 x 0 tensor that owns nothing (the embedding's "gradient" of its token ids).
  tensor() = default;
  tensor(tensor&& o) noexcept
      : buf_(std::move(o.buf_)),
        rows_(std::exchange(o.rows_, 0)),
        cols_(std::exchange(o.cols_, 0)),
        type_(o.type_) {}
  tensor& operator=(tensor&& o) noexcept {
    if (this != &o) {
      buf_ = std::move(o.buf_);
      rows_ = std::exchange(o.rows_, 0);
      cols_ = std::exchange(o.cols_, 0);
      type_ = o.type_;
    }
    return *this;
  }
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;
  ~tensor() = default;

  /// rows x cols elements from b's pool, not initialised. Throws remat::exec::out_of_budget past
  /// b's budget.
  [[nodiscard]] static tensor uninitialized(backend& b, int rows, int cols,
                                            dtype type = dtype::f32) {
    if (rows < 0 || cols < 0)
      throw std::invalid_argument("gpt::tensor: negative shape " + std::to_string(rows) + " x " +
                                  std::to_string(cols));
    tensor t;
    t.buf_ = b.allocate(byte_size(rows, cols));
    t.rows_ = rows;
    t.cols_ = cols;
    t.type_ = type;
    return t;
  }
  /// rows x cols int32 values copied from the host (e.g. token ids), on b's compute stream.
  [[nodiscard]] static tensor from_host(backend& b, int rows, int cols,
                                        const std::vector<std::int32_t>& v) {
    if (static_cast<std::int64_t>(v.size()) != static_cast<std::int64_t>(rows) * cols)
      throw std::invalid_argument("gpt::tensor::from_host: " + std::to_string(v.size()) +
                                  " values for " + std::to_string(rows) + " x " +
                                  std::to_string(cols));
    tensor t = uninitialized(b, rows, cols, dtype::i32);
    if (!v.empty()) {
      REMAT_CUDA_CHECK(cudaMemcpyAsync(t.data_bytes(), v.data(), v.size() * sizeof(std::int32_t),
                                       cudaMemcpyHostToDevice, b.stream()));
      // v may go away when we return: the copy from pageable memory must be done by then.
      REMAT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
    }
    return t;
  }

  [[nodiscard]] int rows() const noexcept { return rows_; }
  [[nodiscard]] int cols() const noexcept { return cols_; }
  [[nodiscard]] std::int64_t size() const noexcept {
    return static_cast<std::int64_t>(rows_) * cols_;
  }
  [[nodiscard]] dtype type() const noexcept { return type_; }
  /// rows * cols * 4: exactly what was asked of the backend.
  [[nodiscard]] remat::bytes bytes() const noexcept { return byte_size(rows_, cols_); }

  /// The device pointer of a float tensor (layers write through const tensors they own, as with
  /// any handle to device memory).
  [[nodiscard]] float* data() const {
    expect(dtype::f32);
    return buf_.as<float>();
  }
  /// The device pointer of an int32 tensor.
  [[nodiscard]] std::int32_t* ids() const {
    expect(dtype::i32);
    return buf_.as<std::int32_t>();
  }

  /// The values, on the host (waits for b's compute stream).
  [[nodiscard]] std::vector<float> to_host(backend& b) const {
    std::vector<float> v(static_cast<std::size_t>(size()));
    if (!v.empty()) {
      REMAT_CUDA_CHECK(cudaMemcpyAsync(v.data(), data(), v.size() * sizeof(float),
                                       cudaMemcpyDeviceToHost, b.stream()));
      REMAT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
    }
    return v;
  }

  /// Frees the memory now; the tensor becomes 0 x 0.
  void release() noexcept {
    buf_.release();
    rows_ = cols_ = 0;
  }

  [[nodiscard]] static remat::bytes byte_size(int rows, int cols) noexcept {
    return static_cast<remat::bytes>(rows) * static_cast<remat::bytes>(cols) * 4;
  }

 private:
  void expect(dtype t) const {
    if (type_ != t)
      throw std::logic_error(t == dtype::f32 ? "gpt::tensor: float data of an int32 tensor"
                                             : "gpt::tensor: int32 data of a float tensor");
  }
  [[nodiscard]] void* data_bytes() const noexcept { return buf_.data(); }

  remat::cuda::device_buffer buf_;
  int rows_ = 0;
  int cols_ = 0;
  dtype type_ = dtype::f32;
};

/// Device memory owned by the user (plain cudaMalloc, outside the backend's budget): parameters,
/// gradients, loss targets, cuBLAS's workspace. Move-only.
template <class T>
class device_array {
 public:
  device_array() = default;
  explicit device_array(std::int64_t n) : n_(n) {
    if (n < 0) throw std::invalid_argument("gpt::device_array: negative size");
    if (n > 0)
      REMAT_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&p_), static_cast<std::size_t>(n) * sizeof(T)));
  }
  device_array(device_array&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  device_array& operator=(device_array&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() { reset(); }

  [[nodiscard]] T* data() const noexcept { return p_; }
  [[nodiscard]] std::int64_t size() const noexcept { return n_; }
  [[nodiscard]] std::size_t byte_size() const noexcept {
    return static_cast<std::size_t>(n_) * sizeof(T);
  }

  /// Copies from the host on `stream` and waits for it: ordered after the work queued there
  /// (which may still read the old values), done when this returns.
  void upload(const std::vector<T>& v, cudaStream_t stream = nullptr) {
    if (static_cast<std::int64_t>(v.size()) != n_)
      throw std::invalid_argument("gpt::device_array::upload: " + std::to_string(v.size()) +
                                  " values for " + std::to_string(n_));
    if (n_ == 0) return;
    REMAT_CUDA_CHECK(cudaMemcpyAsync(p_, v.data(), byte_size(), cudaMemcpyHostToDevice, stream));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  /// The values on the host, once the work queued on `stream` (which writes them) is done.
  [[nodiscard]] std::vector<T> download(cudaStream_t stream = nullptr) const {
    std::vector<T> v(static_cast<std::size_t>(n_));
    if (n_ == 0) return v;
    REMAT_CUDA_CHECK(cudaMemcpyAsync(v.data(), p_, byte_size(), cudaMemcpyDeviceToHost, stream));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }

 private:
  void reset() noexcept {
    if (p_ != nullptr) (void)cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::int64_t n_ = 0;
};

}  // namespace gpt
