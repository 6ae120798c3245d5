#pragma once
// The layer calls of an op, for the executor and the profiler: the one place that chooses
// between the loss's calls (with the run's targets, or without: no_targets) and the others', for
// chain and DAG models alike (a chain's layers run through as_graph_layer). A call the layer does
// not have throws execution_failure naming the op; check_model (exec/detail/check_model.hpp)
// stops every such call at compile time but in a range of one type, whose loss may share a base
// class with the others. docs/executor.md, "The loss and the targets".

#include <concepts>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <remat/exec/concepts/dag_layer.hpp>
#include <remat/exec/concepts/layer.hpp>

namespace remat::exec::detail {

/// An error the run reports (not a bug): becomes status::execution_error.
struct execution_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The forward (fast-forward) of layer l on x; the loss (`loss`) gets the targets when the run
/// has them, no other op does. `who` names the op in errors.
template <class L, class T, class Tg, class B>
T call_forward(L& l, std::span<const T* const> x, bool loss, const Tg& tg, B& b,
               const std::string& who) {
  using tr = dag_layer_traits<L>;
  if (loss && !std::is_same_v<Tg, no_targets>) {
    if constexpr (requires {
                    { tr::forward(l, x, tg, b) } -> std::same_as<T>;
                  })
      return tr::forward(l, x, tg, b);
    else
      throw execution_failure(
          who + " is the loss (the last op), but its layer's forward takes no targets");
  }
  if constexpr (requires {
                  { tr::forward(l, x, b) } -> std::same_as<T>;
                })
    return tr::forward(l, x, b);
  else
    throw execution_failure(
        who + ": its layer's forward takes targets; only the last op, the loss, gets them");
}
/// The forward_save of layer l on x, filling ctx; the targets as for call_forward.
template <class L, class T, class Tg, class B>
T call_forward_save(L& l, std::span<const T* const> x, bool loss, const Tg& tg,
                    typename dag_layer_traits<L>::context& ctx, B& b, const std::string& who) {
  using tr = dag_layer_traits<L>;
  if (loss && !std::is_same_v<Tg, no_targets>) {
    if constexpr (requires {
                    { tr::forward_save(l, x, tg, ctx, b) } -> std::same_as<T>;
                  })
      return tr::forward_save(l, x, tg, ctx, b);
    else
      throw execution_failure(
          who + " is the loss (the last op), but its layer's forward_save takes no targets");
  }
  if constexpr (requires {
                  { tr::forward_save(l, x, ctx, b) } -> std::same_as<T>;
                })
    return tr::forward_save(l, x, ctx, b);
  else
    throw execution_failure(
        who + ": its layer's forward_save takes targets; only the last op, the loss, gets them");
}
/// The backward: the loss's (dy == nullptr: the constant 1; with the targets when the run has
/// them) or another op's, which adds its contribution to each dx[j] (or creates it).
template <class L, class T, class Tg, class B>
void call_backward(L& l, std::span<const T* const> x, const T* y,
                   const typename dag_layer_traits<L>::context& ctx, const T* dy, const Tg& tg,
                   std::span<std::optional<T>> dx, B& b, const std::string& who) {
  using tr = dag_layer_traits<L>;
  if (dy != nullptr) {
    if constexpr (requires { tr::backward(l, x, y, ctx, *dy, dx, b); })
      tr::backward(l, x, y, ctx, *dy, dx, b);
    else
      throw execution_failure(who +
                              " is not the last op, but its layer only has a loss backward "
                              "(without the output gradient dy)");
  } else if constexpr (!std::is_same_v<Tg, no_targets>) {
    if constexpr (requires { tr::loss_backward(l, x, y, ctx, tg, dx, b); })
      tr::loss_backward(l, x, y, ctx, tg, dx, b);
    else
      throw execution_failure(
          who + " is the loss (the last op), but its layer's backward takes no targets");
  } else {
    if constexpr (requires { tr::loss_backward(l, x, y, ctx, dx, b); })
      tr::loss_backward(l, x, y, ctx, dx, b);
    else
      throw execution_failure(who +
                              " is the loss (the last op), but its layer has no loss backward "
                              "(without the output gradient dy)");
  }
}

}  // namespace remat::exec::detail
