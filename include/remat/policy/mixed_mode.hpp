#pragma once
// mixed_mode: Mixed Mode [MixedMode] on heterogeneous chains. The stages are split into
// segments, each run planned (a static plan of a chain policy: rotor by default; no control-flow
// stage inside) or dynamic (what DTR does at run time, replayed: dtr by default), each with a
// share of the budget's slots; the split, the modes and the shares are Mixed Mode's DP
// (policy/mixed_mode/dp.hpp), exact or with the paper's accelerations (`search`).
//
// How the segments run together (docs/mixed-mode.md, "Running the segments"): each segment's
// program is the one its policy makes for the segment as a chain of its own (its input
// a_{first-1}, and after its last stage, unless that is the loss, a stage of no time and no
// memory whose backward yields the gradient the segment receives). Its ops before that chain's
// loss are its forward phase, the rest its backward phase; the whole program runs the forward
// phases in order, the last segment whole, then the backward phases in reverse. A segment holds
// at most its share all along, so the program's peak is at most the sum of the shares, the
// budget: the DP's additive memory. The simulator checks the whole program.
//
// The segment policies are template parameters (mixed_segment_policy): the planned one defaults
// to rotor's table over the whole chain (one DP gives every segment at every share), the dynamic
// one to the DTR replay with h_dtr.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/dtr/run.hpp>
#include <remat/policy/mixed_mode/dp.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/rotor_segments.hpp>
#include <remat/policy/solution.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

namespace detail {

/// A segment's program placed on the whole chain's graph: its forward phase (its ops before the
/// segment chain's loss) and its backward phase (after it).
struct placed_segment {
  std::vector<instruction> forward, backward;
};

/// Places a program over segment_chain(c, first, last)'s graph on c's graph (N stages): the
/// segment's nodes become the whole chain's, the added stage's ops are dropped (the gradient it
/// yields is already there). nullopt when the forward phase ends without a_last, which the next
/// segment reads.
inline std::optional<placed_segment> place_segment(const schedule& sub, int n, int first,
                                                   int last) {
  const int r = last - first + 1;  // the segment's own stages
  const bool tail = last < n;      // an added stage r + 1
  const training_layout sl{tail ? r + 1 : r}, wl{n};
  auto data = [&](int d) -> int {  // -1: the added stage's
    if (d == training_layout::input)
      return first == 1 ? training_layout::input : training_layout::activation(first - 2);
    if (d == training_layout::input_gradient)
      return first == 1 ? training_layout::input_gradient : training_layout::gradient(first - 2);
    const int k = (d - 2) / 3, kind = (d - 2) % 3;  // 0 activation, 1 gradient, 2 phantom
    if (k >= r) return -1;
    const int w = first - 1 + k;
    return kind == 0   ? training_layout::activation(w)
           : kind == 1 ? training_layout::gradient(w)
                       : training_layout::phantom(w);
  };
  auto compute = [&](int c) -> int {
    if (c == sl.loss()) return tail ? -1 : wl.loss();
    if (c < sl.loss()) return c < r ? wl.forward(first - 1 + c) : -1;
    const int k = 2 * sl.ops - c;  // backward(k)
    return k < r ? wl.backward(first - 1 + k) : -1;
  };
  placed_segment out;
  bool after_loss = false;
  bool last_alive = false;
  const int a_last = training_layout::activation(r - 1);
  for (const instruction& i : sub.ops) {
    if (i.is_compute() && i.node == sl.loss()) after_loss = true;
    if (!after_loss && i.is_compute() && i.node == sl.forward(r - 1)) last_alive = true;
    if (!after_loss && i.op == op_kind::free && i.node == a_last) last_alive = false;
    const int w = i.is_compute() ? compute(i.node) : data(i.node);
    if (w < 0) continue;
    instruction x = i;
    x.node = w;
    ((tail && after_loss) ? out.backward : out.forward).push_back(x);
  }
  if (tail && !last_alive) return std::nullopt;
  return out;
}

}  // namespace detail

/// DTR on Mixed Mode's dynamic segments: the replay (policy/dtr/run.hpp) of each segment chain at
/// each share; a share may run the program of a smaller one (the cost falls with the share).
template <class Heuristic = h_dtr>
struct dtr_segments {
  static constexpr std::string_view name = "dtr";
  Heuristic heuristic{};
  /// Seconds the runtime adds to each op it runs (dispatch, its bookkeeping): what makes eager
  /// mode slower than a plan that runs fused [MixedMode]. The DP weighs it; the program's
  /// predicted time is its ops' alone (the simulator's), and mixed_mode's details report the
  /// overhead of each segment.
  seconds overhead = 0;

  class table {
   public:
    /// The replay's time plus the runtime's overhead on each op it runs.
    [[nodiscard]] double cost(int first, int last, std::int64_t share) const {
      return cost_[at(first, last, share)];
    }
    [[nodiscard]] result<schedule> program(const chain& c, int first, int last,
                                           std::int64_t share) const {
      const auto g = build_graph(detail::segment_chain(c, first, last));
      if (!g) return g.err();
      return detail::dtr_run(*g, q_->bytes_of(from_[at(first, last, share)]), heuristic_);
    }

   private:
    friend struct dtr_segments;
    [[nodiscard]] std::size_t at(int first, int last, std::int64_t share) const {
      const auto pair = static_cast<std::size_t>((last - 1) * last / 2 + (first - 1));
      return pair * static_cast<std::size_t>(w_) + static_cast<std::size_t>(share);
    }
    std::optional<detail::segment_slots> q_;  // its d is not read
    Heuristic heuristic_;
    std::int64_t w_ = 0;
    std::vector<double> cost_;
    std::vector<std::int64_t> from_;  ///< the share whose program runs
  };

  [[nodiscard]] result<table> prepare(const chain& c, const detail::segment_slots& q,
                                      const detail::deadline& dl) const {
    table t;
    t.q_ = q;
    t.heuristic_ = heuristic;
    t.w_ = q.count + 1;
    const int n = c.length();
    const auto cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n + 1) / 2 *
                       static_cast<std::size_t>(t.w_);
    t.cost_.assign(cells, detail::mixed_inf);
    t.from_.assign(cells, 0);
    for (int last = 1; last <= n; ++last)
      for (int first = 1; first <= last; ++first) {
        const auto g = build_graph(detail::segment_chain(c, first, last));
        if (!g) return g.err();
        // Nothing run again: the ideal time, and each op once.
        const seconds floor = g->ideal_time() + overhead * (2 * (last - first + 1) + (last == n));
        double best = detail::mixed_inf;
        std::int64_t from = 0;
        for (std::int64_t s = 1; s < t.w_; ++s) {
          if (best > floor * (1 + 1e-12)) {
            const auto run = detail::dtr_run(*g, q.bytes_of(s), heuristic);
            const auto placed = run ? detail::place_segment(*run, n, first, last) : std::nullopt;
            if (placed) {
              std::size_t runs = 0;
              for (const auto* phase : {&placed->forward, &placed->backward})
                for (const instruction& i : *phase) runs += i.is_compute();
              const double v = run->predicted_time + overhead * static_cast<double>(runs);
              if (v < best) {
                best = v;
                from = s;
              }
            }
          }
          t.cost_[t.at(first, last, s)] = best;
          t.from_[t.at(first, last, s)] = from;
        }
        if (dl.passed())
          return detail::time_limit_reached("mixed_mode", dl, "replaying dtr on the segments",
                                            "raise time_limit, or use fewer slots");
      }
    return t;
  }
};

template <class Planned = rotor_segments, class Dynamic = dtr_segments<>>
struct mixed_mode {
  static constexpr std::string_view name = "mixed_mode";
  static constexpr std::string_view summary =
      "Mixed Mode: segments planned by rotor or run by DTR, split by a DP (chains with control "
      "flow)";
  /// Its dynamic segments are what the DTR runtime would do, not a plan, and its shares are
  /// whole slots of budget / slots bytes: a larger budget can give a slower program, so it
  /// stays out of the portfolios (docs/mixed-mode.md).
  static constexpr bool in_portfolio = false;
  static constexpr bool monotone_in_budget = false;
  /// remat::sweep plans it on chains up to this length: each solve replays DTR on every
  /// segment at every share.
  static constexpr int practical_stages = 40;
  static constexpr std::string_view complexity = "O(N^2 S) DTR replays";
  /// Whether remat::sweep plans it on c: only where a stage has control flow (elsewhere its plan
  /// is rotor's at fewer slots, or DTR's on the whole chain, both swept on their own).
  [[nodiscard]] static std::optional<std::string> left_out_of_sweep(const chain& c) {
    for (const auto& s : c.stages)
      if (s.control_flow) return std::nullopt;
    return std::string(
        "no stage has control flow (its plan would be rotor's or dtr's on the "
        "whole chain)");
  }

  /// The budget's shares: the DP is O(N^2 S b) exact (b: the drops of a segment's cost), and the
  /// dynamic segments replay DTR at each of the S shares.
  std::int64_t slots = 100;
  mixed_search search = mixed_search::exact;
  seconds time_limit = std::numeric_limits<double>::infinity();
  std::function<void(double)> progress = {};
  Planned planned{};
  Dynamic dynamic{};

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }

  [[nodiscard]] result<solution<mixed_mode_details>> solve_detailed(const chain& c,
                                                                    bytes budget) const {
    return detail::timed([&]() -> result<solution<mixed_mode_details>> {
      if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
      const detail::deadline dl(time_limit);
      const int n = c.length();
      auto at_budget = plan_at(c, budget, dl);
      if (!at_budget) return at_budget.err();
      const auto& [d, p, e, plan] = *at_budget;
      const detail::segment_slots q(d, budget);
      if (!plan.feasible()) {
        const bytes least = minimum_budget(c);
        const std::string what = "mixed_mode: no split of chain '" + c.name +
                                 "' into planned and dynamic segments fits " +
                                 format_bytes(budget) + " in shares of " +
                                 format_bytes(q.bytes_of(1));
        if (budget < least)
          return error{
              status::budget_too_small,
              what + "; the smallest budget it plans with is " + std::to_string(least) + " bytes",
              least};
        return error{status::infeasible,
                     what + ", though it plans with " + std::to_string(least) +
                         " bytes: DTR's evictions in a dynamic segment can strand an op at one "
                         "budget and not at a smaller one, and the shares are whole slots; give "
                         "more slots or another budget",
                     {}};
      }
      std::vector<detail::placed_segment> placed;
      solution<mixed_mode_details> out;
      out.details.slots = q.count;
      out.details.search = search;
      seconds total = 0, overhead = 0;
      for (const mixed_segment& sg : plan.segments) {
        const int first = sg.first + 1, last = sg.last;
        auto sub = sg.mode == segment_mode::planned ? p.program(c, first, last, sg.slots)
                                                    : e.program(c, first, last, sg.slots);
        if (!sub) return sub.err();
        auto at = detail::place_segment(*sub, n, first, last);
        if (!at)
          return error{status::solver_error,
                       "mixed_mode: the segment of stages " + std::to_string(first) + ".." +
                           std::to_string(last) +
                           " ends its forward phase without its output (a bug in remat; please "
                           "report it with the chain)",
                       {}};
        placed.push_back(std::move(*at));
        out.details.segments.push_back({first, last, sg.mode, q.bytes_of(sg.slots),
                                        sub->predicted_time, sg.cost - sub->predicted_time});
        total += sub->predicted_time;
        overhead += sg.cost - sub->predicted_time;
      }
      schedule whole;
      for (const auto& s : placed)
        whole.ops.insert(whole.ops.end(), s.forward.begin(), s.forward.end());
      for (auto s = placed.rbegin(); s != placed.rend(); ++s)
        whole.ops.insert(whole.ops.end(), s->backward.begin(), s->backward.end());
      whole.predicted_time = total;
      auto fin = detail::finish(name, detail::chain_graph(c), budget, std::move(whole));
      if (!fin) return fin.err();
      out.program = std::move(*fin);
      out.optimal = search == mixed_search::exact && d.exact;
      int dynamic_count = 0;
      for (const auto& s : out.details.segments) dynamic_count += s.mode == segment_mode::dynamic;
      out.notes.push_back(std::to_string(out.details.segments.size()) + " segments, " +
                          std::to_string(dynamic_count) + " dynamic (" +
                          std::string(Dynamic::name) + "), the others planned (" +
                          std::string(Planned::name) + ")");
      if (overhead > 0)
        out.notes.push_back("the DP also counted " + std::to_string(overhead) +
                            " s of the dynamic runtime's overhead, not in the predicted time");
      return out;
    });
  }

  /// The smallest budget (bytes) mixed_mode plans c with, by bisection between none and room
  /// for every datum at once (where one dynamic segment evicts nothing). Its dynamic segments
  /// are a heuristic's and its shares whole slots, so a budget above this one may still find no
  /// split; the answer is a budget at which it planned.
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    if (!detail::check_request(c, 0)) return 0;
    const graph g = detail::chain_graph(c);
    bytes hi = 0, scratch = 0;
    for (int x = 0; x < g.data_count(); ++x) hi += g.data(x).size;
    for (const auto& op : g.compute_nodes())
      scratch = std::max({scratch, op.overhead, op.fast_overhead});
    hi += scratch;
    const detail::deadline none(0);
    bytes lo = 0;
    // Invariant: it plans at hi; not below lo.
    while (lo < hi) {
      const bytes mid = lo + (hi - lo) / 2;
      const auto r = plan_at(c, mid, none);
      if (r && r->plan.feasible())
        hi = mid;
      else
        lo = mid + 1;
    }
    return hi;
  }

 private:
  /// The tables and the DP's plan at a budget (its cost infinite where no split fits).
  struct planned_at {
    detail::discrete_chain d;
    typename Planned::table planned;
    typename Dynamic::table dynamic;
    mixed_plan plan;
  };
  [[nodiscard]] result<planned_at> plan_at(const chain& c, bytes budget,
                                           const detail::deadline& dl) const {
    if (slots < 1)
      return error{status::invalid_problem,
                   "mixed_mode: slots is " + std::to_string(slots) +
                       "; the budget is split into slots >= 1 shares",
                   {}};
    const int n = c.length();
    detail::discrete_chain d = detail::discretize(c, budget, slots);
    const detail::segment_slots q(d, budget);
    auto p = planned.prepare(c, q, dl);
    if (!p) return p.err();
    auto e = dynamic.prepare(c, q, dl);
    if (!e) return e.err();
    std::vector<int> cf(static_cast<std::size_t>(n + 1), 0);  // control-flow stages among 1..l
    for (int l = 1; l <= n; ++l)
      cf[static_cast<std::size_t>(l)] =
          cf[static_cast<std::size_t>(l - 1)] + (c.at(l).control_flow ? 1 : 0);
    const segment_costs costs{n, &*p, &*e, &cf};
    auto plan = mixed_dp(costs, q.count, {.search = search, .progress = progress}, dl);
    if (!plan)
      return detail::time_limit_reached(name, dl, "in the DP",
                                        "raise time_limit, use fewer slots, or search dc_ternary");
    return planned_at{std::move(d), std::move(*p), std::move(*e), std::move(*plan)};
  }

  /// The DP's F over the chain's stages (op l is stage l + 1): no control flow in a planned
  /// segment.
  template <class P, class E>
  struct segment_costs_of {
    int n;
    const P* planned;
    const E* dynamic;
    const std::vector<int>* cf;
    [[nodiscard]] int size() const { return n; }
    [[nodiscard]] double cost(segment_mode m, int j, int i, std::int64_t share) const {
      if (m == segment_mode::dynamic) return dynamic->cost(j + 1, i, share);
      if ((*cf)[static_cast<std::size_t>(i)] != (*cf)[static_cast<std::size_t>(j)])
        return detail::mixed_inf;
      return planned->cost(j + 1, i, share);
    }
  };
  using segment_costs = segment_costs_of<typename Planned::table, typename Dynamic::table>;
};

}  // namespace remat
