#pragma once
// H-Partition [Zhao24, §3.3, Algorithm 7]: a training graph's forward ops grouped, recursively,
// into clusters of at most `lower` nodes each, until the top graph has at most `top` nodes. The
// backward of an op goes with it. Each round of the algorithm makes one level:
//
//   candidates: for every node x of the current graph, with a(x) its immediate dominator (the
//     closest node every path from the entry to x goes through; one virtual entry above the
//     graph's entry nodes), the nodes on the paths from a(x) to x, with and without x, with and
//     without a(x); and the maximal chains (each node read by one node only, which reads only
//     it), cut into pieces that fit; those of fewer than 2 nodes or more than `lower` dropped;
//   while candidates remain and the graph has more than `top` nodes (a group counting as one):
//     the candidate C of least score s(C) = (bytes of the values C reads from outside or makes
//     for outside) * (forward ops in C)^alpha, ties to the first by its nodes, becomes a group
//     (if it is convex: no path leaves it and comes back); every other candidate that meets it
//     takes all of it, and is dropped if it then has more than `lower` nodes or nothing new;
//   every group becomes a cluster, and one node of the next round's graph;
//   a round with no group (Algorithm 7 would stop, the top over its limit) groups windows
//   instead: runs of consecutive nodes of the round's topological order (always convex) within
//   `lower`, disjoint ones least score first (hiremate_limits::windows; remat's addition).
//
// A node's size is 1, a cluster's 2 (its forward and backward with options to choose from: the
// reference implementation's estimate). docs/hiremate.md, "H-Partition".

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <iterator>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/graph.hpp>

namespace remat {

/// H-Partition's knobs [Zhao24, §3.3]; the defaults are the thesis' implementation's.
struct hiremate_limits {
  int lower = 20;      ///< M^l: the most nodes of a cluster below the top (a sub-cluster counts 2)
  int top = 30;        ///< M^t: the most nodes of the top graph (>= lower)
  double alpha = 0.5;  ///< the score's exponent on the number of forward ops
  /// When a round forms no group (no convex candidate within `lower`; Algorithm 7 would stop
  /// there, the top over `top`): group runs of consecutive nodes of the round's topological
  /// order instead (convex by construction), least score first, so that every H-ILP stays
  /// within the limits. false: the thesis' algorithm alone.
  bool windows = true;
};

/// A node of a cluster's graph: a forward op of the training graph, or a cluster of the level
/// below.
struct hiremate_item {
  bool is_cluster = false;
  int index = -1;  ///< a forward compute node of the graph, or an index into clusters
  friend bool operator==(const hiremate_item&, const hiremate_item&) = default;
};

struct hiremate_cluster {
  std::vector<hiremate_item> items;  ///< its graph's nodes, in a topological order
  std::vector<int> forwards;         ///< every forward op inside it, ascending
  int level = 1;                     ///< 1: only ops; else 1 + its deepest sub-cluster's
  friend bool operator==(const hiremate_cluster&, const hiremate_cluster&) = default;
};

struct hiremate_partition {
  /// Every cluster before the one it is in; the last is the top (the whole forward graph).
  std::vector<hiremate_cluster> clusters;
  /// Empty when the top graph has at most `top` nodes; else why not (no candidate left).
  std::string over_limit;
  [[nodiscard]] const hiremate_cluster& top() const { return clusters.back(); }
  [[nodiscard]] int levels() const { return clusters.empty() ? 0 : clusters.back().level; }
  friend bool operator==(const hiremate_partition&, const hiremate_partition&) = default;
};

namespace detail::hpart {

/// The graph of one round: nodes (ops or clusters), their edges, and the values between them.
struct round_graph {
  struct node {
    hiremate_item item;
    int ops = 1;    ///< forward ops inside
    int first = 0;  ///< its first forward op (the order of nodes and ties)
  };
  std::vector<node> nodes;
  std::vector<std::vector<int>> succ, pred;  // sorted, without repeats
  std::vector<std::vector<int>> touches;     // per node: the values it makes or reads (not its own)
  std::vector<int> maker;                    // per value: its node, -1 outside (a graph input)
  std::vector<std::vector<int>> readers;     // per value: nodes that read it, without repeats
  std::vector<char> read_outside;            // per value: read by the loss
  std::vector<bytes> size;                   // per value

  [[nodiscard]] int count() const { return static_cast<int>(nodes.size()); }
  [[nodiscard]] int weight(int u) const { return nodes[ix(u)].item.is_cluster ? 2 : 1; }
};

/// The values (activations made by forward ops or read by them) of g, with round_graph's fields
/// filled for the nodes `node_of` (per forward op of g: its node; -1 for other compute nodes).
inline void link_values(const graph& g, const std::vector<int>& node_of, round_graph& r) {
  const int n = r.count();
  r.succ.assign(ix(n), {});
  r.pred.assign(ix(n), {});
  r.touches.assign(ix(n), {});
  r.maker.clear();
  r.readers.clear();
  r.read_outside.clear();
  r.size.clear();
  for (int d = 0; d < g.data_count(); ++d) {
    if (g.data(d).kind != data_kind::activation) continue;
    int maker = -1;
    for (int p : g.producers(d))
      if (node_of[ix(p)] >= 0) maker = node_of[ix(p)];
    std::vector<int> readers;
    bool outside = false;
    for (int c : g.consumers(d)) {
      if (node_of[ix(c)] >= 0)
        readers.push_back(node_of[ix(c)]);
      else if (g.compute(c).kind == compute_kind::loss)
        outside = true;
    }
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    std::erase(readers, maker);
    if (readers.empty() && (maker < 0 || !outside)) continue;  // inside one node, or unread
    const int v = static_cast<int>(r.size.size());
    r.size.push_back(g.data(d).size);
    r.maker.push_back(maker);
    r.read_outside.push_back(outside);
    if (maker >= 0) r.touches[ix(maker)].push_back(v);
    for (int u : readers) {
      r.touches[ix(u)].push_back(v);
      if (maker >= 0) {
        r.succ[ix(maker)].push_back(u);
        r.pred[ix(u)].push_back(maker);
      }
    }
    r.readers.push_back(std::move(readers));
  }
  for (auto* adj : {&r.succ, &r.pred})
    for (auto& a : *adj) {
      std::sort(a.begin(), a.end());
      a.erase(std::unique(a.begin(), a.end()), a.end());
    }
}

/// Bytes of the values that the set (in[u] != 0 for its nodes) reads from outside or makes for
/// outside.
inline bytes interface_bytes(const round_graph& r, const std::vector<int>& members,
                             const std::vector<char>& in) {
  std::vector<int> seen;
  bytes sum = 0;
  for (int u : members)
    for (int v : r.touches[ix(u)]) seen.push_back(v);
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int v : seen) {
    const int m = r.maker[ix(v)];
    const bool made_in = m >= 0 && in[ix(m)];
    bool read_in = false, read_out = r.read_outside[ix(v)] != 0;
    for (int u : r.readers[ix(v)]) (in[ix(u)] ? read_in : read_out) = true;
    if ((!made_in && read_in) || (made_in && read_out)) sum += r.size[ix(v)];
  }
  return sum;
}

/// Whether the set is convex: no path leaves it and comes back into it.
inline bool convex(const round_graph& r, const std::vector<int>& members,
                   const std::vector<char>& in) {
  // Nodes are numbered in a topological order: a path back ends at a node <= the last member.
  const int last = members.empty() ? -1 : *std::max_element(members.begin(), members.end());
  std::vector<char> seen(ix(r.count()), 0);
  std::vector<int> stack;
  for (int u : members)
    for (int v : r.succ[ix(u)])
      if (!in[ix(v)] && v < last && !seen[ix(v)]) {
        seen[ix(v)] = 1;
        stack.push_back(v);
      }
  while (!stack.empty()) {
    const int u = stack.back();
    stack.pop_back();
    for (int v : r.succ[ix(u)]) {
      if (in[ix(v)]) return false;
      if (v < last && !seen[ix(v)]) {
        seen[ix(v)] = 1;
        stack.push_back(v);
      }
    }
  }
  return true;
}

/// Per node, its immediate dominator below one virtual entry (-1) above the entry nodes.
inline std::vector<int> dominators(const round_graph& r) {
  const int n = r.count();
  std::vector<int> idom(ix(n), -1), depth(ix(n), 0);
  for (int x = 0; x < n; ++x) {  // nodes are in a topological order
    int a = -2;                  // -2: none folded yet
    for (int p : r.pred[ix(x)]) {
      if (a == -2) {
        a = p;
        continue;
      }
      int b = p;
      while (a != b) {
        const int da = a < 0 ? 0 : depth[ix(a)] + 1, db = b < 0 ? 0 : depth[ix(b)] + 1;
        if (da >= db)
          a = a < 0 ? -1 : idom[ix(a)];
        else
          b = b < 0 ? -1 : idom[ix(b)];
      }
    }
    idom[ix(x)] = a == -2 ? -1 : a;
    depth[ix(x)] = idom[ix(x)] < 0 ? 0 : depth[ix(idom[ix(x)])] + 1;
  }
  return idom;
}

/// The candidate groups of a round (each sorted, without repeats), none over `lower`.
inline std::vector<std::vector<int>> candidates(const round_graph& r, int lower) {
  const int n = r.count();
  std::set<std::vector<int>> out;
  auto weight = [&](const std::vector<int>& c) {
    int w = 0;
    for (int u : c) w += r.weight(u);
    return w;
  };
  auto add = [&](std::vector<int> c) {
    std::sort(c.begin(), c.end());
    if (c.size() >= 2 && weight(c) <= lower) out.insert(std::move(c));
  };
  const std::vector<int> idom = dominators(r);
  std::vector<int> mark(ix(n), -1);
  for (int x = 0; x < n; ++x) {
    const int a = idom[ix(x)];
    // The nodes on the paths from a to x: x's ancestors up to a (a dominates x, so they are all
    // below it); given up past lower + 2 nodes.
    std::vector<int> between{x};
    mark[ix(x)] = x;
    bool too_many = false;
    for (std::size_t i = 0; i < between.size() && !too_many; ++i)
      for (int p : r.pred[ix(between[i])]) {
        if (p == a || mark[ix(p)] == x) continue;
        mark[ix(p)] = x;
        between.push_back(p);
        if (static_cast<int>(between.size()) > lower + 2) {
          too_many = true;
          break;
        }
      }
    if (too_many) continue;
    std::vector<int> without_x(between.begin() + 1, between.end());
    add(between);
    add(without_x);
    if (a >= 0) {
      between.push_back(a);
      without_x.push_back(a);
      add(between);
      add(without_x);
    }
  }
  // Maximal chains: u -> v where u is read by v alone and v reads u alone.
  auto link = [&](int u) {
    return r.succ[ix(u)].size() == 1 && r.pred[ix(r.succ[ix(u)][0])].size() == 1 ? r.succ[ix(u)][0]
                                                                                 : -1;
  };
  for (int u = 0; u < n; ++u) {
    const bool starts = r.pred[ix(u)].size() != 1 || link(r.pred[ix(u)][0]) != u;
    if (!starts || link(u) < 0) continue;
    std::vector<int> piece;
    int w = 0;
    for (int v = u; v >= 0; v = link(v)) {
      if (w + r.weight(v) > lower) {
        add(piece);
        piece.clear();
        w = 0;
      }
      piece.push_back(v);
      w += r.weight(v);
    }
    add(piece);
  }
  return {out.begin(), out.end()};
}

/// Numbers the nodes of r in a topological order (Kahn's, the node with the first forward op
/// first), `op_node` with them, and links their values.
inline void sort_topologically(const graph& g, std::vector<int>& op_node, round_graph& r) {
  link_values(g, op_node, r);
  const int n = r.count();
  std::vector<int> missing(ix(n), 0), order;
  for (int u = 0; u < n; ++u) missing[ix(u)] = static_cast<int>(r.pred[ix(u)].size());
  using entry = std::pair<int, int>;  // (first op, node)
  std::priority_queue<entry, std::vector<entry>, std::greater<>> ready;
  for (int u = 0; u < n; ++u)
    if (missing[ix(u)] == 0) ready.push({r.nodes[ix(u)].first, u});
  while (!ready.empty()) {
    const int u = ready.top().second;
    ready.pop();
    order.push_back(u);
    for (int v : r.succ[ix(u)])
      if (--missing[ix(v)] == 0) ready.push({r.nodes[ix(v)].first, v});
  }
  bool same = true;
  for (int i = 0; i < n; ++i) same = same && order[ix(i)] == i;
  if (same) return;
  std::vector<int> at(ix(n));
  std::vector<round_graph::node> nodes;
  for (int i = 0; i < n; ++i) {
    at[ix(order[ix(i)])] = i;
    nodes.push_back(r.nodes[ix(order[ix(i)])]);
  }
  r.nodes = std::move(nodes);
  for (int& u : op_node)
    if (u >= 0) u = at[ix(u)];
  link_values(g, op_node, r);
}

}  // namespace detail::hpart

/// H-Partition of g's forward ops (see the top of this header). Errors (status::invalid_problem):
/// a graph that is not valid, or limits that are not (lower >= 2, top >= lower, alpha >= 0 and
/// finite). A graph whose top cannot get under `top` (no candidate left) is partitioned as far
/// as it goes, `over_limit` saying so.
inline result<hiremate_partition> hiremate_partition_of(const graph& g,
                                                        const hiremate_limits& lim = {}) {
  using namespace detail::hpart;
  using detail::ix;
  if (auto v = validate(g); !v) return v.err();
  if (lim.lower < 2 || lim.top < lim.lower || !(lim.alpha >= 0) || !std::isfinite(lim.alpha))
    return error{status::invalid_problem,
                 "hiremate: the limits must have lower >= 2, top >= lower and a finite alpha >= "
                 "0, not lower " +
                     std::to_string(lim.lower) + ", top " + std::to_string(lim.top) + ", alpha " +
                     std::to_string(lim.alpha) + " (the thesis' defaults: 20, 30, 0.5)",
                 {}};
  hiremate_partition out;
  round_graph r;
  std::vector<int> op_node(ix(g.compute_count()), -1);  // per forward op: its node this round
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::forward) {
      op_node[ix(c)] = r.count();
      r.nodes.push_back({{false, c}, 1, c});
    }
  for (;;) {
    sort_topologically(g, op_node, r);
    const int n = r.count();
    if (n <= lim.top) break;
    std::vector<std::vector<int>> cand = candidates(r, lim.lower);
    // Scores, and the candidates each node is in.
    std::vector<double> score(cand.size());
    std::vector<std::vector<int>> cands_of(ix(n));
    std::vector<char> in(ix(n), 0);
    auto score_of = [&](const std::vector<int>& c) {
      int ops = 0;
      for (int u : c) {
        in[ix(u)] = 1;
        ops += r.nodes[ix(u)].ops;
      }
      const bytes io = interface_bytes(r, c, in);
      for (int u : c) in[ix(u)] = 0;
      return static_cast<double>(io) * std::pow(static_cast<double>(ops), lim.alpha);
    };
    auto before = [&](int a, int b) {  // the order of selection: score, then nodes
      if (score[ix(a)] != score[ix(b)]) return score[ix(a)] < score[ix(b)];
      if (cand[ix(a)] != cand[ix(b)]) return cand[ix(a)] < cand[ix(b)];
      return a < b;
    };
    std::set<int, decltype(before)> queue(before);
    for (std::size_t i = 0; i < cand.size(); ++i) {
      score[i] = score_of(cand[i]);
      for (int u : cand[i]) cands_of[ix(u)].push_back(static_cast<int>(i));
      queue.insert(static_cast<int>(i));
    }
    std::vector<int> group_of(ix(n), -1);
    std::vector<std::vector<int>> groups;
    int nodes_now = n;
    while (!queue.empty() && nodes_now > lim.top) {
      const int best = *queue.begin();
      queue.erase(queue.begin());
      const std::vector<int> c = cand[ix(best)];
      for (int u : c) in[ix(u)] = 1;
      const bool ok = convex(r, c, in);
      for (int u : c) in[ix(u)] = 0;
      if (!ok) continue;
      // The new group takes the groups it meets (a candidate that meets a group holds all of
      // it) and the nodes of no group.
      std::set<int> old;
      int fresh = 0;
      for (int u : c) {
        if (group_of[ix(u)] >= 0)
          old.insert(group_of[ix(u)]);
        else
          ++fresh;
      }
      nodes_now -= fresh + static_cast<int>(old.size()) - 1;
      for (int k : old) groups[ix(k)].clear();
      const int id = static_cast<int>(groups.size());
      groups.push_back(c);
      for (int u : c) group_of[ix(u)] = id;
      // Every other candidate that meets it takes all of it.
      std::set<int> meets;
      for (int u : c)
        for (int k : cands_of[ix(u)])
          if (k != best) meets.insert(k);
      for (int k : meets) {
        if (!queue.contains(k)) continue;
        queue.erase(k);
        std::vector<int> merged;
        std::set_union(cand[ix(k)].begin(), cand[ix(k)].end(), c.begin(), c.end(),
                       std::back_inserter(merged));
        int w = 0;
        for (int u : merged) w += r.weight(u);
        if (merged.size() == c.size() || w > lim.lower) continue;
        for (int u : merged)
          if (!std::binary_search(cand[ix(k)].begin(), cand[ix(k)].end(), u))
            cands_of[ix(u)].push_back(k);
        cand[ix(k)] = std::move(merged);
        score[ix(k)] = score_of(cand[ix(k)]);
        queue.insert(k);
      }
    }
    std::erase_if(groups, [](const std::vector<int>& x) { return x.empty(); });
    if (groups.empty() && lim.windows) {
      // No candidate: runs of consecutive nodes of the topological order, each as long as
      // `lower` allows (convex: a path between two of its nodes goes through nodes between
      // them), disjoint ones taken least score first (ties to the first) while the graph is
      // over `top`. Contracted together they keep the order, so the next round is acyclic.
      std::vector<std::vector<int>> runs;
      for (int a = 0; a < n; ++a) {
        std::vector<int> run;
        for (int u = a, w = 0; u < n && (w += r.weight(u)) <= lim.lower; ++u) run.push_back(u);
        if (run.size() >= 2) runs.push_back(std::move(run));
      }
      std::vector<double> run_score;
      std::vector<int> by(runs.size());
      for (std::size_t i = 0; i < runs.size(); ++i) {
        run_score.push_back(score_of(runs[i]));
        by[i] = static_cast<int>(i);
      }
      std::stable_sort(by.begin(), by.end(),
                       [&](int a, int b) { return run_score[ix(a)] < run_score[ix(b)]; });
      for (int i : by) {
        if (nodes_now <= lim.top) break;
        const auto& run = runs[ix(i)];
        if (std::any_of(run.begin(), run.end(), [&](int u) { return group_of[ix(u)] >= 0; }))
          continue;
        for (int u : run) group_of[ix(u)] = static_cast<int>(groups.size());
        groups.push_back(run);
        nodes_now -= static_cast<int>(run.size()) - 1;
      }
    }
    if (groups.empty()) {
      out.over_limit =
          "the top graph has " + std::to_string(n) + " nodes, more than " +
          std::to_string(lim.top) + ", and no group of its nodes is convex with at most " +
          std::to_string(lim.lower) + " (hiremate_limits::lower" +
          (lim.windows ? ": not even two consecutive nodes, a cluster counting 2)" : ")");
      break;
    }
    // Each group a cluster (in the order of their first nodes), and a node of the next round.
    std::sort(groups.begin(), groups.end());
    round_graph next;
    std::vector<int> next_of(ix(n), -1);
    for (const auto& grp : groups) {
      hiremate_cluster cl;
      round_graph::node nd{
          {true, static_cast<int>(out.clusters.size())}, 0, r.nodes[ix(grp.front())].first};
      for (int u : grp) {  // ascending: a topological order
        const round_graph::node& m = r.nodes[ix(u)];
        cl.items.push_back(m.item);
        nd.ops += m.ops;
        nd.first = std::min(nd.first, m.first);
        if (m.item.is_cluster) {
          const hiremate_cluster& sub = out.clusters[ix(m.item.index)];
          cl.forwards.insert(cl.forwards.end(), sub.forwards.begin(), sub.forwards.end());
          cl.level = std::max(cl.level, sub.level + 1);
        } else {
          cl.forwards.push_back(m.item.index);
        }
      }
      std::sort(cl.forwards.begin(), cl.forwards.end());
      out.clusters.push_back(std::move(cl));
      for (int u : grp) next_of[ix(u)] = next.count();
      next.nodes.push_back(nd);
    }
    for (int u = 0; u < n; ++u)
      if (group_of[ix(u)] < 0) {
        next_of[ix(u)] = next.count();
        next.nodes.push_back(r.nodes[ix(u)]);
      }
    for (int& u : op_node)
      if (u >= 0) u = next_of[ix(u)];
    r = std::move(next);
  }
  // The top: the last round's graph.
  hiremate_cluster top;
  for (const round_graph::node& m : r.nodes) {
    top.items.push_back(m.item);
    if (m.item.is_cluster)
      top.level = std::max(top.level, out.clusters[ix(m.item.index)].level + 1);
  }
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::forward) top.forwards.push_back(c);
  out.clusters.push_back(std::move(top));
  return out;
}

}  // namespace remat
