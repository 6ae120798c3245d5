#pragma once
// The arithmetic of the GPT example's kernels (kernels.cu), as functions that compile both for
// the device (nvcc: __host__ __device__) and for the host (any C++ compiler: plain inline), so
// that the host tests check the very code the kernels run against reference formulas and finite
// differences (tests/examples/test_cuda_math.cpp). This header needs no CUDA header.
//
// Row operations (softmax, layer norm, cross-entropy) are split the way a kernel runs them:
// `lanes` workers share a row, worker `lane` visits elements lane, lane + lanes, ... and
// returns a partial result (the *_partial functions); the partials are then combined by a tree
// in a fixed order (tree_reduce here, the same tree in shared memory on the device), and each
// worker writes its elements (the *_write functions). Nothing depends on timing or atomics, so
// a row gives the same bits on every run; the *_row functions compose the phases on the host
// exactly as a block of `lanes` threads does.

#include <math.h>  // expf, logf, sqrtf, tanhf: the same names on the host and on the device

#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(__CUDACC__)
#define REMAT_GPT_HD __host__ __device__ inline
#else
#define REMAT_GPT_HD inline
#endif

namespace gpt::math {

// --- GELU (tanh approximation, Hendrycks & Gimpel 2016, as GPT-2) --------------------------------

inline constexpr float gelu_k = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float gelu_c = 0.044715f;

/// 0.5 v (1 + tanh(k (v + c v^3)))
REMAT_GPT_HD float gelu(float v) {
  return 0.5f * v * (1.0f + tanhf(gelu_k * (v + gelu_c * v * v * v)));
}
/// d gelu / dv
REMAT_GPT_HD float gelu_grad(float v) {
  const float t = tanhf(gelu_k * (v + gelu_c * v * v * v));
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * gelu_k * (1.0f + 3.0f * gelu_c * v * v);
}

// --- the fixed-order combination of partials ---------------------------------------------------

/// Combines v[0..n) into v[0] by the tree a block uses in shared memory: at each level, element i
/// takes in element i + s (s = n/2, n/4, ..., 1). n must be a power of two.
template <class Op>
REMAT_GPT_HD void tree_reduce(float* v, int n, Op op) {
  for (int s = n / 2; s > 0; s /= 2)
    for (int i = 0; i < s; ++i) v[i] = op(v[i], v[i + s]);
}
struct plus {
  REMAT_GPT_HD float operator()(float a, float b) const { return a + b; }
};
struct maximum {
  REMAT_GPT_HD float operator()(float a, float b) const { return a < b ? b : a; }
};

// --- partials shared by the row operations
// ----------------------------------------------------------

/// max over x[j], j < n, j = lane (mod lanes); -inf when the lane has no element.
REMAT_GPT_HD float max_partial(const float* x, int n, int lane, int lanes) {
  float m = -INFINITY;
  for (int j = lane; j < n; j += lanes) m = x[j] < m ? m : x[j];
  return m;
}
/// sum over x[j], j < n, j = lane (mod lanes).
REMAT_GPT_HD float sum_partial(const float* x, int n, int lane, int lanes) {
  float s = 0.0f;
  for (int j = lane; j < n; j += lanes) s += x[j];
  return s;
}
/// sum of exp(x[j] - m), j < n, j = lane (mod lanes).
REMAT_GPT_HD float exp_sum_partial(const float* x, int n, float m, int lane, int lanes) {
  float s = 0.0f;
  for (int j = lane; j < n; j += lanes) s += expf(x[j] - m);
  return s;
}

// --- causal softmax
// --------------------------------------------------------------------------------- Row t of an
// attention matrix has n = T scores, of which the first `valid` = t + 1 are live (a query sees
// itself and the past); the others get probability 0.

/// p[j] = exp(s[j] - m) / sum for j < valid, 0 beyond; p may be s (in place).
REMAT_GPT_HD void softmax_write(const float* s, float* p, int n, int valid, float m, float sum,
                                int lane, int lanes) {
  const float inv = 1.0f / sum;
  for (int j = lane; j < n; j += lanes) p[j] = j < valid ? expf(s[j] - m) * inv : 0.0f;
}
/// sum of p[j] dp[j], j < valid: the row's <p, dp> of the softmax backward.
REMAT_GPT_HD float dot_partial(const float* p, const float* dp, int n, int lane, int lanes) {
  float s = 0.0f;
  for (int j = lane; j < n; j += lanes) s += p[j] * dp[j];
  return s;
}
/// ds[j] = p[j] (dp[j] - dot) for j < valid, 0 beyond (d softmax / d s contracted with dp);
/// ds may be dp (in place).
REMAT_GPT_HD void softmax_backward_write(const float* p, const float* dp, float* ds, int n,
                                         int valid, float dot, int lane, int lanes) {
  for (int j = lane; j < n; j += lanes) ds[j] = j < valid ? p[j] * (dp[j] - dot) : 0.0f;
}

// --- layer norm
// --------------------------------------------------------------------------------------- u = (x -
// mean) rstd * g + b with mean and var over the row (two passes: the centred sum of squares is more
// accurate than E[x^2] - mean^2), rstd = 1 / sqrt(var + eps).

/// sum of (x[j] - mean)^2, j = lane (mod lanes).
REMAT_GPT_HD float centered_square_partial(const float* x, int n, float mean, int lane, int lanes) {
  float s = 0.0f;
  for (int j = lane; j < n; j += lanes) {
    const float d = x[j] - mean;
    s += d * d;
  }
  return s;
}
REMAT_GPT_HD float layer_norm_rstd(float centered_square_sum, int n, float eps) {
  return 1.0f / sqrtf(centered_square_sum / static_cast<float>(n) + eps);
}
REMAT_GPT_HD void layer_norm_write(const float* x, const float* g, const float* b, float* u, int n,
                                   float mean, float rstd, int lane, int lanes) {
  for (int j = lane; j < n; j += lanes) u[j] = (x[j] - mean) * rstd * g[j] + b[j];
}

/// The two row sums of the layer norm backward, with xhat = (x - mean) rstd and dxhat = du g.
struct sum_pair {
  float dxhat = 0.0f;       ///< sum of dxhat
  float dxhat_xhat = 0.0f;  ///< sum of dxhat * xhat
};
REMAT_GPT_HD sum_pair layer_norm_backward_partial(const float* x, const float* du, const float* g,
                                                  int n, float mean, float rstd, int lane,
                                                  int lanes) {
  sum_pair s;
  for (int j = lane; j < n; j += lanes) {
    const float dxhat = du[j] * g[j];
    s.dxhat += dxhat;
    s.dxhat_xhat += dxhat * (x[j] - mean) * rstd;
  }
  return s;
}
/// dx[j] = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) (+ residual[j] when given: the
/// gradient that flows around the layer norm in a residual block). dx may be du or residual.
REMAT_GPT_HD void layer_norm_backward_write(const float* x, const float* du, const float* g,
                                            const float* residual, float* dx, int n, float mean,
                                            float rstd, sum_pair sums, int lane, int lanes) {
  const float inv_n = 1.0f / static_cast<float>(n);
  const float a = sums.dxhat * inv_n, c = sums.dxhat_xhat * inv_n;
  for (int j = lane; j < n; j += lanes) {
    const float xhat = (x[j] - mean) * rstd;
    const float v = rstd * (du[j] * g[j] - a - xhat * c);
    dx[j] = residual != nullptr ? residual[j] + v : v;
  }
}

// --- cross-entropy
// ----------------------------------------------------------------------------------- loss = lse -
// logits[target] with lse = log sum exp(logits) (computed as m + log sum exp(l - m), m the row's
// max, so that nothing overflows).

REMAT_GPT_HD float log_sum_exp(float m, float exp_sum) { return m + logf(exp_sum); }
REMAT_GPT_HD float cross_entropy(const float* logits, int target, float lse) {
  return lse - logits[target];
}
/// d[j] = (softmax(logits)[j] - [j == target]) * scale (scale = 1 / rows for a mean loss); d may
/// be logits (in place).
REMAT_GPT_HD void cross_entropy_backward_write(const float* logits, float* d, int n, int target,
                                               float lse, float scale, int lane, int lanes) {
  for (int j = lane; j < n; j += lanes)
    d[j] = (expf(logits[j] - lse) - (j == target ? 1.0f : 0.0f)) * scale;
}

// --- column reductions (parameter gradients)
// --------------------------------------------------------

/// sum over rows r = lane (mod lanes) of m[r][col] (row-major, `cols` columns).
REMAT_GPT_HD float column_sum_partial(const float* m, int rows, int cols, int col, int lane,
                                      int lanes) {
  float s = 0.0f;
  for (int r = lane; r < rows; r += lanes) s += m[static_cast<std::int64_t>(r) * cols + col];
  return s;
}
/// The layer norm gain's gradient: sum over rows of du[r][col] xhat[r][col].
REMAT_GPT_HD float layer_norm_gain_partial(const float* x, const float* du, const float* mean,
                                           const float* rstd, int rows, int cols, int col, int lane,
                                           int lanes) {
  float s = 0.0f;
  for (int r = lane; r < rows; r += lanes) {
    const std::int64_t k = static_cast<std::int64_t>(r) * cols + col;
    s += du[k] * (x[k] - mean[r]) * rstd[r];
  }
  return s;
}

/// The token embedding's gradient for one column: dw[tokens[i]][col] += dy[i][col] for i in
/// order. A token may repeat, so this runs in one thread per column rather than with atomics.
REMAT_GPT_HD void embedding_backward_column(const std::int32_t* tokens, const float* dy, float* dw,
                                            int n, int width, int col) {
  for (int i = 0; i < n; ++i)
    dw[static_cast<std::int64_t>(tokens[i]) * width + col] +=
        dy[static_cast<std::int64_t>(i) * width + col];
}

// --- whole rows on the host, phase by phase as a block of `lanes` threads runs them
// -----------------

namespace detail {
inline constexpr int max_lanes = 1024;
}

/// Combines the partials of all lanes, in the block's order. lanes: a power of two, at most
/// 1024 (a block's largest size).
template <class Partial, class Op>
inline float combine(int lanes, Partial partial, Op op) {
  if (lanes < 1 || lanes > detail::max_lanes || (lanes & (lanes - 1)) != 0)
    throw std::invalid_argument("gpt::math: lanes must be a power of two in [1, 1024], got " +
                                std::to_string(lanes));
  float v[detail::max_lanes]{};
  for (int l = 0; l < lanes; ++l) v[l] = partial(l);
  tree_reduce(v, lanes, op);
  return v[0];
}

/// The causal softmax of a row, as the kernel computes it with `lanes` threads (a power of two).
inline void softmax_row(const float* s, float* p, int n, int valid, int lanes) {
  const float m = combine(
      lanes, [&](int l) { return max_partial(s, valid, l, lanes); }, maximum{});
  const float sum = combine(
      lanes, [&](int l) { return exp_sum_partial(s, valid, m, l, lanes); }, plus{});
  for (int l = 0; l < lanes; ++l) softmax_write(s, p, n, valid, m, sum, l, lanes);
}
inline void softmax_backward_row(const float* p, const float* dp, float* ds, int n, int valid,
                                 int lanes) {
  const float dot = combine(
      lanes, [&](int l) { return dot_partial(p, dp, valid, l, lanes); }, plus{});
  for (int l = 0; l < lanes; ++l) softmax_backward_write(p, dp, ds, n, valid, dot, l, lanes);
}
/// Layer norm of a row; returns mean and rstd (what the forward saves for the backward).
struct row_stats {
  float mean = 0.0f, rstd = 0.0f;
};
inline row_stats layer_norm_row(const float* x, const float* g, const float* b, float* u, int n,
                                float eps, int lanes) {
  const float mean = combine(
                         lanes, [&](int l) { return sum_partial(x, n, l, lanes); }, plus{}) /
                     static_cast<float>(n);
  const float var = combine(
      lanes, [&](int l) { return centered_square_partial(x, n, mean, l, lanes); }, plus{});
  const float rstd = layer_norm_rstd(var, n, eps);
  for (int l = 0; l < lanes; ++l) layer_norm_write(x, g, b, u, n, mean, rstd, l, lanes);
  return {mean, rstd};
}
inline void layer_norm_backward_row(const float* x, const float* du, const float* g,
                                    const float* residual, float* dx, int n, row_stats st,
                                    int lanes) {
  sum_pair s;
  s.dxhat = combine(
      lanes,
      [&](int l) {
        return layer_norm_backward_partial(x, du, g, n, st.mean, st.rstd, l, lanes).dxhat;
      },
      plus{});
  s.dxhat_xhat = combine(
      lanes,
      [&](int l) {
        return layer_norm_backward_partial(x, du, g, n, st.mean, st.rstd, l, lanes).dxhat_xhat;
      },
      plus{});
  for (int l = 0; l < lanes; ++l)
    layer_norm_backward_write(x, du, g, residual, dx, n, st.mean, st.rstd, s, l, lanes);
}
/// Cross-entropy of a row of logits against `target`; returns the loss and stores lse.
inline float cross_entropy_row(const float* logits, int n, int target, float* lse, int lanes) {
  const float m = combine(
      lanes, [&](int l) { return max_partial(logits, n, l, lanes); }, maximum{});
  const float sum = combine(
      lanes, [&](int l) { return exp_sum_partial(logits, n, m, l, lanes); }, plus{});
  *lse = log_sum_exp(m, sum);
  return cross_entropy(logits, target, *lse);
}

}  // namespace gpt::math
