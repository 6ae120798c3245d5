#pragma once
// What chain layers and DAG layers share: a layer may be held through a pointer-like
// (std::unique_ptr<Base>, Base*), which the traits dereference; its place in a model (before the
// last, the loss, or any place: a range's one type), which the compile-time checks take; what a
// run without targets hands the loss (no_targets); and the optional random state that the
// executor and the profiler save and replay. docs/executor.md, "Layers".

#include <type_traits>
#include <utility>

namespace remat::exec {

/// What a run without targets hands the loss: nothing (it calls the loss without targets).
struct no_targets {};

namespace detail {
template <class L>
concept pointer_like = requires(L& l) {
  *l;
  l == nullptr;
};
/// The layer object behind L (L itself, or what a pointer-like L points to).
template <class L>
constexpr decltype(auto) deref(L& l) {
  if constexpr (pointer_like<L>)
    return *l;
  else
    return (l);
}
template <class L>
using target_t = std::remove_cvref_t<decltype(deref(std::declval<L&>()))>;
}  // namespace detail

/// A layer's place in a model, for the checks of a whole model: before the last, the last (the
/// loss), or any (a range: one type for every place).
enum class layer_role { inner, loss, any };

/// Optional random state, saved and replayed by the executor: S random_state() const and
/// void set_random_state(const S&), so that random layers (dropout) recompute exactly.
template <class L>
concept HasRandomState = requires(L& l) {
  detail::deref(l).random_state();
  detail::deref(l).set_random_state(detail::deref(l).random_state());
};

namespace detail {
/// The layer's random state (0 for a layer without one).
template <class L>
auto random_state_of(L& layer) {
  if constexpr (HasRandomState<L>)
    return deref(layer).random_state();
  else
    return 0;
}

/// A layer's random state as it is now, to put back before each replay (the profilers run a
/// layer several times: each run draws the same numbers, and the layer ends as it began). For a
/// layer without random state it does nothing.
template <class L>
class saved_random_state {
 public:
  explicit saved_random_state(L& layer) : layer_(layer), state_(random_state_of(layer)) {}
  void restore() const {
    if constexpr (HasRandomState<L>) deref(layer_).set_random_state(state_);
  }

 private:
  L& layer_;
  decltype(random_state_of(std::declval<L&>())) state_;
};
}  // namespace detail

}  // namespace remat::exec
