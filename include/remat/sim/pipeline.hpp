#pragma once
// The pipeline simulator: replays a k-periodic plan (schedule/pipeline.hpp) over many
// mini-batches and checks it, trusting nothing the plan claims [Shilova21, Part III]:
//  * each op occurs k times, and its shifts cover every mini-batch once (distinct modulo k);
//  * dependencies, per mini-batch: F of stage s after F of s - 1 (after the activation sent from
//    s - 1 when the two are on different processors, itself after F of s - 1); B of s after B of
//    s + 1 (or the gradient sent back, itself after B of s + 1); B of s after F of s;
//  * one op at a time on each processor, one transfer at a time on each link (both directions);
//  * memory, each processor: C x the weights of its layers, a buffer a_j + delta_j on both sides
//    of each boundary it shares with another processor, and the activations alive: a stage keeps
//    what its layers' backwards need (sum a_{l-1} in the thesis' model) from the start of its F
//    to the end of its B on that mini-batch; a stage that recomputes keeps its input only, and
//    its B works in the peak of its program besides (stage_cost).
// The number of activations alive at once per stage (NCA) comes from the replay, not from the
// shifts. Temporary memory of the ops is not counted (the thesis' model). docs/pipeline.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::sim {

enum class pipeline_violation_kind {
  invalid_problem,    ///< validate(pipeline_problem) failed
  invalid_plan,       ///< stages, period, k or an op that cannot be (time 0)
  missing_op,         ///< an op occurs other than k times, or misses some mini-batches
  dependency,         ///< an op starts before an op it needs ends
  processor_overlap,  ///< two ops at once on a processor
  link_overlap,       ///< two transfers at once on a link
  over_memory,        ///< a processor holds more than M
};

struct pipeline_violation {
  pipeline_violation_kind kind = pipeline_violation_kind::invalid_plan;
  seconds time = 0;  ///< when it happens in the replay (0 for the plan's shape)
  std::string message;
};

struct pipeline_report {
  bool valid = false;  ///< no violation, memory included
  seconds period = 0;
  int k = 1;
  seconds normalized_period = 0;       ///< T / k
  int mini_batches = 0;                ///< how many were replayed
  std::vector<bytes> processor_peaks;  ///< per processor: the most it holds at once
  std::vector<int> nca;  ///< per stage (index s - 1): the most activations alive at once
  std::optional<pipeline_violation> first_violation;  ///< the earliest one
};

struct pipeline_replay {
  /// Mini-batches to replay; at least enough for several periods of the steady state (the
  /// default, 0, takes just that).
  int mini_batches = 0;
};

namespace detail {

using remat::detail::ix;
using remat::detail::time_text;

inline std::string pipe_stage_label(const pipeline_plan& plan, int s) {
  const pipeline_stage& st = plan.stages[ix(s - 1)];
  std::string out = "stage " + std::to_string(s) + " (layer";
  if (st.first == st.last) return out + " " + std::to_string(st.first) + ")";
  return out + "s " + std::to_string(st.first) + ".." + std::to_string(st.last) + ")";
}

inline std::string pipe_op_label(const pipeline_plan& plan, pipeline_op_kind kind, int s) {
  switch (kind) {
    case pipeline_op_kind::forward:
      return "F of " + pipe_stage_label(plan, s);
    case pipeline_op_kind::backward:
      return "B of " + pipe_stage_label(plan, s);
    case pipeline_op_kind::send_activation:
      return "send_activation from stage " + std::to_string(s) + " to stage " +
             std::to_string(s + 1);
    case pipeline_op_kind::send_gradient:
      return "send_gradient from stage " + std::to_string(s + 1) + " to stage " + std::to_string(s);
  }
  return "?";
}

inline std::string pipe_time(seconds t) { return time_text(t) + " s"; }

/// The most `weight`-weighted items alive at once, an item alive from its start to its end (an
/// end at a start, within tol, frees first); and the first time the total exceeds `limit`.
struct pipe_alive_peak {
  bytes peak = 0;
  std::optional<seconds> first_over;
  bytes at_first_over = 0;
  int count_at_first_over = 0;
};

inline pipe_alive_peak pipe_alive(std::vector<std::pair<seconds, bytes>> starts,
                                  std::vector<std::pair<seconds, bytes>> ends, seconds tol,
                                  bytes limit) {
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  pipe_alive_peak out;
  bytes cur = 0;
  int count = 0;
  std::size_t e = 0;
  for (const auto& [t, w] : starts) {
    while (e < ends.size() && ends[e].first <= t + tol) {
      cur -= ends[e++].second;
      --count;
    }
    cur += w;
    ++count;
    out.peak = std::max(out.peak, cur);
    if (cur > limit && !out.first_over) {
      out.first_over = t;
      out.at_first_over = cur;
      out.count_at_first_over = count;
    }
  }
  return out;
}

}  // namespace detail

/// What a stage's ops cost on one mini-batch.
struct pipeline_stage_cost {
  seconds forward = 0;   ///< its F
  seconds backward = 0;  ///< its B
  bytes kept = 0;        ///< held from the start of its F to the end of its B
  bytes working = 0;     ///< held besides while its B runs
};

/// The costs of layers first..last as a stage. Without recomputation F and B are the sums of the
/// layers' times and the stage keeps a_{first-1} and what each layer's backward needs, abar_l,
/// less a_last, which the next stage receives (sum a_{l-1} when abar_l = a_l, the thesis'
/// model). A stage that recomputes keeps a_{first-1} only; its B runs its program, simulated on
/// segment_chain(first, last): B takes the program's makespan and works in its peak less the
/// input. A program the simulator rejects is an error that says why.
inline result<pipeline_stage_cost> stage_cost(const chain& c, const pipeline_stage& st) {
  pipeline_stage_cost out;
  for (int l = st.first; l <= st.last; ++l) out.forward += c.uf(l);
  out.kept = c.a(st.first - 1);
  if (!st.recompute) {
    for (int l = st.first; l <= st.last; ++l) {
      out.backward += c.ub(l);
      out.kept += c.abar(l);
    }
    out.kept -= c.a(st.last);
    return out;
  }
  const report rep = simulate(remat::detail::segment_chain(c, st.first, st.last), *st.recompute);
  if (!rep.valid)
    return error{status::invalid_problem,
                 "the recomputation program of layers " + std::to_string(st.first) + ".." +
                     std::to_string(st.last) + " is not valid: " +
                     (rep.first_violation ? rep.first_violation->message : std::string("?")),
                 {}};
  out.backward = rep.makespan;
  out.working = std::max<bytes>(0, rep.peak - out.kept);
  return out;
}

/// Replays the plan over many mini-batches and checks it (see above).
inline pipeline_report simulate_pipeline(const pipeline_problem& problem, const pipeline_plan& plan,
                                         pipeline_replay replay = {}) {
  using kind = pipeline_op_kind;
  using vk = pipeline_violation_kind;
  pipeline_report r;
  r.period = plan.period;
  r.k = plan.k;
  auto fail = [&](vk k, std::string msg) {
    r.first_violation = pipeline_violation{k, 0, std::move(msg)};
    return r;
  };
  if (auto v = validate(problem); !v) return fail(vk::invalid_problem, v.message());
  const chain& c = problem.layers;
  const int procs = problem.processors;
  const int S = static_cast<int>(plan.stages.size());
  if (auto v = validate_stages(problem, plan.stages); !v)
    return fail(vk::invalid_plan, v.message());
  const seconds T = plan.period;
  if (!std::isfinite(T) || T <= 0 || T >= max_time)
    return fail(vk::invalid_plan,
                "the period is " + detail::time_text(T) + "; it must be > 0 and below 1e+15 s");
  constexpr int max_k = 10000;
  if (plan.k < 1 || plan.k > max_k)
    return fail(vk::invalid_plan,
                "k is " + std::to_string(plan.k) + "; it must be in 1.." + std::to_string(max_k));
  const int k = plan.k;
  r.normalized_period = T / k;
  if (replay.mini_batches < 0 || replay.mini_batches > 1000000)
    return fail(vk::invalid_plan, "mini_batches to replay is " +
                                      std::to_string(replay.mini_batches) +
                                      "; it must be in 0..1000000 (0: as many as needed)");

  auto proc = [&](int s) { return plan.stages[detail::ix(s - 1)].processor; };
  auto crosses = [&](int s) { return s < S && proc(s) != proc(s + 1); };
  // An op type: 4 (s - 1) + kind.
  auto type_of = [](kind kd, int s) { return 4 * (s - 1) + static_cast<int>(kd); };
  const int types = 4 * S;
  auto expected = [&](int t) {
    const int s = t / 4 + 1;
    const auto kd = static_cast<kind>(t % 4);
    return kd == kind::forward || kd == kind::backward || crosses(s);
  };
  std::vector<seconds> duration(detail::ix(types), 0);
  std::vector<pipeline_stage_cost> costs;
  for (int s = 1; s <= S; ++s) {
    const pipeline_stage& st = plan.stages[detail::ix(s - 1)];
    auto sc = stage_cost(c, st);
    if (!sc) return fail(vk::invalid_plan, "stage " + std::to_string(s) + ": " + sc.message());
    costs.push_back(*sc);
    duration[detail::ix(type_of(kind::forward, s))] = sc->forward;
    duration[detail::ix(type_of(kind::backward, s))] = sc->backward;
    if (crosses(s)) {
      duration[detail::ix(type_of(kind::send_activation, s))] =
          static_cast<double>(c.a(st.last)) / problem.bandwidth;
      duration[detail::ix(type_of(kind::send_gradient, s))] =
          static_cast<double>(c.delta(st.last)) / problem.bandwidth;
    }
  }
  auto label = [&](int t) {
    return detail::pipe_op_label(plan, static_cast<kind>(t % 4), t / 4 + 1);
  };

  // The pattern's shape.
  std::vector<std::vector<std::size_t>> occurrences(detail::ix(types));
  int hmin = 0, hmax = 0;  // over the ops, once the first is read
  constexpr int max_shift = 1000000;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const pipeline_op& op = plan.ops[i];
    const std::string where = "op " + std::to_string(i);
    const int kd = static_cast<int>(op.kind);
    if (kd < 0 || kd > 3) return fail(vk::invalid_plan, where + " has an unknown kind");
    if (op.stage < 1 || op.stage > S)
      return fail(vk::invalid_plan, where + " (" + to_string(op.kind) + ") is on stage " +
                                        std::to_string(op.stage) + "; stages are 1.." +
                                        std::to_string(S));
    const int t = type_of(op.kind, op.stage);
    if (!expected(t))
      return fail(
          vk::invalid_plan,
          where + " is a " + to_string(op.kind) + " after stage " + std::to_string(op.stage) +
              ", but " +
              (op.stage == S
                   ? std::string("the last stage sends nothing")
                   : "stages " + std::to_string(op.stage) + " and " + std::to_string(op.stage + 1) +
                         " are both on processor " + std::to_string(proc(op.stage)) +
                         ": nothing travels between them"));
    if (!std::isfinite(op.start) || op.start < 0 || op.start >= T)
      return fail(vk::invalid_plan, where + " (" + label(t) + ") starts at " +
                                        detail::time_text(op.start) + "; starts are in [0, " +
                                        detail::time_text(T) + ") (the period)");
    if (op.shift < -max_shift || op.shift > max_shift)
      return fail(vk::invalid_plan, where + " (" + label(t) + ") has shift " +
                                        std::to_string(op.shift) + "; shifts are within +-" +
                                        std::to_string(max_shift));
    if (i == 0) hmin = hmax = op.shift;
    hmin = std::min(hmin, op.shift);
    hmax = std::max(hmax, op.shift);
    occurrences[detail::ix(t)].push_back(i);
  }
  auto residue = [&](int h) { return ((h % k) + k) % k; };
  for (int t = 0; t < types; ++t) {
    if (!expected(t)) continue;
    const auto& occ = occurrences[detail::ix(t)];
    if (static_cast<int>(occ.size()) != k)
      return fail(vk::missing_op, label(t) + " occurs " + std::to_string(occ.size()) +
                                      " times in the pattern; a " + std::to_string(k) +
                                      "-periodic pattern holds each op exactly " +
                                      std::to_string(k) + " times");
    std::vector<int> seen(detail::ix(k), -1);
    for (std::size_t i : occ) {
      const int h = plan.ops[i].shift;
      int& other = seen[detail::ix(residue(h))];
      if (other >= 0)
        return fail(vk::missing_op,
                    label(t) + " has shifts " + std::to_string(other) + " and " +
                        std::to_string(h) + ", equal modulo k = " + std::to_string(k) +
                        ": both process the same mini-batches, and some mini-batches never "
                        "get this op");
      other = h;
    }
  }

  // The replay: every op of mini-batches 0..B-1, from the periods that hold them.
  const int auto_batches = 3 * (hmax - hmin) + 4 * k + 4;
  const int B = std::max(replay.mini_batches, auto_batches);
  r.mini_batches = B;
  long long runs = 0;  // op runs the replay holds
  for (int t = 0; t < types; ++t)
    if (expected(t)) runs += B;
  constexpr long long max_runs = 20000000;
  if (runs > max_runs)
    return fail(vk::invalid_plan, "the replay of " + std::to_string(B) +
                                      " mini-batches would hold " + std::to_string(runs) +
                                      " op runs, more than " + std::to_string(max_runs) +
                                      "; the shifts span " + std::to_string(hmax - hmin) +
                                      " mini-batches: bring them closer, or replay fewer");
  std::vector<std::vector<seconds>> start(detail::ix(types));
  for (int t = 0; t < types; ++t) {
    if (!expected(t)) continue;
    auto& st = start[detail::ix(t)];
    st.assign(detail::ix(B), 0);
    for (std::size_t i : occurrences[detail::ix(t)]) {
      const pipeline_op& op = plan.ops[i];
      // The first period j with j*k + h >= 0.
      int j = op.shift >= 0 ? -(op.shift / k) : (-op.shift + k - 1) / k;
      for (int m = j * k + op.shift; m < B; m += k, ++j) st[detail::ix(m)] = j * T + op.start;
    }
  }
  auto begin = [&](int t, int m) { return start[detail::ix(t)][detail::ix(m)]; };
  auto end = [&](int t, int m) { return begin(t, m) + duration[detail::ix(t)]; };
  const seconds tol = 1e-9 * T;
  std::vector<std::optional<pipeline_violation>> found(4);  // dependency, processor, link, memory

  // Dependencies.
  auto need = [&](int succ, int pred, int m, const char* why) {
    if (begin(succ, m) >= end(pred, m) - tol) return;
    auto& f = found[0];
    if (f && f->time <= begin(succ, m)) return;
    f = pipeline_violation{vk::dependency, begin(succ, m),
                           "mini-batch " + std::to_string(m) + ": " + label(succ) + " starts at " +
                               detail::pipe_time(begin(succ, m)) + ", before " + label(pred) +
                               " ends at " + detail::pipe_time(end(pred, m)) + " (" + why + ")"};
  };
  for (int m = 0; m < B; ++m)
    for (int s = 1; s <= S; ++s) {
      const int f = type_of(kind::forward, s), b = type_of(kind::backward, s);
      if (s > 1) {
        if (crosses(s - 1)) {
          const int send = type_of(kind::send_activation, s - 1);
          need(send, type_of(kind::forward, s - 1), m, "it sends that forward's output");
          need(f, send, m, "it needs the activation sent from the previous stage");
        } else {
          need(f, type_of(kind::forward, s - 1), m, "it needs the previous stage's output");
        }
      }
      need(b, f, m, "a stage's backward needs its forward");
      if (s < S) {
        if (crosses(s)) {
          const int send = type_of(kind::send_gradient, s);
          need(send, type_of(kind::backward, s + 1), m, "it sends that backward's gradient");
          need(b, send, m, "it needs the gradient sent from the next stage");
        } else {
          need(b, type_of(kind::backward, s + 1), m, "it needs the next stage's gradient");
        }
      }
    }

  // One op at a time per processor and per link.
  struct instance {
    seconds begin, end;
    int type, m;
  };
  auto sweep = [&](std::vector<instance> v, std::size_t slot, vk what, const std::string& who) {
    std::sort(v.begin(), v.end(), [](const instance& x, const instance& y) {
      return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
    });
    std::optional<instance> busy;  // the one ending last so far
    for (const instance& cur : v) {
      if (busy && cur.begin < busy->end - tol && cur.end > cur.begin) {
        auto& f = found[slot];
        if (!f || cur.begin < f->time)
          f = pipeline_violation{
              what, cur.begin,
              who + " runs " + label(cur.type) + " on mini-batch " + std::to_string(cur.m) +
                  " from " + detail::pipe_time(cur.begin) + " while " + label(busy->type) +
                  " on mini-batch " + std::to_string(busy->m) + " runs from " +
                  detail::pipe_time(busy->begin) + " to " + detail::pipe_time(busy->end) +
                  (what == vk::processor_overlap ? "; a processor runs one op at a time"
                                                 : "; a link carries one transfer at a time")};
        break;
      }
      if (!busy || cur.end > busy->end) busy = cur;
    }
  };
  for (int p = 0; p < procs; ++p) {
    std::vector<instance> v;
    for (int s = 1; s <= S; ++s)
      if (proc(s) == p)
        for (kind kd : {kind::forward, kind::backward})
          for (int m = 0; m < B; ++m)
            v.push_back({begin(type_of(kd, s), m), end(type_of(kd, s), m), type_of(kd, s), m});
    sweep(std::move(v), 1, vk::processor_overlap, "processor " + std::to_string(p));
  }
  for (int p = 0; p < procs; ++p)
    for (int q = p + 1; q < procs; ++q) {
      std::vector<instance> v;
      for (int s = 1; s < S; ++s)
        if (crosses(s) && std::min(proc(s), proc(s + 1)) == p &&
            std::max(proc(s), proc(s + 1)) == q)
          for (kind kd : {kind::send_activation, kind::send_gradient})
            for (int m = 0; m < B; ++m)
              v.push_back({begin(type_of(kd, s), m), end(type_of(kd, s), m), type_of(kd, s), m});
      if (!v.empty())
        sweep(std::move(v), 2, vk::link_overlap,
              "the link between processors " + std::to_string(p) + " and " + std::to_string(q));
    }

  // Memory, and the NCA of each stage.
  auto stored = [&](int s) { return costs[detail::ix(s - 1)].kept; };
  auto working = [&](int s) { return costs[detail::ix(s - 1)].working; };
  using events = std::vector<std::pair<seconds, bytes>>;
  r.nca.assign(detail::ix(S), 0);
  for (int s = 1; s <= S; ++s) {
    events starts, ends;
    for (int m = 0; m < B; ++m) {
      starts.emplace_back(begin(type_of(kind::forward, s), m), 1);
      ends.emplace_back(end(type_of(kind::backward, s), m), 1);
    }
    r.nca[detail::ix(s - 1)] = static_cast<int>(
        detail::pipe_alive(std::move(starts), std::move(ends), tol, unlimited_bytes).peak);
  }
  r.processor_peaks.assign(detail::ix(procs), 0);
  for (int p = 0; p < procs; ++p) {
    bytes weights = 0, buffers = 0;
    bool recomputes = false;
    events starts, ends;
    for (int s = 1; s <= S; ++s) {
      if (proc(s) != p) continue;
      const pipeline_stage& st = plan.stages[detail::ix(s - 1)];
      for (int l = st.first; l <= st.last; ++l) weights += c.w(l);
      if (s > 1 && crosses(s - 1)) buffers += c.a(st.first - 1) + c.delta(st.first - 1);
      if (crosses(s)) buffers += c.a(st.last) + c.delta(st.last);
      for (int m = 0; m < B; ++m) {
        starts.emplace_back(begin(type_of(kind::forward, s), m), stored(s));
        ends.emplace_back(end(type_of(kind::backward, s), m), stored(s));
        if (working(s) > 0) {
          recomputes = true;
          starts.emplace_back(begin(type_of(kind::backward, s), m), working(s));
          ends.emplace_back(end(type_of(kind::backward, s), m), working(s));
        }
      }
    }
    const bytes fixed = problem.copies * weights + buffers;
    const std::string why = "processor " + std::to_string(p);
    // Every activation of the replay alive at once must still sum without overflow.
    double worst = static_cast<double>(fixed);
    for (const auto& e : starts) worst += static_cast<double>(e.second);
    if (worst > 0x1p62)
      return fail(vk::invalid_problem,
                  why + ": its activations over the " + std::to_string(B) +
                      " mini-batches replayed may sum to " + detail::time_text(worst) +
                      " bytes, beyond 2^62; activation sizes this large cannot be summed");
    const std::string parts = std::to_string(problem.copies) + " x weights " +
                              format_bytes(weights) + ", communication buffers " +
                              format_bytes(buffers);
    if (fixed > problem.memory) {
      r.processor_peaks[detail::ix(p)] = fixed;
      auto& f = found[3];
      if (!f || f->time > 0)
        f = pipeline_violation{vk::over_memory, 0,
                               why + " needs " + format_bytes(fixed) + " for " + parts +
                                   " alone, over its memory " + format_bytes(problem.memory)};
      continue;
    }
    const auto alive =
        detail::pipe_alive(std::move(starts), std::move(ends), tol, problem.memory - fixed);
    r.processor_peaks[detail::ix(p)] = fixed + alive.peak;
    if (alive.first_over) {
      auto& f = found[3];
      if (!f || f->time > *alive.first_over)
        f = pipeline_violation{vk::over_memory, *alive.first_over,
                               why + " holds " + format_bytes(fixed + alive.at_first_over) +
                                   " at " + detail::pipe_time(*alive.first_over) +
                                   ", over its memory " + format_bytes(problem.memory) + ": " +
                                   parts + ", and " + std::to_string(alive.count_at_first_over) +
                                   (recomputes ? " activations and recomputing backwards of "
                                               : " stored activations of ") +
                                   format_bytes(alive.at_first_over)};
    }
  }
  for (auto& f : found)
    if (f && (!r.first_violation || f->time < r.first_violation->time)) r.first_violation = f;
  r.valid = !r.first_violation;
  return r;
}

/// The most any processor holds when the plan is replayed without a memory limit (a replay
/// over M stops counting a processor's activations once its weights and buffers exceed M): the
/// memory M the plan needs.
inline bytes pipeline_memory_needed(const pipeline_problem& problem, const pipeline_plan& plan) {
  pipeline_problem unlimited = problem;
  unlimited.memory = unlimited_bytes;
  const pipeline_report r = simulate_pipeline(unlimited, plan);
  bytes need = 0;
  for (bytes b : r.processor_peaks) need = std::max(need, b);
  return need;
}

}  // namespace remat::sim
