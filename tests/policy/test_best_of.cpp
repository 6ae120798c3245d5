// The portfolio best_of (policy/best_of.hpp): the fastest valid plan among its members, what each
// member gave, ties to the first, optimal only when every member proved it, one time limit for
// all, and progress that names the member running.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include <remat/remat.hpp>

#include "support/random_chain.hpp"

using namespace remat;

namespace {

/// A chain on which the policies differ: recomputation pays below store-all's peak.
chain sample_chain() {
  remat::testing::chain_generator gen(42);
  return gen({.min_length = 6, .max_length = 6, .max_bytes = 1 << 20}, "sample");
}

/// A user's policy with only solve(): plans store-all, slowly (to test the time limit).
struct slow_store_all {
  static constexpr std::string_view name = "slow_store_all";
  seconds delay = 0.2;
  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    return store_all{}.solve(c, budget);
  }
};

/// A user's policy that always fails, with a given status.
struct refuses {
  static constexpr std::string_view name = "refuses";
  [[nodiscard]] result<schedule> solve(const chain&, bytes) const {
    return error{status::infeasible, "refuses: never plans", {}};
  }
};

}  // namespace

TEST_CASE("best_of: the fastest valid plan, what each member gave, ties to the first") {
  const chain c = sample_chain();
  const bytes peak = peak_of_store_all(c);
  const bytes budget = (rotor{}.minimum_budget(c) + peak) / 2;
  const best_of<periodic, revolve, rotor> all{};
  const auto r = all.solve_detailed(c, budget);
  REQUIRE_MESSAGE(r.ok(), r.message());
  const auto& d = r->details;
  REQUIRE(d.entries.size() == 3);
  CHECK(d.entries[0].policy == "periodic");
  CHECK(d.entries[2].policy == "rotor");
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& e : d.entries)
    if (e.code == status::ok) fastest = std::min(fastest, e.makespan);
  CHECK(r->program.predicted_time == fastest);
  CHECK(d.entries[d.chosen_index].policy == d.chosen);
  CHECK(d.entries[d.chosen_index].makespan == fastest);
  // The chosen member's own details come with it.
  CHECK(d.chosen_details.index() == d.chosen_index);
  // rotor contains periodic's and revolve's schedules: never slower than them.
  CHECK(r->program.predicted_time <= d.entries[0].makespan);
  // Valid on the portfolio's machine, within the budget.
  const auto rep = sim::simulate(c, r->program, {.budget = budget});
  CHECK(rep.valid);
  // Ties go to the first member: two store_alls above the peak.
  const auto tie = best_of<store_all, rotor>{}.solve_detailed(c, peak);
  REQUIRE(tie.ok());
  CHECK(tie->details.chosen == "store_all");
  CHECK(tie->optimal);  // store_all's makespan is the ideal time; rotor proves nothing better
}

TEST_CASE("best_of: optimal only when every member proved its answer") {
  const chain c = sample_chain();
  const bytes budget = (rotor{}.minimum_budget(c) + peak_of_store_all(c)) / 2;
  // Exact rotor is optimal; periodic proves nothing: the portfolio's optimum is not known.
  const auto mixed =
      best_of<rotor, periodic>{.members = {rotor{.slots = 0}, periodic{}}}.solve_detailed(c,
                                                                                          budget);
  REQUIRE(mixed.ok());
  CHECK_FALSE(mixed->optimal);
  const auto proven =
      best_of<rotor, rotor_floating>{.members = {rotor{.slots = 0}, rotor_floating{.slots = 0}}}
          .solve_detailed(c, budget);
  REQUIRE(proven.ok());
  CHECK(proven->optimal ==
        (proven->details.entries[0].optimal && proven->details.entries[1].optimal));
}

TEST_CASE("best_of: every member fails: the smallest minimum, or the first member's reason") {
  const chain c = sample_chain();
  const auto low = best_of<store_all, rotor>{}.solve(c, 1);
  REQUIRE(low.code() == status::budget_too_small);
  CHECK(low.err().minimum_budget == rotor{}.minimum_budget(c));
  CHECK(low.message().rfind("rotor", 0) == 0);  // the member whose minimum it is
  CHECK(best_of<store_all, rotor>{}.minimum_budget(c) == rotor{}.minimum_budget(c));
  const auto none = best_of<refuses, store_all>{}.solve(c, 1);
  CHECK(none.code() == status::infeasible);
  CHECK(none.message().find("never plans") != std::string::npos);
}

TEST_CASE("best_of: one time limit for the portfolio; the members not started say so") {
  const chain c = sample_chain();
  const best_of<slow_store_all, slow_store_all, rotor> all{.time_limit = 0.3};
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = all.solve_detailed(c, peak_of_store_all(c));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.ok());
  CHECK(took < 1.0);
  const auto& e = r->details.entries;
  REQUIRE(e.size() == 3);
  CHECK(e[0].code == status::ok);
  CHECK(e[2].code == status::time_limit);
  CHECK(e[2].message.find("not run") != std::string::npos);
  CHECK_FALSE(r->optimal);  // a member did not run
  // The machine is the portfolio's: every member that plans transfers plans for it.
  const best_of<rotor, pofo> off{.hw = machine::with_bandwidth(1e9)};
  static_assert(PlansTransfers<decltype(off)>);
  static_assert(!PlansTransfers<best_of<rotor, periodic>>);
  CHECK(machine_of(off) == machine::with_bandwidth(1e9));
  // By default, the first transfer planner's default: PCIe 3 x16.
  CHECK(machine_of(best_of<rotor, pofo>{}) == machine::with_bandwidth(pcie3_x16_bandwidth));
}

TEST_CASE("best_of: progress says which member runs") {
  const chain c = sample_chain();
  std::vector<std::string> seen;
  best_of<store_all, rotor> all;
  all.progress = [&](const portfolio_progress& p) {
    seen.emplace_back(p.policy);
    CHECK(p.count == 2);
  };
  REQUIRE(all.solve(c, peak_of_store_all(c)).ok());
  CHECK(seen == std::vector<std::string>{"store_all", "rotor"});
}
