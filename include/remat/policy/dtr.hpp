#pragma once
// dtr: Dynamic Tensor Rematerialization [DTR21] as a policy: no plan ahead, only a budget. The
// graph's ops run in their order, and when an allocation would pass the budget the resident
// activation with the smallest heuristic score is evicted, evicted inputs remade on demand
// (policy/dtr/run.hpp). Its decisions are an ordinary program, replayed by the simulator like
// every plan, so its time and peak are predicted beside the planners' on the same problem. The
// heuristic is a template parameter: h_dtr (the paper's), h_size and h_lru (its baselines), or
// dtr_heuristic, the default, one of them chosen at run time (h_dtr unless set).
// docs/dtr.md.

#include <algorithm>
#include <string>
#include <string_view>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/dtr/run.hpp>
#include <remat/policy/solution.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

template <class Heuristic = dtr_heuristic>
struct dtr {
  static constexpr std::string_view name = "dtr";
  static constexpr std::string_view summary =
      "Dynamic Tensor Rematerialization: evicts at run time by a heuristic, no plan (graphs)";
  /// What the runtime would do, not a plan: a larger budget can give a slower program (its
  /// evictions change), so it stays out of the portfolios, whose answers must not get slower
  /// with more memory (docs/dtr.md).
  static constexpr bool in_portfolio = false;
  static constexpr bool monotone_in_budget = false;
  Heuristic heuristic{};

  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    return detail::program_of(solve_detailed(g, budget));
  }
  [[nodiscard]] result<solution<no_details>> solve_detailed(const graph& g, bytes budget) const {
    return detail::timed([&]() -> result<solution<no_details>> {
      if (auto ok = detail::check_request(name, g, budget); !ok) return ok.err();
      auto s = detail::dtr_run(g, budget, heuristic);
      if (!s) {
        if (s.code() != status::budget_too_small) return s.err();
        error e = s.err();
        const bytes least = minimum_budget(g);
        e.message += "; the smallest budget at which dtr (" +
                     std::string(heuristic_name(heuristic)) + ") runs is " + std::to_string(least) +
                     " bytes";
        e.minimum_budget = least;
        return e;
      }
      auto fin = detail::finish(name, g, budget, std::move(*s));
      if (!fin) return fin.err();
      solution<no_details> out;
      out.program = std::move(*fin);
      int runs = 0;
      for (const auto& i : out.program.ops) runs += i.is_compute() ? 1 : 0;
      out.optimal = runs == g.compute_count() && out.program.predicted_time <= g.ideal_time();
      out.notes.push_back(std::to_string(runs - g.compute_count()) + " ops run again (" +
                          std::string(heuristic_name(heuristic)) + ")");
      return out;
    });
  }

  /// The smallest budget at which dtr runs g, to the byte: a bisection between what the
  /// tightest op needs and every datum alive at once (where nothing is evicted). DTR is a
  /// heuristic: a budget above this one may still fail where its evictions strand an op; the
  /// answer is a budget at which it ran.
  [[nodiscard]] bytes minimum_budget(const graph& g) const {
    bytes hi = 0, most_scratch = 0;
    for (int d = 0; d < g.data_count(); ++d) hi += g.data(d).size;
    for (const auto& c : g.compute_nodes())
      most_scratch = std::max({most_scratch, c.overhead, c.fast_overhead});
    hi += most_scratch;
    bytes lo = 0;
    if (auto s = detail::dtr_run(g, 0, heuristic); !s && s.err().minimum_budget)
      lo = *s.err().minimum_budget;
    // Invariant: dtr runs at hi; not below lo.
    while (lo < hi) {
      const bytes mid = lo + (hi - lo) / 2;
      if (detail::dtr_run(g, mid, heuristic))
        hi = mid;
      else
        lo = mid + 1;
    }
    return hi;
  }
};

}  // namespace remat
