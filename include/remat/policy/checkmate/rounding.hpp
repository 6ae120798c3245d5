#pragma once
// checkmate's LP rounding, Checkmate's two-phase rounding [Checkmate20, §5] adapted to this
// model: from a storage plan (which data is alive at the start of each stage, P) to the cheapest
// schedule of the stage model (phase 2), and the cheap storage patterns (keep every s-th
// forward's data, or nothing but the gradients). Not a template: the LP is solved by the policy
// with its backend. When no rounding fits, the LP is solved again at 90%, 80%, ... of the budget.
//
// What is rounded and why, phase 2 and the frees: docs/checkmate.md, Decisions (D11).

#include <optional>
#include <span>
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
  /// a gradient that is already summed in. A forward runs as a fast-forward where fast_forward
  /// is on and no phantom of it is needed.
  [[nodiscard]] std::optional<schedule> derive(const graph& g, const keep_matrix& keep) const {
    std::vector<std::vector<run_variant>> variants(ix(g.compute_count()));
    for (int k = 0; k < g.compute_count(); ++k) {
      const auto& n = g.compute(k);
      const std::vector<char> all_in(g.inputs(k).size(), 1), all_out(g.outputs(k).size(), 1);
      variants[ix(k)].push_back({n.time, n.overhead, all_out, all_in, op_kind::compute});
      if (!fast_forward || n.kind != compute_kind::forward) continue;
      std::vector<char> no_phantom(all_out.size(), 1);
      for (std::size_t p = 0; p < no_phantom.size(); ++p)
        no_phantom[p] = g.data(g.outputs(k)[p]).kind != data_kind::phantom;
      variants[ix(k)].push_back(
          {n.fast_time, n.fast_overhead, std::move(no_phantom), all_in, op_kind::fast_forward});
    }
    auto runs = derive_runs(g, variants, {}, keep);
    if (!runs) return std::nullopt;
    schedule out;
    for (const auto& r : *runs) {
      out.ops.push_back(r.ins);
      if (r.ins.is_compute()) out.predicted_time += variants[ix(r.ins.node)][ix(r.variant)].time;
    }
    return out;
  }

  /// Phase 2 over the nodes' run variants (variants_of's, or a hierarchical graph's): node k
  /// runs in its variant `normal[k]` (0 where `normal` is empty), or in a fast-forward variant
  /// (op fast_forward) that makes every output it is run for, the first such; each variant
  /// reads and makes what its masks say. nullopt as derive, or where `normal[k]` does not make
  /// an output the storage needs of k, or would run again where it runs once.
  [[nodiscard]] std::optional<std::vector<run_record>> derive_runs(
      const graph& g, const std::vector<std::vector<run_variant>>& variants,
      std::span<const int> normal, const keep_matrix& keep) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    std::vector<run_record> out;
    memory_state state = memory_state::initial(g);  // not a structured binding: lambdas use it
    auto& alive = state.alive;
    auto& done = state.done;
    std::vector<char> need(ix(I));
    std::vector<int> mode, last(ix(I));  // mode: the variant run plus one (0 idle)
    for (int t = 0; t < T; ++t) {
      const auto& keep_next = keep[ix(t + 1)];
      std::fill(need.begin(), need.end(), 0);
      for (int i = 0; i < I; ++i)
        if (keep_next[ix(i)] && !alive[ix(i)]) need[ix(i)] = 1;
      mode.assign(ix(t + 1), 0);
      for (int k = t; k >= 0; --k) {
        const auto outs = g.outputs(k);
        bool runs = k == t;
        for (int i : outs) runs = runs || need[ix(i)];
        if (!runs) continue;
        if (k < t && g.compute(k).kind != compute_kind::forward) return std::nullopt;
        const auto& vs = variants[ix(k)];
        auto makes_needed = [&](const run_variant& v) {
          for (std::size_t q = 0; q < outs.size(); ++q)
            if (need[ix(outs[q])] && !v.makes[q]) return false;
          return true;
        };
        int chosen = normal.empty() ? 0 : normal[ix(k)];
        for (std::size_t v = 0; v < vs.size(); ++v)
          if (vs[v].op == op_kind::fast_forward && makes_needed(vs[v])) {
            chosen = static_cast<int>(v);
            break;
          }
        if (!makes_needed(vs[ix(chosen)]) || (k < t && vs[ix(chosen)].once)) return std::nullopt;
        mode[ix(k)] = chosen + 1;
        const auto ins = g.inputs(k);
        for (std::size_t q = 0; q < ins.size(); ++q)
          if (vs[ix(chosen)].reads[q] && !alive[ix(ins[q])]) need[ix(ins[q])] = 1;
      }
      // The last step of the stage related to each data.
      std::fill(last.begin(), last.end(), -1);
      for (int k = 0; k <= t; ++k) {
        if (!mode[ix(k)]) continue;
        const run_variant& v = variants[ix(k)][ix(mode[ix(k)] - 1)];
        const auto ins = g.inputs(k);
        const auto outs = g.outputs(k);
        for (std::size_t q = 0; q < ins.size(); ++q)
          if (v.reads[q]) last[ix(ins[q])] = k;
        for (std::size_t q = 0; q < outs.size(); ++q)
          if (v.makes[q]) last[ix(outs[q])] = k;
      }
      auto release = [&](int i) {
        out.push_back({instruction::free(i), 0});
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
        const int chosen = mode[ix(k)] - 1;
        const run_variant& v = variants[ix(k)][ix(chosen)];
        const auto outs = g.outputs(k);
        for (std::size_t q = 0; q < outs.size(); ++q) {
          if (!v.makes[q]) continue;
          const int i = outs[q];
          const auto pr = g.producers(i);
          const auto p = static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
          if (alive[ix(i)] && done[ix(i)][p]) {
            if (pr.size() > 1 || g.data(i).is_protected) return std::nullopt;
            release(i);  // recomputed: allocated again at once
          }
          alive[ix(i)] = 1;
          done[ix(i)][p] = 1;
        }
        out.push_back({{v.op, k}, chosen});
        const auto ins = g.inputs(k);
        for (std::size_t q = 0; q < ins.size(); ++q)
          if (v.reads[q] && droppable(ins[q]) && last[ix(ins[q])] == k) release(ins[q]);
        for (std::size_t q = 0; q < outs.size(); ++q)
          if (v.makes[q] && droppable(outs[q]) && last[ix(outs[q])] == k) release(outs[q]);
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
