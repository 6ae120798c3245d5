#pragma once
// Small layers for the executor's tests, independent of Eigen: float vectors in backend
// buffers, exact control of every allocation (so the measured peak can be compared with the
// simulator's byte for byte), call counters, optional randomness and misbehaviour.

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <remat/exec/host_backend.hpp>

namespace toy {

using remat::exec::host_backend;

struct tensor {
  host_backend::buffer buf;
  int n = 0;
  static tensor make(host_backend& b, int n) { return {b.allocate(remat::bytes{4} * n), n}; }
  [[nodiscard]] float* data() const { return buf.as<float>(); }
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
  /// The buffer holding the data, for offload and prefetch.
  host_backend::buffer& storage() { return buf; }
  float& operator[](int i) const { return data()[i]; }
};

struct context {
  host_backend::buffer extra;
  [[nodiscard]] remat::bytes bytes() const { return extra.size(); }
};

/// y[i] = tanh(w * x[i % n_in] + noise); forward temporaries of `tmp_f` floats, backward of
/// `tmp_b`; forward_save keeps `extra` more floats (so abar = a + extra).
struct stage {
  int n_out = 4;
  int extra = 0;
  int tmp_f = 0;
  int tmp_b = 0;
  float w = 0.5f;
  float gw = 0.0f;
  bool noisy = false;
  bool is_loss = false;  ///< L = sum y^2 / 2 over y = tanh(w x): a 1-float output
  std::mt19937 rng{7};
  std::string label = "toy";
  // Counters and misbehaviour.
  int forward_calls = 0, backward_calls = 0;
  int throw_at_forward = -1;  ///< throw on that forward call (0-based), -1 never
  int grow_by = 0;            ///< extra floats in the output (a layer that outgrew its profile)
  /// Another allocator for the output (not the backend the layer is given): a layer whose
  /// memory the backend never sees.
  host_backend* foreign = nullptr;

  using context = toy::context;
  [[nodiscard]] std::string name() const { return label; }
  [[nodiscard]] std::mt19937 random_state() const { return rng; }
  void set_random_state(const std::mt19937& s) { rng = s; }
  void zero_grad() { gw = 0; }

  /// The temporary lives through the whole op (the context too is allocated while it is held),
  /// so the op's peak is exactly what the chain model says: stored + output + overhead.
  tensor compute(const tensor& x, host_backend& b, context* keep = nullptr) {
    if (forward_calls++ == throw_at_forward) throw std::runtime_error("injected failure");
    auto tmp = b.allocate(remat::bytes{4} * tmp_f);
    if (keep != nullptr) keep->extra = b.allocate(remat::bytes{4} * extra);
    if (is_loss) {
      tensor y = tensor::make(b, 1 + grow_by);
      float s = 0;
      for (int i = 0; i < x.n; ++i) s += std::tanh(w * x[i]) * std::tanh(w * x[i]) / 2;
      y[0] = s;
      return y;
    }
    tensor y = tensor::make(foreign != nullptr ? *foreign : b, n_out + grow_by);
    std::uniform_real_distribution<float> u(-0.01f, 0.01f);
    for (int i = 0; i < y.n; ++i) y[i] = std::tanh(w * x[i % x.n] + (noisy ? u(rng) : 0.0f));
    return y;
  }
  tensor forward(const tensor& x, host_backend& b) { return compute(x, b); }
  tensor forward_save(const tensor& x, context& c, host_backend& b) { return compute(x, b, &c); }
  /// The loss backward: dL/dx_i = t_i (1 - t_i^2) w with t_i = tanh(w x_i).
  tensor backward(const tensor& x, const tensor&, const context&, host_backend& b) {
    if (!is_loss) throw std::logic_error("loss backward on a non-loss toy stage");
    ++backward_calls;
    auto tmp = b.allocate(remat::bytes{4} * tmp_b);
    tensor dx = tensor::make(b, x.n);
    for (int i = 0; i < x.n; ++i) {
      const float t = std::tanh(w * x[i]);
      dx[i] = t * (1 - t * t) * w;
      gw += t * (1 - t * t) * x[i];
    }
    return dx;
  }
  tensor backward(const tensor& x, const tensor& y, const context&, const tensor& dy,
                  host_backend& b) {
    if (is_loss) throw std::logic_error("backward with an output gradient on the toy loss");
    ++backward_calls;
    auto tmp = b.allocate(remat::bytes{4} * tmp_b);
    tensor dx = tensor::make(b, x.n);
    for (int j = 0; j < x.n; ++j) dx[j] = 0;
    for (int i = 0; i < y.n; ++i) {
      const float g = dy[i] * (1 - y[i] * y[i]);
      dx[i % x.n] += g * w;
      gw += g * x[i % x.n];
    }
    return dx;
  }
};

/// A model of n stages, the last a loss; sizes, context and temporaries vary with the seed,
/// and every other stage is noisy when `noisy`.
inline std::vector<stage> make_chain_model(int n, unsigned seed, bool noisy) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> size(1, 40), small(0, 12);
  std::vector<stage> m(static_cast<std::size_t>(n));
  for (int l = 0; l < n; ++l) {
    auto& s = m[static_cast<std::size_t>(l)];
    s.n_out = size(rng);
    s.extra = small(rng);
    s.tmp_f = small(rng);
    s.tmp_b = small(rng);
    s.w = 0.3f + 0.1f * static_cast<float>(l % 5);
    s.noisy = noisy && l % 2 == 1;
    s.rng.seed(seed * 31 + static_cast<unsigned>(l));
    s.label = "t" + std::to_string(l + 1);
  }
  m.back().is_loss = true;
  return m;
}

/// L = sum x^2 / 2; dL/dx = x.
struct loss {
  int forward_calls = 0, backward_calls = 0;
  float last = 0;
  using context = toy::context;
  tensor forward(const tensor& x, host_backend& b) {
    ++forward_calls;
    tensor y = tensor::make(b, 1);
    float s = 0;
    for (int i = 0; i < x.n; ++i) s += x[i] * x[i] / 2;
    y[0] = last = s;
    return y;
  }
  tensor forward_save(const tensor& x, context&, host_backend& b) { return forward(x, b); }
  tensor backward(const tensor& x, const tensor&, const context&, host_backend& b) {
    ++backward_calls;
    tensor dx = tensor::make(b, x.n);
    std::memcpy(dx.data(), x.data(), static_cast<std::size_t>(x.n) * 4);
    return dx;
  }
};

}  // namespace toy
