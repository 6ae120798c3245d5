#pragma once
// What the command-line tools (remat-plan, remat-zoo) share to read their arguments.

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace remat_cli {

/// The whole of s as an integer of type Int, or nothing (empty, trailing text, out of range).
template <class Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace remat_cli
