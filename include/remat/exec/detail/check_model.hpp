#pragma once
// The model check: stops at compile time a model whose layers cannot run with a tensor, targets
// and backend, each layer checked in its place: in a tuple model each layer where it is (before
// the last, or the loss), in a range the one type in every place (whether the object at a place
// is a loss, as for a base class, is checked when the run gets there). A chain layer in a DAG
// model (as_graph_layer) is checked as a chain layer. The executor and the profiler both run it.
// docs/executor.md, "The loss and the targets".

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <remat/exec/as_graph_layer.hpp>
#include <remat/exec/concepts/chain_layer.hpp>
#include <remat/exec/concepts/dag_layer.hpp>
#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/model.hpp>

namespace remat::exec::detail {

/// One layer type of a model in its role (check_chain_layer_as, check_dag_layer_as): a chain layer,
/// or a graph layer, which may be a chain layer through as_graph_layer.
template <bool graph, class L, class T, class Tg, class B, layer_role role, std::size_t index>
consteval bool check_layer_as() {
  if constexpr (!graph)
    return check_chain_layer_as<L, T, Tg, B, role, index>();
  else if constexpr (is_chain_stage<L>)
    return check_chain_layer_as<std::remove_reference_t<decltype(std::declval<L&>().chain_layer())>,
                                T, Tg, B, role, index>();
  else
    return check_dag_layer_as<L, T, Tg, B, role, index>();
}
template <bool graph, class Layers, class T, class Tg, class B>
struct check_layers {
  /// A range: one type at every place, the loss's included.
  static consteval bool run() {
    using L = std::remove_reference_t<decltype(std::declval<Layers&>()[0])>;
    return check_layer_as<graph, L, T, Tg, B, layer_role::any, 0>();
  }
};
template <bool graph, class... Ls, class T, class Tg, class B>
struct check_layers<graph, std::tuple<Ls...>, T, Tg, B> {
  /// A tuple: each layer in its place, the last the loss.
  static consteval bool run() { return run_at(std::index_sequence_for<Ls...>{}); }
  template <std::size_t... I>
  static consteval bool run_at(std::index_sequence<I...>) {
    constexpr std::size_t last = sizeof...(Ls) - 1;
    return (check_layer_as < graph, Ls, T, Tg, B, I == last ? layer_role::loss : layer_role::inner,
            I > () && ...);
  }
};
/// Stops at compile time a model whose layers cannot run with tensor T, targets Tg (no_targets: a
/// run without), backend B: in a tuple model each layer in its place (before the last, or the
/// loss), in a range the one type in every place.
template <class Model, class T, class Tg, class B>
consteval bool check_model() {
  if constexpr (is_dag_model<Model>)
    return check_layers<true, std::remove_cvref_t<decltype(std::declval<Model&>().layers)>, T, Tg,
                        B>::run();
  else
    return check_layers<false, Model, T, Tg, B>::run();
}

}  // namespace remat::exec::detail
