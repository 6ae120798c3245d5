#pragma once
// remat-plan's view of the policy catalogue (policy/catalogue.hpp, policy/graph_catalogue.hpp):
// the MILP solvers this build has, the policies by name (every policy of the catalogue, and
// "auto", a portfolio of them), which options each policy takes and the policy an option set
// configures. Nothing here names a policy: a policy added to the catalogue is a --policy choice,
// is dispatched, and takes the options whose knob it has.

#include <algorithm>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <remat/milp/model.hpp>
#include <remat/policy/catalogue.hpp>
#include <remat/policy/graph_catalogue.hpp>
#include <remat/policy/pipeline_catalogue.hpp>
#ifdef REMAT_HAS_CBC
#include <remat/milp/cbc.hpp>
#endif
#ifdef REMAT_HAS_LPSOLVE
#include <remat/milp/lpsolve.hpp>
#endif

#include "remat_plan.hpp"

namespace remat_plan {

/// The name of the portfolio: best_of over the catalogue's policies for the problem's kind.
inline constexpr std::string_view auto_policy = "auto";

/// The MILP backends this build has, in order of preference (the first is the default).
using solvers = decltype(std::tuple_cat(
#ifdef REMAT_HAS_CBC
    std::tuple<remat::milp::cbc>{},
#endif
#ifdef REMAT_HAS_LPSOLVE
    std::tuple<remat::milp::lpsolve>{},
#endif
    std::tuple<>{}));
inline constexpr bool has_solver = std::tuple_size_v<solvers> > 0;

/// The backend that names the MILP policies in the help: the default one, or none.
#if defined(REMAT_HAS_CBC)
using naming_milp = remat::milp::cbc;
#elif defined(REMAT_HAS_LPSOLVE)
using naming_milp = remat::milp::lpsolve;
#else
using naming_milp = remat::milp::unavailable;
#endif

/// Every policy, for backend M: the chain policies, then the graph policies.
template <class M>
using policies = remat::all_policies<M>;

/// The names of the solvers built, in order of preference.
inline std::vector<std::string_view> solvers_built() {
  std::vector<std::string_view> v;
  std::apply([&](auto... m) { (v.push_back(decltype(m)::name), ...); }, solvers{});
  return v;
}

/// f(std::type_identity<M>{}) for the backend called `name`; false when this build lacks it.
template <class F>
bool with_solver(std::string_view name, F&& f) {
  return std::apply(
      [&](auto... m) {
        return (
            (decltype(m)::name == name ? (f(std::type_identity<decltype(m)>{}), true) : false) ||
            ...);
      },
      solvers{});
}

namespace detail {
template <class T>
inline constexpr bool is_best_of = false;
template <class... Ps>
inline constexpr bool is_best_of<remat::best_of<Ps...>> = true;
}  // namespace detail

/// Whether P solves MILPs (checkmate, a policy whose inner policy does, a portfolio with one).
template <class P>
inline constexpr bool uses_milp = [] {
  if constexpr (requires(const P& p) {
                  requires remat::milp::MilpBackend<std::remove_cvref_t<decltype(p.backend)>>;
                })
    return true;
  else if constexpr (requires(const P& p) { p.inner; })
    return uses_milp<std::remove_cvref_t<decltype(std::declval<const P&>().inner)>>;
  else
    return false;
}();
template <class... Ps>
inline constexpr bool uses_milp<remat::best_of<Ps...>> = (uses_milp<Ps> || ...);

/// P chooses a heuristic at run time: a knob `heuristic` whose type names its choices
/// (`named(name)`, an optional of it; `names()`), as dtr's dtr_heuristic.
template <class P>
concept has_named_heuristic = requires(P& x, std::string_view n) {
  x.heuristic = *decltype(x.heuristic)::named(n);
  { decltype(x.heuristic)::names() } -> std::convertible_to<std::vector<std::string_view>>;
  { x.heuristic.name() } -> std::convertible_to<std::string_view>;
};

/// The heuristics P's --heuristic takes, the first its default (none: P has no such knob).
template <class P>
std::vector<std::string_view> heuristics_of() {
  if constexpr (has_named_heuristic<P>) {
    auto v = decltype(P{}.heuristic)::names();
    const std::string_view d = P{}.heuristic.name();
    std::stable_partition(v.begin(), v.end(), [&](std::string_view n) { return n == d; });
    return v;
  } else {
    return {};
  }
}

/// The options that apply to P (`names`, when given) and their values set on `p` (when given,
/// from `o`): one place per option, each guarded by the knob it sets.
template <class P>
void knobs(P* p, const options* o, std::vector<std::string_view>* names) {
  auto take = [&](std::string_view name, bool given, auto&& set) {
    if (names) names->push_back(name);
    if (p && o && given) set(*p, *o);
  };
  if constexpr (requires(P & x) { x.slots = std::int64_t{}; })
    take("--slots", o && o->slots, [](P& x, const options& y) { x.slots = *y.slots; });
  if constexpr (requires(P & x) { x.tolerance = 1.0; })
    take("--tolerance", o && o->tolerance,
         [](P& x, const options& y) { x.tolerance = *y.tolerance; });
  if constexpr (requires(P & x) { x.segments = std::optional<int>{}; })
    take("--segments", o && o->segments, [](P& x, const options& y) {
      x.segments = *y.segments > 0 ? std::optional(*y.segments) : std::nullopt;
    });
  if constexpr (requires(P & x) { x.snapshots = std::optional<int>{}; })
    take("--snapshots", o && o->snapshots, [](P& x, const options& y) {
      x.snapshots = *y.snapshots >= 0 ? std::optional(*y.snapshots) : std::nullopt;
    });
  if constexpr (requires(P & x) { x.time_limit = 1.0; })
    take("--time-limit", o && o->time_limit,
         [](P& x, const options& y) { x.time_limit = *y.time_limit; });
  if constexpr (uses_milp<P>) take("--solver", false, [](P&, const options&) {});
  if constexpr (requires(P & x) { x.relax = true; })
    take("--relax", o && o->relax, [](P& x, const options&) { x.relax = true; });
  else if constexpr (requires(P & x) { x.inner.relax = true; })
    take("--relax", o && o->relax, [](P& x, const options&) { x.inner.relax = true; });
  if constexpr (requires(P & x) { x.find_minimum = true; })
    take("--find-minimum", o && o->find_minimum,
         [](P& x, const options&) { x.find_minimum = true; });
  if constexpr (requires(P & x) { x.portfolio = false; })
    take("--no-portfolio", o && o->no_portfolio, [](P& x, const options&) { x.portfolio = false; });
  if constexpr (requires(P & x) {
                  x.peak_budgets = 1;
                  x.save_budgets = 1;
                })
    take("--grid", o && o->grid, [](P& x, const options& y) {
      x.peak_budgets = y.grid->first;
      x.save_budgets = y.grid->second;
    });
  if constexpr (requires(P & x) {
                  x.partitioner.limits.lower = 2;
                  x.partitioner.limits.top = 2;
                })
    take("--cluster-limits", o && o->cluster_limits, [](P& x, const options& y) {
      x.partitioner.limits.lower = y.cluster_limits->first;
      x.partitioner.limits.top = y.cluster_limits->second;
    });
  if constexpr (requires(P & x) { x.threads = 1; })
    take("--threads", o && o->threads, [](P& x, const options& y) { x.threads = *y.threads; });
  if constexpr (remat::PlansTransfers<P>) {
    const bool any = o && (o->bandwidth || o->bandwidth_d2h || o->bandwidth_h2d);
    auto set = [](P& x, const options& y) { x.hw = y.machine_from(x.hw); };
    take("--bandwidth", any, set);
    take("--bandwidth-d2h", false, set);
    take("--bandwidth-h2d", false, set);
  }
  if constexpr (requires { requires P::plans_host_memory; })
    take("--host-memory", o && o->host_memory,
         [](P& x, const options& y) { x.hw.host_memory = *y.host_memory; });
  if constexpr (requires(P & x) { x.search = remat::mixed_search::exact; })
    take("--search", o && o->search, [](P& x, const options& y) { x.search = *y.search; });
  if constexpr (requires(P & x) { x.dynamic.overhead = 1.0; })
    take("--dynamic-overhead", o && o->dynamic_overhead,
         [](P& x, const options& y) { x.dynamic.overhead = *y.dynamic_overhead; });
  if constexpr (has_named_heuristic<P>)
    take("--heuristic", o && o->heuristic, [](P& x, const options& y) {
      if (auto h = decltype(x.heuristic)::named(*y.heuristic)) x.heuristic = *h;
    });
  if constexpr (requires(P & x) { x.max_batch = 1; })
    take("--max-batch", o && o->max_batch,
         [](P& x, const options& y) { x.max_batch = *y.max_batch; });
}

/// The options that apply to P, in the order of --help.
template <class P>
std::vector<std::string_view> options_of() {
  std::vector<std::string_view> v;
  knobs<P>(nullptr, nullptr, &v);
  return v;
}

/// P with the options of `o` set on its knobs. A portfolio's pofo plans its DP alone (the
/// portfolio has rotor, DYNPROG and autocapper already).
template <class P>
P configured(const options& o) {
  P p{};
  knobs<P>(&p, &o, nullptr);
  if constexpr (detail::is_best_of<P>)
    std::apply(
        [](auto&... member) {
          auto one = [](auto& m) {
            if constexpr (requires { m.portfolio = false; }) m.portfolio = false;
          };
          (one(member), ...);
        },
        p.members);
  return p;
}

/// The portfolio for the problem's kind: the chain policies on a chain, the graph policies on a
/// graph.
template <class M>
using chain_portfolio = remat::chain_policies::portfolio;
template <class M>
using graph_portfolio = typename remat::graph_policies<M>::portfolio;

/// f(std::type_identity<P>{}) for the policy o.policy names (with the backend of o.solver for the
/// MILP policies), `auto` being the portfolio of the problem's kind; false when none is.
template <class F>
bool with_policy(const options& o, bool graph, F&& f) {
  auto pick = [&]<class M>(std::type_identity<M>) {
    if (o.policy == auto_policy) {
      if (graph)
        f(std::type_identity<graph_portfolio<M>>{});
      else
        f(std::type_identity<chain_portfolio<M>>{});
      return true;
    }
    return remat::with_policy<policies<M>>(o.policy, f);
  };
  if constexpr (has_solver) {
    bool done = false;
    with_solver(o.solver.empty() ? solvers_built().front() : o.solver,
                [&](auto m) { done = pick(m); });
    return done;
  } else {
    return pick(std::type_identity<remat::milp::unavailable>{});
  }
}

}  // namespace remat_plan
