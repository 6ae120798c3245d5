// The training loop of docs/guide/train.md: your own tensor and layers, the batch's targets,
// profile, plan at a budget, train with train_step and an SGD update. The test suite builds and
// runs it (example.train); the checks after main's loop make it fail unless the loss went down,
// every step's gradients were bitwise those of plain training, and the measured peak stayed within
// the budget.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include <remat/exec.hpp>   // the executor, host_backend, the profiler, train_step
#include <remat/remat.hpp>  // the planners

using remat::exec::host_backend;

// A tensor: rows x cols floats in a buffer of the backend, so that the backend counts every byte.
struct tensor {
  host_backend::buffer buf;
  std::size_t rows = 0, cols = 0;

  static tensor zeros(host_backend& b, std::size_t rows, std::size_t cols) {
    tensor t{b.allocate(static_cast<remat::bytes>(sizeof(float) * rows * cols)), rows, cols};
    if (rows * cols > 0) std::memset(t.data(), 0, static_cast<std::size_t>(t.bytes()));
    return t;
  }
  float* data() const { return buf.as<float>(); }
  float& at(std::size_t r, std::size_t c) const { return data()[r * cols + c]; }
  remat::bytes bytes() const { return buf.size(); }  // required: its size in bytes
  float item() const { return data()[0]; }           // optional: the loss value, run_result::loss
};

// What forward_save keeps for the backward: nothing here (the executor keeps x and y alive).
struct no_context {
  remat::bytes bytes() const { return 0; }
};

// y = x W + b, W: in x out.
struct linear {
  std::size_t in, out;
  std::vector<float> w, b, gw, gb;
  using context = no_context;

  linear(std::size_t in_, std::size_t out_, unsigned seed)
      : in(in_), out(out_), w(in_ * out_), b(out_), gw(w.size()), gb(b.size()) {
    for (auto& v : w) {  // uniform in [-sqrt(3/in), sqrt(3/in)) from a small generator
      seed = seed * 1664525u + 1013904223u;
      v = (static_cast<float>(seed >> 8) / 16777216.0f * 2 - 1) *
          std::sqrt(3.0f / static_cast<float>(in));
    }
  }
  tensor forward(const tensor& x, host_backend& be) {
    tensor y = tensor::zeros(be, x.rows, out);
    for (std::size_t r = 0; r < x.rows; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        float s = b[o];
        for (std::size_t i = 0; i < in; ++i) s += x.at(r, i) * w[i * out + o];
        y.at(r, o) = s;
      }
    return y;
  }
  tensor forward_save(const tensor& x, context&, host_backend& be) { return forward(x, be); }
  // Returns dx; accumulates the parameter gradients.
  tensor backward(const tensor& x, const tensor&, const context&, const tensor& dy,
                  host_backend& be) {
    tensor dx = tensor::zeros(be, x.rows, in);
    for (std::size_t r = 0; r < x.rows; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        gb[o] += dy.at(r, o);
        for (std::size_t i = 0; i < in; ++i) {
          gw[i * out + o] += x.at(r, i) * dy.at(r, o);
          dx.at(r, i) += dy.at(r, o) * w[i * out + o];
        }
      }
    return dx;
  }
  void zero_grad() {  // optional: train_step and the profiler call it
    std::fill(gw.begin(), gw.end(), 0.0f);
    std::fill(gb.begin(), gb.end(), 0.0f);
  }
  void sgd(float lr) {  // ours: the optimizer train_step's update calls
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * gw[i];
    for (std::size_t i = 0; i < b.size(); ++i) b[i] -= lr * gb[i];
  }
};

// y = tanh(x); its backward reads y.
struct tanh_layer {
  using context = no_context;
  tensor forward(const tensor& x, host_backend& be) {
    tensor y = tensor::zeros(be, x.rows, x.cols);
    for (std::size_t i = 0; i < x.rows * x.cols; ++i) y.data()[i] = std::tanh(x.data()[i]);
    return y;
  }
  tensor forward_save(const tensor& x, context&, host_backend& be) { return forward(x, be); }
  tensor backward(const tensor& x, const tensor& y, const context&, const tensor& dy,
                  host_backend& be) {
    tensor dx = tensor::zeros(be, x.rows, x.cols);
    for (std::size_t i = 0; i < x.rows * x.cols; ++i)
      dx.data()[i] = dy.data()[i] * (1 - y.data()[i] * y.data()[i]);
    return dx;
  }
};

// The loss, L = mean((x - t)^2) against the batch's targets t: it takes them in all three calls,
// and its backward takes no dy (dL/dL = 1).
using targets = std::vector<float>;
struct mse {
  using context = no_context;
  tensor forward(const tensor& x, const targets& t, host_backend& be) {
    tensor y = tensor::zeros(be, 1, 1);
    float s = 0;
    for (std::size_t i = 0; i < x.rows * x.cols; ++i)
      s += (x.data()[i] - t[i]) * (x.data()[i] - t[i]);
    y.data()[0] = s / static_cast<float>(x.rows * x.cols);
    return y;
  }
  tensor forward_save(const tensor& x, const targets& t, context&, host_backend& be) {
    return forward(x, t, be);
  }
  tensor backward(const tensor& x, const tensor&, const context&, const targets& t,
                  host_backend& be) {
    tensor dx = tensor::zeros(be, x.rows, x.cols);
    for (std::size_t i = 0; i < x.rows * x.cols; ++i)
      dx.data()[i] = 2 * (x.data()[i] - t[i]) / static_cast<float>(x.rows * x.cols);
    return dx;
  }
};

constexpr std::size_t batch = 32, width = 64;
// The model: a tuple of layers (a std::vector of std::unique_ptr<your_base> works the same).
using model = std::tuple<linear, tanh_layer, linear, tanh_layer, linear, tanh_layer, linear, mse>;
model make_model() {
  return {linear(width, width, 1), {}, linear(width, width, 2), {},
          linear(width, width, 3), {}, linear(width, width, 4), {}};
}

// Batch `step` of a synthetic regression task: x uniform in [-1, 1), targets 0.5 x.
std::pair<tensor, targets> batch_of(host_backend& be, int step) {
  tensor x = tensor::zeros(be, batch, width);
  targets t(batch * width);
  unsigned s = 12345u + 7919u * static_cast<unsigned>(step);
  for (std::size_t i = 0; i < batch * width; ++i) {
    s = s * 1664525u + 1013904223u;
    x.data()[i] = static_cast<float>(s >> 8) / 16777216.0f * 2 - 1;
    t[i] = 0.5f * x.data()[i];
  }
  return {std::move(x), std::move(t)};
}

// The gradients a model holds now (for the checks below).
std::vector<float> gradients(model& m) {
  std::vector<float> g;
  remat::exec::for_each_layer(m, [&](auto& layer) {
    if constexpr (requires { layer.gw; }) {
      g.insert(g.end(), layer.gw.begin(), layer.gw.end());
      g.insert(g.end(), layer.gb.begin(), layer.gb.end());
    }
  });
  return g;
}

int main() {
  model m = make_model();

  // 1. Profile: each layer's times and bytes, measured on a sample batch (and its targets).
  host_backend profiling;
  auto [sample, sample_targets] = batch_of(profiling, 0);
  auto chain = remat::exec::profile_chain(m, sample, sample_targets, profiling);
  if (!chain) return std::fprintf(stderr, "%s\n", chain.message().c_str()), 1;

  // 2. Plan at a budget: here 60% of what plain training (store-all) needs.
  const remat::bytes full =
      remat::store_all{}.solve(*chain, remat::unlimited_bytes)->predicted_peak;
  const remat::bytes budget = full * 6 / 10;
  auto plan = remat::rotor{}.solve(*chain, budget);
  if (!plan) return std::fprintf(stderr, "%s\n", plan.message().c_str()), 1;

  // 3. Train within the budget: each train_step zeroes the gradients, runs the plan (recomputing
  //    what it did not keep), then calls the update on every layer: here, SGD.
  host_backend backend(budget);  // allocations past the budget fail
  remat::exec::executor ex(m, *chain, backend);
  const float lr = 2.0f;
  // Called with every layer, each with its own type; true: this one was updated (a step that
  // updates no layer is an error, so that an update that matches no layer cannot go unseen).
  auto sgd = [&](auto& layer) {
    if constexpr (requires { layer.sgd(lr); }) {
      layer.sgd(lr);
      return true;
    }
    return false;
  };
  // (checks) the same model trained plainly: store-all, no budget.
  model plain = make_model();
  host_backend plain_backend;
  remat::exec::executor plain_ex(plain, *chain, plain_backend);
  const auto store_all = *remat::store_all{}.solve(*chain, remat::unlimited_bytes);
  std::vector<double> losses;
  bool bitwise = true, within = true, recomputed = false;

  for (int step = 1; step <= 30; ++step) {
    auto [x, t] = batch_of(backend, step);
    auto r = remat::exec::train_step(ex, *plan, std::move(x), t, sgd);
    if (!r) return std::fprintf(stderr, "step %d: %s\n", step, r.message().c_str()), 1;
    std::printf("step %2d  loss %.6f  peak %lld of %lld bytes\n", step, *r->loss,
                static_cast<long long>(r->measured_peak), static_cast<long long>(budget));

    // (checks) the plain step on the same batch: the same loss and gradients, bit for bit.
    auto [px, pt] = batch_of(plain_backend, step);
    auto p = remat::exec::train_step(plain_ex, store_all, std::move(px), pt, sgd);
    if (!p) return std::fprintf(stderr, "plain step %d: %s\n", step, p.message().c_str()), 1;
    bitwise = bitwise && *p->loss == *r->loss && gradients(plain) == gradients(m);
    within = within && r->measured_peak <= budget;
    int forwards = 0;  // per layer, those the plan ran: more than one each means it recomputed
    for (int f : r->forwards) forwards += f;
    recomputed = forwards > static_cast<int>(std::tuple_size_v<model>);
    losses.push_back(*r->loss);
  }
  const bool learned = losses.back() < 0.5 * losses.front();
  std::printf(
      "budget %lld bytes of %lld for plain training (%s); loss %.6f -> %.6f; gradients %s; peak "
      "%s\n",
      static_cast<long long>(budget), static_cast<long long>(full),
      recomputed ? "the plan recomputes" : "NO recomputation", losses.front(), losses.back(),
      bitwise ? "bitwise plain training's" : "DIFFER from plain training's",
      within ? "within the budget" : "OVER the budget");
  return learned && bitwise && within && recomputed ? 0 : 1;
}
