#pragma once
// What the executor and the profiler need from a chain layer, the stage of a chain model (a
// range or tuple of chain layers): a `context` type (what forward_save keeps for the backward,
// with its size in bytes), forward (keeps nothing), forward_save (fills the context), and the
// backward, which returns the input's gradient (with the output gradient dy; the loss's without
// it, dy being the constant 1). A loss may take the batch's targets in all three calls. Adapt a
// type by giving it the members chain_layer_traits<L> looks for, or by specialising it. The
// check_chain_layer* functions stop a misfit at compile time, naming what is missing.
// docs/executor.md, "Chain layers".

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <remat/core/units.hpp>
#include <remat/exec/concepts/backend.hpp>
#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/tensor.hpp>

namespace remat::exec {

/// How the executor calls a chain layer L (or a pointer-like to one, dereferenced). Every tensor
/// and temporary a layer creates is allocated through b, so that it is counted.
template <class L>
struct chain_layer_traits {
  using target = detail::target_t<L>;
  /// What forward_save keeps for the backward: default-constructible, movable.
  using context = typename target::context;

  /// F^none / F^ck: computes y, keeps nothing.
  template <class T, class B>
  static T forward(L& l, const T& x, B& b) requires requires(target& t) {
    { t.forward(x, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, b); }
  /// F^all: computes y, fills ctx.
  template <class T, class B>
  static T forward_save(L& l, const T& x, context& ctx, B& b) requires requires(target& t) {
    { t.forward_save(x, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, ctx, b); }
  /// Returns dx and accumulates the parameter gradients (every stage but the loss). x is the
  /// stage input and y its output, both kept alive for the backward, so ctx need not copy them.
  template <class T, class B>
  static T backward(L& l, const T& x, const T& y, const context& ctx, const T& dy, B& b) requires
      requires(target& t) {
    { t.backward(x, y, ctx, dy, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).backward(x, y, ctx, dy, b); }
  /// The loss stage's backward: the output gradient is the constant 1.
  template <class T, class B>
  static T loss_backward(L& l, const T& x, const T& y, const context& ctx, B& b) requires
      requires(target& t) {
    { t.backward(x, y, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).backward(x, y, ctx, b); }
  // The loss with the batch's targets, when the run has them (of any type Tg). When Tg is T, the
  // backward with targets has the signature of a non-loss backward (targets in the place of
  // dy): the executor tells them apart by position, the last stage being the loss.
  template <class T, class Tg, class B>
  static T forward(L& l, const T& x, const Tg& tg, B& b) requires requires(target& t) {
    { t.forward(x, tg, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, tg, b); }
  template <class T, class Tg, class B>
  static T forward_save(L& l, const T& x, const Tg& tg, context& ctx, B& b) requires
      requires(target& t) {
    { t.forward_save(x, tg, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, tg, ctx, b); }
  template <class T, class Tg, class B>
  static T loss_backward(L& l, const T& x, const T& y, const context& ctx, const Tg& tg,
                         B& b) requires requires(target& t) {
    { t.backward(x, y, ctx, tg, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).backward(x, y, ctx, tg, b); }
  /// The context's size in bytes.
  static bytes context_bytes(const context& ctx) requires requires {
    { ctx.bytes() } -> std::convertible_to<bytes>;
  }
  { return static_cast<bytes>(ctx.bytes()); }
};

/// The parts of a layer the executor needs for a tensor T and a backend B. Each requirement
/// has its own concept so that a misfit says which one is missing (see check_chain_layer).
template <class L>
concept HasChainContext = requires {
  typename chain_layer_traits<L>::context;
}
&&std::default_initializable<typename chain_layer_traits<L>::context>&&
    std::movable<typename chain_layer_traits<L>::context>;
template <class L, class T, class B>
concept HasChainForward = requires(L& l, const T& x, B& b) {
  { chain_layer_traits<L>::forward(l, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasChainForwardSave = HasChainContext<L> &&
    requires(L& l, const T& x, typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::forward_save(l, x, c, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasChainBackward = HasChainContext<L> &&
    requires(L& l, const T& x, const typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::backward(l, x, x, c, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasChainLossBackward = HasChainContext<L> &&
    requires(L& l, const T& x, const typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::loss_backward(l, x, x, c, b) } -> std::same_as<T>;
};
template <class L>
concept HasChainContextBytes = HasChainContext<L> &&
    requires(const typename chain_layer_traits<L>::context& c) {
  { chain_layer_traits<L>::context_bytes(c) } -> std::convertible_to<bytes>;
};
/// The loss with the targets Tg: its forward, forward_save and backward take them.
template <class L, class T, class Tg, class B>
concept HasChainTargetsLoss = HasChainContext<L> &&
    requires(L& l, const T& x, const Tg& tg, typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::forward(l, x, tg, b) } -> std::same_as<T>;
  { chain_layer_traits<L>::forward_save(l, x, tg, c, b) } -> std::same_as<T>;
  { chain_layer_traits<L>::loss_backward(l, x, x, std::as_const(c), tg, b) } -> std::same_as<T>;
};

/// A chain stage: everything but the loss backward (a stage may provide both backwards).
template <class L, class T, class B>
concept ChainLayer = Tensor<T> && Backend<B> && HasChainContext<L> && HasChainForward<L, T, B> &&
    HasChainForwardSave<L, T, B> && HasChainContextBytes<L> &&
    (HasChainBackward<L, T, B> || HasChainLossBackward<L, T, B>);

namespace detail {
/// What every chain layer needs, whatever its place in the model.
template <class L, class T, class B>
consteval bool check_chain_basics() {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` "
      "member returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: the backend type does not satisfy remat::exec::Backend");
  static_assert(
      HasChainContext<L>,
      "remat: the layer type needs a default-constructible, movable `context` type "
      "(what forward_save keeps for the backward), or a chain_layer_traits<L> specialisation");
  static_assert(HasChainContextBytes<L>,
                "remat: the layer's context needs `bytes() const` (its size in bytes), or a "
                "chain_layer_traits<L>::context_bytes");
  return true;
}
}  // namespace detail

/// Stops a misfit with a message that names the missing piece.
template <class L, class T, class B>
consteval bool check_chain_layer() {
  (void)detail::check_chain_basics<L, T, B>();
  static_assert(HasChainForward<L, T, B>,
                "remat: the layer type needs `T forward(const T& x, Backend& b)`, or a "
                "chain_layer_traits<L>::forward");
  static_assert(
      HasChainForwardSave<L, T, B>,
      "remat: the layer type needs `T forward_save(const T& x, context& ctx, Backend& b)`, "
      "or a chain_layer_traits<L>::forward_save");
  static_assert(HasChainBackward<L, T, B> || HasChainLossBackward<L, T, B>,
                "remat: the layer type needs `T backward(const T& x, const T& y, const context& "
                "ctx, const T& dy, Backend& b)` (or, for the loss, the same without dy)");
  return true;
}

/// check_chain_layer, and what the layer's role asks for a run with targets Tg (no_targets: a run
/// without): a layer before the last needs the backward with dy; the loss the calls of a loss
/// (with Tg's targets when the run has them); a range's one type what every layer needs and the
/// loss's calls (which backward the object in each place runs, as with a base class implementing
/// either, is checked when the run reaches it). `layer_index` is the layer's place in a tuple
/// model: the compiler's notes name it when an assertion fails.
template <class L, class T, class Tg, class B, layer_role role, std::size_t layer_index = 0>
consteval bool check_chain_layer_as() {
  constexpr bool targets = !std::is_same_v<Tg, no_targets>;
  if constexpr (role == layer_role::loss)
    (void)detail::check_chain_basics<L, T, B>();
  else
    (void)check_chain_layer<L, T, B>();
  if constexpr (role == layer_role::inner)
    static_assert(!HasChainLossBackward<L, T, B> || HasChainBackward<L, T, B>,
                  "remat: a layer before the last (layer_index, 0-based) has only a loss backward "
                  "(without dy); only the last layer of a model is the loss, the others need `T "
                  "backward(const T& x, const T& y, const context& ctx, const T& dy, Backend& b)`");
  // A range's one type is checked as the loss where it is a layer otherwise (so that a misfit
  // says first what every layer lacks).
  constexpr bool fits =
      HasChainContext<L> &&
      (role == layer_role::loss || (HasChainForward<L, T, B> && HasChainForwardSave<L, T, B>));
  if constexpr (role != layer_role::inner && targets)
    static_assert(
        !fits || HasChainTargetsLoss<L, T, Tg, B>,
        "remat: the run passes targets, so the last layer (the loss) needs `T forward(const "
        "T& x, const Tg& targets, Backend& b)`, `T forward_save(const T& x, const Tg& "
        "targets, context& ctx, Backend& b)` and `T backward(const T& x, const T& y, const "
        "context& ctx, const Tg& targets, Backend& b)`; or run without targets");
  if constexpr (role != layer_role::inner && !targets)
    static_assert(
        !fits || (role == layer_role::any && !HasChainBackward<L, T, B>) ||
            (HasChainForward<L, T, B> && HasChainForwardSave<L, T, B> &&
             HasChainLossBackward<L, T, B>),
        "remat: the last layer is the loss and the run passes no targets: it needs `T "
        "forward(const T& x, Backend& b)`, `T forward_save(const T& x, context& ctx, "
        "Backend& b)` and `T backward(const T& x, const T& y, const context& ctx, Backend& "
        "b)` (no dy); a loss that takes the batch's targets gets them from "
        "run(schedule, input, targets) and profile_chain(model, sample, sample_targets, "
        "backend)");
  return true;
}

}  // namespace remat::exec
