#pragma once
// Exhaustive search for graph schedules: Dijkstra over memory states (which data nodes are
// alive, which contributions each gradient holds, which compute nodes have run, whether the
// loss ran), with compute / fast-forward / free moves. The rules are written out here from
// docs/checkmate.md, independently of sim::simulate, so that the two check each other.
// For tiny graphs only (a few forward ops): the state space is exponential. The search is A*
// with the time of the compute nodes that have not run yet (each runs at least once, at its
// cheaper variant) as the estimate: it never overestimates and drops by at most a move's cost,
// so the first goal reached is optimal, as with plain Dijkstra, after fewer states.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include <remat/problem/graph.hpp>

namespace remat::test {

/// The optimal makespan within the budget; +inf when no schedule fits. With `in_order`, only
/// the schedules of Checkmate's stage model ([Zhao24, §2.4.1]) are searched: stage t runs some
/// of the compute nodes 0..t, each at most once and in index order, and ends with the first run
/// of node t. Without it, any order.
inline double graph_brute_force(const graph& g, bytes budget, bool fast_forward = true,
                                bool in_order = false, std::vector<std::string>* path = nullptr) {
  const int I = g.data_count(), C = g.compute_count();
  // State string: per data, 1 char alive + one char per producer (contributed); per compute,
  // ran.
  std::vector<int> off(static_cast<std::size_t>(I) + 1, 0);
  for (int i = 0; i < I; ++i)
    off[static_cast<std::size_t>(i) + 1] =
        off[static_cast<std::size_t>(i)] + 1 + static_cast<int>(g.producers(i).size());
  const int ran0 = off[static_cast<std::size_t>(I)];
  std::string start(static_cast<std::size_t>(ran0 + C + 1), '0');
  // Last char: 1 + the last node run in the current stage (in_order only).
  auto Last = [&](std::string& s) -> char& { return s[static_cast<std::size_t>(ran0 + C)]; };
  auto A = [&](std::string& s, int i) -> char& {
    return s[static_cast<std::size_t>(off[static_cast<std::size_t>(i)])];
  };
  auto Dn = [&](std::string& s, int i, std::size_t p) -> char& {
    return s[static_cast<std::size_t>(off[static_cast<std::size_t>(i)]) + 1 + p];
  };
  auto Ran = [&](std::string& s, int c) -> char& { return s[static_cast<std::size_t>(ran0 + c)]; };
  auto mem = [&](std::string& s) {
    bytes m = 0;
    for (int i = 0; i < I; ++i)
      if (A(s, i) == '1') m += g.data(i).size;
    return m;
  };
  for (int i = 0; i < I; ++i)
    if (g.producers(i).empty()) A(start, i) = '1';
  if (mem(start) > budget) return std::numeric_limits<double>::infinity();
  std::vector<double> cheapest(static_cast<std::size_t>(C));
  for (int c = 0; c < C; ++c) {
    const auto& n = g.compute(c);
    cheapest[static_cast<std::size_t>(c)] =
        fast_forward && n.kind == compute_kind::forward ? std::min(n.time, n.fast_time) : n.time;
  }
  auto estimate = [&](std::string& s) {
    double h = 0;
    for (int c = 0; c < C; ++c)
      if (Ran(s, c) != '1') h += cheapest[static_cast<std::size_t>(c)];
    return h;
  };
  using item = std::pair<double, std::string>;
  std::priority_queue<item, std::vector<item>, std::greater<>> q;
  std::unordered_map<std::string, double> best;
  std::unordered_map<std::string, std::pair<std::string, std::string>>
      parent;  // state -> (prev, move)
  best[start] = 0;
  q.push({estimate(start), start});
  while (!q.empty()) {
    const double f = q.top().first;
    std::string s = q.top().second;  // not const: the helpers above take std::string&
    q.pop();
    const double d = best[s];
    if (d + estimate(s) < f) continue;  // a stale entry: s was reached cheaper since
    bool goal = true;
    for (int c = 0; c < C && goal; ++c) goal = Ran(s, c) == '1';
    for (int i = 0; i < I && goal; ++i)
      if (!g.data(i).is_protected && A(s, i) == '1') goal = false;
    if (goal) {
      if (path) {
        path->clear();
        for (std::string at = s; at != start; at = parent[at].first)
          path->push_back(parent[at].second);
        std::reverse(path->begin(), path->end());
      }
      return d;
    }
    auto push = [&](const std::string& n, double nd, std::string move) {
      auto it = best.find(n);
      if (it == best.end() || nd < it->second) {
        best[n] = nd;
        if (path) parent[n] = {s, std::move(move)};
        std::string key = n;
        q.push({nd + estimate(key), std::move(key)});
      }
    };
    // Frees.
    for (int i = 0; i < I; ++i)
      if (!g.data(i).is_protected && A(s, i) == '1') {
        std::string n = s;
        A(n, i) = '0';
        for (std::size_t p = 0; p < g.producers(i).size(); ++p) Dn(n, i, p) = '0';
        push(n, d, "D" + std::to_string(i));
      }
    // Computes.
    for (int c = 0; c < C; ++c) {
      const auto& node = g.compute(c);
      if ((node.kind == compute_kind::loss || node.kind == compute_kind::backward) &&
          Ran(s, c) == '1')
        continue;
      int first_new = 0;
      while (first_new < C && Ran(s, first_new) == '1') ++first_new;
      if (in_order && (c > first_new || c + 1 <= Last(s) - '0')) continue;
      bool ready = true;
      for (int i : g.inputs(c)) {
        if (A(s, i) != '1') ready = false;
        for (std::size_t p = 0; p < g.producers(i).size(); ++p)
          if (Dn(s, i, p) != '1') ready = false;
      }
      if (!ready) continue;
      for (int fast = 0; fast <= (fast_forward && node.kind == compute_kind::forward ? 1 : 0);
           ++fast) {
        std::string n = s;
        bytes created = 0;
        bool ok = true;
        for (int i : g.outputs(c)) {
          if (fast && g.data(i).kind == data_kind::phantom) continue;
          const auto pr = g.producers(i);
          std::size_t p = 0;
          while (pr[p] != c) ++p;
          if (A(n, i) == '1' && Dn(n, i, p) == '1') ok = false;  // already there
          if (A(n, i) != '1') {
            A(n, i) = '1';
            created += g.data(i).size;
          }
          Dn(n, i, p) = '1';
        }
        if (!ok) continue;
        if (mem(s) + created + (fast ? node.fast_overhead : node.overhead) > budget) continue;
        if (in_order) Last(n) = c == first_new ? '0' : static_cast<char>('0' + c + 1);
        Ran(n, c) = '1';
        push(n, d + (fast ? node.fast_time : node.time),
             "C" + std::to_string(c) + (fast ? "_ff" : ""));
      }
    }
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace remat::test
