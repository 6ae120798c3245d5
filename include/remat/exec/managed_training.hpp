#pragma once
// managed_training<Backend, Model>: training steps of a program that manages the model's
// parameters (an OFFMATE plan, policy/offmate.hpp): the weights, gradients and Adam's states
// live on the device or the host as the program moves them, and the optimizer steps are
// instructions of the program, on the device (backend.device_adam) or on the CPU (exec::adam
// over the host copies). The first step places every parameter where the program starts
// (parameter_plan::start); each step runs the program once (one iteration, optimizer included);
// finish() applies the CPU steps still waiting (a plan whose CPU steps take the previous
// iteration's gradient) and hands the parameters back to the layers. After n steps and
// finish(), the parameters are bitwise those of n steps of plain training with the same Adam.
// The layers give their parameters through parameter_traits (exec/concepts/parameters.hpp), the
// backend is a ParameterBackend (host_backend). docs/executor.md, "Programs that manage
// parameters".

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/exec/adam.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/concepts/parameters.hpp>
#include <remat/exec/detail/parameter_run.hpp>
#include <remat/exec/executor.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::exec {

template <class B, class Model>
class managed_training {
  static_assert(ParameterBackend<B>,
                "remat: managed_training needs a backend that manages parameters "
                "(remat::exec::ParameterBackend: host_allocate, offload_into, zero, device_adam; "
                "host_backend is one)");

 public:
  /// Steps of `program` (which must manage the parameters) on the executor's model and backend,
  /// with Adam `opt`. Keeps references to the executor and the program.
  managed_training(executor<B, Model>& ex, const schedule& program, adam opt = {})
      : ex_(ex), program_(program), opt_(opt) {}

  /// One step (one run of the program) on a batch: its input and the loss's targets. The first
  /// step places the parameters; a step after finish() places them again.
  template <class T, class Tg>
  result<run_result<T>> step(T input, const Tg& targets);
  /// One step for a loss that takes no targets.
  template <class T>
  result<run_result<T>> step(T input) {
    return step(std::move(input), no_targets{});
  }

  /// The CPU steps still waiting, then every parameter back in its layer (the value's current
  /// copy and a zero gradient), in a buffer of the backend its buffer came from where the buffer
  /// says (owner()), else in a host buffer of this one; Adam's states stay here, on the host,
  /// for the next step. A failed step does it itself.
  void finish() {
    if (state_) state_->finish(saved_);
    state_.reset();
  }

  /// The steps run so far.
  [[nodiscard]] long steps() const noexcept { return steps_; }
  /// The device and host bytes the parameters hold between steps (0 before the first).
  [[nodiscard]] bytes device_bytes() const { return state_ ? state_->device_bytes() : 0; }
  [[nodiscard]] bytes host_bytes() const { return state_ ? state_->host_bytes() : 0; }

 private:
  result<void> place();

  executor<B, Model>& ex_;
  const schedule& program_;
  adam opt_;
  std::optional<detail::parameter_state<B>> state_;
  std::vector<detail::saved_states<B>> saved_;  // Adam's states between finish() and a step
  long steps_ = 0;
};

/// Each graph parameter is the parameter of the layer of the op that reads it, in the layer's
/// order (the profiler's naming: profile_dag); a parameter read by several ops, or a layer whose
/// parameters differ from its op's in number or size, is refused with the reason.
template <class B, class Model>
result<void> managed_training<B, Model>::place() {
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if constexpr (!detail::is_dag_model<Model>) {
    return bad(
        "managed_training: a program that manages parameters runs on a DAG model (dag_model), "
        "whose graph has the layers' parameters (profile_dag records them)");
  } else {
    auto p = ex_.plan();
    if (!p) return p.err();
    const graph& g = *p->g;
    std::vector<detail::parameter_slot<B>> slots(g.parameters().size());
    std::vector<char> claimed(slots.size(), 0);
    std::string why;
    for (std::size_t i = 0; i < p->nodes.size() && why.empty(); ++i) {
      const auto of = g.parameters_of(p->nodes[i].fwd);
      const std::string op = g.compute(p->nodes[i].fwd).name;
      std::size_t j = 0;
      model_traits<decltype(ex_.model().layers)>::visit(ex_.model().layers, i, [&](auto& layer) {
        detail::for_each_parameter(layer, [&](const std::string& name, auto& value, auto& grad) {
          using V = std::remove_cvref_t<decltype(value)>;
          using G = std::remove_cvref_t<decltype(grad)>;
          static_assert(TransferableTensor<V, B> && TransferableTensor<G, B>,
                        "remat: managed_training moves the parameters' buffers: their value and "
                        "grad tensors must name their backend buffer (storage())");
          if (!why.empty()) return;
          if (j >= of.size()) {
            why = "the layer of op '" + op + "' has more parameters than the graph gives it (" +
                  std::to_string(of.size()) + "); plan with the graph profile_dag made";
            return;
          }
          const auto q = static_cast<std::size_t>(of[j++]);
          if (g.parameter_users(static_cast<int>(q)).size() != 1 || claimed[q]) {
            why = "parameter '" + g.parameters()[q].name +
                  "' is read by several ops; managed_training needs each parameter in one layer";
            return;
          }
          if (tensor_traits<V>::size(value) != g.parameters()[q].size ||
              tensor_traits<G>::size(grad) != g.parameters()[q].size) {
            why = "parameter '" + name + "' of op '" + op + "' has " +
                  std::to_string(tensor_traits<V>::size(value)) + " bytes (gradient " +
                  std::to_string(tensor_traits<G>::size(grad)) + "), the graph's '" +
                  g.parameters()[q].name + "' " + std::to_string(g.parameters()[q].size);
            return;
          }
          claimed[q] = 1;
          slots[q] = {&tensor_traits<V>::storage(value), &tensor_traits<G>::storage(grad), name};
        });
      });
      if (why.empty() && j != of.size())
        why = "the layer of op '" + op + "' has " + std::to_string(j) +
              " parameters, the graph gives it " + std::to_string(of.size()) +
              "; plan with the graph profile_dag made";
    }
    if (!why.empty()) return bad("managed_training: " + why);
    auto s = detail::parameter_state<B>::place(ex_.backend(), g, program_.parameters, opt_,
                                               std::move(slots), saved_);
    if (!s) return s.err();
    state_.emplace(std::move(*s));
    return {};
  }
}

template <class B, class Model>
template <class T, class Tg>
result<run_result<T>> managed_training<B, Model>::step(T input, const Tg& targets) {
  if (!state_)
    if (auto ok = place(); !ok) return ok.err();
  auto r = ex_.run_managed(program_, std::move(input), targets, *state_);
  if (!r) {  // the parameters go back to the layers as they are; the next step places them again
    finish();
    return error{r.err().code,
                 r.err().message +
                     "; the parameters are back in their layers as they were when the step "
                     "failed (some of its updates may have run)",
                 {}};
  }
  ++steps_;
  return r;
}

}  // namespace remat::exec
