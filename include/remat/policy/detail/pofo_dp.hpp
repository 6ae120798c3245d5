#pragma once
// The offloading DPs of [Shilova21, Part II] in pofo's model: pofo (recompute and offload,
// ch. 4, §4.1-4.2, OC_x and C_Δ of Eqs. 4.3-4.4) and, as its restriction to F^all segments,
// Alg. 5 / DYNPROG (§3.3.3); recomputation::allowed or ::none chooses. Different offload and
// prefetch rates are a direct generalisation; computed Δ's are rounded up to the slot grid.
//
// Speed: a flat open-addressing memo per stage, checkpoint runs extended t by t, branch and bound
// on the best so far, states over the budget cut at once, C_Δ kept in rows shared by the states
// that differ only in Δ_F, and each state's memo lookups prefetched before they are made.
//
// The recurrences and every decision taken with the thesis in hand: docs/offloading.md.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/policy/detail/big_array.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/rotor.hpp>

namespace remat::detail {

/// Transfer rates in slots per second: 0 = no transfer possible, infinity = instantaneous.
struct slot_rates {
  double off = 0;  ///< β_o
  double pre = 0;  ///< β_p
  [[nodiscard]] bool any() const { return off > 0 && pre > 0; }
};

/// The idle time that lets `excess` slots drain at `rate` (0 when nothing is in excess).
inline double idle_for(double excess, double rate) {
  if (excess <= 0) return 0;
  if (std::isinf(rate)) return 0;
  if (rate <= 0) return std::numeric_limits<double>::infinity();
  return excess / rate;
}

/// What is left of `delta` after `time` seconds at `rate`.
inline double drained(double delta, double time, double rate) {
  if (delta <= 0) return 0;
  if (std::isinf(rate)) return 0;
  return std::max(delta - time * rate, 0.0);
}

/// The time to move `delta` at `rate`.
inline double transfer_time(double delta, double rate) {
  if (delta <= 0 || std::isinf(rate)) return 0;
  if (rate <= 0) return std::numeric_limits<double>::infinity();
  return delta / rate;
}

/// A computed Δ on the slot grid: rounded up, but not past a value within rounding noise.
inline std::int64_t grid_up(double v) {
  if (v <= 0) return 0;
  return static_cast<std::int64_t>(std::ceil(v - 1e-9 * std::max(1.0, v)));
}

/// What pofo decided: the chain ops without transfers (forward phase, B_N, the segments'
/// backward work in reverse), the activations whose plain part is offloaded, and the DP's time.
struct offload_decisions {
  std::vector<chain_op> ops;
  std::vector<int> offloaded;  ///< ascending k: a_k moves
  double time = 0;
};

/// Writes decisions segment by segment (pofo's reconstruction, the minimum-memory schedule): the
/// forward phase in order, each segment's backward work held until the loss, then in reverse.
class segment_writer {
 public:
  void all(int s) {
    ops_.push_back(chain_op::forward(s, forward_mode::save_all));
    backward_.push_back({chain_op::backward(s)});
  }
  void checkpoint(int s, int t, std::vector<chain_op> work) {
    ops_.push_back(chain_op::forward(s, forward_mode::save_input));
    for (int k = s + 1; k <= t; ++k) ops_.push_back(chain_op::forward(k, forward_mode::no_save));
    backward_.push_back(std::move(work));
  }
  /// The loss (stage n) and the backward phase.
  offload_decisions finish(int n, std::vector<int> offloaded, double time) {
    ops_.push_back(chain_op::forward(n, forward_mode::save_all));
    ops_.push_back(chain_op::backward(n));
    for (auto it = backward_.rbegin(); it != backward_.rend(); ++it)
      ops_.insert(ops_.end(), it->begin(), it->end());
    return {std::move(ops_), std::move(offloaded), time};
  }

 private:
  std::vector<chain_op> ops_;
  std::vector<std::vector<chain_op>> backward_;  ///< per segment, in forward order
};

/// Whether a plan may recompute (pofo: checkpointed segments) or only store and offload
/// (DYNPROG, GREEDY).
enum class recomputation { allowed, none };

/// Thrown through the recursion when the deadline passes; caught by the policies.
struct deadline_passed {};

/// An open-addressing hash table from 64-bit keys (never ~0) to V: the DP's memo, without a
/// node allocation per state (std::unordered_map spent most of pofo's time in them).
template <class V>
class flat_memo {
 public:
  flat_memo() { rehash(16); }
  [[nodiscard]] const V* find(std::uint64_t k) const {
    for (std::size_t i = slot(k);; i = (i + 1) & mask_) {
      if (keys_[i] == k) return &vals_[i];
      if (keys_[i] == empty) return nullptr;
    }
  }
  void insert(std::uint64_t k, const V& v) {
    if (2 * (count_ + 1) > keys_.size()) rehash(2 * keys_.size());
    std::size_t i = slot(k);
    while (keys_[i] != empty && keys_[i] != k) i = (i + 1) & mask_;
    if (keys_[i] == empty) ++count_;
    keys_[i] = k;
    vals_[i] = v;
  }
  [[nodiscard]] std::size_t size() const { return count_; }
  /// Asks the cache for k's first slot (a hint; a later rehash only wastes it).
  void prefetch([[maybe_unused]] std::uint64_t k) const {
#if defined(__GNUC__)
    const std::size_t i = slot(k);
    __builtin_prefetch(keys_.get() + i);
    __builtin_prefetch(vals_.get() + i);
#endif
  }

 private:
  static constexpr std::uint64_t empty = ~std::uint64_t{0};
  [[nodiscard]] std::size_t slot(std::uint64_t k) const {
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void rehash(std::size_t n) {
    big_array<std::uint64_t> keys(n);
    big_array<V> vals(n);
    std::fill_n(keys.get(), n, empty);
    std::swap(keys, keys_);
    std::swap(vals, vals_);
    mask_ = n - 1;
    shift_ = 64 - static_cast<int>(std::bit_width(n) - 1);
    count_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != empty) insert(keys[i], vals[i]);
  }
  big_array<std::uint64_t> keys_;
  big_array<V> vals_;
  std::size_t count_ = 0, mask_ = 0;
  int shift_ = 60;
};

/// pofo_dp's limits: slots (the budget in slots) below 2^20, stages below 2^12 (its memo keys).
inline constexpr std::int64_t pofo_max_slots = (std::int64_t{1} << 20) - 1;
inline constexpr int pofo_max_stages = (1 << 12) - 1;

class pofo_dp {
 public:
  /// recomputation::allowed: checkpoint segments (pofo); none: Alg. 5 (DYNPROG). forced (index
  /// s = 1..N-1, optional): -1 lets the DP decide whether segment s offloads; a value >= 0 is
  /// the part of its input that moves (0: kept; GREEDY's and OFF_frac's fixed decisions, a
  /// fraction of a_{s-1} allowed).
  pofo_dp(const discrete_chain& d, slot_rates r, recomputation recompute, const deadline& dl,
          std::vector<std::int64_t> forced = {})
      : d_(d),
        r_(r),
        recompute_(recompute == recomputation::allowed),
        n_(d.n),
        m_(d.slots),
        poll_(dl, 1 << 14),
        forced_(std::move(forced)) {
    oc_.resize(static_cast<std::size_t>(n_ + 2));
    backs_at_.resize(static_cast<std::size_t>(n_ + 2));
    backs_.resize(static_cast<std::size_t>(n_ + 2));
    moves_.resize(static_cast<std::size_t>(n_ + 2));
    scratch_.resize(static_cast<std::size_t>(n_ + 2));
    prefix_.assign(static_cast<std::size_t>(n_ + 1), 0.0);
    for (int k = 1; k <= n_; ++k) prefix_[ix(k)] = prefix_[ix(k - 1)] + d_.uf[ix(k)] + d_.ub[ix(k)];
  }

  /// The optimal time (infinity if no schedule fits); throws deadline_passed.
  double solve(const std::function<void(double)>& progress = {}) {
    progress_ = progress;
    top_ = true;
    const double v = oc(1, 0, 0, 0, 0).value;
    if (progress_) progress_(1.0);
    return v;
  }

  /// The time of storing everything with every decision forced (GREEDY, OFF_frac): one path,
  /// no memo, so sizes of any magnitude (exact bytes) are fine.
  [[nodiscard]] double walk() const {
    double total = 0;
    std::int64_t a = 0, df = 0, db = 0;
    for (int s = 1; s <= n_; ++s) {
      const next_state nx = after_all(s, s == 1 ? 0 : 1, a, df, db, s < n_ && forced(s) > 0);
      if (nx.time == inf) return inf;
      total += nx.time;
      a = nx.a;
      df = nx.df;
      db = nx.db;
    }
    return total;
  }

  /// The schedule of solve()'s value (call after it).
  [[nodiscard]] offload_decisions reconstruct() {
    segment_writer w;
    std::vector<int> offloaded;
    int s = 1, x = 0;
    std::int64_t a = 0, df = 0, db = 0;
    const double time = oc(1, 0, 0, 0, 0).value;
    while (s < n_) {
      const oc_entry e = oc(s, x, a, df, db);
      const next_state nx = e.t == 0
                                ? after_all(s, x, a, df, db, e.offload)
                                : after_ck(s, x, a, df, db, e.offload, stats_of(s, x, a, e.t),
                                           [&] { return cd(s, e.t, a + input(s, x), db).value; });
      if (e.offload) offloaded.push_back(s - 1);
      if (e.t == 0) {
        w.all(s);
        s += 1;
        x = 1;
      } else {
        std::vector<chain_op> work;
        emit_cd(s, e.t, a + input(s, x), db, work);
        w.checkpoint(s, e.t, std::move(work));
        s = e.t + 1;
        x = 0;
      }
      a = nx.a;
      df = nx.df;
      db = nx.db;
    }
    return w.finish(n_, std::move(offloaded), time);
  }

  /// States memoised so far (for the benchmarks).
  [[nodiscard]] std::size_t states() const {
    std::size_t k = cd_.size();
    for (const auto& m : oc_) k += m.size();
    return k;
  }

 private:
  static constexpr double inf = std::numeric_limits<double>::infinity();

  struct oc_entry {
    double value = inf;
    int t = 0;             ///< 0: F^all segment (or the loss); else the checkpoint segment's end
    bool offload = false;  ///< v: the input's plain part is offloaded
  };
  struct cd_entry {
    double value = inf;
    int split = 0;  ///< 0: F^all move (or s == t); else s'
  };
  struct next_state {
    double time = inf;  ///< the segment's own time (compute + idle), inf: infeasible
    std::int64_t a = 0, df = 0, db = 0;
  };
  /// A move of OC_x(s, ...): segment end t (0: F^all), decision v, and the state it leads to.
  struct move {
    int t = 0;
    bool off = false;
    next_state nx;
    [[nodiscard]] int next_stage(int s) const { return t == 0 ? s + 1 : t + 1; }
    [[nodiscard]] int next_x() const { return t == 0 ? 1 : 0; }
  };
  /// Memo keys: 20 bits per size (pofo_max_slots), 12 per stage.
  static std::uint64_t oc_key(int x, std::int64_t a, std::int64_t df, std::int64_t db) {
    return static_cast<std::uint64_t>(x) | static_cast<std::uint64_t>(a) << 1 |
           static_cast<std::uint64_t>(df) << 21 | static_cast<std::uint64_t>(db) << 41;
  }
  static std::uint64_t cd_key(int s, int t, std::int64_t a, std::int64_t delta) {
    return static_cast<std::uint64_t>(s) | static_cast<std::uint64_t>(t) << 12 |
           static_cast<std::uint64_t>(a) << 24 | static_cast<std::uint64_t>(delta) << 44;
  }
  /// A checkpoint segment's forward run F_s^ck .. F_t^none: whether it fits with the input kept
  /// and with it offloaded, the worst need less what drains before it (Lemma 8), its time.
  struct run_stats {
    bool keep_fits = true, off_fits = true;
    double worst = -std::numeric_limits<double>::infinity();
    double sum_f = 0;
  };
  /// Extends the stats of the run s..t-1 to s..t.
  void extend(run_stats& r, int s, int x, std::int64_t a, int t) const {
    const std::int64_t need = d_.f_none(s, t) + d_.delta[ix(n_)];
    const std::int64_t in = input(s, x);
    if (need + in > m_ - a) r.keep_fits = false;
    if (need + (t == s ? in : kept(s, x)) > m_ - a) r.off_fits = false;
    if (!std::isinf(r_.off))
      r.worst = std::max(r.worst, static_cast<double>(need) - r_.off * r.sum_f);
    r.sum_f += d_.uf[ix(t)];
  }

  [[nodiscard]] std::int64_t input(int s, int x) const {
    return x ? d_.abar[ix(s - 1)] : d_.a[ix(s - 1)];
  }
  /// sum of u_F + u_B over stages s..t.
  [[nodiscard]] double ideal(int s, int t) const { return prefix_[ix(t)] - prefix_[ix(s - 1)]; }
  /// F_s^all's and B_s's needs besides what is stored, with delta_t the stored gradient.
  [[nodiscard]] std::int64_t need_fall(int s, int t) const {
    return d_.delta[ix(t)] + d_.abar[ix(s)] + d_.of_all[ix(s)];
  }
  [[nodiscard]] std::int64_t need_b(int s) const {
    return d_.abar[ix(s)] + d_.delta[ix(s)] + d_.delta[ix(s - 1)] + d_.ob[ix(s)];
  }

  /// An F^all segment at s < N (Case 1), or the loss when s == N, with decision v.
  [[nodiscard]] next_state after_all(int s, int x, std::int64_t a, std::int64_t df, std::int64_t db,
                                     bool off) const {
    next_state r;
    const std::int64_t in = input(s, x);
    const std::int64_t nf = need_fall(s, n_), nb = need_b(s);
    if (nf + in > m_ - a || nb + in > m_ - a) return r;
    const double ef = idle_for(static_cast<double>(nf - m_ + a + df + in), r_.off);
    const double eb = idle_for(static_cast<double>(nb - m_ + a + db + in), r_.pre);
    const double uf = d_.uf[ix(s)], ub = d_.ub[ix(s)];
    if (s == n_) {
      const double rf = drained(static_cast<double>(df), uf + ef, r_.off);
      const double rb = drained(static_cast<double>(db), ub + eb, r_.pre);
      r.time = uf + ub + ef + eb + transfer_time(rf, r_.off) + transfer_time(rb, r_.pre);
      return r;
    }
    const std::int64_t item = off ? moved(s) : 0;
    r.time = uf + ub + ef + eb;
    r.a = a + (off ? kept(s, x) : in);
    r.df = grid_up(drained(static_cast<double>(df + item), uf + ef, r_.off));
    r.db = grid_up(drained(static_cast<double>(db), ub + eb, r_.pre)) + item;
    return r;
  }

  /// A checkpoint segment [s, t] (Case 2) with decision v, its run's stats `run`; its backward
  /// work's time is C_Δ(s, t, a + input, db), which `back()` gives (asked only when the run fits).
  template <class Back>
  [[nodiscard]] next_state after_ck(int s, int x, std::int64_t a, std::int64_t df, std::int64_t db,
                                    bool off, const run_stats& run, Back&& back_of) {
    next_state r;
    if (!(off ? run.off_fits : run.keep_fits)) return r;
    const std::int64_t in = input(s, x);
    const std::int64_t item = off ? moved(s) : 0;
    const double ef = std::isinf(r_.off)
                          ? 0.0
                          : idle_for(run.worst - static_cast<double>(m_ - a - df - in), r_.off);
    const double back = back_of();
    if (back == inf) return r;
    r.time = run.sum_f + ef + back;
    r.a = a + (off ? kept(s, x) : in);
    r.df = grid_up(drained(static_cast<double>(df + item), run.sum_f + ef, r_.off));
    r.db = grid_up(drained(static_cast<double>(db), back, r_.pre)) + item;
    return r;
  }
  [[nodiscard]] run_stats stats_of(int s, int x, std::int64_t a, int t) const {
    run_stats r;
    for (int k = s; k <= t; ++k) extend(r, s, x, a, k);
    return r;
  }

  [[nodiscard]] std::int64_t forced(int s) const {
    return ix(s) < forced_.size() ? forced_[ix(s)] : -1;
  }
  /// What an offload of segment s's input moves: its plain part, or the forced amount.
  [[nodiscard]] std::int64_t moved(int s) const {
    return forced(s) >= 0 ? forced(s) : d_.a[ix(s - 1)];
  }
  /// What stays on the device of segment s's input when it is offloaded (the layer's context).
  [[nodiscard]] std::int64_t kept(int s, int x) const {
    if (forced(s) >= 0) return input(s, x) - forced(s);
    return x ? d_.context[ix(s - 1)] : 0;
  }
  [[nodiscard]] bool can_offload(int s) const { return r_.any() && s < n_ && moved(s) > 0; }
  [[nodiscard]] bool can_keep(int s) const { return forced(s) <= 0; }

  /// What is pending is on the device, and what is to prefetch must be on it with A by the next
  /// segment's work: past the budget, OC has no schedule (this also bounds the memo's keys).
  [[nodiscard]] bool within_budget(std::int64_t a, std::int64_t df, std::int64_t db) const {
    return a + df <= m_ && a + db <= m_;
  }

  oc_entry oc(int s, int x, std::int64_t a, std::int64_t df, std::int64_t db) {
    if (!within_budget(a, df, db)) return {};
    auto& memo = oc_[ix(s)];  // recursion reaches later stages only: no other insert here
    const std::uint64_t k = oc_key(x, a, df, db);
    if (const oc_entry* e = memo.find(k)) return *e;
    const oc_entry e = oc_compute(s, x, a, df, db);
    memo.insert(k, e);
    return e;
  }

  oc_entry oc_compute(int s, int x, std::int64_t a, std::int64_t df, std::int64_t db) {
    if (poll_.passed()) throw deadline_passed{};
    const bool top = top_;
    top_ = false;
    oc_entry best;
    if (s == n_) {
      best.value = after_all(s, x, a, df, db, false).time;
      return best;
    }
    // The segment's ends t: s (or 0 = F^all) .. N-1; the top level's moves report progress.
    const int last = recompute_ ? n_ - 1 : s - 1;
    // The runs' stats, t ascending (each extends the last); the moves are then tried t descending.
    std::vector<run_stats>& runs = scratch_[ix(s)];
    runs.clear();
    if (last >= s) {
      run_stats r;
      for (int t = s; t <= last; ++t) {
        extend(r, s, x, a, t);
        runs.push_back(r);
      }
    }
    // C_Δ of the segment [s, t] depends on (s, x, A, Δ_B) only: the states that differ in Δ_F
    // and both decisions share it, kept per t in one row of backs_ (NaN: not asked yet), so
    // that each state reads a row instead of looking C_Δ up in its memo once per move.
    double* backs = last >= s ? backs_row(s, x, a, db, last - s + 1) : nullptr;
    // The moves in the order they are tried (checkpoint segments t descending, then F^all; keep
    // before offload), each with its next state, gathered first with the memo slot of that state
    // prefetched, then valued in the same order: the lookups, nearly all hits in tables of tens
    // of MiB, overlap instead of each waiting on memory in turn. The top state values each move
    // as it comes, so that its progress follows the work.
    auto value = [&](const move& m) {
      // Branch and bound: every op runs at least once, so the move costs at least its run, the
      // ideal time of its stages and of the rest; a move that cannot beat the best is skipped
      // (an equal one would lose the tie anyway).
      const double bound = m.t == 0 ? ideal(s, n_) : runs[ix(m.t - s)].sum_f + ideal(s, n_);
      if (bound >= best.value) return;
      const double v = m.nx.time + oc(m.next_stage(s), m.next_x(), m.nx.a, m.nx.df, m.nx.db).value;
      // Ties: the checkpoint moves are tried first and keep their place (strict <).
      if (v < best.value) best = {v, m.t, m.off};
    };
    std::vector<move>& moves = moves_[ix(s)];
    moves.clear();
    auto gather = [&](int t, bool off) {
      const next_state nx = t == 0 ? after_all(s, x, a, df, db, off)
                                   : after_ck(s, x, a, df, db, off, runs[ix(t - s)], [&] {
                                       double& b = backs[ix(t - s)];
                                       if (std::isnan(b)) b = cd(s, t, a + input(s, x), db).value;
                                       return b;
                                     });
      if (nx.time == inf) return;
      const move m{t, off, nx};
      if (top) {
        value(m);
        return;
      }
      if (within_budget(nx.a, nx.df, nx.db))
        oc_[ix(m.next_stage(s))].prefetch(oc_key(m.next_x(), nx.a, nx.df, nx.db));
      moves.push_back(m);
    };
    const int choices = 1 + (last - s + 1);
    int done = 0;
    for (int t = last; t >= s; --t) {
      if (can_keep(s)) gather(t, false);
      if (can_offload(s)) gather(t, true);
      if (top && progress_) progress_(static_cast<double>(++done) / choices);
    }
    if (can_keep(s)) gather(0, false);
    if (can_offload(s)) gather(0, true);
    for (const move& m : moves) value(m);
    return best;
  }

  /// The row of C_Δ values of the checkpoint segments [s, s .. s + len - 1] for (x, a, db):
  /// created NaN on first use. Rows of stage s only grow while a state of stage s is computed,
  /// and the recursion reaches later stages only, so the pointer stays valid through it.
  double* backs_row(int s, int x, std::int64_t a, std::int64_t db, int len) {
    const std::uint64_t k = oc_key(x, a, 0, db);
    std::vector<double>& pool = backs_[ix(s)];
    if (const std::size_t* at = backs_at_[ix(s)].find(k)) return pool.data() + *at;
    const std::size_t at = pool.size();
    pool.resize(at + static_cast<std::size_t>(len), std::numeric_limits<double>::quiet_NaN());
    backs_at_[ix(s)].insert(k, at);
    return pool.data() + at;
  }

  cd_entry cd(int s, int t, std::int64_t a, std::int64_t delta) {
    if (a + delta > m_) return {};  // Δ arrives while A is held: past the budget, nothing fits
    const std::uint64_t k = cd_key(s, t, a, delta);
    if (const cd_entry* e = cd_.find(k)) return *e;
    const cd_entry e = cd_compute(s, t, a, delta);
    cd_.insert(k, e);
    return e;
  }

  /// The three moves of C_Δ as (time, split); reconstruction recomputes them.
  cd_entry cd_compute(int s, int t, std::int64_t a, std::int64_t delta) {
    if (poll_.passed()) throw deadline_passed{};
    cd_entry best;
    const std::int64_t room = m_ - a;
    const double uf = d_.uf[ix(s)], ub = d_.ub[ix(s)];
    const std::int64_t nf = need_fall(s, t), nb = need_b(s);
    const double dl = static_cast<double>(delta - room);  // + need: the excess over the room
    if (s == t) {
      if (nf > room || nb > room) return best;
      double e = 0;
      if (!std::isinf(r_.pre))
        e = idle_for(std::max(static_cast<double>(nf) - r_.pre * ub, static_cast<double>(nb)) + dl,
                     r_.pre);
      best.value = uf + ub + e;
      return best;
    }
    // F_s^ck F_{s+1}^none .. F_{s'}^none, then head (s'+1..t), then tail (s..s').
    std::int64_t mnone = 0;
    for (int h = s; h <= t; ++h) mnone = std::max(mnone, d_.f_none(s, h));
    if (mnone + d_.delta[ix(t)] <= room) {
      double sum_f = 0;
      for (int sp = s; sp < t; ++sp) {
        sum_f += d_.uf[ix(sp)];
        // Branch and bound (as in oc_compute): the bound only grows with s'.
        if (sum_f + ideal(s, t) >= best.value) break;
        const double tail = cd(s, sp, a, delta).value;
        if (tail == inf) continue;
        if (sum_f + tail + ideal(sp + 1, t) >= best.value) continue;
        const std::int64_t d2 = grid_up(drained(static_cast<double>(delta), tail, r_.pre));
        const double head = cd(sp + 1, t, a + d_.a[ix(sp)], d2).value;
        if (head == inf) continue;
        const std::int64_t d3 = grid_up(drained(static_cast<double>(d2), head, r_.pre));
        double e = 0;
        if (!std::isinf(r_.pre) && d3 > 0) {
          double worst = -inf, after = 0;
          for (int k = sp; k >= s; --k) {
            worst = std::max(
                worst, static_cast<double>(d_.f_none(s, k) + d_.delta[ix(t)]) - r_.pre * after);
            after += d_.uf[ix(k)];
          }
          e = idle_for(worst + static_cast<double>(d3 - room), r_.pre);
        }
        const double v = sum_f + head + tail + e;
        if (v < best.value) best = {v, sp};
      }
    }
    if (nf <= room && nb <= room) {
      const double eb = idle_for(static_cast<double>(nb) + dl, r_.pre);
      const std::int64_t d1 = grid_up(drained(static_cast<double>(delta), ub + eb, r_.pre));
      const double sub = cd(s + 1, t, a + d_.abar[ix(s)], d1).value;
      if (sub != inf) {
        const std::int64_t d2 = grid_up(drained(static_cast<double>(d1), sub, r_.pre));
        const double ef = idle_for(static_cast<double>(nf + d2 - room), r_.pre);
        const double v = uf + sub + ub + ef + eb;
        if (v < best.value) best = {v, 0};
      }
    }
    return best;
  }

  /// Appends C_Δ(s, t, a, delta)'s ops (its memoised choice, with the same arguments).
  void emit_cd(int s, int t, std::int64_t a, std::int64_t delta, std::vector<chain_op>& out) {
    const cd_entry e = cd(s, t, a, delta);
    if (s == t) {
      out.push_back(chain_op::forward(s, forward_mode::save_all));
      out.push_back(chain_op::backward(s));
      return;
    }
    if (e.split == 0) {
      const double ub = d_.ub[ix(s)];
      const double eb = idle_for(static_cast<double>(need_b(s) + delta - (m_ - a)), r_.pre);
      const std::int64_t d1 = grid_up(drained(static_cast<double>(delta), ub + eb, r_.pre));
      out.push_back(chain_op::forward(s, forward_mode::save_all));
      emit_cd(s + 1, t, a + d_.abar[ix(s)], d1, out);
      out.push_back(chain_op::backward(s));
      return;
    }
    const int sp = e.split;
    const double tail = cd(s, sp, a, delta).value;
    const std::int64_t d2 = grid_up(drained(static_cast<double>(delta), tail, r_.pre));
    out.push_back(chain_op::forward(s, forward_mode::save_input));
    for (int k = s + 1; k <= sp; ++k) out.push_back(chain_op::forward(k, forward_mode::no_save));
    emit_cd(sp + 1, t, a + d_.a[ix(sp)], d2, out);
    emit_cd(s, sp, a, delta, out);
  }

  const discrete_chain& d_;
  slot_rates r_;
  bool recompute_;
  int n_;
  std::int64_t m_;
  deadline_poll poll_;
  std::vector<std::int64_t> forced_;
  std::function<void(double)> progress_;
  bool top_ = false;
  std::vector<flat_memo<oc_entry>> oc_;
  flat_memo<cd_entry> cd_;
  std::vector<flat_memo<std::size_t>> backs_at_;  ///< per stage: (x, A, Δ_B) -> row in backs_
  std::vector<std::vector<double>> backs_;        ///< per stage: rows of C_Δ values
  std::vector<std::vector<move>> moves_;          ///< per stage: oc_compute's moves (as scratch_)
  std::vector<double> prefix_;  ///< prefix_[k] = sum of u_F + u_B over stages 1..k
  std::vector<std::vector<run_stats>>
      scratch_;  ///< per stage: oc_compute's runs (recursion goes to later stages)
};

// --- the minimum budget -----------------------------------------------------------------------

/// The least budget (bytes, a_0 included) with which pofo's model has a schedule, in exact
/// sizes, and a schedule that needs no more: with transfers, every input that can move is
/// offloaded (at any β > 0 a schedule can idle until its copies are done, so the minimum is that
/// of instantaneous transfers); without, nothing moves. need(s, x) is the memory beyond what is
/// kept that the rest of the schedule needs from segment s on; C_Δ's part is rotor's minimum
/// memory lo(s, t) (the same recurrence at Δ = 0). O(N^2) after rotor's O(N^3) table (not
/// built without recompute).
class pofo_min_memory {
 public:
  pofo_min_memory(const chain& c, const machine& hw, recomputation recompute)
      : d_(exact_sizes(c)), n_(d_.n), transfers_(hw.transfers()) {
    if (recompute == recomputation::allowed) lo_.emplace(d_);
    for (auto* v : {&need_[0], &need_[1]}) v->assign(ix(n_ + 2), inf);
    for (auto* v : {&end_[0], &end_[1]}) v->assign(ix(n_ + 2), 0);
    for (int s = n_; s >= 1; --s) {
      for (int x = 0; x <= 1; ++x) {
        if (s == 1 && x == 1) continue;
        const std::int64_t in = input(s, x), kept = kept_of(s, x);
        const std::int64_t nf = d_.delta[ix(n_)] + d_.abar[ix(s)] + d_.of_all[ix(s)];
        const std::int64_t nb =
            d_.abar[ix(s)] + d_.delta[ix(s)] + d_.delta[ix(s - 1)] + d_.ob[ix(s)];
        std::int64_t best = in + std::max(nf, nb);
        int end = 0;  // 0: F^all segment (or the loss)
        if (s < n_) best = std::max(best, kept + need_[1][ix(s + 1)]);
        if (lo_ && s < n_) {
          std::int64_t run = 0;
          for (int t = s; t <= n_ - 1; ++t) {
            const std::int64_t f = d_.f_none(s, t) + d_.delta[ix(n_)];
            run = std::max(run, t == s ? f + in : f + kept);
            const std::int64_t v = std::max({run, in + (*lo_)(s, t), kept + need_[0][ix(t + 1)]});
            if (v < best) {
              best = v;
              end = t;
            }
          }
        }
        need_[x][ix(s)] = best;
        end_[x][ix(s)] = end;
      }
    }
  }

  /// The minimum budget.
  [[nodiscard]] bytes budget() const { return need_[0][1]; }

  /// A schedule within budget(): its segments, every input that can move offloaded.
  [[nodiscard]] offload_decisions schedule() const {
    segment_writer w;
    std::vector<int> offloaded;
    int s = 1, x = 0;
    while (s < n_) {
      if (transfers_ && d_.a[ix(s - 1)] > 0) offloaded.push_back(s - 1);
      const int t = end_[x][ix(s)];
      if (t == 0) {
        w.all(s);
        s += 1;
        x = 1;
      } else {
        w.checkpoint(s, t, lo_->schedule(s, t).ops);
        s = t + 1;
        x = 0;
      }
    }
    return w.finish(n_, std::move(offloaded), 0);
  }

 private:
  static constexpr std::int64_t inf = std::numeric_limits<std::int64_t>::max() / 4;
  [[nodiscard]] std::int64_t input(int s, int x) const {
    return x ? d_.abar[ix(s - 1)] : d_.a[ix(s - 1)];
  }
  /// What stays of segment s's input while the rest runs (its plain part moves).
  [[nodiscard]] std::int64_t kept_of(int s, int x) const {
    return transfers_ && s < n_ ? input(s, x) - d_.a[ix(s - 1)] : input(s, x);
  }

  discrete_chain d_;
  int n_;
  bool transfers_;
  std::optional<rotor_min_memory> lo_;
  std::vector<std::int64_t> need_[2];
  std::vector<int> end_[2];
};

inline bytes pofo_minimum_budget(const chain& c, const machine& hw, recomputation recompute) {
  return pofo_min_memory(c, hw, recompute).budget();
}

}  // namespace remat::detail
