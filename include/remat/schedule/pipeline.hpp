#pragma once
// A pipelined plan [Shilova21, Part III]: a partition of the chain into stages (intervals of
// layers), an allocation (each stage's processor; a processor may hold several stages, not
// necessarily neighbours) and a k-periodic pattern of period T. The pattern holds each op k
// times: the forward and the backward of every stage, and between two stages on different
// processors the activation sent forward and the gradient sent back. An occurrence starts at t in
// [0, T) with index shift h: in period j it starts at j*T + t on mini-batch j*k + h. Its
// resource follows from the allocation: a stage's processor, or the link between the two
// processors of a boundary. sim/pipeline.hpp replays a plan and checks it. docs/pipeline.md.

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// A stage: layers first..last of the chain (1-based, the chain's stage numbers), on a processor
/// (0-based). Without `recompute` the stage keeps what its layers' backwards need from the start
/// of its F to the end of its B (the thesis' model). With it, the stage recomputes: its F runs
/// its layers keeping only the stage's input, and its B runs `recompute`, a chain policy's program
/// over segment_chain(layers, first, last) (problem/chain.hpp), whose makespan is B's time and
/// whose peak, less the input, the memory B works in (sim::stage_cost).
struct pipeline_stage {
  int first = 1;
  int last = 1;
  int processor = 0;
  std::optional<schedule> recompute = std::nullopt;

  friend bool operator==(const pipeline_stage&, const pipeline_stage&) = default;
};

enum class pipeline_op_kind : unsigned char {
  forward,          ///< F of a stage: the forwards of its layers, first to last
  backward,         ///< B of a stage: the backwards of its layers, last to first
  send_activation,  ///< a_j from stage s (last layer j) to stage s + 1: a_j / beta
  send_gradient,    ///< delta_j from stage s + 1 back to stage s: delta_j / beta
};

inline const char* to_string(pipeline_op_kind k) {
  switch (k) {
    case pipeline_op_kind::forward:
      return "F";
    case pipeline_op_kind::backward:
      return "B";
    case pipeline_op_kind::send_activation:
      return "send_activation";
    case pipeline_op_kind::send_gradient:
      return "send_gradient";
  }
  return "?";
}

/// One occurrence of an op in the pattern. `stage` is 1-based; for a communication it is the
/// stage before the boundary (s for the boundary between s and s + 1).
struct pipeline_op {
  pipeline_op_kind kind = pipeline_op_kind::forward;
  int stage = 1;
  seconds start = 0;  ///< t, in [0, period)
  int shift = 0;      ///< h

  friend bool operator==(const pipeline_op&, const pipeline_op&) = default;
};

struct pipeline_plan {
  std::vector<pipeline_stage> stages;  ///< in chain order, covering layers 1..N
  seconds period = 0;                  ///< T
  int k = 1;                           ///< each op occurs k times in the pattern
  std::vector<pipeline_op> ops;

  /// T / k: the time per mini-batch in the steady state.
  [[nodiscard]] seconds normalized_period() const { return period / k; }
};

/// The occurrence of an op that starts at `absolute` (seconds, from period 0's start) on
/// mini-batch `mini_batch`, in a k-periodic pattern of period T: t = absolute - j*T with
/// j = floor(absolute / T), and h = mini_batch - j*k.
inline pipeline_op place_op(pipeline_op_kind kind, int stage, seconds absolute, int mini_batch,
                            seconds period, int k = 1) {
  double j = std::floor(absolute / period);
  seconds t = absolute - j * period;
  if (t >= period) {  // rounding just below a period's edge
    t = 0;
    j += 1;
  }
  if (t < 0) t = 0;
  return {kind, stage, t, mini_batch - static_cast<int>(j) * k};
}

/// Checks that the stages cover the problem's layers in order, each on one of its processors.
inline result<void> validate_stages(const pipeline_problem& problem,
                                    const std::vector<pipeline_stage>& stages) {
  auto bad = [](std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; };
  const int n = problem.layers.length();
  if (stages.empty())
    return bad("the plan has no stage; its stages must cover layers 1.." + std::to_string(n));
  int next = 1;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const pipeline_stage& st = stages[i];
    const std::string where = "stage " + std::to_string(i + 1);
    if (st.first != next)
      return bad(where + " starts at layer " + std::to_string(st.first) +
                 "; the stages cover the chain in order, so it must start at layer " +
                 std::to_string(next));
    if (st.last < st.first || st.last > n)
      return bad(where + " ends at layer " + std::to_string(st.last) + "; it must end in " +
                 std::to_string(st.first) + ".." + std::to_string(n));
    if (st.processor < 0 || st.processor >= problem.processors)
      return bad(where + " is on processor " + std::to_string(st.processor) +
                 "; processors are 0.." + std::to_string(problem.processors - 1));
    next = st.last + 1;
  }
  if (next != n + 1)
    return bad("the stages end at layer " + std::to_string(next - 1) + " but chain '" +
               problem.layers.name + "' has " + std::to_string(n) +
               " layers; the last stage must end at layer " + std::to_string(n));
  return {};
}

/// Stages from the last layer of each, stage i on processor i - 1: a contiguous allocation.
inline std::vector<pipeline_stage> contiguous_stages(const std::vector<int>& last_layers) {
  std::vector<pipeline_stage> out;
  int first = 1;
  for (int last : last_layers) {
    out.push_back({first, last, static_cast<int>(out.size())});
    first = last + 1;
  }
  return out;
}

}  // namespace remat
