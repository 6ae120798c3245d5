#pragma once
// The best whole-group OFFMATE plan of a tiny problem by enumeration, written from the model and
// not from the MILP: for each group, every residency pattern (resident where used, anything
// elsewhere) with the prefetches it needs, one offload step or none, and (when it may) its CPU
// update in one step of its window or none; the same for its optimizer states; every option of
// every block. evaluate() is the referee. One offload per cycle and no prefetch beyond what the
// pattern needs lose nothing: more only adds transfer time and memory.

#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include <remat/policy/offmate/plan.hpp>

namespace remat::testing {

struct offmate_brute_result {
  bool feasible = false;
  seconds best = std::numeric_limits<seconds>::infinity();
  long plans = 0;  ///< plans evaluated
};

namespace detail_offmate {

/// Every whole-group row of w: resident/prefetch patterns, offload steps, CPU updates.
inline std::vector<std::vector<offmate_group_step>> rows(const offmate_problem& p,
                                                         const parameter_group& w,
                                                         const machine& hw,
                                                         offmate_features features) {
  const int steps = p.steps();
  const bool trained = w.trainable() > 0;
  std::vector<int> window;
  for (int t = 0; t < steps; ++t)
    if (trained && features.cpu_optimizer && hw.transfers() && p.in_cpu_window(w, t))
      window.push_back(t);
  // Residency patterns with their minimal prefetches, where `must` steps are resident.
  auto patterns = [&](const std::function<bool(int)>& must, bool allowed) {
    std::vector<std::vector<double>> out;
    for (unsigned m = 0; m < (1u << steps); ++m) {
      bool ok = true;
      for (int t = 0; t < steps; ++t)
        if (must(t) && !(m >> t & 1u)) ok = false;
      if (!allowed && m != 0) ok = false;
      if (ok) {
        std::vector<double> r(static_cast<std::size_t>(steps));
        for (int t = 0; t < steps; ++t) r[static_cast<std::size_t>(t)] = (m >> t & 1u) ? 1 : 0;
        out.push_back(std::move(r));
      }
    }
    return out;
  };
  std::vector<std::vector<offmate_group_step>> out;
  const auto sto = patterns([&](int t) { return p.uses(w, t); }, true);
  for (int cpu = -1; cpu < static_cast<int>(window.size()); ++cpu) {
    const bool on_cpu = cpu >= 0;
    const auto sto_o = patterns(
        [&](int t) { return trained && !on_cpu && t == p.last_gradient(w); }, trained && !on_cpu);
    for (const auto& a : sto)
      for (int off = -1; off < steps; ++off)
        for (const auto& b : sto_o)
          for (int off_o = -1; off_o < steps; ++off_o) {
            if (!trained && off_o >= 0) continue;
            std::vector<offmate_group_step> row(static_cast<std::size_t>(steps));
            for (int t = 0; t < steps; ++t) {
              auto& s = row[static_cast<std::size_t>(t)];
              const auto u = static_cast<std::size_t>(t);
              const auto n = static_cast<std::size_t>((t + 1) % steps);
              s.resident = a[u];
              s.prefetched = a[n] > a[u] ? 1 : 0;
              s.offloaded = t == off ? 1 : 0;
              s.states_resident = b[u];
              s.states_prefetched = b[n] > b[u] ? 1 : 0;
              s.states_offloaded = t == off_o ? 1 : 0;
              s.cpu_optimized = on_cpu && t == window[static_cast<std::size_t>(cpu)] ? 1 : 0;
            }
            out.push_back(std::move(row));
          }
  }
  return out;
}

}  // namespace detail_offmate

inline offmate_brute_result offmate_brute_force(const offmate_problem& p, const machine& hw,
                                                bytes budget, offmate_features features = {}) {
  offmate_brute_result res;
  std::vector<std::vector<std::vector<offmate_group_step>>> choices;
  for (const auto& w : p.groups) choices.push_back(detail_offmate::rows(p, w, hw, features));
  offmate_plan plan;
  plan.option.assign(p.blocks.size(), 0);
  plan.groups.resize(p.groups.size());
  std::function<void(std::size_t)> groups = [&](std::size_t wi) {
    if (wi == p.groups.size()) {
      ++res.plans;
      const auto ev = evaluate(p, hw, budget, plan, offmate_semantics::strict, features, 1e-9);
      if (ev.valid() && ev.makespan < res.best) {
        res.best = ev.makespan;
        res.feasible = true;
      }
      return;
    }
    for (const auto& row : choices[wi]) {
      plan.groups[wi] = row;
      groups(wi + 1);
    }
  };
  std::function<void(std::size_t)> options = [&](std::size_t i) {
    if (i == p.blocks.size()) return groups(0);
    for (std::size_t o = 0; o < p.blocks[i].options.size(); ++o) {
      plan.option[i] = static_cast<int>(o);
      options(i + 1);
    }
  };
  options(0);
  return res;
}

}  // namespace remat::testing
