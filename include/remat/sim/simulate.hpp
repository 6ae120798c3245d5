#pragma once
// The simulator: the referee for every chain schedule (DESIGN.md §5).
//
// It replays a schedule with exactly the operation semantics of shilova-spec §2.1 (thesis
// Table 2.1, S:1126-1162):
//   * memory starts with a_0 (and the zero-size delta_N) and must end holding only delta_0;
//   * every op needs its inputs in memory (F_l: a_{l-1} or abar_{l-1}; F_l^∅ only a plain
//     a_{l-1}, which it consumes; B_l: delta_l, abar_l and a_{l-1} or abar_{l-1});
//   * the peak while an op runs is the stored data + the op's output + the op's overhead
//     (F^all's own overhead when the chain gives one, see chain.hpp);
//   * there is no explicit delete: inputs are consumed only by F^∅ and B (a plain a_{l-1} is
//     consumed by B_l, an abar_{l-1} input is kept for B_{l-1});
//   * the makespan is the sum of the op durations.
// A tensor is stored at most once: computing an activation that is already in memory is a
// violation (the thesis' memory is a set of tensors).
//
// Structural violations (missing input, duplicate, unknown stage, wrong final state) stop the
// replay; exceeding the budget is recorded as the first violation but the replay goes on, so
// that the reported peak is the schedule's true peak.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::sim {

enum class violation_kind { unknown_stage, missing_input, already_present, over_budget, wrong_final_state };

struct violation {
  violation_kind kind = violation_kind::missing_input;
  std::size_t op = 0;  ///< index of the offending instruction (ops.size() for the final state)
  std::string message;
};

/// One instruction's effect on memory.
struct memory_point {
  std::size_t op = 0;
  seconds start = 0;
  seconds end = 0;
  bytes before = 0;  ///< stored data when the op starts
  bytes peak = 0;    ///< stored data + output + overhead while it runs
  bytes after = 0;   ///< stored data when it ends
};

struct report {
  bool valid = false;  ///< no violation at all, budget included
  seconds makespan = 0;
  bytes peak = 0;
  std::vector<memory_point> timeline;
  std::optional<violation> first_violation;
};

struct options {
  bytes budget = unlimited_bytes;
  bool record_timeline = true;
};

namespace detail {
enum class held : unsigned char { none, plain, full };  // nothing, a_k, abar_k
inline std::string tensor_name(const char* sym, int k) { return std::string(sym) + "_" + std::to_string(k); }
}  // namespace detail

inline report simulate(const chain& c, const schedule& s, options opt = {}) {
  using detail::held;
  const int n = c.length();
  report r;
  std::vector<held> act(static_cast<std::size_t>(n + 1), held::none);
  std::vector<char> grad(static_cast<std::size_t>(n + 1), 0);
  act[0] = held::plain;
  grad[static_cast<std::size_t>(n)] = 1;
  bytes mem = c.a(0) + c.delta(n);
  r.peak = mem;
  if (opt.record_timeline) r.timeline.reserve(s.ops.size());

  auto fail = [&](violation_kind k, std::size_t op, std::string msg) {
    if (!r.first_violation) r.first_violation = violation{k, op, std::move(msg)};
  };

  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const instruction& ins = s.ops[i];
    const std::string name = to_string(ins);
    const int l = ins.index;
    if (l < 1 || l > n) {
      fail(violation_kind::unknown_stage, i,
           name + ": stage " + std::to_string(l) + " does not exist (the chain has stages 1.." +
               std::to_string(n) + ")");
      return r;
    }
    const auto in = static_cast<std::size_t>(l - 1);
    const auto out = static_cast<std::size_t>(l);
    const bytes before = mem;
    bytes peak = 0;
    seconds dt = 0;
    if (ins.kind == op_kind::forward) {
      if (act[in] == held::none) {
        fail(violation_kind::missing_input, i, name + ": its input a_" + std::to_string(l - 1) + " is not in memory");
        return r;
      }
      if (ins.mode == forward_mode::no_save && act[in] == held::full) {
        fail(violation_kind::missing_input, i,
             name + ": F_none consumes a plain a_" + std::to_string(l - 1) + ", but abar_" +
                 std::to_string(l - 1) + " is stored (run it with _ck or _all instead)");
        return r;
      }
      if (act[out] != held::none) {
        fail(violation_kind::already_present, i,
             name + ": " + detail::tensor_name(act[out] == held::full ? "abar" : "a", l) +
                 " is already in memory");
        return r;
      }
      const bool all = ins.mode == forward_mode::save_all;
      const bytes produced = all ? c.abar(l) : c.a(l);
      peak = mem + produced + (all ? c.of_all(l) : c.of(l));
      mem += produced;
      act[out] = all ? held::full : held::plain;
      if (ins.mode == forward_mode::no_save) {
        mem -= c.a(l - 1);
        act[in] = held::none;
      }
      dt = c.uf(l);
    } else {
      if (!grad[out]) {
        fail(violation_kind::missing_input, i, name + ": its input delta_" + std::to_string(l) + " is not in memory");
        return r;
      }
      if (act[out] != held::full) {
        fail(violation_kind::missing_input, i,
             name + ": it needs abar_" + std::to_string(l) + " (run F" + std::to_string(l) +
                 "_all first)" + (act[out] == held::plain ? ", but only a_" + std::to_string(l) + " is stored" : ""));
        return r;
      }
      if (act[in] == held::none) {
        fail(violation_kind::missing_input, i, name + ": its input a_" + std::to_string(l - 1) + " is not in memory");
        return r;
      }
      if (grad[in]) {
        fail(violation_kind::already_present, i, name + ": delta_" + std::to_string(l - 1) + " is already in memory");
        return r;
      }
      peak = mem + c.delta(l - 1) + c.ob(l);
      mem -= c.delta(l) + c.abar(l);
      grad[out] = 0;
      act[out] = held::none;
      if (act[in] == held::plain) {
        mem -= c.a(l - 1);
        act[in] = held::none;
      }
      mem += c.delta(l - 1);
      grad[in] = 1;
      dt = c.ub(l);
    }
    if (peak > opt.budget)
      fail(violation_kind::over_budget, i,
           name + ": needs " + std::to_string(peak) + " bytes while it runs, over the budget of " +
               std::to_string(opt.budget) + " bytes");
    r.peak = std::max(r.peak, peak);
    if (opt.record_timeline) r.timeline.push_back({i, r.makespan, r.makespan + dt, before, peak, mem});
    r.makespan += dt;
  }

  // Final state: only delta_0.
  std::string extra;
  for (int k = 0; k <= n; ++k) {
    if (act[static_cast<std::size_t>(k)] != held::none)
      extra += (extra.empty() ? "" : ", ") + detail::tensor_name(act[static_cast<std::size_t>(k)] == held::full ? "abar" : "a", k);
    if (k > 0 && grad[static_cast<std::size_t>(k)])
      extra += (extra.empty() ? "" : ", ") + detail::tensor_name("delta", k);
  }
  if (!grad[0]) {
    fail(violation_kind::wrong_final_state, s.ops.size(),
         "the schedule ends without delta_0 (the input gradient): B1 never ran" +
             (extra.empty() ? std::string() : "; memory still holds " + extra));
  } else if (!extra.empty()) {
    fail(violation_kind::wrong_final_state, s.ops.size(),
         "the schedule ends with " + extra + " still in memory; it must end holding only delta_0");
  }
  r.valid = !r.first_violation.has_value();
  return r;
}

}  // namespace remat::sim
