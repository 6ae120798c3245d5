#pragma once
// What a policy is (DESIGN.md §4, docs/design.md): a copyable value type whose public members are
// its knobs, with a static `name` and a const solve(problem, budget) -> result<schedule>, for one
// or more problem kinds (chain, graph). Every policy returns the one program type
// (schedule/schedule.hpp), checked by the one finishing step (policy/detail/common.hpp) on the
// machine the policy plans for: machine_of(policy), its `hw` member (core/machine.hpp) when it
// has one, its planned_machine() (the offloading policies), else the default machine
// (instantaneous transfers).

#include <concepts>
#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <string_view>

namespace remat {

/// A policy that plans problems of kind Problem (chain or graph).
template <class P, class Problem>
concept Policy = std::copyable<P> && requires(const P& p, const Problem& x, bytes budget) {
  { p.solve(x, budget) } -> std::same_as<result<schedule>>;
  { P::name } -> std::convertible_to<std::string_view>;
};

/// A policy that plans heterogeneous chains.
template <class P>
concept ChainPolicy = Policy<P, chain>;

/// A policy that plans training graphs (a chain plans as a graph through build_graph(chain)).
template <class P>
concept GraphPolicy = Policy<P, graph>;

/// The machine a policy plans for: its `hw` member, its planned_machine() (the offloading
/// policies, whose bandwidths are knobs of their own), or the default machine.
template <class P>
constexpr machine machine_of(const P& p) {
  if constexpr (requires {
                  { p.hw } -> std::convertible_to<machine>;
                })
    return p.hw;
  else if constexpr (requires {
                       { p.planned_machine() } -> std::convertible_to<machine>;
                     })
    return p.planned_machine();
  else
    return machine{};
}

/// Use where a policy is a template parameter: stops a type that cannot plan Problem with a
/// message that names the requirement.
template <class P, class Problem>
inline constexpr bool require_policy = [] {
  static_assert(std::copyable<P>,
                "remat: a policy must be a copyable value type (its knobs are public members)");
  static_assert(
      requires {
        { P::name } -> std::convertible_to<std::string_view>;
      },
      "remat: a policy needs a static `name` (e.g. static constexpr std::string_view name = "
      "\"mine\";)");
  static_assert(
      requires(const P& p, const Problem& x, bytes b) {
        { p.solve(x, b) } -> std::same_as<result<schedule>>;
      },
      "remat: a policy needs `result<schedule> solve(const Problem&, bytes budget) const` for this "
      "problem kind "
      "(chain or graph)");
  return true;
}();

/// require_policy for chains.
template <class P>
inline constexpr bool require_chain_policy = require_policy<P, chain>;

/// require_policy for graphs.
template <class P>
inline constexpr bool require_graph_policy = require_policy<P, graph>;

}  // namespace remat
