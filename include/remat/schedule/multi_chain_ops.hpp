#pragma once
// The operations of [Shilova21, Table 1.1] on K chains joined at a loss (problem/multi_chain.hpp),
// the notation the multi-chain DP decides in, and their one lowering onto the chains' training
// graph (build_graph(multi_chain)):
//   S_i^(j)  replicate a_i^(j) (+1 slot)            F_i^(j)  a_{i-1}^(j) -> a_i^(j), in place
//   Loss     every a_{L_j}^(j) -> delta_{L_j}^(j)    B_i^(j)  delta_i, a_{i-1} -> delta_{i-1}
//   D_i^(j)  discard a copy of a_i^(j) (-1 slot)     Dbar^(j) discard delta_0^(j) (if not kept)
// Text: S0^(1) F3^(2) Loss B3^(2) D3^(2) Dbar^(2).
//
// replay() checks the unit-slot model's rules (every op finds its inputs; the Loss once, each
// B once; at the end every kept delta_0 and nothing else but discardable delta_0's) and counts
// the slots in use after every op (the model's memory; the start holds the K inputs). Its
// lowering: F = compute(fwd) (freeing a_{i-1} when no copy is left, and first the stale context
// of an earlier run), the Loss = the loss op's forward, the loss node and its backward, then
// the frees of what it consumed, B = compute(bwd) and the frees of delta_i, its context and the
// last copy of a_{i-1}; S, D and Dbar free or keep copies only. Every a_0^(j) is the shared graph
// input and every delta_0^(j) its gradient (protected): docs/multi-chain.md §4.

#include <cstdint>
#include <string>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/multi_chain.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

enum class multi_chain_op_kind : char {
  replicate,         ///< S_i^(j)
  forward,           ///< F_i^(j)
  loss,              ///< Loss
  backward,          ///< B_i^(j)
  discard,           ///< D_i^(j)
  discard_gradient,  ///< Dbar^(j)
};

struct multi_chain_op {
  multi_chain_op_kind kind = multi_chain_op_kind::forward;
  int chain = 0;  ///< j, 1..K (0 for the Loss)
  int index = 0;  ///< i: the activation of S and D, the op of F and B (0 for the Loss, Dbar)

  static constexpr multi_chain_op replicate(int j, int i) {
    return {multi_chain_op_kind::replicate, j, i};
  }
  static constexpr multi_chain_op forward(int j, int i) {
    return {multi_chain_op_kind::forward, j, i};
  }
  static constexpr multi_chain_op loss() { return {multi_chain_op_kind::loss, 0, 0}; }
  static constexpr multi_chain_op backward(int j, int i) {
    return {multi_chain_op_kind::backward, j, i};
  }
  static constexpr multi_chain_op discard(int j, int i) {
    return {multi_chain_op_kind::discard, j, i};
  }
  static constexpr multi_chain_op discard_gradient(int j) {
    return {multi_chain_op_kind::discard_gradient, j, 0};
  }
  friend bool operator==(const multi_chain_op&, const multi_chain_op&) = default;
};

inline std::string to_string(const multi_chain_op& o) {
  const std::string sup = "^(" + std::to_string(o.chain) + ")";
  const std::string i = std::to_string(o.index);
  switch (o.kind) {
    case multi_chain_op_kind::replicate:
      return "S" + i + sup;
    case multi_chain_op_kind::forward:
      return "F" + i + sup;
    case multi_chain_op_kind::loss:
      return "Loss";
    case multi_chain_op_kind::backward:
      return "B" + i + sup;
    case multi_chain_op_kind::discard:
      return "D" + i + sup;
    case multi_chain_op_kind::discard_gradient:
      return "Dbar" + sup;
  }
  return "?";
}

inline std::string to_string(const std::vector<multi_chain_op>& ops) {
  std::string s;
  for (const auto& o : ops) {
    if (!s.empty()) s += ' ';
    s += to_string(o);
  }
  return s;
}

/// A replayed multi-chain program: its lowering, and what the unit-slot model says of it.
struct multi_chain_replay {
  schedule program;           ///< over build_graph(p); predicted_time = its makespan
  int peak_slots = 0;         ///< the most slots in use after any op (the start: K)
  std::int64_t forwards = 0;  ///< F ops (recomputations included)
};

/// Replays `ops` in the unit-slot model of p and lowers them; an op that breaks the model's rules
/// is an error naming it and its position.
inline result<multi_chain_replay> replay(const multi_chain& p,
                                         const std::vector<multi_chain_op>& ops) {
  if (auto v = validate(p); !v) return v.err();
  const int k = p.chains();
  const multi_chain_layout at(p);
  const training_layout lay = at.layout();
  // copies[j][i]: copies of a_i^(j); grad[j][i]: delta_i^(j) held; done[j][i]: B_i^(j) ran;
  // context[j][i]: the graph's phantom of op i is alive (its forward ran since B or a free).
  std::vector<std::vector<int>> copies(static_cast<std::size_t>(k));
  std::vector<std::vector<char>> grad(copies.size()), done(copies.size()), context(copies.size());
  for (int j = 1; j <= k; ++j) {
    const auto n = static_cast<std::size_t>(p.length(j)) + 1;
    copies[static_cast<std::size_t>(j - 1)].assign(n, 0);
    copies[static_cast<std::size_t>(j - 1)][0] = 1;
    grad[static_cast<std::size_t>(j - 1)].assign(n, 0);
    done[static_cast<std::size_t>(j - 1)].assign(n, 0);
    context[static_cast<std::size_t>(j - 1)].assign(n, 0);
  }
  auto cp = [&](int j, int i) -> int& {
    return copies[static_cast<std::size_t>(j - 1)][static_cast<std::size_t>(i)];
  };
  auto gr = [&](int j, int i) -> char& {
    return grad[static_cast<std::size_t>(j - 1)][static_cast<std::size_t>(i)];
  };
  auto ctx = [&](int j, int i) -> char& {
    return context[static_cast<std::size_t>(j - 1)][static_cast<std::size_t>(i)];
  };
  multi_chain_replay out;
  auto& prog = out.program.ops;
  int slots = k;
  out.peak_slots = k;
  bool loss_done = false;
  auto drop_copy = [&](int j, int i) {  // a copy of a_i^(j) goes; the last one leaves the graph
    if (--cp(j, i) == 0 && i > 0) prog.push_back(instruction::free(lay.activation(at.op(j, i))));
    --slots;
  };
  for (std::size_t n = 0; n < ops.size(); ++n) {
    const multi_chain_op& o = ops[n];
    auto bad = [&](const std::string& why) {
      return error{
          status::invalid_problem,
          "multi-chain program, op " + std::to_string(n + 1) + " (" + to_string(o) + "): " + why,
          {}};
    };
    if (o.kind != multi_chain_op_kind::loss) {
      if (o.chain < 1 || o.chain > k)
        return bad("there is no chain " + std::to_string(o.chain) + " (chains are 1.." +
                   std::to_string(k) + ")");
      const int lo =
          o.kind == multi_chain_op_kind::forward || o.kind == multi_chain_op_kind::backward ? 1 : 0;
      if (o.index < lo || o.index > p.length(o.chain))
        return bad("chain " + std::to_string(o.chain) + " has positions " + std::to_string(lo) +
                   ".." + std::to_string(p.length(o.chain)));
    }
    const int j = o.chain, i = o.index;
    switch (o.kind) {
      case multi_chain_op_kind::replicate:
        if (cp(j, i) == 0) return bad("a_" + std::to_string(i) + " is not in memory");
        ++cp(j, i);
        ++slots;
        break;
      case multi_chain_op_kind::discard:
        if (cp(j, i) == 0) return bad("a_" + std::to_string(i) + " is not in memory");
        drop_copy(j, i);
        break;
      case multi_chain_op_kind::forward:
        if (cp(j, i - 1) == 0)
          return bad("its input a_" + std::to_string(i - 1) + " is not in memory");
        if (cp(j, i) > 0)
          return bad("a_" + std::to_string(i) + " is already in memory; replicate it instead");
        if (ctx(j, i)) prog.push_back(instruction::free(lay.phantom(at.op(j, i))));
        prog.push_back(instruction::compute(lay.forward(at.op(j, i))));
        ctx(j, i) = 1;
        ++cp(j, i);
        ++slots;
        drop_copy(j, i - 1);
        ++out.forwards;
        break;
      case multi_chain_op_kind::loss: {
        if (loss_done) return bad("the Loss runs once");
        for (int c = 1; c <= k; ++c)
          if (cp(c, p.length(c)) == 0)
            return bad("a_" + std::to_string(p.length(c)) + "^(" + std::to_string(c) +
                       ") is not in memory");
        const int l = at.loss_op;
        prog.push_back(instruction::compute(lay.forward(l)));
        prog.push_back(instruction::compute(lay.loss()));
        prog.push_back(instruction::compute(lay.backward(l)));
        for (int d : {lay.activation(l), lay.gradient(l), lay.phantom(l)})
          prog.push_back(instruction::free(d));
        for (int c = 1; c <= k; ++c) {
          drop_copy(c, p.length(c));
          gr(c, p.length(c)) = 1;
          ++slots;
        }
        loss_done = true;
        break;
      }
      case multi_chain_op_kind::backward:
        if (!gr(j, i)) return bad("delta_" + std::to_string(i) + " is not in memory");
        if (cp(j, i - 1) == 0) return bad("a_" + std::to_string(i - 1) + " is not in memory");
        if (done[static_cast<std::size_t>(j - 1)][static_cast<std::size_t>(i)])
          return bad("each backward runs once");
        prog.push_back(instruction::compute(lay.backward(at.op(j, i))));
        prog.push_back(instruction::free(lay.gradient(at.op(j, i))));
        prog.push_back(instruction::free(lay.phantom(at.op(j, i))));
        ctx(j, i) = 0;
        done[static_cast<std::size_t>(j - 1)][static_cast<std::size_t>(i)] = 1;
        gr(j, i) = 0;
        gr(j, i - 1) = 1;
        --slots;
        drop_copy(j, i - 1);
        ++slots;
        break;
      case multi_chain_op_kind::discard_gradient:
        if (!gr(j, 0)) return bad("delta_0 is not in memory");
        if (p.keeps(j)) return bad("delta_0 of chain " + std::to_string(j) + " is kept (b = 1)");
        gr(j, 0) = 0;
        --slots;
        break;
    }
    out.peak_slots = std::max(out.peak_slots, slots);
  }
  for (int j = 1; j <= k; ++j) {
    const std::string chain = "chain " + std::to_string(j);
    auto incomplete = [&](const std::string& why) {
      return error{status::invalid_problem, "multi-chain program: " + why, {}};
    };
    if (!loss_done) return incomplete("the Loss never runs");
    for (int i = 1; i <= p.length(j); ++i)
      if (!done[static_cast<std::size_t>(j - 1)][static_cast<std::size_t>(i)])
        return incomplete("B" + std::to_string(i) + "^(" + std::to_string(j) + ") never runs");
    if (p.keeps(j) && !gr(j, 0))
      return incomplete(chain + " keeps delta_0 (b = 1), which is not in memory at the end");
    for (int i = 0; i <= p.length(j); ++i)
      if (cp(j, i) > 0)
        return incomplete("a_" + std::to_string(i) + "^(" + std::to_string(j) +
                          ") is still in memory at the end; discard it");
  }
  out.program.predicted_time = p.time_of(out.forwards);
  return out;
}

}  // namespace remat
