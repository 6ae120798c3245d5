// The policy catalogue (policy/catalogue.hpp, policy/graph_catalogue.hpp): every listed policy has
// the whole surface, the lists merge without repeats, and the README's policy table is the
// catalogue.

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <remat/milp/model.hpp>
#include <remat/policy/graph_catalogue.hpp>
#include <remat/remat.hpp>

using namespace remat;

TEST_CASE("catalogue: every policy has the whole surface, and a name of its own") {
  std::set<std::string_view> names;
  for_each_policy<all_policies<milp::unavailable>>([&]<class P>(std::type_identity<P>) {
    INFO(P::name);
    CHECK(names.insert(P::name).second);
    CHECK_FALSE(P::summary.empty());
    CHECK(P::summary.size() <= 96);  // one line of --help and of the README's table
    static_assert(std::copyable<P>);
    static_assert(DetailedPolicy<P, chain> || DetailedPolicy<P, graph>);
  });
  // checkmate, rockmate, hiremate, offmate, dtr
  CHECK(names.size() == chain_policies::size + 5);
  // The graph list's store_all is the chain list's: merged once.
  CHECK(std::count(all_policies<milp::unavailable>::names.begin(),
                   all_policies<milp::unavailable>::names.end(), "store_all") == 1);
  // offmate's budget is the whole GPU's, hiremate takes minutes where rockmate takes seconds,
  // dtr is the runtime's evictions (not monotone in the budget): they stay out of the graph
  // portfolio.
  static_assert(std::is_same_v<graph_policies<milp::unavailable>::portfolio,
                               best_of<store_all, checkmate<milp::unavailable>,
                                       rockmate<checkmate<milp::unavailable>>>>);
  static_assert(has_policy<chain_policies>("rotor"));
  static_assert(!has_policy<chain_policies>("checkmate"));
  int found = 0;
  CHECK(with_policy<chain_policies>("pofo", [&]<class P>(std::type_identity<P>) {
    CHECK(P::name == "pofo");
    ++found;
  }));
  CHECK_FALSE(with_policy<chain_policies>("nope", [&](auto) { ++found; }));
  CHECK(found == 1);
}

TEST_CASE("catalogue: the README's policy table is the catalogue") {
  std::ifstream in(std::string(REMAT_SOURCE_DIR) + "/README.md");
  REQUIRE(in);
  // The table after "## Policies": | `name` | summary | ...
  std::vector<std::pair<std::string, std::string>> rows;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Policies";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    const auto tick = line.find('`', 3);
    const auto bar = line.find('|', tick);
    const auto next = line.find('|', bar + 1);
    REQUIRE(tick != std::string::npos);
    REQUIRE(next != std::string::npos);
    std::string summary = line.substr(bar + 1, next - bar - 1);
    summary = summary.substr(summary.find_first_not_of(' '));
    summary = summary.substr(0, summary.find_last_not_of(' ') + 1);
    rows.emplace_back(line.substr(3, tick - 3), summary);
  }
  std::vector<std::pair<std::string, std::string>> want;
  for_each_policy<all_policies<milp::unavailable>>([&]<class P>(std::type_identity<P>) {
    want.emplace_back(std::string(P::name), std::string(P::summary));
  });
  want.emplace_back("best_of", std::string(best_of<store_all>::summary));
  CHECK(rows == want);
}
