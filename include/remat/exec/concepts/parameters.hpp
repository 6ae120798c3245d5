#pragma once
// Optional: a layer's parameters, for the profiler (which records them in the forward DAG, so
// that the planners of parameters see them) and for a program that manages them (OFFMATE plans,
// exec/managed_training.hpp, which moves their buffers). parameter_traits<Layer>, whose defaults
// look for members: layer.parameters() a range of records, each with a `value` and a `grad`
// tensor of the same size and, optionally, a `name`. Adapt a layer by giving it the members, or
// by specialising parameter_traits<Layer>. Host-only. docs/executor.md, "Parameters".

#include <cstddef>
#include <iterator>
#include <ranges>
#include <string>
#include <type_traits>
#include <utility>

#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/tensor.hpp>

namespace remat::exec {

template <class L>
struct parameter_traits {
  /// The layer's parameters: a range of records (default: layer.parameters()).
  static decltype(auto) parameters(L& layer) requires requires { layer.parameters(); }
  { return layer.parameters(); }
  /// A record's value tensor (default: its `value` member).
  template <class P>
  static auto& value(P& p) requires requires {
    p.value;
  }
  { return p.value; }
  /// A record's gradient tensor, the value's size (default: its `grad` member).
  template <class P>
  static auto& gradient(P& p) requires requires {
    p.grad;
  }
  { return p.grad; }
  /// A record's name, unique within the layer (default: its `name` member, else its position).
  template <class P>
  static std::string name(const P& p, std::size_t i) {
    if constexpr (requires { std::string(p.name); })
      return p.name.empty() ? std::to_string(i) : std::string(p.name);
    else
      return std::to_string(i);
  }
};

namespace detail {
template <class L>
using parameter_range_t = decltype(parameter_traits<L>::parameters(std::declval<L&>()));
template <class L>
using parameter_record_t =
    std::remove_reference_t<std::ranges::range_reference_t<parameter_range_t<L>>>;
}  // namespace detail

/// A layer (the object, not a pointer to it) whose parameters the profiler and the parameter
/// management see: parameter_traits<L>::parameters is a range whose records have value and
/// gradient tensors.
template <class L>
concept HasParameters = requires(L& l) {
  parameter_traits<L>::parameters(l);
  requires std::ranges::forward_range<detail::parameter_range_t<L>>;
  requires Tensor<std::remove_cvref_t<decltype(parameter_traits<L>::value(
      std::declval<detail::parameter_record_t<L>&>()))>>;
  requires Tensor<std::remove_cvref_t<decltype(parameter_traits<L>::gradient(
      std::declval<detail::parameter_record_t<L>&>()))>>;
};

namespace detail {
/// f(name, value, gradient) on each parameter of the layer behind `element` (a layer or a
/// pointer-like to one), in the layer's order; nothing for a layer without parameters.
template <class E, class F>
void for_each_parameter(E& element, F&& f) {
  auto& layer = deref(element);
  using L = std::remove_reference_t<decltype(layer)>;
  if constexpr (HasParameters<L>) {
    std::size_t i = 0;
    for (auto&& p : parameter_traits<L>::parameters(layer)) {
      f(parameter_traits<L>::name(p, i), parameter_traits<L>::value(p),
        parameter_traits<L>::gradient(p));
      ++i;
    }
  }
}
}  // namespace detail

}  // namespace remat::exec
