#pragma once
// Example models for the executor and the profiler: a model is a
// std::vector<std::unique_ptr<eg::layer>> (a random-access range of pointer-like layers; the
// default remat::exec traits dereference them), the last layer being the loss. Plus what a
// training loop needs around it (input, SGD, gradients as flat vectors for bitwise
// comparisons) and backprop(), plain training (store-all), the reference the executor's
// gradients must equal bit for bit.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <eigen/layers.hpp>
#include <eigen/tensor.hpp>

#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>

namespace eg {

using model = std::vector<std::unique_ptr<layer>>;

enum class activation { gelu, relu };

/// depth x [linear(width, width), activation, dropout(p) when p > 0], then mse_loss against a
/// batch x width target. Stages are named fc1, gelu1 (relu1), drop1, ..., loss. Layer i's
/// parameters and dropout engine are seeded from derive_seed(seed, i).
[[nodiscard]] inline model make_mlp(int depth, index width, index batch, std::uint64_t seed,
                                    float dropout_p = 0.0f, activation act = activation::gelu) {
  if (depth < 0 || width <= 0 || batch <= 0)
    throw std::invalid_argument("eg::make_mlp: needs depth >= 0, width > 0 and batch > 0");
  model m;
  std::uint64_t part = 0;
  for (int i = 1; i <= depth; ++i) {
    const std::string k = std::to_string(i);
    m.push_back(std::make_unique<linear>(width, width, derive_seed(seed, part++), "fc" + k));
    if (act == activation::gelu)
      m.push_back(std::make_unique<gelu>("gelu" + k));
    else
      m.push_back(std::make_unique<relu>("relu" + k));
    if (dropout_p > 0.0f)
      m.push_back(std::make_unique<dropout>(dropout_p, derive_seed(seed, part++), "drop" + k));
  }
  m.push_back(std::make_unique<mse_loss>(batch, width, derive_seed(seed, part++), "loss"));
  return m;
}

/// Transformer-like: depth x [residual_mlp(width, hidden), dropout(p) when p > 0], then a
/// final layer_norm, a linear(width, width) head and mse_loss against a batch x width target.
/// Stages are named block1, drop1, ..., ln_f, head, loss.
[[nodiscard]] inline model make_residual_stack(int depth, index width, index hidden, index batch,
                                               std::uint64_t seed, float dropout_p = 0.0f) {
  if (depth < 0 || width <= 0 || hidden <= 0 || batch <= 0)
    throw std::invalid_argument(
        "eg::make_residual_stack: needs depth >= 0, width > 0, hidden > 0 and batch > 0");
  model m;
  std::uint64_t part = 0;
  for (int i = 1; i <= depth; ++i) {
    const std::string k = std::to_string(i);
    m.push_back(
        std::make_unique<residual_mlp>(width, hidden, derive_seed(seed, part++), "block" + k));
    if (dropout_p > 0.0f)
      m.push_back(std::make_unique<dropout>(dropout_p, derive_seed(seed, part++), "drop" + k));
  }
  m.push_back(std::make_unique<layer_norm>(width, 1e-5f, "ln_f"));
  m.push_back(std::make_unique<linear>(width, width, derive_seed(seed, part++), "head"));
  m.push_back(std::make_unique<mse_loss>(batch, width, derive_seed(seed, part++), "loss"));
  return m;
}

/// A batch x width input, uniform in [-1, 1) from the seed, allocated through b.
[[nodiscard]] inline tensor make_input(backend& b, index batch, index width, std::uint64_t seed) {
  tensor x = tensor::uninitialized(b, batch, width);
  fill_synthetic(x, seed);
  return x;
}

inline void zero_grad(model& m) {
  for (auto& l : m) l->zero_grad();
}
inline void sgd_step(model& m, float lr) {
  for (auto& l : m) l->sgd_step(lr);
}
[[nodiscard]] inline std::size_t parameter_count(const model& m) {
  std::size_t n = 0;
  for (const auto& l : m) n += l->parameter_count();
  return n;
}
/// Every parameter gradient, layer by layer, parameter by parameter, row-major.
[[nodiscard]] inline std::vector<float> flat_gradients(const model& m) {
  std::vector<float> v;
  v.reserve(parameter_count(m));
  for (const auto& l : m)
    for (const auto& p : l->parameters())
      v.insert(v.end(), p.grad.data(), p.grad.data() + p.grad.size());
  return v;
}
/// Every parameter value, in the order of flat_gradients.
[[nodiscard]] inline std::vector<float> flat_parameters(const model& m) {
  std::vector<float> v;
  v.reserve(parameter_count(m));
  for (const auto& l : m)
    for (const auto& p : l->parameters())
      v.insert(v.end(), p.value.data(), p.value.data() + p.value.size());
  return v;
}
/// The random state of every layer, in order (to replay an iteration).
[[nodiscard]] inline std::vector<rng_state> random_states(const model& m) {
  std::vector<rng_state> s;
  s.reserve(m.size());
  for (const auto& l : m) s.push_back(l->random_state());
  return s;
}
inline void set_random_states(model& m, const std::vector<rng_state>& s) {
  if (s.size() != m.size())
    throw std::invalid_argument("eg::set_random_states: one state per layer");
  for (std::size_t i = 0; i < m.size(); ++i) m[i]->set_random_state(s[i]);
}

/// Plain training (store-all): forward_save every stage, then the loss backward and every
/// backward in reverse, freeing each stage's output and context once its backward is done.
/// Accumulates the gradients (call zero_grad first for fresh ones) and returns the loss.
/// Its peak on b is the store-all peak of the chain.
inline float backprop(model& m, const tensor& x, backend& b) {
  if (m.empty() || !m.back()->is_loss())
    throw std::invalid_argument("eg::backprop: the last layer must be a loss");
  const std::size_t n = m.size();
  std::vector<tensor> ys(n);
  std::vector<context> ctxs(n);
  const auto input = [&](std::size_t i) -> const tensor& { return i == 0 ? x : ys[i - 1]; };
  for (std::size_t i = 0; i < n; ++i) {
    b.set_activity("F" + std::to_string(i + 1) + "_all of stage " + std::to_string(i + 1) + " ('" +
                   m[i]->name() + "')");
    ys[i] = m[i]->forward_save(input(i), ctxs[i], b);
  }
  const float loss = ys[n - 1].mat()(0, 0);
  tensor dy;
  for (std::size_t i = n; i-- > 0;) {
    b.set_activity("B" + std::to_string(i + 1) + " of stage " + std::to_string(i + 1) + " ('" +
                   m[i]->name() + "')");
    tensor dx = i + 1 == n ? m[i]->backward(input(i), ys[i], ctxs[i], b)
                           : m[i]->backward(input(i), ys[i], ctxs[i], dy, b);
    ys[i].release();
    ctxs[i].clear();
    dy = std::move(dx);
  }
  return loss;
}

// --- DAG models
// ------------------------------------------------------------------------------------ A DAG model
// is the layers plus, per layer, its op: a name and the tensors it reads ("input" or other ops'
// names). The builders list the ops in a topological order, so that plain training (backprop below)
// sums gradient contributions in the order of the graph's store-all program.

using dag = remat::exec::dag_model<model>;

/// Appends a layer and its op; returns the op's name.
inline std::string add_op(dag& d, std::unique_ptr<layer> l, std::vector<std::string> inputs) {
  std::string name = l->name();
  d.layers.push_back(std::move(l));
  d.ops.push_back({name, std::move(inputs)});
  return name;
}

/// A residual net: depth x [fc<i>a = linear(width, hidden), act<i> = gelu, fc<i>b =
/// linear(hidden, width), res<i> = add(previous, fc<i>b)], then a linear head and mse_loss
/// against a batch x width target. Each res<i> (and the input) is read twice.
[[nodiscard]] inline dag make_residual_dag(int depth, index width, index hidden, index batch,
                                           std::uint64_t seed) {
  if (depth < 1 || width <= 0 || hidden <= 0 || batch <= 0)
    throw std::invalid_argument(
        "eg::make_residual_dag: needs depth >= 1, width > 0, hidden > 0 and batch > 0");
  dag d;
  std::uint64_t part = 0;
  std::string prev = "input";
  for (int i = 1; i <= depth; ++i) {
    const std::string k = std::to_string(i);
    const auto a = add_op(
        d, std::make_unique<linear>(width, hidden, derive_seed(seed, part++), "fc" + k + "a"),
        {prev});
    const auto g = add_op(d, std::make_unique<gelu>("act" + k), {a});
    const auto b = add_op(
        d, std::make_unique<linear>(hidden, width, derive_seed(seed, part++), "fc" + k + "b"), {g});
    prev = add_op(d, std::make_unique<add>("res" + k), {prev, b});
  }
  const auto h =
      add_op(d, std::make_unique<linear>(width, width, derive_seed(seed, part++), "head"), {prev});
  add_op(d, std::make_unique<mse_loss>(batch, width, derive_seed(seed, part++), "loss"), {h});
  return d;
}

/// One transformer-like block over a batch x width input (the rows as positions): ln1, then
/// q, k, v = linear(width, width) of it (ln1 has three readers), attn = attention(q, k, v),
/// proj = linear(width, width), res1 = add(proj, input); ln2, fc1 = linear(width, hidden), gelu,
/// fc2 = linear(hidden, width), res2 = add(fc2, res1); mse_loss against a batch x width target.
[[nodiscard]] inline dag make_attention_dag(index width, index hidden, index batch,
                                            std::uint64_t seed) {
  if (width <= 0 || hidden <= 0 || batch <= 0)
    throw std::invalid_argument(
        "eg::make_attention_dag: needs width > 0, hidden > 0 and batch > 0");
  dag d;
  std::uint64_t part = 0;
  auto lin = [&](index in, index out, std::string name) {
    return std::make_unique<linear>(in, out, derive_seed(seed, part++), std::move(name));
  };
  const auto ln1 = add_op(d, std::make_unique<layer_norm>(width, 1e-5f, "ln1"), {"input"});
  const auto q = add_op(d, lin(width, width, "q"), {ln1});
  const auto k = add_op(d, lin(width, width, "k"), {ln1});
  const auto v = add_op(d, lin(width, width, "v"), {ln1});
  const auto at = add_op(d, std::make_unique<attention>("attn"), {q, k, v});
  const auto proj = add_op(d, lin(width, width, "proj"), {at});
  const auto res1 = add_op(d, std::make_unique<add>("res1"), {proj, "input"});
  const auto ln2 = add_op(d, std::make_unique<layer_norm>(width, 1e-5f, "ln2"), {res1});
  const auto fc1 = add_op(d, lin(width, hidden, "fc1"), {ln2});
  const auto g = add_op(d, std::make_unique<gelu>("gelu"), {fc1});
  const auto fc2 = add_op(d, lin(hidden, width, "fc2"), {g});
  const auto res2 = add_op(d, std::make_unique<add>("res2"), {fc2, res1});
  add_op(d, std::make_unique<mse_loss>(batch, width, derive_seed(seed, part++), "loss"), {res2});
  return d;
}

/// A U-Net-like net (not a sequence: its skips span the whole depth), over a batch x width input:
/// a down path of depth x [down<i> = linear(width, width), dact<i> = gelu] (i = 1 .. depth), a
/// bottom = linear(width, hidden), bact = gelu, up0 = linear(hidden, width), then an up path of
/// depth x [up<i>a = add(previous, dact<i>) for i = depth .. 1, up<i> = linear(width, width),
/// uact<i> = gelu], a linear head and mse_loss against a batch x width target. dact<i> is read by
/// down<i+1> and, through the skip, by up<i>a, so it is alive across every level below it.
[[nodiscard]] inline dag make_unet_dag(int depth, index width, index hidden, index batch,
                                       std::uint64_t seed) {
  if (depth < 1 || width <= 0 || hidden <= 0 || batch <= 0)
    throw std::invalid_argument(
        "eg::make_unet_dag: needs depth >= 1, width > 0, hidden > 0 and batch > 0");
  dag d;
  std::uint64_t part = 0;
  auto lin = [&](index in, index out, std::string name) {
    return std::make_unique<linear>(in, out, derive_seed(seed, part++), std::move(name));
  };
  std::vector<std::string> skip;
  std::string prev = "input";
  for (int i = 1; i <= depth; ++i) {
    const std::string k = std::to_string(i);
    const auto down = add_op(d, lin(width, width, "down" + k), {prev});
    prev = add_op(d, std::make_unique<gelu>("dact" + k), {down});
    skip.push_back(prev);
  }
  const auto bottom = add_op(d, lin(width, hidden, "bottom"), {prev});
  const auto bact = add_op(d, std::make_unique<gelu>("bact"), {bottom});
  prev = add_op(d, lin(hidden, width, "up0"), {bact});
  for (int i = depth; i >= 1; --i) {
    const std::string k = std::to_string(i);
    const auto join = add_op(d, std::make_unique<add>("up" + k + "a"),
                             {prev, skip[static_cast<std::size_t>(i - 1)]});
    const auto up = add_op(d, lin(width, width, "up" + k), {join});
    prev = add_op(d, std::make_unique<gelu>("uact" + k), {up});
  }
  const auto h = add_op(d, lin(width, width, "head"), {prev});
  add_op(d, std::make_unique<mse_loss>(batch, width, derive_seed(seed, part++), "loss"), {h});
  return d;
}

/// A GPT-like transformer at op granularity, over `batch` sequences of `sequence` tokens: the
/// input and every activation are (batch * sequence) x width, tokens as rows (see eg::scores).
/// `layers` blocks h0, h1, ..., each (x the block's input)
///   ln1 = layer_norm(x); q, k, v = linear(width, width) of ln1 (ln1 has three readers);
///   scores(q, k) (`heads` heads, causal); softmax; attn_drop = dropout;
///   context = attention_context(attn_drop, v); proj = linear(width, width); proj_drop = dropout;
///   res1 = add(proj_drop, x); ln2 = layer_norm(res1); fc = linear(width, 4 width); gelu;
///   fc2 = linear(4 width, width); mlp_drop = dropout; res2 = add(mlp_drop, res1)
/// then ln_f = layer_norm and loss = mse_loss against a (batch * sequence) x width target.
/// Ops are named "h0.ln1", "h0.q", ..., "h1.res2", "ln_f", "loss": 17 per block and 2 more.
/// With dropout_p == 0 the three dropouts of a block are left out (their readers read what they
/// would have read): 14 per block. Parameters and dropout engines are seeded from
/// derive_seed(seed, i), i counting the layers that take a seed in order.
[[nodiscard]] inline dag make_gpt_dag(int layers, index width, index heads, index sequence,
                                      index batch, float dropout_p, std::uint64_t seed,
                                      bool causal = true) {
  if (layers < 0 || width <= 0 || heads <= 0 || sequence <= 0 || batch <= 0 || width % heads != 0)
    throw std::invalid_argument(
        "eg::make_gpt_dag: needs layers >= 0, width, heads, sequence and batch > 0, and heads "
        "dividing width");
  dag d;
  std::uint64_t part = 0;
  auto lin = [&](index in, index out, std::string name) {
    return std::make_unique<linear>(in, out, derive_seed(seed, part++), std::move(name));
  };
  // A dropout op after `from` when dropout_p > 0, else `from` itself.
  auto drop = [&](const std::string& from, std::string name) {
    if (dropout_p <= 0.0f) return from;
    return add_op(d,
                  std::make_unique<dropout>(dropout_p, derive_seed(seed, part++), std::move(name)),
                  {from});
  };
  std::string x = "input";
  for (int i = 0; i < layers; ++i) {
    const std::string h = "h" + std::to_string(i) + ".";
    const auto ln1 = add_op(d, std::make_unique<layer_norm>(width, 1e-5f, h + "ln1"), {x});
    const auto q = add_op(d, lin(width, width, h + "q"), {ln1});
    const auto k = add_op(d, lin(width, width, h + "k"), {ln1});
    const auto v = add_op(d, lin(width, width, h + "v"), {ln1});
    const auto s =
        add_op(d, std::make_unique<scores>(heads, sequence, causal, h + "scores"), {q, k});
    const auto p = add_op(d, std::make_unique<softmax>(h + "softmax"), {s});
    const auto pd = drop(p, h + "attn_drop");
    const auto c = add_op(d, std::make_unique<attention_context>(heads, h + "context"), {pd, v});
    const auto proj = add_op(d, lin(width, width, h + "proj"), {c});
    const auto projd = drop(proj, h + "proj_drop");
    const auto res1 = add_op(d, std::make_unique<add>(h + "res1"), {projd, x});
    const auto ln2 = add_op(d, std::make_unique<layer_norm>(width, 1e-5f, h + "ln2"), {res1});
    const auto fc = add_op(d, lin(width, 4 * width, h + "fc"), {ln2});
    const auto g = add_op(d, std::make_unique<gelu>(h + "gelu"), {fc});
    const auto fc2 = add_op(d, lin(4 * width, width, h + "fc2"), {g});
    const auto fc2d = drop(fc2, h + "mlp_drop");
    x = add_op(d, std::make_unique<add>(h + "res2"), {fc2d, res1});
  }
  const auto lnf = add_op(d, std::make_unique<layer_norm>(width, 1e-5f, "ln_f"), {x});
  add_op(d, std::make_unique<mse_loss>(batch * sequence, width, derive_seed(seed, part++), "loss"),
         {lnf});
  return d;
}

/// Plain training of a DAG model listed in a topological order: forward_save of every op in
/// the listing order, then every backward in reverse, each adding its contributions to its
/// inputs' gradients (created by the first); outputs and contexts freed once their backward is
/// done, gradients once read. Accumulates the parameter gradients, returns the loss; the input
/// gradient goes to *input_grad when given.
inline float backprop(dag& d, const tensor& x, backend& b,
                      std::optional<tensor>* input_grad = nullptr) {
  const std::size_t n = d.ops.size();
  if (n == 0 || d.layers.size() != n || !d.layers.back()->is_loss())
    throw std::invalid_argument("eg::backprop: one layer per op, the last a loss");
  std::unordered_map<std::string, std::size_t> position;
  for (std::size_t i = 0; i < n; ++i) position.emplace(d.ops[i].name, i);
  constexpr std::size_t graph_input = static_cast<std::size_t>(-1);
  auto source = [&](const std::string& in) {
    return in == "input" ? graph_input : position.at(in);
  };
  std::vector<tensor> ys(n);
  std::vector<context> ctxs(n);
  std::vector<std::optional<tensor>> grads(n);
  std::optional<tensor> dx_input;
  auto value = [&](std::size_t j) -> const tensor* { return j == graph_input ? &x : &ys[j]; };
  auto grad = [&](std::size_t j) -> std::optional<tensor>& {
    return j == graph_input ? dx_input : grads[j];
  };
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<const tensor*> xs;
    for (const auto& in : d.ops[i].inputs) xs.push_back(value(source(in)));
    ys[i] = d.layers[i]->forward_save(xs, ctxs[i], b);
  }
  const float loss = ys[n - 1].mat()(0, 0);
  for (std::size_t i = n; i-- > 0;) {
    const auto reads = d.layers[i]->backward_reads();
    std::vector<const tensor*> xs;
    std::vector<std::optional<tensor>> dx;
    for (const auto& in : d.ops[i].inputs) {
      xs.push_back(reads.inputs ? value(source(in)) : nullptr);
      dx.push_back(std::move(grad(source(in))));
    }
    const tensor* y = reads.output ? &ys[i] : nullptr;
    if (i + 1 == n)
      d.layers[i]->backward(xs, y, ctxs[i], dx, b);
    else
      d.layers[i]->backward(xs, y, ctxs[i], *grads[i], dx, b);
    for (std::size_t j = 0; j < dx.size(); ++j) grad(source(d.ops[i].inputs[j])) = std::move(dx[j]);
    ys[i].release();
    ctxs[i].clear();
    grads[i].reset();
  }
  if (input_grad != nullptr) *input_grad = std::move(dx_input);
  return loss;
}

}  // namespace eg
