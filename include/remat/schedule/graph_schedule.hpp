#pragma once
// Graph schedules: the program a graph policy returns, rockmate-spec §1.4 (Def. 3.2.3, T:1143):
// a sequence of Compute(cNode) and Delete(aNode).
//
//   compute(c)       runs compute node c: it needs every input alive and complete, creates its
//                    outputs (a contribution to a gradient that is already alive adds to it)
//   fast_forward(c)  runs forward node c without its phantoms (no_grad, T:754-758)
//   free(d)          deletes data node d
// Deletion is always explicit: nothing is freed by running a node, not even a phantom by its
// backward. Text form: C3 (compute 3), C3_ff (fast-forward 3), D5 (delete data 5), 0-based
// indices into the graph; to_string(graph, ...) writes node names instead.
//
// This is a separate type from the chain `schedule` (schedule.hpp), which keeps working
// unchanged; a chain schedule maps onto the graph of its chain with to_graph_schedule
// (problem/builder.hpp).

#include <charconv>
#include <cstddef>
#include <optional>
#include <ostream>
#include <remat/core/units.hpp>
#include <remat/problem/graph.hpp>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace remat {

enum class graph_op_kind : unsigned char { compute, free };

struct graph_instruction {
  graph_op_kind kind = graph_op_kind::compute;
  int node = 0;       ///< a compute node for compute, a data node for free
  bool fast = false;  ///< compute of a forward without its phantoms

  static constexpr graph_instruction compute(int c) { return {graph_op_kind::compute, c, false}; }
  static constexpr graph_instruction fast_forward(int c) {
    return {graph_op_kind::compute, c, true};
  }
  static constexpr graph_instruction free(int d) { return {graph_op_kind::free, d, false}; }

  friend constexpr bool operator==(const graph_instruction&, const graph_instruction&) = default;
};

/// A program plus what the policy that produced it predicts for it. Plain data.
struct graph_schedule {
  std::vector<graph_instruction> ops;
  seconds predicted_time = 0;
  bytes predicted_peak = 0;

  friend bool operator==(const graph_schedule&, const graph_schedule&) = default;
};

/// "C3", "C3_ff" or "D5".
inline std::string to_string(const graph_instruction& i) {
  if (i.kind == graph_op_kind::free) return "D" + std::to_string(i.node);
  return "C" + std::to_string(i.node) + (i.fast ? "_ff" : "");
}

/// With the graph's names: "fwd conv1", "fwd conv1 [ff]", "free grad conv1". Indices that are
/// not in the graph are written as in the plain text form.
inline std::string to_string(const graph& g, const graph_instruction& i) {
  if (i.kind == graph_op_kind::free) {
    if (i.node < 0 || i.node >= g.data_count()) return to_string(i);
    return "free " + g.data(i.node).name;
  }
  if (i.node < 0 || i.node >= g.compute_count()) return to_string(i);
  return g.compute(i.node).name + (i.fast ? " [ff]" : "");
}

/// Parses "C3", "C3_ff" or "D5"; nullopt when the text is none of these.
inline std::optional<graph_instruction> parse_graph_instruction(std::string_view s) {
  if (s.size() < 2 || (s[0] != 'C' && s[0] != 'D')) return std::nullopt;
  int idx = 0;
  const char* first = s.data() + 1;
  const char* last = s.data() + s.size();
  auto [p, ec] = std::from_chars(first, last, idx);
  if (ec != std::errc() || p == first || idx < 0) return std::nullopt;
  const std::string_view rest(p, static_cast<std::size_t>(last - p));
  if (s[0] == 'D') return rest.empty() ? std::optional(graph_instruction::free(idx)) : std::nullopt;
  if (rest.empty()) return graph_instruction::compute(idx);
  if (rest == "_ff") return graph_instruction::fast_forward(idx);
  return std::nullopt;
}

/// "C0 C1 D2 ..."
inline std::string to_string(const graph_schedule& s) {
  std::string out;
  for (const auto& i : s.ops) {
    if (!out.empty()) out += ' ';
    out += to_string(i);
  }
  return out;
}

/// One instruction per line, with names.
inline std::string to_string(const graph& g, const graph_schedule& s) {
  std::string out;
  for (const auto& i : s.ops) out += to_string(g, i) + '\n';
  return out;
}

inline std::ostream& operator<<(std::ostream& os, const graph_instruction& i) {
  return os << to_string(i);
}
inline std::ostream& operator<<(std::ostream& os, const graph_schedule& s) {
  return os << to_string(s);
}

/// Plain training as a graph program: every compute node once, in the graph's (topological)
/// order, forwards in normal mode (for a built graph: the forwards, the loss, the backwards in
/// reverse), and every data node that is not protected freed right after its last consumer.
/// Data freed after the same node are freed in index order. Valid for any graph that passes
/// validate(); its time is g.ideal_time().
[[nodiscard]] inline std::vector<graph_instruction> store_all_program(const graph& g) {
  // last[c]: the data nodes whose last use is compute node c.
  std::vector<std::vector<int>> last(static_cast<std::size_t>(g.compute_count()));
  for (int d = 0; d < g.data_count(); ++d) {
    if (g.data(d).is_protected) continue;
    int at = -1;
    for (int c : g.consumers(d)) at = c > at ? c : at;
    if (at < 0)  // nothing reads it (an invalid graph): free it once made
      for (int c : g.producers(d)) at = c > at ? c : at;
    if (at >= 0) last[static_cast<std::size_t>(at)].push_back(d);
  }
  std::vector<graph_instruction> ops;
  ops.reserve(static_cast<std::size_t>(g.compute_count() + g.data_count()));
  for (int c = 0; c < g.compute_count(); ++c) {
    ops.push_back(graph_instruction::compute(c));
    for (int d : last[static_cast<std::size_t>(c)]) ops.push_back(graph_instruction::free(d));
  }
  return ops;
}

}  // namespace remat
