#pragma once
// rotor's table over a whole chain as the costs of its segments: one DP gives every segment
// first..last at every share of the budget's slots, and the program of any of them (over
// segment_chain(c, first, last), problem/chain.hpp). Mixed Mode's planned segments and the
// pipeline's recomputing stages read it. docs/mixed-mode.md, docs/pipeline.md.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

namespace detail {

/// The cost of a segment no share can run.
inline constexpr double segment_inf = std::numeric_limits<double>::infinity();

/// The slots of a solve over segments (Mixed Mode's, a pipeline's stages): the budget in `count`
/// shares (discretize()'s slots), and the chain in slots (sizes rounded up).
struct segment_slots {
  const discrete_chain* d = nullptr;
  bytes budget = 0;
  std::int64_t count = 0;
  bool exact = false;
  std::int64_t unit = 1;

  segment_slots(const discrete_chain& dc, bytes b)
      : d(&dc), budget(b), count(dc.slots), exact(dc.exact), unit(dc.unit) {}
  /// The bytes of `share` slots, rounded down (so that the shares' bytes add up to the budget at
  /// most).
  [[nodiscard]] bytes bytes_of(std::int64_t share) const {
    if (exact) return share * unit;
    __extension__ using i128 = __int128;
    return static_cast<bytes>(static_cast<i128>(share) * budget / count);
  }
};

}  // namespace detail

/// rotor on segments (Mixed Mode's planned segments, a pipeline's recomputing stages): its table
/// over the whole chain holds every segment at every share, C(first, last, share - a_{first-1})
/// (the share holds the segment's input).
struct rotor_segments {
  static constexpr std::string_view name = "rotor";

  class table {
   public:
    [[nodiscard]] double cost(int first, int last, std::int64_t share) const {
      const std::int64_t m = share - d_->a[static_cast<std::size_t>(first - 1)];
      if (m < 0 || m > d_->dp_budget) return detail::segment_inf;
      return dp_->cost(first, last, m);
    }
    /// The segment's program over segment_chain(c, first, last)'s graph.
    [[nodiscard]] result<schedule> program(const chain& c, int first, int last,
                                           std::int64_t share) const {
      const auto dec =
          dp_->reconstruct(first, last, share - d_->a[static_cast<std::size_t>(first - 1)]);
      const bool tail = last < c.length();
      std::vector<chain_op> ops;
      bool added = false;
      for (chain_op op : dec.ops) {
        if (tail && !added && op.kind == chain_op_kind::backward) {
          const int g = last - first + 2;  // the added stage
          ops.push_back(chain_op::forward(g, forward_mode::save_all));
          ops.push_back(chain_op::backward(g));
          added = true;
        }
        op.index -= first - 1;
        ops.push_back(op);
      }
      auto s = lower(last - first + 1 + (tail ? 1 : 0), ops);
      if (!s) return s.err();
      s->predicted_time = dec.time;
      return s;
    }

   private:
    friend struct rotor_segments;
    std::unique_ptr<detail::discrete_chain> d_;
    std::unique_ptr<detail::rotor_dp> dp_;
  };

  [[nodiscard]] result<table> prepare(const chain& c, const detail::segment_slots& q,
                                      const detail::deadline& dl,
                                      std::string_view who = "mixed_mode") const {
    table t;
    t.d_ = std::make_unique<detail::discrete_chain>(*q.d);
    t.d_->dp_budget = t.d_->slots;  // every segment's input, not only a_0's, comes off a share
    const double cells = c.length() * (c.length() + 1) / 2.0 * static_cast<double>(q.count + 1);
    if (cells * sizeof(double) > static_cast<double>(max_table_bytes))
      return error{status::invalid_problem,
                   std::string(who) + ": rotor's table of every segment at " +
                       std::to_string(q.count) + " slots would take " +
                       format_bytes(static_cast<bytes>(cells * 8)) + "; use fewer slots",
                   {}};
    t.dp_ = std::make_unique<detail::rotor_dp>(*t.d_);
    if (!t.dp_->fill(dl, {}))
      return detail::time_limit_reached(who, dl, "filling rotor's table",
                                        "raise time_limit, or use fewer slots");
    return t;
  }
  std::int64_t max_table_bytes = std::int64_t{1} << 30;
};

}  // namespace remat
