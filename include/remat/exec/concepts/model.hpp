#pragma once
// What a model is. A chain model is a random-access range of chain layers (std::vector<L>,
// std::array, ...) or a std::tuple of them, stage l being element l - 1; model_traits<M> sizes
// and visits it (specialise it for another container). A DAG model is a dag_model: its layers (a
// range or tuple, as a chain model's) and, per layer, its op: a name and the tensors it reads.
// In both, the last layer is the loss. docs/executor.md, "Models".

#include <cstddef>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace remat::exec {

/// A model is a random-access range of layers (std::vector<L>, std::array, ...) or a std::tuple
/// of layers; stage l of the chain is element l-1.
template <class M>
struct model_traits {
  static std::size_t size(const M& m) { return std::size(m); }
  template <class F>
  static decltype(auto) visit(M& m, std::size_t i, F&& f) {
    return std::forward<F>(f)(m[i]);
  }
};

template <class... Ls>
struct model_traits<std::tuple<Ls...>> {
  static constexpr std::size_t size(const std::tuple<Ls...>&) { return sizeof...(Ls); }
  template <class F>
  static decltype(auto) visit(std::tuple<Ls...>& m, std::size_t i, F&& f) {
    return visit_impl(m, i, f, std::index_sequence_for<Ls...>{});
  }

 private:
  template <class F, std::size_t... I>
  static decltype(auto) visit_impl(std::tuple<Ls...>& m, std::size_t i, F& f,
                                   std::index_sequence<I...>) {
    using R = decltype(f(std::get<0>(m)));
    using fn = R (*)(std::tuple<Ls...>&, F&);
    static constexpr fn table[] = {
        [](std::tuple<Ls...>& t, F& g) -> R { return g(std::get<I>(t)); }...};
    return table[i](m, f);
  }
};

/// One op of a DAG model: its name (unique; not "input" nor "output") and the tensors it reads,
/// in the order its layer takes them: "input" (the graph input) or other ops' names. An op reads
/// a tensor once (a layer that uses a tensor twice reads it once and uses it twice).
struct dag_op {
  std::string name;
  std::vector<std::string> inputs;

  friend bool operator==(const dag_op&, const dag_op&) = default;
};

/// A DAG of layers: op i runs element i of `layers` (a random-access range of layers or a
/// std::tuple, as a chain model) and reads ops[i].inputs. The last op is the loss function.
template <class Layers>
struct dag_model {
  Layers layers;
  std::vector<dag_op> ops;
};

namespace detail {
/// True for a dag_model, false for a chain model.
template <class M>
inline constexpr bool is_dag_model = false;
template <class Layers>
inline constexpr bool is_dag_model<dag_model<Layers>> = true;
}  // namespace detail

}  // namespace remat::exec
