#pragma once
// Static placement of a run's buffers in one pool: once a run's allocations and frees are
// recorded, place() gives every buffer an offset (greedy by size, best fit among the buffers whose
// lifetimes overlap), and placed_arena replays them in the next runs, so a run's real peak is the
// planned one; a run whose allocation sizes differ from the recorded ones is refused
// (placement_mismatch). Backends that hold one (the CUDA backend) are RunAwareBackends.
// docs/executor.md, "Static placement".

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/exec/detail/arena.hpp>

namespace remat::exec {

/// A buffer of `size` bytes, live from event `first` (its allocation) to event `last` (its
/// free), half-open: a buffer freed at event t and one allocated at t' > t may share memory.
struct buffer_lifetime {
  bytes size = 0;
  int first = 0;
  int last = 0;
};

/// A buffer that already has its place: [offset, offset + size), live from the start up to
/// event `last`.
struct fixed_buffer {
  bytes offset = 0;
  bytes size = 0;
  int last = 0;
};

struct placement {
  std::vector<bytes> offsets;  ///< one per buffer_lifetime, in their order
  bytes placed_peak = 0;       ///< the highest end offset, fixed buffers included
  bytes live_peak = 0;         ///< the most bytes live at once: a lower bound of placed_peak
};

/// Offsets for `buffers` (sizes as they will be reserved: already rounded to the alignment,
/// which every offset here keeps) around the `fixed` ones.
inline placement place(std::span<const buffer_lifetime> buffers,
                       std::span<const fixed_buffer> fixed = {}, bytes alignment = 1) {
  struct item {
    bytes offset, size;
    int first, last;
  };
  auto overlap = [](const item& a, int first, int last) {
    return a.first < last && first < a.last;
  };
  auto align = [&](bytes v) { return (v + alignment - 1) / alignment * alignment; };
  placement out;
  out.offsets.assign(buffers.size(), 0);
  std::vector<item> placed;
  placed.reserve(buffers.size() + fixed.size());
  for (const auto& f : fixed) placed.push_back({f.offset, f.size, 0, f.last});

  std::vector<std::size_t> order(buffers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto &x = buffers[a], &y = buffers[b];
    if (x.size != y.size) return x.size > y.size;
    if (x.last - x.first != y.last - y.first) return x.last - x.first > y.last - y.first;
    return x.first < y.first;
  });
  std::vector<const item*> around;
  for (const std::size_t i : order) {
    const auto& b = buffers[i];
    if (b.size <= 0 || b.last <= b.first) {  // takes no memory at any moment
      out.offsets[i] = 0;
      continue;
    }
    around.clear();
    for (const auto& p : placed)
      if (p.size > 0 && overlap(p, b.first, b.last)) around.push_back(&p);
    std::sort(around.begin(), around.end(),
              [](const item* a, const item* c) { return a->offset < c->offset; });
    // Best fit among the gaps between the overlapping buffers; past the last one if none fits.
    std::optional<bytes> best;
    bytes best_gap = 0, cursor = 0;
    for (const item* p : around) {
      const bytes start = align(cursor);
      if (p->offset >= start + b.size && (!best || p->offset - start < best_gap)) {
        best = start;
        best_gap = p->offset - start;
      }
      cursor = std::max(cursor, p->offset + p->size);
    }
    const bytes at = best ? *best : align(cursor);
    out.offsets[i] = at;
    placed.push_back({at, b.size, b.first, b.last});
  }
  // The placed extent, and the live peak (a sweep over allocation and free events).
  std::map<int, bytes> delta;
  for (const auto& p : placed) {
    if (p.size <= 0 || p.last <= p.first) continue;
    out.placed_peak = std::max(out.placed_peak, p.offset + p.size);
    delta[p.first] += p.size;
    delta[p.last] -= p.size;
  }
  bytes live = 0;
  for (const auto& [t, d] : delta) out.live_peak = std::max(out.live_peak, live += d);
  return out;
}

/// What a recorded run allocated, in the order it did: the input of place().
struct allocation_trace {
  std::vector<buffer_lifetime> buffers;  ///< reserved sizes (rounded), in allocation order
  std::vector<bytes> requested;          ///< the requested size of each
  std::vector<bytes> offsets;            ///< where the recorded run put each (best fit)
  std::vector<fixed_buffer> fixed;       ///< what was live when the run began
  int events = 0;                        ///< allocations and frees recorded
};

/// A run did not allocate as the recorded one did.
class placement_mismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What plan_placement() computed.
struct placement_report {
  bytes placed_peak = 0;      ///< the pool the planned run needs (highest end offset)
  bytes live_peak = 0;        ///< the most reserved bytes live at once: a lower bound
  bytes recorded_extent = 0;  ///< the highest end offset of the recorded (best-fit) run
  std::size_t allocations = 0;
};

/// An arena that can record a run and replay it at planned offsets (see the top of this file).
class placed_arena {
 public:
  explicit placed_arena(bytes capacity, bytes alignment = 256) : arena_(capacity, alignment) {}

  /// The next run (from begin_run() to end_run()) is recorded.
  void record_next_run() {
    record_requested_ = true;
    trace_.reset();
  }
  [[nodiscard]] bool has_trace() const noexcept { return trace_.has_value() && !recording_; }
  [[nodiscard]] const std::optional<allocation_trace>& trace() const noexcept { return trace_; }

  /// Places the recorded run's buffers and replays the placement in every later run: place()'s,
  /// or the recorded run's own offsets when they needed less (greedy placement is a heuristic;
  /// the recorded offsets are a valid placement too). Fails when nothing was recorded or when
  /// the placement does not fit in the capacity.
  result<placement_report> plan_placement() {
    if (!has_trace())
      return error{
          status::invalid_problem,
          "plan_placement: no recorded run; call record_next_run() and run the schedule once first",
          {}};
    auto p = place(trace_->buffers, trace_->fixed, arena_.alignment());
    if (recorded_extent_ < p.placed_peak) {
      p.offsets = trace_->offsets;
      p.placed_peak = recorded_extent_;
    }
    if (p.placed_peak > arena_.capacity())
      return error{status::budget_too_small,
                   "plan_placement: the placement needs a pool of " + format_bytes(p.placed_peak) +
                       ", more than the " + format_bytes(arena_.capacity()) + " available",
                   p.placed_peak};
    plan_ = p.offsets;
    return placement_report{p.placed_peak, p.live_peak, recorded_extent_, p.offsets.size()};
  }
  /// Back to best fit in every run.
  void drop_placement() noexcept { plan_.reset(); }
  [[nodiscard]] bool placing() const noexcept { return plan_.has_value(); }

  /// A run begins: recording starts (when asked), or the replay checks that what is live is what
  /// was live when the recorded run began.
  void begin_run() {
    in_run_ = true;
    cursor_ = 0;
    recording_ = false;
    run_extent_ = 0;
    arena_.for_each_live([&](bytes off, bytes reserved, bytes) {
      run_extent_ = std::max(run_extent_, off + reserved);
    });
    run_worst_ = arena_.now();
    if (record_requested_) {
      record_requested_ = false;
      recording_ = true;
      drop_placement();
      trace_.emplace();
      live_ids_.clear();
      arena_.for_each_live([&](bytes off, bytes reserved, bytes) {
        live_ids_[off] = -1 - static_cast<int>(trace_->fixed.size());
        trace_->fixed.push_back({off, reserved, std::numeric_limits<int>::max()});
      });
      return;
    }
    if (plan_) {
      std::vector<std::pair<bytes, bytes>> now;
      arena_.for_each_live(
          [&](bytes off, bytes reserved, bytes) { now.emplace_back(off, reserved); });
      std::vector<std::pair<bytes, bytes>> then;
      for (const auto& f : trace_->fixed) then.emplace_back(f.offset, f.size);
      if (now != then) {
        in_run_ = false;
        throw placement_mismatch("placement: the run begins with " + std::to_string(now.size()) +
                                 " live buffers (the input, parameters, ...) that are not where "
                                 "the recorded run had its " +
                                 std::to_string(then.size()) +
                                 "; free the previous run's results before the next run, allocate "
                                 "the input the same way, or "
                                 "record again (record_next_run)");
      }
    }
  }
  /// The run ended (or failed): recording stops; frees and allocations are ordinary again.
  void end_run() noexcept {
    if (recording_) {
      // Buffers still live at the end live to the end.
      for (auto& b : trace_->buffers)
        if (b.last == open) b.last = trace_->events + 1;
      for (auto& f : trace_->fixed)
        if (f.last == std::numeric_limits<int>::max()) f.last = trace_->events + 1;
      recorded_extent_ = run_extent_;
    }
    completed_as_planned_ = plan_.has_value() && cursor_ == plan_->size();
    recording_ = false;
    in_run_ = false;
  }
  /// True when the last run under a placement made exactly the planned allocations.
  [[nodiscard]] bool last_run_as_planned() const noexcept { return completed_as_planned_; }

  /// An offset for n > 0 bytes: the planned one during a replayed run, best fit otherwise;
  /// nothing when best fit finds no block. `activity` names the allocation in a mismatch.
  std::optional<bytes> allocate(bytes n, const std::string& activity) {
    if (in_run_ && plan_) {
      const std::size_t k = cursor_;
      if (k >= plan_->size())
        throw placement_mismatch(
            activity + ": allocation #" + std::to_string(k + 1) + " of " + format_bytes(n) +
            " is beyond the " + std::to_string(plan_->size()) +
            " allocations of the recorded run; the run does not follow the recorded one "
            "(record again, or drop the placement)");
      if (trace_->requested[k] != n)
        throw placement_mismatch(
            activity + ": allocation #" + std::to_string(k + 1) + " is " + format_bytes(n) +
            " but the recorded run allocated " + format_bytes(trace_->requested[k]) +
            " there; the run does not follow the recorded one (record again, or drop "
            "the placement)");
      if (!arena_.allocate_at((*plan_)[k], n))
        throw placement_mismatch(
            activity + ": allocation #" + std::to_string(k + 1) + " (" + format_bytes(n) +
            ") was planned at offset " + std::to_string((*plan_)[k]) +
            ", which is still in use: a buffer lives longer than in the recorded run");
      ++cursor_;
      note_run((*plan_)[k], n);
      return (*plan_)[k];
    }
    auto off = arena_.allocate(n);
    if (off && in_run_) note_run(*off, n);
    if (off && recording_) {
      live_ids_[*off] = static_cast<int>(trace_->buffers.size());
      trace_->buffers.push_back({arena_.round_up(n), ++trace_->events, open});
      trace_->requested.push_back(n);
      trace_->offsets.push_back(*off);
    }
    return off;
  }
  void deallocate(bytes offset) {
    arena_.deallocate(offset);
    if (in_run_) note_run(0, 0);
    if (!recording_) return;
    const auto it = live_ids_.find(offset);
    if (it == live_ids_.end()) return;
    ++trace_->events;
    if (it->second >= 0)
      trace_->buffers[static_cast<std::size_t>(it->second)].last = trace_->events;
    else
      trace_->fixed[static_cast<std::size_t>(-1 - it->second)].last = trace_->events;
    live_ids_.erase(it);
  }

  /// The highest end offset of a live block during the current or last run (from begin_run):
  /// under a placement, the planned placed_peak.
  [[nodiscard]] bytes run_extent() const noexcept { return run_extent_; }
  /// The moment of the current or last run when the most free bytes lay outside the largest block.
  [[nodiscard]] const detail::fragmentation_snapshot& run_worst_fragmentation() const noexcept {
    return run_worst_;
  }

  [[nodiscard]] const detail::arena& arena() const noexcept { return arena_; }
  [[nodiscard]] detail::arena& arena() noexcept { return arena_; }

 private:
  static constexpr int open = -1;
  void note_run(bytes off, bytes n) {
    if (n > 0) run_extent_ = std::max(run_extent_, off + arena_.round_up(n));
    if (const auto now = arena_.now(); now.stranded() > run_worst_.stranded()) run_worst_ = now;
  }
  detail::arena arena_;
  bool record_requested_ = false, recording_ = false, in_run_ = false,
       completed_as_planned_ = false;
  std::optional<allocation_trace> trace_;
  std::map<bytes, int> live_ids_;  // offset -> buffer index (>= 0) or -1 - fixed index
  std::optional<std::vector<bytes>> plan_;
  std::size_t cursor_ = 0;
  bytes recorded_extent_ = 0, run_extent_ = 0;
  detail::fragmentation_snapshot run_worst_{};
};

}  // namespace remat::exec
