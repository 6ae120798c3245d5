#pragma once
// The random states of a run's layers, so that activations recompute bit for bit: the executor
// saves an op's random state before its first forward of a run and puts it back before every
// recomputation. When the run ends, each layer is left as after its first forward (a success) or
// as before the run (a failure). Layers without random state are skipped.
// docs/executor.md, "Bitwise equality with plain training".

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/model.hpp>
#include <remat/exec/detail/type_erasure.hpp>

namespace remat::exec::detail {

template <class L>
using random_state_t = std::remove_cvref_t<decltype(deref(std::declval<L&>()).random_state())>;

/// The random states of the ops of one run, op i's at i.
class run_random_states {
 public:
  explicit run_random_states(std::size_t ops) : before_(ops), after_(ops) {}

  /// Before a forward of op i: the first of the run saves the layer's state, every later one (a
  /// recomputation) puts it back, so that it draws the same numbers.
  template <class L>
  void before_forward(std::size_t i, L& layer) {
    if constexpr (HasRandomState<L>) {
      auto& target = deref(layer);
      if (!before_[i])
        before_[i] = boxed(target.random_state());
      else
        target.set_random_state(unbox<random_state_t<L>>(before_[i]));
    }
  }
  /// After a forward of op i: keeps the state after its first forward, which a successful run
  /// leaves.
  template <class L>
  void after_forward(std::size_t i, L& layer) {
    if constexpr (HasRandomState<L>)
      if (!after_[i]) after_[i] = boxed(deref(layer).random_state());
  }
  /// Puts back the saved state of every op of `layers`: as after its first forward when the run
  /// succeeded, else as before the run.
  template <class Layers>
  void restore(Layers& layers, bool success) const {
    const auto& saved = success ? after_ : before_;
    for (std::size_t i = 0; i < saved.size(); ++i) {
      const auto& state = saved[i];
      if (!state) continue;
      model_traits<Layers>::visit(layers, i, [&](auto& layer) {
        using layer_t = std::remove_reference_t<decltype(layer)>;
        if constexpr (HasRandomState<layer_t>)
          deref(layer).set_random_state(unbox<random_state_t<layer_t>>(state));
      });
    }
  }

 private:
  std::vector<std::unique_ptr<box_base>> before_, after_;
};

}  // namespace remat::exec::detail
