#pragma once
// arena: an offset allocator over one region of `capacity` bytes. The CUDA backend
// carves its device pool from one cudaMalloc of the budget and hands out offsets from it; this
// is the bookkeeping, host-only (no CUDA header), so it is unit-tested without a GPU.
//
// Invariants (checked by tests/exec/test_arena.cpp):
//   - every block starts at a multiple of `alignment` and has a size that is one (requests are
//     rounded up); live blocks never overlap and lie within [0, capacity);
//   - free blocks are maximal: two free blocks never touch (a free coalesces with both sides);
//   - live + free blocks tile [0, capacity) exactly.
// allocate() is best fit (the smallest free block that holds the request, the lowest offset
// among equals); allocate_at() takes a given range, for a pre-computed placement.
// Fragmentation is measured as free bytes that the largest free block does not hold, and the
// worst moment (most such bytes) is kept.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <remat/core/units.hpp>

namespace remat::exec::detail {

/// Free memory at one moment: all of it, and the largest block. When a request fits in
/// `free_total` but not in `largest_free`, fragmentation is what refused it.
struct fragmentation_snapshot {
  bytes free_total = 0;
  bytes largest_free = 0;
  bytes in_use = 0;  ///< requested bytes live at that moment
  /// Free bytes outside the largest free block.
  [[nodiscard]] bytes stranded() const noexcept { return free_total - largest_free; }
  /// 1 - largest/free_total: 0 when the free memory is one block.
  [[nodiscard]] double ratio() const noexcept {
    return free_total == 0
               ? 0.0
               : 1.0 - static_cast<double>(largest_free) / static_cast<double>(free_total);
  }
};

class arena {
 public:
  /// A region of `capacity` bytes; every block aligned to `alignment` (a power of two).
  explicit arena(bytes capacity, bytes alignment = 256)
      : capacity_(capacity), alignment_(alignment) {
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
      throw std::invalid_argument("remat arena: the alignment must be a power of two, not " +
                                  std::to_string(alignment));
    if (capacity < 0) throw std::invalid_argument("remat arena: negative capacity");
    // Only whole aligned blocks are usable.
    usable_ = capacity / alignment * alignment;
    if (usable_ > 0) add_free(0, usable_);
  }

  /// A request rounded up to the alignment.
  [[nodiscard]] bytes round_up(bytes n) const noexcept {
    return (n + alignment_ - 1) / alignment_ * alignment_;
  }

  /// Best fit: the offset of a block of at least n bytes (n > 0), or nothing when no free block
  /// is large enough (the arena is unchanged then).
  [[nodiscard]] std::optional<bytes> allocate(bytes n) {
    check_request(n);
    const bytes r = round_up(n);
    const auto it = by_size_.lower_bound({r, 0});
    if (it == by_size_.end()) {
      note_failure(n);
      return std::nullopt;
    }
    const bytes off = it->second;
    take(off, r, n);
    return off;
  }

  /// Takes exactly [offset, offset + round_up(n)) when all of it is free and `offset` is aligned;
  /// returns false (and changes nothing) otherwise.
  [[nodiscard]] bool allocate_at(bytes offset, bytes n) {
    check_request(n);
    const bytes r = round_up(n);
    if (offset < 0 || offset % alignment_ != 0 || offset + r > usable_) return false;
    auto it = by_offset_.upper_bound(offset);
    if (it == by_offset_.begin()) return false;
    --it;  // the free block starting at or before offset
    if (it->first + it->second < offset + r) return false;
    take(offset, r, n);
    return true;
  }

  /// Returns the block at `offset` (as allocate/allocate_at gave it) to the free space,
  /// coalescing with its free neighbours. Throws std::invalid_argument for an unknown offset.
  void deallocate(bytes offset) {
    const auto it = live_.find(offset);
    if (it == live_.end())
      throw std::invalid_argument("remat arena: no live block at offset " + std::to_string(offset));
    const bytes end = offset + it->second.reserved;
    bytes start = offset, size = it->second.reserved;
    in_use_ -= it->second.requested;
    reserved_ -= it->second.reserved;
    live_.erase(it);
    // Merge with the free block that ends here, and the one that starts at the end.
    const auto next = by_offset_.lower_bound(offset);
    if (next != by_offset_.end() && next->first == end) {
      size += next->second;
      remove_free(next);
    }
    const auto after = by_offset_.lower_bound(offset);
    if (after != by_offset_.begin()) {
      const auto prev = std::prev(after);
      if (prev->first + prev->second == offset) {
        start = prev->first;
        size += prev->second;
        remove_free(prev);
      }
    }
    add_free(start, size);
    note_moment();
  }

  [[nodiscard]] bytes capacity() const noexcept { return capacity_; }
  [[nodiscard]] bytes alignment() const noexcept { return alignment_; }
  /// Requested bytes live now (what a plan counts).
  [[nodiscard]] bytes in_use() const noexcept { return in_use_; }
  /// Bytes of live blocks, alignment padding included.
  [[nodiscard]] bytes reserved() const noexcept { return reserved_; }
  [[nodiscard]] bytes free_total() const noexcept { return usable_ - reserved_; }
  [[nodiscard]] bytes largest_free() const noexcept {
    return by_size_.empty() ? 0 : std::prev(by_size_.end())->first;
  }
  [[nodiscard]] std::size_t live_blocks() const noexcept { return live_.size(); }
  [[nodiscard]] std::size_t free_blocks() const noexcept { return by_offset_.size(); }
  /// The most requested bytes live at once since the last reset.
  [[nodiscard]] bytes high_water() const noexcept { return high_water_; }
  /// The highest end offset of a live block since the last reset: the pool size this run needed.
  [[nodiscard]] bytes end_high_water() const noexcept { return end_high_water_; }
  /// The moment since the last reset when the most free bytes lay outside the largest block.
  [[nodiscard]] const fragmentation_snapshot& worst_fragmentation() const noexcept {
    return worst_;
  }
  /// The request refused for fragmentation (it fit in the free total, not in any block), if any.
  [[nodiscard]] const std::optional<fragmentation_snapshot>& fragmentation_failure()
      const noexcept {
    return frag_failure_;
  }
  [[nodiscard]] fragmentation_snapshot now() const noexcept {
    return {free_total(), largest_free(), in_use_};
  }

  /// Starts new measurements from the present state.
  void reset_high_water() noexcept {
    high_water_ = in_use_;
    end_high_water_ =
        live_.empty() ? 0 : std::prev(live_.end())->first + std::prev(live_.end())->second.reserved;
    worst_ = now();
    frag_failure_.reset();
  }

  /// Visits every live block as (offset, reserved bytes, requested bytes), by offset.
  template <class F>
  void for_each_live(F&& f) const {
    for (const auto& [off, b] : live_) f(off, b.reserved, b.requested);
  }
  /// Visits every free block as (offset, bytes), by offset.
  template <class F>
  void for_each_free(F&& f) const {
    for (const auto& [off, size] : by_offset_) f(off, size);
  }

 private:
  struct block {
    bytes reserved;
    bytes requested;
  };
  void check_request(bytes n) const {
    if (n <= 0)
      throw std::invalid_argument("remat arena: allocations must be positive, not " +
                                  std::to_string(n) + " bytes");
  }
  void add_free(bytes off, bytes size) {
    by_offset_.emplace(off, size);
    by_size_.emplace(size, off);
  }
  void remove_free(std::map<bytes, bytes>::iterator it) {
    by_size_.erase({it->second, it->first});
    by_offset_.erase(it);
  }
  /// Marks [off, off + r) live; it lies within one free block.
  void take(bytes off, bytes r, bytes n) {
    auto it = std::prev(by_offset_.upper_bound(off));
    const bytes fstart = it->first, fsize = it->second;
    remove_free(it);
    if (off > fstart) add_free(fstart, off - fstart);
    if (off + r < fstart + fsize) add_free(off + r, fstart + fsize - (off + r));
    live_.emplace(off, block{r, n});
    in_use_ += n;
    reserved_ += r;
    high_water_ = std::max(high_water_, in_use_);
    end_high_water_ = std::max(end_high_water_, off + r);
    note_moment();
  }
  void note_moment() {
    const auto s = now();
    if (s.stranded() > worst_.stranded()) worst_ = s;
  }
  void note_failure(bytes n) {
    if (n <= free_total()) frag_failure_ = now();
  }

  bytes capacity_, alignment_, usable_ = 0;
  std::map<bytes, bytes> by_offset_;           // free blocks: offset -> size
  std::set<std::pair<bytes, bytes>> by_size_;  // free blocks: (size, offset)
  std::map<bytes, block> live_;                // live blocks by offset
  bytes in_use_ = 0, reserved_ = 0, high_water_ = 0, end_high_water_ = 0;
  fragmentation_snapshot worst_{};
  std::optional<fragmentation_snapshot> frag_failure_;
};

}  // namespace remat::exec::detail
