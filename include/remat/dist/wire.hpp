#pragma once
// How a tensor travels between processes (dist/mpi.hpp): its shape, a few integers sent ahead of
// the data so that the receiver can make a tensor of that shape through its backend, and its
// bytes. Specialise wire_traits<T> for the tensor type (examples/eigen/wire.hpp does it for
// eg::tensor); WireTensor<T, B> checks it. No MPI here. docs/distributed.md.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <remat/core/units.hpp>

namespace remat::dist {

/// The most dimensions a shape may have on the wire.
inline constexpr std::size_t max_wire_dims = 8;

/// A tensor type's wire format. A specialisation provides:
///   static std::vector<std::int64_t> shape(const T& t);     at most max_wire_dims entries
///   static T make(const std::vector<std::int64_t>& shape, B& b);   uninitialised, from b
///   static void* data(T& t);  static const void* data(const T& t);  the bytes, contiguous
///   static bytes size(const T& t);                          how many
/// make({}) (an empty shape) gives a one-element tensor (a scalar: what a stage's boundary returns
/// in the place of a loss). The primary template has none of them. A tensor type whose data is in
/// device memory says so with `static constexpr bool on_device = true;` (the transport must then
/// move device memory: dist/cuda.hpp, dist/nccl.hpp).
template <class T>
struct wire_traits;

/// Whether T's wire data is device memory (wire_traits<T>::on_device; false without it).
template <class T>
inline constexpr bool wire_on_device = [] {
  if constexpr (requires { wire_traits<T>::on_device; })
    return static_cast<bool>(wire_traits<T>::on_device);
  else
    return false;
}();

template <class T, class B>
concept WireTensor = requires(T& t, const T& ct, const std::vector<std::int64_t>& s, B& b) {
  { wire_traits<T>::shape(ct) } -> std::convertible_to<std::vector<std::int64_t>>;
  { wire_traits<T>::make(s, b) } -> std::same_as<T>;
  { wire_traits<T>::data(t) } -> std::convertible_to<void*>;
  { wire_traits<T>::data(ct) } -> std::convertible_to<const void*>;
  { wire_traits<T>::size(ct) } -> std::convertible_to<bytes>;
};

}  // namespace remat::dist
