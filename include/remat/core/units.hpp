#pragma once
// Units used throughout remat: memory is counted in bytes (signed, so that a negative size in a
// user's input can be detected and reported instead of wrapping around), time in seconds.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace remat {

using bytes = std::int64_t;
using seconds = double;

/// A budget large enough to mean "no limit".
inline constexpr bytes unlimited_bytes = std::numeric_limits<bytes>::max() / 4;

namespace detail {
/// An int index (a stage, a node, a slot) as a position in a vector: the one such cast.
constexpr std::size_t ix(int i) { return static_cast<std::size_t>(i); }

/// b in the largest binary unit that keeps it at least 1: {value, unit}, e.g. {117.7, "MiB"}.
inline std::pair<double, const char*> binary_size(bytes b) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return {v, units[u]};
}
}  // namespace detail

/// "117.7 MiB" (one decimal) from 1 KiB on, "512 bytes" below.
inline std::string format_size(bytes b) {
  if (std::abs(b) < 1024) return std::to_string(b) + " bytes";
  const auto [v, unit] = detail::binary_size(b);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, unit);
  return buf;
}

/// "123456789 bytes (117.7 MiB)": the exact count, and a readable size from 1 KiB on.
inline std::string format_bytes(bytes b) {
  std::string s = std::to_string(b) + " bytes";
  if (std::abs(b) >= 1024) s += " (" + format_size(b) + ")";
  return s;
}

/// "0.0272 s": four significant digits.
inline std::string format_seconds(seconds t) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g s", t);
  return buf;
}

/// The largest time remat accepts, for one op and for a whole problem (the sum of every forward
/// and backward time: the ideal time): 1e15 s, about 30 million years. Validation rejects more
/// with status::invalid_problem, naming the stage or node and the field. Why a bound, and why
/// this one:
///  * every sum the planners and the simulator form must stay finite: two stages of 1e308 s
///    each used to plan "ok" with an infinite makespan. A schedule recomputes each op at most
///    N times, so its makespan stays below N * 1e15 s, far from overflow;
///  * MILP solvers must take the objective: CBC aborts the process on a coefficient of 1e25 or
///    more (an assertion in ClpSimplex), lp_solve reads 1e30 as infinity, and both lose
///    precision long before that;
///  * at 1e15 a double still resolves 0.125 s, so sums of real op times (micro- to
///    milliseconds) next to it keep their meaning; real steps take well under a day.
/// So the bound rejects only corrupt or adversarial input.
inline constexpr seconds max_time = 1e15;

namespace detail {
/// A time in a message: "1e+308", "0.25", "nan".
inline std::string time_text(seconds v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// Checks one time field of a problem; the message starts with `who` (the stage or node).
inline std::optional<std::string> time_field_error(seconds v, const std::string& who,
                                                   std::string_view field) {
  if (!std::isfinite(v) || v < 0)
    return who + ": " + std::string(field) + " is " + time_text(v) +
           "; times must be finite and >= 0 (seconds)";
  if (v >= max_time)
    return who + ": " + std::string(field) + " is " + time_text(v) +
           " s, not below remat's limit of 1e+15 s (about 30 million years; remat::max_time); "
           "times are seconds per op, and no planner or solver can sum times this large";
  return std::nullopt;
}

/// Adds a time (already checked by time_field_error) to a problem's running total; the message
/// names the field that takes the total to max_time.
inline std::optional<std::string> time_total_error(seconds& total, seconds v,
                                                   const std::string& who, std::string_view field,
                                                   std::string_view problem) {
  total += v;
  if (total < max_time) return std::nullopt;
  return who + ": " + std::string(field) + " " + time_text(v) + " s brings " +
         std::string(problem) + "'s total time (every forward and backward once) to " +
         time_text(total) +
         " s, not below remat's limit of 1e+15 s (remat::max_time); times must sum to less";
}
}  // namespace detail

namespace literals {
constexpr bytes operator""_B(unsigned long long v) { return static_cast<bytes>(v); }
constexpr bytes operator""_KiB(unsigned long long v) { return static_cast<bytes>(v) << 10; }
constexpr bytes operator""_MiB(unsigned long long v) { return static_cast<bytes>(v) << 20; }
constexpr bytes operator""_GiB(unsigned long long v) { return static_cast<bytes>(v) << 30; }
}  // namespace literals

}  // namespace remat
