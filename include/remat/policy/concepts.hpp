#pragma once
// What a policy is: a copyable value type whose public members are its knobs, with a static
// `name` and a const solve(problem, budget) -> result<schedule> for one or more problem kinds
// (chain, graph). The policies of the catalogue (policy/catalogue.hpp) have the whole surface:
//   name, summary                  static: its name and one line for the help and the README
//   solve(problem, budget)         the program, checked by the simulator
//   solve_detailed(problem, budget) -> result<solution<Details>>   (policy/solution.hpp)
//   minimum_budget(problem)        where it has one: the smallest budget it plans with
//   machine hw                     where it plans transfers: the machine it plans for
// docs/write-a-policy.md says how to write one.

#include <concepts>
#include <string_view>
#include <type_traits>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/policy/solution.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

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

namespace detail {
template <class T>
inline constexpr bool is_solution_result = false;
template <class D>
inline constexpr bool is_solution_result<result<solution<D>>> = true;
}  // namespace detail

/// A policy that also says how its plan was reached: solve_detailed(problem, budget) returns a
/// result<solution<Details>>.
template <class P, class Problem>
concept DetailedPolicy = Policy<P, Problem> && requires(const P& p, const Problem& x, bytes b) {
  requires detail::is_solution_result<decltype(p.solve_detailed(x, b))>;
};

/// The details type of P's solutions on Problem.
template <class P, class Problem>
requires DetailedPolicy<P, Problem>
using details_of = typename decltype(std::declval<const P&>().solve_detailed(
    std::declval<const Problem&>(), bytes{}))::value_type::details_type;

/// A policy that knows the smallest budget it plans Problem with.
template <class P, class Problem>
concept HasMinimumBudget = requires(const P& p, const Problem& x) {
  { p.minimum_budget(x) } -> std::convertible_to<bytes>;
};

/// A policy that plans transfers between device and host: its `hw` knob is the machine.
template <class P>
concept PlansTransfers = requires(const P& p) {
  { p.hw } -> std::convertible_to<machine>;
};

/// The machine a policy plans for: its `hw` knob, or the default machine (instantaneous
/// transfers, which a policy without that knob never plans).
template <class P>
constexpr machine machine_of(const P& p) {
  if constexpr (PlansTransfers<P>)
    return p.hw;
  else
    return machine{};
}

/// solve_detailed for any policy: its own, or its solve() as a solution<> with nothing known
/// besides the program (a user's policy that has only solve()).
template <class P, class Problem>
requires Policy<P, Problem>
auto solve_detailed(const P& p, const Problem& x, bytes budget) {
  if constexpr (DetailedPolicy<P, Problem>) {
    return p.solve_detailed(x, budget);
  } else {
    auto s = p.solve(x, budget);
    if (!s) return result<solution<>>(s.err());
    solution<> out;
    out.program = std::move(*s);
    return result<solution<>>(std::move(out));
  }
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
      "remat: a policy needs `result<schedule> solve(const Problem&, bytes budget) const` for "
      "this problem kind (chain or graph)");
  return true;
}();

/// require_policy for chains.
template <class P>
inline constexpr bool require_chain_policy = require_policy<P, chain>;

/// require_policy for graphs.
template <class P>
inline constexpr bool require_graph_policy = require_policy<P, graph>;

}  // namespace remat
