#pragma once
// Whether the tensors are the backend's memory: the one check of the profiler and the executor.
// A tensor that holds memory the backend never handed out (a std::vector, say) makes every
// measured peak, and the budget, meaningless, so a profile or run in which a forward's output or
// context was not allocated through the backend is refused, naming the op. docs/executor.md,
// "The allocation check".

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include <remat/core/units.hpp>
#include <remat/exec/concepts/tensor.hpp>

namespace remat::exec::detail {

/// Whether y is a view of one of its inputs (memory shared with it, nothing allocated): the
/// tensor type's storage() (returning a reference) is the same object as one input's, and y
/// claims no more bytes than that input. Sizes alone cannot tell a view from an output made
/// outside the backend, so a tensor type without such a storage() has no views.
template <class T>
[[nodiscard]] bool may_be_view(T& y, std::span<const T* const> x) {
  if constexpr (requires(T & t) {
                  requires std::is_lvalue_reference_v<decltype(tensor_traits<T>::storage(t))>;
                }) {
    const void* mine = &tensor_traits<T>::storage(y);
    for (const T* in : x)
      if (in != nullptr && &tensor_traits<T>::storage(const_cast<T&>(*in)) == mine &&
          tensor_traits<T>::size(y) <= tensor_traits<T>::size(*in))
        return true;
    return false;
  } else {
    return false;
  }
}

/// Op by op: the bytes a forward's output and context claim (tensor_traits<T>::size, the
/// context's bytes) against the growth of the backend's in_use around the forward. An op fails
/// when the backend saw less than half of what it claims, not counting an output that may be a
/// view of an input (may_be_view); the first op that fails is kept, with its numbers.
struct allocation_check {
  std::string op;     ///< the first op that failed (empty: none)
  bytes claimed = 0;  ///< its output's and context's bytes
  bytes seen = 0;     ///< the backend's growth around its forward

  /// One forward: `op` names it for the message; `view` bytes of its claim may be a view.
  void add(std::string_view name, bytes in_use_before, bytes in_use_after, bytes claim,
           bytes view = 0) {
    if (!op.empty()) return;
    const bytes grew = std::max<bytes>(0, in_use_after - in_use_before);
    const bytes expected = claim - view;
    if (grew >= expected - expected / 2) return;
    op = std::string(name);
    claimed = claim;
    seen = grew;
  }
  /// Empty when every op passed; else which op, its numbers, and what to do.
  [[nodiscard]] std::string problem() const {
    if (op.empty()) return {};
    return op + " claims " + format_bytes(claimed) +
           " for its output and context (tensor_traits<T>::size, the context's bytes()), but the "
           "backend saw " +
           format_bytes(seen) +
           " allocated by it: its tensors do not hold memory from the backend, so the measured "
           "memory and the budget mean nothing. Allocate every tensor's memory through the "
           "Backend& the layer receives (b.allocate(n)) and hold the returned buffer in the "
           "tensor (docs/guide/train.md). An output that is a view of an input passes when the "
           "tensor's storage() is that input's (docs/executor.md, \"The allocation check\")";
  }
};

}  // namespace remat::exec::detail
