#pragma once
// Any chain policy on segments: policy_segments<P> is a segment policy (the interface of
// rotor_segments and dtr_segments: prepare(chain, segment_slots, deadline) -> table,
// table.cost(first, last, share), table.program(chain, first, last, share)) made from a chain
// policy P, anything with solve(chain, bytes) -> result<schedule> (revolve, store_all, sqrt,
// checkmate<...>, rotor itself). A segment at a share is P's program for
// segment_chain(c, first, last) within the share's bytes, solved when first asked and remembered;
// its cost is the simulator's makespan of that program. A pipeline's recomputing stages
// (pipe_recompute_model<Segments>, docs/pipeline.md) and Mixed Mode's planned segments take it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <remat/core/result.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/rotor_segments.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat {

/// A chain policy P as a segment policy. Unlike rotor's table, which one DP fills for every
/// segment at every share, this one solves P lazily: the callers ask for a few shares of each
/// segment (a pipeline stage's options: a bisection and a few levels). A share is infeasible
/// (detail::segment_inf) where P finds no program within its bytes, or where the simulator
/// rejects P's program or finds its peak above them.
template <ChainPolicy P>
struct policy_segments {
  static constexpr std::string_view name = P::name;
  P policy{};

  class table {
   public:
    /// The simulator's makespan of P's program for first..last within bytes_of(share).
    [[nodiscard]] double cost(int first, int last, std::int64_t share) const {
      const auto key = std::make_tuple(first, last, share);
      if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
      double v = detail::segment_inf;
      if (auto s = solve(first, last, share)) v = s->second;
      memo_.emplace(key, v);
      return v;
    }
    /// P's program over segment_chain(c, first, last)'s graph (its added stage when last < N),
    /// with its predicted time the simulator's makespan.
    [[nodiscard]] result<schedule> program(const chain& c, int first, int last,
                                           std::int64_t share) const {
      if (c.length() != chain_.length())
        return error{status::invalid_problem,
                     std::string(P::name) + " on segments: the table is of a chain of " +
                         std::to_string(chain_.length()) + " stages, asked for one of " +
                         std::to_string(c.length()),
                     {}};
      auto s = solve(first, last, share);
      if (!s) return s.err();
      s->first.predicted_time = s->second;
      return std::move(s->first);
    }

   private:
    friend struct policy_segments;
    /// P's program at the share and the simulator's makespan of it, or why there is none.
    [[nodiscard]] result<std::pair<schedule, double>> solve(int first, int last,
                                                            std::int64_t share) const {
      auto what = [&] {
        return std::string(P::name) + " on layers " + std::to_string(first) + ".." +
               std::to_string(last) + " at share " + std::to_string(share);
      };
      if (first < 1 || last < first || last > chain_.length() || share < 0 || share > q_->count)
        return error{status::invalid_problem,
                     what() + ": no such segment or share (layers 1.." +
                         std::to_string(chain_.length()) + ", shares 0.." +
                         std::to_string(q_->count) + ")",
                     {}};
      const chain seg = detail::segment_chain(chain_, first, last);
      const bytes budget = q_->bytes_of(share);
      if constexpr (HasMinimumBudget<P, chain>) {
        // Below P's least budget for the segment nothing is solved: a P that fails there may
        // try every program it has first.
        auto [it, added] = least_.try_emplace(std::make_pair(first, last), 0);
        if (added) it->second = policy_.minimum_budget(seg);
        if (budget < it->second)
          return error{status::budget_too_small,
                       what() + ": " + format_bytes(budget) + " is below the least " +
                           format_bytes(it->second) + " it plans the segment with",
                       it->second};
      }
      auto s = policy_.solve(seg, budget);
      if (!s) return s.err();
      const sim::report rep = sim::simulate(seg, *s);
      if (!rep.valid)
        return error{status::solver_error,
                     what() + ": the simulator rejects its program: " +
                         (rep.first_violation ? rep.first_violation->message : std::string()),
                     {}};
      if (rep.peak > budget)
        return error{status::solver_error,
                     what() + ": its program's peak " + format_bytes(rep.peak) + " is above " +
                         format_bytes(budget),
                     {}};
      return std::pair<schedule, double>(std::move(*s), rep.makespan);
    }

    chain chain_;
    std::optional<detail::segment_slots> q_;  // its d is not read
    P policy_{};
    /// The costs asked for so far.
    mutable std::map<std::tuple<int, int, std::int64_t>, double> memo_;
    /// P's least budget of each segment asked for (P with minimum_budget(chain) only).
    mutable std::map<std::pair<int, int>, bytes> least_;
  };

  [[nodiscard]] result<table> prepare(const chain& c, const detail::segment_slots& q,
                                      const detail::deadline& /*dl*/) const {
    table t;
    t.chain_ = c;
    t.q_ = q;
    t.policy_ = policy;
    return t;
  }
};

}  // namespace remat
