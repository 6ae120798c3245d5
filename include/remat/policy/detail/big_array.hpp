#pragma once
// big_array<T>: a fixed-size array for the DPs' tables (up to gigabytes). From 32 MiB on it is
// allocated on 2 MiB boundaries and, on Linux, advised to use transparent huge pages: such a
// table is a fresh mapping each time (glibc maps allocations past 32 MiB on their own), faulted
// in 4 KiB at a time otherwise (rotor's refinement near a chain's minimum spent more time in
// the kernel than in its fills), and a fill's reads across far-apart rows miss the TLB. Smaller
// arrays come from the ordinary heap, which reuses them from solve to solve (with the advice a
// 100-stage rotor solve was 5-10 % slower). The advice is a hint: where the kernel ignores it
// (THP "never") the array is an ordinary one.
// Elements are default-initialised: scalars are left unset (every DP writes a cell before it
// reads it, and a table of gigabytes costs nothing before the time limit is first checked).

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace remat::detail {

template <class T>
class big_array {
  static_assert(std::is_trivially_destructible_v<T>, "big_array holds plain cells");

 public:
  big_array() = default;
  explicit big_array(std::size_t n) { reset(n); }

  /// n default-initialised elements in place of the old ones.
  void reset(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    const std::size_t align = bytes >= advised ? huge_page : alignof(std::max_align_t);
    const std::size_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
    p_.reset();
    p_ = std::unique_ptr<T, release>(
        static_cast<T*>(::operator new (rounded, std::align_val_t{align})), release{align});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= advised) ::madvise(p_.get(), rounded, MADV_HUGEPAGE);
#endif
    std::uninitialized_default_construct_n(p_.get(), n);
    size_ = n;
  }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] T* get() const { return p_.get(); }
  T& operator[](std::size_t i) const { return p_.get()[i]; }

 private:
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  static constexpr std::size_t advised = std::size_t{32} << 20;
  struct release {
    std::size_t align = alignof(std::max_align_t);
    void operator()(T* p) const { ::operator delete (p, std::align_val_t{align}); }
  };
  std::unique_ptr<T, release> p_;
  std::size_t size_ = 0;
};

}  // namespace remat::detail
