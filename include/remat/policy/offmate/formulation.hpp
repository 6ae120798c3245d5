#pragma once
// The O-ILP [Offmate24, §4.1] on remat's MILP layer: one binary per block option, and per group
// and step the seven fractions of plan.hpp, with running sums along each group's cycle (from
// g_w) as variables of their own, so that the matrix grows as L x groups and not as L^2 x groups.
// Each constraint carries the paper's number. Sizes are in units of the largest single size and
// times in units of the longest single duration, so that the coefficients stay near 1.
// docs/offmate.md, "The O-ILP", says where and why this departs from the paper's text.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/offmate/plan.hpp>
#include <remat/policy/offmate/problem.hpp>

namespace remat::detail {

struct offmate_settings {
  offmate_semantics semantics = offmate_semantics::strict;
  offmate_features features = {};
  /// Every fraction 0 or 1: groups move whole (and a group's CPU update in one step).
  bool whole_groups = false;
  /// What to minimise: the iteration's time (the O-ILP), or, to say why a budget is too small,
  /// the GPU's peak (the budget then ignored) or the host's bytes.
  enum class goal { time, gpu_memory, host_memory } objective = goal::time;
  /// > 0: the batch-size variant [Offmate24, App. A]: the problem's data are one sample's, r =
  /// 1/b in [1/max_batch, 1] is a variable, every parameter fraction is bounded by r and every
  /// constant of the parameters' and the budgets' constraints scaled by it, so that the
  /// objective is the time per sample (docs/offmate.md, "The batch size").
  int max_batch = 0;
};

class offmate_formulation {
 public:
  milp::model model;
  double byte_unit = 1;  ///< bytes per model unit of size
  double time_unit = 1;  ///< seconds per model unit of time

  offmate_formulation(const offmate_problem& p, const machine& hw, bytes budget,
                      const offmate_settings& s)
      : p_(p) {
    units(hw);
    const int steps = p.steps();
    const auto T = static_cast<std::size_t>(steps);
    const double k = p.optimizer_states;
    const bool strict = s.semantics == offmate_semantics::strict;
    auto rate = [&](double r) { return std::isinf(r) ? 0.0 : byte_unit / (r * time_unit); };
    const double d2h = rate(hw.device_to_host), h2d = rate(hw.host_to_device);
    const double gpu_opt = rate(hw.gpu_optimizer_speed), cpu_opt = rate(hw.cpu_optimizer_speed);
    const bool out_link = hw.device_to_host > 0, in_link = hw.host_to_device > 0;
    const bool cpu_ok = s.features.cpu_optimizer && hw.transfers();
    const var_kind frac = s.whole_groups ? milp::var_type::binary : milp::var_type::continuous;
    auto B = [&](bytes b) { return static_cast<double>(b) / byte_unit; };
    auto S = [&](seconds x) { return x / time_unit; };
    // 1, or r = 1/b in the batch-size variant: the whole of a group, of a budget, of H.
    if (s.max_batch > 0) ratio_ = model.add_continuous(1.0 / s.max_batch, 1, "r");
    auto one = [&]() -> milp::linear_expr {
      return ratio_ ? milp::linear_expr(*ratio_) : milp::linear_expr(1.0);
    };

    // (1): one option per block.
    comp_.resize(p.blocks.size());
    for (std::size_t i = 0; i < p.blocks.size(); ++i) {
      milp::linear_expr chosen;
      for (std::size_t o = 0; o < p.blocks[i].options.size(); ++o) {
        const auto v = model.add_binary("Comp_" + std::to_string(i) + "_" + std::to_string(o));
        const offmate_option& op = p.blocks[i].options[o];
        if (op.offloaded_bytes > 0 && (!s.features.activation_offload || !hw.transfers()))
          model.set_bounds(v, 0, 0);
        comp_[i].push_back(v);
        chosen += v;
      }
      model.add(chosen == 1.0, "(1) block " + std::to_string(i));
    }
    // (2): step times; the objective.
    time_ = model.add_variables(T, milp::var_type::continuous, 0, milp::infinity, "Time_");
    model.minimize(milp::sum(time_));

    // Per step: GPU bytes (14)-(17) and the four lanes (19)-(23).
    std::vector<milp::linear_expr> mem(T), gpu(T), out(T), in(T), cpu(T);
    for (int t = 0; t < steps; ++t) {
      const auto u = static_cast<std::size_t>(t);
      const int b = p.block_of(t);
      const bool fwd = p.is_forward(t);
      mem[u] += B(p.interface_at(t));         // A_t
      cpu[u] += S(hw.step_overhead) * one();  // H (23')
      for (std::size_t o = 0; o < p.blocks[static_cast<std::size_t>(b)].options.size(); ++o) {
        const offmate_option& op = p.option(b, static_cast<int>(o));
        const auto c = comp_[static_cast<std::size_t>(b)][o];
        gpu[u].add(c, S(fwd ? op.forward_time : op.backward_time));
        mem[u].add(c, B(fwd ? op.forward_overhead_bytes : op.backward_overhead_bytes));
        // The activations leave after the forward and come back before the backward: on the
        // link, and in the block's own time.
        const double act = B(op.offloaded_bytes) * (fwd ? d2h : h2d);
        (fwd ? out[u] : in[u]).add(c, act);
        gpu[u].add(c, act);
      }
      for (int i = 0; i <= b; ++i)  // (16)
        for (std::size_t o = 0; o < p.blocks[static_cast<std::size_t>(i)].options.size(); ++o)
          mem[u].add(comp_[static_cast<std::size_t>(i)][o],
                     B(p.option(i, static_cast<int>(o)).stored_bytes));
    }
    milp::linear_expr host;  // (18)
    for (std::size_t i = 0; i < p.blocks.size(); ++i)
      for (std::size_t o = 0; o < p.blocks[i].options.size(); ++o)
        host.add(comp_[i][o], B(p.blocks[i].options[o].offloaded_bytes));

    groups_.resize(p.groups.size());
    for (std::size_t wi = 0; wi < p.groups.size(); ++wi) {
      const parameter_group& w = p.groups[wi];
      auto& v = groups_[wi];
      const std::string n = "_" + std::to_string(wi) + "_";
      const double size = B(w.size()), grad = B(w.trainable()), states = k * grad;
      const bool trained = w.trainable() > 0;
      const int g = p.last_gradient(w);
      auto vars = [&](const char* name, double upper) {
        return model.add_variables(T, frac, 0, upper, std::string(name) + n);
      };
      // (3), (4).
      v.sto = vars("Sto", 1);
      v.ofl = vars("Ofl", out_link ? 1 : 0);
      v.prf = vars("Prf", in_link ? 1 : 0);
      v.sto_o = vars("StoO", trained ? 1 : 0);
      v.ofl_o = vars("OflO", trained && out_link ? 1 : 0);
      v.prf_o = vars("PrfO", trained && in_link ? 1 : 0);
      v.opt = vars("Opt", 0);
      for (int t = 0; t < steps; ++t)
        if (cpu_ok && trained && p.in_cpu_window(w, t))
          model.set_bounds(v.opt[static_cast<std::size_t>(t)], 0, 1);
      if (ratio_)  // (3'), (4'): every fraction within r
        for (const auto* x : {&v.sto, &v.ofl, &v.prf, &v.sto_o, &v.ofl_o, &v.prf_o, &v.opt})
          for (std::size_t t = 0; t < T; ++t)
            model.add(milp::linear_expr((*x)[t]) <= one(), "(3')" + n + std::to_string(t));
      // Running sums along the cycle: c[q] = sum of the first q + 1 steps from g_w.
      auto running = [&](const std::vector<milp::variable>& x, const char* name) {
        auto c = model.add_variables(T, milp::var_type::continuous, 0, milp::infinity,
                                     std::string("C") + name + n);
        for (int q = 0; q < steps; ++q) {
          milp::linear_expr e = x[static_cast<std::size_t>(p.step_at(w, q))];
          if (q > 0) e += c[static_cast<std::size_t>(q - 1)];
          model.add(milp::linear_expr(c[static_cast<std::size_t>(q)]) == e);
        }
        return c;
      };
      const auto c_ofl = running(v.ofl, "Ofl"), c_oflo = running(v.ofl_o, "OflO"),
                 c_opt = running(v.opt, "Opt");
      auto cum = [&](const std::vector<milp::variable>& c, int t, bool own) -> milp::linear_expr {
        const int q = p.position(w, t);
        if (own) return c[static_cast<std::size_t>(q)];
        return q == 0 ? milp::linear_expr(0.0)
                      : milp::linear_expr(c[static_cast<std::size_t>(q - 1)]);
      };
      const milp::linear_expr x = c_opt.back();  // X_w
      const std::string ws = " w" + std::to_string(wi) + " t";
      for (int t = 0; t < steps; ++t) {
        const auto u = static_cast<std::size_t>(t);
        const auto nx = static_cast<std::size_t>((t + 1) % steps);
        const std::string at = ws + std::to_string(t);
        if (p.uses(w, t)) {
          if (ratio_)
            model.add(milp::linear_expr(v.sto[u]) == one(), "(5'')" + at);
          else
            model.set_bounds(v.sto[u], 1, 1);  // (5)
        } else if (s.features.zero_infinity) {
          model.set_bounds(v.sto[u], 0, 0);
        }
        // (7), (8): on the GPU, or offloaded since g_w (strict: in an earlier step).
        model.add(v.sto[u] + cum(c_ofl, t, !strict) >= one(), "(7)" + at);
        if (trained) model.add(v.sto_o[u] + cum(c_oflo, t, !strict) + x >= one(), "(8)" + at);
        // (9), (10): residency grows only through prefetches (cyclic: 2L-1 -> 0).
        model.add(v.sto[nx] <= v.sto[u] + v.prf[u], "(9)" + at);
        model.add(v.sto_o[nx] <= v.sto_o[u] + v.prf_o[u], "(10)" + at);
        // (12): only a gradient already offloaded is updated on the CPU.
        if (trained && cpu_ok)
          model.add(grad * cum(c_opt, t, true) <= size * cum(c_ofl, t, !strict), "(12)" + at);
        // (13), not at g_w (where (5) holds the group): what awaits its CPU update is neither
        // on the GPU nor on its way.
        if (trained && cpu_ok && t != g)
          model.add(grad * (x - cum(c_opt, t, !strict)) <= size * (one() - v.prf[u] - v.sto[u]),
                    "(13)" + at);
        model.add(v.sto[u] + v.prf[u] <= one(), "(13') " + at);
        // ZeRO-2-like: on the GPU (or arriving) but for what awaits its CPU update.
        if (s.features.zero_offload) {
          milp::linear_expr held = size * (v.sto[u] + v.prf[u]);
          if (trained && cpu_ok && t != g) held += grad * (x - cum(c_opt, t, !strict));
          model.add(held >= size * one(), "ZeRO-2" + at);
        }
        // The states of the CPU-updated part stay on the host.
        if (trained) model.add(v.sto_o[u] + v.prf_o[u] + x <= one(), "states" + at);
        // (14), (15), and the gradient buffer.
        mem[u] += size * (v.sto[u] + v.prf[u]) + states * (v.sto_o[u] + v.prf_o[u]);
        if (p.holds_gradient(w, t)) mem[u] += grad * one();
        // (19)-(23).
        const milp::linear_expr off = size * d2h * v.ofl[u] + states * d2h * v.ofl_o[u];
        out[u] += off;
        in[u] += size * h2d * v.prf[u] + states * h2d * v.prf_o[u];
        cpu[u] += grad * cpu_opt * v.opt[u];
        if (!p.is_forward(t) && p.uses(w, t)) gpu[u] += off;  // L_t (19a)
        if (t == g) gpu[u] += grad * gpu_opt * (one() - x);   // (20)
        host += size * v.ofl[u] + states * v.ofl_o[u];        // (18)
      }
      if ((s.features.zero_infinity || s.features.zero_offload) && cpu_ok && trained &&
          p.has_cpu_window(w))
        model.add(x == one(), "ZeRO" + ws);
      // (12'): the CPU part's gradient leaves the GPU in g_w's own offloads (the gradient
      // buffer is counted until g_w only).
      if (trained && cpu_ok)
        model.add(grad * x <= size * v.ofl[static_cast<std::size_t>(g)], "(12')" + ws);
      // (6): the states of the GPU update are resident at g_w.
      if (trained) model.add(v.sto_o[static_cast<std::size_t>(g)] + x >= one(), "(6)" + ws);
      // (11): the CPU-updated part comes back before f_w.
      if (trained && cpu_ok) {
        milp::linear_expr back;
        for (int q = 0; q < p.position(w, p.first_use(w)); ++q)
          back += v.prf[static_cast<std::size_t>(p.step_at(w, q))];
        model.add(grad * x <= size * back, "(11)" + ws);
      }
      host += (k + 1) * grad * x;  // (18)
    }
    using goal = offmate_settings::goal;
    milp::linear_expr m = static_cast<double>(budget) / byte_unit * one();  // (17'')
    if (s.objective == goal::gpu_memory) {
      const auto peak = model.add_continuous(0, milp::infinity, "M_GPU");
      m = peak;
      model.minimize(peak);
    }
    if (s.objective == goal::host_memory) model.minimize(host);
    for (int t = 0; t < steps; ++t) {
      const auto u = static_cast<std::size_t>(t);
      const std::string at = " t" + std::to_string(t);
      model.add(mem[u] <= m, "(17)" + at);
      model.add(milp::linear_expr(time_[u]) >= gpu[u], (p.is_forward(t) ? "(19)" : "(20)") + at);
      model.add(milp::linear_expr(time_[u]) >= in[u], "(21)" + at);
      model.add(milp::linear_expr(time_[u]) >= out[u], "(22)" + at);
      model.add(milp::linear_expr(time_[u]) >= cpu[u], "(23)" + at);
    }
    if (hw.host_memory < unlimited_bytes && s.objective != goal::host_memory)
      model.add(host <= static_cast<double>(hw.host_memory) / byte_unit * one(), "(18)");
  }

  /// The plan a solution holds (its fractions rounded off below 1e-9).
  [[nodiscard]] offmate_plan plan(const milp::solution& sol) const {
    offmate_plan out;
    for (const auto& c : comp_) {
      int best = 0;
      for (std::size_t o = 0; o < c.size(); ++o)
        if (sol[c[o]] > sol[c[static_cast<std::size_t>(best)]]) best = static_cast<int>(o);
      out.option.push_back(best);
    }
    auto clean = [&](milp::variable v) {
      const double x = sol[v];
      return x < 1e-9 ? 0.0 : x > 1 - 1e-9 ? 1.0 : x;
    };
    for (const auto& v : groups_) {
      auto& row = out.groups.emplace_back(v.sto.size());
      for (std::size_t t = 0; t < row.size(); ++t)
        row[t] = {clean(v.sto[t]),   clean(v.ofl[t]),   clean(v.prf[t]), clean(v.sto_o[t]),
                  clean(v.ofl_o[t]), clean(v.prf_o[t]), clean(v.opt[t])};
    }
    return out;
  }

  /// The model with every variable continuous: its LP relaxation.
  [[nodiscard]] milp::model relaxation() const {
    milp::model relaxed = model;
    for (std::size_t j = 0; j < relaxed.num_variables(); ++j)
      relaxed.set_type(milp::variable{j}, milp::var_type::continuous);
    return relaxed;
  }

  /// A plan to start the search from: the LP relaxation's most chosen option per block, then
  /// the fractions again with those options fixed (an LP). Nullopt when either LP has no
  /// solution in time (or those options have no plan).
  template <class Solve>
  [[nodiscard]] std::optional<std::vector<double>> rounded_start(Solve solve) const {
    const auto lp = solve(relaxation());
    if (!lp || !lp->has_values()) return std::nullopt;
    milp::model fixed = model;
    for (const auto& c : comp_) {
      std::size_t best = 0;
      for (std::size_t o = 0; o < c.size(); ++o)
        if ((*lp)[c[o]] > (*lp)[c[best]] + 1e-9) best = o;
      for (std::size_t o = 0; o < c.size(); ++o)
        fixed.set_bounds(c[o], o == best ? 1 : 0, o == best ? 1 : 0);
    }
    const auto sol = solve(fixed);
    if (!sol || !sol->has_values()) return std::nullopt;
    return sol->values;
  }

  /// The batch-size variant's r = 1/b in a solution (1 in the base O-ILP).
  [[nodiscard]] double ratio(const milp::solution& sol) const {
    return ratio_ ? sol[*ratio_] : 1.0;
  }

  /// A solution's objective in seconds (goal::time) or bytes (the others).
  [[nodiscard]] seconds seconds_of(double objective) const { return objective * time_unit; }
  [[nodiscard]] double bytes_of(double objective) const { return objective * byte_unit; }

 private:
  using var_kind = milp::var_type;
  struct group_vars {
    std::vector<milp::variable> sto, ofl, prf, sto_o, ofl_o, prf_o, opt;
  };
  const offmate_problem& p_;
  std::vector<std::vector<milp::variable>> comp_;
  std::vector<milp::variable> time_;
  std::vector<group_vars> groups_;
  std::optional<milp::variable> ratio_;  // r = 1/b in the batch-size variant

  void units(const machine& hw) {
    double big = 1, slow = 0;
    auto size = [&](double b) { big = std::max(big, b); };
    auto time = [&](double t) {
      if (std::isfinite(t)) slow = std::max(slow, t);
    };
    for (const auto& b : p_.blocks)
      for (const auto& o : b.options) {
        for (bytes x : {o.stored_bytes, o.offloaded_bytes, o.forward_overhead_bytes,
                        o.backward_overhead_bytes})
          size(static_cast<double>(x));
        time(o.forward_time);
        time(o.backward_time);
      }
    for (bytes a : p_.interface_bytes) size(static_cast<double>(a));
    for (const auto& w : p_.groups) {
      size(static_cast<double>(w.size()));
      size(p_.optimizer_states * static_cast<double>(w.trainable()));
    }
    byte_unit = big;
    for (double r :
         {hw.device_to_host, hw.host_to_device, hw.gpu_optimizer_speed, hw.cpu_optimizer_speed})
      if (r > 0 && std::isfinite(r)) time(big / r);
    time(hw.step_overhead);
    time_unit = slow > 0 ? slow : 1;
  }
};

}  // namespace remat::detail
