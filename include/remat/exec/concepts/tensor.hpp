#pragma once
// What the executor and the profiler need from the user's tensor type T: tensor_traits<T>, whose
// defaults look for members (t.bytes(), t.storage(), t.item(), acc += c), and the concepts over
// it. A tensor owns memory allocated through the backend, so destroying it frees that memory.
// Adapt a type by giving it the members, or by specialising tensor_traits<T> (as fmt's
// formatter<T>). Host-only: no CUDA header here. docs/executor.md, "Tensors".

#include <concepts>

#include <remat/core/units.hpp>

namespace remat::exec {

template <class T>
struct tensor_traits {
  /// Its size in bytes (required).
  static bytes size(const T& t) requires requires {
    { t.bytes() } -> std::convertible_to<bytes>;
  }
  { return static_cast<bytes>(t.bytes()); }
  /// The backend buffer holding the data (for transfers).
  static decltype(auto) storage(T& t) requires requires { t.storage(); }
  { return t.storage(); }
  /// The value of a one-element tensor (the loss), for run_result::loss.
  static double item(const T& t) requires requires {
    { t.item() } -> std::convertible_to<double>;
  }
  { return static_cast<double>(t.item()); }
  /// acc = acc + c element by element, in place (a chain layer's input gradient added to the
  /// one other ops made, as_graph_layer).
  static void add(T& acc, const T& c) requires requires { acc += c; }
  { acc += c; }
};

/// A tensor: movable, with its size in bytes (tensor_traits<T>::size).
template <class T>
concept Tensor = std::movable<T> && requires(const T& t) {
  { tensor_traits<T>::size(t) } -> std::convertible_to<bytes>;
};

/// Optional: a tensor whose value the executor can read as a number (the loss's).
template <class T>
concept ScalarTensor = requires(const T& t) {
  { tensor_traits<T>::item(t) } -> std::convertible_to<double>;
};

/// Optional: a tensor that can be added to in place (as_graph_layer's accumulated gradients).
template <class T>
concept AddableTensor = requires(T& acc, const T& c) {
  tensor_traits<T>::add(acc, c);
};

}  // namespace remat::exec
