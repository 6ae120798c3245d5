#pragma once
// The simulator's rules for programs that manage the model's parameters (schedule::parameters;
// the OFFMATE family [Offmate24, §4]): where each parameter's weight, gradient and optimizer
// states are, the memory they hold on the device and on the host, and the four lanes (compute,
// CPU, each copy direction). A weight is read by its forwards and backwards only while resident;
// the backwards of its users sum its gradient on the device; each trainable parameter is updated
// exactly once, on the GPU (U: weight, complete gradient and states resident; the host copies go
// stale) or on the CPU (U_cpu: gradient offloaded, weight off the device with a current host
// copy, states on the host; it waits for the gradient's copy, and a prefetch of the weight waits
// for it). Offloading a weight or states copies it (the device copy stays until freed, which
// needs a current host copy, waited for); offloading a gradient moves it. Host buffers are
// allocated at their first use and kept (pinned, as a runtime allocates them once). The program
// ends where it started. Every rule: docs/training-graph.md, "Programs that manage parameters".

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/report.hpp>

namespace remat::sim::detail {

/// The lanes' clocks: when each is next free.
struct lane_clocks {
  seconds now = 0;  ///< the compute lane
  seconds d2h = 0, h2d = 0, cpu = 0;
  seconds step_start = 0;  ///< when the current step began (its management takes step_overhead)
};

/// A change of device and host memory at a time (the simulator's memory applies it).
struct memory_change {
  seconds at = 0;
  bytes device = 0, host = 0;
};

/// What an instruction on a parameter did: its lane, span and memory changes, or a violation.
struct parameter_effect {
  std::optional<violation> broken;
  lane where = lane::compute;
  seconds start = 0, end = 0;
  std::vector<memory_change> changes;  ///< at the start, at the end, ...
  bytes held_while_running = 0;        ///< for an update on the compute lane: nothing extra
};

class parameter_model {
 public:
  parameter_model(const graph& g, const parameter_plan& plan, const machine& hw)
      : g_(g), plan_(plan), hw_(hw) {
    const std::size_t n = g.parameters().size();
    state_.resize(n);
    for (std::size_t p = 0; p < n; ++p) {
      state& s = state_[p];
      const parameter_start& st = p < plan.start.size() ? plan.start[p] : parameter_start{};
      s.weight = st.weight_on_device ? where::resident : where::absent;
      s.host_weight = st.weight_on_host;
      s.host_weight_buffer = st.weight_on_host || !st.weight_on_device;
      s.states =
          trainable(p) && st.states_on_device && !st.cpu_updated ? where::resident : where::absent;
      s.host_states = trainable(p) && (s.states == where::absent || st.states_on_host);
      s.host_states_buffer = s.host_states;
      s.host_gradient_buffer = st.cpu_updated && trainable(p);
      if (st.gradient_on_host && st.cpu_updated && trainable(p)) s.gradient = grad::host;
      const bytes w = g.parameters()[p].size;
      if (s.weight == where::resident) device_ += w;
      if (s.states == where::resident) device_ += states_of(p);
      if (s.host_weight_buffer) host_ += w;
      if (s.host_states_buffer) host_ += states_of(p);
      if (s.host_gradient_buffer) host_ += gradient_of(p);
    }
  }

  /// Why the plan does not fit the graph; nullopt when it does.
  [[nodiscard]] std::optional<std::string> mismatch() const {
    if (plan_.start.size() != g_.parameters().size())
      return "the program's parameter plan has " + std::to_string(plan_.start.size()) +
             " starting places, the graph " + std::to_string(g_.parameters().size()) +
             " parameters; give one per parameter";
    if (!std::isfinite(plan_.optimizer_states) || plan_.optimizer_states < 0)
      return "the program's optimizer_states must be a finite number >= 0 of state bytes per "
             "trainable byte, not " +
             std::to_string(plan_.optimizer_states);
    for (std::size_t p = 0; p < plan_.start.size(); ++p) {
      const parameter_start& s = plan_.start[p];
      if (!s.weight_on_device && !s.weight_on_host)
        return name(static_cast<int>(p)) +
               " starts neither on the device nor on the host; it must be somewhere";
      if (s.cpu_updated && !trainable(p))
        return name(static_cast<int>(p)) + " is frozen; only trainable parameters are updated";
      if (s.gradient_on_host && !s.cpu_updated)
        return name(static_cast<int>(p)) +
               " starts with a gradient on the host, but only a CPU update would take it";
    }
    return std::nullopt;
  }

  [[nodiscard]] bytes device_at_start() const { return device_; }
  [[nodiscard]] bytes host_at_start() const { return host_; }

  /// Compute node c (fast: its fast-forward) may run: the weights it reads are resident. For a
  /// backward, adds its contributions to its forward's parameters' gradients; returns the bytes
  /// of gradients it creates on the device, or why it cannot run.
  [[nodiscard]] std::optional<std::string> compute(int c, bytes& created) {
    const bool backward = g_.compute(c).kind == compute_kind::backward;
    const int f = backward ? g_.forward_of(c) : c;
    if (f < 0) return std::nullopt;
    for (int p : g_.parameters_of(f)) {
      const state& s = at(p);
      if (s.weight != where::resident)
        return "reads " + name(p) + ", which " +
               (s.weight == where::arriving
                    ? "is being prefetched; wait for it first (Ww" + std::to_string(p) + ")"
                    : "is not on the device; prefetch it (Pw" + std::to_string(p) +
                          ") and wait for it first");
    }
    if (!backward) return std::nullopt;
    for (int p : g_.parameters_of(f)) {
      if (!trainable(static_cast<std::size_t>(p))) continue;
      state& s = at(p);
      // A cycle whose CPU update comes first takes the previous iteration's gradient with it.
      const bool pending = plan_.start[static_cast<std::size_t>(p)].gradient_on_host;
      if (s.updated > 0 && !pending)
        return "adds to the gradient of " + name(p) + ", which was already updated";
      if ((s.gradient == grad::moving || s.gradient == grad::host) && pending && s.updated == 0)
        return "adds to the gradient of " + name(p) +
               " while the previous iteration's still waits on the host for its CPU update; "
               "update it first (U" +
               std::to_string(p) + "_cpu)";
      if (s.gradient == grad::moving || s.gradient == grad::host)
        return "adds to the gradient of " + name(p) +
               ", which was already offloaded; offload it after its last contribution";
      if (s.gradient == grad::none) {
        s.gradient = grad::device;
        created += gradient_of(static_cast<std::size_t>(p));
      }
      ++s.contributions;
    }
    return std::nullopt;
  }

  /// An instruction on a parameter (or a sync), issued when the compute lane is at clocks.now.
  parameter_effect apply(const instruction& ins, std::size_t i, lane_clocks& clocks) {
    parameter_effect e;
    e.start = e.end = clocks.now;
    auto bad = [&](violation_kind k, const std::string& why) {
      e.broken =
          violation{k, i, "instruction " + std::to_string(i) + " (" + to_string(ins) + "): " + why};
      return e;
    };
    if (ins.op == op_kind::sync) {
      // The GPU and both copy engines idle, and the step's management done; the CPU's optimizer
      // steps run on, each waited for by what needs its result.
      clocks.now =
          std::max({clocks.now, clocks.d2h, clocks.h2d, clocks.step_start + hw_.step_overhead});
      clocks.step_start = clocks.now;
      e.end = clocks.now;
      return e;
    }
    const int p = ins.node;
    if (p < 0 || static_cast<std::size_t>(p) >= state_.size())
      return bad(violation_kind::unknown_node,
                 "parameter " + std::to_string(p) + " does not exist (the graph has " +
                     (state_.empty() ? std::string("none")
                                     : "parameters 0.." + std::to_string(state_.size() - 1)) +
                     ")");
    const auto u = static_cast<std::size_t>(p);
    state& s = state_[u];
    const std::string who = name(p);
    const bytes w = g_.parameters()[u].size, gr = gradient_of(u), st = states_of(u);
    const bool cpu_param = plan_.start[u].cpu_updated;
    auto transfer = [&](bool out, bytes size, seconds after) {
      seconds& lane_free = out ? clocks.d2h : clocks.h2d;
      const double rate = out ? hw_.device_to_host : hw_.host_to_device;
      e.where = out ? lane::device_to_host : lane::host_to_device;
      e.start = std::max({clocks.now, lane_free, after});
      e.end = lane_free = e.start + static_cast<double>(size) / rate;
    };
    auto no_link = [&](bool out) { return !((out ? hw_.device_to_host : hw_.host_to_device) > 0); };
    switch (ins.op) {
      case op_kind::update: {
        if (!trainable(u)) return bad(violation_kind::invalid_instruction, who + " is frozen");
        if (cpu_param)
          return bad(violation_kind::invalid_instruction,
                     who + " is updated on the CPU (its states live on the host); use U" +
                         std::to_string(p) + "_cpu");
        if (s.updated > 0)
          return bad(violation_kind::invalid_instruction, who + " was already updated");
        if (s.weight != where::resident)
          return bad(violation_kind::not_resident, who + "'s weight is not resident");
        if (s.weight_copy)
          return bad(violation_kind::invalid_transfer,
                     who + "'s weight is being offloaded; wait for it before updating it");
        if (s.gradient != grad::device || s.contributions < users(p))
          return bad(violation_kind::incomplete_input,
                     who + "'s gradient is not complete on the device (" +
                         std::to_string(s.contributions) + " of " + std::to_string(users(p)) +
                         " contributions" +
                         (s.gradient == grad::device || s.gradient == grad::none
                              ? std::string()
                              : ", and it was offloaded") +
                         ")");
        if (st > 0 && s.states != where::resident)
          return bad(violation_kind::not_resident,
                     who + "'s optimizer states are not resident; prefetch them (Ps" +
                         std::to_string(p) + ") and wait first");
        if (s.states_copy)
          return bad(violation_kind::invalid_transfer,
                     who + "'s states are being offloaded; wait for them before updating");
        const seconds dt = static_cast<double>(gr) / hw_.gpu_optimizer_speed;
        e.end = clocks.now + (std::isfinite(dt) ? dt : 0.0);
        clocks.now = e.end;
        e.changes.push_back({e.end, -gr, 0});
        s.gradient = grad::none;
        s.host_weight = false;
        s.host_states = false;
        ++s.updated;
        return e;
      }
      case op_kind::cpu_update: {
        if (!cpu_param)
          return bad(violation_kind::invalid_instruction,
                     who + " is not updated on the CPU (its parameter plan says the GPU)");
        if (s.updated > 0)
          return bad(violation_kind::invalid_instruction, who + " was already updated");
        if (s.gradient != grad::moving && s.gradient != grad::host)
          return bad(violation_kind::invalid_transfer,
                     who + "'s gradient is not on its way to the host; offload it (Og" +
                         std::to_string(p) + ") first");
        if (s.weight != where::absent)
          return bad(violation_kind::invalid_transfer,
                     who +
                         "'s weight is on the device; free it first (the CPU updates the "
                         "host copy, which the device copy would contradict)");
        if (!s.host_weight)
          return bad(violation_kind::invalid_transfer, who + " has no current host copy");
        e.where = lane::cpu;
        e.start = std::max({clocks.now, clocks.cpu, s.gradient_until});
        const seconds dt = static_cast<double>(gr) / hw_.cpu_optimizer_speed;
        e.end = clocks.cpu = e.start + (std::isfinite(dt) ? dt : 0.0);
        s.cpu_until = e.end;
        s.gradient = grad::none;
        ++s.updated;
        return e;
      }
      case op_kind::offload:
        if (no_link(true))
          return bad(violation_kind::invalid_transfer,
                     who + " cannot be offloaded: the machine has no device-to-host link");
        if (ins.part == tensor_part::weight) {
          if (s.weight != where::resident)
            return bad(violation_kind::invalid_transfer, who + "'s weight is not resident");
          if (s.weight_copy)
            return bad(violation_kind::invalid_transfer, who + "'s weight is already being copied");
          transfer(true, w, 0);
          if (!s.host_weight_buffer) {
            s.host_weight_buffer = true;
            e.changes.push_back({e.start, 0, w});
          }
          s.weight_copy = true;
          s.weight_until = e.end;
          s.host_weight = true;
        } else if (ins.part == tensor_part::states) {
          if (st == 0 || s.states != where::resident)
            return bad(violation_kind::invalid_transfer, who + "'s states are not resident");
          if (s.states_copy)
            return bad(violation_kind::invalid_transfer,
                       who + "'s states are already being copied");
          transfer(true, st, 0);
          if (!s.host_states_buffer) {
            s.host_states_buffer = true;
            e.changes.push_back({e.start, 0, st});
          }
          s.states_copy = true;
          s.states_until = e.end;
          s.host_states = true;
        } else {
          if (s.gradient != grad::device || s.contributions < users(p))
            return bad(violation_kind::incomplete_input,
                       who + "'s gradient is not complete on the device");
          transfer(true, gr, 0);
          if (!s.host_gradient_buffer) {
            s.host_gradient_buffer = true;
            e.changes.push_back({e.start, 0, gr});
          }
          e.changes.push_back({e.end, -gr, 0});
          s.gradient = grad::moving;
          s.gradient_until = e.end;
        }
        return e;
      case op_kind::prefetch:
        if (no_link(false))
          return bad(violation_kind::invalid_transfer,
                     who + " cannot be prefetched: the machine has no host-to-device link");
        if (ins.part == tensor_part::weight) {
          if (s.weight != where::absent)
            return bad(violation_kind::invalid_transfer,
                       who + "'s weight is already on the device");
          if (!s.host_weight)
            return bad(violation_kind::invalid_transfer, who + " has no current host copy");
          transfer(false, w, s.cpu_until);
          e.changes.push_back({e.start, w, 0});
          s.weight = where::arriving;
          s.weight_until = e.end;
        } else if (ins.part == tensor_part::states) {
          if (cpu_param)
            return bad(violation_kind::invalid_transfer,
                       who + " is updated on the CPU; its states stay on the host");
          if (st == 0 || s.states != where::absent)
            return bad(violation_kind::invalid_transfer,
                       who + "'s states are already on the device");
          transfer(false, st, 0);
          e.changes.push_back({e.start, st, 0});
          s.states = where::arriving;
          s.states_until = e.end;
        } else {
          return bad(violation_kind::invalid_transfer,
                     "a gradient is never prefetched (it is summed on the device, then "
                     "updated or offloaded)");
        }
        return e;
      case op_kind::wait:
        if (ins.part == tensor_part::weight) {
          if (s.weight == where::arriving) {
            s.weight = where::resident;
          } else if (s.weight_copy) {
            s.weight_copy = false;
          } else {
            return bad(violation_kind::invalid_transfer,
                       who + "'s weight has no transfer in flight");
          }
          e.end = clocks.now = std::max(clocks.now, s.weight_until);
        } else if (ins.part == tensor_part::states) {
          if (s.states == where::arriving) {
            s.states = where::resident;
          } else if (s.states_copy) {
            s.states_copy = false;
          } else {
            return bad(violation_kind::invalid_transfer,
                       who + "'s states have no transfer in flight");
          }
          e.end = clocks.now = std::max(clocks.now, s.states_until);
        } else {
          if (s.gradient != grad::moving)
            return bad(violation_kind::invalid_transfer,
                       who + "'s gradient has no transfer in flight");
          s.gradient = grad::host;
          e.end = clocks.now = std::max(clocks.now, s.gradient_until);
        }
        return e;
      case op_kind::free:
        if (ins.part == tensor_part::weight) {
          if (s.weight != where::resident)
            return bad(violation_kind::not_in_memory, who + "'s weight is not resident");
          if (s.weight_copy)
            return bad(violation_kind::invalid_transfer,
                       who + "'s weight is being offloaded; wait for it (Ww" + std::to_string(p) +
                           ") before freeing it");
          if (!s.host_weight)
            return bad(violation_kind::invalid_transfer,
                       who + "'s weight has no current host copy; offload it first, or it is lost");
          e.changes.push_back({clocks.now, -w, 0});
          s.weight = where::absent;
        } else if (ins.part == tensor_part::states) {
          if (s.states != where::resident)
            return bad(violation_kind::not_in_memory, who + "'s states are not resident");
          if (s.states_copy)
            return bad(violation_kind::invalid_transfer,
                       who + "'s states are being offloaded; wait for them before freeing them");
          if (!s.host_states)
            return bad(violation_kind::invalid_transfer,
                       who + "'s states have no current host copy; offload them first");
          e.changes.push_back({clocks.now, -st, 0});
          s.states = where::absent;
        } else {
          return bad(violation_kind::invalid_transfer,
                     "a gradient is not freed: its update or its offload consumes it");
        }
        return e;
      default:
        return bad(violation_kind::invalid_instruction, "not an instruction on a parameter");
    }
  }

  /// Why the parameters do not end where they started; nullopt when they do.
  [[nodiscard]] std::optional<std::string> final_state() const {
    std::string out;
    auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
    for (std::size_t p = 0; p < state_.size(); ++p) {
      const state& s = state_[p];
      const parameter_start& st = plan_.start[p];
      const std::string who = name(static_cast<int>(p));
      if (trainable(p) && users(static_cast<int>(p)) > 0 && s.updated == 0)
        add(who + " is never updated");
      const bool pending = st.gradient_on_host && st.cpu_updated && trainable(p);
      if (pending && s.gradient != grad::host && s.gradient != grad::moving)
        add(who + " ends without the gradient on the host it started with");
      if (!pending && s.gradient != grad::none) add(who + "'s gradient is left unused");
      if (pending && s.gradient == grad::moving)
        add(who + "'s gradient offload is never waited for");
      if (s.weight == where::arriving || s.states == where::arriving || s.weight_copy ||
          s.states_copy)
        add(who + " has a transfer never waited for");
      if ((s.weight != where::absent) != st.weight_on_device)
        add(who + (st.weight_on_device ? " ends off the device, where it started on it"
                                       : " ends on the device, where it started off it"));
      if (s.host_weight != st.weight_on_host && st.weight_on_device)
        add(who + (st.weight_on_host ? " ends without the current host copy it started with"
                                     : " ends with a host copy it did not start with"));
      if (trainable(p) && !st.cpu_updated && (s.states != where::absent) != st.states_on_device)
        add(who + "'s states end elsewhere than they started");
      if (trainable(p) && !st.cpu_updated && st.states_on_device &&
          s.host_states != st.states_on_host)
        add(who + (st.states_on_host
                       ? "'s states end without the current host copy they started with"
                       : "'s states end with a host copy they did not start with"));
    }
    if (out.empty()) return std::nullopt;
    return out;
  }

 private:
  enum class where : unsigned char { absent, resident, arriving };
  enum class grad : unsigned char { none, device, moving, host };
  struct state {
    where weight = where::resident, states = where::absent;
    bool host_weight = false, host_states = false;  // a current copy on the host
    bool weight_copy = false, states_copy = false;  // an offload in flight, not waited for
    bool host_weight_buffer = false, host_states_buffer = false, host_gradient_buffer = false;
    grad gradient = grad::none;
    int contributions = 0, updated = 0;
    seconds weight_until = 0, states_until = 0, gradient_until = 0, cpu_until = 0;
  };

  [[nodiscard]] bool trainable(std::size_t p) const { return g_.parameters()[p].trainable; }
  [[nodiscard]] bytes gradient_of(std::size_t p) const {
    return trainable(p) ? g_.parameters()[p].size : 0;
  }
  [[nodiscard]] bytes states_of(std::size_t p) const {
    return static_cast<bytes>(
        std::llround(plan_.optimizer_states * static_cast<double>(gradient_of(p))));
  }
  [[nodiscard]] int users(int p) const { return static_cast<int>(g_.parameter_users(p).size()); }
  state& at(int p) { return state_[static_cast<std::size_t>(p)]; }
  [[nodiscard]] std::string name(int p) const {
    const std::string& n = g_.parameters()[static_cast<std::size_t>(p)].name;
    return "parameter '" + (n.empty() ? "p" + std::to_string(p) : n) + "'";
  }

  const graph& g_;
  const parameter_plan& plan_;
  const machine& hw_;
  std::vector<state> state_;
  bytes device_ = 0, host_ = 0;
};

}  // namespace remat::sim::detail
