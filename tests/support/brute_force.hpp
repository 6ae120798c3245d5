#pragma once
// The independent oracle for chain rematerialization: exhaustive search over every sequence of
// the Table 2.1 operations ([Shilova21, §2.1.2]), for chains of a handful of
// stages.
//
// Written from Table 2.1 alone, on purpose without sim/simulate.hpp or any policy: it keeps its
// own memory state and its own transition rules, so that a bug shared by the simulator and a
// dynamic program cannot hide here.
//
// State: for each index k = 0..N, nothing, a plain a_k or abar_k; and the set of gradients
// delta_k present. Start {a_0, delta_N}; goal exactly {delta_0}. The operations, l = 1..N:
//   F_l^none  needs a plain a_{l-1}; removes it, adds a_l
//   F_l^ck    needs a_{l-1} or abar_{l-1} (kept); adds a_l
//   F_l^all   needs a_{l-1} or abar_{l-1} (kept); adds abar_l
//   B_l       needs delta_l, abar_l, and a_{l-1} or abar_{l-1}; removes delta_l, abar_l and a
//             plain a_{l-1} (an abar_{l-1} is kept); adds delta_{l-1}
// Producing a tensor that is already in memory is not allowed (memory is a set of tensors; an
// abar_l contains a_l, so neither may be produced while the other is there). No delete op.
// Peak while an op runs = stored data + the op's output + its overhead; a schedule is feasible
// for budget M when every op's peak is <= M (M counts everything, a_0 included). Cost = sum of
// the op times. Search: Dijkstra over states (all costs are >= 0); for the minimum budget, the
// same search with max in place of + (the bottleneck path).
//
// It searches the chain notation's ops (chain_op, schedule/notation.hpp) in its own state model;
// the sequences it returns are programs once lowered (lower(n, ops)), which the tests replay in
// the simulator on the chain's graph (built once per chain) to cross-check both.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>

namespace remat::test {

struct brute_force_result {
  double time = std::numeric_limits<double>::infinity();  ///< optimal makespan; inf: none
  std::vector<chain_op> ops;  ///< one optimal sequence (chain notation), if asked
  [[nodiscard]] bool feasible() const { return time < std::numeric_limits<double>::infinity(); }
};

class brute_force {
 public:
  /// Up to 12 stages fit the state encoding; the search is meant for N <= 5 (and a few larger
  /// chains whose budget keeps the reachable state space small).
  ///
  /// loss_gradient_bytes: the size of delta_N. remat's chain has delta_N = 0 (the thesis'
  /// convention: docs/chain-dps.md, D1); hand computations that take delta_k = a_k for every k,
  /// the loss included, are only reproduced with delta_N = a_N.
  ///
  /// with_options: F_l^all and B_l may use any option of the stage's cost set (chain.hpp,
  /// RK-Rotor's choice, docs/rockmate.md): abar_l is held with the option that made it, and B_l
  /// runs with that option. Up to 6 options per stage.
  explicit brute_force(const chain& c, std::optional<bytes> loss_gradient_bytes = std::nullopt,
                       bool with_options = false)
      : c_(c),
        n_(c.length()),
        delta_n_(loss_gradient_bytes.value_or(c.delta(c.length()))),
        with_options_(with_options) {
    if (n_ < 1 || n_ > 12) throw std::invalid_argument("brute_force: chains of 1..12 stages only");
    for (int l = 1; l <= n_ && with_options; ++l)
      if (c.option_count(l) > 6)
        throw std::invalid_argument("brute_force: at most 6 options per stage");
  }

  /// The optimal makespan within budget M (infinity if no sequence fits), and one optimal
  /// sequence when with_ops.
  [[nodiscard]] brute_force_result optimum(bytes budget, bool with_ops = false) const {
    brute_force_result r;
    const auto found = search(
        budget, [](double acc, double op_time, bytes) { return acc + op_time; }, 0.0);
    if (!found.first) return r;
    r.time = found.second.label;
    if (with_ops) r.ops = found.second.path;
    return r;
  }

  /// The smallest budget for which some sequence exists (store-all always works, so finite).
  [[nodiscard]] bytes minimum_budget() const {
    const auto found = search(
        unlimited_bytes,
        [](double acc, double, bytes peak) { return std::max(acc, static_cast<double>(peak)); },
        static_cast<double>(c_.a(0) + delta_n_));
    if (!found.first) throw std::logic_error("brute_force: no sequence at all (impossible)");
    return static_cast<bytes>(found.second.label);
  }

 private:
  // What is held of a_k: nothing, a plain a_k, or abar_k made by option o (full + o).
  using held = std::uint64_t;
  static constexpr held none = 0, plain = 1, full = 2;
  // Key: 3 bits per activation index k = 0..N (bits 3k..3k+2), then one bit per gradient.
  [[nodiscard]] held act(std::uint64_t key, int k) const { return (key >> (3 * k)) & 7u; }
  static std::uint64_t set_act(std::uint64_t key, int k, held h) {
    return (key & ~(std::uint64_t{7} << (3 * k))) | (h << (3 * k));
  }
  [[nodiscard]] std::uint64_t grad_bit(int k) const {
    return std::uint64_t{1} << (3 * (n_ + 1) + k);
  }
  [[nodiscard]] stage_option option(int l, held h) const {
    return c_.option(l, static_cast<int>(h - full));
  }
  [[nodiscard]] bool grad(std::uint64_t key, int k) const { return (key & grad_bit(k)) != 0; }

  [[nodiscard]] bytes delta(int k) const { return k == n_ ? delta_n_ : c_.delta(k); }

  [[nodiscard]] bytes memory(std::uint64_t key) const {
    bytes m = 0;
    for (int k = 0; k <= n_; ++k) {
      if (act(key, k) == plain) m += c_.a(k);
      if (act(key, k) >= full) m += k == 0 ? c_.abar(0) : option(k, act(key, k)).saved_bytes;
      if (grad(key, k)) m += delta(k);
    }
    return m;
  }

  struct step {
    chain_op op;
    std::uint64_t next;
    bytes peak;
    double time;
  };

  /// Every op allowed in state `key` (the budget is checked by the caller).
  [[nodiscard]] std::vector<step> moves(std::uint64_t key) const {
    std::vector<step> out;
    const bytes mem = memory(key);
    for (int l = 1; l <= n_; ++l) {
      const held in = act(key, l - 1);
      // Forwards: an input in some form, and nothing of a_l / abar_l in memory yet.
      if (in != none && act(key, l) == none) {
        if (in == plain)
          out.push_back({chain_op::forward(l, forward_mode::no_save),
                         set_act(set_act(key, l - 1, none), l, plain), mem + c_.a(l) + c_.of(l),
                         c_.uf(l)});
        out.push_back({chain_op::forward(l, forward_mode::save_input), set_act(key, l, plain),
                       mem + c_.a(l) + c_.of(l), c_.uf(l)});
        for (int o = 0; o < (with_options_ ? c_.option_count(l) : 1); ++o) {
          const stage_option x = c_.option(l, o);
          out.push_back({chain_op::forward(l, forward_mode::save_all),
                         set_act(key, l, full + static_cast<held>(o)),
                         mem + x.saved_bytes + x.forward_overhead_bytes, x.forward_time});
        }
      }
      // Backward.
      if (grad(key, l) && act(key, l) >= full && in != none && !grad(key, l - 1)) {
        const stage_option x = option(l, act(key, l));
        std::uint64_t next = set_act(key, l, none) & ~grad_bit(l);
        if (in == plain) next = set_act(next, l - 1, none);
        next |= grad_bit(l - 1);
        out.push_back({chain_op::backward(l), next, mem + delta(l - 1) + x.backward_overhead_bytes,
                       x.backward_time});
      }
    }
    return out;
  }

  struct found_t {
    double label = 0;
    std::vector<chain_op> path;
  };

  /// Dijkstra with a monotone label combination (+ or max): all labels only grow along a path.
  template <class Combine>
  [[nodiscard]] std::pair<bool, found_t> search(bytes budget, Combine combine,
                                                double start_label) const {
    struct node {
      double label;
      std::uint64_t prev;
      chain_op op;
      bool done;
    };
    const std::uint64_t start = set_act(0, 0, plain) | grad_bit(n_);
    const std::uint64_t goal = grad_bit(0);
    std::unordered_map<std::uint64_t, node> seen;
    using item = std::pair<double, std::uint64_t>;
    std::priority_queue<item, std::vector<item>, std::greater<>> pq;
    seen[start] = {start_label, start, chain_op{}, false};
    pq.push({start_label, start});
    while (!pq.empty()) {
      const auto [d, key] = pq.top();
      pq.pop();
      node& cur = seen[key];
      if (cur.done || d > cur.label) continue;
      cur.done = true;
      if (key == goal) {
        found_t f;
        f.label = d;
        for (std::uint64_t k = key; k != start;) {
          const node& nd = seen.at(k);
          f.path.push_back(nd.op);
          k = nd.prev;
        }
        std::reverse(f.path.begin(), f.path.end());
        return {true, std::move(f)};
      }
      for (const step& s : moves(key)) {
        if (s.peak > budget) continue;
        const double nl = combine(d, s.time, s.peak);
        auto it = seen.find(s.next);
        if (it == seen.end()) {
          seen.emplace(s.next, node{nl, key, s.op, false});
          pq.push({nl, s.next});
        } else if (!it->second.done && nl < it->second.label) {
          it->second = node{nl, key, s.op, false};
          pq.push({nl, s.next});
        }
      }
    }
    return {false, {}};
  }

  chain c_;  // a copy: the oracle never depends on the caller keeping the chain alive
  int n_;
  bytes delta_n_;
  bool with_options_ = false;
};

}  // namespace remat::test
