#pragma once
// The schedule: one program type for every problem (chains and graphs) and every policy, a flat
// list of instructions over a training graph's nodes (compute, fast_forward, free, offload,
// prefetch, wait), which the simulator referees and the executor runs; its text form is
// "C3 C3_ff D5 O5 P5 W5". A program may also manage the model's parameters (the OFFMATE
// family): their weights, gradients and optimizer states move with the same verbs ("Ow2",
// "Og2", "Ps2", "Dw2"), each trainable parameter is updated once, on the GPU ("U2") or on the
// CPU ("U2_cpu"), and "S" ends a step (every lane idle); it then says where each parameter
// starts (`schedule::parameters`), and ends there. No problem header is needed to hold one.
// docs/training-graph.md, "The program type".

#include <charconv>
#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <remat/core/units.hpp>

namespace remat {

enum class op_kind : unsigned char {
  compute,
  fast_forward,
  free,
  offload,
  prefetch,
  wait,
  update,      ///< a parameter's optimizer step on the GPU (the compute lane)
  cpu_update,  ///< a parameter's optimizer step on the CPU (its own lane)
  sync,        ///< the end of a step: the compute lane waits until every lane is idle
};

/// What a free, offload, prefetch or wait acts on: a data node of the graph, or a parameter's
/// weight, gradient or optimizer states (the node is then the parameter's index in
/// graph::parameters()).
enum class tensor_part : unsigned char { data, weight, gradient, states };

struct instruction {
  op_kind op = op_kind::compute;
  int node = 0;  ///< a compute node (compute, fast_forward), a data node, or a parameter
  tensor_part part = tensor_part::data;

  static constexpr instruction compute(int c) { return {op_kind::compute, c}; }
  static constexpr instruction fast_forward(int c) { return {op_kind::fast_forward, c}; }
  static constexpr instruction free(int d) { return {op_kind::free, d}; }
  static constexpr instruction offload(int d) { return {op_kind::offload, d}; }
  static constexpr instruction prefetch(int d) { return {op_kind::prefetch, d}; }
  static constexpr instruction wait(int d) { return {op_kind::wait, d}; }
  /// The same verbs on parameter p's weight, gradient or states.
  static constexpr instruction free(tensor_part t, int p) { return {op_kind::free, p, t}; }
  static constexpr instruction offload(tensor_part t, int p) { return {op_kind::offload, p, t}; }
  static constexpr instruction prefetch(tensor_part t, int p) { return {op_kind::prefetch, p, t}; }
  static constexpr instruction wait(tensor_part t, int p) { return {op_kind::wait, p, t}; }
  static constexpr instruction update(int p) { return {op_kind::update, p, tensor_part::weight}; }
  static constexpr instruction cpu_update(int p) {
    return {op_kind::cpu_update, p, tensor_part::weight};
  }
  static constexpr instruction sync() { return {op_kind::sync, 0}; }

  /// compute and fast_forward: the instructions that run a layer (their node is a compute node).
  [[nodiscard]] constexpr bool is_compute() const noexcept {
    return op == op_kind::compute || op == op_kind::fast_forward;
  }
  /// offload and prefetch: the instructions that start a transfer.
  [[nodiscard]] constexpr bool is_transfer() const noexcept {
    return op == op_kind::offload || op == op_kind::prefetch;
  }
  /// An instruction on a parameter (its node a parameter index), or a step's end: what only a
  /// program that manages parameters holds.
  [[nodiscard]] constexpr bool manages_parameters() const noexcept {
    return part != tensor_part::data || op == op_kind::update || op == op_kind::cpu_update ||
           op == op_kind::sync;
  }
  /// free, offload, prefetch or wait of a data node: the instructions whose node is a data node.
  [[nodiscard]] constexpr bool on_data() const noexcept {
    return !is_compute() && !manages_parameters();
  }

  friend constexpr bool operator==(const instruction&, const instruction&) = default;
};

/// Where a parameter is when a program that manages parameters starts (and must be again when
/// it ends: the program is one iteration of a cycle).
struct parameter_start {
  bool weight_on_device = true;  ///< else only on the host
  bool weight_on_host = false;   ///< the host holds a current copy of the weight
  bool states_on_device = true;  ///< its optimizer states (trainable parameters), else on the host
  bool states_on_host = false;   ///< the host holds a current copy of its states
  bool cpu_updated = false;      ///< its optimizer step runs on the CPU (states on the host)
  /// The previous iteration's gradient waits on the host for this program's CPU update (a
  /// cycle's CPU update may come before the backward that makes the next gradient).
  bool gradient_on_host = false;

  friend bool operator==(const parameter_start&, const parameter_start&) = default;
};

/// The parameters a program manages: one entry per graph parameter, and the optimizer's state
/// bytes per trainable byte (Adam: 2). A program whose plan is not `managed` leaves parameters
/// alone (their memory is outside its budget), as every activation planner's.
struct parameter_plan {
  bool managed = false;
  std::vector<parameter_start> start;
  double optimizer_states = 2;

  friend bool operator==(const parameter_plan&, const parameter_plan&) = default;
};

/// A program plus what the policy that produced it predicts for it. Plain data.
struct schedule {
  std::vector<instruction> ops;
  seconds predicted_time = 0;  ///< the policy's claimed makespan
  bytes predicted_peak = 0;    ///< the peak memory the policy expects (simulated)
  /// Where the program manages the model's parameters (their memory is then counted).
  parameter_plan parameters = {};

  friend bool operator==(const schedule&, const schedule&) = default;
};

/// The letter of an instruction's text form.
inline constexpr char letter(op_kind k) {
  switch (k) {
    case op_kind::compute:
    case op_kind::fast_forward:
      return 'C';
    case op_kind::free:
      return 'D';
    case op_kind::offload:
      return 'O';
    case op_kind::prefetch:
      return 'P';
    case op_kind::wait:
      return 'W';
    case op_kind::update:
    case op_kind::cpu_update:
      return 'U';
    case op_kind::sync:
      return 'S';
  }
  return '?';
}

/// The letter of a parameter part ('w', 'g', 's'); none for a data node.
inline constexpr std::string_view letter(tensor_part t) {
  switch (t) {
    case tensor_part::data:
      return "";
    case tensor_part::weight:
      return "w";
    case tensor_part::gradient:
      return "g";
    case tensor_part::states:
      return "s";
  }
  return "?";
}

/// "C3", "C3_ff", "D5", "O5", "P5", "W5"; on parameters "Ow2", "Dg2", "Ps2", "U2", "U2_cpu";
/// "S".
inline std::string to_string(const instruction& i) {
  if (i.op == op_kind::sync) return "S";
  std::string s(1, letter(i.op));
  if (i.op != op_kind::update && i.op != op_kind::cpu_update) s += letter(i.part);
  s += std::to_string(i.node);
  if (i.op == op_kind::fast_forward) s += "_ff";
  if (i.op == op_kind::cpu_update) s += "_cpu";
  return s;
}

/// Parses one instruction of the text form; nullopt when the text is none.
inline std::optional<instruction> parse_instruction(std::string_view s) {
  if (s == "S") return instruction::sync();
  if (s.size() < 2) return std::nullopt;
  const char verb = s[0];
  tensor_part part = tensor_part::data;
  std::size_t at = 1;
  if (verb == 'D' || verb == 'O' || verb == 'P' || verb == 'W') {
    if (s[1] == 'w') part = tensor_part::weight;
    if (s[1] == 'g') part = tensor_part::gradient;
    if (s[1] == 's') part = tensor_part::states;
    if (part != tensor_part::data) at = 2;
  }
  if (at >= s.size() || s[at] < '0' || s[at] > '9') return std::nullopt;  // no sign: "D-0"
  int idx = 0;
  const char* first = s.data() + at;
  const char* last = s.data() + s.size();
  auto [p, ec] = std::from_chars(first, last, idx);
  if (ec != std::errc() || p == first) return std::nullopt;
  const std::string_view rest(p, static_cast<std::size_t>(last - p));
  auto plain = [&](op_kind k) {
    return rest.empty() ? std::optional(instruction{k, idx, part}) : std::nullopt;
  };
  switch (verb) {
    case 'C':
      if (rest.empty()) return instruction::compute(idx);
      if (rest == "_ff") return instruction::fast_forward(idx);
      return std::nullopt;
    case 'D':
      return plain(op_kind::free);
    case 'O':
      return plain(op_kind::offload);
    case 'P':
      return plain(op_kind::prefetch);
    case 'W':
      return plain(op_kind::wait);
    case 'U':
      if (rest.empty()) return instruction::update(idx);
      if (rest == "_cpu") return instruction::cpu_update(idx);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

/// The white-space separated words of a program's text (either notation).
inline std::vector<std::string_view> words_of(std::string_view text) {
  std::vector<std::string_view> out;
  auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  for (std::size_t i = 0; i < text.size();) {
    if (space(text[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && !space(text[j])) ++j;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

/// Parses a program from its text form (instructions separated by white space); nullopt when a
/// word is not an instruction.
inline std::optional<schedule> parse_program(std::string_view text) {
  schedule s;
  for (std::string_view w : words_of(text)) {
    const auto ins = parse_instruction(w);
    if (!ins) return std::nullopt;
    s.ops.push_back(*ins);
  }
  return s;
}

/// "C0 C1 D2 O3 ..."
inline std::string to_string(const schedule& s) {
  std::string out;
  for (const auto& i : s.ops) {
    if (!out.empty()) out += ' ';
    out += to_string(i);
  }
  return out;
}

inline std::ostream& operator<<(std::ostream& os, const instruction& i) {
  return os << to_string(i);
}
inline std::ostream& operator<<(std::ostream& os, const schedule& s) { return os << to_string(s); }

}  // namespace remat
