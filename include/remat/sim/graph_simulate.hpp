#pragma once
// The simulator for graph schedules: the referee of every graph policy (DESIGN.md §5). It replays
// a program of compute / fast_forward / free instructions with the memory rules of
// rockmate-spec §1.3 and the validity rules of §1.4 / §10.2:
//   * memory starts with the graph's sources (its protected inputs) alive;
//   * a compute node runs only when every input is alive and complete: a gradient with several
//     producers is complete when all its contributions have run since it was last created (T:430);
//   * running c creates each output that is not alive (allocated at the first contribution) and
//     adds c's contribution to each that is; the peak while c runs is the memory before it + the
//     sizes it allocates + its overhead (a fast-forward: its fast overhead, and no phantom);
//     deletions come after, as separate free instructions (time 0), so they never lower c's peak;
//   * a data node is stored once: running c while c's contribution to one of its outputs is
//     already there (an activation that is alive, a contribution already summed into a gradient)
//     is a violation: free it first. For an activation this costs nothing, the recompute
//     allocates it again at the same step; for a gradient it would sum a contribution twice;
//   * the loss runs exactly once; protected data is never freed;
//   * at the end every compute node has run at least once (so every protected output is alive
//     and complete: protected data is never freed) and nothing but protected data is alive.
// The makespan is the sum of the compute times (fast_time for a fast-forward).
//
// The graph is checked with validate() first. Structural violations stop the replay; exceeding
// the budget is recorded as the first violation but the replay goes on, so that the reported peak
// is the schedule's true peak (as in the chain simulator, sim/simulate.hpp).

#include <algorithm>
#include <cstddef>
#include <optional>
#include <remat/core/units.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/graph_schedule.hpp>
#include <remat/sim/simulate.hpp>
#include <string>
#include <utility>
#include <vector>

namespace remat::sim {

enum class graph_violation_kind {
  invalid_graph,        ///< validate(graph) failed (op 0)
  unknown_node,         ///< an index that is not in the graph
  invalid_instruction,  ///< a fast-forward of a node that is not a forward
  missing_input,        ///< an input is not alive
  incomplete_input,     ///< an input gradient lacks some of its contributions
  already_present,      ///< the node's contribution to an output is already in memory
  not_in_memory,        ///< free of a data node that is not alive
  protected_free,       ///< free of a protected data node
  loss_repeated,        ///< the loss run a second time
  backward_repeated,    ///< a backward run a second time (it would add to the parameter gradients twice)
  over_budget,
  wrong_final_state,  ///< a compute node never ran, or unprotected data is left alive
};

struct graph_violation {
  graph_violation_kind kind = graph_violation_kind::missing_input;
  std::size_t op = 0;  ///< index of the offending instruction (ops.size() for the final state)
  std::string message;
};

struct graph_report {
  bool valid = false;  ///< no violation at all, budget included
  seconds makespan = 0;
  bytes peak = 0;
  std::vector<memory_point> timeline;  ///< one point per instruction, frees included
  std::optional<graph_violation> first_violation;
};

namespace detail {
inline std::string quoted_name(const graph& g, int d) {
  const auto& n = g.data(d).name;
  return "'" + (n.empty() ? "d" + std::to_string(d) : n) + "'";
}
inline std::string quoted_compute(const graph& g, int c) {
  const auto& n = g.compute(c).name;
  return "'" + (n.empty() ? "c" + std::to_string(c) : n) + "'";
}
}  // namespace detail

inline graph_report simulate(const graph& g, const graph_schedule& s, options opt = {}) {
  graph_report r;
  auto fail = [&](graph_violation_kind k, std::size_t op, std::string msg) {
    if (!r.first_violation) r.first_violation = graph_violation{k, op, std::move(msg)};
  };
  if (auto v = validate(g); !v) {
    fail(graph_violation_kind::invalid_graph, 0, v.message());
    return r;
  }
  using detail::quoted_compute;
  using detail::quoted_name;
  const auto nd = static_cast<std::size_t>(g.data_count());
  const auto nc = static_cast<std::size_t>(g.compute_count());
  auto at = [](auto& v, int i) -> decltype(auto) { return v[static_cast<std::size_t>(i)]; };

  // done[d][k]: producer k of d (its k-th in producers(d)) has contributed since d was created.
  std::vector<char> alive(nd, 0);
  std::vector<std::vector<char>> done(nd);
  std::vector<int> missing(nd, 0);  // contributions still to come while alive
  std::vector<int> runs(nc, 0);
  bytes mem = 0;
  for (int d = 0; d < g.data_count(); ++d) {
    at(done, d).assign(g.producers(d).size(), 0);
    if (g.is_source(d)) {
      at(alive, d) = 1;
      mem += g.data(d).size;
    }
  }
  r.peak = mem;
  if (opt.record_timeline) r.timeline.reserve(s.ops.size());
  auto position = [&](int d, int c) {
    const auto pr = g.producers(d);
    return static_cast<std::size_t>(std::find(pr.begin(), pr.end(), c) - pr.begin());
  };
  auto waiting_for = [&](int d) {
    std::vector<int> w;
    const auto pr = g.producers(d);
    for (std::size_t k = 0; k < pr.size(); ++k)
      if (!at(done, d)[k]) w.push_back(pr[k]);
    return ::remat::detail::compute_list(g, w);
  };

  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const graph_instruction& ins = s.ops[i];
    const std::string name = "instruction " + std::to_string(i) + " (" + to_string(ins) + ")";
    const bytes before = mem;
    bytes peak = mem;
    seconds dt = 0;
    if (ins.kind == graph_op_kind::free) {
      const int d = ins.node;
      if (d < 0 || d >= g.data_count()) {
        fail(graph_violation_kind::unknown_node, i,
             name + ": data node " + std::to_string(d) +
                 " does not exist (the graph has data nodes 0.." +
                 std::to_string(g.data_count() - 1) + ")");
        return r;
      }
      const std::string what = name + ": free " + quoted_name(g, d);
      if (g.data(d).is_protected) {
        fail(graph_violation_kind::protected_free, i,
             what + ": it is protected (a graph input or output) and is never freed");
        return r;
      }
      if (!at(alive, d)) {
        fail(graph_violation_kind::not_in_memory, i, what + ": it is not in memory");
        return r;
      }
      at(alive, d) = 0;
      at(missing, d) = 0;
      std::fill(at(done, d).begin(), at(done, d).end(), 0);
      mem -= g.data(d).size;
    } else {
      const int c = ins.node;
      if (c < 0 || c >= g.compute_count()) {
        fail(graph_violation_kind::unknown_node, i,
             name + ": compute node " + std::to_string(c) +
                 " does not exist (the graph has compute nodes 0.." +
                 std::to_string(g.compute_count() - 1) + ")");
        return r;
      }
      const compute_node& node = g.compute(c);
      const std::string what = name + ": " + quoted_compute(g, c);
      if (ins.fast && node.kind != compute_kind::forward) {
        fail(graph_violation_kind::invalid_instruction, i,
             what + " is a " + std::string(to_string(node.kind)) +
                 "; only forwards have a fast-forward variant");
        return r;
      }
      if (node.kind == compute_kind::loss && at(runs, c) > 0) {
        fail(graph_violation_kind::loss_repeated, i,
             what + ": the loss runs exactly once, and it already ran");
        return r;
      }
      if (node.kind == compute_kind::backward && at(runs, c) > 0) {
        fail(graph_violation_kind::backward_repeated, i,
             what + ": a backward runs exactly once (a second run would add to the parameter "
                    "gradients again), and it already ran");
        return r;
      }
      for (int d : g.inputs(c)) {
        if (!at(alive, d)) {
          fail(graph_violation_kind::missing_input, i,
               what + ": its input " + quoted_name(g, d) + " is not in memory");
          return r;
        }
        if (at(missing, d) > 0) {
          fail(graph_violation_kind::incomplete_input, i,
               what + ": its input " + quoted_name(g, d) + " is incomplete: the contributions of " +
                   waiting_for(d) + " have not run since it was created");
          return r;
        }
      }
      bytes created = 0;
      for (int d : g.outputs(c)) {
        if (ins.fast && g.data(d).kind == data_kind::phantom) continue;
        if (at(alive, d) && at(done, d)[position(d, c)]) {
          const bool single = g.producers(d).size() == 1;
          fail(graph_violation_kind::already_present, i,
               what + ": " +
                   (single ? "its output " + quoted_name(g, d) +
                                 " is already in memory; free it before recomputing"
                           : "its contribution to " + quoted_name(g, d) +
                                 " is already summed in (it ran since the gradient was created); "
                                 "running it again would add it twice"));
          return r;
        }
      }
      for (int d : g.outputs(c)) {
        if (ins.fast && g.data(d).kind == data_kind::phantom) continue;
        if (!at(alive, d)) {
          at(alive, d) = 1;
          at(missing, d) = static_cast<int>(g.producers(d).size());
          created += g.data(d).size;
        }
        at(done, d)[position(d, c)] = 1;
        --at(missing, d);
      }
      peak = mem + created + (ins.fast ? node.fast_overhead : node.overhead);
      mem += created;
      dt = ins.fast ? node.fast_time : node.time;
      ++at(runs, c);
    }
    if (peak > opt.budget)
      fail(graph_violation_kind::over_budget, i,
           name + ": needs " + std::to_string(peak) + " bytes while it runs, over the budget of " +
               std::to_string(opt.budget) + " bytes");
    r.peak = std::max(r.peak, peak);
    if (opt.record_timeline)
      r.timeline.push_back({i, r.makespan, r.makespan + dt, before, peak, mem});
    r.makespan += dt;
  }

  // Final state. Protected data is never freed, so once every compute node has run, every
  // protected output is alive with all its contributions: only what is left over can be wrong.
  const std::size_t end = s.ops.size();
  std::vector<int> never;
  for (int c = 0; c < g.compute_count(); ++c)
    if (at(runs, c) == 0) never.push_back(c);
  std::string leftover;
  for (int d = 0; d < g.data_count(); ++d)
    if (!g.data(d).is_protected && at(alive, d))
      leftover += (leftover.empty() ? "" : ", ") + quoted_name(g, d);
  if (!never.empty())
    fail(graph_violation_kind::wrong_final_state, end,
         "the schedule ends without running " + ::remat::detail::compute_list(g, never) +
             "; every compute node runs at least once" +
             (leftover.empty() ? std::string() : "; memory still holds " + leftover));
  else if (!leftover.empty())
    fail(graph_violation_kind::wrong_final_state, end,
         "the schedule ends with " + leftover +
             " still in memory; it must end holding only the protected data");
  r.valid = !r.first_violation.has_value();
  return r;
}

}  // namespace remat::sim
