#pragma once
// What a policy is (DESIGN.md §4): a copyable value type whose public members are its knobs,
// with a const solve(problem, budget) -> result<schedule>, and a name.

#include <concepts>
#include <string_view>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// A policy that plans heterogeneous chains.
template <class P>
concept ChainPolicy = std::copyable<P> && requires(const P& p, const chain& c, bytes budget) {
  { p.solve(c, budget) } -> std::same_as<result<schedule>>;
  { P::name } -> std::convertible_to<std::string_view>;
};

/// Use in composite policies: stops a non-chain policy with a message that names the requirement.
template <class P>
inline constexpr bool require_chain_policy = [] {
  static_assert(ChainPolicy<P>,
                "remat: this policy must satisfy remat::ChainPolicy (a copyable type with a static "
                "`name` and `result<schedule> solve(const chain&, bytes) const`)");
  return true;
}();

}  // namespace remat
