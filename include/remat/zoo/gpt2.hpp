#pragma once
// GPT-2 [Radford et al., 2019] as a forward DAG at the granularity PyTorch's autograd sees in eager
// mode: one op per autograd node that holds memory (17 per layer: layer norms, the attention's
// projections, scores, softmax, dropout, the MLP, the residual adds), with eager attention,
// pre-norm blocks and tied embeddings, sizes from the shapes and times from the roofline of
// zoo/roofline.hpp. Every op with its sizes and work: docs/zoo.md, "GPT-2".

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/detail/dag_maker.hpp>
#include <remat/zoo/roofline.hpp>

namespace remat::zoo {

/// GPT-2's shape and training setup; the defaults are GPT-2 small (124M parameters) at its full
/// context, batch 8, fp32, dropout 0.1 (the paper's).
struct gpt2_config {
  int layers = 12;
  int width = 768;  ///< d_model
  int heads = 12;
  int sequence = 1024;
  int batch = 8;
  int vocab = 50257;
  int dtype_bytes = 4;   ///< 2 (fp16, bf16), 4 (fp32) or 8 (fp64)
  double dropout = 0.1;  ///< the probability of every dropout; 0 leaves the dropout ops out
};

/// Checks a configuration; the message names the field and what would be accepted.
inline result<void> validate(const gpt2_config& c) {
  constexpr std::string_view cfg = "gpt2_config";
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  // 10000 layers make 170,006 ops; GPT-3 has 96.
  if (auto e = detail::positive_field(cfg, "layers", c.layers, 10000, "12 for GPT-2 small"))
    return bad(*e);
  if (auto e = detail::positive_field(cfg, "width", c.width, 1 << 20, "768")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "heads", c.heads, c.width, "12")) return bad(*e);
  if (c.width % c.heads != 0)
    return bad(std::string(cfg) + ": width " + std::to_string(c.width) +
               " is not divisible by heads " + std::to_string(c.heads) +
               "; each head has width / heads features (768 and 12 give 64)");
  if (auto e = detail::positive_field(cfg, "sequence", c.sequence, 1 << 24, "1024")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "batch", c.batch, 1 << 24, "8")) return bad(*e);
  if (auto e = detail::positive_field(cfg, "vocab", c.vocab, 1 << 24, "50257")) return bad(*e);
  if (auto e = detail::dtype_field(cfg, c.dtype_bytes)) return bad(*e);
  if (!std::isfinite(c.dropout) || c.dropout < 0 || c.dropout >= 1)
    return bad(std::string(cfg) + ": dropout is " + remat::detail::time_text(c.dropout) +
               "; it must be a probability in [0, 1) (0.1 as in GPT-2, 0 for none)");
  // The embedding table (vocab * width * dtype_bytes) is at most 2^47 bytes within the fields'
  // bounds; the activations below can be larger.
  const double B = c.batch, T = c.sequence, D = c.width, H = c.heads, V = c.vocab,
               e = c.dtype_bytes;
  for (auto m :
       {detail::tensor_size(cfg, "attention scores", "batch * heads * sequence^2 * dtype_bytes",
                            B * H * T * T * e, "batch or sequence"),
        detail::tensor_size(cfg, "logits", "batch * sequence * vocab * dtype_bytes", B * T * V * e,
                            "batch, sequence or vocab"),
        detail::tensor_size(cfg, "MLP's hidden activation",
                            "batch * sequence * 4 * width * dtype_bytes", B * T * 4 * D * e,
                            "batch, sequence or width")})
    if (m) return bad(*m);
  return {};
}

/// GPT-2's training graph as a forward DAG (ops and decisions at the top of this header), with
/// roofline times on `device` and the cost model recorded in the DAG (forward_dag::costs).
inline result<forward_dag> gpt2(const gpt2_config& c, const device_model& device) {
  if (auto v = validate(c); !v) return v.err();
  if (auto v = validate(device); !v) return v.err();
  const double B = c.batch, T = c.sequence, D = c.width, H = c.heads, V = c.vocab,
               e = c.dtype_bytes;
  const double N = B * T;              // tokens
  const double U = N * D * e;          // one residual-stream activation
  const double S = B * H * T * T * e;  // one attention-score tensor
  const double P = B * H * T * T;      // its elements, and its dropout mask's bytes
  const bool dropout = c.dropout > 0;

  detail::dag_maker m(device);
  auto drop = [&](std::string name, const std::string& x, double n, double elems) {
    m.add(detail::dropout(std::move(name), x, n, elems));
  };
  auto layer_norm = [&](std::string name, const std::string& x) {
    m.add(detail::layer_norm(std::move(name), x, N, D, e));
  };

  // Embeddings: wte, the token lookup (detail::embedding).
  m.add(detail::embedding("wte", "input", N, D, V, e));
  // wpe_add: x + wpe[0:T] (broadcast over the batch); backward: wpe's gradient sums dy over the
  // batch (dy read, T D e written); the token embedding's gradient is dy itself.
  m.add({.name = "wpe_add",
         .inputs = {"wte"},
         .output = U,
         .phantom = 0,
         .backward_reads = {},
         .forward = {N * D, 2 * U + T * D * e},
         .backward = {N * D, U + T * D * e}});
  std::string x = "wpe_add";
  if (dropout) {
    drop("drop", x, U, N * D);
    x = "drop";
  }

  for (int i = 0; i < c.layers; ++i) {
    const std::string h = "h" + std::to_string(i) + ".";
    layer_norm(h + "ln_1", x);
    for (const char* p : {"q", "k", "v"})
      m.add(detail::linear(h + "attn." + p, h + "ln_1", N, D, D, e, true));
    m.add(detail::attention_scores(h + "attn.scores", h + "attn.q", h + "attn.k", U, U, S, P, T * T,
                                   D / H));
    m.add(detail::attention_softmax(h + "attn.softmax", h + "attn.scores", S, P));
    std::string probs = h + "attn.softmax";
    if (dropout) {
      drop(h + "attn.attn_drop", probs, S, P);
      probs = h + "attn.attn_drop";
    }
    m.add(detail::attention_context(h + "attn.context", probs, h + "attn.v", U, U, S, P, D / H));
    m.add(detail::linear(h + "attn.c_proj", h + "attn.context", N, D, D, e, true));
    std::string branch = h + "attn.c_proj";
    if (dropout) {
      drop(h + "attn.resid_drop", branch, U, N * D);
      branch = h + "attn.resid_drop";
    }
    m.add(detail::residual_add(h + "add_1", x, branch, U, N * D));
    layer_norm(h + "ln_2", h + "add_1");
    m.add(detail::linear(h + "mlp.c_fc", h + "ln_2", N, D, 4 * D, e, true));
    m.add({.name = h + "mlp.gelu",
           .inputs = {h + "mlp.c_fc"},
           .output = 4 * U,
           .phantom = 0,
           .backward_reads = {h + "mlp.c_fc"},
           .forward = {8 * 4 * N * D, 2 * 4 * U},
           .backward = {16 * 4 * N * D, 3 * 4 * U}});
    m.add(detail::linear(h + "mlp.c_proj", h + "mlp.gelu", N, 4 * D, D, e, true));
    branch = h + "mlp.c_proj";
    if (dropout) {
      drop(h + "mlp.drop", branch, U, N * D);
      branch = h + "mlp.drop";
    }
    m.add(detail::residual_add(h + "add_2", h + "add_1", branch, U, N * D));
    x = h + "add_2";
  }

  layer_norm("ln_f", x);
  m.add(detail::linear("lm_head", "ln_f", N, D, V, e, false));  // tied to wte, no bias
  m.add(detail::cross_entropy("loss", "lm_head", N, V, e));

  std::string name = "GPT-2, " + std::to_string(c.layers) + " layers, width " +
                     std::to_string(c.width) + ", " + std::to_string(c.heads) +
                     " heads, sequence " + std::to_string(c.sequence) + ", batch " +
                     std::to_string(c.batch) + ", vocab " + std::to_string(c.vocab) + ", " +
                     detail::dtype_name(c.dtype_bytes) + ", dropout " +
                     remat::detail::time_text(c.dropout) + ", " + device.name + " roofline";
  return std::move(m).finish(std::move(name), 8 * N, "gpt2");
}

}  // namespace remat::zoo
