#pragma once
// The independent oracle for pofo's model (docs/offloading.md, "The model the planners solve"):
// exhaustive search over every schedule of the grammar (segments, the loss, the backward
// sub-schedules of the checkpoint segments) and every set of offloaded segment inputs, each
// timed in the fluid model of the doc. For chains of a handful of stages.
//
// Written from the doc alone, on purpose without sim/simulate.hpp or any policy: it keeps its
// own memory state (Table 2.1, like tests/support/brute_force.hpp) and its own timeline, so that
// a bug shared by the simulator and a dynamic program cannot hide here.
//
// The model, as this file reads it (the doc is normative):
//
//  * Grammar. Forward phase: segments from stage 1. An F^all segment is `F_s^all` (s < N, the
//    next input is abar_s); a checkpoint segment [s,t] is `F_s^ck F_{s+1}^none .. F_t^none`
//    with t <= N-1 (the next input is a_t); the last segment is the loss, `F_N^all`. Then `B_N`,
//    then each segment's backward work, the segments in reverse order: `B_s` for an F^all
//    segment; sub(s,t) for a checkpoint segment, with sub(s,s) = F_s^all B_s and, for s < t,
//    F_s^all sub(s+1,t) B_s  or  F_s^ck F_{s+1}^none .. F_{s'}^none sub(s'+1,t) sub(s,s'),
//    s <= s' < t. The loss's backward work is B_N.
//  * Offloads. A segment starting at stage s may offload the plain part a_{s-1} of its input
//    (offload_schedule::offloaded holds k = s-1); an input abar_{s-1} keeps its context
//    abar_{s-1} - a_{s-1} on the device. The loss is a segment too: offloading its input is
//    allowed (never useful: the item must be back before B_N).
//  * Memory. The stored data follows Table 2.1 (state: nothing / a_k / abar_k per k, and the
//    deltas; delta_N = 0 is stored from the start). An op needs stored + output + overhead
//    (F^none/F^ck: a_l + of(l); F^all: abar_l + of_all(l); B_l: delta_{l-1} + ob(l)). An
//    offloaded a_k is left out of the stored data from the start of its segment's first forward
//    (F_s) to the start of its segment's backward work; F_s itself counts it in full.
//  * Forward phase (every op up to F_N). The offloaded a_{s-1} joins the offload queue when
//    F_s starts; the queue Q drains at beta_o while not empty. An op is checked at its start:
//    stored + Q + output + overhead <= M; it starts at the earliest time (after the previous
//    op) where that holds, Q falling linearly meanwhile; infeasible when it fails with Q = 0.
//  * Gap. After F_N: Q / beta_o (the offloads finish), then R / beta_p, R being what the
//    backward phase could not prefetch behind B_N and later ops; then B_N.
//  * Backward phase (B_N and after), simulated in reverse time: walking the ops from the last
//    one back to B_N, an op is checked at its (forward-time) end: stored + R + output +
//    overhead <= M, where R is the reverse queue (= what has been prefetched, at that instant,
//    of inputs whose segment work has not started); if it fails, the compute lane idles after
//    the op (before it in reverse) while R drains at beta_p; then R drains during the op; then
//    the inputs whose segment work starts with this op join R (at the op's forward start).
//    What remains in R after B_N is the prefetch part of the gap.
//  * Makespan = the op times + the forward waits + the gap + the backward idles.
//
// beta = +infinity: transfers are instantaneous (the queues are empty except for the input an
// F_s counts in full). beta = 0: no transfer, so any offloaded item makes the time infinite.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>

namespace remat::test {

struct offload_schedule {
  std::vector<chain_op> ops;  ///< forwards and backwards only, in order (no O/P/W)
  std::vector<int>
      offloaded;  ///< ascending k: a_k (the input of the segment at stage k+1) is offloaded
};

struct offload_optimum {
  double time = std::numeric_limits<double>::infinity();
  offload_schedule best;
  [[nodiscard]] bool feasible() const { return time < std::numeric_limits<double>::infinity(); }
};

namespace offload_detail {

inline constexpr double inf = std::numeric_limits<double>::infinity();

/// A schedule read by the grammar.
struct parsed {
  int n = 0;
  std::vector<chain_op> ops;
  std::size_t loss_backward =
      0;  ///< the index of B_N in ops; the forward phase is ops[0, loss_backward)
  struct segment {
    int s = 0, t = 0;  ///< stages; t == s for F^all segments and the loss
    bool checkpoint = false;
    std::size_t first_forward = 0;   ///< index of F_s in ops
    std::size_t first_backward = 0;  ///< index of the first op of the segment's backward work
  };
  std::vector<segment> segments;  ///< forward order, the loss last
};

/// The grammar of the doc; false when the ops do not follow it.
class parser {
 public:
  parser(int n, const std::vector<chain_op>& ops) : n_(n), ops_(ops) {}

  bool run(parsed& out) {
    out = parsed{};
    out.n = n_;
    out.ops = ops_;
    int s = 1;
    for (;;) {
      if (pos_ >= ops_.size()) return false;
      const chain_op op = ops_[pos_];
      if (op.kind != chain_op_kind::forward || op.index != s) return false;
      parsed::segment seg;
      seg.s = seg.t = s;
      seg.first_forward = pos_;
      if (s == n_) {  // the loss
        if (op.mode != forward_mode::save_all) return false;
        ++pos_;
        out.segments.push_back(seg);
        break;
      }
      if (op.mode == forward_mode::save_all) {
        ++pos_;
      } else if (op.mode == forward_mode::save_input) {
        ++pos_;
        int t = s;
        while (pos_ < ops_.size() && t + 1 < n_ &&
               ops_[pos_] == chain_op::forward(t + 1, forward_mode::no_save)) {
          ++t;
          ++pos_;
        }
        seg.t = t;
        seg.checkpoint = true;
      } else {
        return false;  // a segment never starts with F^none
      }
      out.segments.push_back(seg);
      s = seg.t + 1;
    }
    if (!expect(chain_op::backward(n_))) return false;
    out.loss_backward = pos_ - 1;
    out.segments.back().first_backward = out.loss_backward;
    for (std::size_t i = out.segments.size() - 1; i-- > 0;) {
      parsed::segment& seg = out.segments[i];
      seg.first_backward = pos_;
      if (!seg.checkpoint) {
        if (!expect(chain_op::backward(seg.s))) return false;
      } else if (!sub(seg.s, seg.t)) {
        return false;
      }
    }
    return pos_ == ops_.size();
  }

 private:
  bool expect(chain_op op) {
    if (pos_ >= ops_.size() || !(ops_[pos_] == op)) return false;
    ++pos_;
    return true;
  }
  /// sub(s, t): a persistent schedule of B_t..B_s from the input a_{s-1} (or abar_{s-1}) and
  /// delta_t.
  bool sub(int s, int t) {
    if (pos_ >= ops_.size()) return false;
    const chain_op op = ops_[pos_];
    if (op.kind != chain_op_kind::forward || op.index != s) return false;
    if (op.mode == forward_mode::save_all) {
      ++pos_;
      if (s < t && !sub(s + 1, t)) return false;
      return expect(chain_op::backward(s));
    }
    if (op.mode != forward_mode::save_input || s == t) return false;
    ++pos_;
    int sp = s;
    while (pos_ < ops_.size() && sp + 1 < t &&
           ops_[pos_] == chain_op::forward(sp + 1, forward_mode::no_save)) {
      ++sp;
      ++pos_;
    }
    return sub(sp + 1, t) && sub(s, sp);
  }

  int n_;
  const std::vector<chain_op>& ops_;
  std::size_t pos_ = 0;
};

/// Table 2.1 state: what is held of each a_k, and the gradients.
struct state {
  enum held : unsigned char { none, plain, full };
  std::vector<held> act;
  std::vector<char> grad;
  explicit state(int n)
      : act(static_cast<std::size_t>(n + 1), none), grad(static_cast<std::size_t>(n + 1), 0) {
    act[0] = plain;
    grad[static_cast<std::size_t>(n)] = 1;  // delta_N (size 0)
  }
  [[nodiscard]] held at(int k) const { return act[static_cast<std::size_t>(k)]; }
  [[nodiscard]] bool has_grad(int k) const { return grad[static_cast<std::size_t>(k)] != 0; }
  [[nodiscard]] bytes memory(const chain& c) const {
    bytes m = 0;
    for (int k = 0; k <= c.length(); ++k) {
      if (at(k) == plain) m += c.a(k);
      if (at(k) == full) m += c.abar(k);
      if (has_grad(k)) m += c.delta(k);
    }
    return m;
  }
  /// Applies op (Table 2.1) and returns its output + overhead; throws when the op is not valid
  /// in this state (a grammar-conforming schedule never is: that would be an oracle bug).
  bytes apply(const chain& c, chain_op op) {
    const int l = op.index;
    auto k = [](int i) { return static_cast<std::size_t>(i); };
    auto bug = [&](const char* why) {
      throw std::logic_error("offload_brute_force: " + to_string(op) + ": " + why);
    };
    if (op.kind == chain_op_kind::forward) {
      if (at(l - 1) == none) bug("input not stored");
      if (at(l) != none) bug("output already stored");
      if (op.mode == forward_mode::no_save) {
        if (at(l - 1) != plain || l == 1) bug("F^none of an abar input or of a_0");
        act[k(l - 1)] = none;
        act[k(l)] = plain;
        return c.a(l) + c.of(l);
      }
      if (op.mode == forward_mode::save_input) {
        act[k(l)] = plain;
        return c.a(l) + c.of(l);
      }
      act[k(l)] = full;
      return c.abar(l) + c.of_all(l);
    }
    if (op.kind != chain_op_kind::backward) bug("not a compute op");
    if (!has_grad(l) || at(l) != full || at(l - 1) == none || has_grad(l - 1)) bug("B_l's inputs");
    act[k(l)] = none;
    grad[k(l)] = 0;
    grad[k(l - 1)] = 1;
    if (at(l - 1) == plain) act[k(l - 1)] = none;
    return c.delta(l - 1) + c.ob(l);
  }
};

/// Per op: its time, the stored data before it (all of it, offloaded items included) and its
/// output + overhead. Independent of the offload decisions.
struct op_costs {
  std::vector<double> time;
  std::vector<bytes> stored;
  std::vector<bytes> extra;
};

inline op_costs costs_of(const chain& c, const parsed& p) {
  op_costs out;
  state st(c.length());
  for (const chain_op& op : p.ops) {
    out.stored.push_back(st.memory(c));
    out.extra.push_back(st.apply(c, op));
    out.time.push_back(op.kind == chain_op_kind::forward ? c.uf(op.index) : c.ub(op.index));
  }
  if (st.memory(c) != c.delta(0) || !st.has_grad(0))
    throw std::logic_error(
        "offload_brute_force: a schedule of the grammar does not end with delta_0 alone");
  return out;
}

/// Q after `dt` seconds of draining at beta.
inline double drained(double q, double dt, double beta) {
  if (q <= 0) return 0;
  if (std::isinf(beta)) return 0;
  return std::max(0.0, q - dt * beta);
}

/// The fluid time of a parsed schedule with the segments' inputs offloaded where
/// offload[i] (segment i, forward order).
inline double simulate(const chain& c, const parsed& p, const op_costs& oc,
                       const std::vector<char>& offload, bytes budget, double beta_o,
                       double beta_p) {
  const bool any = std::find(offload.begin(), offload.end(), char{1}) != offload.end();
  if (any && (beta_o <= 0 || beta_p <= 0)) return inf;
  const auto m = static_cast<double>(budget);
  const std::size_t nops = p.ops.size();
  // The bytes of offloaded inputs left out of the stored data before op i (the item of segment
  // g is out from just after F_s starts to when its backward work starts).
  auto left_out = [&](std::size_t i) {
    bytes x = 0;
    for (std::size_t g = 0; g < p.segments.size(); ++g) {
      if (!offload[g]) continue;
      const auto& seg = p.segments[g];
      const bool out = i < p.loss_backward ? seg.first_forward < i : seg.first_backward > i;
      if (!out) continue;
      x += c.a(seg.s - 1);
      // The op must not read an item that is away (F_s / B_s of the item's stage s).
      if (p.ops[i].index == seg.s)
        throw std::logic_error("offload_brute_force: " + to_string(p.ops[i]) +
                               " reads an offloaded input");
    }
    return x;
  };
  double total = 0;
  // Forward phase.
  double q = 0;
  for (std::size_t i = 0; i < p.loss_backward; ++i) {
    const auto need = static_cast<double>(oc.stored[i] - left_out(i) + oc.extra[i]);
    if (need > m) return inf;
    if (need + q > m) {  // wait for the offload queue (q > 0 here, and beta_o finite)
      const double w = (need + q - m) / beta_o;
      total += w;
      q = m - need;
    }
    for (std::size_t g = 0; g < p.segments.size(); ++g)
      if (offload[g] && p.segments[g].first_forward == i) {
        q += static_cast<double>(c.a(p.segments[g].s - 1));
        if (std::isinf(beta_o)) q = 0;
      }
    total += oc.time[i];
    q = drained(q, oc.time[i], beta_o);
  }
  if (q > 0) total += q / beta_o;  // the offloads finish before any prefetch
  // Backward phase, in reverse time.
  double r = 0;
  for (std::size_t i = nops; i-- > p.loss_backward;) {
    const auto need = static_cast<double>(oc.stored[i] - left_out(i) + oc.extra[i]);
    if (need > m) return inf;
    if (need + r >
        m) {  // idle after the op (forward time) while the prefetches it cannot hold wait
      const double w = (need + r - m) / beta_p;
      total += w;
      r = m - need;
    }
    total += oc.time[i];
    r = drained(r, oc.time[i], beta_p);
    for (std::size_t g = 0; g < p.segments.size(); ++g)
      if (offload[g] && p.segments[g].first_backward == i) {
        r += static_cast<double>(c.a(p.segments[g].s - 1));
        if (std::isinf(beta_p)) r = 0;
      }
  }
  if (r > 0) total += r / beta_p;  // the prefetches that nothing after B_N can hide
  return total;
}

/// Every op sequence of the grammar for an N-stage chain (no offload decisions).
/// recompute = false: only F^all segments, then B_N..B_1.
inline void enumerate(int n, bool recompute, std::vector<std::vector<chain_op>>& out) {
  using ops_t = std::vector<chain_op>;
  if (!recompute) {
    ops_t ops;
    for (int l = 1; l <= n; ++l) ops.push_back(chain_op::forward(l, forward_mode::save_all));
    for (int l = n; l >= 1; --l) ops.push_back(chain_op::backward(l));
    out.push_back(std::move(ops));
    return;
  }
  // All sub(s, t) sequences.
  std::map<std::pair<int, int>, std::vector<ops_t>> subs;
  std::function<const std::vector<ops_t>&(int, int)> sub = [&](int s,
                                                               int t) -> const std::vector<ops_t>& {
    auto it = subs.find({s, t});
    if (it != subs.end()) return it->second;
    std::vector<ops_t> res;
    // F_s^all sub(s+1, t) B_s
    if (s == t) {
      res.push_back({chain_op::forward(s, forward_mode::save_all), chain_op::backward(s)});
    } else {
      for (const ops_t& inner : sub(s + 1, t)) {
        ops_t o{chain_op::forward(s, forward_mode::save_all)};
        o.insert(o.end(), inner.begin(), inner.end());
        o.push_back(chain_op::backward(s));
        res.push_back(std::move(o));
      }
      // F_s^ck F_{s+1}^none .. F_{s'}^none sub(s'+1, t) sub(s, s')
      for (int sp = s; sp < t; ++sp)
        for (const ops_t& head : sub(sp + 1, t))
          for (const ops_t& tail : sub(s, sp)) {
            ops_t o{chain_op::forward(s, forward_mode::save_input)};
            for (int h = s + 1; h <= sp; ++h)
              o.push_back(chain_op::forward(h, forward_mode::no_save));
            o.insert(o.end(), head.begin(), head.end());
            o.insert(o.end(), tail.begin(), tail.end());
            res.push_back(std::move(o));
          }
    }
    return subs.emplace(std::pair{s, t}, std::move(res)).first->second;
  };
  // Segmentations of stages 1..N-1, then the loss.
  struct seg {
    int s, t;
    bool checkpoint;
  };
  std::vector<seg> segs;
  std::function<void(int)> forward = [&](int s) {
    if (s == n) {
      // Forward ops, F_N, B_N, then the backward work of each segment in reverse order; every
      // combination of the checkpoint segments' sub-schedules.
      ops_t base;
      for (const seg& g : segs) {
        base.push_back(chain_op::forward(
            g.s, g.checkpoint ? forward_mode::save_input : forward_mode::save_all));
        for (int h = g.s + 1; h <= g.t; ++h)
          base.push_back(chain_op::forward(h, forward_mode::no_save));
      }
      base.push_back(chain_op::forward(n, forward_mode::save_all));
      base.push_back(chain_op::backward(n));
      std::function<void(std::size_t, ops_t&)> back = [&](std::size_t left, ops_t& ops) {
        if (left == 0) {
          out.push_back(ops);
          return;
        }
        const seg& g = segs[left - 1];
        if (!g.checkpoint) {
          ops.push_back(chain_op::backward(g.s));
          back(left - 1, ops);
          ops.pop_back();
          return;
        }
        for (const ops_t& w : sub(g.s, g.t)) {
          const std::size_t size = ops.size();
          ops.insert(ops.end(), w.begin(), w.end());
          back(left - 1, ops);
          ops.resize(size);
        }
      };
      back(segs.size(), base);
      return;
    }
    segs.push_back({s, s, false});  // F_s^all
    forward(s + 1);
    segs.pop_back();
    for (int t = s; t <= n - 1; ++t) {  // checkpoint segment [s, t]
      segs.push_back({s, t, true});
      forward(t + 1);
      segs.pop_back();
    }
  };
  forward(1);
}

/// The parsed schedules of the grammar for N stages, computed once per (N, recompute).
inline const std::vector<parsed>& all_schedules(int n, bool recompute) {
  static std::mutex mu;
  static std::map<std::pair<int, bool>, std::vector<parsed>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({n, recompute});
  if (it != cache.end()) return it->second;
  std::vector<std::vector<chain_op>> seqs;
  enumerate(n, recompute, seqs);
  std::vector<parsed> res;
  res.reserve(seqs.size());
  for (const auto& ops : seqs) {
    parsed p;
    if (!parser(n, ops).run(p))
      throw std::logic_error("offload_brute_force: an enumerated schedule does not parse: " +
                             to_string(ops));
    res.push_back(std::move(p));
  }
  return cache.emplace(std::pair{n, recompute}, std::move(res)).first->second;
}

}  // namespace offload_detail

/// The time of one schedule in pofo's model, or +infinity when it does not follow the grammar
/// (segments, loss, backward sub-schedules; offloaded = ascending inputs of segments) or does not
/// fit the budget. budget: bytes, everything on the device (a_0 included). beta_o / beta_p: bytes
/// per second of offloads / prefetches; +infinity = instantaneous; 0 = no transfer possible.
inline double fluid_time(const chain& c, const offload_schedule& s, bytes budget, double beta_o,
                         double beta_p) {
  using namespace offload_detail;
  const int n = c.length();
  if (n < 1) return inf;
  parsed p;
  if (!parser(n, s.ops).run(p)) return inf;
  std::vector<char> offload(p.segments.size(), 0);
  for (std::size_t i = 0; i < s.offloaded.size(); ++i) {
    if (i > 0 && s.offloaded[i] <= s.offloaded[i - 1]) return inf;  // not ascending
    std::size_t g = 0;
    while (g < p.segments.size() && p.segments[g].s - 1 != s.offloaded[i]) ++g;
    if (g == p.segments.size()) return inf;  // not the input of a segment
    offload[g] = 1;
  }
  return simulate(c, p, costs_of(c, p), offload, budget, beta_o, beta_p);
}

/// The minimum of fluid_time over every schedule of the grammar and every offload set.
/// recompute = false: only schedules without recomputation (every forward-phase segment is F^all,
/// the backward phase is B_N..B_1), the offload-only problem of thesis ch. 3.
inline offload_optimum offload_brute_force(const chain& c, bytes budget, double beta_o,
                                           double beta_p, bool recompute = true) {
  using namespace offload_detail;
  const int n = c.length();
  if (n < 1 || n > 9)
    throw std::invalid_argument("offload_brute_force: chains of 1..9 stages only");
  offload_optimum best;
  const bool transfers = beta_o > 0 && beta_p > 0;
  for (const parsed& p : all_schedules(n, recompute)) {
    const op_costs oc = costs_of(c, p);
    const std::size_t g = p.segments.size();
    const std::uint64_t subsets = transfers ? std::uint64_t{1} << g : 1;
    std::vector<char> offload(g, 0);
    for (std::uint64_t mask = 0; mask < subsets; ++mask) {
      for (std::size_t i = 0; i < g; ++i) offload[i] = static_cast<char>((mask >> i) & 1u);
      const double t = simulate(c, p, oc, offload, budget, beta_o, beta_p);
      if (t < best.time) {
        best.time = t;
        best.best.ops = p.ops;
        best.best.offloaded.clear();
        for (std::size_t i = 0; i < g; ++i)
          if (offload[i]) best.best.offloaded.push_back(p.segments[i].s - 1);
      }
    }
  }
  return best;
}

}  // namespace remat::test
