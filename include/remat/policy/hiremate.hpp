#pragma once
// hiremate: hierarchical planning of a training graph that is not a sequence [Zhao24, ch. 3]:
//   1. the partition (hiremate/partition.hpp by default, a template parameter): clusters of
//      forward ops nested in levels, each at most a few dozen nodes, the top the whole graph;
//   2. level by level from the bottom, each cluster's H-graph (hiremate/hgraph.hpp: its ops, and
//      its sub-clusters as a forward and a backward with their options as run variants) planned
//      by the H-ILP (hiremate/hilp.hpp) at rockmate's grid of (M_peak, M_save) budgets, each plan
//      lowered onto the cluster's ops an option of the cluster (rockmate/options.hpp: identical
//      clusters solved once, the Pareto set, time limits, threads);
//   3. the top's H-graph planned by the H-ILP at the budget, lowered onto the whole graph and
//      checked by the simulator like every policy's program.
// docs/hiremate.md has the decisions where the thesis leaves them open.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/checkmate/bounds.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/hiremate/hgraph.hpp>
#include <remat/policy/hiremate/hilp.hpp>
#include <remat/policy/hiremate/partition.hpp>
#include <remat/policy/rockmate/options.hpp>
#include <remat/policy/solution.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>

namespace remat {

/// A hiremate solution.
using hiremate_plan = solution<hiremate_details>;

/// Where a hiremate solve is: at `level` of `levels` (the top is the last), the options of
/// `done` of the level's `kinds` kinds of cluster are made and `solves_done` of its `solves`
/// grid points settled.
struct hiremate_progress {
  int level = 0, levels = 0;
  int done = 0, kinds = 0;
  int solves_done = 0, solves = 0;
  seconds elapsed = 0;
};

/// The thesis' partitioner, H-Partition [Zhao24, Alg. 7], with its knobs.
struct h_partition {
  hiremate_limits limits{};
  [[nodiscard]] result<hiremate_partition> operator()(const graph& g) const {
    return hiremate_partition_of(g, limits);
  }
};

namespace detail {

/// The inner of make_block_options at one level: kind r's grid points planned by the H-ILP over
/// the representative cluster's H-graph.
template <class Backend>
struct hilp_inner {
  static constexpr std::string_view name = "hiremate's H-ILP";
  const std::vector<hiremate_hgraph>* hgraphs = nullptr;
  /// Per kind: its H-ILPs' memory unit reference (the block's store-all peak), made once.
  const std::vector<bytes>* unit_references = nullptr;
  const Backend* backend = nullptr;
  hilp_limits limits;
  double time_limit = std::numeric_limits<double>::infinity();  // set per solve by the grid
  std::int64_t node_limit = 0;
  struct shared {
    std::mutex m;
    // Per kind: seconds, H-ILP solves, plans not proven optimal (stopped at the node or time
    // limit), solves stopped at the time limit (with a plan or none).
    std::vector<double> seconds;
    std::vector<int> solves, unproven, time_limited;
  };
  std::shared_ptr<shared> stats;

  [[nodiscard]] result<schedule> solve_block(int kind, const graph& limited, bytes peak) const {
    hilp_limits l = limits;
    l.time_limit = std::min(l.time_limit, time_limit);
    if (node_limit > 0) l.node_limit = node_limit;
    l.unit_reference = (*unit_references)[ix(kind)];
    const auto t0 = std::chrono::steady_clock::now();
    auto r = solve_hgraph((*hgraphs)[ix(kind)], limited, peak, *backend, l);
    {
      std::lock_guard lock(stats->m);
      stats->seconds[ix(kind)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++stats->solves[ix(kind)];
      if (r && !r->optimal) ++stats->unproven[ix(kind)];
      if (r ? r->time_limited : r.code() == status::time_limit) ++stats->time_limited[ix(kind)];
    }
    if (!r) return r.err();
    return std::move(r->program);
  }
};

/// A cluster's programs, made on another cluster of its kind, on its own nodes.
inline block_programs between_blocks(const graph& g, const block_graph& from, const block_graph& to,
                                     block_programs p) {
  p.fast_forward = between_blocks(g, from, to, p.fast_forward);
  for (auto& o : p.options) {
    o.forward = between_blocks(g, from, to, o.forward);
    o.backward = between_blocks(g, from, to, o.backward);
  }
  return p;
}

}  // namespace detail

/// HiRemate with the MILP backend Backend (milp::cbc, milp::lpsolve) for its H-ILPs and the
/// partitioner Partitioner (a callable graph -> result<hiremate_partition>; the thesis' by
/// default).
template <milp::MilpBackend Backend, class Partitioner = h_partition>
struct hiremate {
  static constexpr std::string_view name = "hiremate";
  static constexpr std::string_view summary =
      "HiRemate: the graph cut into nested clusters, each planned by an H-ILP over its parts' "
      "options";
  /// Not in the catalogue's portfolio: its H-ILPs take minutes on graphs that rockmate plans in
  /// seconds; ask for it by name.
  static constexpr bool in_portfolio = false;

  Partitioner partitioner{};
  /// The budget grid of each cluster's H-ILPs ([Zhao24, §3.4]: the thesis' implementation uses
  /// 4 peaks and 6 saves per peak).
  int peak_budgets = 4;
  int save_budgets = 6;
  /// The most options, all sub-clusters together, in one H-graph (N_o); a sub-cluster gets a
  /// share by its ops, at least one, chosen spread over its peaks.
  int options_per_hgraph = 100;
  /// Time limit of each H-ILP solve (a cluster's grid point, the top); a solve stopped by it
  /// keeps its best plan. Not finite = none.
  seconds ilp_time_limit = 60;
  /// Branch-and-bound nodes of each H-ILP solve below the top (0 = none): a limit of work, so
  /// that the options are the same on every run and machine.
  std::int64_t node_limit = 100;
  /// The relative gap at which each H-ILP stops (0 proves optimality).
  double relative_gap = 0;
  /// Time limit of the whole solve; not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// Threads for the solves of a level (independent); 0 = the hardware's. CBC's solves are
  /// serialised (docs/milp.md): lp_solve's run side by side.
  int threads = 0;
  /// Called as each grid point's solve is settled, and once at the top.
  std::function<void(const hiremate_progress&)> progress = {};
  Backend backend = {};

  [[nodiscard]] result<schedule> solve(const graph& g, bytes budget) const {
    return detail::program_of(solve_detailed(g, budget));
  }
  [[nodiscard]] result<hiremate_plan> solve_detailed(const graph& g, bytes budget) const {
    return detail::timed([&] { return plan(g, budget); });
  }

 private:
  [[nodiscard]] result<hiremate_plan> plan(const graph& g, bytes budget) const;
};

template <milp::MilpBackend Backend, class Partitioner>
result<hiremate_plan> hiremate<Backend, Partitioner>::plan(const graph& g, bytes budget) const {
  using detail::ix;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  if (auto ok = detail::check_request(name, g, budget); !ok) return ok.err();
  if (peak_budgets < 1 || save_budgets < 1 || options_per_hgraph < 1)
    return error{status::invalid_problem,
                 "hiremate: peak_budgets, save_budgets and options_per_hgraph are " +
                     std::to_string(peak_budgets) + ", " + std::to_string(save_budgets) + " and " +
                     std::to_string(options_per_hgraph) +
                     "; give at least 1 each (the thesis uses 4, 6 and 100)",
                 {}};
  if (!Backend::available())
    return error{status::solver_error,
                 "hiremate: the MILP backend " + std::string(Backend::name) +
                     " is not available in this build",
                 {}};
  if (auto ok = detail::check_threads(name, threads); !ok) return ok.err();
  const detail::deadline dl(time_limit);
  auto p = partitioner(g);
  if (!p) return p.err();
  const auto& clusters = p->clusters;
  const int top = static_cast<int>(clusters.size()) - 1;
  hiremate_plan out;
  out.details.levels = p->levels();
  out.details.over_limit = p->over_limit;
  for (const auto& c : clusters)
    out.details.clusters.push_back({.forwards = c.forwards, .level = c.level});
  if (!p->over_limit.empty())
    out.notes.push_back("the partition's top graph is over its size limit (" + p->over_limit +
                        "): its H-ILP is larger than the limits intend");

  // Plain training fits: nothing to plan.
  if (schedule all{store_all_program(g), g.ideal_time(), 0};
      sim::simulate(g, all, {.record_timeline = false}).peak <= budget) {
    auto s = detail::finish(name, g, budget, std::move(all));
    if (!s) return s.err();
    out.program = std::move(*s);
    out.optimal = true;
    out.notes.push_back("every activation fits the budget: plain training, nothing recomputed");
    return out;
  }

  // The H-graph of cluster c, its sub-clusters' options cut to their share of the H-graph's.
  std::vector<detail::block_programs> programs(clusters.size());
  auto hgraph = [&](int c) {
    const hiremate_cluster& cl = clusters[ix(c)];
    std::vector<detail::block_programs> sub(clusters.size());
    for (const hiremate_item& it : cl.items) {
      if (!it.is_cluster) continue;
      auto& bp = sub[ix(it.index)] = programs[ix(it.index)];
      const auto share = static_cast<double>(options_per_hgraph) *
                         static_cast<double>(clusters[ix(it.index)].forwards.size()) /
                         static_cast<double>(cl.forwards.size());
      detail::select_options(bp.options, std::max(1, static_cast<int>(share)));
    }
    return hiremate_hgraph_of(g, *p, c, sub);
  };
  const detail::hilp_limits base{ilp_time_limit, node_limit, relative_gap, 1, 8, 0};

  // Below the top, level by level: each kind of cluster's options at the grid.
  for (int level = 1; level < p->levels(); ++level) {
    std::vector<int> at;  // the clusters of this level
    std::vector<std::vector<int>> cut;
    for (int c = 0; c < top; ++c)
      if (clusters[ix(c)].level == level) {
        at.push_back(c);
        cut.push_back(clusters[ix(c)].forwards);
      }
    if (at.empty()) continue;
    auto bk = detail::find_block_kinds(g, std::move(cut));
    if (!bk) return bk.err();
    std::vector<hiremate_hgraph> hgraphs;
    for (int r = 0; r < bk->kinds(); ++r) {
      auto h = hgraph(at[ix(bk->representative[ix(r)])]);
      if (!h) return h.err();
      hgraphs.push_back(std::move(*h));
    }
    detail::hilp_inner<Backend> inner;
    std::vector<bytes> references;
    for (const auto& h : hgraphs) references.push_back(peak_of_store_all(h.block.g));
    inner.hgraphs = &hgraphs;
    inner.unit_references = &references;
    inner.backend = &backend;
    inner.limits = base;
    inner.limits.rounding_slack = true;  // the grid starts at the block's store-all peak
    inner.stats = std::make_shared<typename detail::hilp_inner<Backend>::shared>();
    inner.stats->seconds.assign(ix(bk->kinds()), 0.0);
    for (auto* v : {&inner.stats->solves, &inner.stats->unproven, &inner.stats->time_limited})
      v->assign(ix(bk->kinds()), 0);
    const int levels = p->levels();
    const std::string limits_text = "node_limit " + std::to_string(node_limit) +
                                    ", ilp_time_limit " + format_seconds(ilp_time_limit);
    std::function<void(const rockmate_progress&)> report;
    if (progress)
      report = [&, level, levels](const rockmate_progress& r) {
        progress({level, levels, r.done, r.kinds, r.solves_done, r.solves, r.elapsed});
      };
    auto made = detail::make_block_options(g, *bk, inner, inner,
                                           {.peak_budgets = peak_budgets,
                                            .save_budgets = save_budgets,
                                            .time_limit = time_limit,
                                            .threads = threads,
                                            .reuse_looser = true,
                                            .limit = &dl,
                                            .limits_text = limits_text,
                                            .block_name =
                                                [&](int k) {
                                                  return "cluster " + std::to_string(at[ix(k)]) +
                                                         " (level " + std::to_string(level) + ")";
                                                },
                                            .progress = report,
                                            .elapsed = elapsed},
                                           out.notes);
    if (!made) {
      error e = made.err();
      e.message = "hiremate: level " + std::to_string(level) + " of " + std::to_string(levels) +
                  ": " + e.message;
      return e;
    }
    for (std::size_t k = 0; k < at.size(); ++k) {
      const int r = bk->kind_of[k];
      const int rep = bk->representative[ix(r)];
      programs[ix(at[k])] =
          rep == static_cast<int>(k)
              ? (*made)[ix(r)]
              : detail::between_blocks(g, bk->of_kind(r), bk->blocks[k], (*made)[ix(r)]);
      auto& sum = out.details.clusters[ix(at[k])];
      sum.options = static_cast<int>(programs[ix(at[k])].options.size());
      if (rep == static_cast<int>(k)) {
        sum.solve_seconds = inner.stats->seconds[ix(r)];
        sum.solves = inner.stats->solves[ix(r)];
        sum.unproven = inner.stats->unproven[ix(r)];
      } else {
        sum.same_as = at[ix(rep)];
      }
    }
    // What the level's limits cut short: said, not hidden.
    int solves = 0, unproven = 0, timed = 0;
    for (int r = 0; r < bk->kinds(); ++r) {
      solves += inner.stats->solves[ix(r)];
      unproven += inner.stats->unproven[ix(r)];
      timed += inner.stats->time_limited[ix(r)];
    }
    if (unproven > 0 || timed > 0)
      out.notes.push_back("level " + std::to_string(level) + ": of its " + std::to_string(solves) +
                          " H-ILP solves, " + std::to_string(unproven) +
                          " stopped at a limit with a plan not proven optimal (" + limits_text +
                          "), kept as options, and " + std::to_string(timed) +
                          " stopped at ilp_time_limit (those with no plan added no option)");
  }
  out.details.options_time = elapsed();

  // The top at the budget.
  const auto top_start = clock::now();
  auto h = hgraph(top);
  if (!h) return h.err();
  if (progress) progress({p->levels(), p->levels(), 0, 1, 0, 1, elapsed()});
  auto top_limits = base;
  top_limits.node_limit = 0;
  top_limits.warm_start = true;
  top_limits.unit_reference = peak_of_store_all(g);
  auto plan_at = [&](bytes b) {
    auto l = top_limits;
    l.time_limit = std::min(l.time_limit, std::max(1e-3, time_limit - dl.elapsed()));
    return detail::solve_hgraph(*h, h->block.g, b, backend, l);
  };
  auto top_plan = plan_at(budget);
  out.details.top_time = std::chrono::duration<double>(clock::now() - top_start).count();
  out.details.clusters.back().solve_seconds = out.details.top_time;
  if (progress) progress({p->levels(), p->levels(), 1, 1, 1, 1, elapsed()});
  const bool timed_out = !top_plan && top_plan.code() == status::time_limit;
  if (!top_plan && (top_plan.code() == status::infeasible || timed_out) && !dl.passed()) {
    // The smallest budget the top plans, within 1 %: a bisection between the memory floor
    // (nothing plans below it) and store-all's peak (plain training), each step a budget
    // planned; a step whose H-ILP had no plan in its time counts as one without a plan, so that
    // the minimum is a budget planned. A plan at or below the budget fits it: the answer, where
    // the H-ILP at the budget itself had none (its plan, lowered, peaked over the budget, and
    // lower it had none; or it found none in its time, and a smaller H-ILP did).
    bytes lo = detail::memory_floor(g);
    bytes hi = peak_of_store_all(g);
    std::optional<detail::hilp_plan> at_hi;
    while (hi - lo > std::max<bytes>(1, hi / 100) && !dl.passed()) {
      const bytes mid = lo + (hi - lo) / 2;
      auto m = plan_at(mid);
      if (m) {  // at mid itself (the H-ILP may not find this plan at a lower budget)
        hi = mid;
        at_hi = std::move(*m);
      } else if (m.code() == status::infeasible || m.code() == status::time_limit) {
        lo = mid + 1;
      } else {
        break;
      }
    }
    if ((!at_hi || hi > budget) && timed_out)
      return error{status::time_limit,
                   "hiremate: the top's H-ILP found no plan of graph '" + g.name + "' in " +
                       std::to_string(budget) + " bytes within its time limit (" +
                       top_plan.err().message +
                       "); the smallest budget hiremate planned in its time, within 1 %, is " +
                       std::to_string(hi) + " bytes: raise ilp_time_limit, or the budget",
                   hi};
    if (!at_hi || hi > budget)
      return error{status::budget_too_small,
                   "hiremate: no plan of graph '" + g.name + "' fits in " + std::to_string(budget) +
                       " bytes (" + top_plan.err().message +
                       "); the smallest budget hiremate plans, within 1 %, is " +
                       std::to_string(hi) + " bytes",
                   hi};
    out.notes.push_back("the top's H-ILP had no plan that fits " + std::to_string(budget) +
                        (timed_out ? " bytes in its time (" : " bytes once lowered (") +
                        top_plan.err().message + "); the plan is its plan at " +
                        std::to_string(hi) + " bytes");
    top_plan = std::move(*at_hi);
  }
  if (!top_plan) {
    error e = top_plan.err();
    e.message = "hiremate: the top's H-ILP: " + e.message;
    return e;
  }
  out.details.tightened = top_plan->tightened;
  auto percent = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %%", 100 * x);
    return std::string(buf);
  };
  out.details.top_optimal = top_plan->optimal;
  out.details.top_gap = top_plan->gap;
  out.details.top_from_start = top_plan->from_start;
  if (top_plan->from_start)
    out.notes.push_back(
        "the top's plan is its start (cheap storage patterns of the top's H-graph and a local "
        "search): its H-ILP found no faster plan that fits in its time (raise ilp_time_limit)");
  else if (!top_plan->optimal)
    out.notes.push_back(
        "the top's H-ILP stopped at " +
        std::string(top_plan->time_limited ? "its time limit" : "a limit") +
        " before proving its plan optimal: the H-ILP's objective is within " +
        (std::isfinite(top_plan->gap) ? percent(top_plan->gap) : std::string("no proven bound")) +
        " of its bound (raise ilp_time_limit to close the gap)");
  // The option each sub-cluster of the top ran with (its first run that is not a fast-forward).
  for (const hiremate_run& r : top_plan->runs) {
    if (!r.ins.is_compute()) continue;
    const int n = r.ins.node;
    const int it = h->item_of[ix(n)];
    if (it < 0 || h->is_backward[ix(n)] || h->compute_in_block[ix(n)] >= 0) continue;
    const hiremate_item& item = clusters.back().items[ix(it)];
    auto& sum = out.details.clusters[ix(item.index)];
    if (sum.chosen < 0 && r.variant < static_cast<int>(h->programs[ix(it)].options.size()))
      sum.chosen = r.variant;
  }
  schedule s{detail::to_parent(h->block, top_plan->program.ops), top_plan->program.predicted_time,
             0};
  auto fin = detail::finish(name, g, budget, std::move(s));
  if (!fin) return fin.err();
  out.program = std::move(*fin);
  out.optimal = out.program.predicted_time <= g.ideal_time();
  return out;
}

}  // namespace remat
