#pragma once
// RK-Rotor [Zhao24, §2.5.3, Eqs. 2.20-2.22; Rockmate23, App. C]: Rotor's dynamic program over the
// sequence of blocks, whose F^all / B move chooses among a block's options. The sequence is a
// chain with cost sets (a stage per block: store-all as its own F^all / B, the other options as
// its cost set, F^0 as its F^ck / F^none), solved by rotor's table (detail::rotor_dp) through the
// discretised solve of detail/refine.hpp. docs/rockmate.md.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/detail/refine.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/rockmate/assembly.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/policy/rotor.hpp>

namespace remat::detail {

/// The block chain of a graph's blocks and their kinds' programs, and the blocks of the plan
/// (their options counted; chosen option and forward runs set once the plan is made).
inline result<chain> block_chain(const graph& g, const block_kinds& bk,
                                 const std::vector<block_programs>& programs,
                                 std::vector<rockmate_block>& blocks) {
  chain bc;
  bc.name = g.name + " [blocks]";
  for (int d = 0; d < g.data_count(); ++d)
    if (g.is_source(d)) bc.input_bytes += g.data(d).size;
  for (int k = 0; k < bk.count(); ++k) {
    const block_programs& p = programs[ix(bk.kind_of[ix(k)])];
    const stage_option& own = p.options.front().cost;
    const auto& fw = bk.cut[ix(k)];
    stage st;
    st.name = "block " + std::to_string(k + 1) + " (" + g.compute(fw.front()).name +
              (fw.size() > 1 ? " .. " + g.compute(fw.back()).name : std::string()) + ")";
    st.forward_time = own.forward_time;
    st.backward_time = own.backward_time;
    st.output_bytes = p.output;
    st.saved_bytes = own.saved_bytes;
    st.forward_overhead_bytes = p.fast_overhead;
    st.forward_save_overhead_bytes = own.forward_overhead_bytes;
    st.backward_overhead_bytes = own.backward_overhead_bytes;
    for (std::size_t o = 1; o < p.options.size(); ++o) st.options.push_back(p.options[o].cost);
    bc.stages.push_back(std::move(st));
    blocks.push_back({fw, bk.kind_of[ix(k)], static_cast<int>(p.options.size()), 0, 0});
  }
  if (auto v = validate(bc); !v)
    return error{status::solver_error,
                 "rockmate: its block chain is not valid (a bug in remat; please report it with "
                 "the graph): " +
                     v.message(),
                 {}};
  return bc;
}

/// What RK-Rotor is asked: the budget, rotor's slots and table limit, the deadline.
struct rk_rotor_request {
  std::string_view policy;
  bytes budget = 0;
  std::int64_t slots = 500;
  std::int64_t max_table_bytes = std::int64_t{2} << 30;
  double tolerance = 0.01;
  const deadline* limit = nullptr;
};

/// RK-Rotor on the block chain, its decisions assembled into the program. Near the minimum,
/// where no affordable discretisation plans, the fallback is the faster of the minimum-memory
/// schedules with the options and with store-all's only. A budget below the minimum names the
/// block that needs most on its own.
inline result<solution<chain_dp_details>> rk_rotor(const graph& g, const chain& bc,
                                                   const block_assembly& assembly, bool exact_fast,
                                                   const rk_rotor_request& rq) {
  const deadline& dl = *rq.limit;
  const assembly_target target{rq.policy, g, rq.budget, bc, assembly, exact_fast};
  std::optional<rotor_min_memory> exact;
  auto s = solve_discretized<rotor_dp>(
      {.policy = rq.policy,
       .problem = &bc,
       .budget = rq.budget,
       .slots = rq.slots,
       .max_table_bytes = rq.max_table_bytes,
       .tolerance = rq.tolerance,
       .costs = cost_sets::all,
       .limit = &dl,
       .progress = {},
       .table_cells =
           [](int n, double w) {
             return n * (n + 1) / 2.0 * std::max(w, rotor_min_memory::bytes_per_pair / 8);
           },
       .minimum = [&]() -> std::optional<bytes> {
         exact.emplace(exact_sizes(bc, cost_sets::all), dl);
         if (!exact->complete()) return std::nullopt;
         return bc.a(0) + (*exact)(1, bc.length());
       },
       .fallback = [&]() -> std::optional<decisions> {
         // The recurrence breaks ties by time sub-problem by sub-problem, which more options do
         // not make faster everywhere: store-all's options alone may give a faster schedule.
         decisions best = exact->schedule();
         const rotor_min_memory own(exact_sizes(bc), dl);
         if (own.complete() && bc.a(0) + own(1, bc.length()) <= rq.budget)
           if (decisions d = own.schedule(); d.time < best.time) best = std::move(d);
         return best;
       },
       .time_limit_advice = "raise time_limit, or use fewer slots"},
      target);
  if (s || s.code() != status::budget_too_small) return s;
  // The block that needs most on its own (its input, the graph's input and its leanest option's
  // F^all / B): what to look at when the minimum is too high.
  error e = s.err();
  const discrete_chain d = exact_sizes(bc, cost_sets::all);
  int worst = 1;
  bytes worst_need = -1;
  for (int l = 1; l <= bc.length(); ++l) {
    bytes need = std::numeric_limits<bytes>::max();
    for (const auto& o : d.options[ix(l)]) need = std::min(need, d.m_all(l, l, o));
    need += bc.a(l - 1) + (l > 1 ? bc.a(0) : 0);
    if (need > worst_need) worst = l, worst_need = need;
  }
  e.message = std::string(rq.policy) + ": the budget of " + format_bytes(rq.budget) +
              " is below the minimum of " + format_bytes(e.minimum_budget.value_or(0)) +
              " that its blocks' options allow for graph '" + g.name +
              "'; give a budget of at least " + std::to_string(e.minimum_budget.value_or(0)) +
              " bytes (" + bc.at(worst).name + " alone needs " + format_bytes(worst_need) +
              " with its leanest option)";
  return e;
}

}  // namespace remat::detail
