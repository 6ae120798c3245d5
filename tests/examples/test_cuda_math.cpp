// The arithmetic of the CUDA example's kernels (examples/cuda/gpt_math.hpp), checked on the host:
// each forward against a double-precision reference written from the formula, each backward
// against central finite differences of that reference, and each row operation for several
// numbers of lanes (the threads of a block on the device), so the split into partials and the
// fixed-order tree are covered too. The header is plain C++ without nvcc.

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include <cuda/gpt_math.hpp>
#include <doctest/doctest.h>

namespace {

namespace m = gpt::math;

/// Values in [-scale, scale) from a small LCG (deterministic, no <random> distribution).
std::vector<float> values(int n, std::uint32_t seed, float scale = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint32_t s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f);
  }
  return v;
}

/// d f / d x_i by central differences, in double.
std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                     std::vector<double> x, double h = 1e-5) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    x[i] = xi + h;
    const double up = f(x);
    x[i] = xi - h;
    const double down = f(x);
    x[i] = xi;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double gelu_ref(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

std::vector<double> softmax_ref(const std::vector<double>& s, int valid) {
  std::vector<double> p(s.size(), 0.0);
  double mx = -INFINITY, sum = 0;
  for (int j = 0; j < valid; ++j) mx = std::max(mx, s[static_cast<std::size_t>(j)]);
  for (int j = 0; j < valid; ++j) sum += std::exp(s[static_cast<std::size_t>(j)] - mx);
  for (int j = 0; j < valid; ++j)
    p[static_cast<std::size_t>(j)] = std::exp(s[static_cast<std::size_t>(j)] - mx) / sum;
  return p;
}

std::vector<double> layer_norm_ref(const std::vector<double>& x, const std::vector<float>& g,
                                   const std::vector<float>& b, double eps) {
  const auto n = static_cast<double>(x.size());
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= n;
  for (double v : x) var += (v - mean) * (v - mean);
  var /= n;
  std::vector<double> u(x.size());
  for (std::size_t j = 0; j < x.size(); ++j)
    u[j] = (x[j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
  return u;
}

double cross_entropy_ref(const std::vector<double>& l, int target) {
  double mx = -INFINITY, sum = 0;
  for (double v : l) mx = std::max(mx, v);
  for (double v : l) sum += std::exp(v - mx);
  return mx + std::log(sum) - l[static_cast<std::size_t>(target)];
}

const int lane_counts[] = {1, 4, 32};

}  // namespace

TEST_CASE("examples.cuda_math.gelu_matches_the_formula_and_its_derivative") {
  for (float v : values(200, 1, 6.0f)) {
    CHECK(m::gelu(v) == doctest::Approx(gelu_ref(v)).epsilon(1e-6).scale(1.0));
    const double h = 1e-5;
    const double d = (gelu_ref(v + h) - gelu_ref(v - h)) / (2 * h);
    CHECK(m::gelu_grad(v) == doctest::Approx(d).epsilon(1e-5).scale(1.0));
  }
  CHECK(m::gelu(0.0f) == 0.0f);
  CHECK(m::gelu_grad(0.0f) == 0.5f);
  CHECK(m::gelu(10.0f) == doctest::Approx(10.0f));  // identity far right
  CHECK(m::gelu(-10.0f) == doctest::Approx(0.0f));  // zero far left
}

TEST_CASE("examples.cuda_math.tree_reduce_follows_the_block_order") {
  // The device's shared-memory tree: level s = 4, 2, 1, element i takes in i + s. Float addition
  // is not associative, so the order is what makes a reduction repeatable: check it exactly.
  float v[8] = {1e8f, 1.0f, -1e8f, 3.0f, 0.5f, -1.0f, 7.0f, 0.25f};
  const float expected = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
  m::tree_reduce(v, 8, m::plus{});
  CHECK(v[0] == expected);
  float w[4] = {-2.0f, 5.0f, -INFINITY, 1.0f};
  m::tree_reduce(w, 4, m::maximum{});
  CHECK(w[0] == 5.0f);
}

TEST_CASE("examples.cuda_math.causal_softmax_row") {
  const int n = 37;
  const auto s = values(n, 2, 4.0f);
  for (int lanes : lane_counts)
    for (int valid : {1, 2, 17, n}) {
      CAPTURE(lanes);
      CAPTURE(valid);
      std::vector<float> p(static_cast<std::size_t>(n), -1.0f);
      m::softmax_row(s.data(), p.data(), n, valid, lanes);
      const auto ref = softmax_ref(widen(s), valid);
      double total = 0;
      for (int j = 0; j < n; ++j) {
        const auto k = static_cast<std::size_t>(j);
        if (j >= valid) {
          CHECK(p[k] == 0.0f);  // the future is masked exactly
        } else {
          CHECK(p[k] == doctest::Approx(ref[k]).epsilon(1e-5));
        }
        total += p[k];
      }
      CHECK(total == doctest::Approx(1.0).epsilon(1e-5));
      // In place (the kernel overwrites the scores) gives the same bits.
      auto q = s;
      m::softmax_row(q.data(), q.data(), n, valid, lanes);
      CHECK(q == p);
    }
}

TEST_CASE("examples.cuda_math.causal_softmax_backward_is_the_gradient") {
  const int n = 23, valid = 15;
  const auto s = values(n, 3, 3.0f);
  const auto w = values(n, 4);  // dp: f(s) = sum_j w_j softmax(s)_j
  auto f = [&](const std::vector<double>& sv) {
    const auto p = softmax_ref(sv, valid);
    double v = 0;
    for (std::size_t j = 0; j < p.size(); ++j) v += w[j] * p[j];
    return v;
  };
  const auto expected = numeric_gradient(f, widen(s));
  for (int lanes : lane_counts) {
    CAPTURE(lanes);
    std::vector<float> p(static_cast<std::size_t>(n)), ds(static_cast<std::size_t>(n));
    m::softmax_row(s.data(), p.data(), n, valid, lanes);
    m::softmax_backward_row(p.data(), w.data(), ds.data(), n, valid, lanes);
    for (int j = 0; j < n; ++j) {
      const auto k = static_cast<std::size_t>(j);
      CHECK(ds[k] == doctest::Approx(expected[k]).epsilon(1e-4).scale(1e-2));
      if (j >= valid) CHECK(ds[k] == 0.0f);
    }
  }
}

TEST_CASE("examples.cuda_math.layer_norm_row_forward_and_backward") {
  const int n = 48;
  const float eps = 1e-5f;
  const auto x = values(n, 5, 2.0f);
  const auto g = values(n, 6);
  const auto b = values(n, 7);
  const auto w = values(n, 8);         // du: f(x) = sum_j w_j u_j(x)
  const auto residual = values(n, 9);  // added to dx as the residual branch's gradient
  const auto ref = layer_norm_ref(widen(x), g, b, eps);
  auto f = [&](const std::vector<double>& xv) {
    const auto u = layer_norm_ref(xv, g, b, eps);
    double v = 0;
    for (std::size_t j = 0; j < u.size(); ++j) v += w[j] * u[j];
    return v;
  };
  const auto expected = numeric_gradient(f, widen(x));
  for (int lanes : lane_counts) {
    CAPTURE(lanes);
    std::vector<float> u(static_cast<std::size_t>(n)), dx(static_cast<std::size_t>(n)),
        dx_res(static_cast<std::size_t>(n));
    const m::row_stats st =
        m::layer_norm_row(x.data(), g.data(), b.data(), u.data(), n, eps, lanes);
    for (std::size_t j = 0; j < u.size(); ++j)
      CHECK(u[j] == doctest::Approx(ref[j]).epsilon(1e-5).scale(1e-3));
    m::layer_norm_backward_row(x.data(), w.data(), g.data(), nullptr, dx.data(), n, st, lanes);
    m::layer_norm_backward_row(x.data(), w.data(), g.data(), residual.data(), dx_res.data(), n, st,
                               lanes);
    for (std::size_t j = 0; j < dx.size(); ++j) {
      CHECK(dx[j] == doctest::Approx(expected[j]).epsilon(1e-4).scale(1e-2));
      CHECK(dx_res[j] == doctest::Approx(expected[j] + residual[j]).epsilon(1e-4).scale(1e-2));
    }
  }
}

TEST_CASE("examples.cuda_math.layer_norm_parameter_gradients") {
  const int rows = 5, cols = 7;
  const float eps = 1e-5f;
  const auto x = values(rows * cols, 10, 2.0f);
  const auto du = values(rows * cols, 11);
  const std::vector<float> g(cols, 1.0f), b(cols, 0.0f);
  std::vector<float> u(static_cast<std::size_t>(rows * cols)), mean(rows), rstd(rows);
  for (int r = 0; r < rows; ++r) {
    const auto st = m::layer_norm_row(x.data() + r * cols, g.data(), b.data(), u.data() + r * cols,
                                      cols, eps, 4);
    mean[static_cast<std::size_t>(r)] = st.mean;
    rstd[static_cast<std::size_t>(r)] = st.rstd;
  }
  for (int c = 0; c < cols; ++c)
    for (int lanes : {1, 2, 8}) {
      // With g = 1 and b = 0, u is xhat: d gain = sum_r du xhat, d bias = sum_r du.
      double gain = 0, bias = 0;
      for (int r = 0; r < rows; ++r) {
        const auto k = static_cast<std::size_t>(r * cols + c);
        gain += static_cast<double>(du[k]) * u[k];
        bias += du[k];
      }
      const float got_gain = m::combine(
          lanes,
          [&](int l) {
            return m::layer_norm_gain_partial(x.data(), du.data(), mean.data(), rstd.data(), rows,
                                              cols, c, l, lanes);
          },
          m::plus{});
      const float got_bias = m::combine(
          lanes, [&](int l) { return m::column_sum_partial(du.data(), rows, cols, c, l, lanes); },
          m::plus{});
      CHECK(got_gain == doctest::Approx(gain).epsilon(1e-5).scale(1e-3));
      CHECK(got_bias == doctest::Approx(bias).epsilon(1e-6).scale(1e-3));
    }
}

TEST_CASE("examples.cuda_math.cross_entropy_row_and_its_gradient") {
  const int n = 41, target = 13;
  const auto logits = values(n, 12, 5.0f);
  const double expected_loss = cross_entropy_ref(widen(logits), target);
  const auto expected = numeric_gradient(
      [&](const std::vector<double>& l) { return cross_entropy_ref(l, target); }, widen(logits));
  for (int lanes : lane_counts) {
    CAPTURE(lanes);
    float lse = 0;
    const float loss = m::cross_entropy_row(logits.data(), n, target, &lse, lanes);
    CHECK(loss == doctest::Approx(expected_loss).epsilon(1e-5));
    CHECK(loss > 0.0f);
    const float scale = 0.25f;  // a mean over 4 rows
    std::vector<float> d(static_cast<std::size_t>(n));
    for (int l = 0; l < lanes; ++l)
      m::cross_entropy_backward_write(logits.data(), d.data(), n, target, lse, scale, l, lanes);
    double total = 0;
    for (std::size_t j = 0; j < d.size(); ++j) {
      CHECK(d[j] == doctest::Approx(scale * expected[j]).epsilon(1e-4).scale(1e-3));
      total += d[j];
    }
    CHECK(std::abs(total) < 1e-6);  // softmax sums to 1, the one-hot too
    CHECK(d[static_cast<std::size_t>(target)] < 0.0f);
  }
  // Huge logits do not overflow: lse is taken around the row's max.
  std::vector<float> big(8, 80.0f);
  big[3] = 90.0f;
  float lse = 0;
  const float loss = m::cross_entropy_row(big.data(), 8, 3, &lse, 4);
  CHECK(std::isfinite(loss));
  CHECK(loss == doctest::Approx(std::log1p(7.0 * std::exp(-10.0))).epsilon(1e-3));
}

TEST_CASE("examples.cuda_math.embedding_backward_accumulates_repeated_tokens") {
  const int n = 6, width = 3, vocab = 4;
  const std::int32_t tokens[n] = {2, 0, 2, 3, 2, 0};
  const auto dy = values(n * width, 13);
  std::vector<float> dw(static_cast<std::size_t>(vocab * width), 1.0f);  // accumulates onto 1
  for (int c = 0; c < width; ++c)
    m::embedding_backward_column(tokens, dy.data(), dw.data(), n, width, c);
  for (int v = 0; v < vocab; ++v)
    for (int c = 0; c < width; ++c) {
      float expected = 1.0f;  // the same order as the kernel: i ascending
      for (int i = 0; i < n; ++i)
        if (tokens[i] == v) expected += dy[static_cast<std::size_t>(i * width + c)];
      CHECK(dw[static_cast<std::size_t>(v * width + c)] == expected);
    }
  CHECK(dw[static_cast<std::size_t>(1 * width)] == 1.0f);  // token 1 never appears
}
