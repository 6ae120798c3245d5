#pragma once
// An OFFMATE plan in the O-ILP's terms [Offmate24, §4.1]: each block's option, and for each
// parameter group and step the fractions of the group resident on the GPU, offloaded,
// prefetched (and the same three for its optimizer states) and optimized on the CPU. evaluate()
// is the model's own arithmetic, written apart from the MILP: each step's four lanes and its
// time, the GPU bytes of each step and the host bytes, and every constraint the plan breaks. It
// is the referee of the MILP's answers (and of hand-made plans, the ZeRO-like ones).
// docs/offmate.md says what each constraint means and where it departs from the paper.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/units.hpp>
#include <remat/policy/offmate/problem.hpp>

namespace remat {

/// When an offload lets memory go [Offmate24, §4, §4.1]. literal: the paper's sums,
/// which count a step's own offloads and CPU steps (a fraction offloaded during step t is gone
/// from the GPU during t, against its assumption 3). strict: only earlier steps count, so a
/// fraction leaves the GPU at the end of the step that offloads it; the plan then never needs
/// more than it says.
enum class offmate_semantics { strict, literal };

/// One group at one step, fractions of the group (states: of its optimizer states).
struct offmate_group_step {
  double resident = 0;           ///< Sto: on the GPU during the step
  double offloaded = 0;          ///< Ofl: copied to the host during the step
  double prefetched = 0;         ///< Prf: copied to the GPU during the step (resident after it)
  double states_resident = 0;    ///< StoO
  double states_offloaded = 0;   ///< OflO
  double states_prefetched = 0;  ///< PrfO
  double cpu_optimized = 0;      ///< Opt: of the trainable part, updated by the CPU in the step

  friend bool operator==(const offmate_group_step&, const offmate_group_step&) = default;
};

struct offmate_plan {
  std::vector<int> option;  ///< per block
  /// [group][step].
  std::vector<std::vector<offmate_group_step>> groups;

  [[nodiscard]] const offmate_group_step& at(std::size_t w, int t) const {
    return groups[w][static_cast<std::size_t>(t)];
  }
  /// X_w: the share of w's trainable part the CPU updates each cycle.
  [[nodiscard]] double cpu_share(std::size_t w) const {
    double x = 0;
    for (const auto& s : groups[w]) x += s.cpu_optimized;
    return x;
  }
};

/// What each of the four lanes does in a step [Offmate24, eqs. (19)-(23)].
struct offmate_lanes {
  seconds gpu = 0;  ///< the block, then (backward) the GPU optimizer and its own offloads
  seconds d2h = 0;  ///< offloads: parameters, states, gradients, activations
  seconds h2d = 0;  ///< prefetches
  seconds cpu = 0;  ///< management, then the CPU optimizer

  [[nodiscard]] seconds time() const { return std::max({gpu, d2h, h2d, cpu}); }
};

struct offmate_evaluation {
  std::vector<offmate_lanes> lanes;  ///< per step
  seconds makespan = 0;              ///< sum of the steps' times: one iteration
  std::vector<double> gpu_bytes;     ///< per step, (17)'s left side
  double host_bytes = 0;             ///< (18)'s left side
  std::vector<std::string> violations;

  [[nodiscard]] bool valid() const { return violations.empty(); }
  [[nodiscard]] double gpu_peak() const {
    return gpu_bytes.empty() ? 0 : *std::ranges::max_element(gpu_bytes);
  }
};

/// What a plan may use (the paper's ablations and the baselines are these switched off).
struct offmate_features {
  bool cpu_optimizer = true;       ///< false: every update on the GPU ("w/o CPU optim")
  bool activation_offload = true;  ///< false: no option that offloads ("w/o Act offload")
  /// A ZeRO-Infinity-like plan [Rajbhandari21] in the same model: each group on the GPU only
  /// during its own blocks' steps (prefetched the step before, offloaded after), every update
  /// the CPU can make on the CPU, its states on the host.
  bool zero_infinity = false;
  /// A ZeRO-2-like plan (DeepSpeed's stage 2 with its optimizer on the CPU [Ren21]) in the same
  /// model: every update the CPU can make on the CPU (states on the host, gradients offloaded),
  /// and each group on the GPU at every step but while its CPU update is awaited ((13) forbids
  /// the stale copy there). Its activations are the features' (the paper's baseline recomputes:
  /// activation_offload = false). A baseline priced in fractions of groups: no whole tensors,
  /// no program.
  bool zero_offload = false;

  friend bool operator==(const offmate_features&, const offmate_features&) = default;
};

namespace detail {

/// Cumulative sums of a per-step quantity of w along its cycle (from g_w), and the step's value.
template <class F>
std::vector<double> cycle_sums(const offmate_problem& p, const parameter_group& w, F value) {
  std::vector<double> c(static_cast<std::size_t>(p.steps()));
  double run = 0;
  for (int q = 0; q < p.steps(); ++q) {
    run += value(p.step_at(w, q));
    c[static_cast<std::size_t>(q)] = run;
  }
  return c;
}

}  // namespace detail

/// The step times, the memory and the broken constraints of plan on p, hw, budget. tolerance:
/// how far (a fraction of a group, of the budget) a constraint may be off before it counts.
inline offmate_evaluation evaluate(const offmate_problem& p, const machine& hw, bytes budget,
                                   const offmate_plan& plan,
                                   offmate_semantics sem = offmate_semantics::strict,
                                   offmate_features features = {}, double tolerance = 1e-6) {
  offmate_evaluation ev;
  const int steps = p.steps();
  const double k = p.optimizer_states;
  auto bad = [&](std::string s) { ev.violations.push_back(std::move(s)); };
  if (plan.option.size() != p.blocks.size() || plan.groups.size() != p.groups.size()) {
    bad("the plan does not have one option per block and one row per group");
    return ev;
  }
  for (std::size_t i = 0; i < p.blocks.size(); ++i) {
    const int o = plan.option[i];
    if (o < 0 || o >= static_cast<int>(p.blocks[i].options.size())) {
      bad("block " + std::to_string(i) + ": no option " + std::to_string(o));
      return ev;
    }
    if (!features.activation_offload && p.option(static_cast<int>(i), o).offloaded_bytes > 0)
      bad("block " + std::to_string(i) + " offloads activations, which are off");
    if (!hw.transfers() && p.option(static_cast<int>(i), o).offloaded_bytes > 0)
      bad("block " + std::to_string(i) + " offloads activations without a link");
  }
  auto per_second = [](double rate) { return std::isinf(rate) ? 0.0 : 1.0 / rate; };
  const double d2h = per_second(hw.device_to_host), h2d = per_second(hw.host_to_device);
  const double gpu_opt = per_second(hw.gpu_optimizer_speed);
  const double cpu_opt = per_second(hw.cpu_optimizer_speed);
  const bool strict = sem == offmate_semantics::strict;
  const double tol = tolerance;

  ev.lanes.assign(static_cast<std::size_t>(steps), {});
  ev.gpu_bytes.assign(static_cast<std::size_t>(steps), 0.0);
  for (int t = 0; t < steps; ++t) {
    const int b = p.block_of(t);
    const offmate_option& o = p.option(b, plan.option[static_cast<std::size_t>(b)]);
    auto& ln = ev.lanes[static_cast<std::size_t>(t)];
    ln.gpu = p.is_forward(t) ? o.forward_time : o.backward_time;
    ln.cpu = hw.step_overhead;
    // Activations leave after the forward and come back before the backward: on the link, and
    // in the block's own time.
    const double act = static_cast<double>(o.offloaded_bytes) * (p.is_forward(t) ? d2h : h2d);
    (p.is_forward(t) ? ln.d2h : ln.h2d) += act;
    ln.gpu += act;
    double mem =
        static_cast<double>(p.interface_at(t)) +
        static_cast<double>(p.is_forward(t) ? o.forward_overhead_bytes : o.backward_overhead_bytes);
    for (int i = 0; i <= b; ++i)  // (16): blocks run forward and not yet backward
      mem +=
          static_cast<double>(p.option(i, plan.option[static_cast<std::size_t>(i)]).stored_bytes);
    ev.gpu_bytes[static_cast<std::size_t>(t)] = mem;
  }
  double host = 0;
  for (std::size_t i = 0; i < p.blocks.size(); ++i)
    host += static_cast<double>(p.option(static_cast<int>(i), plan.option[i]).offloaded_bytes);

  for (std::size_t wi = 0; wi < p.groups.size(); ++wi) {
    const parameter_group& w = p.groups[wi];
    const std::string name = detail::group_label(w, wi);
    const auto& row = plan.groups[wi];
    if (row.size() != static_cast<std::size_t>(steps)) {
      bad(name + ": not one entry per step");
      continue;
    }
    const double size = static_cast<double>(w.size()), grad = static_cast<double>(w.trainable());
    const double states = k * grad;
    const double x = plan.cpu_share(wi);
    const int g = p.last_gradient(w);
    auto at = [&](int t) -> const offmate_group_step& { return row[static_cast<std::size_t>(t)]; };
    const auto c_ofl = detail::cycle_sums(p, w, [&](int t) { return at(t).offloaded; });
    const auto c_oflo = detail::cycle_sums(p, w, [&](int t) { return at(t).states_offloaded; });
    const auto c_opt = detail::cycle_sums(p, w, [&](int t) { return at(t).cpu_optimized; });
    // C_t, counting step t itself (literal) or only the steps before it (strict).
    auto cum = [&](const std::vector<double>& c, int t, bool own) {
      const int q = p.position(w, t);
      if (own) return c[static_cast<std::size_t>(q)];
      return q == 0 ? 0.0 : c[static_cast<std::size_t>(q - 1)];
    };
    for (int t = 0; t < steps; ++t) {
      const offmate_group_step& s = at(t);
      const std::string where = name + ", step " + std::to_string(t);
      for (double v : {s.resident, s.offloaded, s.prefetched, s.states_resident, s.states_offloaded,
                       s.states_prefetched, s.cpu_optimized})
        if (!(v >= -tol && v <= 1 + tol)) bad(where + ": a fraction outside [0, 1]");
      if (s.cpu_optimized > tol && (!p.in_cpu_window(w, t) || !features.cpu_optimizer || grad == 0))
        bad(where + ": a CPU update outside the window g_w < t < f_w (4)");
      if (hw.device_to_host <= 0 && (s.offloaded > tol || s.states_offloaded > tol))
        bad(where + ": an offload without a link");
      if (hw.host_to_device <= 0 && (s.prefetched > tol || s.states_prefetched > tol))
        bad(where + ": a prefetch without a link");
      if (p.uses(w, t) && s.resident < 1 - tol) bad(where + ": used but not resident (5)");
      if (features.zero_infinity && !p.uses(w, t) && s.resident > tol)
        bad(where + ": resident outside its blocks' steps in a ZeRO-Infinity-like plan");
      if (features.zero_offload && size * (s.resident + s.prefetched) +
                                           (t == g ? 0.0 : grad * (x - cum(c_opt, t, !strict))) <
                                       size * (1 - tol))
        bad(where + ": off the GPU without awaiting its CPU update in a ZeRO-2-like plan");
      if (s.resident + cum(c_ofl, t, !strict) < 1 - tol)
        bad(where + ": neither on the GPU nor offloaded since g_w (7)");
      if (grad > 0 && s.states_resident + cum(c_oflo, t, !strict) < 1 - x - tol)
        bad(where + ": states neither on the GPU nor offloaded since g_w (8)");
      const offmate_group_step& next = at((t + 1) % steps);
      if (next.resident > s.resident + s.prefetched + tol)
        bad(where + ": resident at the next step without a prefetch (9)");
      if (next.states_resident > s.states_resident + s.states_prefetched + tol)
        bad(where + ": states resident at the next step without a prefetch (10)");
      if (grad * cum(c_opt, t, true) > size * cum(c_ofl, t, !strict) + tol * size)
        bad(where + ": a CPU update of a gradient not yet offloaded (12)");
      if (t != g &&
          grad * (x - cum(c_opt, t, !strict)) > size * (1 - s.prefetched - s.resident) + tol * size)
        bad(where + ": a part awaiting its CPU update is on the GPU or on its way (13)");
      if (s.resident + s.prefetched > 1 + tol) bad(where + ": more than the group on the GPU");
      if (s.states_resident + s.states_prefetched > 1 - x + tol)
        bad(where + ": more than the GPU-updated states on the GPU");
      ev.gpu_bytes[static_cast<std::size_t>(t)] +=
          size * (s.resident + s.prefetched) +                  // (14)
          states * (s.states_resident + s.states_prefetched) +  // (15)
          (p.holds_gradient(w, t) ? grad : 0.0);                // the gradient buffer
      auto& ln = ev.lanes[static_cast<std::size_t>(t)];
      const double out = (size * s.offloaded + states * s.states_offloaded) * d2h;
      ln.d2h += out;                                                         // (22)
      ln.h2d += (size * s.prefetched + states * s.states_prefetched) * h2d;  // (21)
      ln.cpu += grad * s.cpu_optimized * cpu_opt;                            // (23)
      if (!p.is_forward(t) && p.uses(w, t)) ln.gpu += out;       // (20): its own offloads, after
      if (t == g) ln.gpu += grad * (1 - x) * gpu_opt;            // (20): the GPU update
      host += size * s.offloaded + states * s.states_offloaded;  // (18)
    }
    if ((features.zero_infinity || features.zero_offload) && features.cpu_optimizer &&
        hw.transfers() && grad > 0 && p.has_cpu_window(w) && x < 1 - tol)
      bad(name + ": not updated on the CPU in a ZeRO-" +
          (features.zero_infinity ? "Infinity" : "2") + "-like plan");
    if (grad * x > size * at(g).offloaded + tol * size)
      bad(name + ": the CPU-updated part's gradient does not leave at g_w (12')");
    if (grad > 0 && at(g).states_resident < 1 - x - tol)
      bad(name + ": states of the GPU update not resident at g_w (6)");
    // (11): what the CPU updates comes back before f_w.
    double back = 0;
    for (int q = 0; q < p.position(w, p.first_use(w)); ++q) back += at(p.step_at(w, q)).prefetched;
    if (grad * x > size * back + tol * size)
      bad(name + ": the CPU-updated part is not brought back before f_w (11)");
    host += (k + 1) * grad * x;  // (18): the CPU's states and gradient buffer
  }
  for (int t = 0; t < steps; ++t) {
    ev.makespan += ev.lanes[static_cast<std::size_t>(t)].time();
    if (ev.gpu_bytes[static_cast<std::size_t>(t)] > static_cast<double>(budget) * (1 + tol) + tol)
      bad("step " + std::to_string(t) + ": " +
          format_size(static_cast<bytes>(std::ceil(ev.gpu_bytes[static_cast<std::size_t>(t)]))) +
          " on the GPU, above the budget " + format_size(budget) + " (17)");
  }
  if (host > static_cast<double>(hw.host_memory) * (1 + tol) + tol)
    bad(format_size(static_cast<bytes>(std::ceil(host))) + " on the host, above its memory " +
        format_size(hw.host_memory) + " (18)");
  ev.host_bytes = host;
  return ev;
}

}  // namespace remat
