#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/layers.hpp>
#include <eigen/models.hpp>
#include <eigen/tensor.hpp>

#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>

using remat::exec::host_backend;

static_assert(
    remat::exec::check_chain_layer<std::unique_ptr<eg::layer>, eg::tensor, host_backend>());
static_assert(remat::exec::ChainLayer<std::unique_ptr<eg::layer>, eg::tensor, host_backend>);
static_assert(remat::exec::ChainLayer<eg::linear, eg::tensor, host_backend>);
static_assert(remat::exec::ChainLayer<eg::mse_loss*, eg::tensor, host_backend>);
static_assert(remat::exec::HasRandomState<std::unique_ptr<eg::layer>>);
static_assert(remat::exec::Tensor<eg::tensor>);
static_assert(!std::is_copy_constructible_v<eg::tensor>);

namespace {

constexpr eg::index B = 3, D = 4, H = 5;
constexpr remat::bytes F = sizeof(float);

/// Synthetic values kept at least 0.1 away from 0, so that relu's kink is out of reach of the
/// finite differences.
eg::tensor away_from_zero(host_backend& b, eg::index rows, eg::index cols, std::uint64_t seed) {
  eg::tensor x = eg::make_input(b, rows, cols, seed);
  for (eg::index i = 0; i < x.size(); ++i) {
    float& v = x.data()[i];
    v = v < 0.0f ? v - 0.1f : v + 0.1f;
  }
  return x;
}

/// Gives the layer's parameters non-trivial values (layer norm starts at gain 1, bias 0).
void perturb_parameters(eg::layer& l, std::uint64_t seed) {
  std::uint64_t k = 0;
  for (auto& p : l.parameters()) {
    eg::matrix noise(p.value.rows(), p.value.cols());
    eg::fill_synthetic(noise, eg::derive_seed(seed, k++), 0.5f);
    p.value.mat() += noise;
  }
}

/// The scalar the finite differences differentiate: <f(x), dy> for a stage, f(x) for the loss,
/// accumulated in double. Random layers replay the same state every time.
struct objective {
  eg::layer& l;
  const eg::tensor* dy;  // null for the loss
  eg::rng_state state;
  host_backend& b;

  double operator()(const eg::tensor& x) const {
    l.set_random_state(state);
    const eg::tensor y = l.forward(x, b);
    if (dy == nullptr) return static_cast<double>(y.mat()(0, 0));
    double s = 0;
    for (eg::index i = 0; i < y.size(); ++i)
      s += static_cast<double>(y.data()[i]) * static_cast<double>(dy->data()[i]);
    return s;
  }
};

void check_close(double numeric, double analytic, const std::string& what) {
  INFO(what << ": numeric " << numeric << ", analytic " << analytic);
  CHECK(std::abs(numeric - analytic) <=
        2e-3 + 2e-2 * std::max(std::abs(numeric), std::abs(analytic)));
}

/// backward against central differences, for dx and for every parameter entry.
void check_gradients(eg::layer& l, eg::tensor& x, std::uint64_t seed, float h = 5e-3f) {
  host_backend b;
  const eg::rng_state state = l.random_state();
  eg::context ctx;
  const eg::tensor y = l.forward_save(x, ctx, b);
  eg::tensor dy;
  if (!l.is_loss()) dy = eg::make_input(b, y.rows(), y.cols(), seed);
  l.zero_grad();
  const eg::tensor dx = l.is_loss() ? l.backward(x, y, ctx, b) : l.backward(x, y, ctx, dy, b);
  REQUIRE(dx.rows() == x.rows());
  REQUIRE(dx.cols() == x.cols());
  const objective f{l, l.is_loss() ? nullptr : &dy, state, b};

  for (eg::index i = 0; i < x.size(); ++i) {
    float& v = x.data()[i];
    const float v0 = v;
    v = v0 + h;
    const double up = f(x);
    v = v0 - h;
    const double down = f(x);
    v = v0;
    check_close((up - down) / (2.0 * static_cast<double>(h)), dx.data()[i],
                l.name() + " dx[" + std::to_string(i) + "]");
  }
  for (auto& p : l.parameters()) {
    for (eg::index i = 0; i < p.value.size(); ++i) {
      float& v = p.value.data()[i];
      const float v0 = v;
      v = v0 + h;
      const double up = f(x);
      v = v0 - h;
      const double down = f(x);
      v = v0;
      check_close((up - down) / (2.0 * static_cast<double>(h)), p.grad.data()[i],
                  l.name() + " d" + p.name + "[" + std::to_string(i) + "]");
    }
  }
}

/// Every layer of the examples, small, with non-trivial parameters.
std::vector<std::unique_ptr<eg::layer>> all_layers() {
  std::vector<std::unique_ptr<eg::layer>> ls;
  ls.push_back(std::make_unique<eg::linear>(D, H, 11, "linear"));
  ls.push_back(std::make_unique<eg::relu>());
  ls.push_back(std::make_unique<eg::gelu>());
  ls.push_back(std::make_unique<eg::layer_norm>(D));
  ls.push_back(std::make_unique<eg::dropout>(0.5f, 12));
  ls.push_back(std::make_unique<eg::residual_mlp>(D, H, 13));
  ls.push_back(std::make_unique<eg::mse_loss>(B, D, 14));
  std::uint64_t k = 100;
  for (auto& l : ls) perturb_parameters(*l, k++);
  return ls;
}

/// Context bytes each layer claims for a B x D input.
remat::bytes expected_context_bytes(const eg::layer& l) {
  const std::string& n = l.name();
  if (n == "layer_norm") return (B * D + B) * F;
  if (n == "dropout") return B * D * F;
  if (n == "residual_mlp") return (2 * B * D + B + 2 * B * H) * F;
  return 0;
}

}  // namespace

TEST_CASE("eg::tensor: allocated through the backend, sized in bytes, move-only") {
  host_backend b(1000);
  {
    auto t = eg::tensor::zeros(b, 3, 5);
    CHECK(t.rows() == 3);
    CHECK(t.cols() == 5);
    CHECK(t.bytes() == 60);
    CHECK(remat::exec::tensor_traits<eg::tensor>::size(t) == 60);
    CHECK(b.in_use() == 60);
    CHECK(t.mat().isZero());
    eg::fill_synthetic(t, 7);
    CHECK(t.mat().cwiseAbs().maxCoeff() <= 1.0f);
    CHECK(t.mat().cwiseAbs().maxCoeff() > 0.0f);
    auto c = t.clone(b);
    CHECK(b.in_use() == 120);
    CHECK(eg::bitwise_equal(c, t));
    c.mat()(1, 2) += 1.0f;
    CHECK_FALSE(eg::bitwise_equal(c, t));
    auto m = std::move(t);
    CHECK(t.empty());
    CHECK(t.bytes() == 0);
    CHECK(b.in_use() == 120);
    m.release();
    CHECK(b.in_use() == 60);
    auto e = eg::tensor::from(b, eg::matrix::Constant(2, 2, 1.5f));
    CHECK(e.mat()(1, 1) == 1.5f);
    CHECK_THROWS_AS((void)eg::tensor::uninitialized(b, 100, 100), remat::exec::out_of_budget);
    CHECK_THROWS_AS((void)eg::tensor::uninitialized(b, -1, 2), std::invalid_argument);
  }
  CHECK(b.in_use() == 0);
}

TEST_CASE("eg::fill_synthetic depends on the seed only") {
  host_backend b;
  auto x = eg::make_input(b, 4, 6, 42), y = eg::make_input(b, 4, 6, 42),
       z = eg::make_input(b, 4, 6, 43);
  CHECK(eg::bitwise_equal(x, y));
  CHECK_FALSE(eg::bitwise_equal(x, z));
  CHECK(eg::derive_seed(1, 0) != eg::derive_seed(1, 1));
  CHECK(eg::derive_seed(1, 0) != eg::derive_seed(2, 0));
}

TEST_CASE("eg layers: backward matches central finite differences") {
  host_backend b;
  auto ls = all_layers();
  std::uint64_t seed = 1;
  for (auto& l : ls) {
    CAPTURE(l->name());
    eg::tensor x = away_from_zero(b, B, D, seed++);
    check_gradients(*l, x, seed++);
  }
}

TEST_CASE("eg layers: backward accumulates parameter gradients") {
  host_backend b;
  eg::residual_mlp l(D, H, 5);
  perturb_parameters(l, 6);
  const auto x = eg::make_input(b, B, D, 7), dy = eg::make_input(b, B, D, 8);
  eg::context ctx;
  const auto y = l.forward_save(x, ctx, b);
  l.zero_grad();
  (void)l.backward(x, y, ctx, dy, b);
  std::vector<eg::matrix> once;
  for (const auto* g : l.gradients()) once.push_back(g->mat());
  (void)l.backward(x, y, ctx, dy, b);
  const auto twice = l.gradients();
  REQUIRE(twice.size() == 6);
  for (std::size_t k = 0; k < once.size(); ++k) CHECK(twice[k]->mat().isApprox(2.0f * once[k]));
  l.zero_grad();
  for (const auto* g : l.gradients()) CHECK(g->mat().isZero());
}

TEST_CASE("eg layers: forward and forward_save give the same bits") {
  host_backend b;
  auto ls = all_layers();
  const auto x = eg::make_input(b, B, D, 3);
  for (auto& l : ls) {
    CAPTURE(l->name());
    const auto state = l->random_state();
    const auto y = l->forward(x, b);
    l->set_random_state(state);
    eg::context ctx;
    const auto y_saved = l->forward_save(x, ctx, b);
    CHECK(eg::bitwise_equal(y, y_saved));
  }
  // Sizes where Eigen's products leave the coefficient-based path for the blocked GEMM.
  eg::residual_mlp block(64, 256, 1);
  eg::linear fc(64, 128, 2);
  const auto big = eg::make_input(b, 32, 64, 3);
  eg::context c1, c2;
  CHECK(eg::bitwise_equal(block.forward(big, b), block.forward_save(big, c1, b)));
  CHECK(eg::bitwise_equal(fc.forward(big, b), fc.forward_save(big, c2, b)));
}

TEST_CASE("eg layers: every allocation goes through the backend and is returned") {
  host_backend b;
  auto ls = all_layers();
  const auto x = eg::make_input(b, B, D, 4);
  const remat::bytes base = b.in_use();
  for (auto& l : ls) {
    CAPTURE(l->name());
    const remat::bytes out_bytes =
        l->is_loss() ? F : (l->name() == "linear" ? B * H * F : B * D * F);
    {
      b.reset_high_water();
      const auto y = l->forward(x, b);
      CHECK(y.bytes() == out_bytes);
      CHECK(b.in_use() == base + out_bytes);  // forward keeps nothing
      if (l->name() == "residual_mlp")        // its intermediates, freed as soon as used
        CHECK(b.high_water() ==
              base + std::max({2 * B * D + B, B * D + B * H, 2 * B * H, B * H + B * D}) * F);
      else if (l->name() == "layer_norm")  // xhat and 1/std, as forward_save computes them
        CHECK(b.high_water() == base + out_bytes + (B * D + B) * F);
      else  // no temporaries
        CHECK(b.high_water() == base + out_bytes);
    }
    CHECK(b.in_use() == base);
    {
      eg::context ctx;
      const auto y = l->forward_save(x, ctx, b);
      CHECK(ctx.bytes() == expected_context_bytes(*l));
      CHECK(remat::exec::chain_layer_traits<std::unique_ptr<eg::layer>>::context_bytes(ctx) ==
            ctx.bytes());
      CHECK(b.in_use() == base + out_bytes + ctx.bytes());
      const remat::bytes held = b.in_use();
      eg::tensor dy;
      if (!l->is_loss()) dy = eg::make_input(b, y.rows(), y.cols(), 5);
      const remat::bytes with_dy = b.in_use();
      CHECK(with_dy == held + (l->is_loss() ? 0 : out_bytes));
      {
        const auto dx = l->is_loss() ? l->backward(x, y, ctx, b) : l->backward(x, y, ctx, dy, b);
        CHECK(dx.bytes() == x.bytes());
        CHECK(b.in_use() == with_dy + dx.bytes());  // temporaries of the backward are freed
      }
      CHECK(b.in_use() == with_dy);
    }
    CHECK(b.in_use() == base);
  }
}

TEST_CASE("eg::dropout: replaying the random state replays the mask") {
  host_backend b;
  const float p = 0.3f;
  eg::dropout d(p, 99);
  const auto x = eg::tensor::from(b, eg::matrix::Ones(100, 100));
  const auto s0 = d.random_state();
  REQUIRE(s0.has_value());
  const auto y1 = d.forward(x, b);
  const auto y2 = d.forward(x, b);  // the engine moved on: another mask
  CHECK_FALSE(eg::bitwise_equal(y1, y2));
  d.set_random_state(s0);
  const auto y3 = d.forward(x, b);
  CHECK(eg::bitwise_equal(y1, y3));
  d.set_random_state(s0);
  eg::context ctx;
  const auto y4 = d.forward_save(x, ctx, b);
  CHECK(eg::bitwise_equal(y1, y4));
  CHECK(eg::bitwise_equal(ctx.saved.at(0), y1));  // x = 1: y is the scaled mask
  // Kept elements are scaled by 1 / (1 - p); about p of them are dropped.
  const auto kept = (y1.mat().array() != 0.0f).count();
  CHECK(kept > 6700);
  CHECK(kept < 7300);
  CHECK((y1.mat().array() == 0.0f || y1.mat().array() == 1.0f / (1.0f - p)).all());
  // The backward applies the saved mask, whatever the engine did since.
  const auto dy = eg::make_input(b, 100, 100, 1);
  (void)d.forward(x, b);
  const auto dx = d.backward(x, y4, ctx, dy, b);
  CHECK(eg::bitwise_equal(dx, eg::tensor::from(b, dy.mat().cwiseProduct(y1.mat()))));
  // Deterministic layers have no state, and ignore one.
  eg::gelu g;
  CHECK_FALSE(g.random_state().has_value());
  CHECK_THROWS_AS(d.set_random_state(std::nullopt), std::invalid_argument);
  CHECK_THROWS_AS(eg::dropout(1.0f, 1), std::invalid_argument);
}

TEST_CASE("eg layers: misuse is reported with the layer's name") {
  host_backend b;
  eg::linear fc(D, H, 1, "fc1");
  eg::mse_loss loss(B, D, 2);
  const auto x = eg::make_input(b, B, H, 1);  // H features where fc1 expects D
  CHECK_THROWS_WITH_AS((void)fc.forward(x, b), doctest::Contains("'fc1'"), std::invalid_argument);
  CHECK_THROWS_AS((void)loss.forward(x, b), std::invalid_argument);
  eg::context ctx;
  const auto x2 = eg::make_input(b, B, D, 1);
  const auto y = fc.forward_save(x2, ctx, b);
  CHECK_THROWS_AS((void)fc.backward(x2, y, ctx, b), std::logic_error);  // not a loss
  eg::layer_norm ln(D);
  CHECK_THROWS_AS((void)ln.backward(x2, x2, ctx, x2, b), std::logic_error);  // empty context
  CHECK_THROWS_AS((void)fc.backward(x2, y, ctx, x2, b),
                  std::invalid_argument);  // dy is not y's shape
}

TEST_CASE("eg models: plain training is deterministic, frees everything and learns") {
  for (const bool residual : {false, true}) {
    CAPTURE(residual);
    const auto build = [&] {
      return residual ? eg::make_residual_stack(3, 8, 16, 4, 7, 0.1f)
                      : eg::make_mlp(3, 8, 4, 7, 0.1f, eg::activation::relu);
    };
    host_backend b;
    auto m1 = build(), m2 = build();
    CHECK(m1.size() == (residual ? 9u : 10u));
    CHECK(m1.back()->name() == "loss");
    CHECK(eg::flat_parameters(m1) == eg::flat_parameters(m2));
    CHECK(eg::flat_parameters(m1).size() == eg::parameter_count(m1));
    const auto x = eg::make_input(b, 4, 8, 1);
    const remat::bytes base = b.in_use();

    // The same iteration twice, replaying the dropout engines: the same bits.
    const auto states = eg::random_states(m1);
    eg::zero_grad(m1);
    const float l1 = eg::backprop(m1, x, b);
    CHECK(b.in_use() == base);
    const auto g1 = eg::flat_gradients(m1);
    eg::set_random_states(m1, states);
    eg::zero_grad(m1);
    CHECK(eg::backprop(m1, x, b) == l1);
    CHECK(eg::flat_gradients(m1) == g1);
    eg::zero_grad(m2);
    CHECK(eg::backprop(m2, x, b) == l1);
    CHECK(eg::flat_gradients(m2) == g1);
    CHECK(std::any_of(g1.begin(), g1.end(), [](float g) { return g != 0.0f; }));

    // A few steps of SGD lower the loss (the dropout masks change between steps).
    float last = l1;
    for (int step = 0; step < 30; ++step) {
      eg::zero_grad(m1);
      last = eg::backprop(m1, x, b);
      eg::sgd_step(m1, 0.1f);
    }
    CHECK(last < l1);
    CHECK(b.in_use() == base);
  }
}
