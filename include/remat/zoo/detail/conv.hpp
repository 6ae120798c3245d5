#pragma once
// The convolutional ops of the model zoo's generators (ResNet's, the U-Net's): 2D convolution,
// transposed convolution, batch norm and max-pool over square B x C x h x h tensors, as op_specs
// (detail/dag_maker.hpp). The decisions are stated at each function; the cost rule in
// zoo/roofline.hpp.

#include <cmath>
#include <string>
#include <utility>

#include <remat/zoo/detail/dag_maker.hpp>

namespace remat::zoo::detail {

/// The output size of a convolution or pooling window over `h` (floor, as PyTorch's).
inline double conv_out(double h, int k, int stride, int pad) {
  return std::floor((h + 2 * pad - k) / stride) + 1;
}

/// A k x k convolution (weight_product) of `B` images of `cin` channels, `h` x `h`, to `cout`
/// channels, `conv_out(h, k, stride, pad)` on a side, dtype `e` bytes, with a bias of cout
/// values or none: 2 B cout ho^2 cin k^2 FLOPs forward, twice that backward (data and weight
/// gradients; once when x is the graph input); weight cout cin k^2 e bytes.
inline op_spec conv2d(std::string name, const std::string& x, double B, double cin, double cout,
                      int k, int stride, int pad, double h, double e, bool bias) {
  const double ho = conv_out(h, k, stride, pad);
  const double X = B * cin * h * h * e, Y = B * cout * ho * ho * e, W = cout * cin * k * k * e;
  const double flops = 2 * B * cout * ho * ho * cin * k * k;
  return weight_product(std::move(name), x, X, W, Y, flops, bias ? cout * e : 0, B * cout * ho * ho,
                        x != "input");
}

/// A k x k transposed convolution of stride k (the windows do not overlap: the output is k h on a
/// side) from `cin` to `cout` channels, with a bias of cout values or none (weight_product):
/// every input element meets every weight of its channel once, 2 B cin h^2 cout k^2 FLOPs
/// forward, twice that backward (dx is the strided convolution of dy, dW the products of x and
/// dy); weight cin cout k^2 e bytes.
inline op_spec conv_transpose2d(std::string name, const std::string& x, double B, double cin,
                                double cout, int k, double h, double e, bool bias) {
  const double ho = k * h;
  const double X = B * cin * h * h * e, Y = B * cout * ho * ho * e, W = cin * cout * k * k * e;
  const double flops = 2 * B * cin * h * h * cout * k * k;
  return weight_product(std::move(name), x, X, W, Y, flops, bias ? cout * e : 0, B * cout * ho * ho,
                        x != "input");
}

/// Batch norm (training mode) over `ch` channels of B x ch x h x h: it saves its batch mean and
/// inverse std per channel (2 ch values in the accumulation type) as its phantom and reads its
/// input in the backward. FLOPs 8 an element forward, 12 backward. Bytes: forward 3x the tensor
/// (a statistics pass, then read and write) with the statistics and the weight and bias (ch e
/// each); backward 5x (dy and x read for the reductions, then dy and x read and dx written),
/// the statistics, the weight read and its and the bias's gradients written.
inline op_spec batch_norm(std::string name, const std::string& x, double B, double ch, double h,
                          double e) {
  const double X = B * ch * h * h * e, n = B * ch * h * h, stats = 2 * ch * accumulation_bytes(e);
  return {.name = std::move(name),
          .inputs = {x},
          .output = X,
          .phantom = stats,
          .backward_reads = {x},
          .forward = {8 * n, 3 * X + stats + 2 * ch * e},
          .backward = {12 * n, 5 * X + stats + 3 * ch * e}};
}

/// A k x k max-pool of stride `stride` over B x ch x h x h: it saves its int64 indices (8 bytes
/// an output element: its phantom) and, as ATen's max_pool2d_with_indices, its input, which its
/// backward reads. FLOPs: k^2 compares an output element forward, 1 backward. Bytes: forward x
/// read, y and the indices written; backward dy and the indices read, dx zero-filled and
/// scattered into (2x its bytes).
inline op_spec max_pool(std::string name, const std::string& x, double B, double ch, double h,
                        int k, int stride, int pad, double e) {
  const double ho = conv_out(h, k, stride, pad);
  const double X = B * ch * h * h * e, n_out = B * ch * ho * ho, Y = n_out * e;
  return {.name = std::move(name),
          .inputs = {x},
          .output = Y,
          .phantom = 8 * n_out,
          .backward_reads = {x},
          .forward = {k * k * n_out, X + Y + 8 * n_out},
          .backward = {n_out, 2 * X + Y + 8 * n_out}};
}

}  // namespace remat::zoo::detail
