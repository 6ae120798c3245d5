#pragma once
// Values of types known only where they are made, kept in one container: the executor holds each
// op's context (the layers' context types differ in a tuple model) and each op's saved random
// state as a std::unique_ptr<box_base>, and gets them back with the type it knows at the op.

#include <memory>
#include <utility>

namespace remat::exec::detail {

struct box_base {
  virtual ~box_base() = default;
};
template <class V>
struct box final : box_base {
  V value{};
};
/// The value in p, which holds a box<V>.
template <class V>
V& unbox(const std::unique_ptr<box_base>& p) {
  return static_cast<box<V>*>(p.get())->value;
}
/// v in a new box.
template <class V>
std::unique_ptr<box_base> boxed(V v) {
  auto b = std::make_unique<box<V>>();
  b->value = std::move(v);
  return b;
}

}  // namespace remat::exec::detail
