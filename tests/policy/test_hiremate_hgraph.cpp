// H-graphs (policy/hiremate/hgraph.hpp): each cluster of a partition of GPT-2, its sub-clusters
// given their store-all option, becomes a valid training graph whose every node has its run
// variants; the H-graph's own store-all program, lowered onto the cluster's block graph, is a
// valid program there at the block's ideal time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/hiremate/hgraph.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>
#include <remat/zoo/gpt2.hpp>
#include <remat/zoo/unet.hpp>

#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
#include <remat/policy/hiremate/hilp.hpp>
#endif

using namespace remat;

namespace {

/// Cluster k's programs with its store-all option alone (as rockmate makes option 0).
detail::block_programs store_all_programs(const graph& g, const hiremate_cluster& c) {
  const block_graph b = extract_block(g, c.forwards).value();
  const auto io = detail::interface_of(b);
  detail::block_programs p;
  detail::make_fast_forward(b, io, p);
  auto o =
      detail::make_option(b, io, schedule{store_all_program(b.g), 0, 0}, detail::releasable(b, g));
  REQUIRE(o);
  p.options.push_back(std::move(*o));
  return p;
}

/// A program of the H-graph: the forwards in order, each sub-cluster fast-forwarded (no
/// phantom), the loss, then per item in reverse its backward, a sub-cluster's forward run again
/// in its first option just before it (its outputs freed first where alive); every datum freed
/// after its last use in that sequence. With `keep`: each sub-cluster's forward in its first
/// option (its phantom kept), and run again before its backward as a fast-forward, which remakes
/// its outputs while its phantom holds what the option kept.
std::vector<hiremate_run> recompute_program(const hiremate_hgraph& h, bool keep = false) {
  const graph& g = h.g;
  std::vector<hiremate_run> seq;  // the runs, without frees
  const auto ix = [](int i) { return static_cast<std::size_t>(i); };
  const auto fast = [&](int n) { return static_cast<int>(h.variants[ix(n)].size()) - 1; };
  // A sub-cluster runs again unless it makes the block's protected outputs (never freed).
  auto again = [&](int f) {
    if (f < 0 || h.compute_in_block[ix(f)] >= 0 || h.item_of[ix(f)] < 0) return false;
    for (int d : g.outputs(f))
      if (g.data(d).is_protected) return false;
    return true;
  };
  for (int n = 0; n < g.compute_count(); ++n) {
    if (g.compute(n).kind != compute_kind::backward) {
      seq.push_back({instruction::compute(n), again(n) && !keep ? fast(n) : 0});
      continue;
    }
    if (again(g.forward_of(n)))
      seq.push_back({instruction::compute(g.forward_of(n)), keep ? fast(g.forward_of(n)) : 0});
    seq.push_back({instruction::compute(n), 0});
  }
  // Last use of each datum, by position in seq (what a run reads or makes).
  std::vector<int> last(ix(g.data_count()), -1);
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const int n = seq[i].ins.node;
    for (int d : g.inputs(n)) last[ix(d)] = static_cast<int>(i);
    for (int d : g.outputs(n)) last[ix(d)] = static_cast<int>(i);
  }
  std::vector<hiremate_run> out;
  std::vector<char> alive(ix(g.data_count()), 0);
  for (int d = 0; d < g.data_count(); ++d) alive[ix(d)] = g.is_source(d) ? 1 : 0;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const int n = seq[i].ins.node;
    const auto& v = h.variants[ix(n)][ix(seq[i].variant)];
    for (std::size_t q = 0; q < g.outputs(n).size(); ++q) {
      const int d = g.outputs(n)[q];
      if (!v.makes[q]) continue;
      if (alive[ix(d)] && g.data(d).kind != data_kind::gradient) {
        out.push_back({instruction::free(d), 0});  // made again
        alive[ix(d)] = 0;
      }
    }
    out.push_back(seq[i]);
    for (std::size_t q = 0; q < g.outputs(n).size(); ++q)
      if (v.makes[q]) alive[ix(g.outputs(n)[q])] = 1;
    for (int d = 0; d < g.data_count(); ++d)
      if (alive[ix(d)] && last[ix(d)] == static_cast<int>(i) && !g.data(d).is_protected) {
        out.push_back({instruction::free(d), 0});
        alive[ix(d)] = 0;
      }
  }
  return out;
}

/// Each cluster of p with sub-clusters, bottom-up, its H-graph with each sub-cluster given its
/// store-all option: f(k, h).
template <class F>
void for_each_hgraph(const graph& g, const hiremate_partition& p, F f) {
  std::vector<detail::block_programs> programs(p.clusters.size());
  for (std::size_t k = 0; k < p.clusters.size(); ++k) {
    const hiremate_cluster& c = p.clusters[k];
    if (k + 1 < p.clusters.size()) programs[k] = store_all_programs(g, c);
    if (std::ranges::none_of(c.items, [](const hiremate_item& it) { return it.is_cluster; }))
      continue;
    INFO("cluster " << k << " of " << p.clusters.size());
    const auto h = hiremate_hgraph_of(g, p, static_cast<int>(k), programs);
    REQUIRE_MESSAGE(h, h.message());
    f(*h);
  }
}

}  // namespace

TEST_CASE("hiremate H-graphs: valid graphs, and the store-all program lowered at the ideal time") {
  const auto f = zoo::gpt2({.layers = 2}, zoo::devices::rtx3060());
  REQUIRE(f);
  const graph g = build_graph(*f).value();
  const auto p = hiremate_partition_of(g, {.lower = 4, .top = 6});
  REQUIRE(p);
  REQUIRE(p->levels() >= 3);
  int checked = 0, made_again = 0;
  for_each_hgraph(g, *p, [&](const hiremate_hgraph& hg) {
    const hiremate_hgraph* h = &hg;
    CHECK(validate(h->g).ok());
    REQUIRE(h->variants.size() == static_cast<std::size_t>(h->g.compute_count()));
    int sub_nodes = 0;
    for (int n = 0; n < h->g.compute_count(); ++n) {
      const auto& vs = h->variants[static_cast<std::size_t>(n)];
      REQUIRE_FALSE(vs.empty());
      for (const auto& v : vs) {
        CHECK(v.makes.size() == h->g.outputs(n).size());
        CHECK(v.reads.size() == h->g.inputs(n).size());
      }
      if (h->compute_in_block[static_cast<std::size_t>(n)] < 0 &&
          h->item_of[static_cast<std::size_t>(n)] >= 0) {
        ++sub_nodes;
        // F_j: its option, then the fast-forward; B_j: its option.
        CHECK(vs.size() == (h->is_backward[static_cast<std::size_t>(n)] ? 1U : 2U));
      }
    }
    CHECK(sub_nodes > 0);
    // Fewer nodes than the block graph: the sub-clusters' insides are gone.
    CHECK(h->g.compute_count() < h->block.g.compute_count());
    // The H-graph's store-all program, each sub-cluster in its store-all option.
    std::vector<hiremate_run> runs;
    for (const instruction& i : store_all_program(h->g)) runs.push_back({i, 0});
    const std::vector<instruction> low = lower(*h, runs);
    const auto r = sim::simulate(h->block.g, schedule{low, 0, 0});
    INFO((r.first_violation ? r.first_violation->message : std::string()));
    CHECK(r.valid);
    CHECK(r.makespan == doctest::Approx(h->block.g.ideal_time()));
    // Each sub-cluster fast-forwarded, then run again in its option before its backward: valid,
    // longer by the fast-forwards.
    seconds fast = 0;
    for (const auto& run : recompute_program(*h))
      if (run.ins.is_compute() &&
          run.variant ==
              static_cast<int>(h->variants[static_cast<std::size_t>(run.ins.node)].size()) - 1 &&
          h->compute_in_block[static_cast<std::size_t>(run.ins.node)] < 0 &&
          h->item_of[static_cast<std::size_t>(run.ins.node)] >= 0 &&
          !h->is_backward[static_cast<std::size_t>(run.ins.node)])
        fast += h->programs[static_cast<std::size_t>(
                                h->item_of[static_cast<std::size_t>(run.ins.node)])]
                    .fast_time;
    const auto again = sim::simulate(h->block.g, schedule{lower(*h, recompute_program(*h)), 0, 0});
    INFO((again.first_violation ? again.first_violation->message : std::string()));
    CHECK(again.valid);
    CHECK(again.makespan == doctest::Approx(h->block.g.ideal_time() + fast));
    made_again += fast > 0;
    // The phantom kept and the forward fast-forwarded before the backward: lowered, the
    // fast-forward remakes only what the option did not keep (it used to recompute the kept
    // data, already in memory: an invalid program), and frees none of what B_j reads.
    const auto kept =
        sim::simulate(h->block.g, schedule{lower(*h, recompute_program(*h, true)), 0, 0});
    INFO((kept.first_violation ? kept.first_violation->message : std::string()));
    CHECK(kept.valid);
    CHECK(kept.makespan >= h->block.g.ideal_time());
    CHECK(kept.makespan <= again.makespan + 1e-12);
    ++checked;
  });
  CHECK(checked >= 2);
  CHECK(made_again >= 2);
}

#if defined(REMAT_HAS_CBC)
TEST_CASE("hiremate H-graphs: checkmate's MILP over their variants, lowered, as predicted") {
  // The MILP over an H-graph's variants with its option phantoms exclusive, solved, extracted
  // with each run's variant and lowered onto the block graph: a valid program whose time is the
  // MILP's; with memory for everything, the block's ideal time. (Its peak is not yet the
  // MILP's: the H-ILP's correction terms are to come.)
  const auto f = zoo::gpt2({.layers = 2}, zoo::devices::rtx3060());
  REQUIRE(f);
  const graph g = build_graph(*f).value();
  const auto p = hiremate_partition_of(g, {.lower = 4, .top = 6});
  REQUIRE(p);
  int solved = 0, tighter = 0;
  for_each_hgraph(g, *p, [&](const hiremate_hgraph& hg) {
    const hiremate_hgraph* h = &hg;
    std::vector<std::vector<int>> exclusive;
    for (const auto& ph : h->option_phantoms)
      if (!ph.empty()) exclusive.push_back(ph);
    const bytes all = peak_of_store_all(h->block.g);
    for (const double share : {2.0, 0.8}) {
      const bytes budget = static_cast<bytes>(share * static_cast<double>(all));
      const detail::checkmate_formulation f0;
      auto b = f0.build(h->g, h->variants, exclusive, budget, false,
                        std::chrono::steady_clock::time_point::max());
      REQUIRE(b);
      const auto sol = milp::cbc{}.solve(b->m, {.time_limit = 60});
      if (!sol) {
        CHECK(share < 1);  // plenty of memory always has a plan
        continue;
      }
      auto runs = f0.extract_runs(h->g, *b, *sol);
      REQUIRE(runs);
      const auto rep = sim::simulate(h->block.g, schedule{lower(*h, *runs), 0, 0});
      INFO((rep.first_violation ? rep.first_violation->message : std::string()));
      CHECK(rep.valid);
      CHECK(rep.makespan == doctest::Approx(sol->objective * b->time_scale));
      if (share > 1) CHECK(rep.makespan == doctest::Approx(h->block.g.ideal_time()));
      if (share < 1) ++tighter;
      ++solved;
    }
  });
  CHECK(solved >= 2);
  MESSAGE(tighter << " solves below store-all's peak");
}
#endif

#if defined(REMAT_HAS_CBC)
TEST_CASE("hiremate H-graphs: the H-ILP's starts lower validly and are the MILP's points") {
  // On GPT-2 (the loss inside a sub-cluster, whose option runs once) and the U-Net (skips whose
  // gradients a sub-cluster's backward adds to after others did), each sub-cluster with its
  // store-all option: every start lowers to a valid program (hgraph_starts errs otherwise), the
  // fastest is store-all at the block's ideal time, and the MILP with sizes rounded up takes
  // every start as a point (start_values checks every row).
  for (const bool unet : {false, true}) {
    INFO((unet ? "U-Net" : "GPT-2"));
    const graph g =
        unet ? build_graph(*zoo::unet({.levels = 3, .image = 64}, zoo::devices::rtx3060())).value()
             : build_graph(*zoo::gpt2({.layers = 2}, zoo::devices::rtx3060())).value();
    const auto p = hiremate_partition_of(g, {.lower = 4, .top = 6});
    REQUIRE(p);
    int checked = 0, total = 0, leaner = 0;
    for_each_hgraph(g, *p, [&](const hiremate_hgraph& hg) {
      const hiremate_hgraph* h = &hg;
      const bytes all = peak_of_store_all(h->block.g);
      const auto starts = detail::hgraph_starts(*h, h->g, h->variants, h->block.g, 2 * all,
                                                std::chrono::steady_clock::time_point::max());
      REQUIRE_MESSAGE(starts, starts.message());
      REQUIRE_FALSE(starts->empty());
      total += static_cast<int>(starts->size());
      CHECK(starts->front().program.predicted_time == doctest::Approx(h->block.g.ideal_time()));
      std::vector<std::vector<int>> exclusive;
      for (const auto& ph : h->option_phantoms)
        if (ph.size() > 1) exclusive.push_back(ph);
      detail::checkmate_formulation f{};
      f.memory_bits = 14;
      f.round_up = true;
      auto b = f.build(h->g, h->variants, exclusive, 2 * all, false,
                       std::chrono::steady_clock::time_point::max());
      REQUIRE(b);
      for (const auto& s : *starts) {
        const auto rep = sim::simulate(h->block.g, s.program, {.record_timeline = false});
        CHECK(rep.valid);
        CHECK(rep.peak == s.program.predicted_peak);
        const auto x = f.start_values(h->g, *b, s.runs);
        CHECK_MESSAGE(x, x.message());
      }
      // Starts leaner than store-all.
      bytes least = all;
      for (const auto& s : *starts) least = std::min(least, s.program.predicted_peak);
      if (least < all) ++leaner;
      ++checked;
    });
    CHECK(checked >= 2);
    CHECK(total > 2 * checked);
    CHECK(leaner >= 2);
  }
}

TEST_CASE("hiremate H-graphs: with a start, an H-ILP out of time still has a plan") {
  // The top of the U-Net, its sub-clusters with their store-all options, at 70 % of store-all's
  // peak, with a time limit that stops CBC before its first node: without a start, time_limit;
  // with one, a plan within the budget, reported time-limited and with no proven bound.
  const graph g =
      build_graph(*zoo::unet({.levels = 3, .image = 64}, zoo::devices::rtx3060())).value();
  const auto p = hiremate_partition_of(g, {.lower = 4, .top = 6});
  REQUIRE(p);
  std::vector<detail::block_programs> programs(p->clusters.size());
  for (std::size_t k = 0; k + 1 < p->clusters.size(); ++k)
    programs[k] = store_all_programs(g, p->clusters[k]);
  const int top = static_cast<int>(p->clusters.size()) - 1;
  const auto h = hiremate_hgraph_of(g, *p, top, programs);
  REQUIRE(h);
  const bytes budget = peak_of_store_all(g) * 7 / 10;
  detail::hilp_limits lim;
  lim.time_limit = 1e-3;
  const auto none = detail::solve_hgraph(*h, h->block.g, budget, milp::cbc{}, lim);
  REQUIRE_FALSE(none);
  CHECK(none.code() == status::time_limit);
  lim.warm_start = true;
  const auto plan = detail::solve_hgraph(*h, h->block.g, budget, milp::cbc{}, lim);
  REQUIRE_MESSAGE(plan, plan.message());
  const auto rep = sim::simulate(h->block.g, plan->program, {.budget = budget});
  CHECK(rep.valid);
  CHECK(rep.makespan == doctest::Approx(plan->program.predicted_time));
  CHECK_FALSE(plan->optimal);
  CHECK(plan->from_start);
  CHECK(plan->time_limited);
  CHECK_FALSE(std::isfinite(plan->gap));
}
#endif
