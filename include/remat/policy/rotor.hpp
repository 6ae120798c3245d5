#pragma once
// rotor: the optimal memory-persistent dynamic program for heterogeneous chains, the one ROTOR
// uses [Shilova21, §2.3.4, Thm 6, Eqs. 2.9-2.10, Alg. 3-4]. C(s,t,m) is the least time of
// B_t..B_s from F_s with the input of s and delta_t stored and m slots besides the input; C1 runs
// F_s^all, C2 checkpoints F_s^ck F_{s+1}^∅..F_{s'}^∅. The answer is C(1, N, S - a_0).
//
// One row of S+1 costs per (s,t), filled by tiles of pairs (blocks of s by blocks of t, by their
// distance from the diagonal: the rows a tile reads stay in cache); every move a shifted,
// vectorisable min over a row from the first slot where its sub-problems are feasible (C2 only
// up to where it can still lower the row); no argmin table (reconstruction re-evaluates the
// candidates bitwise; ties go to C2). time_limit holds: the table's size is checked first, then
// the clock every millisecond or so.
//
// The recurrences, the minimum-memory table and the decisions: docs/chain-dps.md §5, §7.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/policy/detail/big_array.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/detail/parallel_for.hpp>
#include <remat/policy/detail/refine.hpp>
#include <remat/policy/detail/rows.hpp>

namespace remat {

namespace detail {

/// The exact minimum memory (besides the input) for which C(s,t,·) is finite, for all (s,t):
/// the same recurrence with max/min in place of +/min, in bytes. lo(1,N) + a_0 is rotor's
/// minimum budget. Among the moves that reach the minimum it keeps the fastest, so that
/// schedule() is a fast schedule that fits the minimum budget exactly: the fallback when the
/// budget is so close to the minimum that no affordable discretisation leaves a plan.
/// O(N^3) time, O(N^2) memory (cells_per_pair bytes per (s,t)); stops early once `dl` has
/// passed, and then complete() is false and nothing else may be read.
class rotor_min_memory {
 public:
  /// Bytes per (s,t) pair: lo (8), time (8), split (4).
  static constexpr double bytes_per_pair = 20;

  explicit rotor_min_memory(const discrete_chain& d, const deadline& dl = deadline(0)) : n_(d.n) {
    off_.assign(static_cast<std::size_t>(n_ + 2), 0);
    std::size_t cur = 0;
    for (int s = 1; s <= n_; ++s) {
      off_[ix(s)] = cur;
      cur += static_cast<std::size_t>(n_ - s + 1);
    }
    // Not initialised: every cell is written before it is read, and a table of a gigabyte
    // (10,000 stages) would take seconds to clear before the deadline is first checked.
    lo_.reset(cur);
    time_.reset(cur);
    split_.reset(cur);
    option_.reset(cur);
    // Column t, s descending (as rotor's fill): C(s'+1,t) is this column, kept contiguous in
    // col_lo/col_time, and C(s,s') is row s, contiguous in the table.
    std::vector<std::int64_t> col_lo(ix(n_ + 2), inf);
    std::vector<double> col_time(ix(n_ + 2), 0.0);
    deadline_poll poll(dl);
    for (int t = 1; t <= n_; ++t) {
      // C(t,t): the option that needs least memory, the fastest among those.
      std::int64_t best_t = inf;
      double best_t_time = 0;
      int best_t_option = 0;
      for (std::size_t o = 0; o < d.options[ix(t)].size(); ++o) {
        const discrete_option& x = d.options[ix(t)][o];
        const std::int64_t m = d.m_all(t, t, x);
        if (m < best_t || (m == best_t && x.uf + x.ub < best_t_time)) {
          best_t = m;
          best_t_time = x.uf + x.ub;
          best_t_option = static_cast<int>(o);
        }
      }
      at(t, t) = best_t;
      time_[idx(t, t)] = best_t_time;
      split_[idx(t, t)] = 0;
      option_[idx(t, t)] = best_t_option;
      col_lo[ix(t)] = at(t, t);
      col_time[ix(t)] = time_[idx(t, t)];
      // max over h in (s, t] of f_none(s, h) (which does not depend on s for h > s).
      std::int64_t fnone_above = 0;
      for (int s = t - 1; s >= 1; --s) {
        fnone_above = std::max(fnone_above, d.f_none(s, s + 1));
        std::int64_t best = inf;
        double best_time = 0;
        int split = 0, option = 0;
        for (std::size_t o = 0; o < d.options[ix(s)].size(); ++o) {
          const discrete_option& x = d.options[ix(s)][o];
          const std::int64_t m = std::max(d.m_all(s, t, x), x.abar + col_lo[ix(s + 1)]);
          const double tm = x.uf + x.ub + col_time[ix(s + 1)];
          if (m < best || (m == best && tm < best_time)) {
            best = m;
            best_time = tm;
            option = static_cast<int>(o);
          }
        }
        const std::int64_t mnone = std::max(d.f_none(s, s), fnone_above) + d.delta[ix(t)];
        const std::int64_t* row_lo = lo_.get() + off_[ix(s)];  // row_lo[sp - s] = lo(s, sp)
        const double* row_time = time_.get() + off_[ix(s)];
        double sum_f = 0;
        for (int sp = s; sp < t; ++sp) {
          sum_f += d.uf[ix(sp)];
          const std::int64_t m =
              std::max({mnone, d.a[ix(sp)] + col_lo[ix(sp + 1)], row_lo[sp - s]});
          const double tm = sum_f + col_time[ix(sp + 1)] + row_time[sp - s];
          if (m < best || (m == best && tm < best_time)) {
            best = m;
            best_time = tm;
            split = sp;
          }
        }
        at(s, t) = best;
        time_[idx(s, t)] = best_time;
        split_[idx(s, t)] = split;
        option_[idx(s, t)] = option;
        col_lo[ix(s)] = best;
        col_time[ix(s)] = best_time;
        if (poll.passed(t - s)) return;
      }
    }
    complete_ = true;
  }
  /// False when the deadline passed before the recurrence was done.
  [[nodiscard]] bool complete() const { return complete_; }
  [[nodiscard]] std::int64_t operator()(int s, int t) const { return lo_[idx(s, t)]; }

  /// The schedule that reaches lo(s,t) (default: lo(1,N)), and its time: B_t..B_s from the
  /// input of s and delta_t.
  [[nodiscard]] decisions schedule(int from = 1, int to = 0) const {
    if (to <= 0) to = n_;
    decisions out;
    auto emit = [&](chain_op op, int option) {
      out.ops.push_back(op);
      out.options.push_back(option);
    };
    struct job {
      int s, t;
      int backward_option;
    };  // backward_option >= 0: B_s only
    std::vector<job> todo{{from, to, -1}};
    while (!todo.empty()) {
      const job j = todo.back();
      todo.pop_back();
      if (j.backward_option >= 0) {
        emit(chain_op::backward(j.s), j.backward_option);
      } else if (const int sp = split_[idx(j.s, j.t)]; j.s < j.t && sp > 0) {
        emit(chain_op::forward(j.s, forward_mode::save_input), 0);
        for (int q = j.s + 1; q <= sp; ++q) emit(chain_op::forward(q, forward_mode::no_save), 0);
        todo.push_back({j.s, sp, -1});
        todo.push_back({sp + 1, j.t, -1});
      } else {
        const int o = option_[idx(j.s, j.t)];
        emit(chain_op::forward(j.s, forward_mode::save_all), o);
        todo.push_back({j.s, j.s, o});
        if (j.s < j.t) todo.push_back({j.s + 1, j.t, -1});
      }
    }
    out.time = time_[idx(from, to)];
    return out;
  }

 private:
  static constexpr std::int64_t inf = std::numeric_limits<std::int64_t>::max() / 4;
  [[nodiscard]] std::size_t idx(int s, int t) const {
    return off_[ix(s)] + static_cast<std::size_t>(t - s);
  }
  std::int64_t& at(int s, int t) { return lo_[idx(s, t)]; }
  int n_;
  bool complete_ = false;
  std::vector<std::size_t> off_;
  big_array<std::int64_t> lo_;
  big_array<double> time_;
  big_array<int> split_;
  big_array<int> option_;  ///< the option of C1 (and of C(s,s))
};

}  // namespace detail

struct rotor {
  static constexpr std::string_view name = "rotor";
  static constexpr std::string_view summary =
      "Rotor's optimal dynamic program for heterogeneous chains (persistent schedules)";
  /// S: memory slots the budget is split into (docs/chain-dps.md, "Memory slots"); 0 = exact
  /// sizes (one slot per common divisor of the sizes).
  std::int64_t slots = 500;
  /// The plan may be this much (relative) above the DP's lower bound (sizes rounded down)
  /// before the slots are refined (docs/chain-dps.md, "Memory slots"); details.gap() reports it.
  double tolerance = 0.01;
  /// Wall-clock limit of one solve; not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// Called with the fraction of the table done (0..1) as the solve goes on.
  std::function<void(double)> progress = {};
  /// Threads that fill the table (0: the hardware's; 1: the calling thread alone). The table,
  /// hence the plan, is the same on any number (docs/chain-dps.md §5, "Order of the fill").
  int threads = 0;
  /// The DP table may not grow past this; when the budget is feasible only at a finer
  /// discretisation than S, S is raised up to this limit.
  std::int64_t max_table_bytes = std::int64_t{2} << 30;

  /// The smallest budget (bytes) with which rotor finds a schedule (with exact sizes).
  [[nodiscard]] bytes minimum_budget(const chain& c) const {
    const auto d = detail::exact_sizes(c);
    return c.a(0) + detail::rotor_min_memory(d)(1, c.length());
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }
  /// solve(), and how the plan was reached: store-all, the DP at some slots (optimal at exact
  /// sizes) or, within rounding of the minimum, the fastest minimum-memory schedule.
  [[nodiscard]] result<solution<chain_dp_details>> solve_detailed(const chain& c,
                                                                  bytes budget) const;
};

// ---------------------------------------------------------------------------------------------

namespace detail {

/// Rotor's table (and RK-Rotor's: C1 chooses among the options of discrete_chain::options).
class rotor_dp {
 public:
  static constexpr double inf = detail::infinite_cost;

  /// tile: the stages per block of the fill's order (0: chosen from the row width); threads:
  /// the tiles filled at once (0: the hardware's). Any values give the same table, cell for
  /// cell.
  explicit rotor_dp(const detail::discrete_chain& d, int tile = 0, int threads = 1)
      : d_(d),
        n_(d.n),
        w_(d.dp_budget + 1),
        tile_(tile > 0 ? tile : default_tile(w_)),
        threads_(threads) {
    off_.assign(static_cast<std::size_t>(n_ + 2), 0);
    std::size_t cur = 0;
    for (int s = 1; s <= n_; ++s) {
      off_[static_cast<std::size_t>(s)] = cur;
      cur += static_cast<std::size_t>(n_ - s + 1);
    }
    // Not initialised here: each row is set when it is filled, so that a table of gigabytes
    // costs nothing up front (the time limit is checked as the rows are filled).
    cost_.reset(cur * static_cast<std::size_t>(w_));
    lo_.assign(cur, w_);
    // Per pair: the forward run's time sum u_F(s..t), summed s first as the moves do, and the
    // largest F^none need max_h M_F∅(s,t,h) without delta_t.
    run_f_.resize(cur);
    run_none_.resize(cur);
    for (int s = 1; s <= n_; ++s) {
      double f = 0;
      std::int64_t none = 0;
      for (int t = s; t <= n_; ++t) {
        f += d_.uf[ix(t)];
        none = std::max(none, d_.f_none(s, t));
        run_f_[pair(s, t)] = f;
        run_none_[pair(s, t)] = none;
      }
    }
  }

  /// Fills the table; false if the deadline passed first.
  bool fill(const detail::deadline& dl, const std::function<void(double)>& report) {
    for (int s = 1; s <= n_; ++s) {
      double* row = row_of(s, s);
      std::fill(row, row + w_, inf);
      for (const detail::discrete_option& o : d_.options[ix(s)]) {
        const double v = o.uf + o.ub;
        detail::relax_row(row, std::min(d_.m_all(s, s, o), w_), w_,
                          [&](std::int64_t) { return v; });
      }
      lo(s, s) = detail::first_finite(row, w_);
    }
    // Order: tiles of tile_ x tile_ pairs (blocks of s and of t), by their distance from the
    // diagonal. A move of C(s,t) reads C(s,s') and C(s'+1,t); for s' in a block strictly
    // between those of s and t both lie in tiles of a smaller distance, done: a tile relaxes
    // those moves block of s' by block of s', every row read tile_ times while it is in cache
    // (as a blocked min-plus product), instead of once per pair streamed from a table far
    // larger than the cache. Then the moves within the tile's own blocks, t ascending and s
    // descending, as the plain order. A min is exact and order-free, and the pruning only skips
    // cells a move cannot lower, so the table does not depend on the tile. The tiles of one
    // distance read only tiles nearer the diagonal and write only their own pairs: they are
    // filled on threads_ threads at once.
    const int blocks = (n_ + tile_ - 1) / tile_;
    double total = 0;
    for (int t = 2; t <= n_; ++t) total += static_cast<double>(t) * (t - 1) / 2.0;
    double done = 0;
    std::vector<double> work(static_cast<std::size_t>(blocks));
    for (int dist = 0; dist < blocks; ++dist) {
      const auto count = static_cast<std::size_t>(blocks - dist);
      std::fill(work.begin(), work.end(), 0.0);
      std::atomic<bool> late{false};
      detail::parallel_for(count, threads_, [&](std::size_t i) {
        if (late.load(std::memory_order_relaxed)) return;
        // One per tile (the threads share none): the clock is read after each block of moves.
        detail::deadline_poll poll(dl, std::int64_t{tile_} * tile_ * tile_ * w_);
        const int b = static_cast<int>(i);
        if (!fill_tile(b, b + dist, poll, work[i])) late.store(true, std::memory_order_relaxed);
      });
      if (late.load()) return false;
      for (std::size_t i = 0; i < count; ++i) done += work[i];
      if (report) report(done / total);
    }
    return true;
  }

  [[nodiscard]] double value() const { return row_of(1, n_)[w_ - 1]; }
  /// C(s, t, m) after fill(): the least time of stages s..t with m slots besides their input.
  [[nodiscard]] double cost(int s, int t, std::int64_t m) const { return row_of(s, t)[m]; }

  /// value() < infinity exactly when the min-memory recurrence on the same sizes fits (past the
  /// deadline: unknown, and the fill reports the time limit).
  static bool feasible(const detail::discrete_chain& d, const detail::deadline& dl) {
    const detail::rotor_min_memory lo(d, dl);
    return !lo.complete() || lo(1, d.n) <= d.dp_budget;
  }

  /// Alg. 4 (OptRecP), iteratively; with the option of every F^all and B.
  [[nodiscard]] detail::decisions reconstruct() const { return reconstruct(1, n_, w_ - 1); }
  /// The same for stages s..t with m slots besides their input (C(s, t, m) finite): the ops of
  /// that sub-chain alone, in the whole chain's stage numbers (mixed_mode's planned segments).
  [[nodiscard]] detail::decisions reconstruct(int from, int to, std::int64_t slots) const {
    detail::decisions out;
    auto emit = [&](chain_op op, int option) {
      out.ops.push_back(op);
      out.options.push_back(option);
    };
    struct job {
      int s, t;
      std::int64_t m;
      int backward_option;
    };  // backward_option >= 0: B_s only
    std::vector<job> todo{{from, to, slots, -1}};
    while (!todo.empty()) {
      const job j = todo.back();
      todo.pop_back();
      if (j.backward_option >= 0) {
        emit(chain_op::backward(j.s), j.backward_option);
        continue;
      }
      const auto [s, t, m, unused] = j;
      (void)unused;
      const double target = row_of(s, t)[m];
      int split = 0;  // 0 = C1
      double sum_f = 0;
      if (s < t && m >= mnone(s, t))
        for (int sp = s; sp < t && split == 0; ++sp) {
          sum_f += d_.uf[ix(sp)];
          const std::int64_t mm = m - d_.a[ix(sp)];
          if (mm < 0) continue;
          if (sum_f + row_of(sp + 1, t)[mm] + row_of(s, sp)[m] == target) split = sp;
        }
      if (split > 0) {
        emit(chain_op::forward(s, forward_mode::save_input), 0);
        for (int k = s + 1; k <= split; ++k) emit(chain_op::forward(k, forward_mode::no_save), 0);
        todo.push_back({s, split, m, -1});
        todo.push_back({split + 1, t, m - d_.a[ix(split)], -1});
        continue;
      }
      // C1 (or C(s,s)): the first option whose value is the table's, as fill() kept it.
      const auto& options = d_.options[ix(s)];
      int option = 0;
      for (std::size_t o = 0; o < options.size(); ++o) {
        const detail::discrete_option& x = options[o];
        if (m < d_.m_all(s, t, x) || m < x.abar) continue;
        const double v = s == t ? x.uf + x.ub : (x.uf + x.ub) + row_of(s + 1, t)[m - x.abar];
        if (v == target) {
          option = static_cast<int>(o);
          break;
        }
      }
      emit(chain_op::forward(s, forward_mode::save_all), option);
      todo.push_back({s, s, 0, option});
      if (s < t) todo.push_back({s + 1, t, m - options[static_cast<std::size_t>(option)].abar, -1});
    }
    out.time = cost(from, to, slots);
    return out;
  }

 private:
  [[nodiscard]] std::size_t pair(int s, int t) const {
    return off_[ix(s)] + static_cast<std::size_t>(t - s);
  }
  double* row_of(int s, int t) { return cost_.get() + pair(s, t) * static_cast<std::size_t>(w_); }
  [[nodiscard]] const double* row_of(int s, int t) const {
    return cost_.get() + pair(s, t) * static_cast<std::size_t>(w_);
  }
  std::int64_t& lo(int s, int t) { return lo_[pair(s, t)]; }
  /// m_∅(s,t): the most an F^none of the run s..t needs, delta_t included.
  [[nodiscard]] std::int64_t mnone(int s, int t) const {
    return run_none_[pair(s, t)] + d_.delta[ix(t)];
  }

  /// The tile's stages per block: three tiles' rows (the pairs being filled, the rows C(s,s')
  /// and C(s'+1,t) of one block of s') in about 4 MiB (measured at 400 stages and 500 slots:
  /// blocks of 4, 8, 16 and 32 stages fill in 2.95, 2.52, 2.29 and 2.29 s, 4.2 s unblocked).
  static int default_tile(std::int64_t w) {
    const double rows = (4 << 20) / 3.0 / (static_cast<double>(w) * sizeof(double));
    return static_cast<int>(std::clamp(std::sqrt(rows), 4.0, 64.0));
  }
  [[nodiscard]] int first_of(int block) const { return block * tile_ + 1; }
  [[nodiscard]] int last_of(int block) const { return std::min((block + 1) * tile_, n_); }

  /// The C2 move s' of C(s,t,·) (F_s^ck F_{s+1}^none .. F_{s'}^none, then C(s'+1,t) and
  /// C(s,s')): relaxed only where it can lower the row. Its cost at m is at least its cost with
  /// the whole width, sum_f + C(s'+1,t,w-1-a) + C(s,s',w-1), so past the first m where the row
  /// is at most that (a binary search) it cannot improve a cell (docs/chain-dps.md §5,
  /// "Pruning"); the row only falls, so this holds whenever the move is relaxed.
  void relax_c2(double* row, int s, int t, int sp) {
    const std::int64_t a = d_.a[ix(sp)];
    const std::int64_t from = std::max({mnone(s, t), a + lo(sp + 1, t), lo(s, sp)});
    if (from >= w_) return;
    const double sum_f = run_f_[pair(s, sp)];
    const double* tail = row_of(sp + 1, t);  // C(s'+1, t, ·)
    const double* head = row_of(s, sp);
    const std::int64_t to =
        detail::first_at_most(row, from, w_, sum_f + tail[w_ - 1 - a] + head[w_ - 1]);
    detail::relax_row(row, from, to, [&](std::int64_t m) { return sum_f + tail[m - a] + head[m]; });
  }

  /// Fills the pairs s < t of the tile (blocks i <= j of s and t) and adds its moves to work;
  /// false if the deadline passed first (checked after each block of moves).
  bool fill_tile(int i, int j, detail::deadline_poll& poll, double& work) {
    const int s0 = first_of(i), s1 = last_of(i), t0 = first_of(j), t1 = last_of(j);
    for (int s = s0; s <= s1; ++s)
      for (int t = std::max(t0, s + 1); t <= t1; ++t) {
        double* row = row_of(s, t);
        std::fill(row, row + w_, inf);
        work += t - s;
      }
    // The moves whose s' lies in a block strictly between i and j.
    for (int k = i + 1; k < j; ++k) {
      for (int s = s0; s <= s1; ++s)
        for (int sp = first_of(k); sp <= last_of(k); ++sp)
          for (int t = t0; t <= t1; ++t) relax_c2(row_of(s, t), s, t, sp);
      if (poll.passed(std::int64_t{tile_} * tile_ * tile_ * w_)) return false;
    }
    // The rest, t ascending and s descending: C1 (an option at a time: RK-Rotor's E; rotor has
    // one), then s' in the block of s and in the block of t (below t).
    for (int t = std::max(t0, s0 + 1); t <= t1; ++t)
      for (int s = std::min(s1, t - 1); s >= s0; --s) {
        double* row = row_of(s, t);
        const double* next = row_of(s + 1, t);
        for (const detail::discrete_option& o : d_.options[ix(s)]) {
          const std::int64_t ab = o.abar;
          const std::int64_t from = std::max(d_.m_all(s, t, o), ab + lo(s + 1, t));
          const double ufb = o.uf + o.ub;
          detail::relax_row(row, from, w_, [&](std::int64_t m) { return ufb + next[m - ab]; });
        }
        for (int sp = s; sp <= std::min(s1, t - 1); ++sp) relax_c2(row, s, t, sp);
        if (j > i)
          for (int sp = t0; sp < t; ++sp) relax_c2(row, s, t, sp);
        lo(s, t) = detail::first_finite(row, w_);
      }
    return !poll.passed(std::int64_t{tile_} * tile_ * 2 * tile_ * w_);
  }

  const detail::discrete_chain& d_;
  int n_;
  std::int64_t w_;
  int tile_;
  int threads_;
  std::vector<std::size_t> off_;
  big_array<double> cost_;
  std::vector<std::int64_t> lo_;
  std::vector<double> run_f_;           ///< per pair: sum of u_F over s..t
  std::vector<std::int64_t> run_none_;  ///< per pair: max of f_none(s,h) over h in s..t
};

}  // namespace detail

inline result<solution<chain_dp_details>> rotor::solve_detailed(const chain& c,
                                                                bytes budget) const {
  return detail::timed([&]() -> result<solution<chain_dp_details>> {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    if (auto ok = detail::check_threads(name, threads); !ok) return ok.err();
    const detail::deadline dl(time_limit);
    std::optional<detail::rotor_min_memory> exact;  // of exact sizes, once computed
    // A budget within rounding of the minimum that no affordable discretisation can plan gets
    // the fastest of the minimum-memory schedules (exact sizes): valid, but not proven optimal.
    return detail::solve_discretized<detail::rotor_dp>(
        {.policy = name,
         .problem = &c,
         .budget = budget,
         .slots = slots,
         .max_table_bytes = max_table_bytes,
         .tolerance = tolerance,
         .threads = threads,
         .limit = &dl,
         .progress = progress,
         // The minimum-memory table is O(N^2) too: it counts as 2.5 slots a pair.
         .table_cells =
             [](int n, double w) {
               return n * (n + 1) / 2.0 * std::max(w, detail::rotor_min_memory::bytes_per_pair / 8);
             },
         .minimum = [&]() -> std::optional<bytes> {
           exact.emplace(detail::exact_sizes(c), dl);
           if (!exact->complete()) return std::nullopt;
           return c.a(0) + (*exact)(1, c.length());
         },
         .fallback = [&] { return std::optional(exact->schedule()); },
         .time_limit_advice = "raise time_limit, or use fewer slots (the DP is O(N^3 S), its "
                              "minimum-memory step O(N^3))"},
        detail::chain_target{name, c, budget});
  });
}

}  // namespace remat
