#pragma once
// Whether the tensors are the backend's memory: the one check of the profiler and the executor.
// A tensor that holds memory the backend never handed out (a std::vector, say) makes every
// measured peak, and the budget, meaningless, so a profile or run whose forwards' outputs the
// backend did not see allocated is refused. docs/executor.md, "The allocation check".

#include <algorithm>
#include <string>

#include <remat/core/units.hpp>

namespace remat::exec::detail {

/// The bytes the forwards' outputs claim (tensor_traits<T>::size, plus the context's bytes for a
/// forward_save) against the growth of the backend's in_use around those forwards, summed over a
/// whole profile or run. The rule is on the sums, not per op, so that a layer whose output shares
/// its input's memory (a view) does not trip it; it trips when the backend saw less than half of
/// what the outputs claim (a model made mostly of views would trip it too). A model whose outputs
/// are all empty passes.
struct allocation_check {
  bytes claimed = 0;  ///< sum of the outputs' sizes
  bytes seen = 0;     ///< sum of the backend's growth around the forwards that made them
  void add(bytes in_use_before, bytes in_use_after, bytes output) {
    claimed += output;
    seen += std::max<bytes>(0, in_use_after - in_use_before);
  }
  /// Empty when the backend saw at least half of what the outputs claim; else what is wrong and
  /// what to do.
  [[nodiscard]] std::string problem() const {
    if (seen >= claimed - claimed / 2) return {};
    return "the forwards' outputs claim " + format_bytes(claimed) +
           " in all by tensor_traits<T>::size, but the backend saw " + format_bytes(seen) +
           " allocated by those forwards: the tensors do not hold memory from the backend, so the "
           "measured memory and the budget mean nothing. Allocate every tensor's memory through "
           "the Backend& each layer receives (b.allocate(n)) and hold the returned buffer in the "
           "tensor (docs/guide/train.md)";
  }
};

}  // namespace remat::exec::detail
