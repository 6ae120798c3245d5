#pragma once
// Llama-like decoders [Touvron et al., 2023] as a forward DAG at the granularity PyTorch's
// autograd sees in eager mode, with their weights: token embedding, then per layer RMSNorm,
// q/k/v projections without bias, rotary embedding of q and k, eager causal attention, the
// output projection, a residual add, RMSNorm, the SwiGLU MLP (gate and up projections, silu(gate)
// * up, down projection) and a residual add; a final RMSNorm, an untied head and the loss. Sizes
// from the shapes, times from the roofline of zoo/roofline.hpp, as GPT-2's (zoo/gpt2.hpp). Every
// op and weight: docs/zoo.md, "Llama".

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include <remat/core/result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/detail/dag_maker.hpp>
#include <remat/zoo/roofline.hpp>

namespace remat::zoo {

/// A Llama-like decoder's shape and training setup; the defaults are Llama 2 7B in fp32 at
/// batch 4 of 512 tokens (the setting of [Offmate24, §5]).
struct llama_config {
  int layers = 32;
  int width = 4096;  ///< d_model
  int heads = 32;
  int ffn = 11008;  ///< the MLP's hidden width
  int vocab = 32000;
  int sequence = 512;
  int batch = 4;
  int dtype_bytes = 4;  ///< 2 (fp16, bf16), 4 (fp32) or 8 (fp64)
};

/// Checks a configuration; the message names the field and what would be accepted.
inline result<void> validate(const llama_config& c) {
  constexpr std::string_view cfg = "llama_config";
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (auto e = detail::positive_field(cfg, "layers", c.layers, 10000, "32 for Llama 2 7B"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "width", c.width, 1 << 20, "4096")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "heads", c.heads, c.width, "32")) return bad(*e);
  if (c.width % c.heads != 0)
    return bad(std::string(cfg) + ": width " + std::to_string(c.width) +
               " is not divisible by heads " + std::to_string(c.heads) +
               "; each head has width / heads features (4096 and 32 give 128)");
  if (auto e = detail::positive_field(cfg, "ffn", c.ffn, 1 << 22, "11008")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "vocab", c.vocab, 1 << 24, "32000")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "sequence", c.sequence, 1 << 24, "512")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "batch", c.batch, 1 << 24, "4")) return bad(*e);
  if (auto e = detail::dtype_field(cfg, c.dtype_bytes)) return bad(*e);
  const double B = c.batch, T = c.sequence, D = c.width, H = c.heads, V = c.vocab, F = c.ffn,
               e = c.dtype_bytes;
  for (auto m :
       {detail::tensor_size(cfg, "attention scores", "batch * heads * sequence^2 * dtype_bytes",
                            B * H * T * T * e, "batch or sequence"),
        detail::tensor_size(cfg, "logits", "batch * sequence * vocab * dtype_bytes", B * T * V * e,
                            "batch, sequence or vocab"),
        detail::tensor_size(cfg, "MLP's hidden activation", "batch * sequence * ffn * dtype_bytes",
                            B * T * F * e, "batch, sequence or ffn"),
        detail::tensor_size(cfg, "embedding table", "vocab * width * dtype_bytes", V * D * e,
                            "vocab or width"),
        detail::tensor_size(cfg, "MLP's weights", "width * ffn * dtype_bytes", D * F * e,
                            "width or ffn")})
    if (m) return bad(*m);
  return {};
}

/// The decoder's training graph as a forward DAG with its parameters (ops and decisions at the
/// top of this header), roofline times on `device` and the cost model in the DAG.
inline result<forward_dag> llama(const llama_config& c, const device_model& device) {
  if (auto v = validate(c); !v) return v.err();
  if (auto v = validate(device); !v) return v.err();
  const double B = c.batch, T = c.sequence, D = c.width, H = c.heads, V = c.vocab, F = c.ffn,
               e = c.dtype_bytes;
  const double N = B * T;                   // tokens
  const double U = N * D * e;               // one residual-stream activation
  const double G = N * F * e;               // one MLP hidden activation
  const double S = B * H * T * T * e;       // one attention-score tensor
  const double P = B * H * T * T;           // its elements
  const double Dp = D * e;                  // an RMSNorm weight
  const double stats = N * 4;               // RMSNorm's saved reciprocal RMS, fp32 per token
  const double rope = 2 * T * (D / H) * e;  // the cos and sin tables
  const std::string dtype = detail::parameter_dtype(c.dtype_bytes);

  detail::dag_maker m(device);
  // y = x * rsqrt(mean(x^2) + eps) * w: its backward reads x and the saved statistics.
  auto rms_norm = [&](const std::string& name, const std::string& x) {
    m.add_with_weights({.name = name,
                        .inputs = {x},
                        .output = U,
                        .phantom = stats,
                        .backward_reads = {x},
                        .forward = {4 * N * D, 2 * U + stats + Dp},
                        .backward = {8 * N * D, 3 * U + stats + 2 * Dp}},
                       Dp, 0, dtype);
  };
  auto linear = [&](const std::string& name, const std::string& x, double in, double out) {
    m.add_with_weights(detail::linear(name, x, N, in, out, e, false), in * out * e, 0, dtype);
  };
  // Rotary embedding of q or k: x * cos + rotate(x) * sin; its backward needs only the tables.
  auto rotary = [&](const std::string& name, const std::string& x) {
    m.add({.name = name,
           .inputs = {x},
           .output = U,
           .phantom = 0,
           .backward_reads = {},
           .forward = {3 * N * D, 2 * U + rope},
           .backward = {3 * N * D, 2 * U + rope},
           .forward_temp = U,
           .backward_temp = U});
  };

  // The token embedding (detail::embedding).
  m.add_with_weights(detail::embedding("embed_tokens", "input", N, D, V, e), V * D * e, 0, dtype);
  std::string x = "embed_tokens";

  for (int i = 0; i < c.layers; ++i) {
    const std::string h = "layers." + std::to_string(i) + ".";
    rms_norm(h + "input_layernorm", x);
    for (const char* p : {"q_proj", "k_proj", "v_proj"})
      linear(h + "self_attn." + p, h + "input_layernorm", D, D);
    rotary(h + "self_attn.rotary_q", h + "self_attn.q_proj");
    rotary(h + "self_attn.rotary_k", h + "self_attn.k_proj");
    // scores, softmax and context as GPT-2's (zoo/gpt2.hpp), without dropout.
    m.add(detail::attention_scores(h + "self_attn.scores", h + "self_attn.rotary_q",
                                   h + "self_attn.rotary_k", U, U, S, P, T * T, D / H));
    m.add(detail::attention_softmax(h + "self_attn.softmax", h + "self_attn.scores", S, P));
    m.add(detail::attention_context(h + "self_attn.context", h + "self_attn.softmax",
                                    h + "self_attn.v_proj", U, U, S, P, D / H));
    linear(h + "self_attn.o_proj", h + "self_attn.context", D, D);
    m.add(detail::residual_add(h + "add_1", x, h + "self_attn.o_proj", U, N * D));
    rms_norm(h + "post_attention_layernorm", h + "add_1");
    linear(h + "mlp.gate_proj", h + "post_attention_layernorm", D, F);
    linear(h + "mlp.up_proj", h + "post_attention_layernorm", D, F);
    // silu(gate) * up: reads both in the backward; sigmoid recomputed there.
    m.add({.name = h + "mlp.act",
           .inputs = {h + "mlp.gate_proj", h + "mlp.up_proj"},
           .output = G,
           .phantom = 0,
           .backward_reads = {h + "mlp.gate_proj", h + "mlp.up_proj"},
           .forward = {6 * N * F, 3 * G},
           .backward = {12 * N * F, 5 * G},
           .forward_temp = G,
           .backward_temp = G});
    linear(h + "mlp.down_proj", h + "mlp.act", F, D);
    m.add(detail::residual_add(h + "add_2", h + "add_1", h + "mlp.down_proj", U, N * D));
    x = h + "add_2";
  }

  rms_norm("norm", x);
  linear("lm_head", "norm", D, V);
  m.add(detail::cross_entropy("loss", "lm_head", N, V, e));

  std::string name = "Llama, " + std::to_string(c.layers) + " layers, width " +
                     std::to_string(c.width) + ", " + std::to_string(c.heads) + " heads, ffn " +
                     std::to_string(c.ffn) + ", vocab " + std::to_string(c.vocab) + ", sequence " +
                     std::to_string(c.sequence) + ", batch " + std::to_string(c.batch) + ", " +
                     detail::dtype_name(c.dtype_bytes) + ", " + device.name + " roofline";
  return std::move(m).finish(std::move(name), 8 * N, "llama");
}

}  // namespace remat::zoo
