#pragma once
// What each instruction of a program is, for the pictures and traces of io/: its name as
// remat-plan prints the program (instruction_labels), and its part of the training step
// (instruction_phases: forward, recomputed forward, backward, or neither).

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::io {

/// Each instruction's name as remat-plan prints a graph's program: "fwd conv1 [ff]", "free grad
/// conv1", "offload conv1" (to_string(graph, instruction)).
inline std::vector<std::string> instruction_labels(const graph& g, const schedule& s) {
  std::vector<std::string> out;
  out.reserve(s.ops.size());
  for (const auto& i : s.ops) out.push_back(to_string(g, i));
  return out;
}

/// Each instruction's name as remat-plan prints a chain's program: in the chain notation when it
/// is printed so (printed_chain_ops), the chain op's word for the instruction that runs or moves
/// its tensor ("F2_ck", "B3", "O1") and "B3: free grad conv3" for the others it lowers to; the
/// training graph's names otherwise (the program text for a chain that is not valid).
inline std::vector<std::string> instruction_labels(const chain& c, const schedule& s) {
  const auto g = build_graph(c);  // fails only for an invalid chain: then the program text
  std::vector<std::string> out;
  if (g) {
    out = instruction_labels(*g, s);
  } else {
    for (const auto& i : s.ops) out.push_back(to_string(i));
    return out;
  }
  const auto ops = printed_chain_ops(c.length(), s);
  std::vector<std::size_t> origin;
  if (!ops || !lower(c.length(), *ops, &origin)) return out;
  const chain_nodes at(c.length());
  for (std::size_t j = 0; j < s.ops.size() && j < origin.size(); ++j) {
    const chain_op& op = (*ops)[origin[j]];
    const instruction& i = s.ops[j];
    const bool own = !op.is_compute() ? true
                     : op.kind == chain_op_kind::forward
                         ? i.is_compute() && i.node == at.fwd(op.index)
                         : i.is_compute() && i.node == at.bwd(op.index);
    out[j] = own ? to_string(op) : to_string(op) + ": " + out[j];
  }
  return out;
}

/// Where an instruction belongs in the training step.
enum class instruction_phase : unsigned char {
  forward,     ///< a forward op's first run (or a fast-forward) before the first backward
  recomputed,  ///< a forward op's run after its first one: a recomputation
  backward,    ///< a backward op (the loss's included)
  other,       ///< a free, a transfer or a wait
};

/// Each instruction's phase (recomputed: a forward op that has run before in the program).
inline std::vector<instruction_phase> instruction_phases(const graph& g, const schedule& s) {
  std::vector<instruction_phase> out;
  out.reserve(s.ops.size());
  std::vector<char> ran(static_cast<std::size_t>(std::max(g.compute_count(), 0)), 0);
  for (const auto& i : s.ops) {
    if (!i.is_compute() || i.node < 0 || i.node >= g.compute_count()) {
      out.push_back(instruction_phase::other);
      continue;
    }
    const auto at = static_cast<std::size_t>(i.node);
    if (g.compute(i.node).kind != compute_kind::forward) {
      out.push_back(instruction_phase::backward);
    } else {
      out.push_back(ran[at] ? instruction_phase::recomputed : instruction_phase::forward);
      ran[at] = 1;
    }
  }
  return out;
}
/// The same for a chain's program, over its training graph (all `other` for an invalid chain).
inline std::vector<instruction_phase> instruction_phases(const chain& c, const schedule& s) {
  const auto g = build_graph(c);
  if (!g) return std::vector<instruction_phase>(s.ops.size(), instruction_phase::other);
  return instruction_phases(*g, s);
}

}  // namespace remat::io
