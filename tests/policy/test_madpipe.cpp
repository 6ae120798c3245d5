// MadPipe: Lemma 10's weights and Theorem 17's costs (1, 2, 1), where only a non-contiguous
// allocation does; on tiny random chains against the best contiguous allocation scheduled by
// 1F1B* (Alg. 7); every plan replayed by the simulator; the time limit; bad input.

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/madpipe.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/pipedream.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

using namespace remat;
using remat::testing::pipe_chain;
using remat::testing::pipe_layer;

namespace {

/// The plan replays valid, with the period and peaks the solution says, within M.
void mp_check_replay(const pipeline_problem& p, const pipeline_solution& s) {
  const auto r = sim::simulate_pipeline(p, s.plan);
  INFO((r.first_violation ? r.first_violation->message : ""));
  CHECK(r.valid);
  CHECK(r.period == s.plan.period);
  CHECK(s.report.period == s.plan.period);
  CHECK(s.report.processor_peaks == r.processor_peaks);
  for (bytes peak : r.processor_peaks) CHECK(peak <= p.memory);
}

/// The shortest period of 1F1B* (Alg. 7) over every contiguous allocation (all partitions into
/// at most P stages); +infinity if none fits.
seconds mp_best_contiguous(const pipeline_problem& p) {
  const int n = p.layers.length();
  seconds best = std::numeric_limits<seconds>::infinity();
  for (unsigned cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    std::vector<int> last;
    for (int l = 1; l < n; ++l)
      if (cuts & (1u << (l - 1))) last.push_back(l);
    last.push_back(n);
    if (static_cast<int>(last.size()) > p.processors) continue;
    auto plan = one_f_one_b_star_fit(p, contiguous_stages(last));
    if (plan) best = std::min(best, plan->period);
  }
  return best;
}

pipeline_problem mp_random(std::mt19937& rng) {
  remat::testing::pipe_random_knobs k;
  k.min_layers = 2;
  k.max_layers = 6;
  k.min_procs = 2;
  k.max_procs = 3;
  k.bandwidths = {std::numeric_limits<double>::infinity(), 2, 8};
  k.min_memory = 4;
  k.max_memory = 40;
  return remat::testing::random_pipeline_problem(rng, k);
}

}  // namespace

TEST_CASE("madpipe: Lemma 10's weights (1, 2, 1) in M = 2 fit as {1, 3}|{2}") {
  const pipeline_problem p = remat::testing::weights_one_two_one();
  CHECK(pipedream{}.solve(p).code() == status::budget_too_small);
  auto got = madpipe<>{}.solve(p);
  REQUIRE_MESSAGE(got.ok(), got.message());
  mp_check_replay(p, *got);
  const auto& st = got->plan.stages;
  REQUIRE(st.size() == 3);
  CHECK(st[0].processor == st[2].processor);
  CHECK(st[1].processor != st[0].processor);
  CHECK(got->plan.period == doctest::Approx(2));
  CHECK(got->scheduler == "modulo");
}

TEST_CASE("madpipe: Theorem 17's costs (1, 2, 1) reach period 2 where contiguous needs 3") {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 1, 0}, {1, 1, 1, 0}, {0.5, 0.5, 1, 0}}, 1);
  p.processors = 2;
  CHECK(mp_best_contiguous(p) == doctest::Approx(3));
  auto got = madpipe<>{}.solve(p);
  REQUIRE_MESSAGE(got.ok(), got.message());
  mp_check_replay(p, *got);
  CHECK(got->plan.period == doctest::Approx(2));
  CHECK(got->predicted_period == doctest::Approx(2));
  CHECK(got->plan.stages.size() == 3);
}

TEST_CASE("madpipe: on tiny chains, against the best contiguous allocation with 1F1B*") {
  std::mt19937 rng(99);
  int better = 0, worse = 0, same = 0, only_madpipe = 0, only_contiguous = 0;
  double worst_ratio = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const pipeline_problem p = mp_random(rng);
    const seconds contiguous = mp_best_contiguous(p);
    auto got = madpipe<>{}.solve(p);
    INFO("trial " << trial << ": " << got.message());
    if (!got) {
      CHECK(got.code() == status::budget_too_small);
      CHECK(got.err().minimum_budget);
      if (contiguous < std::numeric_limits<seconds>::infinity()) ++only_contiguous;
      continue;
    }
    mp_check_replay(p, *got);
    if (contiguous == std::numeric_limits<seconds>::infinity()) {
      ++only_madpipe;
      continue;
    }
    const double ratio = got->plan.period / contiguous;
    worst_ratio = std::max(worst_ratio, ratio);
    if (ratio < 1 - 1e-9)
      ++better;
    else if (ratio > 1 + 1e-9)
      ++worse;
    else
      ++same;
  }
  // The worst ratio measured on these 150 chains is 1.14 (2 worse, 13 better): the DP does
  // not see that two boundaries of the special processor with one normal processor share a
  // link, and the modulo scheduler is greedy; 1.25 leaves room for a change of the grids.
  CHECK(worst_ratio <= 1.25);
  CHECK(better >= 5);
  MESSAGE("madpipe vs best contiguous + 1F1B*: " << better << " better, " << same << " equal, "
                                                 << worse << " worse (worst ratio " << worst_ratio
                                                 << "), " << only_madpipe << " only madpipe, "
                                                 << only_contiguous << " only contiguous");
}

TEST_CASE("madpipe: the time limit is honoured") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> t(0.5, 2);
  std::uniform_int_distribution<int> size(10, 100);
  std::vector<pipe_layer> ls;
  bytes total = 0;
  for (int l = 0; l < 100; ++l) {
    ls.push_back({t(rng), 2 * t(rng), size(rng), size(rng)});
    total += 3 * ls.back().w + ls.back().a;
  }
  pipeline_problem p;
  p.layers = pipe_chain(ls, 10);
  p.processors = 8;
  p.bandwidth = 1000;
  p.memory = total / 5;  // tight: the DP looks at many states
  madpipe<> mp;
  mp.time_limit = 1e-6;  // past at the first look at the clock, after 1024 states
  auto none = mp.solve(p);
  REQUIRE_FALSE(none.ok());
  CHECK(none.code() == status::time_limit);
  CHECK(none.message().find("time_limit") != std::string::npos);
  mp.time_limit = 0.05;
  const auto start = std::chrono::steady_clock::now();
  auto got = mp.solve(p);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(took < 2.0);  // the DP stops at the clock; the schedule of what it found follows
  if (got) {
    mp_check_replay(p, *got);
  } else {
    CHECK(got.code() == status::time_limit);
  }
}

TEST_CASE("madpipe: the progress callback sees every DP run") {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 1}, {1, 2, 1, 1}, {2, 1, 1, 1}, {1, 1, 1, 1}}, 1);
  p.processors = 3;
  madpipe<> mp;
  mp.iterations = 6;
  mp.worst_case_pass = false;
  std::vector<madpipe_progress> seen;
  mp.progress = [&](const madpipe_progress& g) { seen.push_back(g); };
  auto got = mp.solve(p);
  REQUIRE(got.ok());
  mp_check_replay(p, *got);
  REQUIRE(seen.size() == 6);
  CHECK(got->dp_runs >= 6);  // a run may take several caps
  for (std::size_t i = 1; i < seen.size(); ++i) {
    CHECK(seen[i].iteration == seen[i - 1].iteration + 1);
    CHECK(seen[i].best <= seen[i - 1].best);  // min over the runs of max(T, T-hat)
    CHECK(seen[i].elapsed >= seen[i - 1].elapsed);
  }
  // The worst-case pass runs Alg. 8 again, numbered on.
  seen.clear();
  mp.worst_case_pass = true;
  auto both = mp.solve(p);
  REQUIRE(both.ok());
  mp_check_replay(p, *both);
  REQUIRE(seen.size() == 12);
  CHECK(seen[6].iteration == 8);
  CHECK(both->plan.period <= got->plan.period + 1e-9);  // one more pass only adds candidates
}

TEST_CASE("madpipe: bad input") {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 1}, {1, 1, 1, 1}});
  p.processors = 3;
  CHECK(madpipe<>{}.solve(p).code() == status::invalid_problem);
  p.processors = 2;
  p.bandwidth = 0;
  auto bw = madpipe<>{}.solve(p);
  CHECK(bw.code() == status::invalid_problem);
  CHECK(bw.message().find("bandwidth") != std::string::npos);
  p.bandwidth = 1;
  madpipe<> coarse;
  coarse.delay_steps = 1;
  auto grid = coarse.solve(p);
  CHECK(grid.code() == status::invalid_problem);
  CHECK(grid.message().find("delay_steps") != std::string::npos);
  // Memory too small: the error gives a memory with which it works.
  p.memory = 2;
  auto small = madpipe<>{}.solve(p);
  REQUIRE(small.code() == status::budget_too_small);
  REQUIRE(small.err().minimum_budget);
  p.memory = *small.err().minimum_budget;
  auto enough = madpipe<>{}.solve(p);
  REQUIRE_MESSAGE(enough.ok(), enough.message());
  mp_check_replay(p, *enough);
}
