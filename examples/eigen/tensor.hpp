#pragma once
// eg::tensor: the tensor type of the Eigen example layers, written as a user of remat would
// write their own. A row-major float matrix (batch x features) whose storage is a
// remat::exec::host_backend::buffer, so that every tensor is counted by the backend (its
// budget and high-water mark). It meets remat::exec::Tensor through the members the default
// tensor_traits look for: it is movable and has `bytes() const`; and TransferableTensor
// (offload, prefetch) through `storage()`.
//
// Values are viewed through Eigen::Map (mat()); the map is declared aligned because the
// backend aligns every allocation to host_backend::alignment (64 bytes), which is at least
// Eigen's largest alignment requirement.

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include <Eigen/Core>

#include <remat/core/units.hpp>
#include <remat/exec/host_backend.hpp>

namespace eg {

using backend = remat::exec::host_backend;
using index = Eigen::Index;
/// Parameters and their gradients (owned by the layers, outside the backend) use the same
/// layout as tensors, so that a tensor's map and a parameter combine without copies.
using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

static_assert(backend::alignment >= EIGEN_MAX_ALIGN_BYTES,
              "eg::tensor maps backend buffers as aligned: the backend must align at least as "
              "much as Eigen's largest packets");

class tensor {
 public:
  using map = Eigen::Map<matrix, Eigen::AlignedMax>;
  using const_map = Eigen::Map<const matrix, Eigen::AlignedMax>;

  /// An empty 0 x 0 tensor that owns nothing.
  tensor() = default;
  tensor(tensor&& o) noexcept
      : buf_(std::move(o.buf_)),
        rows_(std::exchange(o.rows_, 0)),
        cols_(std::exchange(o.cols_, 0)) {}
  tensor& operator=(tensor&& o) noexcept {
    if (this != &o) {
      buf_ = std::move(o.buf_);
      rows_ = std::exchange(o.rows_, 0);
      cols_ = std::exchange(o.cols_, 0);
    }
    return *this;
  }
  tensor(const tensor&) = delete;  // copies go through a backend: clone(b)
  tensor& operator=(const tensor&) = delete;
  ~tensor() = default;

  /// rows x cols floats from b, not initialised. Throws remat::exec::out_of_budget past b's
  /// budget, std::invalid_argument for a negative shape.
  [[nodiscard]] static tensor uninitialized(backend& b, index rows, index cols) {
    if (rows < 0 || cols < 0)
      throw std::invalid_argument("eg::tensor: negative shape " + std::to_string(rows) + " x " +
                                  std::to_string(cols));
    tensor t;
    t.buf_ = b.allocate(byte_size(rows, cols));
    t.rows_ = rows;
    t.cols_ = cols;
    return t;
  }
  [[nodiscard]] static tensor zeros(backend& b, index rows, index cols) {
    tensor t = uninitialized(b, rows, cols);
    t.mat().setZero();
    return t;
  }
  /// A tensor from b holding the values of an Eigen expression (evaluated straight into the
  /// backend's buffer: Eigen allocates nothing for element-wise expressions).
  template <class Derived>
  [[nodiscard]] static tensor from(backend& b, const Eigen::MatrixBase<Derived>& m) {
    tensor t = uninitialized(b, m.rows(), m.cols());
    t.mat() = m;
    return t;
  }
  /// A copy of this tensor, allocated through b.
  [[nodiscard]] tensor clone(backend& b) const {
    tensor t = uninitialized(b, rows_, cols_);
    if (size() > 0) std::memcpy(t.data(), data(), static_cast<std::size_t>(bytes()));
    return t;
  }

  [[nodiscard]] index rows() const noexcept { return rows_; }
  [[nodiscard]] index cols() const noexcept { return cols_; }
  [[nodiscard]] index size() const noexcept { return rows_ * cols_; }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  /// rows * cols * sizeof(float): exactly what was allocated from the backend.
  [[nodiscard]] remat::bytes bytes() const noexcept { return byte_size(rows_, cols_); }

  /// The value of a 1 x 1 tensor (the loss's output), as PyTorch's .item(): the executor reads
  /// the loss with it (run_result::loss). Throws std::logic_error for another shape.
  [[nodiscard]] float item() const {
    if (size() != 1)
      throw std::logic_error("eg::tensor::item(): the tensor is " + std::to_string(rows_) + " x " +
                             std::to_string(cols_) + ", not 1 x 1");
    return *data();
  }

  [[nodiscard]] float* data() noexcept { return buf_.as<float>(); }
  [[nodiscard]] const float* data() const noexcept { return buf_.as<float>(); }
  [[nodiscard]] map mat() noexcept { return map(data(), rows_, cols_); }
  [[nodiscard]] const_map mat() const noexcept { return const_map(data(), rows_, cols_); }

  /// The buffer holding the data: the executor offloads and prefetches it (the tensor keeps
  /// its shape meanwhile).
  [[nodiscard]] backend::buffer& storage() noexcept { return buf_; }

  /// Frees the memory now; the tensor becomes 0 x 0.
  void release() noexcept {
    buf_.release();
    rows_ = cols_ = 0;
  }

  [[nodiscard]] static remat::bytes byte_size(index rows, index cols) noexcept {
    return static_cast<remat::bytes>(rows) * static_cast<remat::bytes>(cols) *
           static_cast<remat::bytes>(sizeof(float));
  }

 private:
  backend::buffer buf_;
  index rows_ = 0;
  index cols_ = 0;
};

/// Same shape and the same bits (so +0 differs from -0, and a NaN equals the same NaN).
[[nodiscard]] inline bool bitwise_equal(const tensor& a, const tensor& b) noexcept {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.size() == 0 ||
          std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.bytes())) == 0);
}

// --- synthetic data ------------------------------------------------------------------------------
// A counter-based generator (SplitMix64) rather than <random>'s distributions, whose results
// differ between standard libraries: the same seed gives the same data everywhere.

namespace detail {
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// A uniform float in [-1, 1) from 24 random bits (exactly representable).
[[nodiscard]] constexpr float unit_uniform(std::uint64_t bits) noexcept {
  const auto k = static_cast<std::int32_t>(bits >> 40) - (1 << 23);
  return static_cast<float>(k) / static_cast<float>(1 << 23);
}
inline void fill_synthetic(float* p, index n, std::uint64_t seed, float scale) noexcept {
  const std::uint64_t base = splitmix64(seed);
  for (index i = 0; i < n; ++i)
    p[i] = scale * unit_uniform(splitmix64(base + static_cast<std::uint64_t>(i)));
}
}  // namespace detail

/// A seed for part `i` of something seeded with `seed` (a layer of a model, a parameter of
/// a layer), so that parts get unrelated data.
[[nodiscard]] constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t i) noexcept {
  return detail::splitmix64(detail::splitmix64(seed) ^ (i + 1) * 0xd1342543de82ef95ull);
}

/// Fills t with values uniform in [-scale, scale), a function of the seed and the position only.
inline void fill_synthetic(tensor& t, std::uint64_t seed, float scale = 1.0f) noexcept {
  detail::fill_synthetic(t.data(), t.size(), seed, scale);
}
inline void fill_synthetic(matrix& m, std::uint64_t seed, float scale = 1.0f) noexcept {
  detail::fill_synthetic(m.data(), m.size(), seed, scale);
}

}  // namespace eg
