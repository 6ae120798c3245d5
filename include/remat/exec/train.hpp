#pragma once
// Training-loop help over the executor: for_each_layer(model, f), zero_grad(model) and
// train_step(executor, plan, input[, targets], update): zero the gradients, run the plan, then
// update(layer) on every layer if the run succeeded (the optimizer is the user's; the layers hold
// their parameter gradients, bitwise those of plain training). An update that returns bool says
// whether it updated the layer, and a step where it updated none is an error: an update written
// for another type (an as_graph_layer's adapter instead of the layer inside) would otherwise
// train nothing without a word. zero_grad and update run with no work of the backend pending
// (SynchronizingBackend). docs/executor.md, "Training steps".

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <remat/core/result.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/executor.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::exec {

namespace detail {
/// That f can be called with a layer of type Layer (a reference), or a message that says how.
template <class F, class Layer>
constexpr void require_callable() {
  static_assert(
      std::is_invocable_v<F&, Layer>,
      "remat: for_each_layer and train_step call f(layer) (train_step: update(layer)) on every "
      "layer of the model, with each layer's own type, and this f cannot take one of them (the "
      "layer type is in the instantiation above); take `auto& layer` and skip the layers that "
      "have no parameters, e.g. [&](auto& layer) { if constexpr (requires { layer.sgd(lr); }) "
      "layer.sgd(lr); }");
}

/// f on the layer behind one element of a model (a chain layer, a graph layer, a pointer-like to
/// either, or an as_graph_layer).
template <class L, class F>
void visit_layer(L& element, F& f) {
  auto& layer = [&]() -> auto& {
    if constexpr (is_chain_stage<L>)
      return deref(element.chain_layer());
    else
      return deref(element);
  }
  ();
  require_callable<F, decltype(layer)>();
  if constexpr (std::is_invocable_v<F&, decltype(layer)>) f(layer);
}
}  // namespace detail

/// f(layer) on every layer of a chain model (a range or a std::tuple) or a dag_model.
template <class Model, class F>
void for_each_layer(Model& model, F&& f) {
  if constexpr (detail::is_dag_model<Model>) {
    exec::for_each_layer(model.layers, f);
  } else if constexpr (requires { std::tuple_size<Model>::value; }) {
    std::apply([&](auto&... element) { (detail::visit_layer(element, f), ...); }, model);
  } else {
    for (std::size_t i = 0; i < model_traits<Model>::size(model); ++i)
      model_traits<Model>::visit(model, i, [&](auto& element) { detail::visit_layer(element, f); });
  }
}

/// Zeroes the parameter gradients: layer.zero_grad() on every layer that has one.
template <class Model>
void zero_grad(Model& model) {
  exec::for_each_layer(model, [](auto& layer) {
    if constexpr (requires { layer.zero_grad(); }) layer.zero_grad();
  });
}

/// One training step (the header comment): zero_grad, the planned run with the batch's targets,
/// then update(layer) on every layer if the run succeeded. When update returns bool for some
/// layers and false for all of them, the step is an execution_error that says so (the run's
/// gradients are in the layers, but nothing was updated).
template <class B, class Model, class T, class Tg, class F>
result<run_result<T>> train_step(executor<B, Model>& ex, const schedule& plan, T input,
                                 const Tg& targets, F&& update) {
  detail::wait_idle(ex.backend());  // the hooks run on the host: no kernel of the last step pending
  exec::zero_grad(ex.model());
  auto r = ex.run(plan, std::move(input), targets);
  detail::wait_idle(ex.backend());
  if (!r) return r;
  int told = 0, updated = 0;  // layers whose update returned bool, and true
  exec::for_each_layer(ex.model(), [&](auto& layer) {
    using Layer = decltype(layer);
    detail::require_callable<F, Layer>();
    if constexpr (std::is_invocable_v<F&, Layer>) {
      if constexpr (std::is_same_v<std::invoke_result_t<F&, Layer>, bool>) {
        ++told;
        if (update(layer)) ++updated;
      } else {
        update(layer);
      }
    }
  });
  if (told > 0 && updated == 0)
    return error{status::execution_error,
                 "train_step: update(layer) returned false for every layer, so this step "
                 "trained nothing; update is called with each layer's own type (for an "
                 "as_graph_layer, the layer inside it, not the adapter: `layer.sgd(lr)`, not "
                 "`layer.layer.sgd(lr)`), e.g. [&](auto& layer) { if constexpr (requires { "
                 "layer.sgd(lr); }) { layer.sgd(lr); return true; } return false; }",
                 {}};
  return r;
}

/// One training step for a loss that takes no targets.
template <class B, class Model, class T, class F>
result<run_result<T>> train_step(executor<B, Model>& ex, const schedule& plan, T input,
                                 F&& update) {
  return exec::train_step(ex, plan, std::move(input), no_targets{}, std::forward<F>(update));
}

}  // namespace remat::exec
