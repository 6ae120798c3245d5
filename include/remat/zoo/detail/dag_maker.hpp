#pragma once
// What the model zoo's generators share: an op as a generator describes it (sizes as doubles,
// checked before they become byte counts), the assembly of the forward DAG with its roofline
// times and weights, and the ops that more than one architecture has (linear layer, embedding,
// layer norm, dropout, ReLU, eager attention, residual add, cross-entropy; the convolutional ones
// are in detail/conv.hpp). The decisions are stated at each function; the cost rule in
// zoo/roofline.hpp.

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/roofline.hpp>

namespace remat::zoo::detail {

/// The largest tensor a generator makes: 2^48 bytes (256 TiB). An op's bytes moved add up about
/// ten of its tensors, and every byte count of a forward DAG must stay <= 2^52 (validate), so a
/// configuration whose tensors exceed this is refused before anything is built.
inline constexpr double max_tensor_bytes = 281474976710656.0;

/// The most ops a generated DAG may have (10^6): a bound on memory for absurd depths.
inline constexpr double max_ops = 1e6;

/// The bytes of a value of the accumulation type of `e`-byte activations (a norm's statistics):
/// fp32, fp64 for e = 8, as ATen's.
inline double accumulation_bytes(double e) { return e == 8 ? 8 : 4; }

/// "fp32" for 4 bytes, and so on.
inline std::string dtype_name(int dtype_bytes) {
  return dtype_bytes == 2 ? "fp16/bf16" : dtype_bytes == 8 ? "fp64" : "fp32";
}
/// A parameter's dtype for `dtype_bytes` ("bf16" for 2: the usual training half type).
inline std::string parameter_dtype(int dtype_bytes) {
  return dtype_bytes == 2 ? "bf16" : dtype_bytes == 8 ? "fp64" : "fp32";
}

/// Checks a size field: >= 1 (and <= `most`).
inline std::optional<std::string> positive_field(std::string_view config, std::string_view field,
                                                 long long v, long long most,
                                                 std::string_view example) {
  if (v >= 1 && v <= most) return std::nullopt;
  return std::string(config) + ": " + std::string(field) + " is " + std::to_string(v) +
         "; it must be an integer from 1 to " + std::to_string(most) + " (e.g. " +
         std::string(example) + ")";
}

inline std::optional<std::string> dtype_field(std::string_view config, int dtype_bytes) {
  if (dtype_bytes == 2 || dtype_bytes == 4 || dtype_bytes == 8) return std::nullopt;
  return std::string(config) + ": dtype_bytes is " + std::to_string(dtype_bytes) +
         "; it must be 2 (fp16 or bf16), 4 (fp32) or 8 (fp64)";
}

/// Refuses a tensor over max_tensor_bytes, naming its formula and the fields that set it.
inline std::optional<std::string> tensor_size(std::string_view config, std::string_view tensor,
                                              std::string_view formula, double v,
                                              std::string_view reduce) {
  if (v <= max_tensor_bytes) return std::nullopt;
  return std::string(config) + ": the " + std::string(tensor) + " would have " +
         std::string(formula) + " = " + remat::detail::time_text(v) +
         " bytes, more than the 2^48 bytes (256 TiB) a generated tensor may have (so that every "
         "op's byte counts stay below remat's 2^52); reduce " +
         std::string(reduce);
}

/// One op before it becomes a forward_op: sizes in bytes, work for the roofline.
struct op_spec {
  std::string name;
  std::vector<std::string> inputs;
  double output = 0;   ///< output_bytes
  double phantom = 0;  ///< phantom_bytes: what autograd saves beyond the tensors it reads
  std::vector<std::string> backward_reads;
  work forward;
  work backward;
  double forward_temp = 0;                   ///< temporaries of the forward, its phantom excepted
  double backward_temp = 0;                  ///< temporaries of the backward
  std::vector<std::string> parameters = {};  ///< the weights it reads (dag_maker::parameter)
};

/// Collects op_specs and makes the forward DAG. The phantom of every op here is computed by its
/// forward (a dropout mask, a norm's statistics, pooling indices, the loss's log-probabilities),
/// so a fast-forward, which keeps no phantom, still holds it while it runs:
/// forward_overhead_bytes = temporaries + phantom, and the normal forward's
/// forward_save_overhead_bytes = temporaries (the phantom is its output), written when they
/// differ.
class dag_maker {
 public:
  explicit dag_maker(device_model d) : device_(std::move(d)) {}

  void add(op_spec s) {
    forward_op op;
    op.name = std::move(s.name);
    op.inputs = std::move(s.inputs);
    op.backward_reads = std::move(s.backward_reads);
    op.output_bytes = size(s.output, op.name, "output_bytes");
    op.phantom_bytes = size(s.phantom, op.name, "phantom_bytes");
    op.forward_overhead_bytes = size(s.forward_temp + s.phantom, op.name, "forward_overhead_bytes");
    if (s.phantom > 0)
      op.forward_save_overhead_bytes = size(s.forward_temp, op.name, "forward_save_overhead_bytes");
    op.backward_overhead_bytes = size(s.backward_temp, op.name, "backward_overhead_bytes");
    op.forward_flops = s.forward.flops;
    op.backward_flops = s.backward.flops;
    op.forward_bytes_moved = size(s.forward.bytes, op.name, "forward_bytes_moved");
    op.backward_bytes_moved = size(s.backward.bytes, op.name, "backward_bytes_moved");
    op.forward_time = roofline_time(s.forward, device_);
    op.backward_time = roofline_time(s.backward, device_);
    op.parameters = std::move(s.parameters);
    ops_.push_back(std::move(op));
  }

  /// Declares a weight of `n` bytes that ops read by name; returns the name.
  std::string parameter(std::string name, double n, std::string dtype, bool trainable = true) {
    params_.push_back({name, size(n, name, "bytes"), trainable, std::move(dtype)});
    return name;
  }

  /// Adds `s` with weights of its own, declared first: "<name>.weight" of `weight` bytes and,
  /// when `bias` > 0, "<name>.bias" of `bias` bytes, trainable, of `dtype`; the op reads them
  /// (after any parameters `s` already lists: a tied weight).
  void add_with_weights(op_spec s, double weight, double bias, const std::string& dtype) {
    s.parameters.push_back(parameter(s.name + ".weight", weight, dtype));
    if (bias > 0) s.parameters.push_back(parameter(s.name + ".bias", bias, dtype));
    add(std::move(s));
  }

  /// The forward DAG, checked by validate(forward_dag); `who` ("gpt2") starts every message.
  result<forward_dag> finish(std::string name, double input_bytes, std::string_view who) && {
    const bytes in = size(input_bytes, "input", "input_bytes");
    if (problem_)
      return error{
          status::invalid_problem,
          std::string(who) + ": " + *problem_ + "; make the model smaller (batch, sequence, image)",
          {}};
    forward_dag f{std::move(name), in, std::move(ops_)};
    f.costs = to_cost_model(device_);
    f.parameters = std::move(params_);
    if (auto v = validate(f); !v)
      return error{status::invalid_problem, std::string(who) + ": " + v.message(), {}};
    return f;
  }

 private:
  bytes size(double v, const std::string& op, std::string_view field) {
    constexpr double max_size = 4503599627370496.0;  // 2^52, validate(forward_dag)'s bound
    if (std::isfinite(v) && v >= 0 && v <= max_size) return static_cast<bytes>(std::llround(v));
    if (!problem_)
      problem_ = "op '" + op + "' would have " + std::string(field) + " = " +
                 remat::detail::time_text(v) + ", more than the 2^52 bytes remat accepts";
    return 0;
  }

  device_model device_;
  std::vector<forward_op> ops_;
  std::vector<remat::parameter> params_;
  std::optional<std::string> problem_;
};

/// An op that multiplies its input x by a weight (a linear layer, a convolution, a transposed
/// convolution): `flops` for the product, `X`, `W`, `Y` the bytes of x, the weight and the
/// output, and a bias of `bias` bytes (0: none) added to the `out_elems` elements of the output.
/// Its backward reads x (for W's gradient), not its output: dx (from dy and W) and dW (from x
/// and dy) each take the forward's FLOPs, only dW when x is the graph input (no dx), and db
/// `out_elems` FLOPs. Bytes: forward x, W, b, y; backward dy read by each product and by the
/// bias reduction, x, W, and dx, dW, db written.
inline op_spec weight_product(std::string name, const std::string& x, double X, double W, double Y,
                              double flops, double bias, double out_elems, bool input_needs_grad) {
  const double b = bias > 0 ? 1 : 0, dgrad = input_needs_grad ? 1 : 0;
  return {.name = std::move(name),
          .inputs = {x},
          .output = Y,
          .phantom = 0,
          .backward_reads = {x},
          .forward = {flops + b * out_elems, X + W + bias + Y},
          .backward = {(1 + dgrad) * flops + b * out_elems,
                       (1 + dgrad + b) * Y + X + dgrad * W + dgrad * X + W + bias}};
}

/// A linear layer y = x W (+ b) on `rows` rows, `in` -> `out` features, dtype `e` bytes
/// (weight_product): 2 rows in out FLOPs forward (+ rows out for the bias), 4 rows in out
/// backward (2 when x is the graph input) + rows out.
inline op_spec linear(std::string name, const std::string& x, double rows, double in, double out,
                      double e, bool bias, bool input_needs_grad = true) {
  return weight_product(std::move(name), x, rows * in * e, in * out * e, rows * out * e,
                        2 * rows * in * out, bias ? out * e : 0, rows * out, input_needs_grad);
}

/// A token embedding: the rows of a `vocab` x `width` table gathered for `tokens` int64 ids read
/// from `ids` (the graph input). Forward: the ids (8 bytes a token) read, the rows read and
/// written (0 FLOPs). The backward reads the ids; it zero-fills the table's gradient (vocab
/// width e bytes) and scatters dy into it (tokens width FLOPs): charged vocab width e + 3 tokens
/// width e + 8 tokens bytes.
inline op_spec embedding(std::string name, const std::string& ids, double tokens, double width,
                         double vocab, double e) {
  const double U = tokens * width * e;
  return {.name = std::move(name),
          .inputs = {ids},
          .output = U,
          .phantom = 0,
          .backward_reads = {ids},
          .forward = {0, 8 * tokens + 2 * U},
          .backward = {tokens * width, vocab * width * e + 8 * tokens + 3 * U}};
}

/// Layer norm over the last `width` features of `rows` rows (with weight and bias): it saves
/// mean and rstd (2 rows values in the accumulation type) as its phantom and reads its input in
/// the backward. FLOPs 8 an element forward, 12 backward; bytes: forward x read, y written, the
/// statistics and the weight and bias; backward dy and x read, dx written, the statistics, the
/// weight read and its and the bias's gradients written.
inline op_spec layer_norm(std::string name, const std::string& x, double rows, double width,
                          double e) {
  const double U = rows * width * e, stats = 2 * rows * accumulation_bytes(e), Dp = width * e;
  return {.name = std::move(name),
          .inputs = {x},
          .output = U,
          .phantom = stats,
          .backward_reads = {x},
          .forward = {8 * rows * width, 2 * U + stats + 2 * Dp},
          .backward = {12 * rows * width, 3 * U + stats + 3 * Dp}};
}

/// Dropout over `n` bytes of `elems` elements: it saves its mask, 1 byte an element (ATen's bool
/// mask), as its phantom, and its backward (dy * mask / (1 - p)) reads nothing else. FLOPs 2 an
/// element each way; bytes the tensor read and written and the mask written, then dy and the
/// mask read and dx written.
inline op_spec dropout(std::string name, const std::string& x, double n, double elems) {
  return {.name = std::move(name),
          .inputs = {x},
          .output = n,
          .phantom = elems,
          .backward_reads = {},
          .forward = {2 * elems, 2 * n + elems},
          .backward = {2 * elems, 2 * n + elems}};
}

/// ReLU over `n` bytes of `elems` elements, a tensor of its own (not in place): its backward
/// reads its output. 1 FLOP an element each way; x read and y written, then dy and y read and
/// dx written.
inline op_spec relu(std::string name, const std::string& x, double n, double elems) {
  return {.name = std::move(name),
          .inputs = {x},
          .output = n,
          .phantom = 0,
          .backward_reads = {"output"},
          .forward = {elems, 2 * n},
          .backward = {elems, 3 * n}};
}

/// Eager attention's three ops over `P` = B H Tq Tk scores (`S` bytes) between queries of `Q`
/// bytes and keys and values of `K` bytes each, `dh` features a head: GPT-2's and Llama's, where
/// Tq = Tk (zoo/gpt2.hpp states the decisions), and the encoder-decoder's cross-attention, where
/// the keys and values come from the source (zoo/transformer.hpp). scores: q k^T (2 P dh FLOPs,
/// q and k read, S written), scale (S read and written), masked_fill (S read with the `mask`
/// bytes of the bool mask: T^2 for a causal one, B Tk for a key-padding one; S written);
/// backward: the mask's and the scale's gradients, then dq = G k and dk = G^T q. softmax: its
/// backward reads its output. context: probs v, then the merge copy (`O` bytes, the queries'
/// size); backward: dy split into heads (a copy), d_probs = dy v^T, dv = probs^T dy.
inline op_spec attention_scores(std::string name, const std::string& q, const std::string& k,
                                double Q, double K, double S, double P, double mask, double dh) {
  return {.name = std::move(name),
          .inputs = {q, k},
          .output = S,
          .phantom = 0,
          .backward_reads = {q, k},
          .forward = {2 * P * dh + 2 * P, Q + K + 5 * S + mask},
          .backward = {4 * P * dh + 2 * P, 2 * Q + 2 * K + 6 * S + mask},
          .forward_temp = S,
          .backward_temp = S};
}
inline op_spec attention_softmax(std::string name, const std::string& scores, double S, double P) {
  return {.name = std::move(name),
          .inputs = {scores},
          .output = S,
          .phantom = 0,
          .backward_reads = {"output"},
          .forward = {5 * P, 2 * S},
          .backward = {4 * P, 3 * S}};
}
inline op_spec attention_context(std::string name, const std::string& probs, const std::string& v,
                                 double O, double K, double S, double P, double dh) {
  return {.name = std::move(name),
          .inputs = {probs, v},
          .output = O,
          .phantom = 0,
          .backward_reads = {probs, v},
          .forward = {2 * P * dh, S + K + 3 * O},
          .backward = {4 * P * dh, 2 * S + 4 * O + 2 * K},
          .forward_temp = O,
          .backward_temp = O};
}

/// A residual add z = a + b of `n` bytes (`elems` elements). The backward passes dz through to
/// both inputs and reads nothing saved; autograd copies nothing, but the residual stream's
/// gradient sums two contributions (the branch's and the skip's), and that sum is charged here:
/// read two, write one (3n bytes), 1 FLOP an element either way.
inline op_spec residual_add(std::string name, const std::string& a, const std::string& b, double n,
                            double elems) {
  return {.name = std::move(name),
          .inputs = {a, b},
          .output = n,
          .phantom = 0,
          .backward_reads = {},
          .forward = {elems, 3 * n},
          .backward = {elems, 3 * n}};
}

/// Cross-entropy over `classes` for `rows` rows (log_softmax then nll_loss, as
/// torch.nn.functional.cross_entropy), the loss function: its output is the loss value, one
/// element of `e` bytes. It reads nothing of its input in the backward (log_softmax's backward
/// reads its own output, the log-probabilities), so its phantom is the log-probabilities
/// (rows x classes x e) and the int64 targets (8 bytes a row), which nll_loss saves. Backward:
/// nll_loss's dense gradient of the log-probabilities (zero-filled, one entry a row set) is a
/// temporary of rows x classes x e while log_softmax's backward turns it into the logits'
/// gradient. FLOPs (nominal): 4 an element forward (max, subtract, exp-sum, log), 3 backward.
/// Bytes: forward the logits read, the log-probabilities written, targets read; backward the
/// zero fill, the log-probabilities and their gradient read, the logits' gradient written.
inline op_spec cross_entropy(std::string name, const std::string& logits, double rows,
                             double classes, double e) {
  const double L = rows * classes * e, targets = rows * 8;
  return {.name = std::move(name),
          .inputs = {logits},
          .output = e,
          .phantom = L + targets,
          .backward_reads = {},
          .forward = {4 * rows * classes, 2 * L + targets + e},
          .backward = {3 * rows * classes, 4 * L + targets},
          .forward_temp = 0,
          .backward_temp = L};
}

}  // namespace remat::zoo::detail
