#pragma once
// The stage model with recomputation: layers i..j may run as a stage that stores what its
// backwards need (the store-all option), or as one that keeps only its input per mini-batch in
// flight and recomputes inside its B with a segment policy's program at a share of the memory (a
// recomputing stage, sim::stage_cost). The segment policy is a template parameter: rotor's table
// over the whole chain (rotor_segments, the default) gives every interval's time at every share
// from one DP; policy_segments<P> solves any chain policy P on the intervals it is asked for. The
// pipeline DPs take this model in place of the store-all one and pick, for each stage, the
// fastest option that fits its processor's memory; pipe_recompute_model::program makes the
// chosen option's program. docs/pipeline.md, "Stages that recompute".

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/detail/common.hpp>
#include <remat/policy/detail/discretize.hpp>
#include <remat/policy/pipeline/stage_model.hpp>
#include <remat/policy/rotor_segments.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::detail {

/// Knobs of the recomputing stages.
struct pipe_recompute_knobs {
  /// The segment policy's slots over the processor's memory (rotor's table holds every interval
  /// at each).
  std::int64_t slots = 100;
  /// Recomputing options per interval besides store-all: shares evenly spread from the
  /// smallest that runs the interval to the smallest that runs it fastest.
  int levels = 6;
};

/// The stage model with recomputing stages whose programs are the segment policy's (`Segments`:
/// rotor_segments, dtr_segments<>, policy_segments<P> for any chain policy P; the interface of
/// Mixed Mode's segment policies, policy/mixed_mode.hpp).
template <class Segments = rotor_segments>
class pipe_recompute_model {
 public:
  /// The model for `problem`: the segment policy's table over the chain at `knobs.slots` slots
  /// of the memory M. With an unlimited memory, no recomputation is needed: the store-all
  /// options only. time_limit when `dl` passes while the table or the options are made.
  static result<pipe_recompute_model> make(const pipeline_problem& problem,
                                           pipe_recompute_knobs knobs, const deadline& dl,
                                           std::string_view who, const Segments& segments = {}) {
    pipe_recompute_model m(problem, knobs);
    if (problem.memory >= unlimited_bytes || knobs.slots <= 0 || knobs.levels <= 0) {
      if (!m.fill_options(dl)) return m.too_late(dl, who);
      return m;
    }
    m.chain_ = problem.layers;
    m.discrete_ =
        std::make_unique<discrete_chain>(discretize(m.chain_, problem.memory, knobs.slots));
    m.slots_.emplace(*m.discrete_, problem.memory);
    auto t = [&] {
      if constexpr (requires { segments.prepare(m.chain_, *m.slots_, dl, who); })
        return segments.prepare(m.chain_, *m.slots_, dl, who);
      else
        return segments.prepare(m.chain_, *m.slots_, dl);
    }();
    if (!t) return t.err();
    m.table_ = std::make_unique<table_type>(std::move(*t));
    if (!m.fill_options(dl)) return m.too_late(dl, who);
    return m;
  }

  [[nodiscard]] int layers() const { return base_.layers(); }
  [[nodiscard]] int copies() const { return base_.copies(); }
  [[nodiscard]] bytes boundary_bytes(int j) const { return base_.boundary_bytes(j); }
  [[nodiscard]] seconds transfer(int j) const { return base_.transfer(j); }
  [[nodiscard]] bytes memory(const pipe_stage_option& o, int first, int last, long long g,
                             bool left, bool right) const {
    return base_.memory(o, first, last, g, left, right);
  }

  /// Layers i..j: store-all first, then the recomputing options by work ascending (a larger
  /// share recomputes less); a share no faster than the next smaller one is dropped. Computed
  /// once for every interval when the model is made.
  [[nodiscard]] const std::vector<pipe_stage_option>& options(int i, int j) const {
    return options_[at(i, j)];
  }

  /// The program of a recomputing option (nullopt for store-all), over
  /// segment_chain(chain, i, j): what pipeline_stage::recompute holds.
  [[nodiscard]] result<std::optional<schedule>> program(int i, int j,
                                                        const pipe_stage_option& o) const {
    if (o.share < 0) return std::optional<schedule>{};
    if (!table_)
      return error{status::solver_error,
                   "a recomputing stage option without the segment policy's table (a bug in remat)",
                   {}};
    auto s = table_->program(chain_, i, j, o.share);
    if (!s) return s.err();
    return std::optional<schedule>(std::move(*s));
  }

 private:
  pipe_recompute_model(const pipeline_problem& problem, pipe_recompute_knobs knobs)
      : base_(problem), knobs_(knobs) {}

  [[nodiscard]] std::size_t at(int i, int j) const {
    return static_cast<std::size_t>((j - 1) * j / 2 + (i - 1));
  }

  using table_type = typename Segments::table;

  /// Every interval's options; false when `dl` passed first (a lazy table, policy_segments,
  /// solves its policy here).
  [[nodiscard]] bool fill_options(const deadline& dl) {
    const int n = base_.layers();
    options_.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(n + 1) / 2, {});
    for (int j = 1; j <= n; ++j) {
      for (int i = 1; i <= j; ++i) options_[at(i, j)] = compute_options(i, j);
      if (dl.passed()) return false;
    }
    return true;
  }
  [[nodiscard]] static error too_late(const deadline& dl, std::string_view who) {
    return time_limit_reached(who, dl, "making the recomputing stages' options",
                              "raise time_limit, or use fewer recompute_knobs.slots or levels");
  }

  /// Store-all, then the segment policy at `levels` shares evenly from the smallest share that
  /// runs layers i..j to the smallest that runs them without recomputing more (each found by a
  /// bisection: the time falls as the share grows; a policy whose time does not only finds some
  /// such shares, each option still its share's program and cost).
  [[nodiscard]] std::vector<pipe_stage_option> compute_options(int i, int j) const {
    std::vector<pipe_stage_option> out;
    const pipe_stage_option own = base_.options(i, j)[0];
    out.push_back(own);
    if (!table_) return out;
    const std::int64_t count = slots_->count;
    const double fastest = table_->cost(i, j, count);
    if (!(fastest < segment_inf)) return out;  // not even the whole memory runs it
    auto smallest = [&](auto&& good) {         // the smallest share in 0..count that is good
      std::int64_t lo = 0, hi = count;
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (good(mid))
          hi = mid;
        else
          lo = mid + 1;
      }
      return hi;
    };
    const std::int64_t least =
        smallest([&](std::int64_t q) { return table_->cost(i, j, q) < segment_inf; });
    const std::int64_t most =
        smallest([&](std::int64_t q) { return table_->cost(i, j, q) <= fastest * (1 + 1e-12); });
    const bytes input = chain_.a(i - 1);
    const int levels = std::max(1, knobs_.levels);
    std::int64_t previous = -1;
    for (int k = 0; k < levels; ++k) {  // from the largest share down
      const std::int64_t share = levels == 1 ? least : most - (most - least) * k / (levels - 1);
      if (share == previous) continue;
      previous = share;
      pipe_stage_option o = own;
      o.backward = table_->cost(i, j, share);  // the forwards again and the backwards
      o.per_activation = input;
      o.working = std::max<bytes>(0, slots_->bytes_of(share) - input);
      o.share = share;
      if (out.size() > 1 && o.work() <= out.back().work()) out.pop_back();  // no faster
      out.push_back(o);
    }
    return out;
  }

  pipe_store_all_model base_;
  pipe_recompute_knobs knobs_;
  chain chain_;
  std::unique_ptr<discrete_chain> discrete_;
  std::optional<segment_slots> slots_;
  std::unique_ptr<table_type> table_;
  std::vector<std::vector<pipe_stage_option>> options_;  ///< per interval, at(i, j)
};

}  // namespace remat::detail
