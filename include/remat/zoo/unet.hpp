#pragma once
// U-Net [Ronneberger, Fischer and Brox, MICCAI 2015] as a forward DAG at the granularity of
// PyTorch's autograd in eager mode, with its weights: a contracting path of double 3x3
// convolutions (each with batch norm and ReLU) and 2x2 max-pools, a bottleneck, and an expanding
// path of 2x2 up-convolutions, each concatenated with the skip of its level (the long skip
// connections that make the graph not a sequence) and followed by a double convolution; a 1x1
// convolution to the classes and a pixel-wise cross-entropy. Padded convolutions (the output is
// the image's size), sizes from the shapes and times from the roofline of zoo/roofline.hpp, as
// zoo/resnet.hpp's. Every op and weight: docs/zoo.md, "U-Net".

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/detail/conv.hpp>
#include <remat/zoo/detail/dag_maker.hpp>
#include <remat/zoo/roofline.hpp>

namespace remat::zoo {

/// The U-Net's shape and training setup; the defaults are the paper's U (4 levels of 64, 128,
/// 256, 512 channels, a bottleneck of 1024) on 256x256 RGB images, 2 classes, batch 8, fp32.
struct unet_config {
  int levels = 4;          ///< max-pools on the way down (and up-convolutions on the way up)
  int base_channels = 64;  ///< the first level's; each level doubles them
  int image = 256;         ///< height and width of the input images, divisible by 2^levels
  int in_channels = 3;
  int classes = 2;
  int batch = 8;
  int dtype_bytes = 4;  ///< 2 (fp16, bf16), 4 (fp32) or 8 (fp64)
};

/// Checks a configuration; the message names the field and what would be accepted.
inline result<void> validate(const unet_config& c) {
  constexpr std::string_view cfg = "unet_config";
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (auto e = detail::positive_field(cfg, "levels", c.levels, 16, "4 as in the paper"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "base_channels", c.base_channels, 1 << 16, "64"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "image", c.image, 1 << 20, "256")) return bad(*e);
  if (c.image % (1 << c.levels) != 0)
    return bad(std::string(cfg) + ": image " + std::to_string(c.image) +
               " is not divisible by 2^levels = " + std::to_string(1 << c.levels) +
               "; each of the " + std::to_string(c.levels) +
               " levels halves the image with a 2x2 max-pool and the up-convolutions double it "
               "back (256 with 4 levels)");
  if (auto e = detail::positive_field(cfg, "in_channels", c.in_channels, 1 << 16, "3"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "classes", c.classes, 1 << 24, "2")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "batch", c.batch, 1 << 24, "8")) return bad(*e);
  if (auto e = detail::dtype_field(cfg, c.dtype_bytes)) return bad(*e);
  // The largest activation is the first level's concatenation (2 base_channels at the image's
  // size), the largest weight the bottleneck's second convolution.
  const double B = c.batch, C = c.base_channels, I = c.image, e = c.dtype_bytes,
               top = C * double(1 << c.levels);
  for (auto m :
       {detail::tensor_size(cfg, "input images", "batch * in_channels * image^2 * dtype_bytes",
                            B * c.in_channels * I * I * e, "batch or image"),
        detail::tensor_size(cfg, "first level's concatenation",
                            "batch * 2 * base_channels * image^2 * dtype_bytes",
                            B * 2 * C * I * I * e, "batch, base_channels or image"),
        detail::tensor_size(cfg, "logits", "batch * classes * image^2 * dtype_bytes",
                            B * c.classes * I * I * e, "batch, classes or image"),
        detail::tensor_size(cfg, "bottleneck's convolution weight",
                            "9 * (base_channels * 2^levels)^2 * dtype_bytes", 9 * top * top * e,
                            "base_channels or levels")})
    if (m) return bad(*m);
  return {};
}

/// The U-Net's training graph as a forward DAG with its parameters (ops and decisions at the top
/// of this header and in docs/zoo.md), roofline times on `device` and the cost model in the DAG.
/// The graph input is the image batch (B x in_channels x image^2, dtype_bytes each); the
/// per-pixel int64 targets are the loss's.
inline result<forward_dag> unet(const unet_config& c, const device_model& device) {
  if (auto v = validate(c); !v) return v.err();
  if (auto v = validate(device); !v) return v.err();
  const double B = c.batch, e = c.dtype_bytes;
  const std::string dtype = detail::parameter_dtype(c.dtype_bytes);

  detail::dag_maker m(device);
  // Conv 3x3 (padding 1, no bias: batch norm follows), batch norm (weight and bias), ReLU, twice,
  // from `cin` to `cout` channels at size `h`, under the prefix `p`; returns the last ReLU.
  auto double_conv = [&](const std::string& p, const std::string& x, double cin, double cout,
                         double h) {
    const double n = B * cout * h * h;
    std::string in = x;
    double from = cin;
    for (const char* i : {"1", "2"}) {
      const std::string conv = p + "conv" + i, bn = p + "bn" + i, relu = p + "relu" + i;
      m.add_with_weights(detail::conv2d(conv, in, B, from, cout, 3, 1, 1, h, e, false),
                         cout * from * 9 * e, 0, dtype);
      m.add_with_weights(detail::batch_norm(bn, conv, B, cout, h, e), cout * e, cout * e, dtype);
      m.add(detail::relu(relu, bn, n * e, n));
      in = relu;
      from = cout;
    }
    return in;
  };

  // The contracting path: level l has base_channels 2^l channels at image / 2^l; its double
  // convolution's output is the level's skip, which the pool and the expanding path read.
  std::vector<std::string> skips;
  std::string x = "input";
  double ch = c.in_channels, h = c.image;
  for (int l = 0; l < c.levels; ++l) {
    const std::string p = "down" + std::to_string(l) + ".";
    const double out = c.base_channels * double(1 << l);
    skips.push_back(double_conv(p, x, ch, out, h));
    m.add(detail::max_pool(p + "pool", skips.back(), B, out, h, 2, 2, 0, e));
    x = p + "pool";
    ch = out;
    h /= 2;
  }
  const double bottom = c.base_channels * double(1 << c.levels);
  x = double_conv("bottleneck.", x, ch, bottom, h);
  ch = bottom;

  // The expanding path: the up-convolution (2x2, stride 2, with bias) halves the channels and
  // doubles the size; the concatenation [skip, up] along the channels copies both (read and
  // written once); autograd's backward splits dy into views, and the skip's gradient, which sums
  // this slice and the max-pool's, is charged here (two read, one written, 1 FLOP an element).
  for (int l = c.levels - 1; l >= 0; --l) {
    const std::string p = "up" + std::to_string(l) + ".";
    const double out = c.base_channels * double(1 << l);
    m.add_with_weights(detail::conv_transpose2d(p + "upconv", x, B, ch, out, 2, h, e, true),
                       ch * out * 4 * e, out * e, dtype);
    h *= 2;
    const double n = B * out * h * h, half = n * e;
    m.add({.name = p + "concat",
           .inputs = {skips[static_cast<std::size_t>(l)], p + "upconv"},
           .output = 2 * half,
           .phantom = 0,
           .backward_reads = {},
           .forward = {0, 4 * half},
           .backward = {n, 3 * half}});
    x = double_conv(p, p + "concat", 2 * out, out, h);
    ch = out;
  }

  // The head: a 1x1 convolution (with bias) to the classes, and the pixel-wise cross-entropy
  // (detail::cross_entropy over B image^2 rows).
  m.add_with_weights(detail::conv2d("head", x, B, ch, c.classes, 1, 1, 0, h, e, true),
                     c.classes * ch * e, c.classes * e, dtype);
  m.add(detail::cross_entropy("loss", "head", B * h * h, c.classes, e));

  std::string name = "U-Net, " + std::to_string(c.levels) + " levels, " +
                     std::to_string(c.base_channels) + " base channels, " +
                     std::to_string(c.image) + "x" + std::to_string(c.image) + ", " +
                     std::to_string(c.in_channels) + " input channels, " +
                     std::to_string(c.classes) + " classes, batch " + std::to_string(c.batch) +
                     ", " + detail::dtype_name(c.dtype_bytes) + ", " + device.name + " roofline";
  return std::move(m).finish(std::move(name), B * c.in_channels * double(c.image) * c.image * e,
                             "unet");
}

}  // namespace remat::zoo
