#pragma once
// Shared plumbing of the policies: request checks, budget-too-small errors, and the final check
// of every schedule in the simulator (the referee) before it is returned: one finishing step for
// every policy, chain or graph.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/policy/solution.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::detail {

using remat::format_bytes;

inline result<void> check_request(const chain& c, bytes budget) {
  if (auto v = validate(c); !v) return v.err();
  if (budget < 0)
    return error{
        status::invalid_problem,
        "the budget is negative (" + std::to_string(budget) + " bytes); give a byte count >= 0",
        {}};
  return {};
}

/// A graph policy's request: a valid graph, a budget that is not negative ("<policy>: ...").
inline result<void> check_request(std::string_view policy, const graph& g, bytes budget) {
  if (auto v = validate(g); !v) return v.err();
  if (budget < 0)
    return error{status::invalid_problem,
                 std::string(policy) + ": the budget is negative (" + std::to_string(budget) +
                     " bytes); give a byte count >= 0",
                 {}};
  return {};
}

/// A policy's `threads` knob: 0 (every core) or a count; a negative one is refused.
inline result<void> check_threads(std::string_view policy, int threads) {
  if (threads >= 0) return {};
  return error{status::invalid_problem,
               std::string(policy) + ": threads is " + std::to_string(threads) +
                   "; give 0 (every core) or a number of threads",
               {}};
}

inline error budget_too_small(std::string_view policy, const chain& c, bytes budget, bytes minimum,
                              std::string_view what = {}) {
  std::string msg = std::string(policy) + ": the budget of " + format_bytes(budget) +
                    " is below the minimum of " + format_bytes(minimum) +
                    " that it needs for chain '" + c.name + "'";
  if (!what.empty()) msg += " (" + std::string(what) + ")";
  msg += "; give a budget of at least " + std::to_string(minimum) + " bytes";
  return error{status::budget_too_small, std::move(msg), minimum};
}

/// The shared finishing step of every policy, chain or graph: given the replay of the schedule
/// on the policy's machine (r), returns the schedule only if it is valid within the budget and the
/// simulated makespan equals the policy's claim (s.predicted_time); predicted_peak is set to the
/// simulated peak. A disagreement is a bug in the policy and is reported as solver_error with the
/// simulator's finding.
inline result<schedule> finish(std::string_view policy, const sim::report& r, schedule s) {
  if (!r.valid)
    return error{status::solver_error,
                 std::string(policy) +
                     " produced a schedule the simulator rejects (a bug in remat; "
                     "please report it with the problem): " +
                     (r.first_violation ? r.first_violation->message : std::string("?")),
                 {}};
  const double tol = 1e-9 * std::max(1.0, std::abs(r.makespan));
  if (std::abs(r.makespan - s.predicted_time) > tol)
    return error{status::solver_error,
                 std::string(policy) + " claimed a makespan of " +
                     std::to_string(s.predicted_time) + " s but its schedule simulates to " +
                     std::to_string(r.makespan) +
                     " s (a bug in remat; please report it with the problem)",
                 {}};
  s.predicted_peak = r.peak;
  return s;
}

/// finish() with the replay: on graph g, within the budget, on the machine hw.
inline result<schedule> finish(std::string_view policy, const graph& g, bytes budget, schedule s,
                               const machine& hw = {}) {
  const sim::report r = sim::simulate(g, s, {.budget = budget, .record_timeline = false, .hw = hw});
  return finish(policy, r, std::move(s));
}

/// The training graph of a chain that passed check_request.
inline graph chain_graph(const chain& c) { return *build_graph(c); }

/// Lowers a chain policy's decisions (schedule/notation.hpp); a failure is a bug in the policy.
inline result<schedule> lower_decisions(std::string_view policy, int n,
                                        const std::vector<chain_op>& ops, seconds claimed_time) {
  auto s = lower(n, ops);
  if (!s)
    return error{status::solver_error,
                 std::string(policy) +
                     " produced chain ops that break the chain notation's rules (a bug in "
                     "remat; please report it with the chain): " +
                     s.err().message,
                 {}};
  s->predicted_time = claimed_time;
  return s;
}

/// finish() for a chain policy's decisions, on the chain's graph g (chain_graph: its loss is
/// compute node N).
inline result<schedule> finish(std::string_view policy, const graph& g, bytes budget,
                               const std::vector<chain_op>& ops, seconds claimed_time) {
  auto s = lower_decisions(policy, g.loss(), ops, claimed_time);
  if (!s) return s.err();
  return finish(policy, g, budget, std::move(*s));
}

/// Peak of a chain policy's decisions without any budget, on the chain's graph g (chain_graph).
inline bytes peak_of(const graph& g, const std::vector<chain_op>& ops) {
  const auto s = lower(g.loss(), ops);
  if (!s) return unlimited_bytes;  // not a program: finish() reports it
  return sim::simulate(g, *s, {.record_timeline = false}).peak;
}

/// Sum of the compute op durations of chain ops (the chain policies emit no transfers; a
/// program with some is timed by the simulator, whose lanes overlap them with compute).
inline seconds time_of(const chain& c, const std::vector<chain_op>& ops) {
  seconds t = 0;
  for (const auto& i : ops) {
    if (i.kind == chain_op_kind::forward) t += c.uf(i.index);
    if (i.kind == chain_op_kind::backward) t += c.ub(i.index);
  }
  return t;
}

/// Point i of n budgets spaced evenly from hi (i = 0) down to lo (i = n - 1), rounded to bytes:
/// rockmate's grids of block budgets and of whole-graph budgets.
[[nodiscard]] inline bytes evenly_down(bytes hi, bytes lo, int i, int n) {
  if (n <= 1) return hi;
  return hi - static_cast<bytes>(std::llround(static_cast<double>(hi - lo) * i / (n - 1)));
}

/// A wall-clock deadline; infinite when the limit is not finite or not positive.
///
/// The chain policies' promise (rotor, rotor_floating, periodic, revolve): a solve with a
/// finite positive time_limit returns within the limit plus a small margin, a plan or
/// status::time_limit. They check it between units of work of a few milliseconds at most (see
/// deadline_poll), so the margin is one such unit plus the final replay of the schedule in the
/// simulator (linear in its length): under 0.1 s on chains of up to 10,000 stages.
class deadline {
 public:
  explicit deadline(seconds limit)
      : start_(std::chrono::steady_clock::now()),
        limit_(limit),
        on_(std::isfinite(limit) && limit > 0) {}
  [[nodiscard]] bool passed() const { return on_ && elapsed() > limit_; }
  [[nodiscard]] seconds limit() const { return limit_; }
  /// Whether there is a limit at all.
  [[nodiscard]] bool on() const { return on_; }
  [[nodiscard]] seconds elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
  seconds limit_;
  bool on_;
};

/// Checks a deadline after every `every` units of work (one unit: one memory slot of one move,
/// one simulated operation), so that cheap steps do not pay for reading the clock and
/// expensive ones are never far apart. With the default, a check every 2^20 units: about a
/// millisecond of work.
class deadline_poll {
 public:
  explicit deadline_poll(const deadline& dl, std::int64_t every = std::int64_t{1} << 20)
      : dl_(dl), every_(every) {}
  /// Counts `units` of work done; true once the deadline has passed (checked when enough work
  /// has piled up since the last check).
  bool passed(std::int64_t units = 1) {
    work_ += units;
    if (work_ < every_) return false;
    work_ = 0;
    return dl_.passed();
  }

 private:
  const deadline& dl_;
  std::int64_t every_;
  std::int64_t work_ = 0;
};

/// The best member of a family of chain programs (periodic's segment counts, revolve's snapshot
/// counts), tried in any order: the fastest that fits the budget; on equal times the member with
/// the smallest parameter, so that the answer does not depend on the order they are tried in.
class family_best {
 public:
  explicit family_best(bytes budget) : budget_(budget) {}
  /// Member k's program, its peak and its time.
  void consider(int k, std::vector<chain_op> ops, bytes peak, seconds time) {
    min_peak_ = std::min(min_peak_, peak);
    if (peak > budget_) return;
    if (!ops_.empty() && (time > time_ || (time == time_ && k > k_))) return;
    ops_ = std::move(ops);
    time_ = time;
    k_ = k;
  }
  [[nodiscard]] bool found() const { return !ops_.empty(); }
  [[nodiscard]] int parameter() const { return k_; }
  [[nodiscard]] seconds time() const { return time_; }
  [[nodiscard]] std::vector<chain_op>& program() { return ops_; }
  /// The smallest peak of the members considered (the family's minimum budget).
  [[nodiscard]] bytes min_peak() const { return min_peak_; }
  /// The length of the best program so far (for time-limit estimates).
  [[nodiscard]] std::size_t size() const { return ops_.size(); }

 private:
  bytes budget_;
  bytes min_peak_ = unlimited_bytes;
  std::vector<chain_op> ops_;
  seconds time_ = 0;
  int k_ = 0;
};

/// Runs a solve and records its wall-clock time in the solution it returns (solve_seconds).
template <class F>
auto timed(F&& solve) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = std::forward<F>(solve)();
  if (r)
    r->solve_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

/// solve() from solve_detailed(): the solution's program, or its error.
template <class D>
result<schedule> program_of(result<solution<D>> r) {
  if (!r) return r.err();
  return std::move(r->program);
}

/// status::time_limit: "<policy>: the time limit of L s was reached <while>; <advice>".
inline error time_limit_reached(std::string_view policy, const deadline& dl,
                                std::string_view while_doing, std::string_view advice) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", dl.limit());
  return error{status::time_limit,
               std::string(policy) + ": the time limit of " + limit + " s was reached " +
                   std::string(while_doing) + "; " + std::string(advice),
               {}};
}

}  // namespace remat::detail
