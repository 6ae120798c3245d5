#pragma once
// "Did you mean": the closest of a list of names to one a user gave (an unknown JSON field, a
// command-line option or a policy), for error messages that name what would work.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace remat {

namespace detail {
/// Levenshtein distance.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace detail

/// The name in `names` that `key` most likely misspells, for "did you mean" hints (unknown JSON
/// fields, remat-plan's unknown options and policies): the closest by edit distance when within
/// max(2, its length / 4) edits, or one that `key` (4 characters or more) begins
/// ("output" for "output_bytes"); nothing when none is that close.
inline std::optional<std::string_view> closest_name(std::string_view key,
                                                    std::span<const std::string_view> names) {
  const std::string_view* best = nullptr;
  std::size_t best_d = 0;
  for (const auto& n : names) {
    const std::size_t d = detail::edit_distance(key, n);
    if (!best || d < best_d) {
      best = &n;
      best_d = d;
    }
  }
  for (const auto& n : names)
    if (key.size() >= 4 && n.substr(0, key.size()) == key) {
      best = &n;
      best_d = 0;
    }
  if (best && best_d <= std::max<std::size_t>(2, best->size() / 4)) return *best;
  return std::nullopt;
}

}  // namespace remat
