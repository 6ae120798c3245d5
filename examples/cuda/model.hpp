#pragma once
// The GPT-2-style model as a chain for remat: a std::vector<std::unique_ptr<gpt::layer>> (a
// random-access range of pointer-like layers; the default remat::exec traits dereference them),
// the last layer being the loss. Plus what a training loop needs around it (synthetic token
// batches, SGD, gradients on the host for bitwise comparisons) and backprop(), plain training
// (store-all), the reference the executor's gradients must equal bit for bit.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda/layers.hpp>
#include <cuda/tensor.hpp>

namespace gpt {

using model = std::vector<std::unique_ptr<layer>>;

/// embedding, then per layer i an attention block ("attn<i>") and an MLP block ("mlp<i>"), then
/// the final layer norm ("ln_f") and the LM head with the loss ("lm_loss"): 2 L + 3 stages.
/// Each layer's parameters are seeded from derive_seed(seed, its index).
[[nodiscard]] inline model make_gpt(const config& c, std::uint64_t seed,
                                    const std::shared_ptr<blas>& cublas) {
  c.validate();
  model m;
  std::uint64_t part = 0;
  m.push_back(std::make_unique<embedding>(c, derive_seed(seed, part++), cublas));
  for (int i = 1; i <= c.layers; ++i) {
    const std::string k = std::to_string(i);
    m.push_back(
        std::make_unique<attention_block>(c, derive_seed(seed, part++), cublas, "attn" + k));
    m.push_back(std::make_unique<mlp_block>(c, derive_seed(seed, part++), cublas, "mlp" + k));
  }
  m.push_back(std::make_unique<final_norm>(c, cublas));
  m.push_back(std::make_unique<lm_loss>(c, derive_seed(seed, part++), cublas));
  return m;
}

/// A synthetic batch: batch x seq token ids uniform in [0, vocab), and the targets (each
/// position's next token; the last position's is drawn too).
struct token_batch {
  std::vector<std::int32_t> tokens, targets;
};
[[nodiscard]] inline token_batch make_batch(const config& c, std::uint64_t seed) {
  const auto n = static_cast<std::size_t>(c.rows());
  std::vector<std::int32_t> stream(n + static_cast<std::size_t>(c.batch));
  const std::uint64_t base = detail::splitmix64(seed);
  for (std::size_t i = 0; i < stream.size(); ++i)
    stream[i] = static_cast<std::int32_t>(detail::splitmix64(base + i) %
                                          static_cast<std::uint64_t>(c.vocab));
  token_batch tb;
  tb.tokens.resize(n);
  tb.targets.resize(n);
  const auto t = static_cast<std::size_t>(c.seq);
  for (std::size_t b = 0; b < static_cast<std::size_t>(c.batch); ++b)
    for (std::size_t j = 0; j < t; ++j) {
      // Sequence b is stream[b (T + 1) ...]: tokens are its first T entries, targets the next T.
      tb.tokens[b * t + j] = stream[b * (t + 1) + j];
      tb.targets[b * t + j] = stream[b * (t + 1) + j + 1];
    }
  return tb;
}

[[nodiscard]] inline lm_loss& loss_layer(model& m) {
  auto* l = m.empty() ? nullptr : dynamic_cast<lm_loss*>(m.back().get());
  if (l == nullptr)
    throw std::invalid_argument("gpt: the last layer of the model must be the lm_loss");
  return *l;
}
[[nodiscard]] inline const lm_loss& loss_layer(const model& m) {
  const auto* l = m.empty() ? nullptr : dynamic_cast<const lm_loss*>(m.back().get());
  if (l == nullptr)
    throw std::invalid_argument("gpt: the last layer of the model must be the lm_loss");
  return *l;
}

/// Uploads the batch: the targets into the loss layer, the tokens as the model's input tensor
/// (from b, so that the run counts it).
[[nodiscard]] inline tensor load_batch(model& m, const config& c, const token_batch& tb,
                                       backend& b) {
  loss_layer(m).set_targets(tb.targets);
  return tensor::from_host(b, c.batch, c.seq, tb.tokens);
}

/// Points every layer at b's compute stream (zero_grad, sgd_step and reading the loss go there):
/// call it for each new backend before anything else.
inline void bind(model& m, const backend& b) {
  for (auto& l : m) l->bind(b.stream());
}
inline void zero_grad(model& m) {
  for (auto& l : m) l->zero_grad();
}
inline void sgd_step(model& m, float lr) {
  for (auto& l : m) l->sgd_step(lr);
}
[[nodiscard]] inline std::int64_t parameter_count(const model& m) {
  std::int64_t n = 0;
  for (const auto& l : m) n += l->parameter_count();
  return n;
}

namespace detail {
template <class Member>
std::vector<float> flatten(const model& m, Member member) {
  std::vector<float> v;
  v.reserve(static_cast<std::size_t>(parameter_count(m)));
  for (const auto& l : m)
    for (const auto& p : l->parameters()) {
      const auto part = (p.*member).download(l->stream());
      v.insert(v.end(), part.begin(), part.end());
    }
  return v;
}
}  // namespace detail

/// Every parameter gradient, layer by layer, parameter by parameter (waits for the streams).
[[nodiscard]] inline std::vector<float> flat_gradients(const model& m) {
  return detail::flatten(m, &parameter::grad);
}
/// Every parameter value, in the order of flat_gradients.
[[nodiscard]] inline std::vector<float> flat_parameters(const model& m) {
  return detail::flatten(m, &parameter::value);
}
/// Sets every parameter from flat_parameters' layout (to restart from the same weights).
inline void set_parameters(model& m, const std::vector<float>& v) {
  if (static_cast<std::int64_t>(v.size()) != parameter_count(m))
    throw std::invalid_argument("gpt::set_parameters: " + std::to_string(v.size()) +
                                " values for " + std::to_string(parameter_count(m)) +
                                " parameters");
  std::size_t at = 0;
  for (auto& l : m)
    for (auto& p : l->parameters()) {
      const auto n = static_cast<std::size_t>(p.value.size());
      p.value.upload(std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(at),
                                        v.begin() + static_cast<std::ptrdiff_t>(at + n)),
                     l->stream());
      at += n;
    }
}

/// Plain training (store-all), by hand: forward_save every stage, then the loss backward and every
/// backward in reverse, freeing each stage's output and context once its backward is done.
/// Accumulates the gradients (zero_grad first for fresh ones) and returns the loss (waits for it).
/// Its peak on b is the store-all peak of the chain. The reference of the demo and the
/// hand-written loop that bench_gpu compares the executor with.
inline float backprop(model& m, const tensor& x, backend& b) {
  const std::size_t n = m.size();
  std::vector<tensor> ys(n);
  std::vector<context> ctxs(n);
  const auto input = [&](std::size_t i) -> const tensor& { return i == 0 ? x : ys[i - 1]; };
  for (std::size_t i = 0; i < n; ++i) ys[i] = m[i]->forward_save(input(i), ctxs[i], b);
  tensor dy;
  for (std::size_t i = n; i-- > 0;) {
    tensor dx = i + 1 == n ? m[i]->backward(input(i), ys[i], ctxs[i], b)
                           : m[i]->backward(input(i), ys[i], ctxs[i], dy, b);
    ys[i].release();
    ctxs[i].clear();
    dy = std::move(dx);
  }
  return loss_layer(m).last_value();
}

}  // namespace gpt
