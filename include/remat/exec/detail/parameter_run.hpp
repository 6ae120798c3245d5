#pragma once
// detail::parameter_state: the executor's side of a program that manages the model's parameters
// (an OFFMATE plan), kept across its steps: for each parameter of the graph, the layer's value and
// gradient buffers (which the program fills and empties), its host copy, its optimizer states on
// the device or the host, its gradient's host buffer, the copies in flight and Adam's step count.
// It places the parameters where the plan starts, runs the instructions on parameters as the
// simulator's rules say (sim/parameters.hpp; the program was checked by the simulator before it
// runs), and at the end applies the CPU updates still waiting and hands every parameter back.
// docs/executor.md, "Programs that manage parameters".

#include <concepts>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/exec/adam.hpp>
#include <remat/exec/concepts/backend.hpp>
#include <remat/exec/detail/parameter_hooks.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::exec::detail {

/// Where the executor finds a graph parameter in the model: the layer's value and gradient
/// buffers, and the layer parameter's name (for messages).
template <class B>
struct parameter_slot {
  buffer_t<B>* value = nullptr;
  buffer_t<B>* gradient = nullptr;
  std::string name;
};

/// A parameter's optimizer state between finish() and the next placement: its states on the
/// host (m then v) and Adam's step count, so that training goes on where it stopped.
template <class B>
struct saved_states {
  std::optional<typename transfer_types<B>::host> states;
  long steps = 0;
};

/// The backend a buffer came from, where the buffer type says (host_backend::buffer::owner()).
template <class Buf>
auto owner_of(const Buf& b) {
  if constexpr (requires { b.owner(); })
    return b.owner();
  else
    return nullptr;
}

template <class B>
class parameter_state final : public parameter_hooks {
  static_assert(ParameterBackend<B>);
  using host_t = typename transfer_types<B>::host;
  using handle_t = typename transfer_types<B>::handle;

 public:
  /// Places each parameter where `plan` starts (its value copied from the layer's buffer, which
  /// is released), with the optimizer states `saved` (empty: zero, as Adam's first step finds
  /// them) and no gradient; or why it cannot (then the layers keep their parameters).
  static result<parameter_state> place(B& b, const graph& g, const parameter_plan& plan,
                                       const adam& opt, std::vector<parameter_slot<B>> slots,
                                       std::vector<saved_states<B>>& saved);

  /// An instruction on a parameter (manages_parameters()), in a run of the program.
  void apply(const instruction& ins) override;
  /// Before the backward of forward node f's op: the gradients it adds to, created zero on the
  /// device at their first contribution.
  void before_backward(int f) override;
  /// The device and host bytes the parameters hold now (their part of the backend's counts).
  [[nodiscard]] bytes device_bytes() const override;
  [[nodiscard]] bytes host_bytes() const override;
  /// The CPU updates still waiting (a plan whose CPU steps take the previous iteration's
  /// gradient), then every parameter back in its layer, in a host buffer of the backend (the
  /// value's current copy, a zero gradient), and the optimizer states into `saved`.
  void finish(std::vector<saved_states<B>>& saved);

 private:
  struct param {
    parameter_slot<B> slot;
    bytes size = 0;
    bool trainable = true, cpu = false;
    bool value_on_device = false, gradient_on_device = false, states_on_device = false;
    bool gradient_leaving = false;  // offloaded; its device buffer goes once the copy is ready
    bool gradient_waiting = false;  // a gradient on the host waits for the CPU's update
    std::optional<host_t> host_value, host_states, host_gradient;
    buffer_t<B> states{};
    std::optional<handle_t> value_move, states_move, gradient_move;
    long steps = 0;  // Adam's steps taken
    // Where the layer's buffers came from (finish() gives the parameter back there), if known.
    decltype(owner_of(std::declval<const buffer_t<B>&>())) value_owner{}, gradient_owner{};
  };

  parameter_state(B& b, const graph& g, const adam& opt) : b_(&b), g_(&g), opt_(opt) {}
  void place_one(const parameter_start& st, const parameter& info, parameter_slot<B>& slot,
                 saved_states<B>* kept);
  [[nodiscard]] bytes start_bytes(const parameter_plan& plan) const;
  host_t host_zeros(bytes n);
  void cpu_step(param& p);
  static float* floats(host_t& h) { return static_cast<float*>(h.data()); }

  B* b_;
  const graph* g_;
  adam opt_;
  std::vector<param> params_;
};

template <class B>
result<parameter_state<B>> parameter_state<B>::place(B& b, const graph& g,
                                                     const parameter_plan& plan, const adam& opt,
                                                     std::vector<parameter_slot<B>> slots,
                                                     std::vector<saved_states<B>>& saved) {
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (auto why = opt.problem(); !why.empty()) return bad("managed_training: " + why);
  if (!plan.managed)
    return bad(
        "managed_training: the program does not manage the parameters (no parameter plan); run "
        "it with the executor and train_step");
  if (plan.optimizer_states != static_cast<double>(adam::states_per_value))
    return bad("managed_training: the program plans " + std::to_string(plan.optimizer_states) +
               " optimizer-state bytes per trainable byte, but Adam keeps " +
               std::to_string(adam::states_per_value) + " (m and v); plan with " +
               std::to_string(adam::states_per_value));
  const auto& ps = g.parameters();
  if (plan.start.size() != ps.size() || slots.size() != ps.size())
    return bad("managed_training: the program places " + std::to_string(plan.start.size()) +
               " parameters, the graph has " + std::to_string(ps.size()) + " and the model " +
               std::to_string(slots.size()));
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].trainable)
      return bad("managed_training: parameter '" + ps[i].name +
                 "' is frozen in the graph, but its layer's backward makes its gradient; "
                 "managed_training trains every parameter of a layer");
    if (ps[i].size % static_cast<bytes>(sizeof(float)) != 0)
      return bad("managed_training: parameter '" + ps[i].name + "' has " +
                 std::to_string(ps[i].size) +
                 " bytes, not a whole number of floats (Adam here updates fp32 parameters)");
  }
  if (!saved.empty() && saved.size() != ps.size())
    return bad("managed_training: saved optimizer states of another model");
  parameter_state s(b, g, opt);
  s.params_.reserve(ps.size());
  try {
    for (std::size_t i = 0; i < ps.size(); ++i)
      s.place_one(plan.start[i], ps[i], slots[i], saved.empty() ? nullptr : &saved[i]);
  } catch (const std::exception& e) {  // the placed ones back in their layers
    const std::string& failing = ps[s.params_.size() - 1].name;
    std::vector<saved_states<B>> back;
    s.finish(back);
    saved.resize(ps.size());
    for (std::size_t i = 0; i < back.size(); ++i) saved[i] = std::move(back[i]);
    return error{
        status::execution_error,
        "managed_training: placing parameter '" + failing + "' where the program starts it: " +
            e.what() + " (the parameters the program keeps on the device between steps take " +
            format_bytes(s.start_bytes(plan)) + "); the parameters are back in their layers",
        {}};
  }
  saved.clear();
  return s;
}

/// One parameter where the plan starts it. Entered in params_ first, so that a placement that
/// runs out of memory halfway hands it back with the others (finish()).
template <class B>
void parameter_state<B>::place_one(const parameter_start& st, const parameter& info,
                                   parameter_slot<B>& slot, saved_states<B>* kept) {
  B& b = *b_;
  param& p = params_.emplace_back();
  p.slot = slot;
  p.size = info.size;
  p.trainable = info.trainable;
  p.cpu = st.cpu_updated;
  // The states: kept from an earlier finish() (then Adam's step count too), else zero as Adam's
  // first step finds them.
  const bytes states = p.size * adam::states_per_value;
  if (kept != nullptr && kept->states) {
    p.host_states = std::move(kept->states);
    p.steps = kept->steps;
  } else {
    p.host_states = host_zeros(states);
  }
  p.value_owner = owner_of(*p.slot.value);
  p.gradient_owner = owner_of(*p.slot.gradient);
  // The value: a host copy first (of a buffer of the layer's, or of this backend's host store
  // after an earlier finish()), then on the device where the plan starts it there.
  p.host_value = [&] {
    if constexpr (requires { p.slot.value->on_host(); })
      if (p.slot.value->on_host()) {
        host_t c = b.host_allocate(p.size);
        if (p.size > 0)
          std::memcpy(c.data(), p.slot.value->data(), static_cast<std::size_t>(p.size));
        return c;
      }
    auto [c, x] = b.offload(*p.slot.value);
    x.wait_host();
    return std::move(c);
  }();
  if (st.weight_on_device) {
    auto [d, y] = b.prefetch(*p.host_value);
    y.wait_host();
    *p.slot.value = std::move(d);
    p.value_on_device = true;
    if (!st.weight_on_host) p.host_value.reset();
  } else {
    *p.slot.value = buffer_t<B>{};
  }
  *p.slot.gradient = buffer_t<B>{};
  if (!p.cpu && st.states_on_device) {
    auto [d, x] = b.prefetch(*p.host_states);
    x.wait_host();
    p.states = std::move(d);
    p.states_on_device = true;
    if (!st.states_on_host) p.host_states.reset();
  }
  if (p.cpu) p.host_gradient = host_zeros(p.size);
}

/// The device bytes the program keeps its parameters in between steps.
template <class B>
bytes parameter_state<B>::start_bytes(const parameter_plan& plan) const {
  bytes n = 0;
  const auto& ps = g_->parameters();
  for (std::size_t i = 0; i < ps.size() && i < plan.start.size(); ++i)
    n += (plan.start[i].weight_on_device ? ps[i].size : 0) +
         (plan.start[i].states_on_device && !plan.start[i].cpu_updated
              ? ps[i].size * adam::states_per_value
              : 0);
  return n;
}

template <class B>
auto parameter_state<B>::host_zeros(bytes n) -> host_t {
  host_t h = b_->host_allocate(n);
  if (n > 0) std::memset(h.data(), 0, static_cast<std::size_t>(n));
  return h;
}

/// Adam on the host copies (the CPU's step), once the gradient's copy has landed.
template <class B>
void parameter_state<B>::cpu_step(param& p) {
  if (p.value_move) {  // the weight's last offload, into the host copy this step writes
    p.value_move->wait_host();
    p.value_move.reset();
  }
  if (p.gradient_move) {
    p.gradient_move->wait_host();
    p.gradient_move.reset();
  }
  opt_.step(floats(*p.host_value), floats(*p.host_gradient), floats(*p.host_states),
            static_cast<std::size_t>(p.size) / sizeof(float), ++p.steps);
  p.gradient_waiting = false;
}

template <class B>
void parameter_state<B>::apply(const instruction& ins) {
  if (ins.op == op_kind::sync) {  // the step's end: the copies done
    for (param& p : params_) {
      if (p.value_move) p.value_move->wait_host();
      if (p.states_move) p.states_move->wait_host();
    }
    return;
  }
  param& p = params_[static_cast<std::size_t>(ins.node)];
  const bytes states = p.size * adam::states_per_value;
  switch (ins.op) {
    case op_kind::update:  // Adam on the device; the gradient is consumed
      b_->device_adam(opt_, ++p.steps, *p.slot.value, *p.slot.gradient, p.states);
      *p.slot.gradient = buffer_t<B>{};
      p.gradient_on_device = false;
      return;
    case op_kind::cpu_update:  // none on the first step of a plan whose CPU steps lag one behind
      if (p.gradient_waiting) cpu_step(p);
      return;
    case op_kind::offload:
      if (ins.part == tensor_part::weight) {
        if (!p.host_value) p.host_value = b_->host_allocate(p.size);
        p.value_move = b_->offload_into(*p.slot.value, *p.host_value);
      } else if (ins.part == tensor_part::states) {
        if (!p.host_states) p.host_states = b_->host_allocate(states);
        p.states_move = b_->offload_into(p.states, *p.host_states);
      } else {  // a move: the device buffer goes once the copy is ready
        if (!p.host_gradient) p.host_gradient = b_->host_allocate(p.size);
        p.gradient_move = b_->offload_into(*p.slot.gradient, *p.host_gradient);
        p.gradient_waiting = true;
        p.gradient_on_device = false;
        if (p.gradient_move->ready())
          *p.slot.gradient = buffer_t<B>{};
        else
          p.gradient_leaving = true;
      }
      return;
    case op_kind::prefetch:
      if (ins.part == tensor_part::weight) {
        auto [d, x] = b_->prefetch(*p.host_value);
        *p.slot.value = std::move(d);
        p.value_move = std::move(x);
        p.value_on_device = true;
      } else {
        auto [d, x] = b_->prefetch(*p.host_states);
        p.states = std::move(d);
        p.states_move = std::move(x);
        p.states_on_device = true;
      }
      return;
    case op_kind::wait:
      if (ins.part == tensor_part::weight) {
        b_->wait(*p.value_move);
        p.value_move.reset();
      } else if (ins.part == tensor_part::states) {
        b_->wait(*p.states_move);
        p.states_move.reset();
      } else {  // the CPU step waits for the copy on the host itself (cpu_step)
        b_->wait(*p.gradient_move);
        if (p.gradient_leaving) {  // later device work is ordered after the copy: free it
          *p.slot.gradient = buffer_t<B>{};
          p.gradient_leaving = false;
        }
      }
      return;
    case op_kind::free:
      if (ins.part == tensor_part::weight) {
        *p.slot.value = buffer_t<B>{};
        p.value_on_device = false;
      } else {
        p.states = buffer_t<B>{};
        p.states_on_device = false;
      }
      return;
    default:
      return;
  }
}

template <class B>
void parameter_state<B>::before_backward(int f) {
  for (int q : g_->parameters_of(f)) {
    param& p = params_[static_cast<std::size_t>(q)];
    if (p.gradient_on_device) continue;
    *p.slot.gradient = b_->allocate(p.size);
    b_->zero(*p.slot.gradient);
    p.gradient_on_device = true;
  }
}

template <class B>
bytes parameter_state<B>::device_bytes() const {
  bytes n = 0;
  for (const param& p : params_)
    n += (p.value_on_device ? p.size : 0) +
         (p.gradient_on_device || p.gradient_leaving ? p.size : 0) +
         (p.states_on_device ? p.size * adam::states_per_value : 0);
  return n;
}

template <class B>
bytes parameter_state<B>::host_bytes() const {
  bytes n = 0;
  for (const param& p : params_)
    n += (p.host_value ? p.size : 0) + (p.host_gradient ? p.size : 0) +
         (p.host_states ? p.size * adam::states_per_value : 0);
  return n;
}

template <class B>
void parameter_state<B>::finish(std::vector<saved_states<B>>& saved) {
  saved.clear();
  for (param& p : params_) {
    if (p.value_move) p.value_move->wait_host();
    if (p.states_move) p.states_move->wait_host();
    // The value's current copy: the host's after a CPU step here, else the device's if it is
    // there (the GPU updates it; its host copy may be stale), else the host's.
    const bool updated_here = p.gradient_waiting;
    if (updated_here) cpu_step(p);
    const bool device = p.value_on_device && !updated_here;
    if (!p.value_on_device && !p.host_value) {
      // not placed yet (a placement that failed): the layer still holds its value
    } else if constexpr (std::same_as<host_t, buffer_t<B>>) {
      // Back to the backend the layer's buffer came from, where it is known (the layers then
      // hold nothing of this backend's), else in a host buffer of this one.
      buffer_t<B> current = device ? std::move(*p.slot.value) : std::move(*p.host_value);
      if (p.value_owner != nullptr) {
        buffer_t<B> back = p.value_owner->allocate(p.size);
        if (p.size > 0) std::memcpy(back.data(), current.data(), static_cast<std::size_t>(p.size));
        *p.slot.value = std::move(back);
      } else if (device) {
        auto [h, x] = b_->offload(current);
        x.wait_host();
        *p.slot.value = std::move(h);
      } else {
        *p.slot.value = std::move(current);
      }
    } else if (!device) {  // host buffers of another type (CUDA's pinned pool): on the device
      auto [d, x] = b_->prefetch(*p.host_value);
      x.wait_host();
      *p.slot.value = std::move(d);
    }
    if constexpr (std::same_as<host_t, buffer_t<B>>) {
      if (p.gradient_owner != nullptr) {
        *p.slot.gradient = p.gradient_owner->allocate(p.size);
        if (p.size > 0) std::memset(p.slot.gradient->data(), 0, static_cast<std::size_t>(p.size));
      } else {
        *p.slot.gradient = host_zeros(p.size);
      }
    } else {
      *p.slot.gradient = b_->allocate(p.size);
      b_->zero(*p.slot.gradient);
    }
    // The states' current copy: the device's where they are there (the GPU updates them), else
    // the host's.
    saved_states<B> keep{std::nullopt, p.steps};
    if (p.states_on_device) {
      auto [h, x] = b_->offload(p.states);
      x.wait_host();
      keep.states = std::move(h);
    } else if (p.host_states) {
      keep.states = std::move(p.host_states);
    }
    saved.push_back(std::move(keep));
    p.value_on_device = p.gradient_on_device = p.states_on_device = p.gradient_leaving = false;
    p.host_value.reset();
    p.host_states.reset();
    p.host_gradient.reset();
    p.states = buffer_t<B>{};
    p.value_move.reset();
    p.states_move.reset();
    p.gradient_move.reset();
  }
}

}  // namespace remat::exec::detail
