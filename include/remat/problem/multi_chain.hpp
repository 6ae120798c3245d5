#pragma once
// K homogeneous chains joined at one loss [Shilova21, §1.3, Def. 3] (a Siamese net, a
// two-tower or cross-modal model): chain j has L_j forwards F_1..F_{L_j} from its input a_0^(j);
// one Loss reads every a_{L_j}^(j) and gives every delta_{L_j}^(j); the backwards B_i^(j) run the
// chains back to their delta_0^(j). Unit costs u_F, u_B, u_L; every activation and gradient is
// one slot of slot_bytes; keep = b says which delta_0^(j) stay to the end (MULTI-b, Problem 4;
// none = MULTI-∅). validate() names the field at fault; build_graph() makes the chains'
// training graph: K towers over the one graph input, joined at the loss. docs/multi-chain.md.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>

namespace remat {

struct multi_chain {
  std::string name;
  std::vector<int> lengths;   ///< L_1..L_K, the forwards of each chain (0: the loss reads a_0)
  seconds forward_time = 1;   ///< u_F, every F_i^(j)
  seconds backward_time = 1;  ///< u_B, every B_i^(j)
  seconds loss_time = 1;      ///< u_L, the Loss
  bytes slot_bytes = 1;       ///< one activation or gradient
  /// b: keep[j] = chain j+1's delta_0 stays to the end; empty = none kept (MULTI-∅).
  std::vector<bool> keep = {};

  friend bool operator==(const multi_chain&, const multi_chain&) = default;

  /// K.
  [[nodiscard]] int chains() const noexcept { return static_cast<int>(lengths.size()); }
  /// L_j, chains numbered 1..K as in the thesis.
  [[nodiscard]] int length(int j) const { return lengths[static_cast<std::size_t>(j - 1)]; }
  /// b_j, chains numbered 1..K.
  [[nodiscard]] bool keeps(int j) const {
    return !keep.empty() && keep[static_cast<std::size_t>(j - 1)];
  }
  /// sum L_j, the backwards of every schedule.
  [[nodiscard]] int total_length() const noexcept {
    int n = 0;
    for (int l : lengths) n += l;
    return n;
  }
  /// The makespan of a schedule with `forwards` forwards (every B and the Loss once).
  [[nodiscard]] seconds time_of(std::int64_t forwards) const {
    return static_cast<double>(forwards) * forward_time +
           static_cast<double>(total_length()) * backward_time + loss_time;
  }
};

/// The largest total length validate() accepts (the training graph has 3 nodes per forward).
inline constexpr int max_multi_chain_length = 1 << 20;

/// Checks a multi-chain problem; the error names the field at fault.
inline result<void> validate(const multi_chain& p) {
  const std::string where = "multi-chain '" + p.name + "': ";
  auto bad = [&](std::string msg) { return error{status::invalid_problem, where + msg, {}}; };
  if (p.lengths.empty())
    return bad("lengths is empty: there is no chain; give one length per chain (K >= 1)");
  std::int64_t total = 0;
  for (std::size_t j = 0; j < p.lengths.size(); ++j) {
    if (p.lengths[j] < 0)
      return bad("lengths[" + std::to_string(j) + "] is " + std::to_string(p.lengths[j]) +
                 "; a chain's length is its number of forwards, an integer >= 0");
    total += p.lengths[j];
  }
  if (total > max_multi_chain_length)
    return bad("the lengths sum to " + std::to_string(total) + ", more than remat's limit of " +
               std::to_string(max_multi_chain_length));
  seconds sum = 0;
  for (auto [v, field] :
       {std::pair{p.forward_time, "forward_time"}, std::pair{p.backward_time, "backward_time"},
        std::pair{p.loss_time, "loss_time"}})
    if (auto e = detail::time_field_error(v, "the unit cost", field)) return bad(*e);
  for (auto [v, n] : {std::pair{p.forward_time, total}, std::pair{p.backward_time, total},
                      std::pair{p.loss_time, std::int64_t{1}}})
    sum += v * static_cast<double>(n);
  if (sum >= max_time)
    return bad("the ideal time (every op once) is " + detail::time_text(sum) +
               " s, not below remat's limit of 1e+15 s (remat::max_time)");
  if (p.slot_bytes <= 0)
    return bad("slot_bytes is " + std::to_string(p.slot_bytes) +
               "; every activation and gradient is one slot, a byte count > 0");
  if (p.slot_bytes > (bytes{1} << 40))
    return bad("slot_bytes (" + std::to_string(p.slot_bytes) + ") exceeds 2^40 bytes");
  if (!p.keep.empty() && p.keep.size() != p.lengths.size())
    return bad("keep has " + std::to_string(p.keep.size()) + " entries for " +
               std::to_string(p.lengths.size()) +
               " chains; give one per chain (true: its input gradient stays to the end), or "
               "none (MULTI-∅: none stays)");
  return {};
}

/// Where build_graph(multi_chain) puts chain j's op i (1 <= i <= L_j): op position
/// L_1 + .. + L_{j-1} + i - 1 of training_layout{sum L + 1}; the loss op is the last.
struct multi_chain_layout {
  std::vector<int> first;  ///< per chain j (0-based), the position of its op 1
  int loss_op = 0;         ///< the loss function's position (sum L)
  explicit multi_chain_layout(const multi_chain& p) {
    for (int l : p.lengths) {
      first.push_back(loss_op);
      loss_op += l;
    }
  }
  [[nodiscard]] training_layout layout() const { return {loss_op + 1}; }
  [[nodiscard]] int op(int j, int i) const {
    return first[static_cast<std::size_t>(j - 1)] + i - 1;
  }
};

/// The forward DAG of the chains: op "c<j>.<i>" reads op i-1 of its chain (op 1 the graph
/// input, which every chain shares: one slot), costs u_F forward and u_B backward, outputs one
/// slot, keeps no context (phantom 0) and its backward reads its input only, as B_i^(j) reads
/// a_{i-1} and delta_i [Shilova21, Table 1.1]. The loss op "loss" reads the last activation of
/// every chain (the input for a chain of length 0), costs u_L, and outputs the loss value, not a
/// slot (0 bytes).
inline forward_dag to_forward_dag(const multi_chain& p) {
  forward_dag f;
  f.name = p.name;
  f.input_bytes = p.slot_bytes;
  const std::string in(detail::graph_input_name);
  forward_op loss{"loss", {}, p.loss_time, 0, 0, 0, {}};
  for (int j = 1; j <= p.chains(); ++j) {
    std::string prev = in;
    for (int i = 1; i <= p.length(j); ++i) {
      std::string name = "c" + std::to_string(j) + "." + std::to_string(i);
      f.ops.push_back({name, {prev}, p.forward_time, p.backward_time, p.slot_bytes, 0, {prev}});
      prev = std::move(name);
    }
    if (std::find(loss.inputs.begin(), loss.inputs.end(), prev) == loss.inputs.end())
      loss.inputs.push_back(prev);
  }
  loss.backward_reads = loss.inputs;
  f.ops.push_back(std::move(loss));
  return f;
}

/// The training graph of the chains (validate() first); node positions: multi_chain_layout.
inline result<graph> build_graph(const multi_chain& p) {
  if (auto v = validate(p); !v) return v.err();
  return build_graph(to_forward_dag(p));
}

}  // namespace remat
