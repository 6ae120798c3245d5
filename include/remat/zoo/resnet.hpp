#pragma once
// ResNet [He et al., CVPR 2016, Table 1] as a forward DAG at the granularity of PyTorch's autograd
// in eager mode: torchvision's model (v1.5: a bottleneck's stride in its 3x3 convolution), with
// its modules' names, depths 18, 34, 50, 101 and 152, sizes from the shapes and times from the
// roofline of zoo/roofline.hpp. Every op with its sizes and work: docs/zoo.md, "ResNet".

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <remat/core/result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/detail/conv.hpp>
#include <remat/zoo/detail/dag_maker.hpp>
#include <remat/zoo/roofline.hpp>

namespace remat::zoo {

/// ResNet's depth and training setup; the defaults are ResNet-50 on ImageNet, batch 32, fp32.
struct resnet_config {
  int depth = 50;  ///< 18, 34, 50, 101 or 152
  int batch = 32;
  int image = 224;      ///< height and width of the input images
  int dtype_bytes = 4;  ///< 2 (fp16, bf16), 4 (fp32) or 8 (fp64)
  int classes = 1000;
};

namespace detail {
/// Blocks per layer and whether they are bottlenecks, for a depth of Table 1; nullopt otherwise.
struct resnet_layout {
  std::array<int, 4> blocks;
  bool bottleneck;
};
inline std::optional<resnet_layout> resnet_layout_of(int depth) {
  switch (depth) {
    case 18:
      return resnet_layout{{2, 2, 2, 2}, false};
    case 34:
      return resnet_layout{{3, 4, 6, 3}, false};
    case 50:
      return resnet_layout{{3, 4, 6, 3}, true};
    case 101:
      return resnet_layout{{3, 4, 23, 3}, true};
    case 152:
      return resnet_layout{{3, 8, 36, 3}, true};
    default:
      return std::nullopt;
  }
}
}  // namespace detail

/// Checks a configuration; the message names the field and what would be accepted.
inline result<void> validate(const resnet_config& c) {
  constexpr std::string_view cfg = "resnet_config";
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (!detail::resnet_layout_of(c.depth))
    return bad(std::string(cfg) + ": depth is " + std::to_string(c.depth) +
               "; it must be one of the depths of He et al.'s Table 1: 18, 34, 50, 101, 152");
  if (auto e = detail::positive_field(cfg, "batch", c.batch, 1 << 24, "32")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "image", c.image, 1 << 20, "224")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "classes", c.classes, 1 << 24, "1000")) return bad(*e);
  if (auto e = detail::dtype_field(cfg, c.dtype_bytes)) return bad(*e);
  const double B = c.batch, e = c.dtype_bytes, stem = detail::conv_out(c.image, 7, 2, 3);
  for (auto m : {detail::tensor_size(cfg, "input images", "batch * 3 * image^2 * dtype_bytes",
                                     B * 3 * c.image * double(c.image) * e, "batch or image"),
                 detail::tensor_size(cfg, "stem's output",
                                     "batch * 64 * ((image - 1) / 2 + 1)^2 * dtype_bytes",
                                     B * 64 * stem * stem * e, "batch or image"),
                 detail::tensor_size(cfg, "logits", "batch * classes * dtype_bytes",
                                     B * c.classes * e, "batch or classes")})
    if (m) return bad(*m);
  return {};
}

/// ResNet's training graph as a forward DAG (ops and decisions at the top of this header), with
/// roofline times on `device` and the cost model recorded in the DAG (forward_dag::costs).
inline result<forward_dag> resnet(const resnet_config& c, const device_model& device) {
  if (auto v = validate(c); !v) return v.err();
  if (auto v = validate(device); !v) return v.err();
  const detail::resnet_layout layout = *detail::resnet_layout_of(c.depth);
  const double B = c.batch, e = c.dtype_bytes;

  detail::dag_maker m(device);
  const std::string dtype = detail::parameter_dtype(c.dtype_bytes);
  // A convolution over `x` (channels cin, size h), without bias, with its weight; returns its
  // output size.
  auto conv = [&](std::string name, const std::string& x, double cin, double cout, int k,
                  int stride, int pad, double h) {
    m.add_with_weights(
        detail::conv2d(std::move(name), x, B, cin, cout, k, stride, pad, h, e, false),
        cout * cin * k * k * e, 0, dtype);
    return detail::conv_out(h, k, stride, pad);
  };
  // Batch norm with its affine weight and bias (its running statistics are not parameters).
  auto batch_norm = [&](std::string name, const std::string& x, double ch, double h) {
    m.add_with_weights(detail::batch_norm(std::move(name), x, B, ch, h, e), ch * e, ch * e, dtype);
  };
  auto relu = [&](std::string name, const std::string& x, double ch, double h) {
    const double n = B * ch * h * h;
    m.add(detail::relu(std::move(name), x, n * e, n));
  };

  // Stem.
  double h = c.image;
  h = conv("conv1", "input", 3, 64, 7, 2, 3, h);
  batch_norm("bn1", "conv1", 64, h);
  relu("relu", "bn1", 64, h);
  m.add(detail::max_pool("maxpool", "relu", B, 64, h, 3, 2, 1, e));
  h = detail::conv_out(h, 3, 2, 1);

  std::string x = "maxpool";
  double ch = 64;  // channels of x
  for (int l = 0; l < 4; ++l) {
    const double width = 64 << l;
    for (int b = 0; b < layout.blocks[static_cast<std::size_t>(l)]; ++b) {
      const std::string p = "layer" + std::to_string(l + 1) + "." + std::to_string(b) + ".";
      const int stride = l > 0 && b == 0 ? 2 : 1;
      const double cout = layout.bottleneck ? 4 * width : width;
      double hb = h;
      std::string last;
      if (layout.bottleneck) {
        conv(p + "conv1", x, ch, width, 1, 1, 0, hb);
        batch_norm(p + "bn1", p + "conv1", width, hb);
        relu(p + "relu1", p + "bn1", width, hb);
        hb = conv(p + "conv2", p + "relu1", width, width, 3, stride, 1, hb);
        batch_norm(p + "bn2", p + "conv2", width, hb);
        relu(p + "relu2", p + "bn2", width, hb);
        conv(p + "conv3", p + "relu2", width, cout, 1, 1, 0, hb);
        batch_norm(p + "bn3", p + "conv3", cout, hb);
        last = p + "bn3";
      } else {
        hb = conv(p + "conv1", x, ch, width, 3, stride, 1, hb);
        batch_norm(p + "bn1", p + "conv1", width, hb);
        relu(p + "relu1", p + "bn1", width, hb);
        conv(p + "conv2", p + "relu1", width, width, 3, 1, 1, hb);
        batch_norm(p + "bn2", p + "conv2", width, hb);
        last = p + "bn2";
      }
      std::string skip = x;
      if (stride != 1 || ch != cout) {
        conv(p + "downsample.0", x, ch, cout, 1, stride, 0, h);
        batch_norm(p + "downsample.1", p + "downsample.0", cout, hb);
        skip = p + "downsample.1";
      }
      const double n = B * cout * hb * hb;
      m.add(detail::residual_add(p + "add", last, skip, n * e, n));
      relu(p + "relu", p + "add", cout, hb);
      x = p + "relu";
      ch = cout;
      h = hb;
    }
  }

  {
    const double X = B * ch * h * h * e, n = B * ch * h * h;
    m.add({.name = "avgpool",
           .inputs = {x},
           .output = B * ch * e,
           .phantom = 0,
           .backward_reads = {},
           .forward = {n, X + B * ch * e},
           .backward = {n, X + B * ch * e}});
  }
  m.add_with_weights(detail::linear("fc", "avgpool", B, ch, c.classes, e, true), ch * c.classes * e,
                     c.classes * e, dtype);
  m.add(detail::cross_entropy("loss", "fc", B, c.classes, e));

  std::string name = "ResNet-" + std::to_string(c.depth) + ", batch " + std::to_string(c.batch) +
                     ", " + std::to_string(c.image) + "x" + std::to_string(c.image) + ", " +
                     std::to_string(c.classes) + " classes, " + detail::dtype_name(c.dtype_bytes) +
                     ", " + device.name + " roofline";
  return std::move(m).finish(std::move(name), B * 3 * c.image * double(c.image) * e, "resnet");
}

}  // namespace remat::zoo
