#pragma once
// store_all: plain training. Every forward keeps everything its backward needs (F^all), then
// every backward runs once: F_1^all .. F_N^all, B_N .. B_1. The baseline the other policies
// are measured against; its peak is the most memory any sensible schedule needs.

#include <string_view>
#include <vector>

#include <remat/policy/detail/common.hpp>

namespace remat {

struct store_all {
  static constexpr std::string_view name = "store_all";

  [[nodiscard]] static std::vector<instruction> program(const chain& c) {
    std::vector<instruction> ops;
    const int n = c.length();
    ops.reserve(static_cast<std::size_t>(2 * n));
    for (int l = 1; l <= n; ++l) ops.push_back(instruction::forward(l, forward_mode::save_all));
    for (int l = n; l >= 1; --l) ops.push_back(instruction::backward(l));
    return ops;
  }

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    if (auto ok = detail::check_request(c, budget); !ok) return ok.err();
    auto ops = program(c);
    const bytes peak = detail::peak_of(c, ops);
    if (peak > budget) return detail::budget_too_small(name, c, budget, peak, "it keeps every activation");
    return detail::finish(name, c, budget, std::move(ops), c.ideal_time());
  }
};

}  // namespace remat
