#pragma once
// The GPT example's own CUDA kernels, declared for host code: each function launches its kernels
// on `stream` and returns at once (errors of the launch throw remat::cuda::cuda_error). They are
// defined in kernels.cu, the one file nvcc compiles; the layers (layers.hpp) are plain C++.
//
// Matrices are row-major floats. Every reduction runs in a fixed order (one thread per output,
// or a block's shared-memory tree; no atomics), so the same inputs give the same bits on every
// run: what lets a rematerialized schedule reproduce store-all's gradients bit for bit. The
// arithmetic is in gpt_math.hpp, tested on the host.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpt::kernels {

/// y[b t][:] = wte[tokens[b t]][:] + wpe[t][:]; tokens in [0, vocab) (the caller checks).
void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* y,
                       int batch, int seq, int width, cudaStream_t stream);
/// dwte[tokens[i]][:] += dy[i][:] (i in order, one thread per column) and
/// dwpe[t][:] += sum over b of dy[b t][:].
void embedding_backward(const std::int32_t* tokens, const float* dy, float* dwte, float* dwpe,
                        int batch, int seq, int width, cudaStream_t stream);

/// u = layer_norm(x) * g + b by rows; mean and rstd (one per row) are written for the backward.
void layer_norm_forward(const float* x, const float* g, const float* b, float* u, float* mean,
                        float* rstd, int rows, int width, float eps, cudaStream_t stream);
/// dx = d layer_norm(x) given du (+ residual when not null); dg += sum_r du xhat, db += sum_r du.
/// dx may be residual.
void layer_norm_backward(const float* x, const float* du, const float* g, const float* mean,
                         const float* rstd, const float* residual, float* dx, float* dg, float* db,
                         int rows, int width, cudaStream_t stream);

/// y[r][c] += bias[c]
void add_bias(float* y, const float* bias, int rows, int cols, cudaStream_t stream);
/// y[r][c] = x[r][c] + bias[c] (a residual block's output before its last product is added)
void residual_bias(float* y, const float* x, const float* bias, int rows, int cols,
                   cudaStream_t stream);
/// db[c] += sum over r of dy[r][c]
void bias_grad(const float* dy, float* db, int rows, int cols, cudaStream_t stream);

/// In place over `rows` rows of `seq` scores: row r is query t = r mod seq, which sees keys
/// 0..t; the others get probability 0.
void causal_softmax(float* s, int rows, int seq, cudaStream_t stream);
/// dp := p (dp - <p, dp>) by rows, in place: the scores' gradient.
void causal_softmax_backward(const float* p, float* dp, int rows, int seq, cudaStream_t stream);

/// a = gelu(h)
void gelu_forward(const float* h, float* a, std::int64_t n, cudaStream_t stream);
/// d := d * gelu'(h), in place (d holds da, then dh)
void gelu_backward(const float* h, float* d, std::int64_t n, cudaStream_t stream);

/// Per row: lse = log sum exp(logits), losses = lse - logits[target].
void cross_entropy_forward(const float* logits, const std::int32_t* targets, float* losses,
                           float* lse, int rows, int vocab, cudaStream_t stream);
/// In place: logits := (softmax(logits) - onehot(target)) * scale.
void cross_entropy_backward(float* logits, const std::int32_t* targets, const float* lse, int rows,
                            int vocab, float scale, cudaStream_t stream);
/// out[0] = mean of v[0..n) (one block, a fixed tree).
void mean(const float* v, float* out, int n, cudaStream_t stream);

/// w -= lr * g
void sgd(float* w, const float* g, float lr, std::int64_t n, cudaStream_t stream);

}  // namespace gpt::kernels
