#pragma once
// Example layers on eg::tensor, written the way a user of remat would write their own: an
// abstract base eg::layer that meets remat::exec::Layer through the members the default
// chain_layer_traits look for (see <remat/exec/concepts.hpp>), so a model is simply a
// std::vector<std::unique_ptr<eg::layer>>.
//
// Rules every layer here follows (they are what lets the executor promise bitwise-equal
// gradients and a measured peak that is real):
// - Every tensor a layer creates (its output, what it saves, its temporaries, dx) comes from
//   the backend it is given; products are written with .noalias() into backend buffers.
//   (Eigen's matrix product may still take a blocking workspace of its own: on the stack up
//   to EIGEN_STACK_ALLOCATION_LIMIT, 128 KiB, on the heap beyond; see README.md.)
// - forward and forward_save run the same code on the same values, so they give the same
//   bits; forward_save only keeps what forward throws away.
// - backward never needs more than x (the stage input), y (its output) and the context: the
//   executor keeps x and y alive, so no layer copies them into its context.
// - backward returns dx and accumulates (+=) the parameter gradients.
// - Deterministic: single-threaded Eigen; no randomness but dropout's own engine, whose state
//   the executor saves and restores (random_state / set_random_state) before recomputing.
//
// Every layer is also an op of a DAG model (remat::exec::dag_model, <remat/exec/concepts.hpp>):
// the base offers the multi-input members the executor calls on a DAG model (forward(span),
// backward with gradient slots). A single-input layer runs its chain hooks on x[0] and hands its
// input gradient to accumulate(), which makes it the gradient or adds it element by element;
// backward_reads() says which of x and y its backward uses (so a graph need not keep the others).
// Multi-input layers (add, attention, scores, attention_context) override the do_*_n hooks; softmax
// overrides do_backward_n to write or add its input gradient in place.
//
// Parameters and gradients are eg::tensors owned by the layer, allocated from a backend of the
// layer's own (unbudgeted): they live outside the activation budget (the chain model counts
// activations only; weights are subtracted from the device memory beforehand). Their buffers are
// what remat::exec::managed_training moves when a program manages the parameters (an OFFMATE
// plan): the layers read them through value(i) and grad(i) at every call, wherever they are.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <eigen/tensor.hpp>

#include <remat/core/units.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>

namespace eg {

/// What forward_save keeps for the backward: tensors allocated through the backend, so the
/// context's memory is counted, and bytes() is exactly what it holds.
struct context {
  std::vector<tensor> saved;

  [[nodiscard]] remat::bytes bytes() const noexcept {
    remat::bytes n = 0;
    for (const auto& t : saved) n += t.bytes();
    return n;
  }
  void clear() noexcept { saved.clear(); }
};

/// A layer's random state: dropout's engine, nothing for deterministic layers. The executor
/// saves it before a stage's first forward and restores it before each recomputation.
using rng_state = std::optional<std::mt19937>;

/// A parameter and its gradient, both shaped like the parameter (remat::exec::parameter_traits
/// finds the name, value and grad members).
struct parameter {
  std::string name;
  tensor value;
  tensor grad;
};

/// The base of every example layer. Public members are what the executor calls (non-virtual,
/// they check their input and forward to the do_* hooks that a layer implements).
class layer {
 public:
  using context = eg::context;

  virtual ~layer() = default;
  layer(const layer&) = delete;
  layer& operator=(const layer&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// True for the last stage of a chain: its backward takes no output gradient.
  [[nodiscard]] virtual bool is_loss() const noexcept { return false; }

  /// y = f(x), keeping nothing (temporaries are freed before returning).
  [[nodiscard]] tensor forward(const tensor& x, backend& b) { return do_forward(x, b); }
  /// y = f(x), keeping in ctx (cleared first) what backward needs. Same bits as forward.
  [[nodiscard]] tensor forward_save(const tensor& x, context& ctx, backend& b) {
    ctx.clear();
    return do_forward_save(x, ctx, b);
  }
  /// dx from dy; accumulates the parameter gradients.
  [[nodiscard]] tensor backward(const tensor& x, const tensor& y, const context& ctx,
                                const tensor& dy, backend& b) {
    if (dy.rows() != y.rows() || dy.cols() != y.cols())
      throw std::invalid_argument(where() + "dy is " + shape(dy) + ", y is " + shape(y));
    return do_backward(x, y, ctx, dy, b);
  }
  /// The loss's backward: the gradient of the loss output is the constant 1.
  [[nodiscard]] tensor backward(const tensor& x, const tensor& y, const context& ctx, backend& b) {
    return do_loss_backward(x, y, ctx, b);
  }

  // --- parameters ---------------------------------------------------------------------------
  [[nodiscard]] std::span<parameter> parameters() noexcept { return params_; }
  [[nodiscard]] std::span<const parameter> parameters() const noexcept { return params_; }
  /// The gradients, in the order of parameters().
  [[nodiscard]] std::vector<const tensor*> gradients() const {
    std::vector<const tensor*> g;
    g.reserve(params_.size());
    for (const auto& p : params_) g.push_back(&p.grad);
    return g;
  }
  /// The number of scalars in all parameters.
  [[nodiscard]] std::size_t parameter_count() const noexcept {
    std::size_t n = 0;
    for (const auto& p : params_) n += static_cast<std::size_t>(p.value.size());
    return n;
  }
  /// Zeroes the gradients (those that hold memory: a program that manages the parameters
  /// creates each gradient when its first contribution comes).
  void zero_grad() {
    for (auto& p : params_)
      if (p.grad.data() != nullptr) p.grad.mat().setZero();
  }
  void sgd_step(float lr) {
    for (auto& p : params_) p.value.mat() -= lr * p.grad.mat();
  }

  // --- random state (the executor finds these through the base class) ---------------------
  [[nodiscard]] virtual rng_state random_state() const { return std::nullopt; }
  virtual void set_random_state(const rng_state&) {}

  // --- as an op of a DAG model (the executor finds these through the base class) -----------
  using inputs = std::span<const tensor* const>;
  using input_gradients = std::span<std::optional<tensor>>;
  /// y = f(x[0], x[1], ...), keeping nothing.
  [[nodiscard]] tensor forward(inputs x, backend& b) { return do_forward_n(x, b); }
  /// The same y, keeping in ctx (cleared first) what backward needs.
  [[nodiscard]] tensor forward_save(inputs x, context& ctx, backend& b) {
    ctx.clear();
    return do_forward_save_n(x, ctx, b);
  }
  /// Creates or adds to dx[j], the gradient of input j (see accumulate); accumulates the
  /// parameter gradients. x[j] and y are null where backward_reads() says they are not read.
  void backward(inputs x, const tensor* y, const context& ctx, const tensor& dy, input_gradients dx,
                backend& b) {
    if (y != nullptr && (dy.rows() != y->rows() || dy.cols() != y->cols()))
      throw std::invalid_argument(where() + "dy is " + shape(dy) + ", y is " + shape(*y));
    do_backward_n(x, y, ctx, &dy, dx, b);
  }
  /// The loss's backward: the gradient of the loss output is the constant 1.
  void backward(inputs x, const tensor* y, const context& ctx, input_gradients dx, backend& b) {
    do_backward_n(x, y, ctx, nullptr, dx, b);
  }
  /// What the backward reads besides the context and dy (default: every input and y).
  [[nodiscard]] virtual remat::exec::backward_needs backward_reads() const { return {}; }

  // --- a loss with the batch's targets (batch x features, outside the backend), chain and DAG --
  [[nodiscard]] tensor forward(const tensor& x, const matrix& targets, backend& b) {
    return do_forward_targets(x, targets, b);
  }
  [[nodiscard]] tensor forward_save(const tensor& x, const matrix& targets, context& ctx,
                                    backend& b) {
    ctx.clear();
    return do_forward_targets(x, targets, b);
  }
  [[nodiscard]] tensor backward(const tensor& x, const tensor& y, const context& ctx,
                                const matrix& targets, backend& b) {
    return do_loss_backward_targets(x, y, ctx, targets, b);
  }
  [[nodiscard]] tensor forward(inputs x, const matrix& targets, backend& b) {
    return do_forward_targets(only(x), targets, b);
  }
  [[nodiscard]] tensor forward_save(inputs x, const matrix& targets, context& ctx, backend& b) {
    ctx.clear();
    return do_forward_targets(only(x), targets, b);
  }
  void backward(inputs x, const tensor* y, const context& ctx, const matrix& targets,
                input_gradients dx, backend& b) {
    static const tensor unread;  // what the backward does not read: an empty 0 x 0 tensor
    accumulate(dx[0],
               do_loss_backward_targets(only(x), y != nullptr ? *y : unread, ctx, targets, b));
  }

 protected:
  explicit layer(std::string name) : name_(std::move(name)) {}

  /// A single-input layer in a DAG: its chain hooks on x[0].
  virtual tensor do_forward_n(inputs x, backend& b) { return do_forward(only(x), b); }
  virtual tensor do_forward_save_n(inputs x, context& ctx, backend& b) {
    return do_forward_save(only(x), ctx, b);
  }
  virtual void do_backward_n(inputs x, const tensor* y, const context& ctx, const tensor* dy,
                             input_gradients dx, backend& b) {
    if (x.size() != 1 || dx.size() != 1)
      throw std::invalid_argument(where() + "takes one input, got " + std::to_string(x.size()));
    static const tensor unread;  // what the backward does not read: an empty 0 x 0 tensor
    const tensor& x0 = x[0] != nullptr ? *x[0] : unread;
    const tensor& yy = y != nullptr ? *y : unread;
    accumulate(dx[0],
               dy != nullptr ? do_backward(x0, yy, ctx, *dy, b) : do_loss_backward(x0, yy, ctx, b));
  }
  /// Hands a contribution c to the gradient of an input: c becomes the gradient when there is
  /// none yet, else it is added element by element (dx = dx + c, one rounding each: two
  /// contributions give the same bits in either order) and c, a temporary, is freed.
  static void accumulate(std::optional<tensor>& dx, tensor c) {
    if (!dx) {
      dx = std::move(c);
      return;
    }
    if (dx->rows() != c.rows() || dx->cols() != c.cols())
      throw std::invalid_argument("eg::layer: a gradient contribution of " + shape(c) +
                                  " for a gradient of " + shape(*dx));
    dx->mat() += c.mat();
  }
  [[nodiscard]] const tensor& only(inputs x) const {
    if (x.size() != 1 || x[0] == nullptr)
      throw std::invalid_argument(where() + "takes one input, got " + std::to_string(x.size()));
    return *x[0];
  }

  virtual tensor do_forward(const tensor& x, backend& b) = 0;
  virtual tensor do_forward_save(const tensor& x, context& ctx, backend& b) = 0;
  virtual tensor do_backward(const tensor&, const tensor&, const context&, const tensor&,
                             backend&) {
    throw std::logic_error(where() + "is a loss: its backward takes no output gradient");
  }
  virtual tensor do_loss_backward(const tensor&, const tensor&, const context&, backend&) {
    throw std::logic_error(where() + "is not a loss: its backward needs the output gradient dy");
  }
  /// A loss with the batch's targets (forward and forward_save alike: such a loss saves nothing).
  virtual tensor do_forward_targets(const tensor&, const matrix&, backend&) {
    throw std::logic_error(where() + "is not a loss that takes targets");
  }
  virtual tensor do_loss_backward_targets(const tensor&, const tensor&, const context&,
                                          const matrix&, backend&) {
    throw std::logic_error(where() + "is not a loss that takes targets");
  }

  /// Registers a parameter (zero gradient); returns its index in parameters().
  std::size_t add_parameter(std::string pname, index rows, index cols) {
    params_.push_back(
        {std::move(pname), tensor::zeros(*store_, rows, cols), tensor::zeros(*store_, rows, cols)});
    return params_.size() - 1;
  }
  [[nodiscard]] tensor::const_map value(std::size_t i) const noexcept {
    return params_[i].value.mat();
  }
  [[nodiscard]] tensor::map grad(std::size_t i) noexcept { return params_[i].grad.mat(); }
  /// Parameter i's value tensor (to initialise it).
  [[nodiscard]] tensor& value_tensor(std::size_t i) noexcept { return params_[i].value; }

  [[nodiscard]] std::string where() const { return "eg::layer '" + name_ + "': "; }
  [[nodiscard]] static std::string shape(const tensor& t) {
    return std::to_string(t.rows()) + " x " + std::to_string(t.cols());
  }
  void expect_cols(const tensor& x, index cols) const {
    if (x.cols() != cols)
      throw std::invalid_argument(where() + "expects " + std::to_string(cols) + " features, got " +
                                  shape(x));
  }
  void expect_saved(const context& ctx, std::size_t n) const {
    if (ctx.saved.size() != n)
      throw std::logic_error(where() + "backward needs the context of forward_save (" +
                             std::to_string(n) + " tensors), got " +
                             std::to_string(ctx.saved.size()));
  }

 private:
  std::string name_;
  // The parameters' own backend, declared before them so that it outlives them; a pointer so
  // that its address is stable.
  std::unique_ptr<backend> store_ = std::make_unique<backend>();
  std::vector<parameter> params_;
};

// --- building blocks shared by the layers --------------------------------------------------------

namespace detail {

/// GELU, tanh approximation (Hendrycks & Gimpel 2016): 0.5 x (1 + tanh(k (x + 0.044715 x^3))).
inline constexpr float gelu_k = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float gelu_c = 0.044715f;
[[nodiscard]] inline float gelu(float v) noexcept {
  return 0.5f * v * (1.0f + std::tanh(gelu_k * (v + gelu_c * v * v * v)));
}
[[nodiscard]] inline float gelu_grad(float v) noexcept {
  const float t = std::tanh(gelu_k * (v + gelu_c * v * v * v));
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * gelu_k * (1.0f + 3.0f * gelu_c * v * v);
}

/// Row-wise layer norm: xhat = (x - mean) * rstd, u = xhat * gain + bias, with
/// rstd = 1 / sqrt(var + eps) (rows x 1). Plain loops: one fixed order of operations.
inline void layer_norm_forward(const tensor& xt, tensor::const_map gain, tensor::const_map bias,
                               float eps, tensor& xhat_t, tensor& rstd_t, tensor& u_t) {
  const auto x = xt.mat();
  auto xhat = xhat_t.mat(), rstd = rstd_t.mat(), u = u_t.mat();
  const index d = x.cols();
  const float inv_d = 1.0f / static_cast<float>(d);
  for (index r = 0; r < x.rows(); ++r) {
    float mean = 0.0f;
    for (index c = 0; c < d; ++c) mean += x(r, c);
    mean *= inv_d;
    float var = 0.0f;
    for (index c = 0; c < d; ++c) var += (x(r, c) - mean) * (x(r, c) - mean);
    var *= inv_d;
    const float rs = 1.0f / std::sqrt(var + eps);
    rstd(r, 0) = rs;
    for (index c = 0; c < d; ++c) {
      xhat(r, c) = (x(r, c) - mean) * rs;
      u(r, c) = xhat(r, c) * gain(0, c) + bias(0, c);
    }
  }
}

/// Given du, accumulates dgain and dbias, and adds the input gradient into dx:
/// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = du * gain.
inline void layer_norm_backward(const tensor& du_t, const tensor& xhat_t, const tensor& rstd_t,
                                tensor::const_map gain, tensor::map dgain, tensor::map dbias,
                                tensor& dx_t) {
  const auto du = du_t.mat(), xhat = xhat_t.mat(), rstd = rstd_t.mat();
  auto dx = dx_t.mat();
  const index d = du.cols();
  const float inv_d = 1.0f / static_cast<float>(d);
  for (index r = 0; r < du.rows(); ++r) {
    float mean_dxhat = 0.0f, mean_dxhat_xhat = 0.0f;
    for (index c = 0; c < d; ++c) {
      const float dxhat = du(r, c) * gain(0, c);
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * xhat(r, c);
      dgain(0, c) += du(r, c) * xhat(r, c);
      dbias(0, c) += du(r, c);
    }
    mean_dxhat *= inv_d;
    mean_dxhat_xhat *= inv_d;
    for (index c = 0; c < d; ++c) {
      const float dxhat = du(r, c) * gain(0, c);
      dx(r, c) += rstd(r, 0) * (dxhat - mean_dxhat - xhat(r, c) * mean_dxhat_xhat);
    }
  }
}

}  // namespace detail

// --- linear --------------------------------------------------------------------------------------

/// y = x W + b, W: in x out (Xavier-uniform from the seed), b: 1 x out (zero). Saves nothing:
/// its backward needs x (kept by the executor) and W.
class linear final : public layer {
 public:
  /// In a DAG: its backward reads x.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {true, false};
  }
  linear(index in, index out, std::uint64_t seed, std::string name = "linear")
      : layer(std::move(name)) {
    add_parameter("weight", in, out);
    add_parameter("bias", 1, out);
    const float limit = std::sqrt(6.0f / static_cast<float>(in + out));
    fill_synthetic(value_tensor(0), derive_seed(seed, 0), limit);
  }
  [[nodiscard]] tensor::const_map weight() const noexcept { return value(0); }
  [[nodiscard]] tensor::const_map bias() const noexcept { return value(1); }

 protected:
  tensor do_forward(const tensor& x, backend& b) override {
    expect_cols(x, value(0).rows());
    tensor y = tensor::uninitialized(b, x.rows(), value(0).cols());
    y.mat().noalias() = x.mat() * value(0);
    y.mat().rowwise() += value(1).row(0);
    return y;
  }
  tensor do_forward_save(const tensor& x, context&, backend& b) override {
    return do_forward(x, b);
  }
  tensor do_backward(const tensor& x, const tensor&, const context&, const tensor& dy,
                     backend& b) override {
    grad(0).noalias() += x.mat().transpose() * dy.mat();
    grad(1).row(0) += dy.mat().colwise().sum();
    tensor dx = tensor::uninitialized(b, dy.rows(), value(0).rows());
    dx.mat().noalias() = dy.mat() * value(0).transpose();
    return dx;
  }
};

// --- activations ---------------------------------------------------------------------------------

/// max(x, 0). Saves nothing: the backward masks dy by y > 0.
class relu final : public layer {
 public:
  /// In a DAG: its backward reads y.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {false, true};
  }
  explicit relu(std::string name = "relu") : layer(std::move(name)) {}

 protected:
  tensor do_forward(const tensor& x, backend& b) override {
    return tensor::from(b, x.mat().cwiseMax(0.0f));
  }
  tensor do_forward_save(const tensor& x, context&, backend& b) override {
    return do_forward(x, b);
  }
  tensor do_backward(const tensor&, const tensor& y, const context&, const tensor& dy,
                     backend& b) override {
    return tensor::from(b, (y.mat().array() > 0.0f).select(dy.mat(), 0.0f));
  }
};

/// GELU (tanh approximation). Saves nothing: the backward recomputes the derivative from x.
class gelu final : public layer {
 public:
  /// In a DAG: its backward reads x.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {true, false};
  }
  explicit gelu(std::string name = "gelu") : layer(std::move(name)) {}

 protected:
  tensor do_forward(const tensor& x, backend& b) override {
    tensor y = tensor::uninitialized(b, x.rows(), x.cols());
    const float* in = x.data();
    float* out = y.data();
    for (index i = 0; i < x.size(); ++i) out[i] = detail::gelu(in[i]);
    return y;
  }
  tensor do_forward_save(const tensor& x, context&, backend& b) override {
    return do_forward(x, b);
  }
  tensor do_backward(const tensor& x, const tensor&, const context&, const tensor& dy,
                     backend& b) override {
    tensor dx = tensor::uninitialized(b, x.rows(), x.cols());
    const float* in = x.data();
    const float* g = dy.data();
    float* out = dx.data();
    for (index i = 0; i < x.size(); ++i) out[i] = g[i] * detail::gelu_grad(in[i]);
    return dx;
  }
};

// --- layer norm ----------------------------------------------------------------------------------

/// Row-wise layer norm with gain (1) and bias (0), both 1 x width.
/// Saves xhat (rows x width) and 1/std (rows x 1).
class layer_norm final : public layer {
 public:
  /// In a DAG: its backward reads its context only.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {false, false};
  }
  explicit layer_norm(index width, float eps = 1e-5f, std::string name = "layer_norm")
      : layer(std::move(name)), eps_(eps) {
    add_parameter("gain", 1, width);
    add_parameter("bias", 1, width);
    value_tensor(0).mat().setOnes();
  }
  [[nodiscard]] float eps() const noexcept { return eps_; }

 protected:
  tensor do_forward(const tensor& x, backend& b) override { return run(x, nullptr, b); }
  tensor do_forward_save(const tensor& x, context& ctx, backend& b) override {
    return run(x, &ctx, b);
  }
  tensor do_backward(const tensor&, const tensor&, const context& ctx, const tensor& dy,
                     backend& b) override {
    expect_saved(ctx, 2);
    tensor dx = tensor::zeros(b, dy.rows(), dy.cols());
    detail::layer_norm_backward(dy, ctx.saved[0], ctx.saved[1], value(0), grad(0), grad(1), dx);
    return dx;
  }

 private:
  // One code path for forward and forward_save: the same operations give the same bits.
  tensor run(const tensor& x, context* ctx, backend& b) {
    expect_cols(x, value(0).cols());
    tensor xhat = tensor::uninitialized(b, x.rows(), x.cols());
    tensor rstd = tensor::uninitialized(b, x.rows(), 1);
    tensor y = tensor::uninitialized(b, x.rows(), x.cols());
    detail::layer_norm_forward(x, value(0), value(1), eps_, xhat, rstd, y);
    if (ctx != nullptr) {
      ctx->saved.push_back(std::move(xhat));
      ctx->saved.push_back(std::move(rstd));
    }
    return y;
  }
  float eps_;
};

// --- dropout -------------------------------------------------------------------------------------

/// Inverted dropout: each element is dropped with probability p and the others are scaled by
/// 1/(1-p). The mask comes from the layer's own std::mt19937, one draw per element in
/// row-major order, in forward and forward_save alike: the same state gives the same mask.
/// Saves the scaled mask (rows x cols: 0 or 1/(1-p)).
class dropout final : public layer {
 public:
  /// In a DAG: its backward reads its context only.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {false, false};
  }
  dropout(float p, std::uint64_t seed, std::string name = "dropout")
      : layer(std::move(name)),
        p_(p),
        engine_(static_cast<std::mt19937::result_type>(derive_seed(seed, 0) >> 32)) {
    if (!(p >= 0.0f && p < 1.0f))
      throw std::invalid_argument(where() + "p must be in [0, 1), got " + std::to_string(p));
    // An element is kept when a 32-bit draw is >= threshold_, i.e. with probability 1 - p.
    threshold_ = static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0);
    scale_ = 1.0f / (1.0f - p);
  }
  [[nodiscard]] float p() const noexcept { return p_; }
  /// The engine, before the next forward's draws.
  [[nodiscard]] rng_state random_state() const override { return engine_; }
  void set_random_state(const rng_state& s) override {
    if (!s) throw std::invalid_argument(where() + "a dropout layer's random state cannot be empty");
    engine_ = *s;
  }

 protected:
  tensor do_forward(const tensor& x, backend& b) override {
    tensor y = tensor::uninitialized(b, x.rows(), x.cols());
    const float* in = x.data();
    float* out = y.data();
    for (index i = 0; i < x.size(); ++i) out[i] = in[i] * next_mask();
    return y;
  }
  tensor do_forward_save(const tensor& x, context& ctx, backend& b) override {
    tensor mask = tensor::uninitialized(b, x.rows(), x.cols());
    tensor y = tensor::uninitialized(b, x.rows(), x.cols());
    const float* in = x.data();
    float* m = mask.data();
    float* out = y.data();
    for (index i = 0; i < x.size(); ++i) {
      m[i] = next_mask();
      out[i] = in[i] * m[i];
    }
    ctx.saved.push_back(std::move(mask));
    return y;
  }
  tensor do_backward(const tensor&, const tensor&, const context& ctx, const tensor& dy,
                     backend& b) override {
    expect_saved(ctx, 1);
    return tensor::from(b, dy.mat().cwiseProduct(ctx.saved[0].mat()));
  }

 private:
  float next_mask() { return static_cast<std::uint64_t>(engine_()) >= threshold_ ? scale_ : 0.0f; }

  float p_;
  std::mt19937 engine_;
  std::uint64_t threshold_ = 0;
  float scale_ = 1.0f;
};

// --- residual MLP block --------------------------------------------------------------------------

/// One transformer-like chain stage: y = x + gelu(layer_norm(x) W1 + b1) W2 + b2, with
/// W1: width x hidden, W2: hidden x width (Xavier from the seed), zero biases, LN gain 1.
/// Its intermediates come from the backend: in forward they are freed as soon as they are
/// used; forward_save keeps them, in this order: xhat (rows x width), 1/std (rows x 1),
/// u = LN(x) (rows x width), h = u W1 + b1 (rows x hidden), g = gelu(h) (rows x hidden).
class residual_mlp final : public layer {
 public:
  /// In a DAG: its backward reads its context only.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {false, false};
  }
  residual_mlp(index width, index hidden, std::uint64_t seed, std::string name = "residual_mlp",
               float eps = 1e-5f)
      : layer(std::move(name)), eps_(eps) {
    add_parameter("ln.gain", 1, width);
    add_parameter("ln.bias", 1, width);
    add_parameter("fc1.weight", width, hidden);
    add_parameter("fc1.bias", 1, hidden);
    add_parameter("fc2.weight", hidden, width);
    add_parameter("fc2.bias", 1, width);
    value_tensor(gain).mat().setOnes();
    const float limit = std::sqrt(6.0f / static_cast<float>(width + hidden));
    fill_synthetic(value_tensor(w1), derive_seed(seed, 0), limit);
    fill_synthetic(value_tensor(w2), derive_seed(seed, 1), limit);
  }
  [[nodiscard]] index width() const noexcept { return value(w1).rows(); }
  [[nodiscard]] index hidden() const noexcept { return value(w1).cols(); }

 protected:
  tensor do_forward(const tensor& x, backend& b) override { return run(x, nullptr, b); }
  tensor do_forward_save(const tensor& x, context& ctx, backend& b) override {
    return run(x, &ctx, b);
  }

  tensor do_backward(const tensor&, const tensor&, const context& ctx, const tensor& dy,
                     backend& b) override {
    expect_saved(ctx, 5);
    const tensor& xhat = ctx.saved[0];
    const tensor& rstd = ctx.saved[1];
    const tensor& u = ctx.saved[2];
    const tensor& h = ctx.saved[3];
    const tensor& g = ctx.saved[4];
    tensor dx = dy.clone(b);  // the residual path
    // out = g W2 + b2
    grad(w2).noalias() += g.mat().transpose() * dy.mat();
    grad(b2).row(0) += dy.mat().colwise().sum();
    tensor dh = tensor::uninitialized(b, dy.rows(), hidden());
    dh.mat().noalias() = dy.mat() * value(w2).transpose();
    // g = gelu(h), in place: dh = dg * gelu'(h)
    for (index i = 0; i < dh.size(); ++i) dh.data()[i] *= detail::gelu_grad(h.data()[i]);
    // h = u W1 + b1
    grad(w1).noalias() += u.mat().transpose() * dh.mat();
    grad(b1).row(0) += dh.mat().colwise().sum();
    tensor du = tensor::uninitialized(b, dy.rows(), width());
    du.mat().noalias() = dh.mat() * value(w1).transpose();
    dh.release();
    // u = layer_norm(x)
    detail::layer_norm_backward(du, xhat, rstd, value(gain), grad(gain), grad(beta), dx);
    return dx;
  }

 private:
  static constexpr std::size_t gain = 0, beta = 1, w1 = 2, b1 = 3, w2 = 4, b2 = 5;

  // One code path for forward and forward_save: the same operations give the same bits; only
  // the lifetime of the intermediates differs.
  tensor run(const tensor& x, context* ctx, backend& b) {
    expect_cols(x, width());
    const auto keep_or_free = [ctx](tensor& t) {
      if (ctx != nullptr)
        ctx->saved.push_back(std::move(t));
      else
        t.release();
    };
    tensor xhat = tensor::uninitialized(b, x.rows(), width());
    tensor rstd = tensor::uninitialized(b, x.rows(), 1);
    tensor u = tensor::uninitialized(b, x.rows(), width());
    detail::layer_norm_forward(x, value(gain), value(beta), eps_, xhat, rstd, u);
    keep_or_free(xhat);
    keep_or_free(rstd);
    tensor h = tensor::uninitialized(b, x.rows(), hidden());
    h.mat().noalias() = u.mat() * value(w1);
    h.mat().rowwise() += value(b1).row(0);
    keep_or_free(u);
    tensor g = tensor::uninitialized(b, x.rows(), hidden());
    for (index i = 0; i < h.size(); ++i) g.data()[i] = detail::gelu(h.data()[i]);
    keep_or_free(h);
    tensor y = tensor::uninitialized(b, x.rows(), width());
    y.mat().noalias() = g.mat() * value(w2);
    y.mat().rowwise() += value(b2).row(0);
    y.mat() += x.mat();
    keep_or_free(g);
    return y;
  }
  float eps_;
};

// --- multi-input layers (DAG models only) -------------------------------------------------------

/// A base for layers that only make sense with several inputs: the chain hooks refuse to run.
class multi_input_layer : public layer {
 protected:
  using layer::layer;
  tensor do_forward(const tensor&, backend&) override { throw single_input(); }
  tensor do_forward_save(const tensor&, context&, backend&) override { throw single_input(); }
  void expect_inputs(inputs x, input_gradients dx, std::size_t n, bool reads_inputs) const {
    if (x.size() != n || (!dx.empty() && dx.size() != n))
      throw std::invalid_argument(where() + "takes " + std::to_string(n) + " inputs, got " +
                                  std::to_string(x.size()));
    if (reads_inputs)
      for (const tensor* t : x)
        if (t == nullptr) throw std::invalid_argument(where() + "an input is missing");
  }

 private:
  [[nodiscard]] std::invalid_argument single_input() const {
    return std::invalid_argument(where() +
                                 "has several inputs: it runs as an op of a DAG model "
                                 "(remat::exec::dag_model), not as a chain stage");
  }
};

/// Residual add: y = x0 + x1 (same shapes). Saves nothing, its backward reads nothing: each
/// input's gradient is dy, created as a copy or added in place (no temporary).
class add final : public multi_input_layer {
 public:
  explicit add(std::string name = "add") : multi_input_layer(std::move(name)) {}
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {false, false};
  }

 protected:
  tensor do_forward_n(inputs x, backend& b) override {
    expect_inputs(x, {}, 2, true);
    if (x[0]->rows() != x[1]->rows() || x[0]->cols() != x[1]->cols())
      throw std::invalid_argument(where() + "adds " + shape(*x[0]) + " and " + shape(*x[1]));
    return tensor::from(b, x[0]->mat() + x[1]->mat());
  }
  tensor do_forward_save_n(inputs x, context&, backend& b) override { return do_forward_n(x, b); }
  void do_backward_n(inputs x, const tensor*, const context&, const tensor* dy, input_gradients dx,
                     backend& b) override {
    expect_inputs(x, dx, 2, false);
    if (dy == nullptr) throw std::logic_error(where() + "is not a loss: its backward needs dy");
    for (auto& g : dx) {
      if (g)
        g->mat() += dy->mat();
      else
        g = dy->clone(b);
    }
  }
};

/// Single-head scaled dot-product attention over the rows (the batch as a sequence of
/// positions): y = softmax(q k^T / sqrt(d)) v, with q, k, v (rows x d) its three inputs, in
/// this order, and the softmax row-wise. Saves P = softmax(...) (rows x rows); its backward reads
/// q, k and v. Forward temporary: S = P before the softmax (rows x rows), computed in place.
/// Backward: dP = dy v^T, dS = P * (dP - rowsum(dP * P)) (elementwise), dq = dS k / sqrt(d),
/// dk = dS^T q / sqrt(d), dv = P^T dy; each computed whole, then handed to accumulate().
class attention final : public multi_input_layer {
 public:
  explicit attention(std::string name = "attention") : multi_input_layer(std::move(name)) {}
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {true, false};
  }

 protected:
  tensor do_forward_n(inputs x, backend& b) override { return run(x, nullptr, b); }
  tensor do_forward_save_n(inputs x, context& ctx, backend& b) override { return run(x, &ctx, b); }
  void do_backward_n(inputs x, const tensor*, const context& ctx, const tensor* dy,
                     input_gradients dx, backend& b) override {
    expect_inputs(x, dx, 3, true);
    expect_saved(ctx, 1);
    if (dy == nullptr) throw std::logic_error(where() + "is not a loss: its backward needs dy");
    const tensor &q = *x[0], &k = *x[1], &v = *x[2], &p = ctx.saved[0];
    const float scale = 1.0f / std::sqrt(static_cast<float>(q.cols()));
    tensor ds = tensor::uninitialized(b, p.rows(), p.cols());
    ds.mat().noalias() = dy->mat() * v.mat().transpose();  // dP
    for (index r = 0; r < p.rows(); ++r) {
      float dot = 0.0f;
      for (index c = 0; c < p.cols(); ++c) dot += ds.mat()(r, c) * p.mat()(r, c);
      for (index c = 0; c < p.cols(); ++c) ds.mat()(r, c) = p.mat()(r, c) * (ds.mat()(r, c) - dot);
    }
    tensor dq = tensor::uninitialized(b, q.rows(), q.cols());
    dq.mat().noalias() = scale * (ds.mat() * k.mat());
    accumulate(dx[0], std::move(dq));
    tensor dk = tensor::uninitialized(b, k.rows(), k.cols());
    dk.mat().noalias() = scale * (ds.mat().transpose() * q.mat());
    accumulate(dx[1], std::move(dk));
    tensor dv = tensor::uninitialized(b, v.rows(), v.cols());
    dv.mat().noalias() = p.mat().transpose() * dy->mat();
    accumulate(dx[2], std::move(dv));
  }

 private:
  // One code path for forward and forward_save: the same operations give the same bits.
  tensor run(inputs x, context* ctx, backend& b) {
    expect_inputs(x, {}, 3, true);
    const tensor &q = *x[0], &k = *x[1], &v = *x[2];
    if (k.cols() != q.cols() || k.rows() != v.rows())
      throw std::invalid_argument(where() + "q " + shape(q) + ", k " + shape(k) + ", v " +
                                  shape(v) + " do not fit");
    const float scale = 1.0f / std::sqrt(static_cast<float>(q.cols()));
    tensor p = tensor::uninitialized(b, q.rows(), k.rows());
    p.mat().noalias() = scale * (q.mat() * k.mat().transpose());
    for (index r = 0; r < p.rows(); ++r) {
      const float m = p.mat().row(r).maxCoeff();
      float sum = 0.0f;
      for (index c = 0; c < p.cols(); ++c) sum += p.mat()(r, c) = std::exp(p.mat()(r, c) - m);
      for (index c = 0; c < p.cols(); ++c) p.mat()(r, c) /= sum;
    }
    tensor y = tensor::uninitialized(b, q.rows(), v.cols());
    y.mat().noalias() = p.mat() * v.mat();
    if (ctx != nullptr) ctx->saved.push_back(std::move(p));
    return y;
  }
};

// --- multi-head attention at op granularity (GPT-like DAG models) -------------------------------
// Tokens are rows: a (batch * sequence) x width tensor holds `batch` sequences of `sequence`
// tokens one after the other (row n * sequence + i is token i of sequence n), and head h owns
// the columns [h d, (h + 1) d), d = width / heads. The attention of head h within sequence n is a
// sequence x sequence block; scores stacks the blocks of every sequence and head as a
// (batch * heads * sequence) x sequence tensor, block (n, h) in the rows from (n heads + h)
// sequence, so that softmax (row by row) and dropout (element by element) run on it as on any
// tensor, and a planner can recompute each of them on its own.

namespace detail {

/// The token layout of a multi-head op: where the blocks of sequence n and head h lie.
struct head_layout {
  index batch = 0, heads = 0, sequence = 0, head_width = 0;

  /// The first row of sequence n in a (batch * sequence) x width tensor.
  [[nodiscard]] index token_row(index n) const noexcept { return n * sequence; }
  /// The first column of head h in the same.
  [[nodiscard]] index column(index h) const noexcept { return h * head_width; }
  /// The first row of block (n, h) in a (batch * heads * sequence) x sequence tensor.
  [[nodiscard]] index score_row(index n, index h) const noexcept {
    return (n * heads + h) * sequence;
  }
  [[nodiscard]] index score_rows() const noexcept { return batch * heads * sequence; }
};

}  // namespace detail

/// Attention scores of every sequence and head. Inputs q and k, in this order, both
/// (batch * sequence) x width; output (batch * heads * sequence) x sequence whose block (n, h) is
///   S_nh = q_nh k_nh^T / sqrt(d)   (q_nh: the sequence x d block of sequence n, head h),
/// and, when causal, S_nh(i, j) = -inf for j > i (token i sees tokens 0..i; the softmax gives
/// them 0). Saves nothing; its backward reads q and k. Backward, with dS = dy where unmasked and
/// 0 where masked:
///   dq_nh = dS_nh k_nh / sqrt(d),   dk_nh = dS_nh^T q_nh / sqrt(d),
/// each input's gradient computed whole, then handed to accumulate(); when causal, one
/// sequence x sequence temporary holds the masked dS of a block.
class scores final : public multi_input_layer {
 public:
  scores(index heads, index sequence, bool causal = true, std::string name = "scores")
      : multi_input_layer(std::move(name)), heads_(heads), sequence_(sequence), causal_(causal) {
    if (heads <= 0 || sequence <= 0)
      throw std::invalid_argument(where() + "needs heads > 0 and sequence > 0");
  }
  [[nodiscard]] index heads() const noexcept { return heads_; }
  [[nodiscard]] index sequence() const noexcept { return sequence_; }
  [[nodiscard]] bool causal() const noexcept { return causal_; }
  /// In a DAG: its backward reads q and k.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {true, false};
  }

 protected:
  tensor do_forward_n(inputs x, backend& b) override { return run(x, b); }
  tensor do_forward_save_n(inputs x, context&, backend& b) override { return run(x, b); }
  void do_backward_n(inputs x, const tensor*, const context&, const tensor* dy, input_gradients dx,
                     backend& b) override {
    expect_inputs(x, dx, 2, true);
    if (dy == nullptr) throw std::logic_error(where() + "is not a loss: its backward needs dy");
    const tensor &q = *x[0], &k = *x[1];
    const detail::head_layout s = layout(q, k);
    if (dy->rows() != s.score_rows() || dy->cols() != sequence_)
      throw std::invalid_argument(where() + "dy is " + shape(*dy) + ", the scores are " +
                                  std::to_string(s.score_rows()) + " x " +
                                  std::to_string(sequence_));
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_width));
    const index t = sequence_, d = s.head_width;
    tensor masked;  // the masked dS of one block, when causal
    if (causal_) masked = tensor::uninitialized(b, t, t);
    // dS_nh: dy's block (t x t, contiguous: dy has t columns), or its lower triangle (the
    // masked entries' gradient is 0).
    using block_map = Eigen::Map<const matrix>;
    auto ds = [&](index n, index h) {
      const block_map block(dy->data() + s.score_row(n, h) * t, t, t);
      if (!causal_) return block;
      auto m = masked.mat();
      for (index i = 0; i < t; ++i)
        for (index j = 0; j < t; ++j) m(i, j) = j <= i ? block(i, j) : 0.0f;
      return block_map(masked.data(), t, t);
    };
    tensor dq = tensor::uninitialized(b, q.rows(), q.cols());
    for (index n = 0; n < s.batch; ++n)
      for (index h = 0; h < heads_; ++h)
        dq.mat().block(s.token_row(n), s.column(h), t, d).noalias() =
            scale * (ds(n, h) * k.mat().block(s.token_row(n), s.column(h), t, d));
    accumulate(dx[0], std::move(dq));
    tensor dk = tensor::uninitialized(b, k.rows(), k.cols());
    for (index n = 0; n < s.batch; ++n)
      for (index h = 0; h < heads_; ++h)
        dk.mat().block(s.token_row(n), s.column(h), t, d).noalias() =
            scale * (ds(n, h).transpose() * q.mat().block(s.token_row(n), s.column(h), t, d));
    accumulate(dx[1], std::move(dk));
  }

 private:
  [[nodiscard]] detail::head_layout layout(const tensor& q, const tensor& k) const {
    if (k.rows() != q.rows() || k.cols() != q.cols() || q.rows() % sequence_ != 0 ||
        q.cols() % heads_ != 0)
      throw std::invalid_argument(where() + "q " + shape(q) + " and k " + shape(k) +
                                  " must have the same shape, rows a multiple of the sequence (" +
                                  std::to_string(sequence_) + ") and columns of the heads (" +
                                  std::to_string(heads_) + ")");
    return {q.rows() / sequence_, heads_, sequence_, q.cols() / heads_};
  }
  // One code path for forward and forward_save (which keeps nothing more).
  tensor run(inputs x, backend& b) {
    expect_inputs(x, {}, 2, true);
    const tensor &q = *x[0], &k = *x[1];
    const detail::head_layout s = layout(q, k);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_width));
    const index t = sequence_, d = s.head_width;
    tensor y = tensor::uninitialized(b, s.score_rows(), t);
    tensor::map all = y.mat();
    for (index n = 0; n < s.batch; ++n)
      for (index h = 0; h < heads_; ++h) {
        auto out = all.middleRows(s.score_row(n, h), t);
        out.noalias() = scale * (q.mat().block(s.token_row(n), s.column(h), t, d) *
                                 k.mat().block(s.token_row(n), s.column(h), t, d).transpose());
        if (causal_)
          for (index i = 0; i < t; ++i)
            for (index j = i + 1; j < t; ++j) out(i, j) = -std::numeric_limits<float>::infinity();
      }
    return y;
  }

  index heads_, sequence_;
  bool causal_;
};

/// Row-wise softmax: y(r, c) = exp(x(r, c) - m_r) / sum_c' exp(x(r, c') - m_r), m_r the row's
/// largest entry (-inf entries, as scores' causal mask, give 0; a row needs one finite entry).
/// Saves nothing; its backward reads y:
///   dx(r, c) = y(r, c) (dy(r, c) - sum_c' dy(r, c') y(r, c')),
/// written straight into the input gradient: created, or added to element by element (no
/// temporary), by the same operations.
class softmax final : public layer {
 public:
  explicit softmax(std::string name = "softmax") : layer(std::move(name)) {}
  /// In a DAG: its backward reads y.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {false, true};
  }

 protected:
  tensor do_forward(const tensor& x, backend& b) override {
    tensor y = tensor::uninitialized(b, x.rows(), x.cols());
    const auto in = x.mat();
    auto out = y.mat();
    for (index r = 0; r < x.rows(); ++r) {
      float m = -std::numeric_limits<float>::infinity();
      for (index c = 0; c < x.cols(); ++c) m = std::max(m, in(r, c));
      float sum = 0.0f;
      for (index c = 0; c < x.cols(); ++c) sum += out(r, c) = std::exp(in(r, c) - m);
      for (index c = 0; c < x.cols(); ++c) out(r, c) /= sum;
    }
    return y;
  }
  tensor do_forward_save(const tensor& x, context&, backend& b) override {
    return do_forward(x, b);
  }
  tensor do_backward(const tensor&, const tensor& y, const context&, const tensor& dy,
                     backend& b) override {
    std::optional<tensor> dx;
    backward_into(y, dy, dx, b);
    return std::move(*dx);
  }
  void do_backward_n(inputs x, const tensor* y, const context&, const tensor* dy,
                     input_gradients dx, backend& b) override {
    if (x.size() != 1 || dx.size() != 1)
      throw std::invalid_argument(where() + "takes one input, got " + std::to_string(x.size()));
    if (dy == nullptr) throw std::logic_error(where() + "is not a loss: its backward needs dy");
    if (y == nullptr) throw std::invalid_argument(where() + "its backward reads y");
    backward_into(*y, *dy, dx[0], b);
  }

 private:
  void backward_into(const tensor& y, const tensor& dy, std::optional<tensor>& dx,
                     backend& b) const {
    const bool create = !dx;
    if (create)
      dx = tensor::uninitialized(b, y.rows(), y.cols());
    else if (dx->rows() != y.rows() || dx->cols() != y.cols())
      throw std::invalid_argument(where() + "the input gradient is " + shape(*dx) + ", y is " +
                                  shape(y));
    const auto p = y.mat(), g = dy.mat();
    auto out = dx->mat();
    for (index r = 0; r < y.rows(); ++r) {
      float dot = 0.0f;
      for (index c = 0; c < y.cols(); ++c) dot += g(r, c) * p(r, c);
      for (index c = 0; c < y.cols(); ++c) {
        const float contribution = p(r, c) * (g(r, c) - dot);
        if (create)
          out(r, c) = contribution;
        else
          out(r, c) += contribution;
      }
    }
  }
};

/// The attention-weighted values of every sequence and head, the heads concatenated back along
/// the columns (the op after scores, softmax and dropout; named so because eg::context is the
/// saved tensors). Inputs P ((batch * heads * sequence) x sequence, scores' layout) and v
/// ((batch * sequence) x width), in this order; output (batch * sequence) x width whose block of
/// sequence n and head h is
///   y_nh = P_nh v_nh.
/// Saves nothing; its backward reads P and v:
///   dP_nh = dy_nh v_nh^T,   dv_nh = P_nh^T dy_nh,
/// each input's gradient computed whole, then handed to accumulate().
class attention_context final : public multi_input_layer {
 public:
  explicit attention_context(index heads, std::string name = "context")
      : multi_input_layer(std::move(name)), heads_(heads) {
    if (heads <= 0) throw std::invalid_argument(where() + "needs heads > 0");
  }
  [[nodiscard]] index heads() const noexcept { return heads_; }
  /// In a DAG: its backward reads P and v.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {true, false};
  }

 protected:
  tensor do_forward_n(inputs x, backend& b) override { return run(x, b); }
  tensor do_forward_save_n(inputs x, context&, backend& b) override { return run(x, b); }
  void do_backward_n(inputs x, const tensor*, const context&, const tensor* dy, input_gradients dx,
                     backend& b) override {
    expect_inputs(x, dx, 2, true);
    if (dy == nullptr) throw std::logic_error(where() + "is not a loss: its backward needs dy");
    const tensor &p = *x[0], &v = *x[1];
    const detail::head_layout s = layout(p, v);
    if (dy->rows() != v.rows() || dy->cols() != v.cols())
      throw std::invalid_argument(where() + "dy is " + shape(*dy) + ", y is " + shape(v));
    const index t = s.sequence, d = s.head_width;
    tensor dp = tensor::uninitialized(b, p.rows(), p.cols());
    for (index n = 0; n < s.batch; ++n)
      for (index h = 0; h < heads_; ++h)
        dp.mat().middleRows(s.score_row(n, h), t).noalias() =
            dy->mat().block(s.token_row(n), s.column(h), t, d) *
            v.mat().block(s.token_row(n), s.column(h), t, d).transpose();
    accumulate(dx[0], std::move(dp));
    tensor dv = tensor::uninitialized(b, v.rows(), v.cols());
    for (index n = 0; n < s.batch; ++n)
      for (index h = 0; h < heads_; ++h)
        dv.mat().block(s.token_row(n), s.column(h), t, d).noalias() =
            p.mat().middleRows(s.score_row(n, h), t).transpose() *
            dy->mat().block(s.token_row(n), s.column(h), t, d);
    accumulate(dx[1], std::move(dv));
  }

 private:
  [[nodiscard]] detail::head_layout layout(const tensor& p, const tensor& v) const {
    const index t = p.cols();
    if (t <= 0 || v.rows() % t != 0 || v.cols() % heads_ != 0 || p.rows() != v.rows() * heads_)
      throw std::invalid_argument(
          where() + "P " + shape(p) + " and v " + shape(v) +
          " do not fit: P must be (batch * heads * sequence) x sequence, v " +
          "(batch * sequence) x width, with " + std::to_string(heads_) + " heads");
    return {v.rows() / t, heads_, t, v.cols() / heads_};
  }
  // One code path for forward and forward_save (which keeps nothing more).
  tensor run(inputs x, backend& b) {
    expect_inputs(x, {}, 2, true);
    const tensor &p = *x[0], &v = *x[1];
    const detail::head_layout s = layout(p, v);
    const index t = s.sequence, d = s.head_width;
    tensor y = tensor::uninitialized(b, v.rows(), v.cols());
    for (index n = 0; n < s.batch; ++n)
      for (index h = 0; h < heads_; ++h)
        y.mat().block(s.token_row(n), s.column(h), t, d).noalias() =
            p.mat().middleRows(s.score_row(n, h), t) *
            v.mat().block(s.token_row(n), s.column(h), t, d);
    return y;
  }

  index heads_;
};

// --- loss ----------------------------------------------------------------------------------------

/// Mean squared error L = sum((x - t)^2) / (batch * features) against the batch's targets t
/// (batch x features), when the run passes them (executor::run(schedule, input, targets)), else
/// against a fixed synthetic target (uniform in [-1, 1) from the seed). The output is a 1 x 1
/// tensor; last_value() is the loss of the latest forward. Saves nothing (its backward needs x).
class mse_loss final : public layer {
 public:
  /// In a DAG: its backward reads x.
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {true, false};
  }
  mse_loss(index batch, index features, std::uint64_t seed, std::string name = "mse_loss")
      : layer(std::move(name)), target_(batch, features) {
    fill_synthetic(target_, derive_seed(seed, 0));
  }
  [[nodiscard]] bool is_loss() const noexcept override { return true; }
  [[nodiscard]] float last_value() const noexcept { return last_; }
  /// The fixed target, used when the run passes no targets.
  [[nodiscard]] const matrix& target() const noexcept { return target_; }

 protected:
  tensor do_forward(const tensor& x, backend& b) override {
    return do_forward_targets(x, target_, b);
  }
  tensor do_forward_save(const tensor& x, context&, backend& b) override {
    return do_forward_targets(x, target_, b);
  }
  tensor do_loss_backward(const tensor& x, const tensor& y, const context& ctx,
                          backend& b) override {
    return do_loss_backward_targets(x, y, ctx, target_, b);
  }
  tensor do_forward_targets(const tensor& x, const matrix& t, backend& b) override {
    if (x.rows() != t.rows() || x.cols() != t.cols())
      throw std::invalid_argument(where() + "expects " + std::to_string(t.rows()) + " x " +
                                  std::to_string(t.cols()) + " (the targets' shape), got " +
                                  shape(x));
    tensor y = tensor::uninitialized(b, 1, 1);
    last_ = (x.mat() - t).squaredNorm() / static_cast<float>(t.size());
    y.mat()(0, 0) = last_;
    return y;
  }
  tensor do_loss_backward_targets(const tensor& x, const tensor&, const context&, const matrix& t,
                                  backend& b) override {
    const float s = 2.0f / static_cast<float>(t.size());
    return tensor::from(b, s * (x.mat() - t));
  }

 private:
  matrix target_;
  float last_ = std::numeric_limits<float>::quiet_NaN();
};

}  // namespace eg
