#pragma once
// Shared plumbing of the chain policies: request checks, budget-too-small errors, and the
// final check of every schedule in the simulator (the referee) before it is returned.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::detail {

using remat::format_bytes;

inline result<void> check_request(const chain& c, bytes budget) {
  if (auto v = validate(c); !v) return v.err();
  if (budget < 0)
    return error{status::invalid_problem,
                 "the budget is negative (" + std::to_string(budget) + " bytes); give a byte count >= 0",
                 {}};
  return {};
}

inline error budget_too_small(std::string_view policy, const chain& c, bytes budget, bytes minimum,
                              std::string_view what = {}) {
  std::string msg = std::string(policy) + ": the budget of " + format_bytes(budget) +
                    " is below the minimum of " + format_bytes(minimum) + " that it needs for chain '" +
                    c.name + "'";
  if (!what.empty()) msg += " (" + std::string(what) + ")";
  msg += "; give a budget of at least " + std::to_string(minimum) + " bytes";
  return error{status::budget_too_small, std::move(msg), minimum};
}

/// Simulates `ops`, and returns the schedule only if it is valid within the budget and the
/// simulated makespan equals the policy's claim; a disagreement is a bug in the policy and is
/// reported as solver_error with the simulator's finding.
inline result<schedule> finish(std::string_view policy, const chain& c, bytes budget,
                               std::vector<instruction> ops, seconds claimed_time) {
  schedule s{std::move(ops), claimed_time, 0};
  const sim::report r = sim::simulate(c, s, {.budget = budget, .record_timeline = false});
  if (!r.valid)
    return error{status::solver_error,
                 std::string(policy) + " produced a schedule the simulator rejects (a bug in remat; "
                                       "please report it with the chain): " +
                     r.first_violation->message,
                 {}};
  const double tol = 1e-9 * std::max(1.0, std::abs(r.makespan));
  if (std::abs(r.makespan - claimed_time) > tol)
    return error{status::solver_error,
                 std::string(policy) + " claimed a makespan of " + std::to_string(claimed_time) +
                     " s but its schedule simulates to " + std::to_string(r.makespan) +
                     " s (a bug in remat; please report it with the chain)",
                 {}};
  s.predicted_peak = r.peak;
  return s;
}

/// Peak of a schedule without any budget.
inline bytes peak_of(const chain& c, const std::vector<instruction>& ops) {
  return sim::simulate(c, schedule{ops, 0, 0}, {.record_timeline = false}).peak;
}

/// Sum of the compute op durations of a program (the policies emit no transfers; a program
/// with some is timed by the simulator, whose lanes overlap them with compute).
inline seconds time_of(const chain& c, const std::vector<instruction>& ops) {
  seconds t = 0;
  for (const auto& i : ops) {
    if (i.kind == op_kind::forward) t += c.uf(i.index);
    if (i.kind == op_kind::backward) t += c.ub(i.index);
  }
  return t;
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
      : start_(std::chrono::steady_clock::now()), limit_(limit), on_(std::isfinite(limit) && limit > 0) {}
  [[nodiscard]] bool passed() const { return on_ && elapsed() > limit_; }
  [[nodiscard]] seconds limit() const { return limit_; }
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

/// status::time_limit: "<policy>: the time limit of L s was reached <while>; <advice>".
inline error time_limit_reached(std::string_view policy, const deadline& dl, std::string_view while_doing,
                                std::string_view advice) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", dl.limit());
  return error{status::time_limit,
               std::string(policy) + ": the time limit of " + limit + " s was reached " +
                   std::string(while_doing) + "; " + std::string(advice),
               {}};
}

}  // namespace remat::detail
