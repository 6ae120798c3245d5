#pragma once
// The heterogeneous chain, Rotor's input [Shilova21, §2.1]: stages l = 1..N, the last the loss,
// each with its times (u_F, u_B), its activation a_l, what its backward keeps abar_l, and its
// overheads (o_F, o_B, and o_F for F^all alone when it differs), its weights W_l (for pipelining,
// [Shilova21, Part III]); optionally a cost set per stage
// (several ways to run its F^all / B: RK-Rotor's options). validate(chain) names the stage and
// field that is wrong. docs/chain-dps.md §1.

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>

namespace remat {

/// Another way to run a stage's F^all and B (see "Cost sets" above).
struct stage_option {
  seconds forward_time = 0;
  seconds backward_time = 0;
  bytes saved_bytes = 0;  ///< what the forward keeps for the backward, the output included
  bytes forward_overhead_bytes = 0;
  bytes backward_overhead_bytes = 0;

  friend bool operator==(const stage_option&, const stage_option&) = default;
};

struct stage {
  std::string name;
  seconds forward_time = 0;
  seconds backward_time = 0;
  bytes output_bytes = 0;
  bytes saved_bytes = 0;
  bytes forward_overhead_bytes = 0;
  bytes backward_overhead_bytes = 0;
  std::optional<bytes> forward_save_overhead_bytes = std::nullopt;
  /// Options 1.. of the stage's F^all / B pair (option 0 is the fields above); usually empty.
  std::vector<stage_option> options = {};
  /// The stage holds control flow (branches, loops): its ops are known only at run time, so no
  /// static plan may hold it [MixedMode]. mixed_mode runs it in a dynamic segment; the other
  /// chain policies plan the stage by its profiled costs (docs/mixed-mode.md). Never the loss.
  bool control_flow = false;
  /// W_l: the bytes of the stage's parameters (one copy). Only the pipeline planners use it
  /// (docs/pipeline.md), which count C copies (weights, gradients, optimizer state) on the
  /// processor that holds the stage; the single-device planners take the budget net of weights.
  bytes weight_bytes = 0;

  friend bool operator==(const stage&, const stage&) = default;
};

struct chain {
  std::string name;
  bytes input_bytes = 0;
  std::vector<stage> stages;  ///< the last one is the loss

  friend bool operator==(const chain&, const chain&) = default;

  /// N: number of stages, the loss included.
  [[nodiscard]] int length() const noexcept { return static_cast<int>(stages.size()); }

  // Thesis notation, 1-based stages; index 0 is the chain input.
  [[nodiscard]] const stage& at(int l) const { return stages[static_cast<std::size_t>(l - 1)]; }
  /// a_k, k = 0..N.
  [[nodiscard]] bytes a(int k) const { return k == 0 ? input_bytes : at(k).output_bytes; }
  /// abar_k, k = 0..N (abar_0 = a_0).
  [[nodiscard]] bytes abar(int k) const { return k == 0 ? input_bytes : at(k).saved_bytes; }
  /// delta_k, k = 0..N: same size as a_k, except delta_N = 0.
  [[nodiscard]] bytes delta(int k) const { return k == length() ? 0 : a(k); }
  [[nodiscard]] seconds uf(int l) const { return at(l).forward_time; }
  [[nodiscard]] seconds ub(int l) const { return at(l).backward_time; }
  [[nodiscard]] bytes of(int l) const { return at(l).forward_overhead_bytes; }
  /// o_F of F_l^all.
  [[nodiscard]] bytes of_all(int l) const {
    return at(l).forward_save_overhead_bytes.value_or(at(l).forward_overhead_bytes);
  }
  [[nodiscard]] bytes ob(int l) const { return at(l).backward_overhead_bytes; }
  /// W_l, the bytes of stage l's parameters.
  [[nodiscard]] bytes w(int l) const { return at(l).weight_bytes; }
  /// The number of options of stage l (1 + its extra options).
  [[nodiscard]] int option_count(int l) const { return 1 + static_cast<int>(at(l).options.size()); }
  /// Option o of stage l; option 0 is the stage's own F^all / B.
  [[nodiscard]] stage_option option(int l, int o) const {
    if (o == 0) return {uf(l), ub(l), abar(l), of_all(l), ob(l)};
    return at(l).options.at(static_cast<std::size_t>(o - 1));
  }

  /// Time of plain training: every forward and every backward once.
  [[nodiscard]] seconds ideal_time() const {
    seconds t = 0;
    for (const auto& s : stages) t += s.forward_time + s.backward_time;
    return t;
  }
};

namespace detail {
inline std::string stage_label(const chain& c, int l) {
  std::string s = "stage " + std::to_string(l);
  if (!c.at(l).name.empty()) s += " ('" + c.at(l).name + "')";
  return s;
}
}  // namespace detail

/// Checks a chain; the error names the stage and the field at fault and says what would work.
inline result<void> validate(const chain& c) {
  auto bad = [](std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; };
  if (c.stages.empty())
    return bad("chain '" + c.name +
               "' has no stage: a chain needs at least one stage (the last one is the loss)");
  if (c.input_bytes < 0)
    return bad("chain input_bytes is negative (" + std::to_string(c.input_bytes) +
               "); sizes are byte counts >= 0");
  // Sizes are summed by the planners; keep every sum far from overflow.
  constexpr bytes max_size = bytes{1} << 52;
  if (c.input_bytes > max_size)
    return bad("chain input_bytes (" + std::to_string(c.input_bytes) + ") exceeds 2^52 bytes");
  seconds total = 0;  // the ideal time, which must stay below max_time (core/units.hpp)
  for (int l = 1; l <= c.length(); ++l) {
    const stage& s = c.at(l);
    const std::string where = detail::stage_label(c, l);
    auto check_time = [&](seconds v, const char* field) -> std::optional<error> {
      if (auto e = detail::time_field_error(v, where, field)) return bad(*e);
      if (auto e = detail::time_total_error(total, v, where, field, "chain '" + c.name + "'"))
        return bad(*e);
      return std::nullopt;
    };
    auto check_size = [&](bytes v, const char* field) -> std::optional<error> {
      if (v < 0)
        return bad(where + ": " + field + " is negative (" + std::to_string(v) +
                   "); sizes are byte counts >= 0");
      if (v > max_size)
        return bad(where + ": " + field + " (" + std::to_string(v) + ") exceeds 2^52 bytes");
      return std::nullopt;
    };
    for (auto e :
         {check_time(s.forward_time, "forward_time"), check_time(s.backward_time, "backward_time"),
          check_size(s.output_bytes, "output_bytes"), check_size(s.saved_bytes, "saved_bytes"),
          check_size(s.forward_overhead_bytes, "forward_overhead_bytes"),
          check_size(s.backward_overhead_bytes, "backward_overhead_bytes"),
          check_size(s.forward_save_overhead_bytes.value_or(0), "forward_save_overhead_bytes"),
          check_size(s.weight_bytes, "weight_bytes")})
      if (e) return *e;
    for (std::size_t o = 0; o < s.options.size(); ++o) {
      const stage_option& op = s.options[o];
      const std::string at_o = where + ", option " + std::to_string(o + 1);
      for (auto [v, field] : {std::pair{op.forward_time, "forward_time"},
                              std::pair{op.backward_time, "backward_time"}})
        if (auto e = detail::time_field_error(v, at_o, field)) return bad(*e);
      for (auto [v, field] : {std::pair{op.saved_bytes, "saved_bytes"},
                              std::pair{op.forward_overhead_bytes, "forward_overhead_bytes"},
                              std::pair{op.backward_overhead_bytes, "backward_overhead_bytes"}}) {
        if (v < 0)
          return bad(at_o + ": " + field + " is negative (" + std::to_string(v) +
                     "); sizes are byte counts >= 0");
        if (v > max_size)
          return bad(at_o + ": " + field + " (" + std::to_string(v) + ") exceeds 2^52 bytes");
      }
      if (op.saved_bytes < s.output_bytes)
        return bad(at_o + ": saved_bytes (" + std::to_string(op.saved_bytes) +
                   ") is smaller than the stage's "
                   "output_bytes (" +
                   std::to_string(s.output_bytes) +
                   "); every option keeps the output, so it "
                   "must be >= output_bytes");
    }
    if (s.control_flow && l == c.length())
      return bad(where +
                 ": control_flow is set on the loss (the last stage); the loss must be "
                 "a plain op that every plan runs once: move the control flow into a "
                 "stage before it");
    if (s.saved_bytes < s.output_bytes)
      return bad(where + ": saved_bytes (" + std::to_string(s.saved_bytes) +
                 ") is smaller than output_bytes (" + std::to_string(s.output_bytes) +
                 "); saved_bytes counts everything the backward needs, the output included, so "
                 "it must be >= output_bytes");
  }
  return {};
}

namespace detail {

/// Stages first..last of c as a chain of their own (Mixed Mode's segments, a pipeline stage's
/// recomputation): its input a_{first-1}, and after `last`,
/// unless it is the loss, a stage of no time and no memory whose backward yields delta_last,
/// the gradient the segment receives from the stages after it.
inline chain segment_chain(const chain& c, int first, int last) {
  chain out;
  out.name = c.name + " [" + std::to_string(first) + ".." + std::to_string(last) + "]";
  out.input_bytes = c.a(first - 1);
  for (int l = first; l <= last; ++l) out.stages.push_back(c.at(l));
  if (last < c.length()) out.stages.push_back({.name = "(gradient of " + c.at(last).name + ")"});
  for (auto& s : out.stages) s.control_flow = false;  // the segment's mode decides
  return out;
}

}  // namespace detail

}  // namespace remat
