// PipeDream's partitioning DP against an exhaustive enumeration of the contiguous partitions
// with the same objective and memory check, its plans replayed by the simulator (whose peaks the
// stage model's memory matches), Lemma 10's
// weights (no contiguous partition fits M = 2; the minimum M in the error), bad input.

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/pipedream.hpp>
#include <remat/policy/pipeline/stage_model.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;
using remat::testing::pipe_chain;
using remat::testing::pipe_layer;

namespace {

/// The best max(U, C) over every partition of the layers into at most P contiguous stages, the
/// stage s of P' passing C W + (P' - s + 1) sum a_{l-1} + buffers <= M; +infinity if none. Written
/// from the chain's fields, not from the stage model.
seconds pd_exhaustive(const pipeline_problem& p) {
  const chain& c = p.layers;
  const int n = c.length();
  seconds best = std::numeric_limits<seconds>::infinity();
  for (unsigned cuts = 0; cuts < (1u << (n - 1)); ++cuts) {  // bit l - 1: a cut after layer l
    std::vector<int> last;
    for (int l = 1; l < n; ++l)
      if (cuts & (1u << (l - 1))) last.push_back(l);
    last.push_back(n);
    const int stages = static_cast<int>(last.size());
    if (stages > p.processors) continue;
    seconds period = 0;
    bool fits = true;
    for (int s = 0, first = 1; s < stages; first = last[static_cast<std::size_t>(s)] + 1, ++s) {
      const int j = last[static_cast<std::size_t>(s)];
      seconds u = 0;
      bytes w = 0, act = 0;
      for (int l = first; l <= j; ++l) {
        u += c.uf(l) + c.ub(l);
        w += c.w(l);
        act += c.a(l - 1);
      }
      bytes mem = p.copies * w + (stages - s) * act;
      if (first > 1) mem += c.a(first - 1) + c.delta(first - 1);
      if (j < n) {
        mem += c.a(j) + c.delta(j);
        period = std::max(period, static_cast<double>(c.a(j) + c.delta(j)) / p.bandwidth);
      }
      period = std::max(period, u);
      if (mem > p.memory) fits = false;
    }
    if (fits) best = std::min(best, period);
  }
  return best;
}

pipeline_problem pd_random(std::mt19937& rng) {
  remat::testing::pipe_random_knobs k;
  k.bandwidths = {std::numeric_limits<double>::infinity(), 1, 4};
  k.max_copies = 3;
  k.max_memory = 40;
  return remat::testing::random_pipeline_problem(rng, k);
}

}  // namespace

TEST_CASE("pipedream: the DP's period is the exhaustive best, and its plan replays within M") {
  std::mt19937 rng(2024);
  int solved = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const pipeline_problem p = pd_random(rng);
    const seconds want = pd_exhaustive(p);
    pipedream thesis;  // the thesis' model: every stage stores its activations
    thesis.recompute = false;
    auto got = thesis.solve(p);
    INFO("trial " << trial << ": " << got.message());
    if (want == std::numeric_limits<seconds>::infinity()) {
      REQUIRE_FALSE(got.ok());
      CHECK(got.code() == status::budget_too_small);
      REQUIRE(got.err().minimum_budget);
      // The minimum is exact: it has a partition, one byte less has none.
      pipeline_problem q = p;
      q.memory = *got.err().minimum_budget;
      CHECK(pd_exhaustive(q) < std::numeric_limits<seconds>::infinity());
      q.memory -= 1;
      CHECK(pd_exhaustive(q) == std::numeric_limits<seconds>::infinity());
      ++refused;
      continue;
    }
    REQUIRE(got.ok());
    ++solved;
    CHECK(got->predicted_period == doctest::Approx(want));
    CHECK(got->scheduler == "1F1B*");
    // The plan replays valid, its period the report's, no processor over M.
    const auto r = sim::simulate_pipeline(p, got->plan);
    CHECK(r.valid);
    CHECK(r.period == got->plan.period);
    CHECK(got->report.valid);
    for (bytes peak : r.processor_peaks) CHECK(peak <= p.memory);
    // The stage model counts a processor's memory as the simulator does: C W + NCA x its
    // activations + its buffers is the processor's peak.
    const detail::pipe_store_all_model model(p);
    const auto& st = got->plan.stages;
    for (std::size_t s = 0; s < st.size(); ++s) {
      const auto option = model.options(st[s].first, st[s].last)[0];
      CHECK(model.memory(option, st[s].first, st[s].last, r.nca[s], s > 0, s + 1 < st.size()) ==
            r.processor_peaks[static_cast<std::size_t>(st[s].processor)]);
    }
    // No 1-periodic plan is faster than the largest work of the partition (the DP's period when
    // transfers are free or fit in it).
    CHECK(got->plan.period >= got->predicted_period * (1 - 1e-9));
    CHECK(static_cast<int>(got->plan.stages.size()) <= p.processors);
    // PipeDream's own 1F1B on the same partition: stage s of S keeps S - s + 1 activations, it
    // fits M (the DP's check is its memory), and Alg. 7 is never slower (Thm 15).
    pipedream plain;
    plain.plain_one_f_one_b = true;
    auto one = plain.solve(p);
    REQUIRE_MESSAGE(one.ok(), one.message());
    CHECK(one->scheduler == "1F1B");
    CHECK(one->plan.stages == got->plan.stages);
    const auto r1 = sim::simulate_pipeline(p, one->plan);
    CHECK(r1.valid);
    const int S = static_cast<int>(st.size());
    for (int s = 1; s <= S; ++s) CHECK(r1.nca[static_cast<std::size_t>(s - 1)] == S - s + 1);
    CHECK(one->plan.period >= got->plan.period * (1 - 1e-9));
  }
  CHECK(solved > 100);
  CHECK(refused > 10);
}

TEST_CASE("pipedream: Lemma 10's weights (1, 2, 1) in M = 2 have no contiguous partition") {
  pipeline_problem p = remat::testing::weights_one_two_one();
  auto got = pipedream{}.solve(p);
  REQUIRE_FALSE(got.ok());
  CHECK(got.code() == status::budget_too_small);
  REQUIRE(got.err().minimum_budget);
  CHECK(*got.err().minimum_budget == 3);  // {1}|{2, 3} or {1, 2}|{3}: C W = 3
  CHECK(got.message().find("bisection over M") != std::string::npos);
  p.memory = 3;
  auto ok = pipedream{}.solve(p);
  REQUIRE_MESSAGE(ok.ok(), ok.message());
  CHECK(ok->report.valid);
  CHECK(ok->plan.period == doctest::Approx(3));  // costs (1, 2, 1): 3 whichever the cut
}

TEST_CASE("pipedream: balanced stages with free transfers reach the ideal period") {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, 1);
  p.processors = 4;
  auto got = pipedream{}.solve(p);
  REQUIRE(got.ok());
  CHECK(got->plan.stages.size() == 4);
  CHECK(got->plan.period == doctest::Approx(2));
  CHECK(got->report.nca == std::vector<int>{4, 3, 2, 1});  // 1F1B* with every work > T / 2
}

TEST_CASE("pipedream: bad input") {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 1}, {1, 1, 1, 1}});
  p.processors = 3;
  auto many = pipedream{}.solve(p);
  CHECK(many.code() == status::invalid_problem);
  CHECK(many.message().find("at most 2 processors") != std::string::npos);
  p.processors = 2;
  p.bandwidth = 0;
  auto bw = pipedream{}.solve(p);
  CHECK(bw.code() == status::invalid_problem);
  CHECK(bw.message().find("bandwidth") != std::string::npos);
}
