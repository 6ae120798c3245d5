#pragma once
// Graph layers for the graph executor's tests (toy_layers.hpp's tensors and contexts): any
// number of inputs, exact control of every allocation (so the measured peak can be compared with
// the graph simulator's byte for byte), input gradients accumulated in place without a temporary
// (as exec/concepts.hpp asks), call counters, optional randomness and misbehaviour.

#include <cmath>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>

#include "toy_layers.hpp"

namespace toy {

/// y[i] = tanh(w * s[i] + noise), s[i] = sum_j x_j[i % n_j] (a `sum` node: y = s, no parameter,
/// and its backward reads nothing). The loss: L = sum_j sum_m tanh(w x_j[m])^2 / 2, 1 float.
/// Forward temporaries of `tmp_f` floats, backward of `tmp_b`; forward_save keeps `extra` floats.
struct node {
  int n_out = 4;
  int extra = 0;
  int tmp_f = 0;
  int tmp_b = 0;
  float w = 0.5f;
  float gw = 0.0f;
  bool noisy = false;
  bool sum = false;
  bool is_loss = false;
  std::mt19937 rng{7};
  std::string label = "node";
  // Counters and misbehaviour.
  int forward_calls = 0, backward_calls = 0;
  int throw_at_forward = -1;  ///< throw on that forward call (0-based), -1 never
  int grow_by = 0;            ///< extra floats in the output (a layer that outgrew its profile)
  bool leave_empty = false;   ///< its backward forgets the first input's gradient

  using context = toy::context;
  using inputs = std::span<const tensor* const>;
  using slots = std::span<std::optional<tensor>>;
  [[nodiscard]] std::string name() const { return label; }
  [[nodiscard]] std::mt19937 random_state() const { return rng; }
  void set_random_state(const std::mt19937& s) { rng = s; }
  void zero_grad() { gw = 0; }
  [[nodiscard]] remat::exec::backward_needs backward_reads() const {
    if (sum) return {false, false};
    return {true, !is_loss};
  }

  [[nodiscard]] static float s_at(inputs x, int i) {
    float s = 0;
    for (const tensor* t : x) s += (*t)[i % t->n];
    return s;
  }
  /// The temporary lives through the whole op (the context too is allocated while it is held),
  /// so the op's peak is exactly what the graph model says: alive + created + overhead.
  tensor compute(inputs x, host_backend& b, context* keep = nullptr) {
    if (forward_calls++ == throw_at_forward) throw std::runtime_error("injected failure");
    auto tmp = b.allocate(remat::bytes{4} * tmp_f);
    if (keep != nullptr) keep->extra = b.allocate(remat::bytes{4} * extra);
    if (is_loss) {
      tensor y = tensor::make(b, 1 + grow_by);
      float l = 0;
      for (const tensor* t : x)
        for (int m = 0; m < t->n; ++m) l += std::tanh(w * (*t)[m]) * std::tanh(w * (*t)[m]) / 2;
      y[0] = l;
      return y;
    }
    tensor y = tensor::make(b, n_out + grow_by);
    std::uniform_real_distribution<float> u(-0.01f, 0.01f);
    for (int i = 0; i < y.n; ++i)
      y[i] = sum ? s_at(x, i) : std::tanh(w * s_at(x, i) + (noisy ? u(rng) : 0.0f));
    return y;
  }
  tensor forward(inputs x, host_backend& b) { return compute(x, b); }
  tensor forward_save(inputs x, context& c, host_backend& b) { return compute(x, b, &c); }

  /// Creates dx[j] with c, or adds c to it element by element: one rounding per element.
  template <class F>
  static void contribute(std::optional<tensor>& dx, int n, host_backend& b, F&& c) {
    const bool fresh = !dx;
    if (fresh) dx = tensor::make(b, n);
    for (int m = 0; m < n; ++m) (*dx)[m] = fresh ? c(m) : (*dx)[m] + c(m);
  }
  void backward(inputs x, const tensor* y, const context&, const tensor& dy, slots dx,
                host_backend& b) {
    if (is_loss) throw std::logic_error("backward with an output gradient on the toy loss");
    ++backward_calls;
    auto tmp = b.allocate(remat::bytes{4} * tmp_b);
    std::vector<float> g(static_cast<std::size_t>(dy.n));  // dL/d(w s + noise), or dL/ds for a sum
    for (int i = 0; i < dy.n; ++i)
      g[static_cast<std::size_t>(i)] = sum ? dy[i] : dy[i] * (1 - (*y)[i] * (*y)[i]);
    if (!sum)
      for (int i = 0; i < dy.n; ++i) gw += g[static_cast<std::size_t>(i)] * s_at(x, i);
    for (std::size_t j = 0; j < dx.size(); ++j) {
      if (leave_empty && j == 0) continue;
      const int n = sum ? width_of(j) : x[j]->n;
      contribute(dx[j], n, b, [&](int m) {
        float c = 0;
        for (int i = m; i < dy.n; i += n) c += g[static_cast<std::size_t>(i)] * (sum ? 1.0f : w);
        return c;
      });
    }
  }
  void backward(inputs x, const tensor*, const context&, slots dx, host_backend& b) {
    if (!is_loss) throw std::logic_error("loss backward on a non-loss toy node");
    ++backward_calls;
    auto tmp = b.allocate(remat::bytes{4} * tmp_b);
    for (std::size_t j = 0; j < dx.size(); ++j) {
      const tensor& t = *x[j];
      for (int m = 0; m < t.n; ++m)
        gw += std::tanh(w * t[m]) * (1 - std::tanh(w * t[m]) * std::tanh(w * t[m])) * t[m];
      contribute(dx[j], t.n, b, [&](int m) {
        const float v = std::tanh(w * t[m]);
        return v * (1 - v * v) * w;
      });
    }
  }

  /// A sum node's backward reads no input, so it is told their widths.
  std::vector<int> widths;
  [[nodiscard]] int width_of(std::size_t j) const {
    if (j >= widths.size()) throw std::logic_error("toy sum node '" + label + "': widths not set");
    return widths[j];
  }
};

}  // namespace toy
