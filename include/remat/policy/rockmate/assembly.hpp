#pragma once
// Rockmate's program [Zhao24, §2.5, Alg. 6]: RK-Rotor's decisions over the block chain with each
// block op replaced by its program on the whole graph (the representative's, node for node: the
// identical blocks have the same block graph up to names), and the block inputs freed as the
// chain notation's lowering frees a plain input. The target RK-Rotor's solve finishes through.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::detail {

/// Writes the program of RK-Rotor's decisions on the whole graph, and records which option each
/// block ran with and how many times its forward ran.
class block_assembly {
 public:
  block_assembly(const graph& g, const block_kinds& bk, const std::vector<block_programs>& programs)
      : g_(g), bk_(bk), programs_(programs) {
    const int nb = bk.count();
    input_node_.assign(ix(nb), -1);
    for (int k = 0; k < nb; ++k) {
      const block_graph& b = bk.blocks[ix(k)];
      for (int d : b.inputs)
        if (b.g.data(d).kind == data_kind::activation &&
            !g.data(b.data_in_parent[ix(d)]).is_protected)
          input_node_[ix(k)] = b.data_in_parent[ix(d)];
    }
    chosen_.assign(ix(nb), 0);
    runs_.assign(ix(nb), 0);
  }

  /// The program of the decisions (its predicted time: its ops' exact times).
  schedule program_of(const decisions& d) const {
    schedule s;
    std::fill(runs_.begin(), runs_.end(), 0);
    starts_.clear();
    // Whether block k's input is held plain (from F^ck / F^none, freed by B_k as in the chain
    // notation's lowering) rather than in the previous block's x̄ (freed by its B).
    std::vector<char> plain(ix(bk_.count()) + 1, 0);
    for (std::size_t i = 0; i < d.ops.size(); ++i) {
      const chain_op& op = d.ops[i];
      const int k = op.index - 1;
      starts_.push_back(s.ops.size());
      const int o = d.options.empty() ? 0 : d.options[i];
      const block_programs& p = programs_[ix(bk_.kind_of[ix(k)])];
      const std::vector<instruction>* part = nullptr;
      if (op.kind == chain_op_kind::forward) {
        ++runs_[ix(k)];
        part = op.mode == forward_mode::save_all ? &p.options[ix(o)].forward : &p.fast_forward;
        if (op.mode == forward_mode::save_all) chosen_[ix(k)] = o;
      } else {
        part = &p.options[ix(o)].backward;
      }
      const auto mapped = on_block(k, *part);
      s.ops.insert(s.ops.end(), mapped.begin(), mapped.end());
      const auto uk = ix(k);
      if (op.kind == chain_op_kind::forward) {
        plain[uk + 1] = op.mode != forward_mode::save_all;
        if (op.mode == forward_mode::no_save) {
          if (input_node_[uk] >= 0) s.ops.push_back(instruction::free(input_node_[uk]));
          plain[uk] = 0;
        }
      } else {
        plain[uk + 1] = 0;
        if (plain[uk] && input_node_[uk] >= 0) s.ops.push_back(instruction::free(input_node_[uk]));
        plain[uk] = 0;
      }
    }
    s.predicted_time = program_time(g_, s.ops);
    return s;
  }

  /// Of the last program written: the option each block's F^all ran with, its forward runs.
  [[nodiscard]] const std::vector<int>& chosen() const { return chosen_; }
  [[nodiscard]] const std::vector<int>& runs() const { return runs_; }
  /// Where each decision's instructions begin in the last program written.
  [[nodiscard]] const std::vector<std::size_t>& op_starts() const { return starts_; }

 private:
  /// Block k's instructions, given on its kind's representative's nodes, on the whole graph.
  std::vector<instruction> on_block(int k, const std::vector<instruction>& ops) const {
    return between_blocks(g_, bk_.of_kind(bk_.kind_of[ix(k)]), bk_.blocks[ix(k)], ops);
  }

  const graph& g_;
  const block_kinds& bk_;
  const std::vector<block_programs>& programs_;
  std::vector<int> input_node_;  ///< block k's input on the whole graph (-1: a graph input)
  mutable std::vector<int> chosen_, runs_;
  mutable std::vector<std::size_t> starts_;
};

/// RK-Rotor's target (detail/refine.hpp): its decisions become the assembled program, checked
/// by the referee. Where every F^0 costs what the DP charges (exact_fast), the program's time
/// must be the DP's claim.
struct assembly_target {
  std::string_view policy;
  const graph& g;
  bytes budget;
  const chain& block_chain;
  const block_assembly& assembly;
  bool exact_fast = true;

  [[nodiscard]] bytes store_all_peak() const {
    const chain& c = block_chain;
    return sim::simulate(g, assembly.program_of({store_all::program(c), {}, c.ideal_time()}),
                         {.record_timeline = false})
        .peak;
  }
  [[nodiscard]] result<schedule> finish(decisions d) const {
    schedule s = assembly.program_of(d);
    const double tol = 1e-9 * std::max(1.0, std::abs(s.predicted_time));
    if (exact_fast && std::abs(s.predicted_time - d.time) > tol)
      return error{status::solver_error,
                   std::string(policy) + ": RK-Rotor claimed " + std::to_string(d.time) +
                       " s but its program takes " + std::to_string(s.predicted_time) +
                       " s (a bug in remat; please report it with the graph)",
                   {}};
    return detail::finish(policy, g, budget, std::move(s));
  }
};

}  // namespace remat::detail
