#pragma once
// What a policy is (DESIGN.md §4): a copyable value type whose public members are its knobs,
// with a const solve(problem, budget) -> result<schedule>, and a name.

#include <concepts>
#include <string_view>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/graph_schedule.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// A policy that plans heterogeneous chains.
template <class P>
concept ChainPolicy = std::copyable<P> && requires(const P& p, const chain& c, bytes budget) {
  { p.solve(c, budget) } -> std::same_as<result<schedule>>;
  { P::name } -> std::convertible_to<std::string_view>;
};

/// A policy that plans training graphs (a chain plans as a graph through build_graph(chain)).
template <class P>
concept GraphPolicy = std::copyable<P> && requires(const P& p, const graph& g, bytes budget) {
  { p.solve(g, budget) } -> std::same_as<result<graph_schedule>>;
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

/// Use in composite policies: stops a non-graph policy with a message that names the requirement.
template <class P>
inline constexpr bool require_graph_policy = [] {
  static_assert(GraphPolicy<P>,
                "remat: this policy must satisfy remat::GraphPolicy (a copyable type with a static "
                "`name` and `result<graph_schedule> solve(const graph&, bytes) const`)");
  return true;
}();

}  // namespace remat
