#pragma once
// Dynamic Tensor Rematerialization [DTR21] replayed on a training graph: the graph's ops run in
// their order (store-all's), each datum freed after its last reader; when an op's allocation
// would pass the budget, the resident activation with the smallest score of the heuristic is
// evicted (freed), and an evicted input is remade when an op needs it, by running its producer
// again (recursively, its own evicted inputs first). The decisions are written as an ordinary
// program, which the simulator then checks like any plan. The heuristics (h_DTR, size, LRU)
// and the decisions where the graph's model differs from the paper's: docs/dtr.md.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// What a heuristic sees of a resident activation it may evict.
struct dtr_candidate {
  seconds cost = 0;          ///< its producer's time (a fast-forward's where that remakes it)
  seconds neighborhood = 0;  ///< the producers' times of its evicted neighborhood e*(t)
  bytes size = 0;
  double staleness = 1;  ///< ops run since it was last read or made, plus one
};

/// DTR's heuristic h_DTR [DTR21]: (c(t) + c(e*(t))) / (m(t) s(t)), the smallest evicted first.
struct h_dtr {
  static constexpr std::string_view name = "h_dtr";
  [[nodiscard]] double operator()(const dtr_candidate& c) const {
    return (c.cost + c.neighborhood) / (static_cast<double>(c.size) * c.staleness);
  }
};
/// The largest first (a baseline of [DTR21]).
struct h_size {
  static constexpr std::string_view name = "size";
  [[nodiscard]] double operator()(const dtr_candidate& c) const {
    return 1 / static_cast<double>(c.size);
  }
};
/// The least recently used first (a baseline of [DTR21]).
struct h_lru {
  static constexpr std::string_view name = "lru";
  [[nodiscard]] double operator()(const dtr_candidate& c) const { return 1 / c.staleness; }
};

namespace detail {

/// The replay: the program DTR runs on g within `budget` with heuristic H, its predicted time
/// the sum of the ops' times. Error: budget_too_small where an op, with every activation it
/// does not need evicted, still does not fit (the message names the op and what it needs; the
/// error's minimum is what it needs, a lower bound), invalid_problem for an activation with
/// several producers (not a training graph's).
template <class H>
result<schedule> dtr_run(const graph& g, bytes budget, const H& heuristic) {
  const auto ix = [](int i) { return static_cast<std::size_t>(i); };
  const int T = g.compute_count();
  const int I = g.data_count();
  // An activation can be remade: made by a forward none of whose outputs is protected (a
  // protected output is never freed, so its forward cannot run again).
  std::vector<char> remakeable(ix(I), 0);
  for (int d = 0; d < I; ++d) {
    if (g.is_source(d) || g.data(d).is_protected) continue;
    const auto pr = g.producers(d);
    if (g.compute(pr.front()).kind != compute_kind::forward) continue;
    const auto outs = g.outputs(pr.front());
    if (std::ranges::any_of(outs, [&](int x) { return g.data(x).is_protected; })) continue;
    if (pr.size() > 1)
      return error{status::invalid_problem,
                   "dtr: data '" + g.data(d).name +
                       "' is made by several forwards; DTR remakes an activation by running its "
                       "one producer again",
                   {}};
    remakeable[ix(d)] = 1;
  }
  // The last reader of each datum in the graph's order (its last producer if none reads it).
  std::vector<int> last(ix(I), -1);
  for (int d = 0; d < I; ++d) {
    for (int c : g.consumers(d)) last[ix(d)] = std::max(last[ix(d)], c);
    if (last[ix(d)] < 0)
      for (int c : g.producers(d)) last[ix(d)] = std::max(last[ix(d)], c);
  }
  schedule out;
  std::vector<char> alive(ix(I), 0), evicted(ix(I), 0), locked(ix(I), 0);
  std::vector<long long> touched(ix(I), 0);
  bytes mem = 0;
  for (int d = 0; d < I; ++d)
    if (g.is_source(d)) {
      alive[ix(d)] = 1;
      mem += g.data(d).size;
    }
  long long clock = 0;
  int step = 0;  // the next op of the graph's order
  auto free_data = [&](int d) {
    out.ops.push_back(instruction::free(d));
    alive[ix(d)] = 0;
    mem -= g.data(d).size;
  };
  // Whether a datum is still wanted: read by an op after the current one, or protected.
  auto wanted = [&](int d) { return g.data(d).is_protected || last[ix(d)] > step; };
  // e*(d): the evicted data reached from d through producers' inputs and forward consumers'
  // outputs, over evicted data only; the sum of their producers' times.
  std::vector<char> seen(ix(I), 0);
  std::vector<int> stack, visited;
  auto neighborhood = [&](int d) {
    seconds sum = 0;
    stack.assign(1, d);
    visited.assign(1, d);
    seen[ix(d)] = 1;
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      auto reach = [&](int y) {
        if (seen[ix(y)] || !evicted[ix(y)]) return;
        seen[ix(y)] = 1;
        visited.push_back(y);
        sum += g.compute(g.producers(y).front()).time;
        stack.push_back(y);
      };
      if (remakeable[ix(x)])
        for (int y : g.inputs(g.producers(x).front())) reach(y);
      for (int k : g.consumers(x))
        if (g.compute(k).kind == compute_kind::forward)
          for (int y : g.outputs(k)) reach(y);
    }
    for (int y : visited) seen[ix(y)] = 0;
    return sum;
  };
  // Frees resident activations, the smallest score first, until `need` more bytes fit.
  auto make_room = [&](bytes need, int op) -> result<void> {
    while (mem + need > budget) {
      int best = -1;
      double best_score = 0;
      for (int d = 0; d < I; ++d) {
        if (!alive[ix(d)] || !remakeable[ix(d)] || locked[ix(d)]) continue;
        const auto& p = g.compute(g.producers(d).front());
        const dtr_candidate c{p.time, neighborhood(d), g.data(d).size,
                              static_cast<double>(clock - touched[ix(d)] + 1)};
        if (c.size == 0) continue;
        const double s = heuristic(c);
        if (best < 0 || s < best_score) {
          best = d;
          best_score = s;
        }
      }
      if (best < 0) {
        bytes held = 0;
        for (int d = 0; d < I; ++d)
          if (alive[ix(d)]) held += g.data(d).size;
        return error{status::budget_too_small,
                     "dtr: '" + g.compute(op).name + "' needs " + std::to_string(held + need) +
                         " bytes while it runs (" + std::to_string(held) +
                         " held that DTR cannot evict: its inputs, gradients, parameters and what "
                         "it remakes them from; " +
                         std::to_string(need) + " it makes and its scratch), over the budget of " +
                         std::to_string(budget) + " bytes",
                     held + need};
      }
      free_data(best);
      evicted[ix(best)] = 1;
    }
    return {};
  };
  // Runs op k (fast: its fast-forward), its inputs resident and locked by the caller.
  auto run = [&](int k, bool fast) -> result<void> {
    const auto& n = g.compute(k);
    bytes made = 0;
    for (int d : g.outputs(k)) {
      if (fast && g.data(d).kind == data_kind::phantom) continue;
      if (alive[ix(d)] && g.producers(d).size() == 1) free_data(d);  // remade: freed first
      if (!alive[ix(d)]) made += g.data(d).size;
    }
    for (int d : g.inputs(k)) locked[ix(d)] += 1;
    auto room = make_room(made + (fast ? n.fast_overhead : n.overhead), k);
    for (int d : g.inputs(k)) locked[ix(d)] -= 1;
    if (!room) return room.err();
    ++clock;
    for (int d : g.inputs(k)) touched[ix(d)] = clock;
    for (int d : g.outputs(k)) {
      if (fast && g.data(d).kind == data_kind::phantom) continue;
      if (!alive[ix(d)]) {
        alive[ix(d)] = 1;
        evicted[ix(d)] = 0;
        mem += g.data(d).size;
      }
      touched[ix(d)] = clock;
    }
    out.ops.push_back(fast ? instruction::fast_forward(k) : instruction::compute(k));
    out.predicted_time += fast ? n.fast_time : n.time;
    return {};
  };
  // Makes d resident: its producer run again, its evicted inputs first (each locked once made).
  auto remake = [&](auto& self, int d) -> result<void> {
    if (alive[ix(d)]) return {};
    if (!remakeable[ix(d)])
      return error{status::solver_error,
                   "dtr: '" + g.data(d).name +
                       "' is needed but not in memory and cannot be remade (a bug in remat)",
                   {}};
    const int k = g.producers(d).front();
    std::vector<int> held;
    result<void> r{};
    for (int x : g.inputs(k)) {
      r = self(self, x);
      if (!r) break;
      locked[ix(x)] += 1;
      held.push_back(x);
    }
    if (r)
      r = run(k,
              g.data(d).kind != data_kind::phantom && g.compute(k).kind == compute_kind::forward);
    for (int x : held) locked[ix(x)] -= 1;
    return r;
  };
  for (; step < T; ++step) {
    const int k = step;
    std::vector<int> held;
    for (int x : g.inputs(k)) {
      if (auto r = remake(remake, x); !r) return r.err();
      locked[ix(x)] += 1;
      held.push_back(x);
    }
    auto r = run(k, false);
    for (int x : held) locked[ix(x)] -= 1;
    if (!r) return r.err();
    // What no later op reads is freed: k's inputs and outputs read last here, and what was
    // remade only to remake others (the sources stay: they remake everything).
    for (int d = 0; d < I; ++d) {
      if (wanted(d) || g.is_source(d)) continue;
      if (alive[ix(d)]) free_data(d);
      evicted[ix(d)] = 0;
    }
  }
  return out;
}

}  // namespace detail
}  // namespace remat
