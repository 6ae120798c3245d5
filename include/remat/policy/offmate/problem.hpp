#pragma once
// OFFMATE's problem [Offmate24, §4], the input of its MILP (the O-ILP): a sequence of L blocks,
// each with its options (ways to run its forward and backward: keep everything, recompute,
// offload activations), the interface activations present at each of the 2L steps, and the
// parameter groups: tensors used by the same blocks, with their trainable bytes, whose optimizer
// states are k bytes per trainable byte (Adam: 2). The machine gives the link each way, the host
// memory, the GPU's and the CPU's optimizer speeds and the CPU's management time per step.
// validate(problem) names the block, option, group or tensor at fault. docs/offmate.md.
//
// Steps are 0-based here: step t < L runs block t forward, step t >= L block 2L-1-t backward.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>

namespace remat {

/// One way to run a block [Offmate24, §4.1]: its times, what its forward keeps on the GPU for
/// its backward (S), what it sends to the host and brings back (O), and its temporaries.
struct offmate_option {
  std::string name;  ///< "store-all", "recompute", "offload", ...
  seconds forward_time = 0;
  seconds backward_time = 0;
  bytes stored_bytes = 0;     ///< S: kept on the GPU from the forward to the backward
  bytes offloaded_bytes = 0;  ///< O: sent to the host during the forward, back for the backward
  bytes forward_overhead_bytes = 0;   ///< peak of the forward above what S and A count
  bytes backward_overhead_bytes = 0;  ///< peak of the backward above what S and A count

  friend bool operator==(const offmate_option&, const offmate_option&) = default;
};

struct offmate_block {
  std::string name;
  std::vector<offmate_option> options;  ///< at least one

  friend bool operator==(const offmate_block&, const offmate_block&) = default;
};

/// A parameter tensor: its bytes, and how many of them are trained (its size, or 0 when
/// frozen; a packed tensor that is partly frozen may give a part).
struct parameter_tensor {
  std::string name;
  bytes size = 0;
  bytes trainable = 0;

  friend bool operator==(const parameter_tensor&, const parameter_tensor&) = default;
};

/// Tensors used by the same set of blocks, planned as one (the "parameters" w of [Offmate24]).
struct parameter_group {
  std::string name;
  std::vector<parameter_tensor> tensors;
  std::vector<int> blocks;  ///< the blocks that use the group (0-based), at least one

  friend bool operator==(const parameter_group&, const parameter_group&) = default;

  /// |w|.
  [[nodiscard]] bytes size() const {
    bytes s = 0;
    for (const auto& t : tensors) s += t.size;
    return s;
  }
  /// |w|_g.
  [[nodiscard]] bytes trainable() const {
    bytes s = 0;
    for (const auto& t : tensors) s += t.trainable;
    return s;
  }
  [[nodiscard]] int first_block() const { return *std::ranges::min_element(blocks); }
  [[nodiscard]] int last_block() const { return *std::ranges::max_element(blocks); }
};

struct offmate_problem {
  std::string name;
  std::vector<offmate_block> blocks;
  /// A_t: bytes of interface activations and their gradients on the GPU during step t, one per
  /// step (2L); empty: none.
  std::vector<bytes> interface_bytes;
  std::vector<parameter_group> groups;
  /// k: optimizer-state bytes per trainable byte (Adam in the parameters' dtype: 2).
  double optimizer_states = 2;

  friend bool operator==(const offmate_problem&, const offmate_problem&) = default;

  [[nodiscard]] int length() const { return static_cast<int>(blocks.size()); }
  [[nodiscard]] int steps() const { return 2 * length(); }
  /// The block step t runs.
  [[nodiscard]] int block_of(int t) const { return t < length() ? t : steps() - 1 - t; }
  [[nodiscard]] bool is_forward(int t) const { return t < length(); }
  [[nodiscard]] int forward_step(int block) const { return block; }
  [[nodiscard]] int backward_step(int block) const { return steps() - 1 - block; }
  [[nodiscard]] bytes interface_at(int t) const {
    return interface_bytes.empty() ? 0 : interface_bytes[static_cast<std::size_t>(t)];
  }
  [[nodiscard]] const offmate_option& option(int block, int o) const {
    return blocks[static_cast<std::size_t>(block)].options[static_cast<std::size_t>(o)];
  }

  /// f_w: the step of the group's first use (its first block's forward).
  [[nodiscard]] int first_use(const parameter_group& w) const {
    return forward_step(w.first_block());
  }
  /// g_w: the step that makes the group's last gradient (its first block's backward).
  [[nodiscard]] int last_gradient(const parameter_group& w) const {
    return backward_step(w.first_block());
  }
  /// pos_w(t): t's place in the cycle that starts at g_w (0 at g_w).
  [[nodiscard]] int position(const parameter_group& w, int t) const {
    return (t - last_gradient(w) + steps()) % steps();
  }
  /// The step at position p of w's cycle.
  [[nodiscard]] int step_at(const parameter_group& w, int p) const {
    return (last_gradient(w) + p) % steps();
  }
  /// Whether step t runs a block that uses w.
  [[nodiscard]] bool uses(const parameter_group& w, int t) const {
    return std::ranges::find(w.blocks, block_of(t)) != w.blocks.end();
  }
  /// Whether w's gradient is on the GPU during step t: from the backward of its last block to
  /// g_w (the contributions of shared groups are summed there).
  [[nodiscard]] bool holds_gradient(const parameter_group& w, int t) const {
    return t >= backward_step(w.last_block()) && t <= last_gradient(w);
  }
  /// Whether step t may run a CPU optimizer step of w: after g_w, before f_w (cyclic, both
  /// excluded) [Offmate24, eq. (4)]. Empty for the groups of block 0.
  [[nodiscard]] bool in_cpu_window(const parameter_group& w, int t) const {
    const int p = position(w, t);
    return p > 0 && p < position(w, first_use(w));
  }
  /// Whether w has any step in its CPU window (all groups but block 0's).
  [[nodiscard]] bool has_cpu_window(const parameter_group& w) const {
    return position(w, first_use(w)) > 1;
  }
};

/// The problem at `batch` samples from its data for one sample [Offmate24, App. A]: what depends
/// on the batch (each option's times, S, O and temporaries, and A_t) scaled by it, linearly as
/// the paper assumes; the parameters, their states and the machine do not depend on it.
[[nodiscard]] inline offmate_problem at_batch(const offmate_problem& per_sample, int batch) {
  offmate_problem p = per_sample;
  const auto k = static_cast<bytes>(batch);
  for (auto& b : p.blocks)
    for (auto& o : b.options) {
      o.forward_time *= batch;
      o.backward_time *= batch;
      o.stored_bytes *= k;
      o.offloaded_bytes *= k;
      o.forward_overhead_bytes *= k;
      o.backward_overhead_bytes *= k;
    }
  for (auto& a : p.interface_bytes) a *= k;
  return p;
}

namespace detail {
inline std::string group_label(const parameter_group& w, std::size_t i) {
  std::string s = "parameter group " + std::to_string(i);
  if (!w.name.empty()) s += " ('" + w.name + "')";
  return s;
}
inline std::string offmate_block_label(const offmate_block& b, std::size_t i) {
  std::string s = "block " + std::to_string(i);
  if (!b.name.empty()) s += " ('" + b.name + "')";
  return s;
}
}  // namespace detail

/// Checks an OFFMATE problem; the error names the block, option, group or tensor at fault.
inline result<void> validate(const offmate_problem& p) {
  auto bad = [](std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; };
  constexpr bytes max_size = bytes{1} << 52;
  auto size_error = [&](bytes v, const std::string& where,
                        const char* field) -> std::optional<std::string> {
    if (v < 0)
      return where + ": " + field + " is negative (" + std::to_string(v) +
             "); sizes are byte counts >= 0";
    if (v > max_size) return where + ": " + field + " (" + std::to_string(v) + ") exceeds 2^52";
    return std::nullopt;
  };
  auto time_error = [](seconds v, const std::string& where,
                       const char* field) -> std::optional<std::string> {
    if (!std::isfinite(v) || v < 0)
      return where + ": " + field + " must be a finite number of seconds >= 0, not " +
             std::to_string(v);
    return std::nullopt;
  };
  if (p.blocks.empty())
    return bad("OFFMATE problem '" + p.name + "' has no block: it needs at least one");
  for (std::size_t i = 0; i < p.blocks.size(); ++i) {
    const offmate_block& b = p.blocks[i];
    const std::string where = detail::offmate_block_label(b, i);
    if (b.options.empty())
      return bad(where + " has no option: give at least one way to run it (store-all)");
    for (std::size_t o = 0; o < b.options.size(); ++o) {
      const offmate_option& op = b.options[o];
      const std::string at =
          where + ", option " + std::to_string(o) + (op.name.empty() ? "" : " ('" + op.name + "')");
      for (auto e : {time_error(op.forward_time, at, "forward_time"),
                     time_error(op.backward_time, at, "backward_time"),
                     size_error(op.stored_bytes, at, "stored_bytes"),
                     size_error(op.offloaded_bytes, at, "offloaded_bytes"),
                     size_error(op.forward_overhead_bytes, at, "forward_overhead_bytes"),
                     size_error(op.backward_overhead_bytes, at, "backward_overhead_bytes")})
        if (e) return bad(*e);
    }
  }
  if (!p.interface_bytes.empty() && p.interface_bytes.size() != static_cast<std::size_t>(p.steps()))
    return bad("interface_bytes has " + std::to_string(p.interface_bytes.size()) +
               " values; give one per step (" + std::to_string(p.steps()) + " for " +
               std::to_string(p.length()) + " blocks), or none");
  for (std::size_t t = 0; t < p.interface_bytes.size(); ++t)
    if (auto e = size_error(p.interface_bytes[t], "step " + std::to_string(t), "interface_bytes"))
      return bad(*e);
  if (!std::isfinite(p.optimizer_states) || p.optimizer_states < 0)
    return bad(
        "optimizer_states must be a finite number >= 0 of optimizer-state bytes per "
        "trainable byte (Adam: 2), not " +
        std::to_string(p.optimizer_states));
  for (std::size_t i = 0; i < p.groups.size(); ++i) {
    const parameter_group& w = p.groups[i];
    const std::string where = detail::group_label(w, i);
    if (w.blocks.empty())
      return bad(where + " is used by no block: list the blocks that use it, or leave it out");
    for (int b : w.blocks)
      if (b < 0 || b >= p.length())
        return bad(where + " names block " + std::to_string(b) + ", but the blocks are 0.." +
                   std::to_string(p.length() - 1));
    if (w.tensors.empty()) return bad(where + " has no tensor");
    for (const parameter_tensor& t : w.tensors) {
      const std::string at = where + ", tensor '" + t.name + "'";
      for (auto e : {size_error(t.size, at, "size"), size_error(t.trainable, at, "trainable")})
        if (e) return bad(*e);
      if (t.trainable > t.size)
        return bad(at + ": trainable (" + std::to_string(t.trainable) + ") exceeds its size (" +
                   std::to_string(t.size) + ")");
    }
    if (w.size() > max_size) return bad(where + ": its tensors sum past 2^52 bytes");
  }
  return {};
}

/// Why a machine cannot run an OFFMATE plan; nullopt when it can. The optimizer speeds are
/// bytes of trainable parameters updated per second (infinity: instantaneous).
inline std::optional<std::string> offmate_machine_error(const machine& m) {
  if (auto e = machine_error(m)) return e;
  auto speed = [](double v, const char* what) -> std::optional<std::string> {
    if (std::isnan(v) || v <= 0)
      return std::string(what) +
             " must be > 0 bytes of parameters updated per second (infinity: instantaneous), "
             "not " +
             std::to_string(v) +
             (v == 0 ? std::string("; an optimizer that never finishes cannot train") : "");
    return std::nullopt;
  };
  if (auto e = speed(m.gpu_optimizer_speed, "gpu_optimizer_speed")) return e;
  if (auto e = speed(m.cpu_optimizer_speed, "cpu_optimizer_speed")) return e;
  if (!std::isfinite(m.step_overhead) || m.step_overhead < 0)
    return "step_overhead (the CPU's management time per step) must be a finite number of "
           "seconds >= 0, not " +
           std::to_string(m.step_overhead);
  return std::nullopt;
}

}  // namespace remat
