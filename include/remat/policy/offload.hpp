#pragma once
// The offloading policies for chains [Shilova21, Part II]: pofo (recompute and offload, one DP,
// ch. 4), offload_dynprog (DYNPROG, §3.3.3), offload_greedy (GREEDY, §3.2.2), offload_autocapper
// (§4.3), and offload_fractional_bound (OFF_frac, §3.2.2, Thm 8: a lower bound for plans without
// recomputation). Each plans for its `machine hw` (bandwidth 0: no link).
//
// The DPs (detail/pofo_dp.hpp) are exact in pofo's fluid model; remat's executors move whole
// tensors, so each plan is realized as O/P/W instructions (offloads after their forward reader,
// waits where memory runs short, prefetches as early as memory allows) and replayed by the
// simulator on the machine: the plan's time is the simulator's, beside the model's.
//
// The model, the realization and the decisions: docs/offloading.md.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/policy/best_of.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/detail/pofo_dp.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>

namespace remat {

/// An offloading policy's solution.
using offload_plan = solution<offload_details>;

namespace detail {

/// A policy's machine, checked: its message names the policy and the knob.
inline result<machine> checked_machine(std::string_view policy, const machine& hw) {
  if (auto why = machine_error(hw))
    return error{status::invalid_problem, std::string(policy) + ": hw: " + *why, {}};
  return hw;
}

/// The transfer rates of a machine in slots per second, for a discretisation of d.slots slots
/// of a budget of `budget` bytes.
inline slot_rates rates_in_slots(const machine& hw, double slots_per_byte) {
  if (!hw.transfers()) return {};
  return {hw.device_to_host * slots_per_byte, hw.host_to_device * slots_per_byte};
}

/// Counts of a program's time: compute, transfers, idle.
inline void account(offload_plan& p, const sim::report& r, const graph& g) {
  offload_details& d = p.details;
  d.compute_time = d.transfer_time = 0;
  for (const sim::memory_point& m : r.timeline) {
    const instruction& ins = p.program.ops[m.op];
    if (m.lane != sim::lane::compute)
      d.transfer_time += m.end - m.start;
    else if (ins.is_compute())
      d.compute_time += ins.op == op_kind::fast_forward ? g.compute(ins.node).fast_time
                                                        : g.compute(ins.node).time;
  }
  d.idle_time = std::max(0.0, r.makespan - d.compute_time);
}

/// The first, synchronous placement of a plan's transfers: O_k right after the forward-phase
/// forward that reads a_k, W_k P_k W_k just before its first backward-phase reader.
inline std::vector<chain_op> place_transfers(const chain& c, const offload_decisions& dec) {
  const int n = c.length();
  std::vector<chain_op> ops;
  // Forward phase: everything before B_N.
  std::size_t loss_at = 0;
  while (loss_at < dec.ops.size() &&
         !(dec.ops[loss_at].kind == chain_op_kind::backward && dec.ops[loss_at].index == n))
    ++loss_at;
  auto is_moved = [&](int k) {
    return std::binary_search(dec.offloaded.begin(), dec.offloaded.end(), k);
  };
  std::vector<char> prefetched(static_cast<std::size_t>(n + 1), 0);
  for (std::size_t i = 0; i < dec.ops.size(); ++i) {
    const chain_op& op = dec.ops[i];
    if (i >= loss_at) {
      const int k = op.index - 1;
      if (k >= 0 && is_moved(k) && !prefetched[static_cast<std::size_t>(k)]) {
        prefetched[static_cast<std::size_t>(k)] = 1;
        for (chain_op t : {chain_op::wait(k), chain_op::prefetch(k), chain_op::wait(k)})
          ops.push_back(t);
      }
    }
    ops.push_back(op);
    if (i < loss_at && op.kind == chain_op_kind::forward && is_moved(op.index - 1))
      ops.push_back(chain_op::offload(op.index - 1));
  }
  return ops;
}

/// Realizes a DP's decisions as whole-tensor transfers (the header's comment) and checks the
/// program in the simulator; the plan's time is the simulator's.
inline result<offload_plan> realize(std::string_view policy, const chain& c, const graph& g,
                                    bytes budget, const machine& hw, const offload_decisions& dec) {
  const int n = c.length();
  std::vector<chain_op> ops = place_transfers(c, dec);
  // In the chain's terms (violations at chain ops), for the repair below.
  auto run = [&](const std::vector<chain_op>& p) {
    return sim::simulate(c, std::span<const chain_op>(p),
                         {.budget = budget, .record_timeline = false, .hw = hw});
  };
  // On the chain's graph, built once (the many trials of the prefetches' placement).
  auto on_graph = [&](const std::vector<chain_op>& p, const machine& m) {
    auto low = lower(n, p);
    if (!low) return sim::report{};
    return sim::simulate(g, *low, {.budget = budget, .record_timeline = false, .hw = m});
  };
  // Immediate copies, the host memory kept.
  auto run_immediate = [&](const std::vector<chain_op>& p) {
    return on_graph(p, machine{.host_memory = hw.host_memory});
  };
  auto error_of = [&](const sim::report& r) {
    if (r.first_violation && r.first_violation->kind == sim::violation_kind::over_host_memory)
      return error{status::infeasible,
                   std::string(policy) + ": its plan needs more host memory than the machine's " +
                       format_bytes(hw.host_memory) + " (" + r.first_violation->message +
                       "); the DP does not model host memory: raise hw.host_memory, or the budget",
                   {}};
    return error{status::solver_error,
                 std::string(policy) +
                     ": its realized program is rejected by the simulator (a bug in remat; please "
                     "report it with the chain): " +
                     (r.first_violation ? r.first_violation->message : std::string("?")),
                 {}};
  };
  // Forward phase: wait for the oldest offloads in flight before an op that does not fit.
  for (;;) {
    const sim::report r = run(ops);
    if (r.valid) break;
    if (!r.first_violation || r.first_violation->kind != sim::violation_kind::over_budget)
      return error_of(r);
    const std::size_t at = r.first_violation->op;
    // The oldest offload issued before `at` and not yet waited for.
    std::optional<int> oldest;
    for (std::size_t i = 0; i < at && !oldest; ++i) {
      if (ops[i].kind != chain_op_kind::offload) continue;
      const int k = ops[i].index;
      bool waited = false;
      for (std::size_t j = i + 1; j < at; ++j)
        if (ops[j].kind == chain_op_kind::wait && ops[j].index == k) waited = true;
      if (!waited) oldest = k;
    }
    if (!oldest) return error_of(r);
    // Its offload is now waited for here: the wait before its prefetch goes.
    for (std::size_t j = at; j + 1 < ops.size(); ++j)
      if (ops[j] == chain_op::wait(*oldest) && ops[j + 1] == chain_op::prefetch(*oldest)) {
        ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(j));
        break;
      }
    ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at), chain_op::wait(*oldest));
  }
  // Backward phase: each W_k P_k pair as early as memory allows, in the order of need, never
  // before the loss's forward nor before the previous pair.
  if (hw.transfers() && !std::isinf(hw.host_to_device)) {
    double best = run(ops).makespan;
    std::size_t floor = 0;
    while (floor < ops.size() &&
           !(ops[floor].kind == chain_op_kind::forward && ops[floor].index == n))
      ++floor;
    ++floor;
    for (std::size_t i = floor; i < ops.size(); ++i) {
      if (ops[i].kind != chain_op_kind::prefetch) continue;
      // The unit that moves: P_k, with the wait for its offload just before it when there is one.
      const int k = ops[i].index;
      const std::size_t from = i > floor && ops[i - 1] == chain_op::wait(k) ? i - 1 : i;
      const std::vector<chain_op> unit(ops.begin() + static_cast<std::ptrdiff_t>(from),
                                       ops.begin() + static_cast<std::ptrdiff_t>(i + 1));
      std::size_t end = i + 1;  // one past the unit
      for (std::size_t to = floor; to < from; ++to) {
        std::vector<chain_op> trial = ops;
        trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(from),
                    trial.begin() + static_cast<std::ptrdiff_t>(i + 1));
        trial.insert(trial.begin() + static_cast<std::ptrdiff_t>(to), unit.begin(), unit.end());
        const sim::report r = on_graph(trial, hw);
        // Also within the budget when copies are immediate: host_backend's copies are
        // synchronous, and an executor allocates a prefetch's buffer when it is issued.
        if (r.valid && r.makespan <= best && run_immediate(trial).valid) {
          best = r.makespan;
          ops = std::move(trial);
          end = to + unit.size();
          break;
        }
      }
      floor = end;
      i = end - 1;
    }
  }
  if (const sim::report r = run_immediate(ops); !r.valid) return error_of(r);
  offload_plan plan;
  auto low = lower(n, ops);
  if (!low) return error{status::solver_error, std::string(policy) + ": " + low.err().message, {}};
  const sim::report r =
      sim::simulate(g, *low, {.budget = budget, .record_timeline = true, .hw = hw});
  if (!r.valid) return error_of(r);
  low->predicted_time = r.makespan;
  auto done = finish(policy, r, std::move(*low));
  if (!done) return done.err();
  plan.program = std::move(*done);
  plan.details.ops = std::move(ops);
  plan.details.offloaded = dec.offloaded;
  for (int k : dec.offloaded) plan.details.offloaded_bytes += c.a(k);
  plan.details.model_time = dec.time;
  plan.details.hw = hw;
  plan.optimal = plan.program.predicted_time <= c.ideal_time();
  account(plan, r, g);
  return plan;
}

/// What is left of a deadline, as a time limit for a policy called within it (at least 1 ms).
inline seconds remaining(const deadline& dl) {
  if (!(std::isfinite(dl.limit()) && dl.limit() > 0))
    return std::numeric_limits<double>::infinity();
  return std::max(1e-3, dl.limit() - dl.elapsed());
}

/// autocapper's search (offload_autocapper, below): the fastest program over the caps, if any.
inline std::optional<offload_plan> autocap(std::string_view policy, const chain& c, const graph& g,
                                           bytes budget, const machine& hw, int caps,
                                           std::int64_t slots, const deadline& dl) {
  const bytes high = peak_of(g, store_all::program(c));
  const int n = c.length();
  std::optional<offload_plan> best;
  for (int i = 0; i < caps; ++i) {
    if (dl.passed()) break;
    const bytes cap = caps == 1 ? budget : budget + (high - budget) * i / (caps - 1);
    const auto r = rotor{.slots = slots, .time_limit = remaining(dl)}.solve(c, cap);
    if (!r) continue;
    auto ops = to_chain_ops(n, *r);
    if (!ops) continue;
    // Where each kept a_k is read: its forward-phase reader F_{k+1} (^ck or ^all) and its first
    // backward-phase reader; offloading it lowers the ops in between.
    std::size_t loss_at = 0;
    while ((*ops)[loss_at].kind != chain_op_kind::backward) ++loss_at;
    std::vector<std::size_t> from(static_cast<std::size_t>(n), 0),
        to(static_cast<std::size_t>(n), 0);
    for (std::size_t j = 0; j < ops->size(); ++j) {
      const chain_op& op = (*ops)[j];
      const int k = op.index - 1;
      if (k < 0 || k >= n - 1) continue;
      const auto kk = static_cast<std::size_t>(k);
      if (j < loss_at && op.kind == chain_op_kind::forward && op.mode != forward_mode::no_save)
        from[kk] = j + 1;
      if (j >= loss_at && from[kk] > 0 && to[kk] == 0) to[kk] = j;
    }
    offload_decisions dec{*ops, {}, r->predicted_time};
    for (;;) {
      // The op at the peak with immediate copies (the executor's memory on the host; a copy at
      // the machine's bandwidth only adds waits, which realize() places): when it fits, the
      // plan is realized; else the lowest-index kept a_k across that op moves.
      const std::vector<chain_op> placed = place_transfers(c, dec);
      const sim::report rep = sim::simulate(c, std::span<const chain_op>(placed), {});
      if (rep.valid && rep.peak <= budget) {
        if (auto p = realize(policy, c, g, budget, hw, dec))
          if (!best || p->program.predicted_time < best->program.predicted_time)
            best = std::move(*p);
        break;
      }
      std::size_t at = 0;
      for (const sim::memory_point& m : rep.timeline)
        if (m.peak == rep.peak) {
          at = m.op;
          break;
        }
      // Map the position in `placed` back to `ops` (the transfers are not in ops).
      std::size_t j = 0;
      for (std::size_t q = 0; q < at; ++q)
        if (placed[q].is_compute()) ++j;
      std::optional<int> pick;
      for (int k = 0; k < n - 1 && !pick; ++k) {
        const auto kk = static_cast<std::size_t>(k);
        if (from[kk] == 0 || from[kk] > j || to[kk] <= j) continue;
        if (!std::binary_search(dec.offloaded.begin(), dec.offloaded.end(), k) && c.a(k) > 0)
          pick = k;
      }
      if (!pick) break;
      dec.offloaded.insert(std::upper_bound(dec.offloaded.begin(), dec.offloaded.end(), *pick),
                           *pick);
    }
  }
  if (best) best->details.model_time = best->program.predicted_time;
  return best;
}

/// The DP's own plan, for pofo (recomputation::allowed) and offload_dynprog (none): the store-all
/// plan when it fits, rotor's when there is no link (pofo; DYNPROG is then store-all), else the
/// DP at `slots`, refined twice near the minimum, then the minimum-memory schedule (or rotor's
/// plan when it is faster).
inline result<offload_plan> plan_offloading(std::string_view policy, const chain& c, bytes budget,
                                            const machine& hw, std::int64_t slots,
                                            recomputation recompute, seconds time_limit,
                                            const std::function<void(double)>& progress) {
  if (auto ok = check_request(c, budget); !ok) return ok.err();
  const graph g = chain_graph(c);
  const bool recomputes = recompute == recomputation::allowed;
  // Storing everything is optimal when it fits (sum(u_F + u_B) bounds every schedule).
  if (peak_of(g, store_all::program(c)) <= budget) {
    if (progress) progress(1.0);
    return realize(policy, c, g, budget, hw, {store_all::program(c), {}, c.ideal_time()});
  }
  // No transfers: pofo is rotor (the same DP at β = 0, tested), with rotor's fallback near its
  // minimum; offload_dynprog is store-all.
  if (!hw.transfers() && recomputes) {
    auto r = rotor{.slots = slots, .time_limit = time_limit, .progress = progress}.solve(c, budget);
    if (!r) {
      error e = r.err();
      if (e.message.rfind("rotor", 0) == 0) e.message.replace(0, 5, policy);
      return e;
    }
    auto ops = to_chain_ops(c.length(), *r);
    if (!ops)
      return error{status::solver_error,
                   std::string(policy) + ": rotor's program is not chain-shaped (a bug in remat)",
                   {}};
    return realize(policy, c, g, budget, hw, {std::move(*ops), {}, r->predicted_time});
  }
  const pofo_min_memory lowest(c, hw, recompute);
  const bytes minimum = lowest.budget();
  if (budget < minimum)
    return budget_too_small(policy, c, budget, minimum,
                            hw.transfers() ? "with every input that can move offloaded"
                                           : "with no transfer (bandwidth 0)");
  if (slots > pofo_max_slots)
    return error{status::invalid_problem,
                 std::string(policy) + ": slots is " + std::to_string(slots) + "; give at most " +
                     std::to_string(pofo_max_slots) + " (0: exact sizes, for budgets below 1 MiB)",
                 {}};
  if (slots <= 0 && exact_slots(c, budget) > pofo_max_slots)
    return error{status::invalid_problem,
                 std::string(policy) + ": exact sizes (slots = 0) need a budget of at most " +
                     std::to_string(pofo_max_slots) + " times the sizes' common divisor (" +
                     std::to_string(size_unit(c)) + " bytes); give a slot count (e.g. 50)",
                 {}};
  if (c.length() > pofo_max_stages)
    return error{status::invalid_problem,
                 std::string(policy) + ": chain '" + c.name + "' has " +
                     std::to_string(c.length()) + " stages; the DP takes at most " +
                     std::to_string(pofo_max_stages) + " (group stages into blocks)",
                 {}};
  const deadline dl(time_limit);
  // Refinement: the rounding of sizes may leave no schedule near the minimum: twice the slots,
  // up to twice, then the minimum-memory schedule (every movable input offloaded), realized.
  std::int64_t s = slots <= 0 ? budget : std::min<std::int64_t>(slots, budget);
  for (int round = 0;; ++round) {
    const discrete_chain d = discretize(c, budget, s);
    // Slots per byte: 1/g at exact sizes (a slot is g bytes), S/M when rounded.
    const double scale = d.exact ? 1.0 / static_cast<double>(d.unit)
                                 : static_cast<double>(d.slots) / static_cast<double>(budget);
    pofo_dp dp(d, rates_in_slots(hw, scale), recompute, dl);
    double value = 0;
    try {
      value = dp.solve(progress);
    } catch (const deadline_passed&) {
      return time_limit_reached(policy, dl,
                                "while filling the table (" + std::to_string(d.slots) + " slots)",
                                "raise time_limit, or use fewer slots");
    }
    if (value < std::numeric_limits<double>::infinity())
      return realize(policy, c, g, budget, hw, dp.reconstruct());
    if (d.exact || round == 2 || 2 * s > pofo_max_slots) break;
    s = std::min<std::int64_t>(s * 2, budget);
  }
  // The fallback: the faster of the minimum-memory schedule and rotor's plan when it fits (it
  // refines its slots further, to exact sizes, and has its own minimum-memory fallback), so that
  // pofo is never slower than rotor there either.
  auto plan = realize(policy, c, g, budget, hw, lowest.schedule());
  if (!plan) return plan;
  plan->details.model_time = plan->program.predicted_time;
  std::string how = "the minimum-memory schedule with every movable input offloaded";
  if (recomputes && budget >= rotor{}.minimum_budget(c)) {
    const auto r = rotor{.slots = slots, .time_limit = remaining(dl)}.solve(c, budget);
    if (r && r->predicted_time < plan->program.predicted_time) {
      if (auto ops = to_chain_ops(c.length(), *r)) {
        auto other = realize(policy, c, g, budget, hw, {std::move(*ops), {}, r->predicted_time});
        if (other) {
          plan = std::move(other);
          how = "rotor's plan (no transfer)";
        }
      }
    }
  }
  plan->notes.push_back("the budget is within rounding of the minimum (" + std::to_string(minimum) +
                        " bytes) at " + std::to_string(s) + " slots: the plan is " + how +
                        ", valid but not proven optimal (model_time is its program's time)");
  return plan;
}

}  // namespace detail

/// pofo: recompute and offload [Shilova21, ch. 4], planned by one DP in pofo's model and realized
/// as whole-tensor transfers (header comment); with the portfolio, the fastest of its DP's plan,
/// rotor's, DYNPROG's and autocapper's (best_of). On a machine without a link it is rotor.
struct pofo {
  static constexpr std::string_view name = "pofo";
  static constexpr std::string_view summary =
      "recompute and offload activations, one DP (POFO), with a portfolio of the others";
  /// The machine: the link's speed each way (PCIe 3 x16: about 12e9 bytes/s; 0: no transfers,
  /// pofo is then rotor; infinity: instantaneous) and the host memory.
  machine hw = machine::with_bandwidth(pcie3_x16_bandwidth);
  /// Memory slots the budget is split into (the thesis' N = 50); 0: exact sizes (budgets below
  /// 1 MiB, small chains: the tests).
  std::int64_t slots = 50;
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// The fraction of the DP's top-level choices done (0..1).
  std::function<void(double)> progress = {};
  /// Also plan rotor, DYNPROG (500 slots) and autocapper, and return the fastest program (a
  /// note says which); false: the DP's own plan (to compare planners, or the model's optimum).
  bool portfolio = true;

  [[nodiscard]] result<offload_plan> solve_detailed(const chain& c, bytes budget) const;
  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }
  /// The smallest budget with which pofo plans c (exact sizes; at any bandwidth > 0 it is that
  /// of instantaneous transfers, the copies then costing idle time).
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    return detail::pofo_minimum_budget(c, hw, detail::recomputation::allowed);
  }
};

/// DYNPROG [Shilova21, §3.3.3]: no recomputation; Alg. 5 chooses which activations to offload.
/// Alg. 5 here synchronises at the loss (the thesis' cheaper variant), being pofo's DP
/// restricted to F^all segments.
struct offload_dynprog {
  static constexpr std::string_view name = "offload_dynprog";
  static constexpr std::string_view summary =
      "store every activation, offload the set a DP chooses (DYNPROG), no recomputation";
  machine hw = machine::with_bandwidth(pcie3_x16_bandwidth);
  /// The thesis' N = 500.
  std::int64_t slots = 500;
  seconds time_limit = std::numeric_limits<double>::infinity();
  std::function<void(double)> progress = {};

  [[nodiscard]] result<offload_plan> solve_detailed(const chain& c, bytes budget) const {
    return detail::timed([&]() -> result<offload_plan> {
      auto m = detail::checked_machine(name, hw);
      if (!m) return m.err();
      return detail::plan_offloading(name, c, budget, hw, slots, detail::recomputation::none,
                                     time_limit, progress);
    });
  }
  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }
  /// The smallest budget with which it plans c: nothing recomputed, every movable input
  /// offloaded (exact sizes).
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    return detail::pofo_minimum_budget(c, hw, detail::recomputation::none);
  }
};

namespace detail {

/// The time of storing everything while offloading `amount[s]` of each segment s's input
/// (exact sizes), in pofo's model; infinity if it does not fit.
inline double offload_path_time(const chain& c, bytes budget, const machine& hw,
                                std::vector<std::int64_t> amount) {
  const discrete_chain d = exact_sizes(c);
  discrete_chain db = d;
  db.slots = budget;
  const deadline none(0);
  if (!hw.transfers())
    for (std::int64_t x : amount)
      if (x > 0) return std::numeric_limits<double>::infinity();
  const pofo_dp dp(db, rates_in_slots(hw, 1.0), recomputation::none, none, std::move(amount));
  return dp.walk();
}

/// The eager prefix (a_0, a_1, ...) of `total` bytes, as amounts per segment (1..N-1).
inline std::vector<std::int64_t> eager_prefix(const chain& c, bytes total) {
  std::vector<std::int64_t> amount(static_cast<std::size_t>(c.length()), 0);
  for (int s = 1; s < c.length() && total > 0; ++s) {
    const bytes take = std::min(total, c.a(s - 1));
    amount[static_cast<std::size_t>(s)] = take;
    total -= take;
  }
  return amount;
}

}  // namespace detail

/// GREEDY [Shilova21, §3.2.2]: store everything and offload a_0, a_1, ..., a_k whole, k the
/// smallest index that makes the plan fit (the thesis' rule, sum >= M_peak - M, then longer
/// prefixes while the model still finds an op that does not fit: the input of F_s counts in full
/// while F_s runs).
struct offload_greedy {
  static constexpr std::string_view name = "offload_greedy";
  static constexpr std::string_view summary =
      "store every activation, offload the shortest prefix that fits (GREEDY)";
  machine hw = machine::with_bandwidth(pcie3_x16_bandwidth);

  [[nodiscard]] result<offload_plan> solve_detailed(const chain& c, bytes budget) const {
    return detail::timed([&] { return plan(c, budget); });
  }
  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }
  /// Offloading the whole prefix is the last plan it tries: its minimum is that of no
  /// recomputation with every movable input offloaded.
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    return detail::pofo_minimum_budget(c, hw, detail::recomputation::none);
  }

 private:
  [[nodiscard]] result<offload_plan> plan(const chain& c, bytes budget) const {
    if (auto m = detail::checked_machine(name, hw); !m) return m.err();
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    const graph g = detail::chain_graph(c);
    const bytes peak = detail::peak_of(g, store_all::program(c));
    std::vector<int> set;
    bytes sum = 0;
    for (int k = -1; k <= c.length() - 2; ++k) {
      if (k >= 0) {
        set.push_back(k);
        sum += c.a(k);
      }
      if (k >= 0 && !hw.transfers()) break;
      if (sum < peak - budget) continue;
      std::vector<std::int64_t> amount(static_cast<std::size_t>(c.length()), 0);
      for (int j : set) amount[static_cast<std::size_t>(j + 1)] = c.a(j);
      const double t = detail::offload_path_time(c, budget, hw, amount);
      if (t < std::numeric_limits<double>::infinity()) {
        std::vector<int> moved;
        for (int j : set)
          if (c.a(j) > 0) moved.push_back(j);
        return detail::realize(name, c, g, budget, hw, {store_all::program(c), moved, t});
      }
    }
    return detail::budget_too_small(
        name, c, budget, minimum_budget(c),
        "storing everything, with a prefix of the activations offloaded");
  }
};

/// autocapper [Shilova21, §4.3]: for each of `caps` budgets M' evenly spaced from the budget M to
/// the store-all peak, rotor's plan at M' (capper(M')), then, while its program does not fit M,
/// the lowest-index activation kept across the op at the peak is offloaded; the fastest program
/// that fits is kept. Without recomputation (M' at the store-all peak) it is GREEDY's idea. Only
/// the activations a persistent plan keeps from its forward phase to its backward work (the
/// inputs of F^ck and F^all forwards there, a_0 included, the loss's excepted) can move, as in
/// pofo.
struct offload_autocapper {
  static constexpr std::string_view name = "offload_autocapper";
  static constexpr std::string_view summary =
      "rotor at higher caps, then offload across the peak until it fits (autocapper)";
  machine hw = machine::with_bandwidth(pcie3_x16_bandwidth);
  int caps = 40;             ///< the thesis' 40 values of M'
  std::int64_t slots = 500;  ///< rotor's, for capper's plans
  seconds time_limit = std::numeric_limits<double>::infinity();

  [[nodiscard]] result<offload_plan> solve_detailed(const chain& c, bytes budget) const {
    return detail::timed([&] { return plan(c, budget); });
  }
  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }

 private:
  [[nodiscard]] result<offload_plan> plan(const chain& c, bytes budget) const {
    if (auto m = detail::checked_machine(name, hw); !m) return m.err();
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    if (caps < 1)
      return error{status::invalid_problem, std::string(name) + ": caps must be >= 1", {}};
    const graph g = detail::chain_graph(c);
    const bytes high = detail::peak_of(g, store_all::program(c));
    if (high <= budget)
      return detail::realize(name, c, g, budget, hw, {store_all::program(c), {}, c.ideal_time()});
    const detail::deadline dl(time_limit);
    std::optional<offload_plan> best = detail::autocap(name, c, g, budget, hw, caps, slots, dl);
    if (!best) {
      const bytes minimum = detail::pofo_minimum_budget(c, hw, detail::recomputation::allowed);
      if (budget < minimum)
        return detail::budget_too_small(name, c, budget, minimum,
                                        "with every input that can move offloaded");
      if (dl.passed())
        return detail::time_limit_reached(name, dl, "before any cap gave a plan",
                                          "raise time_limit");
      return error{status::infeasible,
                   std::string(name) + ": no cap gave a plan within the budget of " +
                       format_bytes(budget) +
                       " (capping offloads only what rotor's plans keep across their peak); pofo "
                       "plans down to " +
                       format_bytes(minimum),
                   {}};
    }
    return std::move(*best);
  }
};

inline result<offload_plan> pofo::solve_detailed(const chain& c, bytes budget) const {
  return detail::timed([&]() -> result<offload_plan> {
    if (auto m = detail::checked_machine(name, hw); !m) return m.err();
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    // Without a link pofo is rotor, and when everything fits it is store-all: no portfolio.
    if (!portfolio || !hw.transfers() || peak_of_store_all(c) <= budget)
      return detail::plan_offloading(name, c, budget, hw, slots, detail::recomputation::allowed,
                                     time_limit, progress);
    // The portfolio. The DP rounds every size up to whole slots (50: 2% of the budget each),
    // and its model is not the executor's (whole tensors; the wait at the loss): near the
    // store-all peak the rounding can cost more than offloading saves, and a plan judged on
    // the program itself can beat the model's optimum. So pofo also plans rotor and DYNPROG at
    // their finer grids (500 slots) and autocapper (which judges its plans by simulating them),
    // and keeps the fastest program, with a note.
    pofo own = *this;
    own.portfolio = false;
    const best_of<pofo, rotor, offload_dynprog, offload_autocapper> all{
        .members = {own, rotor{}, offload_dynprog{}, offload_autocapper{}},
        .time_limit = time_limit,
        .hw = hw};
    auto r = all.solve_detailed(c, budget);
    if (!r) return r.err();
    const auto& d = r->details;
    offload_plan out;
    if (d.chosen_index == 1) {
      // rotor's program, which moves nothing: described as an offloading plan.
      const graph g = detail::chain_graph(c);
      auto ops = to_chain_ops(c.length(), r->program);
      if (!ops)
        return error{status::solver_error,
                     std::string(name) + ": rotor's program is not chain-shaped (a bug in remat)",
                     {}};
      auto described =
          detail::realize(name, c, g, budget, hw, {std::move(*ops), {}, r->program.predicted_time});
      if (!described) return described.err();
      out = std::move(*described);
    } else {
      out.program = std::move(r->program);
      out.details = std::visit(
          [](const auto& x) -> offload_details {
            if constexpr (std::is_same_v<std::remove_cvref_t<decltype(x)>, offload_details>)
              return x;
            else
              return {};
          },
          d.chosen_details);
      out.optimal = r->optimal;
    }
    out.notes = std::move(r->notes);
    if (d.chosen_index != 0) {
      const portfolio_entry& own_entry = d.entries.front();
      const char* what[] = {"", "rotor's plan (500 slots, no transfer)",
                            "DYNPROG's plan (500 slots, no recomputation)", "autocapper's plan"};
      std::string was = own_entry.code == status::ok
                            ? "the DP's own plan (" + format_seconds(own_entry.makespan) + ")"
                            : "the DP's own plan (none: " + own_entry.message + ")";
      out.notes.push_back(std::string(what[d.chosen_index]) + " is faster than " + was +
                          ": it is the plan (portfolio = false: the DP's)");
    }
    out.optimal = out.optimal || out.program.predicted_time <= c.ideal_time();
    return out;
  });
}

/// OFF_frac [Shilova21, §3.2.2, Thm 8]: transfers may be split, so the eager schedule that
/// offloads the least prefix of (a_0, a_1, ...) that fits is optimal among plans without
/// recomputation; its time is a lower bound for every such plan (offload_dynprog's,
/// offload_greedy's) in pofo's model. Infinity when nothing without recomputation fits. Exact
/// sizes; the machine as the policies'.
inline result<seconds> offload_fractional_bound(
    const chain& c, bytes budget,
    const machine& hw = machine::with_bandwidth(pcie3_x16_bandwidth)) {
  if (auto m = detail::checked_machine("offload_fractional_bound", hw); !m) return m.err();
  if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
  bytes total = 0;
  for (int k = 0; k <= c.length() - 2; ++k) total += c.a(k);
  if (!hw.transfers()) total = 0;
  auto time_of = [&](bytes x) {
    return detail::offload_path_time(c, budget, hw, detail::eager_prefix(c, x));
  };
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (time_of(total) == inf) return inf;
  // Feasibility grows with the amount (Lemma 6: offloading less is never worse once it fits).
  bytes lo = -1, hi = total;  // time_of(hi) finite
  while (hi - lo > 1) {
    const bytes mid = lo + (hi - lo) / 2;
    (time_of(mid) < inf ? hi : lo) = mid;
  }
  return time_of(hi);
}

}  // namespace remat
