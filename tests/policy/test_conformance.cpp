// The conformance suite every chain policy of the catalogue joins (policy/catalogue.hpp: the
// simulator is the referee). The policies come from remat::chain_policies; conformance<P> says
// how the suite runs one (its sizes, its knobs) and what it promises beyond the common checks, and
// a few extra configurations (a fixed k, fixed snapshots, rotor's default slots) are listed below.
//
// For each configuration, over seeded random chains and budgets spread from below the policy's
// minimum to above the store-all peak:
//   * a successful schedule simulates valid, within the budget, with the predicted peak and
//     makespan, and no faster than plain training (chain::ideal_time);
//   * a budget below the minimum gives budget_too_small with err().minimum_budget, every budget
//     from that minimum up succeeds, and every budget below it fails with the same minimum;
//   * the cost is non-increasing in the budget where the policy promises it;
//   * the exact DPs meet the no-recompute threshold (docs/chain-dps.md §8.3), rotor_floating is
//     never worse than rotor, and rotor is never worse than the baselines it contains.
// A policy added to the catalogue runs here with the default conformance<P> (the common checks);
// specialise conformance<P> for what it promises beyond them.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>
#include <support/random_chain.hpp>

#include <remat/remat.hpp>

#include "policy/chain_programs.hpp"

using namespace remat;
using remat::testing::chain_generator;
using remat::testing::chain_shape;

// Every catalogue policy has the whole surface (policy/concepts.hpp).
static_assert([]<class... Ps>(policy_list<Ps...>) {
  return ((ChainPolicy<Ps> && DetailedPolicy<Ps, chain>)&&...);
}(chain_policies{}));

namespace {

/// What the random cases covered; checked at the end so that the suite cannot quietly
/// degenerate (all budgets failing, no threshold case, ...).
struct tally {
  int solved = 0, too_small = 0, infeasible = 0, at_minimum = 0, recompute_free = 0,
      recomputing = 0;
};

bool conformance_close(double x, double y) {
  return x == y || std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y));
}
bool at_most(double x, double y) { return x <= y || conformance_close(x, y); }

/// The store-all peak, from the formula of docs/chain-dps.md §8.3 (not from the simulator): the
/// smallest budget at which no forward needs to be recomputed.
bytes no_recompute_threshold(const chain& c) {
  const int n = c.length();
  bytes best = 0, kept = c.a(0);  // a_0 + sum_{k<l} abar_k
  for (int l = 1; l <= n; ++l) {
    best = std::max(best, kept + c.delta(n) + c.abar(l) + c.of_all(l));
    kept += c.abar(l);
    best = std::max(best, kept + c.delta(l) + c.delta(l - 1) + c.ob(l));
  }
  return best;
}

bool forward_times_positive(const chain& c) {
  return std::all_of(c.stages.begin(), c.stages.end(),
                     [](const stage& s) { return s.forward_time > 0; });
}

// Sizes: the exact DPs (slots = 0) have one table column per byte of budget, so their chains
// have sizes from 0 to a few hundred bytes; the others get sizes from bytes to MiB.
constexpr chain_shape big_sizes{.min_length = 1, .max_length = 12, .max_bytes = bytes{4} << 20};

// ---- the policy configurations -----------------------------------------------------------------
// make(c): the policy to test on chain c. shape(i): the i-th chain's shape. monotone: the cost is
// non-increasing in the budget. exact: optimal with exact sizes (threshold property).
// store_all_fits: the store-all program is among those the policy considers, so its minimum is
// at most the store-all peak (not so for revolve, which runs every forward at least twice, nor
// for a fixed k). plans_from_minimum: every budget from the minimum it reports up plans (false:
// some such budget may answer infeasible, with a reason). dominates: the policies whose plans are
// in its search space, which it is never slower than (exact DPs only).

/// The default: a catalogue policy as it is, on chains of bytes to MiB, the common checks
/// (conformance<void>: the defaults the specialisations start from).
template <class P>
struct conformance {
  static constexpr std::string_view label = [] {
    if constexpr (std::is_void_v<P>)
      return std::string_view("?");
    else
      return P::name;
  }();
  static constexpr int chains = 100;
  static constexpr bool store_all_fits = true, plans_from_minimum = true;
  static constexpr bool monotone = false, exact = false;
  /// Its programs are lowerings of chain ops (print in the chain notation).
  static constexpr bool chain_shaped = true;
  static P make(const chain&) requires(!std::is_void_v<P>) { return {}; }
  static chain_shape shape(int) { return big_sizes; }
};

template <>
struct conformance<store_all> : conformance<void> {
  static constexpr std::string_view label = store_all::name;
  static constexpr int chains = 300;
  static constexpr bool monotone = true;
  static store_all make(const chain&) { return {}; }
};

template <>
struct conformance<periodic> : conformance<void> {
  static constexpr std::string_view label = "periodic (the best k)";
  static constexpr int chains = 300;
  static constexpr bool monotone = true;
  static periodic make(const chain&) { return {}; }
};

template <>
struct conformance<revolve> : conformance<void> {
  static constexpr std::string_view label = "revolve (the best snapshot count)";
  static constexpr int chains = 300;
  static constexpr bool store_all_fits = false, monotone = true;
  static revolve make(const chain&) { return {}; }
};

template <>
struct conformance<rotor> : conformance<void> {
  static constexpr std::string_view label = "rotor{.slots = 0}";
  static constexpr int chains = 400;
  static constexpr bool monotone = true, exact = true;
  static rotor make(const chain&) { return {.slots = 0}; }
  static chain_shape shape(int i) {
    return {.max_length = 12, .max_bytes = 1000, .positive_forward_times = i % 2 == 0};
  }
};

template <>
struct conformance<rotor_floating> : conformance<void> {
  static constexpr std::string_view label = "rotor_floating{.slots = 0}";
  static constexpr int chains = 300;
  static constexpr bool monotone = true, exact = true;
  static rotor_floating make(const chain&) { return {.slots = 0}; }
  static chain_shape shape(int i) {
    return {.max_length = 8, .max_bytes = 100, .positive_forward_times = i % 2 == 0};
  }
};

// The offloading policies: on small chains (their DPs and realizations simulate many programs),
// at a bandwidth where transfers matter (the chains' sizes are bytes to KiB, their times a few
// units).
constexpr chain_shape offload_sizes{.min_length = 1, .max_length = 8, .max_bytes = 4096};
constexpr machine offload_link = machine::with_bandwidth(2000);

template <>
struct conformance<pofo> : conformance<void> {
  static constexpr std::string_view label = pofo::name;
  static constexpr int chains = 60;
  static pofo make(const chain&) { return {.hw = offload_link}; }
  static chain_shape shape(int) { return offload_sizes; }
};

template <>
struct conformance<offload_dynprog> : conformance<void> {
  static constexpr std::string_view label = offload_dynprog::name;
  static constexpr int chains = 60;
  static offload_dynprog make(const chain&) { return {.hw = offload_link}; }
  static chain_shape shape(int) { return offload_sizes; }
};

template <>
struct conformance<offload_greedy> : conformance<void> {
  static constexpr std::string_view label = offload_greedy::name;
  static constexpr int chains = 60;
  static offload_greedy make(const chain&) { return {.hw = offload_link}; }
  static chain_shape shape(int) { return offload_sizes; }
};

template <>
struct conformance<offload_autocapper> : conformance<void> {
  static constexpr std::string_view label = offload_autocapper::name;
  static constexpr int chains = 60;
  // Its minimum is pofo's (what offloading every movable input allows); capping offloads only
  // what rotor's plans keep across their peak, so just above it no cap may give a plan, and it
  // answers infeasible, saying so.
  static constexpr bool plans_from_minimum = false;
  static offload_autocapper make(const chain&) { return {.hw = offload_link}; }
  static chain_shape shape(int) { return offload_sizes; }
};

template <>
struct conformance<mixed_mode<>> : conformance<void> {
  static constexpr std::string_view label = "mixed_mode{.slots = 40}";
  // Each solve replays DTR on every segment at every share, and its minimum is a bisection of
  // such solves: fewer chains.
  static constexpr int chains = 15;
  // Its dynamic segments are DTR's replay (a heuristic, which may strand an op above a budget
  // it ran at), and its shares whole slots of budget / 40 bytes.
  static constexpr bool plans_from_minimum = false;
  // DTR evicts an activation and keeps what else its backward needs, which the chain notation
  // cannot say.
  static constexpr bool chain_shaped = false;
  static mixed_mode<> make(const chain&) { return {.slots = 40}; }
};

// Configurations beyond the catalogue's defaults.

struct periodic_fixed_case : conformance<void> {
  static constexpr std::string_view label = "periodic{.segments = 3}";
  static constexpr int chains = 300;
  static constexpr bool store_all_fits = false;
  // With a fixed k the program does not depend on the budget: its cost is constant.
  static constexpr bool monotone = true;
  static periodic make(const chain& c) { return {.segments = std::min(3, c.length())}; }
};

struct revolve_fixed_case : conformance<void> {
  static constexpr std::string_view label = "revolve{.snapshots = 2}";
  static constexpr int chains = 300;
  static constexpr bool store_all_fits = false, monotone = true;
  static revolve make(const chain&) { return {.snapshots = 2}; }
};

struct rotor_default_case : conformance<void> {
  static constexpr std::string_view label = "rotor{} (500 slots)";
  static constexpr int chains = 400;
  // With S slots the sizes are rounded to budget/S bytes, a grid that moves with the budget: a
  // larger budget can round a size up to one more slot and lose a schedule, so the cost is not
  // monotone in the budget, nor optimal. Only validity, peak and the minimum are checked.
  static constexpr bytes small_limit = 600;
  static rotor make(const chain& c) {
    rotor p;
    // Near the minimum the solve refines S up to one slot per byte. On the MiB chains that
    // would be a table of gigabytes; a small cap makes it stop with status::infeasible instead
    // (checked below), while the small chains (sizes <= small_limit) refine all the way.
    if (largest_size(c) > small_limit) p.max_table_bytes = bytes{16} << 20;
    return p;
  }
  static chain_shape shape(int i) {
    if (i % 2 == 0) return {.max_length = 12, .max_bytes = small_limit / 4};
    return big_sizes;
  }
  static bytes largest_size(const chain& c) {
    bytes m = c.input_bytes;
    for (const auto& s : c.stages)
      m = std::max({m, s.saved_bytes, s.forward_overhead_bytes, s.backward_overhead_bytes,
                    s.forward_save_overhead_bytes.value_or(0)});
    return m;
  }
};

/// The cases of every catalogue policy.
template <class L>
struct cases_of;
template <class... Ps>
struct cases_of<policy_list<Ps...>> {
  using type = std::tuple<conformance<Ps>...>;
};

// ---- the checks --------------------------------------------------------------------------------

/// A successful schedule, checked by the simulator.
void check_schedule(const chain& c, bytes budget, const schedule& s, const machine& hw,
                    bool chain_shaped) {
  const sim::report r = sim::simulate(c, s, {.budget = budget, .record_timeline = false, .hw = hw});
  CHECK_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : std::string()));
  CHECK(r.peak <= budget);
  CHECK(s.predicted_peak == r.peak);
  CHECK_MESSAGE(conformance_close(s.predicted_time, r.makespan), "predicted ", s.predicted_time,
                " simulated ", r.makespan);
  CHECK(at_most(c.ideal_time(), r.makespan));
  // A chain policy's program is the lowering of chain ops: it prints in the chain notation.
  if (chain_shaped)
    CHECK_MESSAGE(to_chain_ops(c.length(), s).has_value(), "not chain-shaped: ", to_string(s));
}

/// Budgets from below the minimum to above the store-all peak, ascending.
std::vector<bytes> budgets_for(const chain& c, bytes minimum, bytes threshold) {
  const bytes lo = std::min(minimum, rotor{}.minimum_budget(c));
  const bytes hi = std::max(threshold, minimum);
  std::vector<bytes> b{0,           lo / 2,        lo - 1,    minimum - 1,   minimum,
                       minimum + 1, threshold - 1, threshold, threshold + 1, hi + hi / 3 + 1};
  for (int j = 1; j < 8; ++j) b.push_back(lo + (hi - lo) * j / 8);
  std::erase_if(b, [](bytes x) { return x < 0; });
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

/// Extra checks at one budget for the exact DPs, against the policies they dominate.
template <class Case>
void cross_check(const chain& c, bytes budget, const result<schedule>& r) {
  auto dominated_by_r = [&](const result<schedule>& other, const char* who) {
    if (!other.ok()) return;
    INFO("compared with ", std::string(who), " at budget ", budget);
    REQUIRE(r.ok());
    CHECK(at_most(r->predicted_time, other->predicted_time));
  };
  if constexpr (!Case::exact) {
    return;
  } else if constexpr (std::is_same_v<decltype(Case::make(c)), rotor_floating>) {
    dominated_by_r(rotor{.slots = 0}.solve(c, budget), "rotor{.slots = 0}");
  } else if constexpr (std::is_same_v<decltype(Case::make(c)), rotor>) {
    // store_all, periodic and revolve schedules are all memory-persistent: in rotor's space.
    dominated_by_r(store_all{}.solve(c, budget), "store_all");
    dominated_by_r(periodic{}.solve(c, budget), "periodic");
    dominated_by_r(revolve{}.solve(c, budget), "revolve");
  }
}

template <class Case>
void run_conformance(std::uint64_t seed) {
  tally n;
  chain_generator gen(seed);
  for (int i = 0; i < Case::chains; ++i) {
    const chain c = gen(Case::shape(i), "random-" + std::to_string(i));
    const std::string text = remat::testing::describe(c);
    INFO(std::string(Case::label), ", chain #", i, " (seed ", seed, "): ", text);
    const auto policy = Case::make(c);
    const bytes threshold = no_recompute_threshold(c);
    // The store-all peak is the threshold (the formula and the simulator agree).
    REQUIRE(threshold == sim::simulate(c, test::program(c, store_all::program(c))).peak);

    // The minimum, as the policy reports it.
    bytes minimum = 0;
    if (const auto r0 = policy.solve(c, 0); !r0.ok()) {
      REQUIRE(r0.code() == status::budget_too_small);
      REQUIRE(r0.err().minimum_budget.has_value());
      minimum = *r0.err().minimum_budget;
      CHECK(minimum > 0);
    }
    if constexpr (Case::store_all_fits) CHECK(minimum <= threshold);
    // The minimum it reports is the one minimum_budget() says, where it has one.
    if constexpr (HasMinimumBudget<decltype(policy), chain>)
      CHECK(policy.minimum_budget(c) == minimum);

    const bool exact_threshold = Case::exact && forward_times_positive(c);
    std::optional<double> previous;  // cost at the previous successful budget
    for (const bytes b : budgets_for(c, minimum, threshold)) {
      INFO("budget ", b, " (minimum ", minimum, ", store-all peak ", threshold, ")");
      const auto r = policy.solve(c, b);
      if (b < minimum) {
        CHECK(r.code() == status::budget_too_small);
        ++n.too_small;
        if (!r.ok() && r.code() == status::budget_too_small)
          CHECK(r.err().minimum_budget == minimum);
        continue;
      }
      if constexpr (!Case::plans_from_minimum) {
        // Allowed to find no plan above its minimum, with a reason.
        if (!r.ok() && r.code() == status::infeasible) {
          CHECK_FALSE(r.message().empty());
          ++n.infeasible;
          continue;
        }
      }
      if constexpr (std::is_same_v<Case, rotor_default_case>) {
        // Too close to the minimum for 500 slots, and the refinement would pass the table cap:
        // a clear infeasible. Allowed only where rounding (< 1 slot per stored tensor, at most
        // N + 5 of them at a peak) can explain it.
        if (!r.ok() && r.code() == status::infeasible) {
          const double margin = 500.0 / (500.0 - (c.length() + 5));
          CHECK(static_cast<double>(b) < static_cast<double>(minimum) * margin + 1);
          CHECK(Case::largest_size(c) > Case::small_limit);
          CHECK(r.message().find("max_table_bytes") != std::string::npos);
          ++n.infeasible;
          continue;
        }
      }
      REQUIRE_MESSAGE(r.ok(), r.message());
      check_schedule(c, b, *r, machine_of(policy), Case::chain_shaped);
      ++n.solved;
      if (b == minimum) ++n.at_minimum;
      if constexpr (Case::monotone) {
        if (previous) CHECK_MESSAGE(at_most(r->predicted_time, *previous), "not monotone");
        previous = r->predicted_time;
      }
      if (exact_threshold) ++(b >= threshold ? n.recompute_free : n.recomputing);
      if (exact_threshold)
        CHECK_MESSAGE(conformance_close(r->predicted_time, c.ideal_time()) == (b >= threshold),
                      "no-recompute threshold ", threshold, ", cost ", r->predicted_time,
                      ", ideal ", c.ideal_time());
      cross_check<Case>(c, b, r);
    }
  }
  INFO(std::string(Case::label), ": solved ", n.solved, ", too small ", n.too_small,
       ", infeasible ", n.infeasible, ", solved at the minimum ", n.at_minimum,
       ", threshold cases above/below ", n.recompute_free, "/", n.recomputing);
  CHECK(n.solved >= 3 * Case::chains);
  CHECK(n.too_small >= Case::chains);
  if constexpr (std::is_same_v<Case, rotor_default_case>) {
    // At least the small chains, through the refinement. (Whether the big ones solve at their
    // minimum or stop with the infeasible checked above is up to the policy.)
    CHECK(n.at_minimum >= Case::chains / 2);
  } else if constexpr (!Case::plans_from_minimum) {
    CHECK(n.at_minimum + n.infeasible >= Case::chains);
  } else {
    CHECK(n.at_minimum == Case::chains);
  }
  if constexpr (Case::exact) {
    CHECK(n.recompute_free >= Case::chains / 2);
    CHECK(n.recomputing >= Case::chains / 2);
  }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("conformance: chain policies against the simulator", Case,
                          conformance_suite) {
  run_conformance<Case>(0x5eed'c0ffee);
}
// Every policy of the catalogue, then the extra configurations.
TEST_CASE_TEMPLATE_APPLY(conformance_suite, cases_of<chain_policies>::type);
TEST_CASE_TEMPLATE_APPLY(conformance_suite,
                         std::tuple<periodic_fixed_case, revolve_fixed_case, rotor_default_case>);

TEST_CASE("conformance: rotor_floating needs no more memory than rotor") {
  chain_generator gen(7);
  for (int i = 0; i < 200; ++i) {
    const chain c = gen({.max_length = 7, .max_bytes = 1 << 20});
    INFO(remat::testing::describe(c));
    CHECK(rotor_floating{}.minimum_budget(c) <= rotor{}.minimum_budget(c));
  }
}
