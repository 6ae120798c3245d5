// checkmate with CBC on examples/graphs/residual_net.json, whose sizes span 4 bytes (the loss
// output) to 100 MB: CBC's answer, cold and from the automatic warm start, and lp_solve's, equal
// CBC's answer without cut generators (memory in exact fractions of 2^-17 of the budget). With
// memory counted in 4-byte units (the gcd), CBC 2.10.8's cuts used to cut off the optimum at these
// budgets and prove a slower schedule "optimal" (see "Memory units" in
// include/remat/policy/checkmate.hpp).
#include <doctest/doctest.h>

#if defined(REMAT_HAS_CBC) && defined(REMAT_EXAMPLES_DIR)

#include <filesystem>

#include <remat/io/graph_json.hpp>
#include <remat/milp/cbc.hpp>
#if defined(REMAT_HAS_LPSOLVE)
#include <remat/milp/lpsolve.hpp>
#endif
#include <remat/policy/checkmate.hpp>
#include <remat/problem/builder.hpp>

using namespace remat;

TEST_CASE("checkmate (cbc) on residual_net.json: the same optimum with and without CBC's cuts") {
  const auto f =
      io::load_forward_dag(std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs/residual_net.json");
  REQUIRE_MESSAGE(f.ok(), f.message());
  const auto built = build_graph(*f);
  REQUIRE(built.ok());
  const graph& g = built.value();
  for (const bytes mib : {280, 340, 360, 380}) {
    const bytes budget = mib << 20;
    CAPTURE(mib);
    checkmate<milp::cbc> plain{};
    plain.time_limit = 60;
    checkmate<milp::cbc> no_cuts = plain;
    no_cuts.backend.parameters = {"-cuts", "off"};
    checkmate<milp::cbc> warm = plain;
    warm.auto_warm_start = true;
    const auto reference = no_cuts.solve_detailed(g, budget);
    REQUIRE_MESSAGE(reference.ok(), reference.message());
    REQUIRE(reference->optimal);
    for (const auto* cm : {&plain, &warm}) {
      const auto r = cm->solve_detailed(g, budget);
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(r->optimal);
      CHECK(r->program.predicted_time ==
            doctest::Approx(reference->program.predicted_time).epsilon(1e-12));
      CHECK(r->program.predicted_peak <= budget);
    }
#if defined(REMAT_HAS_LPSOLVE)
    // lp_solve's depth-first search does not close the gap at 360 MiB within 60 s (nor did it
    // before memory was counted in exact fractions): the other three budgets take it < 1 s.
    if (mib == 360) continue;
    checkmate<milp::lpsolve> lp{};
    lp.time_limit = 60;
    const auto r = lp.solve_detailed(g, budget);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(r->optimal);
    CHECK(r->program.predicted_time ==
          doctest::Approx(reference->program.predicted_time).epsilon(1e-12));
    CHECK(r->program.predicted_peak <= budget);
#endif
  }
}

#endif
