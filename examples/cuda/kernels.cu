// The GPT example's kernels (declared in kernels.hpp). Each row operation runs one block per row
// whose threads are the `lanes` of gpt_math.hpp: a thread computes its partial with the shared
// functions, the block combines the partials with the same fixed tree as gpt::math::tree_reduce,
// and each thread writes its elements. Column reductions (parameter gradients) give each column
// to a column of threads in the same way. No atomics anywhere: the bits never depend on timing.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include <cuda/gpt_math.hpp>
#include <cuda/kernels.hpp>

#include <remat/exec/cuda/error.hpp>

namespace gpt::kernels {
namespace {

namespace m = gpt::math;

constexpr int row_threads = 256;       // the lanes of a row kernel (a power of two)
constexpr int col_x = 32, col_y = 16;  // column kernels: 32 columns x 16 row lanes per block

/// Throws remat::cuda::cuda_error when the launch failed (bad configuration, no device).
void launched(const char* kernel) { remat::cuda::check(cudaGetLastError(), kernel); }

/// Grid for n independent elements, grid-stride loops beyond.
unsigned elementwise_blocks(std::int64_t n) {
  const std::int64_t blocks = (n + row_threads - 1) / row_threads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 65535));
}

/// Combines one value per thread of a block of Threads threads by gpt::math::tree_reduce's tree.
/// Every thread gets the result. sh: Threads floats of shared memory.
template <int Threads, class Op>
__device__ float block_reduce(float v, float* sh, Op op) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = Threads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s)
      sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();  // sh is reused by the next reduction
  return r;
}

/// Combines the col_y row lanes of each column of a (col_x, col_y) block; the result is valid in
/// the threads of row 0. sh: col_y x (col_x + 1) floats (padded against bank conflicts).
template <class Op>
__device__ float column_reduce(float v, float (*sh)[col_x + 1], Op op) {
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  sh[ty][tx] = v;
  __syncthreads();
  for (int s = col_y / 2; s > 0; s /= 2) {
    if (ty < s) sh[ty][tx] = op(sh[ty][tx], sh[ty + s][tx]);
    __syncthreads();
  }
  return sh[0][tx];
}

// --- embedding
// -------------------------------------------------------------------------------------

__global__ void embedding_forward_kernel(const std::int32_t* tokens, const float* wte,
                                         const float* wpe, float* y, int batch, int seq,
                                         int width) {
  const std::int64_t n = static_cast<std::int64_t>(batch) * seq * width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / width;
    const int c = static_cast<int>(i % width);
    const int t = static_cast<int>(row % seq);
    y[i] = wte[static_cast<std::int64_t>(tokens[row]) * width + c] +
           wpe[static_cast<std::int64_t>(t) * width + c];
  }
}

__global__ void embedding_tokens_backward_kernel(const std::int32_t* tokens, const float* dy,
                                                 float* dwte, int n, int width) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c < width) m::embedding_backward_column(tokens, dy, dwte, n, width, c);
}

__global__ void embedding_positions_backward_kernel(const float* dy, float* dwpe, int batch,
                                                    int seq, int width) {
  const std::int64_t n = static_cast<std::int64_t>(seq) * width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int b = 0; b < batch; ++b) s += dy[static_cast<std::int64_t>(b) * n + i];
    dwpe[i] += s;
  }
}

// --- layer norm
// ------------------------------------------------------------------------------------

__global__ void layer_norm_forward_kernel(const float* x, const float* g, const float* b, float* u,
                                          float* mean, float* rstd, int width, float eps) {
  __shared__ float sh[row_threads];
  const std::int64_t r = blockIdx.x;
  const float* xr = x + r * width;
  const int lane = static_cast<int>(threadIdx.x);
  const float mu =
      block_reduce<row_threads>(m::sum_partial(xr, width, lane, row_threads), sh, m::plus{}) /
      static_cast<float>(width);
  const float var = block_reduce<row_threads>(
      m::centered_square_partial(xr, width, mu, lane, row_threads), sh, m::plus{});
  const float rs = m::layer_norm_rstd(var, width, eps);
  m::layer_norm_write(xr, g, b, u + r * width, width, mu, rs, lane, row_threads);
  if (lane == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

__global__ void layer_norm_backward_kernel(const float* x, const float* du, const float* g,
                                           const float* mean, const float* rstd,
                                           const float* residual, float* dx, int width) {
  __shared__ float sh[row_threads];
  const std::int64_t r = blockIdx.x;
  const std::int64_t off = r * width;
  const int lane = static_cast<int>(threadIdx.x);
  const m::sum_pair p = m::layer_norm_backward_partial(x + off, du + off, g, width, mean[r],
                                                       rstd[r], lane, row_threads);
  m::sum_pair s;
  s.dxhat = block_reduce<row_threads>(p.dxhat, sh, m::plus{});
  s.dxhat_xhat = block_reduce<row_threads>(p.dxhat_xhat, sh, m::plus{});
  m::layer_norm_backward_write(x + off, du + off, g, residual != nullptr ? residual + off : nullptr,
                               dx + off, width, mean[r], rstd[r], s, lane, row_threads);
}

__global__ void layer_norm_params_backward_kernel(const float* x, const float* du,
                                                  const float* mean, const float* rstd, float* dg,
                                                  float* db, int rows, int width) {
  __shared__ float sh[col_y][col_x + 1];
  const int c = static_cast<int>(blockIdx.x) * col_x + static_cast<int>(threadIdx.x);
  const int lane = static_cast<int>(threadIdx.y);
  const bool live = c < width;
  const float pg =
      live ? m::layer_norm_gain_partial(x, du, mean, rstd, rows, width, c, lane, col_y) : 0.0f;
  const float gain = column_reduce(pg, sh, m::plus{});
  __syncthreads();
  const float pb = live ? m::column_sum_partial(du, rows, width, c, lane, col_y) : 0.0f;
  const float bias = column_reduce(pb, sh, m::plus{});
  if (live && lane == 0) {
    dg[c] += gain;
    db[c] += bias;
  }
}

// --- biases and residuals -----------------------------------------------------------------------

__global__ void add_bias_kernel(float* y, const float* bias, std::int64_t n, int cols) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] += bias[i % cols];
}

__global__ void residual_bias_kernel(float* y, const float* x, const float* bias, std::int64_t n,
                                     int cols) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] + bias[i % cols];
}

__global__ void bias_grad_kernel(const float* dy, float* db, int rows, int cols) {
  __shared__ float sh[col_y][col_x + 1];
  const int c = static_cast<int>(blockIdx.x) * col_x + static_cast<int>(threadIdx.x);
  const int lane = static_cast<int>(threadIdx.y);
  const float p = c < cols ? m::column_sum_partial(dy, rows, cols, c, lane, col_y) : 0.0f;
  const float s = column_reduce(p, sh, m::plus{});
  if (c < cols && lane == 0) db[c] += s;
}

// --- attention softmax ---------------------------------------------------------------------------

__global__ void causal_softmax_kernel(float* s, int seq) {
  __shared__ float sh[row_threads];
  const std::int64_t r = blockIdx.x;
  float* row = s + r * seq;
  const int valid = static_cast<int>(r % seq) + 1;
  const int lane = static_cast<int>(threadIdx.x);
  const float mx =
      block_reduce<row_threads>(m::max_partial(row, valid, lane, row_threads), sh, m::maximum{});
  const float sum = block_reduce<row_threads>(m::exp_sum_partial(row, valid, mx, lane, row_threads),
                                              sh, m::plus{});
  m::softmax_write(row, row, seq, valid, mx, sum, lane, row_threads);
}

__global__ void causal_softmax_backward_kernel(const float* p, float* dp, int seq) {
  __shared__ float sh[row_threads];
  const std::int64_t r = blockIdx.x;
  const std::int64_t off = r * seq;
  const int valid = static_cast<int>(r % seq) + 1;
  const int lane = static_cast<int>(threadIdx.x);
  const float dot = block_reduce<row_threads>(
      m::dot_partial(p + off, dp + off, valid, lane, row_threads), sh, m::plus{});
  m::softmax_backward_write(p + off, dp + off, dp + off, seq, valid, dot, lane, row_threads);
}

// --- GELU
// ------------------------------------------------------------------------------------------

__global__ void gelu_forward_kernel(const float* h, float* a, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    a[i] = m::gelu(h[i]);
}

__global__ void gelu_backward_kernel(const float* h, float* d, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    d[i] *= m::gelu_grad(h[i]);
}

// --- cross-entropy -------------------------------------------------------------------------------

__global__ void cross_entropy_forward_kernel(const float* logits, const std::int32_t* targets,
                                             float* losses, float* lse, int vocab) {
  __shared__ float sh[row_threads];
  const std::int64_t r = blockIdx.x;
  const float* row = logits + r * vocab;
  const int lane = static_cast<int>(threadIdx.x);
  const float mx =
      block_reduce<row_threads>(m::max_partial(row, vocab, lane, row_threads), sh, m::maximum{});
  const float sum = block_reduce<row_threads>(m::exp_sum_partial(row, vocab, mx, lane, row_threads),
                                              sh, m::plus{});
  if (lane == 0) {
    const float l = m::log_sum_exp(mx, sum);
    lse[r] = l;
    losses[r] = m::cross_entropy(row, targets[r], l);
  }
}

__global__ void cross_entropy_backward_kernel(float* logits, const std::int32_t* targets,
                                              const float* lse, int vocab, float scale) {
  const std::int64_t r = blockIdx.x;
  float* row = logits + r * vocab;
  m::cross_entropy_backward_write(row, row, vocab, targets[r], lse[r], scale,
                                  static_cast<int>(threadIdx.x), row_threads);
}

__global__ void mean_kernel(const float* v, float* out, int n) {
  __shared__ float sh[row_threads];
  const float s = block_reduce<row_threads>(
      m::sum_partial(v, n, static_cast<int>(threadIdx.x), row_threads), sh, m::plus{});
  if (threadIdx.x == 0) out[0] = s / static_cast<float>(n);
}

__global__ void sgd_kernel(float* w, const float* g, float lr, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    w[i] -= lr * g[i];
}

dim3 column_blocks(int cols) { return dim3(static_cast<unsigned>((cols + col_x - 1) / col_x)); }
const dim3 column_threads(col_x, col_y);

}  // namespace

void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* y,
                       int batch, int seq, int width, cudaStream_t stream) {
  const std::int64_t n = static_cast<std::int64_t>(batch) * seq * width;
  embedding_forward_kernel<<<elementwise_blocks(n), row_threads, 0, stream>>>(tokens, wte, wpe, y,
                                                                              batch, seq, width);
  launched("embedding_forward_kernel");
}

void embedding_backward(const std::int32_t* tokens, const float* dy, float* dwte, float* dwpe,
                        int batch, int seq, int width, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((width + 127) / 128);
  embedding_tokens_backward_kernel<<<blocks, 128, 0, stream>>>(tokens, dy, dwte, batch * seq,
                                                               width);
  launched("embedding_tokens_backward_kernel");
  embedding_positions_backward_kernel<<<elementwise_blocks(static_cast<std::int64_t>(seq) * width),
                                        row_threads, 0, stream>>>(dy, dwpe, batch, seq, width);
  launched("embedding_positions_backward_kernel");
}

void layer_norm_forward(const float* x, const float* g, const float* b, float* u, float* mean,
                        float* rstd, int rows, int width, float eps, cudaStream_t stream) {
  layer_norm_forward_kernel<<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(
      x, g, b, u, mean, rstd, width, eps);
  launched("layer_norm_forward_kernel");
}

void layer_norm_backward(const float* x, const float* du, const float* g, const float* mean,
                         const float* rstd, const float* residual, float* dx, float* dg, float* db,
                         int rows, int width, cudaStream_t stream) {
  // The parameter gradients first: dx may overwrite the residual, never du or x.
  layer_norm_params_backward_kernel<<<column_blocks(width), column_threads, 0, stream>>>(
      x, du, mean, rstd, dg, db, rows, width);
  launched("layer_norm_params_backward_kernel");
  layer_norm_backward_kernel<<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(
      x, du, g, mean, rstd, residual, dx, width);
  launched("layer_norm_backward_kernel");
}

void add_bias(float* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * cols;
  add_bias_kernel<<<elementwise_blocks(n), row_threads, 0, stream>>>(y, bias, n, cols);
  launched("add_bias_kernel");
}

void residual_bias(float* y, const float* x, const float* bias, int rows, int cols,
                   cudaStream_t stream) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * cols;
  residual_bias_kernel<<<elementwise_blocks(n), row_threads, 0, stream>>>(y, x, bias, n, cols);
  launched("residual_bias_kernel");
}

void bias_grad(const float* dy, float* db, int rows, int cols, cudaStream_t stream) {
  bias_grad_kernel<<<column_blocks(cols), column_threads, 0, stream>>>(dy, db, rows, cols);
  launched("bias_grad_kernel");
}

void causal_softmax(float* s, int rows, int seq, cudaStream_t stream) {
  causal_softmax_kernel<<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(s, seq);
  launched("causal_softmax_kernel");
}

void causal_softmax_backward(const float* p, float* dp, int rows, int seq, cudaStream_t stream) {
  causal_softmax_backward_kernel<<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(p, dp,
                                                                                          seq);
  launched("causal_softmax_backward_kernel");
}

void gelu_forward(const float* h, float* a, std::int64_t n, cudaStream_t stream) {
  gelu_forward_kernel<<<elementwise_blocks(n), row_threads, 0, stream>>>(h, a, n);
  launched("gelu_forward_kernel");
}

void gelu_backward(const float* h, float* d, std::int64_t n, cudaStream_t stream) {
  gelu_backward_kernel<<<elementwise_blocks(n), row_threads, 0, stream>>>(h, d, n);
  launched("gelu_backward_kernel");
}

void cross_entropy_forward(const float* logits, const std::int32_t* targets, float* losses,
                           float* lse, int rows, int vocab, cudaStream_t stream) {
  cross_entropy_forward_kernel<<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(
      logits, targets, losses, lse, vocab);
  launched("cross_entropy_forward_kernel");
}

void cross_entropy_backward(float* logits, const std::int32_t* targets, const float* lse, int rows,
                            int vocab, float scale, cudaStream_t stream) {
  cross_entropy_backward_kernel<<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(
      logits, targets, lse, vocab, scale);
  launched("cross_entropy_backward_kernel");
}

void mean(const float* v, float* out, int n, cudaStream_t stream) {
  mean_kernel<<<1, row_threads, 0, stream>>>(v, out, n);
  launched("mean_kernel");
}

void sgd(float* w, const float* g, float lr, std::int64_t n, cudaStream_t stream) {
  sgd_kernel<<<elementwise_blocks(n), row_threads, 0, stream>>>(w, g, lr, n);
  launched("sgd_kernel");
}

}  // namespace gpt::kernels
