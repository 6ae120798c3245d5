#pragma once
// LibTorch models written with LibTorch's C++ modules, as a user of remat::libtorch writes them:
// a torch::nn::Sequential whose children are the chain's stages (remat::libtorch::layers_of).
//   resnet_like(width, classes)   ResNet-18's shape: a stem, 4 stages of 2 basic blocks (channels
//                                 w, 2w, 4w, 8w, stride 2 from the second stage), average pooling,
//                                 a linear classifier; batch norm everywhere
//   gpt_like(cfg)                 a GPT-2-like decoder: token and position embeddings, pre-norm
//                                 blocks of causal self-attention and a GELU MLP with dropout, a
//                                 final norm and the language-model head; lm_loss is its loss
// Used by examples/torch/remat_torch_demo.cpp and tests/torch.
#include <cmath>
#include <cstdint>

#include <torch/nn.h>

namespace remat_examples::torch_models {

namespace tnn = torch::nn;

// Modules are Cloneable (LibTorch's way to deep-copy a model: reset() builds the submodules).

/// Two 3x3 convolutions with batch norm, and the shortcut (a 1x1 convolution when the shape
/// changes).
struct basic_block_impl : tnn::Cloneable<basic_block_impl> {
  basic_block_impl(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride_)
      : in(in_channels), out(out_channels), stride(stride_) {
    reset();
  }
  void reset() override {
    conv1 = register_module(
        "conv1", tnn::Conv2d(tnn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", tnn::BatchNorm2d(out));
    conv2 = register_module("conv2",
                            tnn::Conv2d(tnn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", tnn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      down_conv = register_module(
          "down_conv", tnn::Conv2d(tnn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      down_bn = register_module("down_bn", tnn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = torch::relu(bn1(conv1(x)));
    h = bn2(conv2(h));
    const torch::Tensor shortcut = down_conv ? down_bn(down_conv(x)) : x;
    return torch::relu(h + shortcut);
  }
  std::int64_t in, out, stride;
  tnn::Conv2d conv1{nullptr};
  tnn::BatchNorm2d bn1{nullptr};
  tnn::Conv2d conv2{nullptr};
  tnn::BatchNorm2d bn2{nullptr};
  tnn::Conv2d down_conv{nullptr};
  tnn::BatchNorm2d down_bn{nullptr};
};
TORCH_MODULE_IMPL(basic_block, basic_block_impl);

/// ResNet-18's layout at a given width (64 in the original) for 3-channel images.
inline tnn::Sequential resnet_like(std::int64_t width = 16, std::int64_t classes = 10) {
  tnn::Sequential net;
  net->push_back("stem", tnn::Conv2d(tnn::Conv2dOptions(3, width, 3).padding(1).bias(false)));
  net->push_back("stem_bn", tnn::BatchNorm2d(width));
  net->push_back("stem_relu", tnn::ReLU());
  std::int64_t in = width;
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t out = width << stage;
    for (int b = 0; b < 2; ++b) {
      net->push_back("block" + std::to_string(stage + 1) + "_" + std::to_string(b + 1),
                     basic_block(in, out, stage > 0 && b == 0 ? 2 : 1));
      in = out;
    }
  }
  net->push_back("pool", tnn::AdaptiveAvgPool2d(tnn::AdaptiveAvgPool2dOptions({1, 1})));
  net->push_back("flatten", tnn::Flatten());
  net->push_back("fc", tnn::Linear(in, classes));
  return net;
}

struct gpt_config {
  std::int64_t vocab = 512;
  std::int64_t context = 64;
  std::int64_t width = 128;
  std::int64_t heads = 4;
  std::int64_t layers = 4;
  double dropout = 0.1;
};

/// Token ids [B, T] (int64) -> embeddings [B, T, width].
struct embedding_impl : tnn::Cloneable<embedding_impl> {
  explicit embedding_impl(const gpt_config& config) : c(config) { reset(); }
  void reset() override {
    tokens = register_module("tokens", tnn::Embedding(c.vocab, c.width));
    positions = register_module("positions", tnn::Embedding(c.context, c.width));
    drop = register_module("drop", tnn::Dropout(c.dropout));
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    const auto t = ids.size(1);
    const torch::Tensor pos = torch::arange(t, torch::TensorOptions().dtype(torch::kLong));
    return drop(tokens(ids) + positions(pos));
  }
  gpt_config c;
  tnn::Embedding tokens{nullptr}, positions{nullptr};
  tnn::Dropout drop{nullptr};
};
TORCH_MODULE_IMPL(embedding, embedding_impl);

/// x + attention(norm(x)), then x + mlp(norm(x)).
struct block_impl : tnn::Cloneable<block_impl> {
  explicit block_impl(const gpt_config& config) : c(config), heads(config.heads) { reset(); }
  void reset() override {
    norm1 = register_module("norm1", tnn::LayerNorm(tnn::LayerNormOptions({c.width})));
    qkv = register_module("qkv", tnn::Linear(c.width, 3 * c.width));
    proj = register_module("proj", tnn::Linear(c.width, c.width));
    norm2 = register_module("norm2", tnn::LayerNorm(tnn::LayerNormOptions({c.width})));
    fc = register_module("fc", tnn::Linear(c.width, 4 * c.width));
    out = register_module("out", tnn::Linear(4 * c.width, c.width));
    attn_drop = register_module("attn_drop", tnn::Dropout(c.dropout));
    resid_drop = register_module("resid_drop", tnn::Dropout(c.dropout));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto b = x.size(0), t = x.size(1), w = x.size(2), d = w / heads;
    auto parts = qkv(norm1(x)).chunk(3, -1);
    auto split = [&](const torch::Tensor& p) { return p.view({b, t, heads, d}).transpose(1, 2); };
    const torch::Tensor q = split(parts[0]), k = split(parts[1]), v = split(parts[2]);
    torch::Tensor att = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    const torch::Tensor mask =
        torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool)).triu(1);
    att = attn_drop(torch::softmax(att.masked_fill(mask, -INFINITY), -1));
    const torch::Tensor y = torch::matmul(att, v).transpose(1, 2).reshape({b, t, w});
    torch::Tensor h = x + resid_drop(proj(y));
    return h + resid_drop(out(torch::gelu(fc(norm2(h)))));
  }
  gpt_config c;
  std::int64_t heads;
  tnn::LayerNorm norm1{nullptr};
  tnn::Linear qkv{nullptr}, proj{nullptr};
  tnn::LayerNorm norm2{nullptr};
  tnn::Linear fc{nullptr}, out{nullptr};
  tnn::Dropout attn_drop{nullptr}, resid_drop{nullptr};
};
TORCH_MODULE_IMPL(block, block_impl);

inline tnn::Sequential gpt_like(const gpt_config& c) {
  tnn::Sequential net;
  net->push_back("embed", embedding(c));
  for (std::int64_t i = 0; i < c.layers; ++i)
    net->push_back("block" + std::to_string(i + 1), block(c));
  net->push_back("norm", tnn::LayerNorm(tnn::LayerNormOptions({c.width})));
  net->push_back("head", tnn::Linear(c.width, c.vocab));
  return net;
}

/// Cross-entropy of logits [B, T, V] against token ids [B, T].
struct lm_loss_impl : tnn::Cloneable<lm_loss_impl> {
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& logits, const torch::Tensor& targets) {
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                targets.reshape({-1}));
  }
};
TORCH_MODULE_IMPL(lm_loss, lm_loss_impl);

}  // namespace remat_examples::torch_models
