#pragma once
// multi_chain: the optimal checkpointing of K homogeneous chains joined at one loss in the
// unit-slot model [Shilova21, §1.4-1.6]: Lemma 2's least memory m_min and Theorem 3's dynamic
// program, Eq. (1.4), over the chains' remaining lengths, the slots and which input gradients
// stay (b), with Opt_0 (the reversal of one chain segment, [Shilova21, Thm 1]) and its split
// points from revolve's table. The DP's decisions are rebuilt into the thesis' operations
// (schedule/multi_chain_ops.hpp), lowered onto the chains' training graph and checked by the
// simulator. The budget holds floor(budget / slot_bytes) slots, of which `reserved_slots` go to
// what the thesis keeps outside its m slots (an op's output buffer, the shared input gradient):
// the DP plans with the rest. docs/multi-chain.md.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/policy/detail/common.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/problem/multi_chain.hpp>
#include <remat/schedule/multi_chain_ops.hpp>

namespace remat {

struct multi_chain_dp {
  static constexpr std::string_view name = "multi_chain";
  static constexpr std::string_view summary =
      "Optimal checkpointing of K homogeneous chains joined at one loss (Siamese, two-tower)";
  /// Slots of the budget that the DP does not plan with (docs/multi-chain.md §4).
  static constexpr int reserved_slots = 2;

  /// Wall-clock limit of one solve; not finite = none.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// The largest DP table a solve builds: (L_1 + 1) x .. x (L_K + 1) x (slots + 1) counts of 4
  /// bytes; a larger one is refused before anything is allocated.
  bytes max_table_bytes = bytes{4} << 30;

  /// Lemma 2 [Shilova21, §1.5]: the least slots of MULTI-b(L, ., b).
  [[nodiscard]] static int minimum_slots(const std::vector<int>& lengths,
                                         const std::vector<bool>& keep) {
    int nonzero = 0;
    bool one = false, free_zero = false;
    for (std::size_t j = 0; j < lengths.size(); ++j) {
      if (lengths[j] != 0) ++nonzero;
      if (lengths[j] == 1) one = true;
      if (lengths[j] == 0 && (keep.empty() || !keep[j])) free_zero = true;
    }
    const int k_tilde = static_cast<int>(lengths.size()) + nonzero;
    return one || free_zero || nonzero == 0 ? k_tilde : k_tilde + 1;
  }
  [[nodiscard]] static int minimum_slots(const multi_chain& p) {
    return minimum_slots(p.lengths, p.keep);
  }
  /// The slots the DP plans with at `budget` (rounded down; may be negative).
  [[nodiscard]] static std::int64_t slots_of(const multi_chain& p, bytes budget) {
    return budget / p.slot_bytes - reserved_slots;
  }
  /// The smallest budget it plans with: m_min slots plus the reserved ones.
  [[nodiscard]] bytes minimum_budget(const multi_chain& p) const {
    return (minimum_slots(p) + reserved_slots) * p.slot_bytes;
  }

  /// Theorem 3's table for one problem: the least forward count of every sub-problem reached
  /// from (L, m, b), and the programs it rebuilds. A truncated chain keeps its gradient (b_k = 1),
  /// so a state's b follows from its lengths: the table is indexed by the lengths L' <= L and
  /// the slots m' <= m (capped at sum (L_j + 1), where nothing is recomputed).
  class table {
   public:
    static constexpr std::int32_t infinite = std::numeric_limits<std::int32_t>::max();

    table(std::vector<int> lengths, std::vector<bool> keep, int slots,
          const detail::deadline& dl = detail::deadline(0))
        : l_(std::move(lengths)), b_(std::move(keep)), rev_(max_length(l_), c_max(l_)) {
      if (b_.empty()) b_.assign(l_.size(), false);
      int full = 0;
      for (int l : l_) full += l + 1;
      m_ = std::clamp(slots, 0, full);
      std::size_t n = 1;
      for (int l : l_) {
        stride_.push_back(n);
        n *= static_cast<std::size_t>(l) + 1;
      }
      states_ = n;
      fill_opt0();
      cells_.assign(states_ * width(), infinite);
      fill(dl);
    }

    /// Bytes of the table for these lengths and slots (before building it).
    [[nodiscard]] static double bytes_needed(const std::vector<int>& lengths, std::int64_t slots) {
      double n = 4.0 * static_cast<double>(std::max<std::int64_t>(slots, 0) + 1);
      for (int l : lengths) n *= l + 1.0;
      return n;
    }
    [[nodiscard]] bool complete() const { return complete_; }
    /// False when a count reached 2^31 (the table is then unusable).
    [[nodiscard]] bool in_range() const { return !overflow_; }
    /// The slots of the top problem (the request, capped).
    [[nodiscard]] int slots() const { return m_; }
    /// The least forwards of MULTI-b(L', m', b') (infinite when m' < m_min); b' follows from L'.
    [[nodiscard]] std::int32_t forwards(const std::vector<int>& sub, int m) const {
      return row(index(sub))[std::min(m, m_)];
    }
    /// The top problem's least forwards.
    [[nodiscard]] std::int32_t forwards() const { return forwards(l_, m_); }

    /// An optimal program of the top problem (canonical, [Shilova21, Def. 8]); ties go to the
    /// smallest chain, then the fewest forwards before its checkpoint.
    [[nodiscard]] std::vector<multi_chain_op> program() const {
      std::vector<multi_chain_op> ops;
      if (forwards() == infinite) return ops;
      std::vector<int> at(l_.size(), 0);
      emit(l_, m_, at, ops);
      return ops;
    }

    /// Forwards of AdjChain(l, m) [Shilova21, Thm 1] (Opt_0 less its l + 1 backwards).
    [[nodiscard]] std::int32_t opt0(int l, int m) const {
      if (m < 0) return infinite;
      return opt0_[static_cast<std::size_t>(l) * width() +
                   static_cast<std::size_t>(std::min(m, m_))];
    }

   private:
    static int max_length(const std::vector<int>& l) {
      return std::max(1, l.empty() ? 1 : *std::max_element(l.begin(), l.end()));
    }
    static int c_max(const std::vector<int>& l) { return std::max(0, max_length(l) - 2); }
    [[nodiscard]] std::size_t width() const { return static_cast<std::size_t>(m_) + 1; }
    [[nodiscard]] std::size_t index(const std::vector<int>& sub) const {
      std::size_t i = 0;
      for (std::size_t k = 0; k < sub.size(); ++k)
        i += static_cast<std::size_t>(sub[k]) * stride_[k];
      return i;
    }
    [[nodiscard]] const std::int32_t* row(std::size_t i) const { return &cells_[i * width()]; }
    [[nodiscard]] bool kept(const std::vector<int>& sub, std::size_t k) const {
      return b_[k] || sub[k] < l_[k];
    }

    // opt0_[(l, m)] for l = 0..max L - 1: the reversal of l + 1 stages with m - 3 free snapshots
    // (revolve's G(l + 1, m - 3)); l = 0 needs 2 slots, l >= 1 three (Eqs. 1.1-1.2).
    void fill_opt0() {
      const int lmax = max_length(l_);
      opt0_.assign(static_cast<std::size_t>(lmax) * width(), infinite);
      for (int l = 0; l < lmax; ++l)
        for (int m = l == 0 ? 2 : 3; m <= m_; ++m)
          opt0_[static_cast<std::size_t>(l) * width() + static_cast<std::size_t>(m)] =
              l == 0 ? 0
                     : static_cast<std::int32_t>(rev_.forwards(l + 1, std::min(m - 3, c_max(l_))));
    }

    void fill(const detail::deadline& dl) {
      detail::deadline_poll poll(dl);
      const std::size_t kk = l_.size();
      const int k = static_cast<int>(kk);
      std::vector<int> sub(kk, 0);
      std::vector<bool> bits(kk);
      for (std::size_t s = 0; s < states_; ++s) {
        std::int32_t* out = &cells_[s * width()];
        int total = 0, full = 0, kept_count = 0;
        for (std::size_t q = 0; q < kk; ++q) {
          bits[q] = kept(sub, q);
          total += sub[q];
          full += sub[q] + 1;
          kept_count += bits[q] ? 1 : 0;
        }
        const int lo = minimum_slots(sub, bits);
        if (total <= 1) {  // 0: the Loss alone (m >= K); e_k: S F Loss B (m >= K + 1)
          for (int m = std::max(lo, total == 0 ? k : k + 1); m <= m_; ++m) out[m] = total;
        } else {
          for (int m = std::max(lo, full); m <= m_; ++m) out[m] = total;
          const int hi = std::min(m_, full - 1);
          std::int64_t work = 0;
          for (std::size_t q = 0; q < kk; ++q) {
            const int others = kept_count - (bits[q] ? 1 : 0);
            for (int i = 1; i <= sub[q]; ++i) {
              const std::int32_t* from =
                  &cells_[(s - static_cast<std::size_t>(i) * stride_[q]) * width()];
              const std::int32_t* rev = &opt0_[static_cast<std::size_t>(i - 1) * width()];
              const int first = std::max({lo, others + (i == 1 ? 2 : 3), 1});
              for (int m = first; m <= hi; ++m) {
                const std::int32_t a = from[m - 1];
                if (a == infinite) continue;
                const std::int64_t v = std::int64_t{i} + a + rev[m - others];
                if (v >= infinite) {
                  overflow_ = true;
                  continue;
                }
                out[m] = std::min(out[m], static_cast<std::int32_t>(v));
              }
              work += hi - first + 1;
            }
          }
          if (poll.passed(work + 1)) return;
        }
        for (std::size_t q = 0; q < kk; ++q) {  // the next lengths, mixed radix
          if (++sub[q] <= l_[q]) break;
          sub[q] = 0;
        }
      }
      complete_ = true;
    }

    // The program of (sub, m), chain q's first op at position at[q] + 1 of the original chain.
    void emit(std::vector<int> sub, int m, std::vector<int> at,
              std::vector<multi_chain_op>& ops) const {
      const std::size_t kk = l_.size();
      int total = 0;
      for (int l : sub) total += l;
      auto loss_and_discards = [&] {
        ops.push_back(multi_chain_op::loss());
        for (std::size_t q = 0; q < kk; ++q)
          if (sub[q] == 0 && !kept(sub, q))
            ops.push_back(multi_chain_op::discard_gradient(static_cast<int>(q) + 1));
      };
      if (total == 0) {
        loss_and_discards();
        return;
      }
      if (total == 1) {
        const auto q = static_cast<std::size_t>(std::find(sub.begin(), sub.end(), 1) - sub.begin());
        const int j = static_cast<int>(q) + 1;
        const bool was_kept = kept(sub, q);
        ops.push_back(multi_chain_op::replicate(j, at[q]));
        ops.push_back(multi_chain_op::forward(j, at[q] + 1));
        sub[q] = 0;
        loss_and_discards();
        ops.push_back(multi_chain_op::backward(j, at[q] + 1));
        if (!was_kept) ops.push_back(multi_chain_op::discard_gradient(j));
        return;
      }
      const std::int32_t want = row(index(sub))[m];
      int kept_count = 0;
      for (std::size_t q = 0; q < kk; ++q) kept_count += kept(sub, q) ? 1 : 0;
      for (std::size_t q = 0; q < kk; ++q) {
        const bool was_kept = kept(sub, q);
        const int others = kept_count - (was_kept ? 1 : 0);
        for (int i = 1; i <= sub[q]; ++i) {
          std::vector<int> rest = sub;
          rest[q] -= i;
          const std::int32_t a = m >= 1 ? row(index(rest))[m - 1] : infinite;
          const std::int32_t r = opt0(i - 1, m - others);
          if (a == infinite || r == infinite || std::int64_t{i} + a + r != want) continue;
          const int j = static_cast<int>(q) + 1;
          ops.push_back(multi_chain_op::replicate(j, at[q]));
          for (int f = 1; f <= i; ++f) ops.push_back(multi_chain_op::forward(j, at[q] + f));
          std::vector<int> next = at;
          next[q] += i;
          emit(std::move(rest), m - 1, std::move(next), ops);
          reverse(j, at[q], i, m - others, ops);
          if (!was_kept) ops.push_back(multi_chain_op::discard_gradient(j));
          return;
        }
      }
    }

    // AdjChain(n - 1, m) on chain j from a_s: revolve's reversal of n stages with m - 3 free
    // snapshots, its F^ck a replicate and a forward, its F^all B a backward.
    void reverse(int j, int s, int n, int m, std::vector<multi_chain_op>& ops) const {
      if (n == 1) {
        ops.push_back(multi_chain_op::backward(j, s + 1));
        return;
      }
      const auto rev = revolve::program(n, std::min(m - 3, c_max(l_)), rev_, detail::deadline(0));
      for (const chain_op& o : rev) {
        if (o.kind == chain_op_kind::backward) {
          ops.push_back(multi_chain_op::backward(j, s + o.index));
        } else if (o.mode == forward_mode::save_input) {
          ops.push_back(multi_chain_op::replicate(j, s + o.index - 1));
          ops.push_back(multi_chain_op::forward(j, s + o.index));
        } else if (o.mode == forward_mode::no_save) {
          ops.push_back(multi_chain_op::forward(j, s + o.index));
        }
      }
    }

    std::vector<int> l_;
    std::vector<bool> b_;
    revolve::table rev_;
    int m_ = 0;
    std::vector<std::size_t> stride_;
    std::size_t states_ = 0;
    std::vector<std::int32_t> opt0_;
    std::vector<std::int32_t> cells_;
    bool complete_ = false;
    bool overflow_ = false;
  };

  [[nodiscard]] result<schedule> solve(const multi_chain& p, bytes budget) const {
    return detail::program_of(solve_detailed(p, budget));
  }

  [[nodiscard]] result<solution<multi_chain_details>> solve_detailed(const multi_chain& p,
                                                                     bytes budget) const {
    return detail::timed([&] { return solve_untimed(p, budget); });
  }

 private:
  [[nodiscard]] result<solution<multi_chain_details>> solve_untimed(const multi_chain& p,
                                                                    bytes budget) const {
    if (auto v = validate(p); !v) return v.err();
    const std::string who = std::string(name) + ": ";
    if (budget < 0)
      return error{status::invalid_problem,
                   who + "the budget is negative (" + std::to_string(budget) +
                       " bytes); give a byte count >= 0",
                   {}};
    const int lo = minimum_slots(p);
    const std::int64_t slots = slots_of(p, budget);
    if (slots < lo) {
      const bytes minimum = minimum_budget(p);
      return error{status::budget_too_small,
                   who + "the budget of " + format_bytes(budget) + " is below the minimum of " +
                       format_bytes(minimum) + " that it needs for multi-chain '" + p.name +
                       "' (m_min = " + std::to_string(lo) + " slots of " +
                       std::to_string(p.slot_bytes) + " bytes, plus " +
                       std::to_string(reserved_slots) + " reserved); give a budget of at least " +
                       std::to_string(minimum) + " bytes",
                   minimum};
    }
    int full = 0;
    for (int l : p.lengths) full += l + 1;
    const int m = static_cast<int>(std::min<std::int64_t>(slots, full));
    if (const double need = table::bytes_needed(p.lengths, m);
        need > static_cast<double>(max_table_bytes))
      return error{status::invalid_problem,
                   who + "the DP table for lengths " + lengths_text(p) + " at " +
                       std::to_string(m) + " slots would take " +
                       format_bytes(static_cast<bytes>(need)) + ", above max_table_bytes (" +
                       format_bytes(max_table_bytes) +
                       "); raise max_table_bytes, give a smaller budget, or fewer chains "
                       "(the table grows as the product of the lengths)",
                   {}};
    const detail::deadline dl(time_limit);
    const table tab(p.lengths, p.keep, m, dl);
    if (!tab.complete())
      return detail::time_limit_reached(name, dl, "while filling the DP table",
                                        "raise time_limit; the fill is O(m K L^(K+1))");
    auto bug = [&](const std::string& what) {
      return error{status::solver_error,
                   who + what + " (a bug in remat; please report it with the problem)",
                   {}};
    };
    if (!tab.in_range()) return bug("a forward count reached 2^31");
    const std::int32_t forwards = tab.forwards();
    if (forwards == table::infinite)
      return bug("no program at " + std::to_string(m) + " slots, at least Lemma 2's " +
                 std::to_string(lo));
    auto ops = tab.program();
    auto lowered = replay(p, ops);
    if (!lowered) return bug("its program breaks the model's rules: " + lowered.err().message);
    if (lowered->forwards != forwards || lowered->peak_slots > m)
      return bug("its program has " + std::to_string(lowered->forwards) + " forwards and " +
                 std::to_string(lowered->peak_slots) + " slots, for the DP's " +
                 std::to_string(forwards) + " and " + std::to_string(m));
    auto g = build_graph(p);
    if (!g) return g.err();
    auto s = detail::finish(name, *g, budget, std::move(lowered->program));
    if (!s) return s.err();
    solution<multi_chain_details> out;
    out.program = std::move(*s);
    out.optimal = true;
    out.details.slots = m;
    out.details.minimum_slots = lo;
    out.details.forwards = forwards;
    out.details.ops = std::move(ops);
    return out;
  }

  static std::string lengths_text(const multi_chain& p) {
    std::string s = "(";
    for (std::size_t j = 0; j < p.lengths.size(); ++j)
      s += (j ? ", " : "") + std::to_string(p.lengths[j]);
    return s + ")";
  }
};

}  // namespace remat
