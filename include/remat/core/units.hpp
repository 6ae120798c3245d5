#pragma once
// Units used throughout remat: memory is counted in bytes (signed, so that a negative size in a
// user's input can be detected and reported instead of wrapping around), time in seconds.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace remat {

using bytes = std::int64_t;
using seconds = double;

/// A budget large enough to mean "no limit".
inline constexpr bytes unlimited_bytes = std::numeric_limits<bytes>::max() / 4;

/// "123456789 bytes (117.7 MiB)": the exact count, and a readable size from 1 KiB on.
inline std::string format_bytes(bytes b) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  std::string s = std::to_string(b) + " bytes";
  if (u > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.1f %s)", v, units[u]);
    s += buf;
  }
  return s;
}

namespace literals {
constexpr bytes operator""_B(unsigned long long v) { return static_cast<bytes>(v); }
constexpr bytes operator""_KiB(unsigned long long v) { return static_cast<bytes>(v) << 10; }
constexpr bytes operator""_MiB(unsigned long long v) { return static_cast<bytes>(v) << 20; }
constexpr bytes operator""_GiB(unsigned long long v) { return static_cast<bytes>(v) << 30; }
}  // namespace literals

}  // namespace remat
