#pragma once
// as_graph_layer<L>: a chain layer as a graph layer, the op of a dag_model that reads one
// tensor. The chain layer's backward returns its input's gradient, which the adapter makes the
// gradient or adds to it in place (one rounding per contribution, so gradients stay bitwise those
// of plain training). The executor and the profiler run a chain model through the same adapter
// (detail::chain_stage, detail::chain_layers): one code path for both kinds of model.
// docs/executor.md, "Chain layers in a DAG model".

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <remat/core/units.hpp>
#include <remat/exec/concepts/chain_layer.hpp>
#include <remat/exec/concepts/dag_layer.hpp>
#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/model.hpp>
#include <remat/exec/concepts/tensor.hpp>

namespace remat::exec {

/// A chain layer (or a pointer-like to one) as a graph layer: an op of a dag_model that reads one
/// tensor, as `dag_model<std::tuple<as_graph_layer<my_linear>, my_graph_op, ...>>`. The chain
/// layer's forward takes that input, its backward returns the input's gradient, which the
/// adapter makes the gradient or adds element by element to it (the contract of a graph layer,
/// exec/concepts/dag_layer.hpp; one rounding per contribution, so gradients stay bitwise those of
/// plain training). Its backward reads its input and its output, as the chain model says (abar_l
/// includes a_l, B_l needs a_{l-1}). The layer's random state, name() and zero_grad() pass
/// through. An op that lists more or fewer than one input for it is refused by profile_dag and
/// the executor, naming the op.
///
/// `Hold` is how the layer is held: by value (L, the default) or, for the executor's view of a
/// chain model's layers (stage l is op l - 1), through a pointer (L*).
template <class L, class Hold = L>
struct as_graph_layer {
  Hold layer;

  /// The chain layer (L, which the chain_layer_traits dereference when it is a pointer-like).
  L& chain_layer() {
    if constexpr (std::is_same_v<Hold, L*>)
      return *layer;
    else
      return layer;
  }
  auto random_state() const requires HasRandomState<L> {
    return detail::deref(held()).random_state();
  }
  template <class S>
  void set_random_state(const S& s) requires HasRandomState<L> {
    detail::deref(chain_layer()).set_random_state(s);
  }
  decltype(auto) name() const requires requires(L& l) { detail::deref(l).name(); }
  { return detail::deref(held()).name(); }
  void zero_grad() requires requires(L& l) { detail::deref(l).zero_grad(); }
  { detail::deref(chain_layer()).zero_grad(); }

 private:
  const L& held() const {
    if constexpr (std::is_same_v<Hold, L*>)
      return *layer;
    else
      return layer;
  }
};

namespace detail {
/// True for a chain layer seen as a graph layer (as_graph_layer), which takes one input.
template <class L>
inline constexpr bool is_chain_stage = false;
template <class L, class Hold>
inline constexpr bool is_chain_stage<as_graph_layer<L, Hold>> = true;

/// The executor's view of a chain model's layer.
template <class L>
using chain_stage = as_graph_layer<L, L*>;

/// A chain model seen as the layers of a DAG model: visiting op i visits layer i through a
/// chain_stage.
template <class Model>
struct chain_layers {
  Model* model;
};
}  // namespace detail

/// A chain model seen as graph layers: op i is layer i through a chain_stage.
template <class Model>
struct model_traits<detail::chain_layers<Model>> {
  static std::size_t size(const detail::chain_layers<Model>& m) {
    return model_traits<Model>::size(*m.model);
  }
  template <class F>
  static decltype(auto) visit(detail::chain_layers<Model>& m, std::size_t i, F&& f) {
    return model_traits<Model>::visit(*m.model, i, [&](auto& layer) -> decltype(auto) {
      detail::chain_stage<std::remove_reference_t<decltype(layer)>> stage{&layer};
      return f(stage);
    });
  }
};

/// A chain layer as a graph layer: the traits of the adapter forward to chain_layer_traits<L>.
template <class L, class Hold>
struct dag_layer_traits<as_graph_layer<L, Hold>> {
  using base = chain_layer_traits<L>;
  using context = typename base::context;
  using stage = as_graph_layer<L, Hold>;

  template <class T, class B>
  static T forward(stage& s, std::span<const T* const> x, B& b) requires HasChainForward<L, T, B> {
    return base::forward(s.chain_layer(), *x[0], b);
  }
  template <class T, class B>
  static T forward_save(stage& s, std::span<const T* const> x, context& ctx,
                        B& b) requires HasChainForwardSave<L, T, B> {
    return base::forward_save(s.chain_layer(), *x[0], ctx, b);
  }
  template <class T, class B>
  static void backward(stage& s, std::span<const T* const> x, const T* y, const context& ctx,
                       const T& dy, std::span<std::optional<T>> dx,
                       B& b) requires HasChainBackward<L, T, B> {
    add_to(dx[0], base::backward(s.chain_layer(), *x[0], *y, ctx, dy, b));
  }
  template <class T, class B>
  static void loss_backward(stage& s, std::span<const T* const> x, const T* y, const context& ctx,
                            std::span<std::optional<T>> dx,
                            B& b) requires HasChainLossBackward<L, T, B> {
    add_to(dx[0], base::loss_backward(s.chain_layer(), *x[0], *y, ctx, b));
  }
  template <class T, class Tg, class B>
  static T forward(stage& s, std::span<const T* const> x, const Tg& tg, B& b) requires
      requires(L& l) {
    { base::forward(l, *x[0], tg, b) } -> std::same_as<T>;
  }
  { return base::forward(s.chain_layer(), *x[0], tg, b); }
  template <class T, class Tg, class B>
  static T forward_save(stage& s, std::span<const T* const> x, const Tg& tg, context& ctx,
                        B& b) requires requires(L& l) {
    { base::forward_save(l, *x[0], tg, ctx, b) } -> std::same_as<T>;
  }
  { return base::forward_save(s.chain_layer(), *x[0], tg, ctx, b); }
  template <class T, class Tg, class B>
  static void loss_backward(stage& s, std::span<const T* const> x, const T* y, const context& ctx,
                            const Tg& tg, std::span<std::optional<T>> dx, B& b) requires
      requires(L& l) {
    { base::loss_backward(l, *x[0], *y, ctx, tg, b) } -> std::same_as<T>;
  }
  { add_to(dx[0], base::loss_backward(s.chain_layer(), *x[0], *y, ctx, tg, b)); }
  static bytes context_bytes(const context& ctx) requires HasChainContextBytes<L> {
    return base::context_bytes(ctx);
  }
  /// Its input and its output, as the chain model says (abar_l includes a_l, B_l needs a_{l-1}).
  static backward_needs reads(stage&) { return {}; }

 private:
  /// The chain layer's dx becomes the input's gradient, or is added to the one other ops made.
  template <class T>
  static void add_to(std::optional<T>& dx, T c) {
    if (!dx) {
      dx.emplace(std::move(c));
      return;
    }
    if constexpr (AddableTensor<T>)
      tensor_traits<T>::add(*dx, c);
    else
      throw std::invalid_argument(
          "a chain layer (as_graph_layer) adds its input gradient to the one other ops made, but "
          "the tensor type cannot be added to: give it `operator+=` (element by element, in place) "
          "or specialise tensor_traits<T>::add");
  }
};

}  // namespace remat::exec
