#pragma once
// best_of<Ps...>: a portfolio. It runs every member policy on the problem under one shared time
// limit, on one machine, and returns the fastest valid plan, saying which member made it and
// what each one gave. A user need not know which planner suits a budget: remat-plan's
// `--policy auto` is best_of over the catalogue (policy/catalogue.hpp), and pofo's portfolio
// is best_of over its DP, rotor, DYNPROG and autocapper.
//
// Ties (makespans within the simulator's rounding, 1e-9 relative) go to the earlier member. The
// solution is optimal when every member either proved its plan optimal or proved that it has none
// (budget_too_small, infeasible): then no program of any member's search space is faster.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/solution.hpp>

namespace remat {

/// What one member of a portfolio gave.
struct portfolio_entry {
  std::string policy;        ///< its name
  status code = status::ok;  ///< ok, or why it has no plan
  std::string message;       ///< the failure's message (empty when ok)
  seconds makespan = 0;      ///< its plan's makespan (simulated, on the portfolio's machine)
  bytes peak = 0;            ///< its plan's peak
  bool optimal = false;      ///< its plan is proven optimal in its own search space
  seconds solve_seconds = 0;
};

/// A portfolio's details: the member whose plan it is, every member's outcome, and the chosen
/// member's own details (a variant over the members' detail types, by member index).
template <class... Ds>
struct portfolio_details {
  std::string chosen;            ///< the name of the member whose plan this is
  std::size_t chosen_index = 0;  ///< its place among the members
  std::vector<portfolio_entry> entries;
  std::variant<Ds...> chosen_details;
};

/// Where a portfolio is: member `index` (0-based) of `count`, named `policy`, is starting.
struct portfolio_progress {
  std::size_t index = 0;
  std::size_t count = 0;
  std::string_view policy;
  seconds elapsed = 0;
};

namespace detail {
/// The machine knob of a portfolio whose members plan no transfer: nothing.
struct no_machine {};

/// A portfolio's default machine: that of its first member that plans transfers (all of remat's
/// default to PCIe 3 x16), else nothing.
template <class... Ps>
constexpr auto default_machine() {
  if constexpr ((PlansTransfers<Ps> || ...)) {
    machine m{};
    bool found = false;
    ((!found &&
      [&] {
        if constexpr (PlansTransfers<Ps>) {
          m = Ps{}.hw;
          found = true;
        }
        return true;
      }()),
     ...);
    return m;
  } else {
    return no_machine{};
  }
}
}  // namespace detail

template <class... Ps>
struct best_of {
  static_assert(sizeof...(Ps) >= 1, "remat::best_of<Ps...>: give at least one policy");
  static_assert((std::copyable<Ps> && ...),
                "remat::best_of<Ps...>: each member must be a policy (a copyable value type)");
  static constexpr std::string_view name = "best_of";
  static constexpr std::string_view summary =
      "a portfolio: runs several policies under one time limit, returns the fastest plan";
  static constexpr bool plans_transfers = (PlansTransfers<Ps> || ...);

  /// The members, each with its own knobs.
  std::tuple<Ps...> members{};
  /// Wall-clock limit of the whole portfolio: each member gets what is left (its own limit when
  /// that is smaller); a member not started before it passes is reported as time_limit.
  seconds time_limit = std::numeric_limits<double>::infinity();
  /// The machine every member that plans transfers plans for (set on each member's `hw`), so
  /// that their plans are compared on one machine: by default the first such member's default
  /// (PCIe 3 x16 for remat's); absent when no member plans transfers.
  [[no_unique_address]] std::conditional_t<plans_transfers, machine, detail::no_machine> hw =
      detail::default_machine<Ps...>();
  /// Called as each member starts.
  std::function<void(const portfolio_progress&)> progress = {};

  template <class Problem>
  requires(Policy<Ps, Problem>&&...)
      [[nodiscard]] result<schedule> solve(const Problem& x, bytes budget) const {
    auto r = solve_detailed(x, budget);
    if (!r) return r.err();
    return std::move(r->program);
  }

  template <class Problem>
  requires(Policy<Ps, Problem>&&...)
      [[nodiscard]] auto solve_detailed(const Problem& x, bytes budget) const {
    return run(x, budget, std::index_sequence_for<Ps...>{});
  }

  /// The smallest budget any member plans with (when every member knows its own).
  template <class Problem>
  requires(HasMinimumBudget<Ps, Problem>&&...) [[nodiscard]] bytes
      minimum_budget(const Problem& x) const {
    return std::apply(
        [&](const auto&... p) {
          bytes lo = std::numeric_limits<bytes>::max();
          ((lo = std::min<bytes>(lo, p.minimum_budget(x))), ...);
          return lo;
        },
        members);
  }

 private:
  template <class Problem>
  using details_t = portfolio_details<typename decltype(remat::solve_detailed(
      std::declval<const Ps&>(), std::declval<const Problem&>(),
      bytes{}))::value_type::details_type...>;

  /// Member p configured for this run: the portfolio's machine, and what is left of the time.
  template <class P>
  P configured(P p, seconds left) const {
    if constexpr (PlansTransfers<P> && plans_transfers) p.hw = hw;
    if constexpr (requires { p.time_limit = seconds{}; })
      if (std::isfinite(left)) p.time_limit = std::min<seconds>(p.time_limit, left);
    return p;
  }

  template <class Problem, std::size_t... I>
  result<solution<details_t<Problem>>> run(const Problem& x, bytes budget,
                                           std::index_sequence<I...>) const {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
    const bool limited = std::isfinite(time_limit) && time_limit > 0;
    solution<details_t<Problem>> out;
    std::optional<std::size_t> best;
    std::vector<error> failures;
    bool proven = true;  // every member proved its plan optimal, or that it has none
    auto one = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
      const auto& member = std::get<K>(members);
      using P = std::remove_cvref_t<decltype(member)>;
      portfolio_entry e;
      e.policy = std::string(P::name);
      const seconds left =
          limited ? time_limit - elapsed() : std::numeric_limits<double>::infinity();
      if (limited && left <= 0) {
        e.code = status::time_limit;
        e.message = "not run: the portfolio's time limit passed before it started";
        proven = false;
        failures.push_back({status::time_limit, std::string(P::name) + ": " + e.message, {}});
        out.details.entries.push_back(std::move(e));
        return;
      }
      if (progress) progress({K, sizeof...(Ps), P::name, elapsed()});
      const auto started = clock::now();
      auto r = remat::solve_detailed(configured(member, left), x, budget);
      e.solve_seconds = std::chrono::duration<double>(clock::now() - started).count();
      if (!r) {
        e.code = r.code();
        e.message = r.message();
        if (e.code != status::budget_too_small && e.code != status::infeasible) proven = false;
        failures.push_back(r.err());
        out.details.entries.push_back(std::move(e));
        return;
      }
      e.makespan = r->program.predicted_time;
      e.peak = r->program.predicted_peak;
      e.optimal = r->optimal;
      if (!r->optimal) proven = false;
      out.details.entries.push_back(std::move(e));
      // Faster by more than the simulator's rounding (finish()'s tolerance): equal makespans
      // summed in another order are a tie, which the earlier member keeps.
      const seconds t = r->program.predicted_time, incumbent = out.program.predicted_time;
      if (best && !(t < incumbent - 1e-9 * std::max(1.0, std::abs(incumbent)))) return;
      best = K;
      out.program = std::move(r->program);
      out.notes = std::move(r->notes);
      out.details.chosen = std::string(P::name);
      out.details.chosen_index = K;
      out.details.chosen_details.template emplace<K>(std::move(r->details));
    };
    (one(std::integral_constant<std::size_t, I>{}), ...);
    out.solve_seconds = elapsed();
    if (!best) {
      // Every member failed. When each one's budget is too small, the smallest minimum is the
      // portfolio's (that member's own message says so); otherwise the first member's reason.
      const error* pick = &failures.front();
      bool all_too_small = true;
      for (const error& f : failures) {
        if (f.code != status::budget_too_small || !f.minimum_budget)
          all_too_small = false;
        else if (pick->minimum_budget && *f.minimum_budget < *pick->minimum_budget)
          pick = &f;
      }
      return all_too_small ? *pick : failures.front();
    }
    out.optimal = proven;
    return out;
  }
};

}  // namespace remat
