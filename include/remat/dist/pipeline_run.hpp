#pragma once
// What each processor (MPI rank) does in one training step of a pipelined plan
// (schedule/pipeline.hpp), without MPI: the plan's k-periodic pattern unrolled over n
// micro-batches (period j, occurrence (t, h): micro-batch j*k + h, kept when 0 <= m < n), so its
// fill, steady state and drain, then the flush and the optimizer step. Each rank's forwards and
// backwards run in the order of their start times; a forward waits for its input from the stage
// before (a receive, or a local hand-over when that stage is on the same rank) and sends its
// output on at once, a backward likewise for gradients. Sends and receives are non-blocking, so
// only the waits for a receive can block: check_deadlock_free plays every rank's list at once and
// finds a cycle of waits if there is one. predicted_step_time is the plan's time for a step.
// docs/distributed.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace remat::dist {

enum class action_kind : unsigned char {
  forward,          ///< F of `stage` on `micro_batch`
  backward,         ///< B of `stage` on `micro_batch`; accumulates its parameters' gradients
  recv_activation,  ///< wait for stage's input (from stage - 1) on micro_batch
  send_activation,  ///< send stage's output (to stage + 1) on micro_batch
  recv_gradient,    ///< wait for the gradient of stage's output (from stage + 1)
  send_gradient,    ///< send the gradient of stage's input (to stage - 1)
  flush,            ///< wait until every send of the step is done: the gradients are complete
  optimizer_step,   ///< update the parameters of the rank's stages
};

inline const char* to_string(action_kind k) {
  switch (k) {
    case action_kind::forward:
      return "F";
    case action_kind::backward:
      return "B";
    case action_kind::recv_activation:
      return "recv_activation";
    case action_kind::send_activation:
      return "send_activation";
    case action_kind::recv_gradient:
      return "recv_gradient";
    case action_kind::send_gradient:
      return "send_gradient";
    case action_kind::flush:
      return "flush";
    case action_kind::optimizer_step:
      return "optimizer_step";
  }
  return "?";
}

/// One action of a rank. `stage` is 1-based (the stage that computes, or whose input or output
/// travels); `peer` is the rank at the other end of a transfer, the rank itself when both stages
/// are on it (a local hand-over), -1 for F, B, flush and the optimizer step.
struct action {
  action_kind kind = action_kind::forward;
  int stage = 0;
  int micro_batch = -1;
  int peer = -1;

  friend bool operator==(const action&, const action&) = default;
};

inline std::string to_string(const action& a) {
  std::string s = to_string(a.kind);
  if (a.stage > 0) s += " stage " + std::to_string(a.stage);
  if (a.micro_batch >= 0) s += " micro-batch " + std::to_string(a.micro_batch);
  if (a.peer >= 0) s += " peer " + std::to_string(a.peer);
  return s;
}

/// One training step of a plan: every rank's actions, in order.
struct pipeline_run {
  int processors = 0;
  int micro_batches = 0;
  std::vector<int> stage_rank;  ///< index s - 1: the rank holding stage s
  std::vector<std::vector<action>> ranks;

  /// The stages rank r holds, in chain order.
  [[nodiscard]] std::vector<int> stages_of(int r) const {
    std::vector<int> out;
    for (std::size_t i = 0; i < stage_rank.size(); ++i)
      if (stage_rank[i] == r) out.push_back(static_cast<int>(i) + 1);
    return out;
  }
};

namespace detail {
inline error dist_bad(std::string msg) {
  return error{status::invalid_problem, std::move(msg), {}};
}

/// An F or B occurrence of the unrolled pattern on micro-batch m, starting at `start`.
struct dist_occurrence {
  seconds start = 0;
  pipeline_op_kind kind = pipeline_op_kind::forward;
  int stage = 1;
  int micro_batch = 0;
};

/// Every occurrence of the pattern's ops of the given kinds on micro-batches 0..n-1.
inline std::vector<dist_occurrence> dist_unroll(const pipeline_plan& plan, int n, bool transfers) {
  std::vector<dist_occurrence> out;
  const int k = plan.k;
  for (const pipeline_op& op : plan.ops) {
    const bool compute =
        op.kind == pipeline_op_kind::forward || op.kind == pipeline_op_kind::backward;
    if (compute == transfers) continue;
    // Periods j with 0 <= j*k + h < n.
    int j = op.shift >= 0 ? -(op.shift / k) : (-op.shift + k - 1) / k;
    for (int m = j * k + op.shift; m < n; m += k, ++j)
      if (m >= 0) out.push_back({j * plan.period + op.start, op.kind, op.stage, m});
  }
  return out;
}

/// Checks the plan's shape as far as running it needs (the simulator checks the rest).
inline result<void> dist_check_plan(const pipeline_plan& plan, int processors, int n) {
  if (processors < 1)
    return dist_bad("pipeline run: processors is " + std::to_string(processors) +
                    "; it must be at least 1");
  if (n < 1)
    return dist_bad("pipeline run: micro_batches is " + std::to_string(n) +
                    "; a training step needs at least 1 micro-batch");
  if (plan.stages.empty()) return dist_bad("pipeline run: the plan has no stage");
  if (plan.k < 1)
    return dist_bad("pipeline run: the plan's k is " + std::to_string(plan.k) +
                    "; it must be at least 1");
  if (!std::isfinite(plan.period) || plan.period <= 0)
    return dist_bad("pipeline run: the plan's period is " + remat::detail::time_text(plan.period) +
                    "; it must be finite and > 0");
  const int S = static_cast<int>(plan.stages.size());
  for (int s = 1; s <= S; ++s) {
    const int p = plan.stages[static_cast<std::size_t>(s - 1)].processor;
    if (p < 0 || p >= processors)
      return dist_bad("pipeline run: stage " + std::to_string(s) + " is on processor " +
                      std::to_string(p) + " but the run has processors 0.." +
                      std::to_string(processors - 1));
  }
  // Every F and B occurs k times with shifts distinct modulo k: each micro-batch gets it once.
  std::vector<std::vector<int>> seen(static_cast<std::size_t>(2 * S));
  for (const pipeline_op& op : plan.ops) {
    if (op.stage < 1 || op.stage > S)
      return dist_bad("pipeline run: an op is on stage " + std::to_string(op.stage) +
                      "; stages are 1.." + std::to_string(S));
    if (op.kind != pipeline_op_kind::forward && op.kind != pipeline_op_kind::backward) continue;
    const int residue = ((op.shift % plan.k) + plan.k) % plan.k;
    auto& v = seen[static_cast<std::size_t>(2 * (op.stage - 1) +
                                            (op.kind == pipeline_op_kind::backward ? 1 : 0))];
    if (std::find(v.begin(), v.end(), residue) != v.end())
      return dist_bad("pipeline run: " + std::string(to_string(op.kind)) + " of stage " +
                      std::to_string(op.stage) +
                      " has two occurrences with shifts equal modulo k = " +
                      std::to_string(plan.k) + "; replay the plan with sim::simulate_pipeline");
    v.push_back(residue);
  }
  for (int i = 0; i < 2 * S; ++i)
    if (static_cast<int>(seen[static_cast<std::size_t>(i)].size()) != plan.k)
      return dist_bad("pipeline run: " + std::string(i % 2 == 0 ? "F" : "B") + " of stage " +
                      std::to_string(i / 2 + 1) + " occurs " +
                      std::to_string(seen[static_cast<std::size_t>(i)].size()) +
                      " times in the pattern; a " + std::to_string(plan.k) +
                      "-periodic pattern holds it exactly k times");
  return {};
}
}  // namespace detail

/// Each rank's actions for one training step of `plan` on `micro_batches` micro-batches, over
/// `processors` ranks (the plan's processors: rank p runs processor p's stages).
///
/// Order: the rank's F and B occurrences on micro-batches 0..n-1 by start time in the unrolled
/// pattern (ties: by micro-batch, F before B, F in chain order and B in reverse). Then, for each
/// stage, its F occurrences are given the micro-batches 0, 1, ..., n-1 in that order, and its B
/// occurrences too: a k-periodic pattern may run a later micro-batch first (shifts out of order
/// within a period), but the gradients must accumulate in micro-batch order, and the random
/// layers (dropout) draw in forward order, so that the step is bitwise a single process's
/// accumulation of micro-batches 0..n-1 (on a stage, F number i comes before B number i, so every
/// B still follows its F). A forward of stage s > 1 is preceded by the receive of its input, and
/// followed by the send of its output when s is not the last; a backward likewise with the
/// gradients. The step ends with a flush and the optimizer step.
inline result<pipeline_run> make_pipeline_run(const pipeline_plan& plan, int processors,
                                              int micro_batches) {
  if (auto v = detail::dist_check_plan(plan, processors, micro_batches); !v) return v.err();
  const int S = static_cast<int>(plan.stages.size());
  const int n = micro_batches;
  pipeline_run run;
  run.processors = processors;
  run.micro_batches = n;
  for (const auto& st : plan.stages) run.stage_rank.push_back(st.processor);
  auto rank_of = [&](int s) { return run.stage_rank[static_cast<std::size_t>(s - 1)]; };

  std::vector<detail::dist_occurrence> occ = detail::dist_unroll(plan, n, false);
  auto key = [](const detail::dist_occurrence& o) {
    const bool fwd = o.kind == pipeline_op_kind::forward;
    return std::tuple(o.start, o.micro_batch, fwd ? 0 : 1, fwd ? o.stage : -o.stage);
  };
  std::sort(occ.begin(), occ.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  // The i-th F (B) of a stage runs micro-batch i.
  std::vector<int> next(static_cast<std::size_t>(2 * S), 0);
  for (auto& o : occ) {
    const int slot = 2 * (o.stage - 1) + (o.kind == pipeline_op_kind::forward ? 0 : 1);
    o.micro_batch = next[static_cast<std::size_t>(slot)]++;
  }

  run.ranks.assign(static_cast<std::size_t>(processors), {});
  for (const auto& o : occ) {
    const int r = rank_of(o.stage);
    auto& list = run.ranks[static_cast<std::size_t>(r)];
    const int s = o.stage, m = o.micro_batch;
    if (o.kind == pipeline_op_kind::forward) {
      if (s > 1) list.push_back({action_kind::recv_activation, s, m, rank_of(s - 1)});
      list.push_back({action_kind::forward, s, m, -1});
      if (s < S) list.push_back({action_kind::send_activation, s, m, rank_of(s + 1)});
    } else {
      if (s < S) list.push_back({action_kind::recv_gradient, s, m, rank_of(s + 1)});
      list.push_back({action_kind::backward, s, m, -1});
      if (s > 1) list.push_back({action_kind::send_gradient, s, m, rank_of(s - 1)});
    }
  }
  for (auto& list : run.ranks) {
    list.push_back({action_kind::flush, 0, -1, -1});
    list.push_back({action_kind::optimizer_step, 0, -1, -1});
  }
  return run;
}

/// Plays every rank's actions at once, as MPI would run them with non-blocking sends and receives
/// posted early: a send never blocks, a receive waits until its send has been issued, the flush
/// until every send of the rank has been received. Fails (invalid_problem) naming the ranks and
/// what each waits for when the ranks would wait on each other forever, or when a receive has no
/// matching send (or a send no receive) in the step.
inline result<void> check_deadlock_free(const pipeline_run& run) {
  const std::size_t R = run.ranks.size();
  // A message: (kind of the receive, stage, micro-batch, sender, receiver).
  using msg = std::tuple<int, int, int, int, int>;
  auto recv_of = [](action_kind send) {
    return send == action_kind::send_activation ? action_kind::recv_activation
                                                : action_kind::recv_gradient;
  };
  // The stage named by a receive: recv_activation of stage s gets stage (s - 1)'s output.
  auto message_of_send = [&](const action& a, int me) {
    const int stage = a.kind == action_kind::send_activation ? a.stage + 1 : a.stage - 1;
    return msg{static_cast<int>(recv_of(a.kind)), stage, a.micro_batch, me, a.peer};
  };
  auto message_of_recv = [&](const action& a, int me) {
    return msg{static_cast<int>(a.kind), a.stage, a.micro_batch, a.peer, me};
  };
  std::vector<msg> sent, received_all;
  std::vector<std::size_t> pc(R, 0);
  std::vector<int> outstanding(R, 0);  // sends of the rank not yet received
  for (std::size_t r = 0; r < R; ++r)
    for (const action& a : run.ranks[r])
      if (a.kind == action_kind::recv_activation || a.kind == action_kind::recv_gradient)
        received_all.push_back(message_of_recv(a, static_cast<int>(r)));
  std::sort(received_all.begin(), received_all.end());
  for (std::size_t r = 0; r < R; ++r)
    for (const action& a : run.ranks[r])
      if (a.kind == action_kind::send_activation || a.kind == action_kind::send_gradient) {
        const msg m = message_of_send(a, static_cast<int>(r));
        if (!std::binary_search(received_all.begin(), received_all.end(), m))
          return detail::dist_bad("pipeline run: rank " + std::to_string(r) + "'s " + to_string(a) +
                                  " has no matching receive on rank " + std::to_string(a.peer));
      }
  std::vector<msg> in_flight;  // sent, not yet received
  bool moved = true;
  while (moved) {
    moved = false;
    for (std::size_t r = 0; r < R; ++r) {
      const auto& list = run.ranks[r];
      while (pc[r] < list.size()) {
        const action& a = list[pc[r]];
        if (a.kind == action_kind::send_activation || a.kind == action_kind::send_gradient) {
          in_flight.push_back(message_of_send(a, static_cast<int>(r)));
          ++outstanding[r];
        } else if (a.kind == action_kind::recv_activation || a.kind == action_kind::recv_gradient) {
          const msg m = message_of_recv(a, static_cast<int>(r));
          auto it = std::find(in_flight.begin(), in_flight.end(), m);
          if (it == in_flight.end()) break;
          in_flight.erase(it);
          --outstanding[static_cast<std::size_t>(a.peer)];
        } else if (a.kind == action_kind::flush && outstanding[r] > 0) {
          break;
        }
        ++pc[r];
        moved = true;
      }
    }
  }
  std::string stuck;
  for (std::size_t r = 0; r < R; ++r)
    if (pc[r] < run.ranks[r].size()) {
      const action& a = run.ranks[r][pc[r]];
      if (!stuck.empty()) stuck += "; ";
      stuck += "rank " + std::to_string(r) + " waits at action " + std::to_string(pc[r]) + " (" +
               (a.kind == action_kind::flush
                    ? "flush, " + std::to_string(outstanding[r]) + " sends not received"
                    : to_string(a)) +
               ")";
    }
  if (!stuck.empty())
    return detail::dist_bad("pipeline run: the ranks would wait for each other forever: " + stuck);
  return {};
}

/// The plan's time for one training step of n micro-batches: from the first op's start to the
/// last op's end in the pattern unrolled over micro-batches 0..n-1 (fill, steady state and drain),
/// transfers included, with the problem's times (F, B: sim::stage_cost's, the sums of the
/// stage's u_F, u_B, or for a stage that recomputes its B the makespan of its program; a
/// transfer: a_j / beta or delta_j / beta). For large n it approaches n x T / k.
inline result<seconds> predicted_step_time(const pipeline_problem& problem,
                                           const pipeline_plan& plan, int micro_batches) {
  if (auto v = validate_stages(problem, plan.stages); !v) return v.err();
  if (auto v = detail::dist_check_plan(plan, problem.processors, micro_batches); !v) return v.err();
  const chain& c = problem.layers;
  std::vector<sim::pipeline_stage_cost> costs;
  for (const pipeline_stage& st : plan.stages) {
    auto cost = sim::stage_cost(c, st);
    if (!cost) return cost.err();
    costs.push_back(*cost);
  }
  auto duration = [&](pipeline_op_kind kind, int s) {
    const pipeline_stage& st = plan.stages[static_cast<std::size_t>(s - 1)];
    seconds d = 0;
    switch (kind) {
      case pipeline_op_kind::forward:
        d = costs[static_cast<std::size_t>(s - 1)].forward;
        break;
      case pipeline_op_kind::backward:
        d = costs[static_cast<std::size_t>(s - 1)].backward;
        break;
      case pipeline_op_kind::send_activation:
        d = static_cast<double>(c.a(st.last)) / problem.bandwidth;
        break;
      case pipeline_op_kind::send_gradient:
        d = static_cast<double>(c.delta(st.last)) / problem.bandwidth;
        break;
    }
    return d;
  };
  seconds first = 0, last = 0;
  bool any = false;
  for (bool transfers : {false, true})
    for (const auto& o : detail::dist_unroll(plan, micro_batches, transfers)) {
      const seconds end = o.start + duration(o.kind, o.stage);
      first = any ? std::min(first, o.start) : o.start;
      last = any ? std::max(last, end) : end;
      any = true;
    }
  return last - first;
}

}  // namespace remat::dist
