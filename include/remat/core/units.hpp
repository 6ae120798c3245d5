#pragma once
// Units used throughout remat: memory is counted in bytes (signed, so that a negative size in a
// user's input can be detected and reported instead of wrapping around), time in seconds.

#include <cstdint>
#include <limits>

namespace remat {

using bytes = std::int64_t;
using seconds = double;

/// A budget large enough to mean "no limit".
inline constexpr bytes unlimited_bytes = std::numeric_limits<bytes>::max() / 4;

namespace literals {
constexpr bytes operator""_B(unsigned long long v) { return static_cast<bytes>(v); }
constexpr bytes operator""_KiB(unsigned long long v) { return static_cast<bytes>(v) << 10; }
constexpr bytes operator""_MiB(unsigned long long v) { return static_cast<bytes>(v) << 20; }
constexpr bytes operator""_GiB(unsigned long long v) { return static_cast<bytes>(v) << 30; }
}  // namespace literals

}  // namespace remat
