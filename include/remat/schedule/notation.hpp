#pragma once
// Programs written for people, and the chain notation of [Shilova21, Table 2.1] (F3_none,
// F3_ck, F3_all, B3; O3, P3, W3 for the transfers of a_3) with its one fixed lowering onto the
// chain's training graph (lower()), which also checks the notation's own rules in the thesis'
// names; to_chain_ops() / to_chain_string() raise a chain-shaped program back to the notation.
// Every valid chain schedule lowers to a valid program with the same makespan and peak.
// docs/training-graph.md, "The chain notation and its lowering".

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

// --- graph names ---------------------------------------------------------------------------------

/// With the graph's names: "fwd conv1", "fwd conv1 [ff]", "free grad conv1", "offload conv1".
/// Indices that are not in the graph are written as in the plain text form.
inline std::string to_string(const graph& g, const instruction& i) {
  if (i.is_compute()) {
    if (i.node < 0 || i.node >= g.compute_count()) return to_string(i);
    return g.compute(i.node).name + (i.op == op_kind::fast_forward ? " [ff]" : "");
  }
  if (i.op == op_kind::sync) return "end of step";
  const char* verb = i.op == op_kind::free         ? "free "
                     : i.op == op_kind::offload    ? "offload "
                     : i.op == op_kind::prefetch   ? "prefetch "
                     : i.op == op_kind::wait       ? "wait "
                     : i.op == op_kind::update     ? "update "
                     : i.op == op_kind::cpu_update ? "update on the CPU "
                                                   : "? ";
  if (i.manages_parameters()) {
    if (i.node < 0 || static_cast<std::size_t>(i.node) >= g.parameters().size())
      return to_string(i);
    const char* part = i.part == tensor_part::gradient ? "grad "
                       : i.part == tensor_part::states ? "states "
                                                       : "";
    return verb + std::string(part) + g.parameters()[static_cast<std::size_t>(i.node)].name;
  }
  if (i.node < 0 || i.node >= g.data_count()) return to_string(i);
  return verb + g.data(i.node).name;
}

/// One instruction per line, with names.
inline std::string to_string(const graph& g, const schedule& s) {
  std::string out;
  for (const auto& i : s.ops) out += to_string(g, i) + '\n';
  return out;
}

// --- the chain notation --------------------------------------------------------------------------

enum class forward_mode : unsigned char { no_save, save_input, save_all };
enum class chain_op_kind : unsigned char { forward, backward, offload, prefetch, wait };

/// One word of the chain notation.
struct chain_op {
  chain_op_kind kind = chain_op_kind::forward;
  /// The stage (1-based) of a forward or backward; the activation a_k (0-based) of a transfer.
  int index = 0;
  forward_mode mode = forward_mode::no_save;  ///< meaningful for forwards only

  static constexpr chain_op forward(int l, forward_mode m) {
    return {chain_op_kind::forward, l, m};
  }
  static constexpr chain_op backward(int l) {
    return {chain_op_kind::backward, l, forward_mode::no_save};
  }
  static constexpr chain_op offload(int k) {
    return {chain_op_kind::offload, k, forward_mode::no_save};
  }
  static constexpr chain_op prefetch(int k) {
    return {chain_op_kind::prefetch, k, forward_mode::no_save};
  }
  static constexpr chain_op wait(int k) { return {chain_op_kind::wait, k, forward_mode::no_save}; }
  [[nodiscard]] constexpr bool is_compute() const noexcept {
    return kind == chain_op_kind::forward || kind == chain_op_kind::backward;
  }

  friend constexpr bool operator==(const chain_op& x, const chain_op& y) {
    return x.kind == y.kind && x.index == y.index &&
           (x.kind != chain_op_kind::forward || x.mode == y.mode);
  }
};

inline constexpr char letter(chain_op_kind k) {
  switch (k) {
    case chain_op_kind::forward:
      return 'F';
    case chain_op_kind::backward:
      return 'B';
    case chain_op_kind::offload:
      return 'O';
    case chain_op_kind::prefetch:
      return 'P';
    case chain_op_kind::wait:
      return 'W';
  }
  return '?';
}

inline constexpr std::string_view to_string(forward_mode m) {
  switch (m) {
    case forward_mode::no_save:
      return "none";
    case forward_mode::save_input:
      return "ck";
    case forward_mode::save_all:
      return "all";
  }
  return "?";
}

/// "F3_ck", "B3", "O0", ...
inline std::string to_string(const chain_op& i) {
  std::string s = letter(i.kind) + std::to_string(i.index);
  if (i.kind == chain_op_kind::forward) s += "_" + std::string(to_string(i.mode));
  return s;
}

/// "F1_ck F2_none ... B1"
inline std::string to_string(std::span<const chain_op> ops) {
  std::string out;
  for (const auto& i : ops) {
    if (!out.empty()) out += ' ';
    out += to_string(i);
  }
  return out;
}

/// Parses "F3_ck", "F2_none", "F1_all", "B4", "O0", "P2" or "W2"; nullopt when the text is none
/// of these. Stages are 1-based, activations (of O, P, W) 0-based.
inline std::optional<chain_op> parse_chain_op(std::string_view s) {
  static constexpr chain_op_kind kinds[] = {chain_op_kind::forward, chain_op_kind::backward,
                                            chain_op_kind::offload, chain_op_kind::prefetch,
                                            chain_op_kind::wait};
  if (s.size() < 2 || s[1] < '0' || s[1] > '9') return std::nullopt;  // no sign: "O-0"
  const chain_op_kind* kind = nullptr;
  for (const chain_op_kind& k : kinds)
    if (s[0] == letter(k)) kind = &k;
  if (kind == nullptr) return std::nullopt;
  int idx = 0;
  const char* first = s.data() + 1;
  const char* last = s.data() + s.size();
  auto [p, ec] = std::from_chars(first, last, idx);
  const int lowest = *kind == chain_op_kind::forward || *kind == chain_op_kind::backward ? 1 : 0;
  if (ec != std::errc() || p == first || idx < lowest) return std::nullopt;
  std::string_view rest(p, static_cast<std::size_t>(last - p));
  if (*kind != chain_op_kind::forward)
    return rest.empty() ? std::optional(chain_op{*kind, idx, forward_mode::no_save}) : std::nullopt;
  if (rest == "_none") return chain_op::forward(idx, forward_mode::no_save);
  if (rest == "_ck") return chain_op::forward(idx, forward_mode::save_input);
  if (rest == "_all") return chain_op::forward(idx, forward_mode::save_all);
  return std::nullopt;
}

/// Parses chain ops separated by white space; nullopt when a word is not one.
inline std::optional<std::vector<chain_op>> parse_chain_ops(std::string_view text) {
  std::vector<chain_op> ops;
  for (std::string_view w : words_of(text)) {
    const auto op = parse_chain_op(w);
    if (!op) return std::nullopt;
    ops.push_back(*op);
  }
  return ops;
}

/// Where the lowering puts the nodes of an N-stage chain's a_k, delta_k, and stage l's nodes.
struct chain_nodes {
  training_layout lay;
  explicit constexpr chain_nodes(int n) : lay{n} {}
  [[nodiscard]] constexpr int a(int k) const { return k == 0 ? lay.input : lay.activation(k - 1); }
  [[nodiscard]] constexpr int delta(int k) const {
    return k == 0 ? lay.input_gradient : lay.gradient(k - 1);
  }
  [[nodiscard]] constexpr int phantom(int l) const { return lay.phantom(l - 1); }
  [[nodiscard]] constexpr int fwd(int l) const { return lay.forward(l - 1); }
  [[nodiscard]] constexpr int bwd(int l) const { return lay.backward(l - 1); }
};

/// Which rule of the chain notation a chain op breaks (lower()).
enum class chain_rule : unsigned char {
  unknown_index,    ///< a stage or activation that does not exist
  missing_input,    ///< an input is not stored (or F^none's input is abar, or is a_0)
  already_present,  ///< the output is already stored
};
struct lowering_failure {
  std::size_t op = 0;  ///< the chain op at fault
  chain_rule rule = chain_rule::missing_input;
};

/// The lowering of chain ops over an N-stage chain (the rules at the top of this header). The
/// error (status::invalid_problem) names the op, its position and the rule it breaks; with
/// `failure`, which op and rule. With `origin`, origin[j] is the index of the chain op
/// instruction j comes from.
inline result<schedule> lower(int n, std::span<const chain_op> ops,
                              std::vector<std::size_t>* origin = nullptr,
                              lowering_failure* failure = nullptr) {
  enum class held : unsigned char { none, plain, full };
  const chain_nodes at(n);
  const auto count = static_cast<std::size_t>(n + 1);
  std::vector<held> act(count, held::none);
  std::vector<char> grad(count, 0);
  act[0] = held::plain;
  grad[count - 1] = 1;
  bool loss_done = false;
  schedule out;
  out.ops.reserve(ops.size() * 3);
  if (origin) origin->clear();
  auto k = [](int i) { return static_cast<std::size_t>(i); };
  auto name_of = [&](int i) {
    return (act[k(i)] == held::full ? "abar_" : "a_") + std::to_string(i);
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const chain_op& op = ops[i];
    const int l = op.index;
    auto bad = [&](const std::string& why, chain_rule rule = chain_rule::missing_input) {
      if (failure) *failure = {i, rule};
      return error{
          status::invalid_problem, to_string(op) + " at op " + std::to_string(i) + ": " + why, {}};
    };
    auto emit = [&](instruction ins) {
      out.ops.push_back(ins);
      if (origin) origin->push_back(i);
    };
    if (!op.is_compute()) {
      if (l < 0 || l > n)
        return bad("activation a_" + std::to_string(l) + " does not exist (the chain has a_0..a_" +
                       std::to_string(n) + ")",
                   chain_rule::unknown_index);
      const int d = at.a(l);
      emit(op.kind == chain_op_kind::offload    ? instruction::offload(d)
           : op.kind == chain_op_kind::prefetch ? instruction::prefetch(d)
                                                : instruction::wait(d));
      continue;
    }
    if (l < 1 || l > n)
      return bad("stage " + std::to_string(l) + " does not exist (the chain has stages 1.." +
                     std::to_string(n) + ")",
                 chain_rule::unknown_index);
    held& in = act[k(l - 1)];
    held& self = act[k(l)];
    if (op.kind == chain_op_kind::forward) {
      if (l == 1 && op.mode == forward_mode::no_save)
        return bad(
            "F1_none consumes a_0, the chain's input, which B1 needs and nothing can recompute; "
            "use F1_ck");
      if (in == held::none)
        return bad("its input a_" + std::to_string(l - 1) + " is not in memory");
      if (op.mode == forward_mode::no_save && in == held::full)
        return bad("F" + std::to_string(l) + "_none consumes a plain a_" + std::to_string(l - 1) +
                   ", but abar_" + std::to_string(l - 1) + " is stored (a B" +
                   std::to_string(l - 1) + " needs it); use F" + std::to_string(l) + "_ck");
      if (self != held::none)
        return bad(name_of(l) + " is already in memory", chain_rule::already_present);
      if (op.mode == forward_mode::save_all) {
        emit(instruction::compute(at.fwd(l)));
        self = held::full;
      } else {
        emit(instruction::fast_forward(at.fwd(l)));
        self = held::plain;
        if (op.mode == forward_mode::no_save) {
          emit(instruction::free(at.a(l - 1)));
          in = held::none;
        }
      }
      continue;
    }
    if (!grad[k(l)]) return bad("its input delta_" + std::to_string(l) + " is not in memory");
    if (self != held::full)
      return bad("it needs abar_" + std::to_string(l) + " (run F" + std::to_string(l) +
                 "_all first)" +
                 (self == held::plain ? ", but only a_" + std::to_string(l) + " is stored" : ""));
    if (in == held::none) return bad("its input a_" + std::to_string(l - 1) + " is not in memory");
    if (grad[k(l - 1)])
      return bad("delta_" + std::to_string(l - 1) + " is already in memory",
                 chain_rule::already_present);
    if (l == n && !loss_done) {
      emit(instruction::compute(at.lay.loss()));
      loss_done = true;
    }
    emit(instruction::compute(at.bwd(l)));
    emit(instruction::free(at.delta(l)));
    emit(instruction::free(at.phantom(l)));
    emit(instruction::free(at.a(l)));
    self = held::none;
    grad[k(l)] = 0;
    grad[k(l - 1)] = 1;
    if (in == held::plain) {
      if (l > 1) emit(instruction::free(at.a(l - 1)));
      in = held::none;
    }
  }
  return out;
}

/// Parses chain notation and lowers it over an N-stage chain.
inline result<schedule> parse_chain_program(int n, std::string_view text) {
  std::vector<chain_op> ops;
  for (std::string_view w : words_of(text)) {
    const auto op = parse_chain_op(w);
    if (!op)
      return error{status::invalid_problem,
                   "'" + std::string(w) +
                       "' is not an instruction of the chain notation (F<l>_none, F<l>_ck, "
                       "F<l>_all, B<l>, O<k>, "
                       "P<k>, W<k>)",
                   {}};
    ops.push_back(*op);
  }
  return lower(n, ops);
}

/// The chain ops a program is the lowering of, over an N-stage chain; nullopt when it is not
/// chain-shaped.
inline std::optional<std::vector<chain_op>> to_chain_ops(int n, const schedule& s) {
  const chain_nodes at(n);
  const training_layout& lay = at.lay;
  auto activation_k = [&](int d) -> int {  // k with a(k) == d, or -1
    if (d == lay.input) return 0;
    if (d >= 2 && (d - 2) % 3 == 0 && (d - 2) / 3 < n) return (d - 2) / 3 + 1;
    return -1;
  };
  std::vector<chain_op> ops;
  const auto& p = s.ops;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const instruction& ins = p[i];
    if (ins.is_compute()) {
      const int c = ins.node;
      if (c == lay.loss() && ins.op == op_kind::compute) continue;
      if (c >= 0 && c < n) {  // a forward
        const int l = c + 1;
        if (ins.op == op_kind::compute) {
          ops.push_back(chain_op::forward(l, forward_mode::save_all));
        } else if (i + 1 < p.size() && p[i + 1] == instruction::free(at.a(l - 1))) {
          ops.push_back(chain_op::forward(l, forward_mode::no_save));
          ++i;
        } else {
          ops.push_back(chain_op::forward(l, forward_mode::save_input));
        }
      } else if (c > n && c <= 2 * n && ins.op == op_kind::compute) {  // a backward
        const int l = 2 * n - c + 1;
        ops.push_back(chain_op::backward(l));
        i += 3;  // its frees of delta_l, the phantom and a_l ...
        if (l > 1 && i + 1 < p.size() && p[i + 1] == instruction::free(at.a(l - 1)))
          ++i;  // ... and a plain a_{l-1}
      } else {
        return std::nullopt;
      }
      continue;
    }
    const int k = activation_k(ins.node);
    if (k < 0 || ins.op == op_kind::free) return std::nullopt;
    ops.push_back(ins.op == op_kind::offload    ? chain_op::offload(k)
                  : ins.op == op_kind::prefetch ? chain_op::prefetch(k)
                                                : chain_op::wait(k));
  }
  const auto back = lower(n, ops);
  if (!back || back->ops != s.ops) return std::nullopt;
  return ops;
}

/// The chain ops a chain's program is printed in (io/json.hpp's to_json(s, chain), remat-plan,
/// io/trace.hpp): to_chain_ops when the program is chain-shaped and has a forward or a backward,
/// the F or B word that tells the notation apart from program text (a program of transfers alone
/// reads the same in both); nullopt when it is printed as program text.
inline std::optional<std::vector<chain_op>> printed_chain_ops(int n, const schedule& s) {
  auto ops = to_chain_ops(n, s);
  if (!ops ||
      std::none_of(ops->begin(), ops->end(), [](const chain_op& o) { return o.is_compute(); }))
    return std::nullopt;
  return ops;
}

/// The program in chain notation ("F1_ck F2_none ... B1"); nullopt when it is not chain-shaped.
inline std::optional<std::string> to_chain_string(int n, const schedule& s) {
  const auto ops = to_chain_ops(n, s);
  if (!ops) return std::nullopt;
  return to_string(std::span<const chain_op>(*ops));
}

}  // namespace remat
