// H-Partition (policy/hiremate/partition.hpp) against its properties [Zhao24, §3.3], checked
// from outside on random DAGs and GPT-2: the leaves partition the forward ops, every cluster is
// convex in the forward graph, its nodes are in a topological order and within the size limit,
// the top within its own unless the partition says why not, the same partition on every run; the
// score prefers a smaller interface and fewer ops; bad limits are refused with the reason.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/hiremate/partition.hpp>
#include <remat/problem/builder.hpp>
#include <remat/zoo/gpt2.hpp>

#include "support/random_dag.hpp"

using namespace remat;

namespace {

/// Per forward op, the forward ops that read one of its activations.
std::vector<std::vector<int>> forward_edges(const graph& g) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(g.compute_count()));
  for (int c = 0; c < g.compute_count(); ++c) {
    if (g.compute(c).kind != compute_kind::forward) continue;
    for (int d : g.outputs(c)) {
      if (g.data(d).kind != data_kind::activation) continue;
      for (int r : g.consumers(d))
        if (g.compute(r).kind == compute_kind::forward && r != c)
          out[static_cast<std::size_t>(c)].push_back(r);
    }
  }
  return out;
}

/// Whether `set` (forward ops) is convex: no path from it through an op outside it back in.
bool convex(const std::vector<std::vector<int>>& edges, const std::vector<int>& set) {
  std::vector<char> in(edges.size(), 0), seen(edges.size(), 0);
  for (int c : set) in[static_cast<std::size_t>(c)] = 1;
  std::vector<int> stack;
  for (int c : set)
    for (int r : edges[static_cast<std::size_t>(c)])
      if (!in[static_cast<std::size_t>(r)]) stack.push_back(r);
  while (!stack.empty()) {
    const int u = stack.back();
    stack.pop_back();
    if (in[static_cast<std::size_t>(u)]) return false;
    if (seen[static_cast<std::size_t>(u)]) continue;
    seen[static_cast<std::size_t>(u)] = 1;
    for (int r : edges[static_cast<std::size_t>(u)]) stack.push_back(r);
  }
  return true;
}

/// Every property of a partition p of g with limits lim.
void check_partition(const graph& g, const hiremate_limits& lim, const hiremate_partition& p) {
  REQUIRE_FALSE(p.clusters.empty());
  const auto edges = forward_edges(g);
  std::vector<int> forwards;
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::forward) forwards.push_back(c);
  CHECK(p.top().forwards == forwards);
  // Each forward op is a node of exactly one cluster, each cluster but the top of exactly one
  // later cluster.
  std::vector<int> op_in(static_cast<std::size_t>(g.compute_count()), 0);
  std::vector<int> parent(p.clusters.size(), -1);
  for (std::size_t k = 0; k < p.clusters.size(); ++k) {
    const hiremate_cluster& cl = p.clusters[k];
    INFO("cluster " << k);
    std::vector<int> inside;  // the forwards of its nodes, recursively
    int weight = 0, level = 1;
    for (const hiremate_item& it : cl.items) {
      if (it.is_cluster) {
        REQUIRE(it.index >= 0);
        REQUIRE(static_cast<std::size_t>(it.index) < k);
        CHECK(parent[static_cast<std::size_t>(it.index)] == -1);
        parent[static_cast<std::size_t>(it.index)] = static_cast<int>(k);
        const auto& sub = p.clusters[static_cast<std::size_t>(it.index)];
        inside.insert(inside.end(), sub.forwards.begin(), sub.forwards.end());
        weight += 2;
        level = std::max(level, sub.level + 1);
      } else {
        REQUIRE(g.compute(it.index).kind == compute_kind::forward);
        ++op_in[static_cast<std::size_t>(it.index)];
        inside.push_back(it.index);
        weight += 1;
      }
    }
    std::sort(inside.begin(), inside.end());
    CHECK(inside == cl.forwards);
    CHECK(cl.level == level);
    CHECK(convex(edges, cl.forwards));
    if (k + 1 < p.clusters.size()) {
      CHECK(cl.items.size() >= 2);
      CHECK(weight <= lim.lower);
    } else if (p.over_limit.empty()) {
      CHECK(static_cast<int>(cl.items.size()) <= lim.top);
    }
    // Its nodes in a topological order: no edge from a later node to an earlier one.
    std::vector<int> item_of(static_cast<std::size_t>(g.compute_count()), -1);
    for (std::size_t i = 0; i < cl.items.size(); ++i) {
      const hiremate_item& it = cl.items[i];
      if (it.is_cluster)
        for (int c : p.clusters[static_cast<std::size_t>(it.index)].forwards)
          item_of[static_cast<std::size_t>(c)] = static_cast<int>(i);
      else
        item_of[static_cast<std::size_t>(it.index)] = static_cast<int>(i);
    }
    for (int c : cl.forwards)
      for (int r : edges[static_cast<std::size_t>(c)])
        if (item_of[static_cast<std::size_t>(r)] >= 0)
          CHECK(item_of[static_cast<std::size_t>(c)] <= item_of[static_cast<std::size_t>(r)]);
  }
  for (int c : forwards) CHECK(op_in[static_cast<std::size_t>(c)] == 1);
  for (std::size_t k = 0; k + 1 < p.clusters.size(); ++k) CHECK(parent[k] >= 0);
  CHECK(p.top().level == p.levels());
}

}  // namespace

TEST_CASE("hiremate partition: random DAGs, every property, the same on every run") {
  std::mt19937 rng(2028);
  int over[2] = {0, 0}, deep = 0, runs = 0;
  for (int i = 0; i < 120; ++i) {
    const int ops = 4 + static_cast<int>(rng() % 60);
    const graph g = test::random_dag(rng, ops, i, {.max_inputs = 1 + static_cast<int>(rng() % 3)});
    hiremate_limits lim;
    lim.lower = 2 + static_cast<int>(rng() % 7);
    lim.top = lim.lower + static_cast<int>(rng() % 5);
    for (const bool windows : {false, true}) {
      lim.windows = windows;
      INFO("DAG " << i << ", " << ops << " ops, limits " << lim.lower << "/" << lim.top
                  << (windows ? ", windows" : ""));
      const auto p = hiremate_partition_of(g, lim);
      REQUIRE_MESSAGE(p, p.message());
      check_partition(g, lim, *p);
      const auto again = hiremate_partition_of(g, lim);
      REQUIRE(again);
      CHECK(*again == *p);
      over[windows] += !p->over_limit.empty();
      // With windows, no top stays over its limit once two clusters (2 each) fit `lower`.
      if (windows && lim.lower >= 4) CHECK(p->over_limit.empty());
      deep += p->levels() >= 3;
      ++runs;
    }
  }
  MESSAGE(runs << " partitions, " << deep << " of 3 levels or more; tops over their limit: "
               << over[0] << " by Algorithm 7 alone, " << over[1] << " with windows");
  CHECK(deep > 0);
  CHECK(over[1] < over[0]);
}

TEST_CASE("hiremate partition: GPT-2 at the thesis' limits and at small ones") {
  const auto f = zoo::gpt2({.layers = 4}, zoo::devices::rtx3060());
  REQUIRE(f);
  const graph g = build_graph(*f).value();
  for (const hiremate_limits lim : {hiremate_limits{}, hiremate_limits{4, 6, 0.5}}) {
    INFO("limits " << lim.lower << "/" << lim.top);
    const auto p = hiremate_partition_of(g, lim);
    REQUIRE_MESSAGE(p, p.message());
    CHECK(p->over_limit.empty());
    check_partition(g, lim, *p);
    CHECK(p->levels() >= 2);
  }
}

TEST_CASE("hiremate partition: a graph under the top limit is the top alone") {
  std::mt19937 rng(3);
  const graph g = test::random_dag(rng, 10, 0);
  const auto p = hiremate_partition_of(g, {.lower = 20, .top = 30});
  REQUIRE(p);
  REQUIRE(p->clusters.size() == 1);
  CHECK(p->levels() == 1);
  CHECK(p->top().items.size() == 10);
}

namespace {
forward_op op(std::string name, std::vector<std::string> in, bytes out) {
  forward_op o;
  o.name = std::move(name);
  o.inputs = std::move(in);
  o.output_bytes = out;
  o.forward_time = 1;
  o.backward_time = 1;
  return o;
}
std::vector<std::string> names(const graph& g, const hiremate_cluster& c) {
  std::vector<std::string> out;
  for (const auto& it : c.items) out.push_back(g.compute(it.index).name);
  return out;
}
}  // namespace

TEST_CASE("hiremate partition: the score takes the smaller interface, and alpha weighs the ops") {
  {
    // Two branches from x to e: a (100 bytes out) -> b, and c -> d (2 bytes out). The pairs:
    // {c, d} reads 4 and makes 2 (6 bytes), {a, b} 4 + 4, {x, c} 4 + 4 + 1, {x, a} 4 + 4 + 100.
    const graph g =
        build_graph(forward_dag{"branches",
                                4,
                                {op("x", {"input"}, 4), op("a", {"x"}, 100), op("b", {"a"}, 4),
                                 op("c", {"x"}, 1), op("d", {"c"}, 2), op("e", {"b", "d"}, 4)}})
            .value();
    const auto p = hiremate_partition_of(g, {.lower = 2, .top = 5});  // one group is enough
    REQUIRE(p);
    REQUIRE(p->clusters.size() == 2);
    CHECK(names(g, p->clusters[0]) == std::vector<std::string>{"fwd c", "fwd d"});
  }
  {
    // A diamond h -> (p, q) -> x -> z: {h, p, q, x} reads 1 and makes 9 (10 bytes, 4 ops),
    // {p, q, x} reads 6 and makes 9 (15 bytes, 3 ops), every other candidate over 50 bytes.
    // alpha 0.5: 10 * 2 < 15 * 1.73; alpha 2: 15 * 9 < 10 * 16.
    const graph g =
        build_graph(forward_dag{"diamond",
                                1,
                                {op("h", {"input"}, 6), op("p", {"h"}, 50), op("q", {"h"}, 50),
                                 op("x", {"p", "q"}, 9), op("z", {"x"}, 1)}})
            .value();
    const auto half = hiremate_partition_of(g, {.lower = 4, .top = 4, .alpha = 0.5});
    REQUIRE(half);
    CHECK(names(g, half->clusters[0]) ==
          std::vector<std::string>{"fwd h", "fwd p", "fwd q", "fwd x"});
    const auto two = hiremate_partition_of(g, {.lower = 4, .top = 4, .alpha = 2});
    REQUIRE(two);
    CHECK(names(g, two->clusters[0]) == std::vector<std::string>{"fwd p", "fwd q", "fwd x"});
  }
}

TEST_CASE("hiremate partition: a top that cannot get under its limit, and bad limits") {
  // A fan: x read by six ops, all read by z. With lower 2 the groups cannot grow past a pair.
  forward_dag f{"fan", 4, {op("x", {"input"}, 4)}};
  forward_op z = op("z", {}, 4);
  for (int i = 0; i < 6; ++i) {
    f.ops.push_back(op("y" + std::to_string(i), {"x"}, 4));
    z.inputs.push_back(f.ops.back().name);
  }
  f.ops.push_back(z);
  const graph g = build_graph(f).value();
  hiremate_limits lim{2, 2, 0.5, false};
  const auto p = hiremate_partition_of(g, lim);
  REQUIRE(p);
  CHECK_FALSE(p->over_limit.empty());
  CHECK(p->over_limit.find("more than 2") != std::string::npos);
  check_partition(g, lim, *p);
  // Windows pair the fan's ops too, until only clusters (2 each) are left.
  lim.windows = true;
  const auto w = hiremate_partition_of(g, lim);
  REQUIRE(w);
  check_partition(g, lim, *w);
  CHECK(w->top().items.size() < p->top().items.size());
  CHECK(w->over_limit.find("not even two consecutive nodes") != std::string::npos);

  for (const hiremate_limits bad :
       {hiremate_limits{1, 30, 0.5}, hiremate_limits{20, 10, 0.5}, hiremate_limits{20, 30, -1}}) {
    const auto r = hiremate_partition_of(g, bad);
    REQUIRE_FALSE(r);
    CHECK(r.code() == status::invalid_problem);
    CHECK(r.message().find("20, 30, 0.5") != std::string::npos);
  }
}
