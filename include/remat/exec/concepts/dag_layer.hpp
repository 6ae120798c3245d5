#pragma once
// What the executor and the profiler need from a graph layer, an op of a DAG model: as a chain
// layer's, a `context` type, forward, forward_save and the backward, but over spans: x holds the
// op's inputs, and the backward adds its contribution to the gradient dx[j] of each input (or
// creates it), in place, element by element, so that the gradients are bitwise those of plain
// training. backward_reads() says which of x and y the backward reads. Adapt a type by giving it
// the members dag_layer_traits<L> looks for, or by specialising it; a chain layer enters through
// as_graph_layer (exec/as_graph_layer.hpp). The check_dag_layer* functions stop a misfit at
// compile time, naming what is missing. docs/executor.md, "Graph layers".

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include <remat/core/units.hpp>
#include <remat/exec/concepts/backend.hpp>
#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/tensor.hpp>

namespace remat::exec {

/// What a layer's backward reads besides its context and the output gradient. The graph keeps
/// alive exactly what the backward reads, so a backward that reads nothing lets a planner free
/// the tensors early.
struct backward_needs {
  bool inputs = true;  ///< every input x[j] (false: none)
  bool output = true;  ///< its output y

  friend constexpr bool operator==(const backward_needs&, const backward_needs&) = default;
};

/// How the executor calls a graph layer L (or a pointer-like to one, dereferenced). x holds the
/// op's inputs in the order its dag_op lists them; every tensor and temporary a layer creates is
/// allocated through b.
template <class L>
struct dag_layer_traits {
  using target = detail::target_t<L>;
  /// What forward_save keeps for the backward (the graph's phantom), as a chain layer's.
  using context = typename target::context;

  /// The fast-forward: computes y, keeps nothing.
  template <class T, class B>
  static T forward(L& l, std::span<const T* const> x, B& b) requires requires(target& t) {
    { t.forward(x, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, b); }
  /// Computes the same y and fills ctx.
  template <class T, class B>
  static T forward_save(L& l, std::span<const T* const> x, context& ctx, B& b) requires
      requires(target& t) {
    { t.forward_save(x, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, ctx, b); }
  /// x[j] and y are null unless reads(l) says the backward reads them. dx[j] is the gradient of
  /// input j, shared by every op that reads that tensor: when it is empty the backward creates it
  /// (through b) with its contribution, else it adds its own in place, element by element
  /// (dx[j][e] = dx[j][e] + c[e], c computed as when it creates dx[j]): one rounding per
  /// contribution, so the gradients are bitwise those of plain training.
  template <class T, class B>
  static void backward(L& l, std::span<const T* const> x, const T* y, const context& ctx,
                       const T& dy, std::span<std::optional<T>> dx, B& b) requires
      requires(target& t) {
    t.backward(x, y, ctx, dy, dx, b);
  }
  { detail::deref(l).backward(x, y, ctx, dy, dx, b); }
  /// The loss's backward: dy is the constant 1.
  template <class T, class B>
  static void loss_backward(L& l, std::span<const T* const> x, const T* y, const context& ctx,
                            std::span<std::optional<T>> dx, B& b) requires requires(target& t) {
    t.backward(x, y, ctx, dx, b);
  }
  { detail::deref(l).backward(x, y, ctx, dx, b); }
  // The loss with the batch's targets Tg, when the run passes them (as for chain layers).
  template <class T, class Tg, class B>
  static T forward(L& l, std::span<const T* const> x, const Tg& tg, B& b) requires
      requires(target& t) {
    { t.forward(x, tg, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, tg, b); }
  template <class T, class Tg, class B>
  static T forward_save(L& l, std::span<const T* const> x, const Tg& tg, context& ctx,
                        B& b) requires requires(target& t) {
    { t.forward_save(x, tg, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, tg, ctx, b); }
  template <class T, class Tg, class B>
  static void loss_backward(L& l, std::span<const T* const> x, const T* y, const context& ctx,
                            const Tg& tg, std::span<std::optional<T>> dx, B& b) requires
      requires(target& t) {
    t.backward(x, y, ctx, tg, dx, b);
  }
  { detail::deref(l).backward(x, y, ctx, tg, dx, b); }
  /// The context's size in bytes.
  static bytes context_bytes(const context& ctx) requires requires {
    { ctx.bytes() } -> std::convertible_to<bytes>;
  }
  { return static_cast<bytes>(ctx.bytes()); }
  /// What the backward reads: backward_reads() when the layer has it, else every input and the
  /// output.
  static backward_needs reads(L& l) {
    if constexpr (requires(target & t) {
                    { t.backward_reads() } -> std::convertible_to<backward_needs>;
                  })
      return detail::deref(l).backward_reads();
    else
      return {};
  }
};

/// The parts of a graph layer, one concept each so that a misfit says which is missing.
template <class L>
concept HasDagContext = requires {
  typename dag_layer_traits<L>::context;
}
&&std::default_initializable<typename dag_layer_traits<L>::context>&&
    std::movable<typename dag_layer_traits<L>::context>;
template <class L, class T, class B>
concept HasDagForward = requires(L& l, std::span<const T* const> x, B& b) {
  { dag_layer_traits<L>::forward(l, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasDagForwardSave = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, typename dag_layer_traits<L>::context& c, B& b) {
  { dag_layer_traits<L>::forward_save(l, x, c, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasDagBackward = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, const T* y, const T& dy,
             const typename dag_layer_traits<L>::context& c, std::span<std::optional<T>> dx, B& b) {
  dag_layer_traits<L>::backward(l, x, y, c, dy, dx, b);
};
template <class L, class T, class B>
concept HasDagLossBackward = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, const T* y,
             const typename dag_layer_traits<L>::context& c, std::span<std::optional<T>> dx, B& b) {
  dag_layer_traits<L>::loss_backward(l, x, y, c, dx, b);
};
template <class L>
concept HasDagContextBytes = HasDagContext<L> &&
    requires(const typename dag_layer_traits<L>::context& c) {
  { dag_layer_traits<L>::context_bytes(c) } -> std::convertible_to<bytes>;
};
/// The loss with the targets Tg: its forward, forward_save and backward take them.
template <class L, class T, class Tg, class B>
concept HasDagTargetsLoss = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, const T* y, const Tg& tg,
             typename dag_layer_traits<L>::context& c, std::span<std::optional<T>> dx, B& b) {
  { dag_layer_traits<L>::forward(l, x, tg, b) } -> std::same_as<T>;
  { dag_layer_traits<L>::forward_save(l, x, tg, c, b) } -> std::same_as<T>;
  dag_layer_traits<L>::loss_backward(l, x, y, std::as_const(c), tg, dx, b);
};

/// An op of a DAG model: everything but the loss backward (an op may provide both backwards).
template <class L, class T, class B>
concept DagLayer = Tensor<T> && Backend<B> && HasDagContext<L> && HasDagForward<L, T, B> &&
    HasDagForwardSave<L, T, B> && HasDagContextBytes<L> &&
    (HasDagBackward<L, T, B> || HasDagLossBackward<L, T, B>);

namespace detail {
/// What every graph layer needs, whatever its place in the model.
template <class L, class T, class B>
consteval bool check_dag_basics() {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` "
      "member returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: the backend type does not satisfy remat::exec::Backend");
  static_assert(HasDagContext<L>,
                "remat: the graph layer type needs a default-constructible, movable `context` type "
                "(what forward_save keeps for the backward), or a dag_layer_traits<L> "
                "specialisation");
  static_assert(HasDagContextBytes<L>,
                "remat: the graph layer's context needs `bytes() const` (its size in bytes), or a "
                "dag_layer_traits<L>::context_bytes");
  return true;
}
}  // namespace detail

/// Stops a misfit with a message that names the missing piece.
template <class L, class T, class B>
consteval bool check_dag_layer() {
  (void)detail::check_dag_basics<L, T, B>();
  static_assert(
      HasDagForward<L, T, B>,
      "remat: the graph layer type needs `T forward(std::span<const T* const> x, Backend& "
      "b)`, or a dag_layer_traits<L>::forward");
  static_assert(HasDagForwardSave<L, T, B>,
                "remat: the graph layer type needs `T forward_save(std::span<const T* const> x, "
                "context& ctx, Backend& b)`, or a dag_layer_traits<L>::forward_save");
  static_assert(HasDagBackward<L, T, B> || HasDagLossBackward<L, T, B>,
                "remat: the graph layer type needs `void backward(std::span<const T* const> x, "
                "const T* y, const context& ctx, const T& dy, std::span<std::optional<T>> dx, "
                "Backend& b)` (or, for the loss, the same without dy)");
  return true;
}

/// check_dag_layer and what the layer's role asks, as check_chain_layer_as for chain layers.
template <class L, class T, class Tg, class B, layer_role role, std::size_t layer_index = 0>
consteval bool check_dag_layer_as() {
  constexpr bool targets = !std::is_same_v<Tg, no_targets>;
  if constexpr (role == layer_role::loss)
    (void)detail::check_dag_basics<L, T, B>();
  else
    (void)check_dag_layer<L, T, B>();
  if constexpr (role == layer_role::inner)
    static_assert(
        !HasDagLossBackward<L, T, B> || HasDagBackward<L, T, B>,
        "remat: a graph layer before the last (layer_index, 0-based) has only a loss "
        "backward (without dy); only the last op of a model is the loss, the others need "
        "`void backward(std::span<const T* const> x, const T* y, const context& ctx, const "
        "T& dy, std::span<std::optional<T>> dx, Backend& b)`");
  // A range's one type is checked as the loss where it is a layer otherwise (so that a misfit
  // says first what every layer lacks).
  constexpr bool fits =
      HasDagContext<L> &&
      (role == layer_role::loss || (HasDagForward<L, T, B> && HasDagForwardSave<L, T, B>));
  if constexpr (role != layer_role::inner && targets)
    static_assert(
        !fits || HasDagTargetsLoss<L, T, Tg, B>,
        "remat: the run passes targets, so the last graph layer (the loss) needs `T "
        "forward(std::span<const T* const> x, const Tg& targets, Backend& b)`, `T "
        "forward_save(std::span<const T* const> x, const Tg& targets, context& ctx, "
        "Backend& b)` and `void backward(std::span<const T* const> x, const T* y, const "
        "context& ctx, const Tg& targets, std::span<std::optional<T>> dx, Backend& b)`; or "
        "run without targets");
  if constexpr (role != layer_role::inner && !targets)
    static_assert(
        !fits || (role == layer_role::any && !HasDagBackward<L, T, B>) ||
            (HasDagForward<L, T, B> && HasDagForwardSave<L, T, B> && HasDagLossBackward<L, T, B>),
        "remat: the last graph layer is the loss and the run passes no targets: it needs "
        "`T forward(std::span<const T* const> x, Backend& b)`, `T "
        "forward_save(std::span<const T* const> x, context& ctx, Backend& b)` and `void "
        "backward(std::span<const T* const> x, const T* y, const context& ctx, "
        "std::span<std::optional<T>> dx, Backend& b)` (no dy); a loss that takes the "
        "batch's targets gets them from run(schedule, input, targets) and "
        "profile_dag(model, sample, sample_targets, backend)");
  return true;
}

}  // namespace remat::exec
