#pragma once
// The schedule: one program type for every problem (chains and graphs) and every policy, a flat
// list of instructions over a training graph's nodes (compute, fast_forward, free, offload,
// prefetch, wait), which the simulator referees and the executor runs; its text form is
// "C3 C3_ff D5 O5 P5 W5". No problem header is needed to hold one. docs/training-graph.md, "The
// program type".

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

enum class op_kind : unsigned char { compute, fast_forward, free, offload, prefetch, wait };

struct instruction {
  op_kind op = op_kind::compute;
  int node = 0;  ///< a compute node (compute, fast_forward) or a data node (the others), 0-based

  static constexpr instruction compute(int c) { return {op_kind::compute, c}; }
  static constexpr instruction fast_forward(int c) { return {op_kind::fast_forward, c}; }
  static constexpr instruction free(int d) { return {op_kind::free, d}; }
  static constexpr instruction offload(int d) { return {op_kind::offload, d}; }
  static constexpr instruction prefetch(int d) { return {op_kind::prefetch, d}; }
  static constexpr instruction wait(int d) { return {op_kind::wait, d}; }

  /// compute and fast_forward: the instructions that run a layer (their node is a compute node).
  [[nodiscard]] constexpr bool is_compute() const noexcept {
    return op == op_kind::compute || op == op_kind::fast_forward;
  }
  /// offload and prefetch: the instructions that start a transfer.
  [[nodiscard]] constexpr bool is_transfer() const noexcept {
    return op == op_kind::offload || op == op_kind::prefetch;
  }

  friend constexpr bool operator==(const instruction&, const instruction&) = default;
};

/// A program plus what the policy that produced it predicts for it. Plain data.
struct schedule {
  std::vector<instruction> ops;
  seconds predicted_time = 0;  ///< the policy's claimed makespan
  bytes predicted_peak = 0;    ///< the peak memory the policy expects (simulated)

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
  }
  return '?';
}

/// "C3", "C3_ff", "D5", "O5", "P5" or "W5".
inline std::string to_string(const instruction& i) {
  return letter(i.op) + std::to_string(i.node) + (i.op == op_kind::fast_forward ? "_ff" : "");
}

/// Parses one instruction of the text form; nullopt when the text is none.
inline std::optional<instruction> parse_instruction(std::string_view s) {
  if (s.size() < 2 || s[1] < '0' || s[1] > '9') return std::nullopt;  // no sign: "D-0"
  int idx = 0;
  const char* first = s.data() + 1;
  const char* last = s.data() + s.size();
  auto [p, ec] = std::from_chars(first, last, idx);
  if (ec != std::errc() || p == first) return std::nullopt;
  const std::string_view rest(p, static_cast<std::size_t>(last - p));
  switch (s[0]) {
    case 'C':
      if (rest.empty()) return instruction::compute(idx);
      if (rest == "_ff") return instruction::fast_forward(idx);
      return std::nullopt;
    case 'D':
      return rest.empty() ? std::optional(instruction::free(idx)) : std::nullopt;
    case 'O':
      return rest.empty() ? std::optional(instruction::offload(idx)) : std::nullopt;
    case 'P':
      return rest.empty() ? std::optional(instruction::prefetch(idx)) : std::nullopt;
    case 'W':
      return rest.empty() ? std::optional(instruction::wait(idx)) : std::nullopt;
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
