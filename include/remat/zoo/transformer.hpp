#pragma once
// The encoder-decoder Transformer [Vaswani et al., 2017, "Attention is all you need"] as a
// forward DAG at the granularity PyTorch's autograd sees in eager mode, with its weights: the
// source's embedding, an encoder of self-attention and ReLU FFN layers, the target's embedding,
// a decoder whose layers have masked self-attention, cross-attention over the encoder's final
// output and the FFN, then the head (tied to the shared embedding) and the loss. Pre-norm layers
// (as zoo/gpt2.hpp's, with a final layer norm after each stack), eager attention, sizes from the
// shapes and times from the roofline of zoo/roofline.hpp. Not a sequence: every decoder layer's
// cross-attention reads the encoder's output. Every op and weight: docs/zoo.md,
// "Encoder-decoder Transformer".

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include <remat/core/result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/detail/dag_maker.hpp>
#include <remat/zoo/roofline.hpp>

namespace remat::zoo {

/// The encoder-decoder's shape and training setup; the defaults are the paper's base model
/// (6 + 6 layers, width 512, 8 heads, FFN 2048, dropout 0.1) on 512-token sequences, batch 8,
/// a 32000-token shared vocabulary, fp32.
struct encoder_decoder_config {
  int encoder_layers = 6;
  int decoder_layers = 6;
  int width = 512;  ///< d_model
  int heads = 8;
  int ffn = 2048;  ///< the FFN's hidden width, d_ff
  int source_sequence = 512;
  int target_sequence = 512;
  int batch = 8;
  int vocab = 32000;     ///< shared by the source and the target (one embedding table)
  int dtype_bytes = 4;   ///< 2 (fp16, bf16), 4 (fp32) or 8 (fp64)
  double dropout = 0.1;  ///< the probability of every dropout; 0 leaves the dropout ops out
};

/// Checks a configuration; the message names the field and what would be accepted.
inline result<void> validate(const encoder_decoder_config& c) {
  constexpr std::string_view cfg = "encoder_decoder_config";
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  // 10000 + 10000 layers make 450,010 ops.
  if (auto e = detail::positive_field(cfg, "encoder_layers", c.encoder_layers, 10000,
                                      "6 for the base model"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "decoder_layers", c.decoder_layers, 10000,
                                      "6 for the base model"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "width", c.width, 1 << 20, "512")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "heads", c.heads, c.width, "8")) return bad(*e);
  if (c.width % c.heads != 0)
    return bad(std::string(cfg) + ": width " + std::to_string(c.width) +
               " is not divisible by heads " + std::to_string(c.heads) +
               "; each head has width / heads features (512 and 8 give 64)");
  if (auto e = detail::positive_field(cfg, "ffn", c.ffn, 1 << 22, "2048")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "source_sequence", c.source_sequence, 1 << 24, "512"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "target_sequence", c.target_sequence, 1 << 24, "512"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "batch", c.batch, 1 << 24, "8")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "vocab", c.vocab, 1 << 24, "32000")) return bad(*e);
  if (auto e = detail::dtype_field(cfg, c.dtype_bytes)) return bad(*e);
  if (!std::isfinite(c.dropout) || c.dropout < 0 || c.dropout >= 1)
    return bad(std::string(cfg) + ": dropout is " + remat::detail::time_text(c.dropout) +
               "; it must be a probability in [0, 1) (0.1 as in the paper's base model, 0 for "
               "none)");
  // The cross-attention's scores (B H Tt Ts) are at most the larger of the other two.
  const double B = c.batch, Ts = c.source_sequence, Tt = c.target_sequence, D = c.width,
               H = c.heads, F = c.ffn, V = c.vocab, e = c.dtype_bytes;
  for (auto m :
       {detail::tensor_size(cfg, "encoder's attention scores",
                            "batch * heads * source_sequence^2 * dtype_bytes", B * H * Ts * Ts * e,
                            "batch or source_sequence"),
        detail::tensor_size(cfg, "decoder's attention scores",
                            "batch * heads * target_sequence^2 * dtype_bytes", B * H * Tt * Tt * e,
                            "batch or target_sequence"),
        detail::tensor_size(cfg, "logits", "batch * target_sequence * vocab * dtype_bytes",
                            B * Tt * V * e, "batch, target_sequence or vocab"),
        detail::tensor_size(cfg, "FFN's hidden activation",
                            "batch * max(source_sequence, target_sequence) * ffn * dtype_bytes",
                            B * std::max(Ts, Tt) * F * e, "batch, the sequences or ffn"),
        detail::tensor_size(cfg, "embedding table", "vocab * width * dtype_bytes", V * D * e,
                            "vocab or width"),
        detail::tensor_size(cfg, "FFN's weights", "width * ffn * dtype_bytes", D * F * e,
                            "width or ffn")})
    if (m) return bad(*m);
  return {};
}

/// The encoder-decoder's training graph as a forward DAG with its parameters (ops and decisions
/// at the top of this header and in docs/zoo.md), roofline times on `device` and the cost model
/// in the DAG. The graph input ("input") holds both id tensors, int64: the source's (B x
/// source_sequence) and the target's (B x target_sequence, the decoder's input, shifted right);
/// src_embed and tgt_embed each read their part of it.
inline result<forward_dag> encoder_decoder(const encoder_decoder_config& c,
                                           const device_model& device) {
  if (auto v = validate(c); !v) return v.err();
  if (auto v = validate(device); !v) return v.err();
  const double B = c.batch, Ts = c.source_sequence, Tt = c.target_sequence, D = c.width,
               H = c.heads, F = c.ffn, V = c.vocab, e = c.dtype_bytes, dh = D / H;
  const double Ns = B * Ts, Nt = B * Tt;  // source and target tokens
  const double Us = Ns * D * e, Ut = Nt * D * e;
  const bool dropout = c.dropout > 0;
  const std::string dtype = detail::parameter_dtype(c.dtype_bytes);

  detail::dag_maker m(device);
  auto layer_norm = [&](const std::string& name, const std::string& x, double rows) {
    m.add_with_weights(detail::layer_norm(name, x, rows, D, e), D * e, D * e, dtype);
  };
  auto linear = [&](const std::string& name, const std::string& x, double rows, double in,
                    double out) {
    m.add_with_weights(detail::linear(name, x, rows, in, out, e, true), in * out * e, out * e,
                       dtype);
  };
  // `x` through a dropout of `n` bytes (`elems` elements) named `name`, when there is dropout.
  auto drop = [&](const std::string& name, const std::string& x, double n, double elems) {
    if (!dropout) return x;
    m.add(detail::dropout(name, x, n, elems));
    return name;
  };
  // The token embeddings share one table with the head (the paper's §3.4): declared once.
  const std::string shared = m.parameter("embed_tokens.weight", V * D * e, dtype);
  // `p`_embed, the lookup of `tokens` ids of sequence `T` from the graph input
  // (detail::embedding); `p`_pos = x * sqrt(D) + pe[0:T], the embedding's scale (§3.4) and the
  // sinusoidal positional encoding (§3.5), a constant buffer (T D e bytes, no gradient): two
  // kernels, the scaled embedding a temporary while the add runs (2 FLOPs an element, 4 tensors
  // and the encoding moved); its backward passes dy through the add and scales it (dx =
  // sqrt(D) dy: 1 FLOP an element, 2 tensors). Then `p`_drop. Returns the stream's start.
  auto embed = [&](const std::string& p, double tokens, double T) {
    const double U = tokens * D * e;
    detail::op_spec lookup = detail::embedding(p + "_embed", "input", tokens, D, V, e);
    lookup.parameters = {shared};
    m.add(std::move(lookup));
    m.add({.name = p + "_pos",
           .inputs = {p + "_embed"},
           .output = U,
           .phantom = 0,
           .backward_reads = {},
           .forward = {2 * tokens * D, 4 * U + T * D * e},
           .backward = {tokens * D, 2 * U},
           .forward_temp = U});
    return drop(p + "_drop", p + "_pos", U, tokens * D);
  };
  // Multi-head attention under the prefix `p`: queries from `xq` (`Nq` tokens, sequence `Tq`),
  // keys and values from `xkv` (`Nkv` tokens, sequence `Tk`), a bool mask of `mask` bytes;
  // q, k, v and out_proj are D -> D with bias (detail::linear), the scores, softmax and context
  // eager (detail::attention_*), dropout on the probabilities and on the output. Returns the
  // branch's output.
  auto attention = [&](const std::string& p, const std::string& xq, const std::string& xkv,
                       double Nq, double Nkv, double Tq, double Tk, double mask) {
    const double Q = Nq * D * e, K = Nkv * D * e, P = B * H * Tq * Tk, S = P * e;
    linear(p + "q", xq, Nq, D, D);
    linear(p + "k", xkv, Nkv, D, D);
    linear(p + "v", xkv, Nkv, D, D);
    m.add(detail::attention_scores(p + "scores", p + "q", p + "k", Q, K, S, P, mask, dh));
    m.add(detail::attention_softmax(p + "softmax", p + "scores", S, P));
    const std::string probs = drop(p + "attn_drop", p + "softmax", S, P);
    m.add(detail::attention_context(p + "context", probs, p + "v", Q, K, S, P, dh));
    linear(p + "out_proj", p + "context", Nq, D, D);
    return drop(p + "resid_drop", p + "out_proj", Q, Nq * D);
  };
  // The position-wise FFN under `p` on `N` tokens: fc1 (D -> F), ReLU (detail::relu), fc2
  // (F -> D), dropout. Returns the branch's output.
  auto ffn = [&](const std::string& p, const std::string& x, double N) {
    linear(p + "fc1", x, N, D, F);
    m.add(detail::relu(p + "relu", p + "fc1", N * F * e, N * F));
    linear(p + "fc2", p + "relu", N, F, D);
    return drop(p + "drop", p + "fc2", N * D * e, N * D);
  };

  // The encoder: self-attention over the source with its key-padding mask (B Ts bytes).
  std::string x = embed("src", Ns, Ts);
  for (int i = 0; i < c.encoder_layers; ++i) {
    const std::string h = "encoder." + std::to_string(i) + ".";
    layer_norm(h + "ln_1", x, Ns);
    std::string branch = attention(h + "attn.", h + "ln_1", h + "ln_1", Ns, Ns, Ts, Ts, Ns);
    m.add(detail::residual_add(h + "add_1", x, branch, Us, Ns * D));
    layer_norm(h + "ln_2", h + "add_1", Ns);
    branch = ffn(h + "ffn.", h + "ln_2", Ns);
    m.add(detail::residual_add(h + "add_2", h + "add_1", branch, Us, Ns * D));
    x = h + "add_2";
  }
  layer_norm("encoder.ln_f", x, Ns);
  const std::string memory = "encoder.ln_f";  // what every cross-attention's k and v read

  // The decoder: causal self-attention (a Tt^2 mask), then cross-attention whose queries come
  // from the decoder and whose keys and values from the encoder's output (the source's
  // key-padding mask), then the FFN.
  x = embed("tgt", Nt, Tt);
  for (int i = 0; i < c.decoder_layers; ++i) {
    const std::string h = "decoder." + std::to_string(i) + ".";
    layer_norm(h + "ln_1", x, Nt);
    std::string branch =
        attention(h + "self_attn.", h + "ln_1", h + "ln_1", Nt, Nt, Tt, Tt, Tt * Tt);
    m.add(detail::residual_add(h + "add_1", x, branch, Ut, Nt * D));
    layer_norm(h + "ln_2", h + "add_1", Nt);
    branch = attention(h + "cross_attn.", h + "ln_2", memory, Nt, Ns, Tt, Ts, Ns);
    m.add(detail::residual_add(h + "add_2", h + "add_1", branch, Ut, Nt * D));
    layer_norm(h + "ln_3", h + "add_2", Nt);
    branch = ffn(h + "ffn.", h + "ln_3", Nt);
    m.add(detail::residual_add(h + "add_3", h + "add_2", branch, Ut, Nt * D));
    x = h + "add_3";
  }
  layer_norm("decoder.ln_f", x, Nt);
  detail::op_spec head = detail::linear("lm_head", "decoder.ln_f", Nt, D, V, e, false);
  head.parameters = {shared};  // tied to the embedding, no bias
  m.add(std::move(head));
  m.add(detail::cross_entropy("loss", "lm_head", Nt, V, e));

  std::string name =
      "Encoder-decoder Transformer, " + std::to_string(c.encoder_layers) + " encoder and " +
      std::to_string(c.decoder_layers) + " decoder layers, width " + std::to_string(c.width) +
      ", " + std::to_string(c.heads) + " heads, ffn " + std::to_string(c.ffn) +
      ", source sequence " + std::to_string(c.source_sequence) + ", target sequence " +
      std::to_string(c.target_sequence) + ", batch " + std::to_string(c.batch) + ", vocab " +
      std::to_string(c.vocab) + ", " + detail::dtype_name(c.dtype_bytes) + ", dropout " +
      remat::detail::time_text(c.dropout) + ", " + device.name + " roofline";
  return std::move(m).finish(std::move(name), 8 * (Ns + Nt), "encoder_decoder");
}

}  // namespace remat::zoo
