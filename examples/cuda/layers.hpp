#pragma once
// GPT-2-style layers on gpt::tensor, written the way a user of remat would write their own CUDA
// layers: an abstract base gpt::layer that meets remat::exec::Layer through the members the
// default chain_layer_traits look for (like examples/eigen's eg::layer), so a model is a
// std::vector<std::unique_ptr<gpt::layer>>. The chain (model.hpp):
//
//   embedding | attention_block x L, mlp_block x L (interleaved) | final_norm | lm_loss
//
// What each layer runs on the GPU: its own kernels (kernels.hpp: layer norm, causal softmax,
// GELU, cross-entropy, bias and embedding gradients) and cuBLAS GEMMs (linear layers, and the
// attention's Q K^T and P V as strided batched GEMMs over the heads).
//
// Rules every layer follows (what lets the executor promise bitwise-equal gradients and a
// measured peak that is the real one):
// - Everything it creates (its output, its context, its temporaries, dx) is a gpt::tensor from
//   the backend it is given; only parameters, gradients, targets and cuBLAS's fixed workspace
//   are user memory outside the budget.
// - All work goes to the backend's compute stream (b.stream()), cuBLAS included (gpt::blas binds
//   the handle to it), so the pool can hand a freed buffer to the next allocation at once.
// - forward and forward_save run the same code on the same values (run(x, ctx*, b)); only the
//   lifetime of intermediates differs, so they give the same bits.
// - Deterministic: no atomics (fixed-order reductions, see kernels.cu), and cuBLAS with a fixed,
//   user-owned workspace on a single stream and a fixed math mode, which is what the cuBLAS
//   documentation ("Results reproducibility") requires for bitwise-identical results run to run
//   on one GPU model. Every buffer is 256-byte aligned by the pool, so a GEMM sees the same
//   alignment (and gets the same kernel) wherever the schedule places its operands.
// - backward never needs more than x, y and the context, and accumulates (+=) the parameter
//   gradients (a GEMM with beta = 1, or a kernel adding its column sums).

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cuda/kernels.hpp>
#include <cuda/tensor.hpp>

#include <remat/core/units.hpp>
#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/cuda/cublas_error.hpp>
#include <remat/exec/cuda/error.hpp>

namespace gpt {

/// The model's shape (GPT-2 small by default).
struct config {
  int layers = 12;
  int width = 768;    ///< C
  int heads = 12;     ///< H (C must be a multiple of it)
  int seq = 512;      ///< T
  int batch = 8;      ///< B
  int vocab = 50257;  ///< V
  float eps = 1e-5f;
  /// cuBLAS may use TF32 tensor cores for the FP32 GEMMs (faster on Ampere and Hopper, still
  /// deterministic, less precise).
  bool tf32 = false;

  [[nodiscard]] int rows() const noexcept { return batch * seq; }
  [[nodiscard]] int head_width() const noexcept { return width / heads; }
  /// Throws std::invalid_argument naming the first bad field.
  void validate() const {
    auto need = [](bool ok, const char* what) {
      if (!ok) throw std::invalid_argument(std::string("gpt::config: ") + what);
    };
    need(layers >= 0, "layers must be >= 0");
    need(width > 0 && heads > 0 && seq > 0 && batch > 0 && vocab > 0, "sizes must be > 0");
    need(width % heads == 0, "width must be a multiple of heads");
    need(static_cast<std::int64_t>(batch) * heads * seq * seq < (std::int64_t{1} << 31),
         "batch * heads * seq^2 must fit an int (the attention matrices)");
    need(static_cast<std::int64_t>(batch) * seq * vocab < (std::int64_t{1} << 31),
         "batch * seq * vocab must fit an int (the logits)");
  }
};

/// A cuBLAS handle set up for repeatable results: a fixed user-owned workspace (32 MiB, the size
/// the cuBLAS documentation recommends for Hopper) and a fixed math mode. cublasSetStream resets
/// the workspace to cuBLAS's own pool, so on_stream() sets both again whenever the stream
/// changes (a new backend).
class blas {
 public:
  static constexpr std::int64_t workspace_bytes = std::int64_t{32} << 20;

  explicit blas(bool tf32 = false) : workspace_(workspace_bytes) {
    REMAT_CUDA_CHECK(cublasCreate(&h_));
    try {
      REMAT_CUDA_CHECK(
          cublasSetMathMode(h_, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
      REMAT_CUDA_CHECK(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST));
    } catch (...) {
      (void)cublasDestroy(h_);
      throw;
    }
  }
  blas(const blas&) = delete;
  blas& operator=(const blas&) = delete;
  ~blas() { (void)cublasDestroy(h_); }

  /// The handle, bound to `stream` with the fixed workspace.
  [[nodiscard]] cublasHandle_t on_stream(cudaStream_t stream) {
    if (!bound_ || stream != stream_) {
      REMAT_CUDA_CHECK(cublasSetStream(h_, stream));
      REMAT_CUDA_CHECK(cublasSetWorkspace(h_, workspace_.data(), workspace_.byte_size()));
      stream_ = stream;
      bound_ = true;
    }
    return h_;
  }

 private:
  cublasHandle_t h_ = nullptr;
  device_array<char> workspace_;
  cudaStream_t stream_ = nullptr;
  bool bound_ = false;
};

/// A row-major operand of gemm(): pointer, row stride, stride between batches, transposed.
struct operand {
  const float* p;
  int ld;
  long long stride = 0;
  bool transposed = false;
};

/// Row-major C (m x n) = alpha op(A) op(B) + beta C, over `batch` matrices (strides in the
/// operands and sc). cuBLAS is column-major: a row-major matrix is its transpose there, so this
/// computes C^T = op(B)^T op(A)^T.
inline void gemm(cublasHandle_t h, int m, int n, int k, float alpha, operand a, operand b,
                 float beta, float* c, int ldc, long long sc = 0, int batch = 1) {
  const cublasOperation_t ta = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1)
    REMAT_CUDA_CHECK(cublasSgemm(h, tb, ta, n, m, k, &alpha, b.p, b.ld, a.p, a.ld, &beta, c, ldc));
  else
    REMAT_CUDA_CHECK(cublasSgemmStridedBatched(h, tb, ta, n, m, k, &alpha, b.p, b.ld, b.stride, a.p,
                                               a.ld, a.stride, &beta, c, ldc, sc, batch));
}

/// What forward_save keeps for the backward: tensors from the backend, so the context's memory is
/// counted, and bytes() is exactly what it holds.
struct context {
  std::vector<tensor> saved;

  [[nodiscard]] remat::bytes bytes() const noexcept {
    remat::bytes n = 0;
    for (const auto& t : saved) n += t.bytes();
    return n;
  }
  void clear() noexcept { saved.clear(); }
};

/// A parameter and its gradient, in device memory owned by the layer.
struct parameter {
  std::string name;
  device_array<float> value;
  device_array<float> grad;
};

/// The base of every layer. The public members are what the executor calls; each binds the layer
/// to the backend's stream and forwards to the do_* hooks a layer implements.
class layer {
 public:
  using context = gpt::context;

  virtual ~layer() = default;
  layer(const layer&) = delete;
  layer& operator=(const layer&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] virtual bool is_loss() const noexcept { return false; }

  /// y = f(x), keeping nothing.
  [[nodiscard]] tensor forward(const tensor& x, backend& b) {
    use(b);
    return do_run(x, nullptr, b);
  }
  /// y = f(x), keeping in ctx (cleared first) what backward needs. Same bits as forward.
  [[nodiscard]] tensor forward_save(const tensor& x, context& ctx, backend& b) {
    use(b);
    ctx.clear();
    return do_run(x, &ctx, b);
  }
  /// dx from dy; accumulates the parameter gradients.
  [[nodiscard]] tensor backward(const tensor& x, const tensor& y, const context& ctx,
                                const tensor& dy, backend& b) {
    use(b);
    if (dy.rows() != y.rows() || dy.cols() != y.cols())
      throw std::invalid_argument(where() + "dy is " + shape(dy) + ", y is " + shape(y));
    return do_backward(x, y, ctx, dy, b);
  }
  /// The loss's backward: the gradient of the loss output is the constant 1.
  [[nodiscard]] tensor backward(const tensor& x, const tensor& y, const context& ctx, backend& b) {
    use(b);
    return do_loss_backward(x, y, ctx, b);
  }

  // --- parameters ---------------------------------------------------------------------------
  [[nodiscard]] std::span<parameter> parameters() noexcept { return params_; }
  [[nodiscard]] std::span<const parameter> parameters() const noexcept { return params_; }
  [[nodiscard]] std::int64_t parameter_count() const noexcept {
    std::int64_t n = 0;
    for (const auto& p : params_) n += p.value.size();
    return n;
  }
  /// Clears the gradients on the stream the layer last ran on (after its backward), or on the
  /// stream of bind().
  void zero_grad() {
    for (auto& p : params_)
      if (p.grad.size() > 0)
        REMAT_CUDA_CHECK(cudaMemsetAsync(p.grad.data(), 0, p.grad.byte_size(), stream_));
  }
  void sgd_step(float lr) {
    for (auto& p : params_)
      kernels::sgd(p.value.data(), p.grad.data(), lr, p.value.size(), stream_);
  }
  /// The stream the layer's own calls (zero_grad, sgd_step, reading the loss) go to until its
  /// next forward or backward: bind a model to each new backend before using it.
  void bind(cudaStream_t s) noexcept { stream_ = s; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

 protected:
  layer(std::string name, std::shared_ptr<blas> cublas)
      : name_(std::move(name)), blas_(std::move(cublas)) {
    if (!blas_) throw std::invalid_argument("gpt::layer '" + name_ + "': needs a gpt::blas");
  }

  virtual tensor do_run(const tensor& x, context* ctx, backend& b) = 0;
  virtual tensor do_backward(const tensor&, const tensor&, const context&, const tensor&,
                             backend&) {
    throw std::logic_error(where() + "is a loss: its backward takes no output gradient");
  }
  virtual tensor do_loss_backward(const tensor&, const tensor&, const context&, backend&) {
    throw std::logic_error(where() + "is not a loss: its backward needs the output gradient dy");
  }

  /// Registers a parameter of n values, initialised to scale * uniform[-1, 1) from the seed (or
  /// to `constant` when scale is 0), with a zero gradient; returns its index.
  std::size_t add_parameter(std::string pname, std::int64_t n, std::uint64_t seed, float scale,
                            float constant = 0.0f);
  [[nodiscard]] float* value(std::size_t i) const noexcept { return params_[i].value.data(); }
  [[nodiscard]] float* grad(std::size_t i) const noexcept { return params_[i].grad.data(); }
  [[nodiscard]] cublasHandle_t cublas() const { return blas_->on_stream(stream_); }

  [[nodiscard]] std::string where() const { return "gpt::layer '" + name_ + "': "; }
  [[nodiscard]] static std::string shape(const tensor& t) {
    return std::to_string(t.rows()) + " x " + std::to_string(t.cols());
  }
  void expect_shape(const tensor& x, int rows, int cols, dtype type = dtype::f32) const {
    if (x.rows() != rows || x.cols() != cols || x.type() != type)
      throw std::invalid_argument(
          where() + "expects " + std::to_string(rows) + " x " + std::to_string(cols) +
          (type == dtype::i32 ? " token ids" : " floats") + ", got " + shape(x));
  }
  void expect_saved(const context& ctx, std::size_t n) const {
    if (ctx.saved.size() != n)
      throw std::logic_error(where() + "backward needs the context of forward_save (" +
                             std::to_string(n) + " tensors), got " +
                             std::to_string(ctx.saved.size()));
  }

 private:
  void use(backend& b) noexcept { stream_ = b.stream(); }

  std::string name_;
  std::shared_ptr<blas> blas_;
  std::vector<parameter> params_;
  cudaStream_t stream_ = nullptr;
};

namespace detail {
/// SplitMix64 (the same generator as examples/eigen): data depends on the seed only.
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// A uniform float in [-1, 1) from 24 random bits.
[[nodiscard]] constexpr float unit_uniform(std::uint64_t bits) noexcept {
  const auto k = static_cast<std::int32_t>(bits >> 40) - (1 << 23);
  return static_cast<float>(k) / static_cast<float>(1 << 23);
}
}  // namespace detail

/// A seed for part i of something seeded with `seed`.
[[nodiscard]] constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t i) noexcept {
  return detail::splitmix64(detail::splitmix64(seed) ^ (i + 1) * 0xd1342543de82ef95ull);
}

inline std::size_t layer::add_parameter(std::string pname, std::int64_t n, std::uint64_t seed,
                                        float scale, float constant) {
  std::vector<float> init(static_cast<std::size_t>(n), constant);
  if (scale != 0.0f) {
    const std::uint64_t base = detail::splitmix64(seed);
    for (std::size_t i = 0; i < init.size(); ++i)
      init[i] = scale * detail::unit_uniform(detail::splitmix64(base + i));
  }
  parameter p{std::move(pname), device_array<float>(n), device_array<float>(n)};
  p.value.upload(init);
  p.grad.upload(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  params_.push_back(std::move(p));
  return params_.size() - 1;
}

/// LN(x) by rows, and the statistics its backward needs (one mean and one rstd per row).
struct normalized {
  tensor mean, rstd, u;

  void release() noexcept {
    u.release();
    mean.release();
    rstd.release();
  }
  /// Moves mean, rstd and u into the context (in that order).
  void save_to(context& ctx) {
    ctx.saved.push_back(std::move(mean));
    ctx.saved.push_back(std::move(rstd));
    ctx.saved.push_back(std::move(u));
  }
};
[[nodiscard]] inline normalized normalize(const tensor& x, const float* g, const float* bias,
                                          float eps, backend& b) {
  normalized r{tensor::uninitialized(b, x.rows(), 1), tensor::uninitialized(b, x.rows(), 1),
               tensor::uninitialized(b, x.rows(), x.cols())};
  kernels::layer_norm_forward(x.data(), g, bias, r.u.data(), r.mean.data(), r.rstd.data(), x.rows(),
                              x.cols(), eps, b.stream());
  return r;
}

/// y = x W + bias for x (rows x in) and W (in x out), both row-major.
[[nodiscard]] inline tensor linear(cublasHandle_t cb, const tensor& x, const float* w,
                                   const float* bias, int out, backend& b) {
  tensor y = tensor::uninitialized(b, x.rows(), out);
  gemm(cb, x.rows(), out, x.cols(), 1.0f, {x.data(), x.cols()}, {w, out}, 0.0f, y.data(), out);
  kernels::add_bias(y.data(), bias, x.rows(), out, b.stream());
  return y;
}

// --- the layers ----------------------------------------------------------------------------------

/// Token and position embedding: x is batch x seq token ids, y[b t] = wte[x[b t]] + wpe[t]. Its
/// backward returns an empty tensor (token ids have no gradient).
class embedding final : public layer {
 public:
  embedding(const config& c, std::uint64_t seed, std::shared_ptr<blas> cublas,
            std::string name = "embedding")
      : layer(std::move(name), std::move(cublas)), c_(c) {
    wte_ = add_parameter("wte", std::int64_t{c.vocab} * c.width, derive_seed(seed, 0), 0.02f);
    wpe_ = add_parameter("wpe", std::int64_t{c.seq} * c.width, derive_seed(seed, 1), 0.01f);
  }

 protected:
  tensor do_run(const tensor& x, context*, backend& b) override {
    expect_shape(x, c_.batch, c_.seq, dtype::i32);
    tensor y = tensor::uninitialized(b, c_.rows(), c_.width);
    kernels::embedding_forward(x.ids(), value(wte_), value(wpe_), y.data(), c_.batch, c_.seq,
                               c_.width, b.stream());
    return y;
  }
  tensor do_backward(const tensor& x, const tensor&, const context&, const tensor& dy,
                     backend& b) override {
    kernels::embedding_backward(x.ids(), dy.data(), grad(wte_), grad(wpe_), c_.batch, c_.seq,
                                c_.width, b.stream());
    return tensor{};
  }

 private:
  config c_;
  std::size_t wte_ = 0, wpe_ = 0;
};

/// A pre-norm causal self-attention block with its residual:
///   u = LN(x); [q k v] = u Wqkv + bqkv; per head P = causal_softmax(q k^T / sqrt(d)); o = P v;
///   y = x + o Wo + bo.
/// Context: mean, rstd (of the layer norm), u, qkv, P, o.
class attention_block final : public layer {
 public:
  attention_block(const config& c, std::uint64_t seed, std::shared_ptr<blas> cublas,
                  std::string name)
      : layer(std::move(name), std::move(cublas)), c_(c) {
    const std::int64_t w = c.width;
    ln_g_ = add_parameter("ln_g", w, 0, 0.0f, 1.0f);
    ln_b_ = add_parameter("ln_b", w, 0, 0.0f);
    w_qkv_ = add_parameter("w_qkv", w * 3 * w, derive_seed(seed, 0), 0.02f);
    b_qkv_ = add_parameter("b_qkv", 3 * w, 0, 0.0f);
    // GPT-2 scales the projections into the residual stream by 1 / sqrt(2 L).
    w_o_ = add_parameter("w_o", w * w, derive_seed(seed, 1),
                         0.02f / std::sqrt(2.0f * static_cast<float>(c.layers)));
    b_o_ = add_parameter("b_o", w, 0, 0.0f);
  }

 protected:
  tensor do_run(const tensor& x, context* ctx, backend& b) override;
  tensor do_backward(const tensor& x, const tensor& y, const context& ctx, const tensor& dy,
                     backend& b) override;

 private:
  /// The batch-b slice of the attention matrices, and of the q, k, v columns of qkv for head 0
  /// (head h is hd columns further: the batched GEMMs' stride).
  [[nodiscard]] float* scores(const tensor& p, int bi) const {
    return p.data() + static_cast<std::int64_t>(bi) * c_.heads * c_.seq * c_.seq;
  }
  [[nodiscard]] float* qkv_part(const tensor& qkv, int bi, int part) const {
    return qkv.data() + static_cast<std::int64_t>(bi) * c_.seq * 3 * c_.width +
           std::int64_t{part} * c_.width;
  }
  [[nodiscard]] float* rows_of(const tensor& t, int bi) const {
    return t.data() + static_cast<std::int64_t>(bi) * c_.seq * c_.width;
  }

  config c_;
  std::size_t ln_g_ = 0, ln_b_ = 0, w_qkv_ = 0, b_qkv_ = 0, w_o_ = 0, b_o_ = 0;
};

inline tensor attention_block::do_run(const tensor& x, context* ctx, backend& b) {
  expect_shape(x, c_.rows(), c_.width);
  const int n = c_.rows(), w = c_.width, t = c_.seq, hd = c_.head_width(), h = c_.heads;
  const long long tt = static_cast<long long>(t) * t;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cudaStream_t s = b.stream();
  cublasHandle_t cb = cublas();

  normalized ln = normalize(x, value(ln_g_), value(ln_b_), c_.eps, b);
  tensor qkv = linear(cb, ln.u, value(w_qkv_), value(b_qkv_), 3 * w, b);
  if (ctx == nullptr) ln.release();
  // P = causal_softmax(q k^T / sqrt(hd)), one (T x T) matrix per (batch, head).
  tensor p = tensor::uninitialized(b, c_.batch * h * t, t);
  for (int bi = 0; bi < c_.batch; ++bi)
    gemm(cb, t, t, hd, scale, {qkv_part(qkv, bi, 0), 3 * w, hd},
         {qkv_part(qkv, bi, 1), 3 * w, hd, true}, 0.0f, scores(p, bi), t, tt, h);
  kernels::causal_softmax(p.data(), c_.batch * h * t, t, s);
  // o = P v, written straight into the heads' columns of a (N x C) matrix.
  tensor o = tensor::uninitialized(b, n, w);
  for (int bi = 0; bi < c_.batch; ++bi)
    gemm(cb, t, hd, t, 1.0f, {scores(p, bi), t, tt}, {qkv_part(qkv, bi, 2), 3 * w, hd}, 0.0f,
         rows_of(o, bi), w, hd, h);
  if (ctx == nullptr) {
    p.release();
    qkv.release();
  }
  tensor y = tensor::uninitialized(b, n, w);
  kernels::residual_bias(y.data(), x.data(), value(b_o_), n, w, s);
  gemm(cb, n, w, w, 1.0f, {o.data(), w}, {value(w_o_), w}, 1.0f, y.data(), w);
  if (ctx != nullptr) {
    ln.save_to(*ctx);
    ctx->saved.push_back(std::move(qkv));
    ctx->saved.push_back(std::move(p));
    ctx->saved.push_back(std::move(o));
  }
  return y;
}

inline tensor attention_block::do_backward(const tensor& x, const tensor&, const context& ctx,
                                           const tensor& dy, backend& b) {
  expect_saved(ctx, 6);
  const tensor &mean = ctx.saved[0], &rstd = ctx.saved[1], &u = ctx.saved[2], &qkv = ctx.saved[3],
               &p = ctx.saved[4], &o = ctx.saved[5];
  const int n = c_.rows(), w = c_.width, t = c_.seq, hd = c_.head_width(), h = c_.heads;
  const long long tt = static_cast<long long>(t) * t;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cudaStream_t s = b.stream();
  cublasHandle_t cb = cublas();

  // y = x + o Wo + bo
  tensor d_o = tensor::uninitialized(b, n, w);
  gemm(cb, n, w, w, 1.0f, {dy.data(), w}, {value(w_o_), w, 0, true}, 0.0f, d_o.data(), w);
  gemm(cb, w, w, n, 1.0f, {o.data(), w, 0, true}, {dy.data(), w}, 1.0f, grad(w_o_), w);
  kernels::bias_grad(dy.data(), grad(b_o_), n, w, s);
  // o = P v: dP = do v^T, dv = P^T do
  tensor dp = tensor::uninitialized(b, c_.batch * h * t, t);
  tensor dqkv = tensor::uninitialized(b, n, 3 * w);
  for (int bi = 0; bi < c_.batch; ++bi) {
    gemm(cb, t, t, hd, 1.0f, {rows_of(d_o, bi), w, hd}, {qkv_part(qkv, bi, 2), 3 * w, hd, true},
         0.0f, scores(dp, bi), t, tt, h);
    gemm(cb, t, hd, t, 1.0f, {scores(p, bi), t, tt, true}, {rows_of(d_o, bi), w, hd}, 0.0f,
         qkv_part(dqkv, bi, 2), 3 * w, hd, h);
  }
  d_o.release();
  // P = softmax(S): dS, in place; then S = scale q k^T: dq = scale dS k, dk = scale dS^T q
  kernels::causal_softmax_backward(p.data(), dp.data(), c_.batch * h * t, t, s);
  for (int bi = 0; bi < c_.batch; ++bi) {
    gemm(cb, t, hd, t, scale, {scores(dp, bi), t, tt}, {qkv_part(qkv, bi, 1), 3 * w, hd}, 0.0f,
         qkv_part(dqkv, bi, 0), 3 * w, hd, h);
    gemm(cb, t, hd, t, scale, {scores(dp, bi), t, tt, true}, {qkv_part(qkv, bi, 0), 3 * w, hd},
         0.0f, qkv_part(dqkv, bi, 1), 3 * w, hd, h);
  }
  dp.release();
  // qkv = u Wqkv + bqkv
  gemm(cb, w, 3 * w, n, 1.0f, {u.data(), w, 0, true}, {dqkv.data(), 3 * w}, 1.0f, grad(w_qkv_),
       3 * w);
  kernels::bias_grad(dqkv.data(), grad(b_qkv_), n, 3 * w, s);
  tensor du = tensor::uninitialized(b, n, w);
  gemm(cb, n, w, 3 * w, 1.0f, {dqkv.data(), 3 * w}, {value(w_qkv_), 3 * w, 0, true}, 0.0f,
       du.data(), w);
  dqkv.release();
  // u = LN(x), and the residual: dx = dy + LN'(du)
  tensor dx = tensor::uninitialized(b, n, w);
  kernels::layer_norm_backward(x.data(), du.data(), value(ln_g_), mean.data(), rstd.data(),
                               dy.data(), dx.data(), grad(ln_g_), grad(ln_b_), n, w, s);
  return dx;
}

/// A pre-norm MLP block with its residual: u = LN(x); h = u W1 + b1; y = x + gelu(h) W2 + b2.
/// Context: mean, rstd, u, h (gelu(h) is recomputed by the backward rather than kept).
class mlp_block final : public layer {
 public:
  mlp_block(const config& c, std::uint64_t seed, std::shared_ptr<blas> cublas, std::string name)
      : layer(std::move(name), std::move(cublas)), c_(c) {
    const std::int64_t w = c.width;
    ln_g_ = add_parameter("ln_g", w, 0, 0.0f, 1.0f);
    ln_b_ = add_parameter("ln_b", w, 0, 0.0f);
    w1_ = add_parameter("w_fc", w * 4 * w, derive_seed(seed, 0), 0.02f);
    b1_ = add_parameter("b_fc", 4 * w, 0, 0.0f);
    w2_ = add_parameter("w_proj", 4 * w * w, derive_seed(seed, 1),
                        0.02f / std::sqrt(2.0f * static_cast<float>(c.layers)));
    b2_ = add_parameter("b_proj", w, 0, 0.0f);
  }

 protected:
  tensor do_run(const tensor& x, context* ctx, backend& b) override {
    expect_shape(x, c_.rows(), c_.width);
    const int n = c_.rows(), w = c_.width;
    cudaStream_t s = b.stream();
    cublasHandle_t cb = cublas();
    normalized ln = normalize(x, value(ln_g_), value(ln_b_), c_.eps, b);
    tensor h = linear(cb, ln.u, value(w1_), value(b1_), 4 * w, b);
    if (ctx == nullptr) ln.release();
    tensor a = tensor::uninitialized(b, n, 4 * w);
    kernels::gelu_forward(h.data(), a.data(), h.size(), s);
    if (ctx == nullptr) h.release();
    tensor y = tensor::uninitialized(b, n, w);
    kernels::residual_bias(y.data(), x.data(), value(b2_), n, w, s);
    gemm(cb, n, w, 4 * w, 1.0f, {a.data(), 4 * w}, {value(w2_), w}, 1.0f, y.data(), w);
    if (ctx != nullptr) {
      ln.save_to(*ctx);
      ctx->saved.push_back(std::move(h));
    }
    return y;
  }

  tensor do_backward(const tensor& x, const tensor&, const context& ctx, const tensor& dy,
                     backend& b) override {
    expect_saved(ctx, 4);
    const tensor &mean = ctx.saved[0], &rstd = ctx.saved[1], &u = ctx.saved[2], &h = ctx.saved[3];
    const int n = c_.rows(), w = c_.width;
    cudaStream_t s = b.stream();
    cublasHandle_t cb = cublas();
    // y = x + a W2 + b2, a = gelu(h)
    tensor dh = tensor::uninitialized(b, n, 4 * w);
    gemm(cb, n, 4 * w, w, 1.0f, {dy.data(), w}, {value(w2_), w, 0, true}, 0.0f, dh.data(), 4 * w);
    {
      tensor a = tensor::uninitialized(b, n, 4 * w);
      kernels::gelu_forward(h.data(), a.data(), h.size(), s);
      gemm(cb, 4 * w, w, n, 1.0f, {a.data(), 4 * w, 0, true}, {dy.data(), w}, 1.0f, grad(w2_), w);
    }
    kernels::bias_grad(dy.data(), grad(b2_), n, w, s);
    kernels::gelu_backward(h.data(), dh.data(), dh.size(), s);  // da -> dh
    // h = u W1 + b1
    gemm(cb, w, 4 * w, n, 1.0f, {u.data(), w, 0, true}, {dh.data(), 4 * w}, 1.0f, grad(w1_), 4 * w);
    kernels::bias_grad(dh.data(), grad(b1_), n, 4 * w, s);
    tensor du = tensor::uninitialized(b, n, w);
    gemm(cb, n, w, 4 * w, 1.0f, {dh.data(), 4 * w}, {value(w1_), 4 * w, 0, true}, 0.0f, du.data(),
         w);
    dh.release();
    tensor dx = tensor::uninitialized(b, n, w);
    kernels::layer_norm_backward(x.data(), du.data(), value(ln_g_), mean.data(), rstd.data(),
                                 dy.data(), dx.data(), grad(ln_g_), grad(ln_b_), n, w, s);
    return dx;
  }

 private:
  config c_;
  std::size_t ln_g_ = 0, ln_b_ = 0, w1_ = 0, b1_ = 0, w2_ = 0, b2_ = 0;
};

/// The final layer norm: y = LN(x). Context: mean, rstd.
class final_norm final : public layer {
 public:
  final_norm(const config& c, std::shared_ptr<blas> cublas, std::string name = "ln_f")
      : layer(std::move(name), std::move(cublas)), c_(c) {
    g_ = add_parameter("g", c.width, 0, 0.0f, 1.0f);
    b_ = add_parameter("b", c.width, 0, 0.0f);
  }

 protected:
  tensor do_run(const tensor& x, context* ctx, backend& b) override {
    expect_shape(x, c_.rows(), c_.width);
    normalized ln = normalize(x, value(g_), value(b_), c_.eps, b);
    if (ctx != nullptr) {
      ctx->saved.push_back(std::move(ln.mean));
      ctx->saved.push_back(std::move(ln.rstd));
    }
    return std::move(ln.u);
  }
  tensor do_backward(const tensor& x, const tensor&, const context& ctx, const tensor& dy,
                     backend& b) override {
    expect_saved(ctx, 2);
    const int n = c_.rows(), w = c_.width;
    tensor dx = tensor::uninitialized(b, n, w);
    kernels::layer_norm_backward(x.data(), dy.data(), value(g_), ctx.saved[0].data(),
                                 ctx.saved[1].data(), nullptr, dx.data(), grad(g_), grad(b_), n, w,
                                 b.stream());
    return dx;
  }

 private:
  config c_;
  std::size_t g_ = 0, b_ = 0;
};

/// The LM head and the loss: logits = x W + b (N x V), y = mean over rows of the cross-entropy
/// against the targets (set_targets: the next token of each position). The output is 1 x 1;
/// last_value() reads the latest forward's loss. Context: lse (one float per row); the backward
/// recomputes the logits rather than keeping N x V floats.
class lm_loss final : public layer {
 public:
  lm_loss(const config& c, std::uint64_t seed, std::shared_ptr<blas> cublas,
          std::string name = "lm_loss")
      : layer(std::move(name), std::move(cublas)), c_(c), targets_(c.rows()), last_(1) {
    w_ = add_parameter("w_head", std::int64_t{c.width} * c.vocab, derive_seed(seed, 0), 0.02f);
    b_ = add_parameter("b_head", c.vocab, 0, 0.0f);
    targets_.upload(std::vector<std::int32_t>(static_cast<std::size_t>(c.rows()), 0));
  }
  [[nodiscard]] bool is_loss() const noexcept override { return true; }

  /// The target token of every position (batch x seq, row-major), each in [0, vocab). Waits for
  /// the work queued on the layer's stream first (a previous step may still read them).
  void set_targets(const std::vector<std::int32_t>& t) {
    for (std::int32_t v : t)
      if (v < 0 || v >= c_.vocab)
        throw std::invalid_argument(where() + "target " + std::to_string(v) + " is not in [0, " +
                                    std::to_string(c_.vocab) + ")");
    targets_.upload(t, stream());
  }
  /// The loss of the latest forward (waits for it).
  [[nodiscard]] float last_value() const { return last_.download(stream())[0]; }

 protected:
  tensor do_run(const tensor& x, context* ctx, backend& b) override {
    expect_shape(x, c_.rows(), c_.width);
    const int n = c_.rows();
    cudaStream_t s = b.stream();
    tensor lse = tensor::uninitialized(b, n, 1);
    {
      tensor logits = logits_of(x, b);
      tensor losses = tensor::uninitialized(b, n, 1);
      kernels::cross_entropy_forward(logits.data(), targets_.data(), losses.data(), lse.data(), n,
                                     c_.vocab, s);
      logits.release();
      tensor y = tensor::uninitialized(b, 1, 1);
      kernels::mean(losses.data(), y.data(), n, s);
      REMAT_CUDA_CHECK(
          cudaMemcpyAsync(last_.data(), y.data(), sizeof(float), cudaMemcpyDeviceToDevice, s));
      if (ctx != nullptr) ctx->saved.push_back(std::move(lse));
      return y;
    }
  }
  tensor do_loss_backward(const tensor& x, const tensor&, const context& ctx, backend& b) override {
    expect_saved(ctx, 1);
    const int n = c_.rows(), w = c_.width, v = c_.vocab;
    cudaStream_t s = b.stream();
    cublasHandle_t cb = cublas();
    tensor d = logits_of(x, b);  // the same GEMM as the forward: the same logits
    kernels::cross_entropy_backward(d.data(), targets_.data(), ctx.saved[0].data(), n, v,
                                    1.0f / static_cast<float>(n), s);
    gemm(cb, w, v, n, 1.0f, {x.data(), w, 0, true}, {d.data(), v}, 1.0f, grad(w_), v);
    kernels::bias_grad(d.data(), grad(b_), n, v, s);
    tensor dx = tensor::uninitialized(b, n, w);
    gemm(cb, n, w, v, 1.0f, {d.data(), v}, {value(w_), v, 0, true}, 0.0f, dx.data(), w);
    return dx;
  }

 private:
  tensor logits_of(const tensor& x, backend& b) {
    return linear(cublas(), x, value(w_), value(b_), c_.vocab, b);
  }

  config c_;
  std::size_t w_ = 0, b_ = 0;
  device_array<std::int32_t> targets_;
  device_array<float> last_;
};

}  // namespace gpt
