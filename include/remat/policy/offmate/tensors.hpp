#pragma once
// From the O-ILP's fractions to whole tensors [Offmate24, §4.3, Algorithm 1]: for each group,
// which tensors are offloaded, freed on the GPU and prefetched at each step, which are updated by
// the CPU and in which step, and the same for the optimizer states of the others. Whole tensors
// never need more GPU memory than the fractions said at any step (offloads and frees are minimal
// covers of "at least", prefetches of "at most"), so a valid plan stays within its budget.
// fractions_of() writes a whole-tensor plan back as fractions, so that evaluate() (plan.hpp), the
// model's referee, checks it and prices it like any plan. docs/offmate.md, "Whole tensors".

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/units.hpp>
#include <remat/policy/offmate/plan.hpp>
#include <remat/policy/offmate/problem.hpp>

namespace remat {

/// What happens to one group's tensors in one step; tensor indices into the group's `tensors`.
/// Everything is listed at the step in which it happens: an offload copies during the step (at
/// g_w, after the GPU update), a prefetch copies during the step and the tensor is resident from
/// the next one, a free lets the GPU copy go at the end of the step, a CPU update runs on the CPU
/// during the step.
struct offmate_tensor_step {
  std::vector<int> offload;   ///< weight to the host (a CPU-updated tensor: its gradient)
  std::vector<int> prefetch;  ///< weight back to the GPU
  std::vector<int> free;      ///< GPU copy of the weight dropped (its host copy is current)
  std::vector<int> states_offload, states_prefetch, states_free;  ///< the same for the states
  std::vector<int> cpu_update;                                    ///< optimizer step on the CPU

  friend bool operator==(const offmate_tensor_step&, const offmate_tensor_step&) = default;
};

/// One group's whole-tensor plan.
struct offmate_group_tensors {
  std::vector<offmate_tensor_step> steps;  ///< per step
  std::vector<char> resident;              ///< per tensor: its weight on the GPU during step 0
  std::vector<char> states_resident;       ///< per tensor: its states on the GPU during step 0
  std::vector<char> cpu_updated;           ///< per tensor: updated by the CPU (states on the host)
  /// Trainable bytes the fractions gave the CPU that whole tensors could not take: only where the
  /// fractions' running sum of CPU updates never reaches a cover (a tolerance's worth); 0
  /// otherwise.
  bytes cpu_shortfall = 0;

  friend bool operator==(const offmate_group_tensors&, const offmate_group_tensors&) = default;
};

struct offmate_tensor_plan {
  std::vector<int> option;                    ///< per block
  std::vector<offmate_group_tensors> groups;  ///< per group

  friend bool operator==(const offmate_tensor_plan&, const offmate_tensor_plan&) = default;
};

/// SELECT [Offmate24, Algorithm 1]: the subset of `sizes` (indices) whose total is at least
/// `value` and as small as possible; among equal totals the first found by a search that tries
/// the larger tensors first (fewer tensors, then lower indices). value <= 0: none; value above
/// the total: all. Exact by branch and bound up to `node_limit` search nodes, then the best found
/// (still a cover).
inline std::vector<int> select_cover(const std::vector<bytes>& sizes, bytes value,
                                     long node_limit = 1'000'000) {
  std::vector<int> all(sizes.size());
  std::iota(all.begin(), all.end(), 0);
  if (value <= 0) return {};
  const bytes total = std::accumulate(sizes.begin(), sizes.end(), bytes{0});
  if (value >= total) return all;
  std::ranges::stable_sort(all, [&](int a, int b) {
    return sizes[static_cast<std::size_t>(a)] > sizes[static_cast<std::size_t>(b)];
  });
  std::vector<bytes> suffix(all.size() + 1, 0);
  for (std::size_t i = all.size(); i-- > 0;)
    suffix[i] = suffix[i + 1] + sizes[static_cast<std::size_t>(all[i])];
  bytes best = total + 1;
  std::vector<int> best_set = all, current;
  long nodes = 0;
  // Depth first over the sorted tensors, taking each before leaving it out.
  auto search = [&](auto& self, std::size_t i, bytes sum) -> void {
    if (sum >= value) {
      if (sum < best) {
        best = sum;
        best_set = current;
      }
      return;
    }
    if (i == all.size() || sum + suffix[i] < value || std::max(sum, value) >= best ||
        ++nodes > node_limit)
      return;
    current.push_back(all[i]);
    self(self, i + 1, sum + sizes[static_cast<std::size_t>(all[i])]);
    current.pop_back();
    self(self, i + 1, sum);
  };
  search(search, 0, 0);
  std::ranges::sort(best_set);
  return best_set;
}

namespace detail {

/// Algorithm 1 over one kind of tensor of one group (weights, or states): sizes per tensor,
/// `present` the tensors it concerns, the targets per step as fractions of `unit` bytes
/// (resident, offloaded), `whole_at` the steps where everything present must be resident, and
/// the CPU's tensors: `cpu[j]` >= 0 is the cycle position of tensor j's CPU update (its gradient
/// leaves at g_w, its weight at the end of g_w, and it comes back no sooner than the step after
/// its update), -1 for the others.
struct cover_run {
  std::vector<std::vector<int>> offload, prefetch, free;  ///< per step
};

inline cover_run cover_tensors(const offmate_problem& p, const parameter_group& w,
                               const std::vector<bytes>& sizes, const std::vector<char>& present,
                               double unit, const std::vector<double>& resident,
                               const std::vector<double>& offloaded,
                               const std::vector<char>& whole_at, const std::vector<int>& cpu,
                               double tolerance) {
  const int steps = p.steps();
  const auto T = static_cast<std::size_t>(steps);
  cover_run run;
  run.offload.assign(T, {});
  run.prefetch.assign(T, {});
  run.free.assign(T, {});
  const std::size_t n = sizes.size();
  std::vector<char> alive = present, ofl(n, 0);
  bytes total = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (present[j]) total += sizes[j];
  auto sum_of = [&](const std::vector<char>& set) {
    bytes s = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (set[j] && present[j]) s += sizes[j];
    return s;
  };
  // SELECT over the present tensors for which `in` holds; group indices.
  auto select = [&](auto in, bytes value) {
    std::vector<int> ids;
    std::vector<bytes> sz;
    for (std::size_t j = 0; j < n; ++j)
      if (present[j] && in(j)) {
        ids.push_back(static_cast<int>(j));
        sz.push_back(sizes[j]);
      }
    std::vector<int> out;
    for (int k : select_cover(sz, value)) out.push_back(ids[static_cast<std::size_t>(k)]);
    return out;
  };
  auto on_cpu = [&](std::size_t j) { return !cpu.empty() && cpu[j] >= 0; };
  const double slack = tolerance * unit;
  auto bytes_of = [&](double v) { return static_cast<bytes>(std::ceil(v - slack)); };
  double c_ofl = 0;
  for (int q = 0; q < steps; ++q) {
    const int t = p.step_at(w, q);
    const auto u = static_cast<std::size_t>(t);
    const auto before = static_cast<std::size_t>(p.step_at(w, (q + steps - 1) % steps));
    const bool whole = whole_at[u] || resident[u] >= 1 - tolerance;
    const double target = whole ? static_cast<double>(total) : unit * resident[u];
    bool freed = false;
    auto drop = [&](int j) {
      alive[static_cast<std::size_t>(j)] = 0;
      run.free[before].push_back(j);
      freed = true;
    };
    if (q == 1)  // the CPU's tensors leave at the end of g_w
      for (std::size_t j = 0; j < n; ++j)
        if (present[j] && on_cpu(j) && alive[j]) drop(static_cast<int>(j));
    const bytes now = sum_of(alive);
    if (q > 0 && static_cast<double>(now) > target + slack) {
      // Free what was offloaded in an earlier step, at the end of the step before.
      for (int j : select([&](std::size_t i) { return ofl[i] && alive[i]; },
                          bytes_of(static_cast<double>(now) - target)))
        drop(j);
    } else if (q > 0 && !freed && static_cast<double>(now) < target - slack) {
      // Bring back as much as the target allows, in the step before; a CPU tensor only once
      // its update is done.
      auto away = [&](std::size_t j) { return !alive[j] && (!on_cpu(j) || cpu[j] < q - 1); };
      bytes gone = 0;
      for (std::size_t j = 0; j < n; ++j)
        if (present[j] && away(j)) gone += sizes[j];
      const bytes room =
          whole ? gone : std::min(gone, static_cast<bytes>(std::floor(target + slack)) - now);
      std::vector<char> kept(n, 0);
      for (int j : select(away, gone - room)) kept[static_cast<std::size_t>(j)] = 1;
      for (std::size_t j = 0; j < n; ++j)
        if (present[j] && away(j) && !kept[j]) {
          alive[j] = 1;
          run.prefetch[before].push_back(static_cast<int>(j));
        }
    }
    // Offload what the running sum asks for, during this step: at g_w the CPU's tensors first
    // (their gradients).
    if (q == 0)
      for (std::size_t j = 0; j < n; ++j)
        if (present[j] && on_cpu(j)) {
          ofl[j] = 1;
          run.offload[u].push_back(static_cast<int>(j));
        }
    c_ofl += offloaded[u];
    const double need = std::min(unit, unit * c_ofl) - static_cast<double>(sum_of(ofl));
    if (need > slack)
      for (int j : select([&](std::size_t i) { return !ofl[i]; }, bytes_of(need))) {
        ofl[static_cast<std::size_t>(j)] = 1;
        run.offload[u].push_back(j);
      }
  }
  // Everything back for g_w, in the step before it.
  const auto last = static_cast<std::size_t>(p.step_at(w, steps - 1));
  for (std::size_t j = 0; j < n; ++j)
    if (present[j] && !alive[j]) run.prefetch[last].push_back(static_cast<int>(j));
  for (auto* lists : {&run.prefetch, &run.free, &run.offload})
    for (auto& v : *lists) std::ranges::sort(v);
  return run;
}

}  // namespace detail

/// A whole-tensor plan as the O-ILP's fractions (bytes over the group's bytes), for evaluate():
/// the residency of each step replayed from step 0, the states of CPU-updated tensors counted
/// as offloaded at g_w.
inline offmate_plan fractions_of(const offmate_problem& p, const offmate_tensor_plan& tp) {
  const int steps = p.steps();
  const auto T = static_cast<std::size_t>(steps);
  const double k = p.optimizer_states;
  offmate_plan plan;
  plan.option = tp.option;
  plan.groups.assign(p.groups.size(), std::vector<offmate_group_step>(T));
  for (std::size_t wi = 0; wi < p.groups.size() && wi < tp.groups.size(); ++wi) {
    const parameter_group& w = p.groups[wi];
    const offmate_group_tensors& gt = tp.groups[wi];
    const std::size_t n = w.tensors.size();
    const double size = std::max(1.0, static_cast<double>(w.size()));
    const double grad = std::max(1.0, static_cast<double>(w.trainable()));
    const double states = std::max(1.0, k * static_cast<double>(w.trainable()));
    auto weight = [&](int j) {
      return static_cast<double>(w.tensors[static_cast<std::size_t>(j)].size);
    };
    auto trained = [&](int j) {
      return static_cast<double>(w.tensors[static_cast<std::size_t>(j)].trainable);
    };
    auto sum = [](const std::vector<int>& ids, auto&& f) {
      double s = 0;
      for (int j : ids) s += f(j);
      return s;
    };
    std::vector<char> alive = gt.resident, alive_o = gt.states_resident;
    alive.resize(n, 0);
    alive_o.resize(n, 0);
    for (int t = 0; t < steps && static_cast<std::size_t>(t) < gt.steps.size(); ++t) {
      const offmate_tensor_step& s = gt.steps[static_cast<std::size_t>(t)];
      offmate_group_step& f = plan.groups[wi][static_cast<std::size_t>(t)];
      double here = 0, here_o = 0;
      for (std::size_t j = 0; j < n; ++j) {
        if (alive[j]) here += weight(static_cast<int>(j));
        if (alive_o[j]) here_o += k * trained(static_cast<int>(j));
      }
      f.resident = here / size;
      f.states_resident = here_o / states;
      f.offloaded = sum(s.offload, weight) / size;
      f.prefetched = sum(s.prefetch, weight) / size;
      f.states_offloaded = sum(s.states_offload, [&](int j) { return k * trained(j); }) / states;
      f.states_prefetched = sum(s.states_prefetch, [&](int j) { return k * trained(j); }) / states;
      f.cpu_optimized = sum(s.cpu_update, trained) / grad;
      for (int j : s.free) alive[static_cast<std::size_t>(j)] = 0;
      for (int j : s.prefetch) alive[static_cast<std::size_t>(j)] = 1;
      for (int j : s.states_free) alive_o[static_cast<std::size_t>(j)] = 0;
      for (int j : s.states_prefetch) alive_o[static_cast<std::size_t>(j)] = 1;
    }
    // The CPU-updated tensors' states live on the host: (8) counts them through X_w.
  }
  return plan;
}

namespace detail {

/// Where each tensor of a group is at step 0: the cycle replayed from g_w, where every weight,
/// and the states of every tensor the GPU updates, are resident.
inline void refresh_start(const offmate_problem& p, const parameter_group& w,
                          offmate_group_tensors& gt) {
  const std::size_t n = w.tensors.size();
  std::vector<char> alive(n, 1), alive_o(n, 0);
  for (std::size_t j = 0; j < n; ++j)
    alive_o[j] = static_cast<char>(w.tensors[j].trainable > 0 && !gt.cpu_updated[j]);
  for (int q = 0; q < p.steps(); ++q) {
    const int t = p.step_at(w, q);
    if (t == 0) {
      gt.resident = alive;
      gt.states_resident = alive_o;
    }
    const offmate_tensor_step& st = gt.steps[static_cast<std::size_t>(t)];
    for (int j : st.free) alive[static_cast<std::size_t>(j)] = 0;
    for (int j : st.prefetch) alive[static_cast<std::size_t>(j)] = 1;
    for (int j : st.states_free) alive_o[static_cast<std::size_t>(j)] = 0;
    for (int j : st.states_prefetch) alive_o[static_cast<std::size_t>(j)] = 1;
  }
}

/// Room on each step's CPU lane (its time in the fractional plan, less management), and each
/// CPU update's seconds per byte.
struct cpu_room {
  std::vector<seconds> left;
  double per_byte = 0;
};

/// One group of `to_tensors`: `down` rounds the CPU's share down (the largest set of whole
/// tensors within X_w) rather than up (the smallest set that covers it).
inline offmate_group_tensors round_group(const offmate_problem& p, const offmate_plan& plan,
                                         std::size_t wi, bool down, cpu_room& room,
                                         double tolerance) {
  const int steps = p.steps();
  const auto T = static_cast<std::size_t>(steps);
  const double k = p.optimizer_states;
  offmate_group_tensors gt;
  const parameter_group& w = p.groups[wi];
  const auto& row = plan.groups[wi];
  const std::size_t n = w.tensors.size();
  gt.steps.assign(T, {});
  gt.cpu_updated.assign(n, 0);
  std::vector<bytes> sizes(n), grads(n), states(n);
  for (std::size_t j = 0; j < n; ++j) {
    sizes[j] = w.tensors[j].size;
    grads[j] = w.tensors[j].trainable;
    states[j] = static_cast<bytes>(std::llround(k * static_cast<double>(grads[j])));
  }
  std::vector<double> sto(T), ofl(T), sto_o(T), ofl_o(T);
  for (std::size_t t = 0; t < T; ++t) {
    sto[t] = row[t].resident;
    ofl[t] = row[t].offloaded;
    sto_o[t] = row[t].states_resident;
    ofl_o[t] = row[t].states_offloaded;
  }

  // The CPU's tensors, and the cycle position of each update: the earliest step that has room
  // for it on the CPU lane (within the step times of the fractions), no later than the step
  // where the fractions finish the group's CPU updates; where none has room, the one with most.
  std::vector<int> cpu(n, -1);
  const double grad = static_cast<double>(w.trainable());
  const double slack = tolerance * std::max(1.0, grad);
  const double want = grad * plan.cpu_share(wi);
  if (want > slack) {
    std::vector<int> ids;
    std::vector<bytes> trained;
    for (std::size_t j = 0; j < n; ++j)
      if (grads[j] > 0) {
        ids.push_back(static_cast<int>(j));
        trained.push_back(grads[j]);
      }
    int last = 1;
    for (double done = 0; last < steps - 1; ++last) {
      done += grad * row[static_cast<std::size_t>(p.step_at(w, last))].cpu_optimized;
      if (done >= want - slack) break;
    }
    bytes got = 0, all = 0;
    for (bytes b : trained) all += b;
    std::vector<int> chosen;
    if (down) {  // the complement of the smallest cover of what stays on the GPU
      std::vector<char> gpu(trained.size(), 0);
      for (int c : select_cover(trained, all - static_cast<bytes>(std::floor(want + slack))))
        gpu[static_cast<std::size_t>(c)] = 1;
      for (std::size_t c = 0; c < trained.size(); ++c)
        if (!gpu[c]) chosen.push_back(static_cast<int>(c));
    } else {
      chosen = select_cover(trained, static_cast<bytes>(std::ceil(want - slack)));
    }
    for (int c : chosen) {
      const auto j = static_cast<std::size_t>(ids[static_cast<std::size_t>(c)]);
      got += grads[j];
      const seconds need = static_cast<double>(grads[j]) * room.per_byte;
      auto room_at = [&](int q) -> seconds& {
        return room.left[static_cast<std::size_t>(p.step_at(w, q))];
      };
      int at = -1;
      for (int q = 1; q <= last && at < 0; ++q)
        if (room_at(q) >= need * (1 - 1e-9)) at = q;
      if (at < 0) {
        at = 1;
        for (int q = 2; q <= last; ++q)
          if (room_at(q) > room_at(at)) at = q;
      }
      room_at(at) -= need;
      cpu[j] = at;
      gt.cpu_updated[j] = 1;
      gt.steps[static_cast<std::size_t>(p.step_at(w, at))].cpu_update.push_back(
          static_cast<int>(j));
    }
    if (!down)
      gt.cpu_shortfall = std::max<bytes>(0, static_cast<bytes>(std::ceil(want - slack)) - got);
  }

  std::vector<char> used(T, 0), at_update(T, 0);
  for (int t = 0; t < steps; ++t) used[static_cast<std::size_t>(t)] = p.uses(w, t);
  at_update[static_cast<std::size_t>(p.last_gradient(w))] = 1;
  const detail::cover_run weights =
      detail::cover_tensors(p, w, sizes, std::vector<char>(n, 1), static_cast<double>(w.size()),
                            sto, ofl, used, cpu, tolerance);
  std::vector<char> on_gpu(n, 0);
  for (std::size_t j = 0; j < n; ++j) on_gpu[j] = static_cast<char>(grads[j] > 0 && cpu[j] < 0);
  const detail::cover_run st =
      detail::cover_tensors(p, w, states, on_gpu, k * grad, sto_o, ofl_o, at_update, {}, tolerance);
  for (std::size_t t = 0; t < T; ++t) {
    gt.steps[t].offload = weights.offload[t];
    gt.steps[t].prefetch = weights.prefetch[t];
    gt.steps[t].free = weights.free[t];
    gt.steps[t].states_offload = st.offload[t];
    gt.steps[t].states_prefetch = st.prefetch[t];
    gt.steps[t].states_free = st.free[t];
    std::ranges::sort(gt.steps[t].cpu_update);
  }
  refresh_start(p, w, gt);
  return gt;
}

}  // namespace detail

namespace detail {

/// Moves whole-tensor transfers within their windows to steps with room, while the iteration
/// (evaluate()'s sum of step times) gets shorter and every step stays within the budget:
/// an offload (of a weight the GPU updates or of states; the CPU's gradients stay at g_w) to any
/// step from g_w to the step that frees it, a prefetch to any step after the free before it (and
/// after the tensor's CPU update) and before the next use. Greedy, largest tensors first, a few
/// passes; each move is priced by its change to the two steps' lanes and, for a prefetch moved
/// earlier, the memory of the steps it then spans.
inline void balance(const offmate_problem& p, const machine& hw, bytes budget,
                    offmate_tensor_plan& tp, double tolerance) {
  const int S = p.steps();
  const offmate_evaluation ev =
      evaluate(p, hw, budget, fractions_of(p, tp), offmate_semantics::strict, {}, tolerance);
  if (!ev.valid()) return;
  std::vector<offmate_lanes> lanes = ev.lanes;
  std::vector<double> mem = ev.gpu_bytes;
  const double cap = static_cast<double>(budget) * (1 + tolerance) + tolerance;
  auto per_second = [](double r) { return std::isinf(r) ? 0.0 : 1.0 / r; };
  const double d2h = per_second(hw.device_to_host), h2d = per_second(hw.host_to_device);
  const double k = p.optimizer_states;
  struct move {
    std::size_t w, j;
    bool states, out;  // which list: weights or states, offload or prefetch
    int at;            // current cycle position
    double bytes;
  };
  for (int pass = 0; pass < 3; ++pass) {
    // Every movable transfer, largest first.
    std::vector<move> moves;
    for (std::size_t w = 0; w < p.groups.size(); ++w) {
      const parameter_group& grp = p.groups[w];
      const offmate_group_tensors& gt = tp.groups[w];
      for (int q = 0; q < S; ++q) {
        const offmate_tensor_step& st = gt.steps[static_cast<std::size_t>(p.step_at(grp, q))];
        for (bool states : {false, true})
          for (bool out : {true, false}) {
            const auto& list = states ? (out ? st.states_offload : st.states_prefetch)
                                      : (out ? st.offload : st.prefetch);
            for (int j : list) {
              const auto u = static_cast<std::size_t>(j);
              if (!states && out && gt.cpu_updated[u]) continue;  // a gradient: at g_w
              const double b = states ? k * static_cast<double>(grp.tensors[u].trainable)
                                      : static_cast<double>(grp.tensors[u].size);
              moves.push_back({w, u, states, out, q, b});
            }
          }
      }
    }
    std::ranges::stable_sort(moves, [](const move& a, const move& b) { return a.bytes > b.bytes; });
    bool improved = false;
    for (const move& m : moves) {
      const parameter_group& grp = p.groups[m.w];
      offmate_group_tensors& gt = tp.groups[m.w];
      const int j = static_cast<int>(m.j);
      auto step = [&](int q) -> offmate_tensor_step& {
        return gt.steps[static_cast<std::size_t>(p.step_at(grp, q))];
      };
      auto in = [&](const std::vector<int>& v) { return std::ranges::find(v, j) != v.end(); };
      auto frees = [&](int q) { return in(m.states ? step(q).states_free : step(q).free); };
      // The window, in cycle positions.
      int lo = 0, hi = S - 1;
      if (m.out) {
        hi = m.at;
        while (hi < S - 1 && !frees(hi)) ++hi;
      } else {
        lo = m.at;
        while (lo > 0 && !frees(lo - 1)) --lo;
        for (int q = 0; q < m.at; ++q)
          if (!m.states && in(step(q).cpu_update)) lo = std::max(lo, q + 1);
        hi = m.at;
        auto needed = [&](int q) {
          return m.states ? q == S : (q < S && p.uses(grp, p.step_at(grp, q)));
        };
        while (hi + 1 < S && !needed(hi + 1) && !frees(hi + 1) &&
               !in(m.states ? step(hi + 1).states_prefetch : step(hi + 1).prefetch))
          ++hi;
      }
      if (lo == hi) continue;
      const double secs = m.bytes * (m.out ? d2h : h2d);
      auto gpu_too = [&](int t) {  // (19a): a backward step's own offloads, after its update
        return m.out && !p.is_forward(t) && p.uses(grp, t);
      };
      auto with = [&](int t, double sign) {
        offmate_lanes l = lanes[static_cast<std::size_t>(t)];
        (m.out ? l.d2h : l.h2d) += sign * secs;
        if (gpu_too(t)) l.gpu += sign * secs;
        return l;
      };
      const int from = p.step_at(grp, m.at);
      const double base_from = lanes[static_cast<std::size_t>(from)].time();
      const double gain_from = base_from - with(from, -1).time();
      int best_q = m.at;
      double best_delta = -1e-12 * std::max(1.0, ev.makespan);
      for (int q = lo; q <= hi; ++q) {
        if (q == m.at) continue;
        const int t = p.step_at(grp, q);
        // A prefetch moved earlier holds the tensor from q to m.at.
        bool fits = true;
        for (int r = q; r < m.at && !m.out && fits; ++r)
          fits = mem[static_cast<std::size_t>(p.step_at(grp, r))] + m.bytes <= cap;
        if (!fits) continue;
        const double delta =
            with(t, +1).time() - lanes[static_cast<std::size_t>(t)].time() - gain_from;
        if (delta < best_delta) {
          best_delta = delta;
          best_q = q;
        }
      }
      if (best_q == m.at) continue;
      // Apply.
      const int to = p.step_at(grp, best_q);
      lanes[static_cast<std::size_t>(from)] = with(from, -1);
      lanes[static_cast<std::size_t>(to)] = with(to, +1);
      if (!m.out)
        for (int r = best_q; r < m.at; ++r)
          mem[static_cast<std::size_t>(p.step_at(grp, r))] += m.bytes;
      if (!m.out)
        for (int r = m.at; r < best_q; ++r)
          mem[static_cast<std::size_t>(p.step_at(grp, r))] -= m.bytes;
      auto& src = m.states ? (m.out ? step(m.at).states_offload : step(m.at).states_prefetch)
                           : (m.out ? step(m.at).offload : step(m.at).prefetch);
      std::erase(src, j);
      auto& dst = m.states ? (m.out ? step(best_q).states_offload : step(best_q).states_prefetch)
                           : (m.out ? step(best_q).offload : step(best_q).prefetch);
      dst.insert(std::ranges::upper_bound(dst, j), j);
      improved = true;
    }
    if (!improved) break;
  }
  for (std::size_t w = 0; w < p.groups.size(); ++w) refresh_start(p, p.groups[w], tp.groups[w]);
}

}  // namespace detail

/// Algorithm 1 [Offmate24, §4.3] on every group of a plan, in strict same-step semantics (a free
/// follows an offload of an earlier step). First the CPU's tensors of each group: the smallest
/// set of whole tensors whose trainable bytes cover the share X_w the fractions give the CPU,
/// each updated in the earliest step of its window with room on the CPU lane, groups in
/// increasing block order (the paper's greedy; the packing rule is ours). Then Algorithm 1 on the
/// weights (a CPU tensor comes back only after its update), and again on the states of the
/// tensors the GPU updates. Rounding the CPU's share up never needs more GPU memory, but where a
/// group's share is a sliver of a tensor it multiplies the CPU's work; so each group in turn is
/// tried rounded down instead (its extra states on the GPU at g_w), kept where the plan stays
/// within `budget` and gets faster by evaluate().
inline offmate_tensor_plan to_tensors(const offmate_problem& p, const machine& hw, bytes budget,
                                      const offmate_plan& plan, offmate_features features = {},
                                      double tolerance = 1e-6) {
  const auto T = static_cast<std::size_t>(p.steps());
  offmate_tensor_plan out;
  out.option = plan.option;
  out.groups.resize(p.groups.size());
  const offmate_evaluation ev =
      evaluate(p, hw, unlimited_bytes, plan, offmate_semantics::strict, {}, tolerance);
  detail::cpu_room base;
  base.left.assign(T, 0);
  for (std::size_t t = 0; t < T && t < ev.lanes.size(); ++t)
    base.left[t] = ev.lanes[t].time() - hw.step_overhead;
  base.per_byte = std::isinf(hw.cpu_optimizer_speed) ? 0 : 1 / hw.cpu_optimizer_speed;
  // Groups in increasing block order: the low blocks have the shortest windows.
  std::vector<std::size_t> order(p.groups.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::stable_sort(order, [&](std::size_t a, std::size_t b) {
    return p.groups[a].first_block() < p.groups[b].first_block();
  });
  std::vector<char> down(p.groups.size(), 0);
  auto build = [&] {
    detail::cpu_room room = base;
    for (std::size_t wi : order)
      out.groups[wi] = detail::round_group(p, plan, wi, down[wi] != 0, room, tolerance);
    return evaluate(p, hw, budget, fractions_of(p, out), offmate_semantics::strict, features,
                    tolerance);
  };
  offmate_evaluation best = build();
  for (std::size_t wi : order) {
    if (plan.cpu_share(wi) * static_cast<double>(p.groups[wi].trainable()) <= 0.5) continue;
    down[wi] = 1;
    const offmate_tensor_plan kept = out;
    const offmate_evaluation e = build();
    if (e.valid() && (!best.valid() || e.makespan < best.makespan * (1 - 1e-9))) {
      best = e;
    } else {
      down[wi] = 0;
      out = kept;
    }
  }
  return out;
}

/// The whole-tensor plan with its transfers moved within their windows to the steps with room
/// (detail::balance): returned where that keeps it valid within `budget` and makes it faster by
/// evaluate(), else as it was. It leaves the fractions behind (a prefetch moved earlier holds
/// the tensor longer than they say), within the budget.
inline offmate_tensor_plan balanced(const offmate_problem& p, const machine& hw, bytes budget,
                                    offmate_tensor_plan tp, offmate_features features = {},
                                    double tolerance = 1e-6) {
  const offmate_evaluation before =
      evaluate(p, hw, budget, fractions_of(p, tp), offmate_semantics::strict, features, tolerance);
  if (!before.valid()) return tp;
  offmate_tensor_plan moved = tp;
  detail::balance(p, hw, budget, moved, tolerance);
  const offmate_evaluation after = evaluate(p, hw, budget, fractions_of(p, moved),
                                            offmate_semantics::strict, features, tolerance);
  if (after.valid() && after.makespan < before.makespan * (1 - 1e-12)) return moved;
  return tp;
}

}  // namespace remat
