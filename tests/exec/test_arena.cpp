#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec/detail/arena.hpp>

using namespace remat;
using remat::exec::detail::arena;

namespace {

/// Checks every invariant of the arena against a model of its live blocks (offset -> {reserved,
/// requested}): in range, aligned, no overlap, exact accounting, free blocks maximal and
/// tiling the rest.
void check_invariants(const arena& a, const std::map<bytes, std::pair<bytes, bytes>>& model) {
  std::vector<std::pair<bytes, bytes>> blocks;  // (offset, size), live and free
  bytes in_use = 0, reserved = 0;
  std::size_t live = 0;
  a.for_each_live([&](bytes off, bytes r, bytes n) {
    ++live;
    const auto it = model.find(off);
    REQUIRE(it != model.end());
    CHECK(it->second.first == r);
    CHECK(it->second.second == n);
    CHECK(off % a.alignment() == 0);
    CHECK(r % a.alignment() == 0);
    CHECK(r >= n);
    CHECK(r - n < a.alignment());
    in_use += n;
    reserved += r;
    blocks.emplace_back(off, r);
  });
  CHECK(live == model.size());
  CHECK(a.in_use() == in_use);
  CHECK(a.reserved() == reserved);
  std::vector<std::pair<bytes, bytes>> frees;
  bytes largest = 0;
  a.for_each_free([&](bytes off, bytes size) {
    CHECK(size > 0);
    frees.emplace_back(off, size);
    largest = std::max(largest, size);
    blocks.emplace_back(off, size);
  });
  CHECK(a.largest_free() == largest);
  // Two free blocks never touch: they would have been coalesced.
  for (std::size_t i = 1; i < frees.size(); ++i)
    CHECK(frees[i - 1].first + frees[i - 1].second < frees[i].first);
  // Live and free blocks tile the usable region exactly.
  std::sort(blocks.begin(), blocks.end());
  bytes cursor = 0;
  for (const auto& [off, size] : blocks) {
    CHECK(off == cursor);
    cursor = off + size;
  }
  CHECK(cursor == a.capacity() / a.alignment() * a.alignment());
  CHECK(a.free_total() + a.reserved() == cursor);
}

}  // namespace

TEST_CASE("arena: requests are rounded to the alignment and accounted exactly") {
  arena a(4096, 256);
  const auto x = a.allocate(1);
  const auto y = a.allocate(300);
  REQUIRE(x);
  REQUIRE(y);
  CHECK(*x == 0);
  CHECK(*y == 256);
  CHECK(a.in_use() == 301);
  CHECK(a.reserved() == 256 + 512);
  CHECK(a.high_water() == 301);
  CHECK(a.end_high_water() == 768);
  a.deallocate(*x);
  CHECK(a.in_use() == 300);
  CHECK(a.high_water() == 301);
  a.reset_high_water();
  CHECK(a.high_water() == 300);
  CHECK(a.end_high_water() == 768);
  a.deallocate(*y);
  CHECK(a.in_use() == 0);
  CHECK(a.free_blocks() == 1);
  CHECK(a.largest_free() == 4096);
}

TEST_CASE("arena: best fit takes the smallest free block that holds the request") {
  arena a(10 * 256, 256);
  std::vector<bytes> off;
  for (int i = 0; i < 10; ++i) off.push_back(*a.allocate(256));
  // Free blocks of 1 (at 1), 3 (at 3..5) and 2 (at 7..8) units; the tail is taken.
  a.deallocate(off[1]);
  for (int i : {3, 4, 5}) a.deallocate(off[static_cast<std::size_t>(i)]);
  for (int i : {7, 8}) a.deallocate(off[static_cast<std::size_t>(i)]);
  CHECK(a.free_blocks() == 3);
  CHECK(*a.allocate(2 * 256) == 7 * 256);  // the 2-unit hole, not the first fitting 3-unit one
  CHECK(*a.allocate(256) == 256);          // the 1-unit hole
  CHECK(*a.allocate(2 * 256) == 3 * 256);  // only the 3-unit hole is left
  CHECK_FALSE(a.allocate(2 * 256));        // 1 unit free: refused, and the arena is unchanged
  CHECK(a.free_total() == 256);
}

TEST_CASE("arena: a freed block coalesces with both neighbours") {
  arena a(3 * 512, 512);
  const auto x = *a.allocate(512), y = *a.allocate(512), z = *a.allocate(512);
  a.deallocate(x);
  a.deallocate(z);
  CHECK(a.free_blocks() == 2);
  a.deallocate(y);
  CHECK(a.free_blocks() == 1);
  CHECK(a.largest_free() == 3 * 512);
  CHECK(*a.allocate(3 * 512) == 0);
}

TEST_CASE("arena: allocate_at takes exactly a free aligned range, or nothing") {
  arena a(2048, 256);
  CHECK(a.allocate_at(512, 300));         // [512, 1024)
  CHECK_FALSE(a.allocate_at(768, 10));    // inside a live block
  CHECK_FALSE(a.allocate_at(256, 300));   // overlaps the live block's start
  CHECK_FALSE(a.allocate_at(100, 10));    // not aligned
  CHECK_FALSE(a.allocate_at(1792, 512));  // past the end
  CHECK(a.allocate_at(0, 512));
  CHECK(a.allocate_at(1792, 256));
  CHECK(a.in_use() == 300 + 512 + 256);
  std::map<bytes, std::pair<bytes, bytes>> model{
      {0, {512, 512}}, {512, {512, 300}}, {1792, {256, 256}}};
  check_invariants(a, model);
}

TEST_CASE("arena: misuse is an error, not corruption") {
  CHECK_THROWS_AS(arena(1024, 100), std::invalid_argument);
  CHECK_THROWS_AS(arena(-1, 256), std::invalid_argument);
  arena a(1024, 256);
  CHECK_THROWS_AS((void)a.allocate(0), std::invalid_argument);
  CHECK_THROWS_AS((void)a.allocate(-5), std::invalid_argument);
  const auto x = *a.allocate(10);
  CHECK_THROWS_AS(a.deallocate(x + 256), std::invalid_argument);
  a.deallocate(x);
  CHECK_THROWS_AS(a.deallocate(x), std::invalid_argument);  // twice
  // A capacity that is not a multiple of the alignment: only whole blocks are usable.
  arena b(1000, 256);
  CHECK(b.free_total() == 768);
  CHECK_FALSE(b.allocate(769));
}

TEST_CASE("arena: fragmentation is measured at its worst moment, and named when it refuses") {
  arena a(8 * 256, 256);
  std::vector<bytes> off;
  for (int i = 0; i < 8; ++i) off.push_back(*a.allocate(256));
  for (int i = 0; i < 8; i += 2) a.deallocate(off[static_cast<std::size_t>(i)]);
  // Four separate 1-unit holes: 4 units free, 1 in the largest block, 3 stranded.
  CHECK(a.now().free_total == 4 * 256);
  CHECK(a.now().largest_free == 256);
  CHECK(a.worst_fragmentation().stranded() == 3 * 256);
  CHECK(a.worst_fragmentation().ratio() == doctest::Approx(0.75));
  CHECK_FALSE(a.fragmentation_failure());
  CHECK_FALSE(a.allocate(2 * 256));  // fits in the free total, not in a block
  REQUIRE(a.fragmentation_failure());
  CHECK(a.fragmentation_failure()->free_total == 4 * 256);
  for (int i = 1; i < 8; i += 2) a.deallocate(off[static_cast<std::size_t>(i)]);
  CHECK(a.now().stranded() == 0);
  CHECK(a.worst_fragmentation().stranded() == 3 * 256);  // the worst moment is kept
  a.reset_high_water();
  CHECK(a.worst_fragmentation().stranded() == 0);
  CHECK_FALSE(a.fragmentation_failure());
  CHECK_FALSE(a.allocate(9 * 256));  // more than everything: not a fragmentation failure
  CHECK_FALSE(a.fragmentation_failure());
}

TEST_CASE("arena: random allocations and frees keep every invariant; best fit is exact") {
  for (const bytes align : {bytes{1}, bytes{64}, bytes{256}}) {
    CAPTURE(align);
    std::mt19937 rng(static_cast<unsigned>(align) + 11);
    const bytes capacity = 64 * 1024 + 100;
    arena a(capacity, align);
    std::map<bytes, std::pair<bytes, bytes>> model;
    std::uniform_int_distribution<bytes> size(1, 6000);
    bytes high = 0;
    for (int step = 0; step < 3000; ++step) {
      const bool alloc = model.empty() || rng() % 100 < 55;
      if (alloc) {
        const bytes n = size(rng);
        const bytes r = a.round_up(n);
        // What best fit must choose: the smallest free block >= r, lowest offset among equals.
        std::optional<std::pair<bytes, bytes>> expect;  // (size, offset)
        a.for_each_free([&](bytes off, bytes s) {
          if (s >= r && (!expect || std::pair(s, off) < *expect)) expect = std::pair(s, off);
        });
        const auto got = a.allocate(n);
        REQUIRE(got.has_value() == expect.has_value());
        if (got) {
          CHECK(*got == expect->second);
          model[*got] = {r, n};
        }
      } else {
        auto it = model.begin();
        std::advance(it, static_cast<long>(rng() % model.size()));
        a.deallocate(it->first);
        model.erase(it);
      }
      bytes live = 0;
      for (const auto& [off, b] : model) live += b.second;
      high = std::max(high, live);
      CHECK(a.high_water() == high);
      if (step % 50 == 0 || model.size() < 3) check_invariants(a, model);
    }
    // Freeing everything leaves one block: coalescing is complete.
    while (!model.empty()) {
      a.deallocate(model.begin()->first);
      model.erase(model.begin());
    }
    check_invariants(a, model);
    CHECK(a.free_blocks() == 1);
    CHECK(a.in_use() == 0);
  }
}
