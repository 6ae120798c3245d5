#pragma once
// The schedule: a flat program of instructions (DESIGN.md §3). Every policy returns one; the
// simulator and the executors consume only this type.
//
// Chain instructions use the operations of shilova-spec §2.1 (thesis Table 2.1):
//   forward(l, no_save)    F_l^∅   runs F_l without keeping anything; consumes a plain a_{l-1}
//   forward(l, save_input) F_l^ck  keeps its input, adds a_l
//   forward(l, save_all)   F_l^all keeps its input, adds abar_l (all that B_l needs)
//   backward(l)            B_l     consumes delta_l and abar_l (and a plain a_{l-1}), adds delta_{l-1}
// Text form: F3_none, F3_ck, F3_all, B3.

#include <charconv>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <remat/core/units.hpp>

namespace remat {

enum class op_kind : unsigned char { forward, backward };
enum class forward_mode : unsigned char { no_save, save_input, save_all };

struct instruction {
  op_kind kind = op_kind::forward;
  int index = 0;  ///< the stage (1-based) for chain schedules
  forward_mode mode = forward_mode::no_save;  ///< meaningful for forwards only

  static constexpr instruction forward(int l, forward_mode m) { return {op_kind::forward, l, m}; }
  static constexpr instruction backward(int l) {
    return {op_kind::backward, l, forward_mode::no_save};
  }
  friend constexpr bool operator==(const instruction& x, const instruction& y) {
    return x.kind == y.kind && x.index == y.index &&
           (x.kind == op_kind::backward || x.mode == y.mode);
  }
};

inline constexpr std::string_view to_string(forward_mode m) {
  switch (m) {
    case forward_mode::no_save: return "none";
    case forward_mode::save_input: return "ck";
    case forward_mode::save_all: return "all";
  }
  return "?";
}

inline std::string to_string(const instruction& i) {
  if (i.kind == op_kind::backward) return "B" + std::to_string(i.index);
  return "F" + std::to_string(i.index) + "_" + std::string(to_string(i.mode));
}

/// Parses "F3_ck", "F2_none", "F1_all" or "B4"; nullopt when the text is none of these.
inline std::optional<instruction> parse_instruction(std::string_view s) {
  if (s.size() < 2 || (s[0] != 'F' && s[0] != 'B')) return std::nullopt;
  int idx = 0;
  const char* first = s.data() + 1;
  const char* last = s.data() + s.size();
  auto [p, ec] = std::from_chars(first, last, idx);
  if (ec != std::errc() || p == first || idx < 1) return std::nullopt;
  std::string_view rest(p, static_cast<std::size_t>(last - p));
  if (s[0] == 'B') return rest.empty() ? std::optional(instruction::backward(idx)) : std::nullopt;
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

/// "F1_ck F2_none ... B1"
inline std::string to_string(const schedule& s) {
  std::string out;
  for (const auto& i : s.ops) {
    if (!out.empty()) out += ' ';
    out += to_string(i);
  }
  return out;
}

inline std::ostream& operator<<(std::ostream& os, const instruction& i) { return os << to_string(i); }
inline std::ostream& operator<<(std::ostream& os, const schedule& s) { return os << to_string(s); }

}  // namespace remat
