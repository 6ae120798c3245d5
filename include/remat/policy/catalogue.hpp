#pragma once
// The policy catalogue: the chain policies remat ships, declared once (the graph policies, which
// need a MILP backend, are in policy/graph_catalogue.hpp). remat::sweep, remat-plan's --policy
// choices, dispatch and help, the conformance suite and the check of the README's policy table
// all come from these lists. Adding a policy: its header, one entry here (or in the graph list),
// its own tests (docs/write-a-policy.md).

#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <remat/policy/best_of.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/mixed_mode.hpp>
#include <remat/policy/offload.hpp>
#include <remat/policy/periodic.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/rotor_floating.hpp>
#include <remat/policy/store_all.hpp>

namespace remat {

namespace detail {
/// Whether P joins the portfolio of its list: unless it says `static constexpr bool
/// in_portfolio = false` (a policy whose budget means something else, as offmate's, which
/// counts parameters, gradients and optimizer states too).
template <class P>
inline constexpr bool joins_portfolio = [] {
  if constexpr (requires { P::in_portfolio; })
    return static_cast<bool>(P::in_portfolio);
  else
    return true;
}();
template <class Acc, class... Ps>
struct portfolio_filter {
  using type = Acc;
};
template <class... As, class P, class... Ps>
struct portfolio_filter<best_of<As...>, P, Ps...> {
  using type = typename portfolio_filter<
      std::conditional_t<joins_portfolio<P>, best_of<As..., P>, best_of<As...>>, Ps...>::type;
};
}  // namespace detail

/// A list of policy types.
template <class... Ps>
struct policy_list {
  static constexpr std::size_t size = sizeof...(Ps);
  /// The policies' names, in order.
  static constexpr std::array<std::string_view, sizeof...(Ps)> names{Ps::name...};
  /// The same types as a std::tuple (for typed tests).
  using tuple = std::tuple<Ps...>;
  /// A portfolio of those that join one (best_of; detail::joins_portfolio).
  using portfolio = typename detail::portfolio_filter<best_of<>, Ps...>::type;
};

/// Every chain policy, in the order the sweep and remat-plan's help list them.
using chain_policies =
    policy_list<store_all, periodic, revolve, rotor, rotor_floating, pofo, offload_dynprog,
                offload_greedy, offload_autocapper, mixed_mode<>>;

namespace detail {
template <class... Ps, class F>
constexpr void for_each_in(policy_list<Ps...>, F& f) {
  (f(std::type_identity<Ps>{}), ...);
}
template <class... Ps, class F>
constexpr bool with_named(policy_list<Ps...>, std::string_view name, F& f) {
  return ((Ps::name == name ? (f(std::type_identity<Ps>{}), true) : false) || ...);
}
template <class A, class B>
struct merge_lists;
template <class... As>
struct merge_lists<policy_list<As...>, policy_list<>> {
  using type = policy_list<As...>;
};
template <class... As, class B, class... Bs>
struct merge_lists<policy_list<As...>, policy_list<B, Bs...>> {
  using type = typename merge_lists<
      std::conditional_t<(std::is_same_v<As, B> || ...), policy_list<As...>, policy_list<As..., B>>,
      policy_list<Bs...>>::type;
};
}  // namespace detail

/// f(std::type_identity<P>{}) for every policy P of List, in order.
template <class List, class F>
constexpr void for_each_policy(F&& f) {
  detail::for_each_in(List{}, f);
}

/// f(std::type_identity<P>{}) for the policy of List called `name`; false when none is.
template <class List, class F>
constexpr bool with_policy(std::string_view name, F&& f) {
  return detail::with_named(List{}, name, f);
}

/// Whether List has a policy called `name`.
template <class List>
constexpr bool has_policy(std::string_view name) {
  for (std::string_view n : List::names)
    if (n == name) return true;
  return false;
}

/// The policies of A, then those of B that are not in A.
template <class A, class B>
using merge_policies = typename detail::merge_lists<A, B>::type;

}  // namespace remat
