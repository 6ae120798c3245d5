#pragma once
// The schedule: a flat program of instructions (DESIGN.md §3). Every policy returns one; the
// simulator and the executors consume only this type.
//
// Chain instructions use the operations of shilova-spec §2.1 (thesis Table 2.1):
//   forward(l, no_save)    F_l^∅   runs F_l without keeping anything; consumes a plain a_{l-1}
//   forward(l, save_input) F_l^ck  keeps its input, adds a_l
//   forward(l, save_all)   F_l^all keeps its input, adds abar_l (all that B_l needs)
//   backward(l)            B_l     consumes delta_l and abar_l (and a plain a_{l-1}), adds delta_{l-1}
// and the transfers of shilova-spec §3.1 (asynchronous, on their own lanes: sim/simulate.hpp),
// which name the activation they move, a_k with k = 0..N (the thesis' O_l, P_l act on a_{l-1}:
// offload(k) is its O_{k+1}):
//   offload(k)             O_k     copies a_k to the host; its device memory is freed when the
//                                  copy ends; compute may no longer use it
//   prefetch(k)            P_k     copies an offloaded (and waited) a_k back to the device; its
//                                  device memory is reserved when the copy starts
//   wait(k)                W_k     the compute lane waits for the transfer of a_k in flight: after
//                                  a prefetch a_k is usable again, after an offload it may be
//                                  prefetched
// Text form: F3_none, F3_ck, F3_all, B3, O3, P3, W3 (O0, P0, W0 for the input a_0).

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

enum class op_kind : unsigned char { forward, backward, offload, prefetch, wait };
enum class forward_mode : unsigned char { no_save, save_input, save_all };

struct instruction {
  op_kind kind = op_kind::forward;
  /// The stage (1-based) of a forward or backward; the activation a_k (0-based) of a transfer.
  int index = 0;
  forward_mode mode = forward_mode::no_save;  ///< meaningful for forwards only

  static constexpr instruction forward(int l, forward_mode m) { return {op_kind::forward, l, m}; }
  static constexpr instruction backward(int l) {
    return {op_kind::backward, l, forward_mode::no_save};
  }
  static constexpr instruction offload(int k) { return {op_kind::offload, k, forward_mode::no_save}; }
  static constexpr instruction prefetch(int k) { return {op_kind::prefetch, k, forward_mode::no_save}; }
  static constexpr instruction wait(int k) { return {op_kind::wait, k, forward_mode::no_save}; }
  /// Offload and prefetch: the instructions that start a transfer.
  [[nodiscard]] constexpr bool is_transfer() const noexcept {
    return kind == op_kind::offload || kind == op_kind::prefetch;
  }
  /// Forward and backward: the instructions that run a layer.
  [[nodiscard]] constexpr bool is_compute() const noexcept {
    return kind == op_kind::forward || kind == op_kind::backward;
  }
  friend constexpr bool operator==(const instruction& x, const instruction& y) {
    return x.kind == y.kind && x.index == y.index &&
           (x.kind != op_kind::forward || x.mode == y.mode);
  }
};

/// The letter of an instruction's text form.
inline constexpr char letter(op_kind k) {
  switch (k) {
    case op_kind::forward: return 'F';
    case op_kind::backward: return 'B';
    case op_kind::offload: return 'O';
    case op_kind::prefetch: return 'P';
    case op_kind::wait: return 'W';
  }
  return '?';
}

inline constexpr std::string_view to_string(forward_mode m) {
  switch (m) {
    case forward_mode::no_save: return "none";
    case forward_mode::save_input: return "ck";
    case forward_mode::save_all: return "all";
  }
  return "?";
}

inline std::string to_string(const instruction& i) {
  std::string s = letter(i.kind) + std::to_string(i.index);
  if (i.kind == op_kind::forward) s += "_" + std::string(to_string(i.mode));
  return s;
}

/// Parses "F3_ck", "F2_none", "F1_all", "B4", "O0", "P2" or "W2"; nullopt when the text is none
/// of these. Stages are 1-based, activations (of O, P, W) 0-based.
inline std::optional<instruction> parse_instruction(std::string_view s) {
  static constexpr op_kind kinds[] = {op_kind::forward, op_kind::backward, op_kind::offload,
                                      op_kind::prefetch, op_kind::wait};
  if (s.size() < 2 || s[1] < '0' || s[1] > '9') return std::nullopt;  // no sign: "O-0"
  const op_kind* kind = nullptr;
  for (const op_kind& k : kinds)
    if (s[0] == letter(k)) kind = &k;
  if (kind == nullptr) return std::nullopt;
  int idx = 0;
  const char* first = s.data() + 1;
  const char* last = s.data() + s.size();
  auto [p, ec] = std::from_chars(first, last, idx);
  const int lowest = *kind == op_kind::forward || *kind == op_kind::backward ? 1 : 0;
  if (ec != std::errc() || p == first || idx < lowest) return std::nullopt;
  std::string_view rest(p, static_cast<std::size_t>(last - p));
  if (*kind != op_kind::forward)
    return rest.empty() ? std::optional(instruction{*kind, idx, forward_mode::no_save}) : std::nullopt;
  if (rest == "_none") return instruction::forward(idx, forward_mode::no_save);
  if (rest == "_ck") return instruction::forward(idx, forward_mode::save_input);
  if (rest == "_all") return instruction::forward(idx, forward_mode::save_all);
  return std::nullopt;
}

/// A program plus what the policy that produced it predicts for it. Plain data.
struct schedule {
  std::vector<instruction> ops;
  seconds predicted_time = 0;  ///< the policy's claimed makespan
  bytes predicted_peak = 0;    ///< the peak memory the policy expects (simulated)

  friend bool operator==(const schedule&, const schedule&) = default;
};

/// "F1_ck O1 F2_none ... P1 W1 ... B1"
inline std::string to_string(const schedule& s) {
  std::string out;
  for (const auto& i : s.ops) {
    if (!out.empty()) out += ' ';
    out += to_string(i);
  }
  return out;
}

/// Parses a program from its text form (instructions separated by white space); nullopt when a
/// word is not an instruction.
inline std::optional<schedule> parse_schedule(std::string_view text) {
  schedule s;
  auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  for (std::size_t i = 0; i < text.size();) {
    if (space(text[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && !space(text[j])) ++j;
    const auto ins = parse_instruction(text.substr(i, j - i));
    if (!ins) return std::nullopt;
    s.ops.push_back(*ins);
    i = j;
  }
  return s;
}

inline std::ostream& operator<<(std::ostream& os, const instruction& i) { return os << to_string(i); }
inline std::ostream& operator<<(std::ostream& os, const schedule& s) { return os << to_string(s); }

}  // namespace remat
