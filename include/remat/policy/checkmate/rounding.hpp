#pragma once
// checkmate's LP rounding, Checkmate's two-phase rounding [Checkmate20, §5] adapted to this
// model: from a storage plan (which data is alive at the start of each stage, P) to the cheapest
// schedule of the stage model (phase 2), and the cheap storage patterns (keep every s-th
// forward's data, or nothing but the gradients). Not a template: the LP is solved by the policy
// with its backend. When no rounding fits, the LP is solved again at 90%, 80%, ... of the budget.
//
// What is rounded and why, phase 2 and the frees: docs/checkmate.md, Decisions (D11).

#include <optional>
#include <vector>

#include <remat/policy/checkmate/formulation.hpp>

namespace remat::detail {

struct checkmate_rounding : checkmate_formulation {
  // --- phase 2 and the storage patterns ---------------------------------------------------------

  /// Whether P[t][i] is a rounding decision: all data but the sources and protected data.
  static bool rounded(const graph& g, int i) { return !g.is_source(i) && !g.data(i).is_protected; }

  /// Data i kept over its life: from its first producer's stage to its last reader's.
  static void keep_over_life(const graph& g, keep_matrix& keep, int i) {
    const auto pr = g.producers(i);
    const auto co = g.consumers(i);
    const int first = *std::min_element(pr.begin(), pr.end());
    const int last = co.empty() ? g.compute_count() : *std::max_element(co.begin(), co.end());
    for (int t = first + 1; t <= last; ++t) keep[ix(t)][ix(i)] = 1;
  }

  /// A storage matrix with what is not rounded: the sources always, protected data from its
  /// first producer on.
  static keep_matrix base_keep(const graph& g) {
    const int T = g.compute_count();
    const int I = g.data_count();
    keep_matrix keep(ix(T + 1), std::vector<char>(ix(I), 0));
    for (int i = 0; i < I; ++i) {
      if (rounded(g, i)) continue;
      if (g.is_source(i)) {
        for (auto& row : keep) row[ix(i)] = 1;
        continue;
      }
      const auto pr = g.producers(i);
      const int first = *std::min_element(pr.begin(), pr.end());
      for (int t = first + 1; t <= T; ++t) keep[ix(t)][ix(i)] = 1;
    }
    return keep;
  }

  /// Phase 2: the cheapest schedule of the stage model that keeps data i alive at the start of
  /// stage t exactly when keep[t][i] (see "LP relaxation" above); nullopt when the storage
  /// needs what no schedule does: the loss again, a protected output again, a contribution to
  /// a gradient that is already summed in.
  [[nodiscard]] std::optional<schedule> derive(const graph& g, const keep_matrix& keep) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    schedule out;
    memory_state state = memory_state::initial(g);  // not a structured binding: lambdas use it
    auto& alive = state.alive;
    auto& done = state.done;
    std::vector<char> need(ix(I)), mode;  // mode: 0 idle, 1 normal, 2 fast
    std::vector<int> last(ix(I));
    for (int t = 0; t < T; ++t) {
      const auto& keep_next = keep[ix(t + 1)];
      std::fill(need.begin(), need.end(), 0);
      for (int i = 0; i < I; ++i)
        if (keep_next[ix(i)] && !alive[ix(i)]) need[ix(i)] = 1;
      mode.assign(ix(t + 1), 0);
      for (int k = t; k >= 0; --k) {
        bool runs = k == t, phantom = false;
        for (int i : g.outputs(k))
          if (need[ix(i)]) {
            runs = true;
            phantom = phantom || g.data(i).kind == data_kind::phantom;
          }
        if (!runs) continue;
        const bool fwd = g.compute(k).kind == compute_kind::forward;
        if (k < t && g.compute(k).kind != compute_kind::forward) return std::nullopt;
        mode[ix(k)] = fwd && fast_forward && !phantom ? 2 : 1;
        for (int i : g.inputs(k))
          if (!alive[ix(i)]) need[ix(i)] = 1;
      }
      // The last step of the stage related to each data.
      std::fill(last.begin(), last.end(), -1);
      for (int k = 0; k <= t; ++k) {
        if (!mode[ix(k)]) continue;
        for (int i : g.inputs(k)) last[ix(i)] = k;
        for (int i : g.outputs(k))
          if (mode[ix(k)] == 1 || g.data(i).kind != data_kind::phantom) last[ix(i)] = k;
      }
      auto release = [&](int i) {
        out.ops.push_back(instruction::free(i));
        alive[ix(i)] = 0;
        std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
      };
      auto droppable = [&](int i) {
        return alive[ix(i)] && !keep_next[ix(i)] && !g.data(i).is_protected;
      };
      for (int i = 0; i < I; ++i)
        if (droppable(i) && last[ix(i)] < 0) release(i);
      for (int k = 0; k <= t; ++k) {
        if (!mode[ix(k)]) continue;
        const bool fast = mode[ix(k)] == 2;
        for (int i : g.outputs(k)) {
          if (fast && g.data(i).kind == data_kind::phantom) continue;
          const auto pr = g.producers(i);
          const auto p = static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
          if (alive[ix(i)] && done[ix(i)][p]) {
            if (pr.size() > 1 || g.data(i).is_protected) return std::nullopt;
            release(i);  // recomputed: allocated again at once
          }
          alive[ix(i)] = 1;
          done[ix(i)][p] = 1;
        }
        out.ops.push_back(fast ? instruction::fast_forward(k) : instruction::compute(k));
        out.predicted_time += fast ? g.compute(k).fast_time : g.compute(k).time;
        for (int i : g.inputs(k))
          if (droppable(i) && last[ix(i)] == k) release(i);
        for (int i : g.outputs(k))
          if (droppable(i) && last[ix(i)] == k) release(i);
      }
    }
    return out;
  }

  /// Cheap storage patterns, all derived by phase 2, all keeping the gradients over their life:
  /// keep every forward's data over its life (store-all), or the activations only, or the data
  /// of every s-th forward (s = 2..), with or without its phantom, or nothing.
  [[nodiscard]] static std::vector<keep_matrix> heuristic_keeps(const graph& g) {
    const int T = g.compute_count();
    const int I = g.data_count();
    std::vector<int> fwd_rank(ix(T), -1);
    int n = 0;
    for (int k = 0; k < T; ++k)
      if (g.compute(k).kind == compute_kind::forward) fwd_rank[ix(k)] = n++;
    const keep_matrix base = base_keep(g);
    std::vector<keep_matrix> out;
    auto made_by_forward = [&](int i) {
      return g.compute(g.producers(i).front()).kind == compute_kind::forward;
    };
    auto pattern = [&](auto chosen) {
      keep_matrix keep = base;
      for (int i = 0; i < I; ++i)
        if (rounded(g, i) && (!made_by_forward(i) || chosen(i))) keep_over_life(g, keep, i);
      out.push_back(std::move(keep));
    };
    auto is_phantom = [&](int i) { return g.data(i).kind == data_kind::phantom; };
    auto rank = [&](int i) { return fwd_rank[ix(g.producers(i).front())]; };
    pattern([](int) { return true; });
    pattern([&](int i) { return !is_phantom(i); });
    for (int s = 2; s <= std::max(2, n); ++s) {
      pattern([&](int i) { return rank(i) % s == s - 1; });
      pattern([&](int i) { return rank(i) % s == s - 1 && !is_phantom(i); });
    }
    pattern([](int) { return false; });
    return out;
  }

  /// The cheap storage patterns' schedules that the simulator accepts, each with its peak and
  /// time set (predicted_peak, predicted_time): from store-all down to keeping nothing, or the
  /// other way with `low_first`; those derived by `stop`, one at least. Milliseconds on graphs of
  /// a few dozen ops; cubic in the graph's size (1.8 s for all of a 250-stage chain's).
  [[nodiscard]] std::vector<schedule> pattern_schedules(const graph& g, bool low_first,
                                                        clock::time_point stop) const {
    std::vector<schedule> out;
    auto keeps = heuristic_keeps(g);
    if (low_first) std::reverse(keeps.begin(), keeps.end());
    for (const auto& keep : keeps) {
      auto s = derive(g, keep);
      if (s) {
        const auto rep = sim::simulate(g, *s, {.record_timeline = false});
        if (rep.valid) {
          s->predicted_peak = rep.peak;
          out.push_back(std::move(*s));
        }
      }
      if (clock::now() > stop) break;
    }
    return out;
  }

  /// The heuristic plan at low budgets: of the cheap patterns' schedules, the one with the
  /// smallest peak (the faster on a tie); nullopt when none is valid (not seen on a valid graph). A
  /// schedule of the stage model, so the MILP is feasible at its peak and takes it as a warm start:
  /// find_minimum's upper end, and the least-memory plan of checkmate's messages. Tried: local
  /// search over the storage matrix (flipping single entries, or a data node's keep over a run of
  /// stages, first improvement), on four graphs of 19-27 ops: it never lowered the best
  /// pattern's peak, in 0.1-14 s. Patterns are tried from the lowest-memory one until `stop`.
  [[nodiscard]] std::optional<schedule> least_memory(const graph& g, clock::time_point stop) const {
    std::optional<schedule> best;
    for (auto& s : pattern_schedules(g, true, stop))
      if (!best || s.predicted_peak < best->predicted_peak ||
          (s.predicted_peak == best->predicted_peak && s.predicted_time < best->predicted_time))
        best = std::move(s);
    return best;
  }

  /// The fastest of the cheap patterns' schedules within the budget, of those tried by `stop`
  /// from store-all down; nullopt when none fits.
  [[nodiscard]] std::optional<schedule> fastest_pattern(const graph& g, bytes budget,
                                                        clock::time_point stop) const {
    std::optional<schedule> best;
    for (auto& s : pattern_schedules(g, false, stop))
      if (s.predicted_peak <= budget && (!best || s.predicted_time < best->predicted_time))
        best = std::move(s);
    return best;
  }
};

}  // namespace remat::detail
