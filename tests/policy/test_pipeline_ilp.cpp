// The ILP of ch. 6 on a chain of stages (policy/pipeline/ilp.hpp): Thm 17's and Lemma 10's
// non-contiguous allocations; with unlimited memory, the period of an exhaustive search over the
// allocations (max of processor and link loads); under memory, never above the best contiguous
// allocation with 1F1B*; every plan replayed valid within M; errors; the time limit.
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <remat/milp/model.hpp>
#include <remat/policy/madpipe.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/pipeline/ilp.hpp>
#include <remat/sim/pipeline.hpp>

#include "support/pipeline_instances.hpp"

#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
#endif
#if defined(REMAT_HAS_LPSOLVE)
#include <remat/milp/lpsolve.hpp>
#endif

namespace {

using namespace remat;
using remat::testing::pipe_chain;
using remat::testing::pipe_layer;

std::vector<std::pair<int, int>> ilp_single_layer_stages(int n) {
  std::vector<std::pair<int, int>> out;
  for (int l = 1; l <= n; ++l) out.emplace_back(l, l);
  return out;
}

TEST_CASE("pipeline ILP: without a MILP backend, a clear error") {
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 0, 0}, {1, 1, 0, 0}});
  p.processors = 2;
  auto r = pipeline_ilp_schedule<milp::unavailable>(p, ilp_single_layer_stages(2));
  REQUIRE_FALSE(r);
  CHECK(r.code() == status::solver_error);
  CHECK(r.message().find("MILP backend") != std::string::npos);
}

}  // namespace

#if defined(REMAT_HAS_CBC)

namespace {

using ilp_cbc = milp::cbc;

/// Replays the plan and checks it: valid, the claimed period, memory within M.
void ilp_check_plan(const pipeline_problem& p, const pipeline_ilp_result& r) {
  const auto rep = sim::simulate_pipeline(p, r.plan);
  INFO((rep.first_violation ? rep.first_violation->message : std::string()));
  REQUIRE(rep.valid);
  CHECK(rep.period == r.plan.period);
  for (bytes peak : rep.processor_peaks) CHECK(peak <= p.memory);
  CHECK(r.bound <= r.plan.period);
  CHECK(r.gap >= 0);
}

/// A plan on one-layer stages from a plan on longer ones: each stage's F runs its layers' forwards
/// back to back, its B their backwards, on its processor, at the same times.
pipeline_plan ilp_split_into_layers(const pipeline_problem& p, const pipeline_plan& plan) {
  using k = pipeline_op_kind;
  pipeline_plan out;
  out.period = plan.period;
  for (const auto& st : plan.stages)
    for (int l = st.first; l <= st.last; ++l) out.stages.push_back({l, l, st.processor});
  auto add = [&](k kind, int stage, seconds start, int shift) {
    while (start >= plan.period) {
      start -= plan.period;  // a period later, on the same mini-batch
      --shift;
    }
    out.ops.push_back({kind, stage, start, shift});
  };
  for (const auto& op : plan.ops) {
    const pipeline_stage& st = plan.stages[static_cast<std::size_t>(op.stage - 1)];
    if (op.kind == k::forward) {
      seconds t = op.start;
      for (int l = st.first; l <= st.last; t += p.layers.uf(l), ++l)
        add(k::forward, l, t, op.shift);
    } else if (op.kind == k::backward) {
      seconds t = op.start;
      for (int l = st.last; l >= st.first; t += p.layers.ub(l), --l)
        add(k::backward, l, t, op.shift);
    } else {
      add(op.kind, st.last, op.start, op.shift);
    }
  }
  return out;
}

/// The same pattern with its time origin `by` seconds earlier: every op starts `by` later.
pipeline_plan ilp_rotate(pipeline_plan plan, seconds by) {
  for (auto& op : plan.ops) {
    op.start += by;
    for (; op.start >= plan.period; --op.shift) op.start -= plan.period;
  }
  return plan;
}

/// The processor of each stage (0-based, by first stage).
std::vector<int> ilp_allocation(const pipeline_plan& plan) {
  std::vector<int> out;
  for (const auto& st : plan.stages) out.push_back(st.processor);
  return out;
}

/// Per stage: its work U, and per boundary: its transfers' time (a_j + delta_j) / beta.
struct ilp_costs {
  std::vector<seconds> work;
  std::vector<seconds> link;
};

ilp_costs ilp_costs_of(const pipeline_problem& p, const std::vector<std::pair<int, int>>& part) {
  ilp_costs c;
  for (const auto& [f, l] : part) {
    seconds u = 0;
    for (int i = f; i <= l; ++i) u += p.layers.uf(i) + p.layers.ub(i);
    c.work.push_back(u);
  }
  for (std::size_t s = 0; s + 1 < part.size(); ++s) {
    const int j = part[s].second;
    c.link.push_back(static_cast<double>(p.layers.a(j) + p.layers.delta(j)) / p.bandwidth);
  }
  return c;
}

/// With unlimited memory a 1-periodic pattern reaches the largest load of a processor or a link
/// for any allocation; the best over all allocations to at most P processors (exhaustive).
seconds ilp_brute_force_period(const pipeline_problem& p,
                               const std::vector<std::pair<int, int>>& part) {
  const ilp_costs c = ilp_costs_of(p, part);
  const int n = static_cast<int>(part.size());
  seconds best = std::numeric_limits<double>::infinity();
  std::vector<int> g(static_cast<std::size_t>(n), 0);
  // Restricted growth strings: g[0] = 0, g[i] <= max(g[0..i-1]) + 1, fewer than P blocks.
  auto visit = [&](auto&& self, int i, int blocks) -> void {
    if (i == n) {
      std::vector<seconds> load(static_cast<std::size_t>(blocks), 0);
      std::map<std::pair<int, int>, seconds> link;
      for (int s = 0; s < n; ++s)
        load[static_cast<std::size_t>(g[static_cast<std::size_t>(s)])] +=
            c.work[static_cast<std::size_t>(s)];
      for (int s = 0; s + 1 < n; ++s) {
        const int a = g[static_cast<std::size_t>(s)], b = g[static_cast<std::size_t>(s + 1)];
        if (a != b) link[std::minmax(a, b)] += c.link[static_cast<std::size_t>(s)];
      }
      seconds t = 0;
      for (seconds x : load) t = std::max(t, x);
      for (const auto& [k, x] : link) t = std::max(t, x);
      best = std::min(best, t);
      return;
    }
    for (int b = 0; b <= blocks && b < p.processors; ++b) {
      g[static_cast<std::size_t>(i)] = b;
      self(self, i + 1, std::max(blocks, b + 1));
    }
  };
  visit(visit, 0, 0);
  return best;
}

/// The best period of 1F1B* (Alg. 7) over the contiguous allocations: consecutive stages of the
/// partition merged into at most P groups, one per processor; nullopt when none fits.
std::optional<seconds> ilp_best_contiguous(const pipeline_problem& p,
                                           const std::vector<std::pair<int, int>>& part) {
  const int n = static_cast<int>(part.size());
  std::optional<seconds> best;
  // Each of the n - 1 boundaries is a cut or not.
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    std::vector<int> lasts;
    for (int s = 0; s + 1 < n; ++s)
      if (mask & (1 << s)) lasts.push_back(part[static_cast<std::size_t>(s)].second);
    lasts.push_back(part.back().second);
    if (static_cast<int>(lasts.size()) > p.processors) continue;
    auto plan = one_f_one_b_star_fit(p, contiguous_stages(lasts));
    if (plan && (!best || plan->period < *best)) best = plan->period;
  }
  return best;
}

/// The smallest whole period of the valid 1-periodic patterns whose ops start at whole seconds,
/// over every allocation of one-layer stages with whole times and free transfers (the simulator
/// judges each; every op runs at the first time >= its inputs that is its slot modulo T).
/// 0 when none exists up to the whole work.
int ilp_exhaustive_period(const pipeline_problem& p) {
  using k = pipeline_op_kind;
  const int n = p.layers.length();
  int total = 0;
  for (int l = 1; l <= n; ++l) total += static_cast<int>(p.layers.uf(l) + p.layers.ub(l));
  int best = 0;
  std::vector<int> g(static_cast<std::size_t>(n), 0);
  auto at = [&](int s) { return g[static_cast<std::size_t>(s - 1)]; };
  auto eval = [&] {
    struct step {
      k kind;
      int stage;
      seconds length;
    };
    std::vector<step> ops;
    for (int s = 1; s <= n; ++s) {
      if (s > 1 && at(s - 1) != at(s)) ops.push_back({k::send_activation, s - 1, 0});
      ops.push_back({k::forward, s, p.layers.uf(s)});
    }
    for (int s = n; s >= 1; --s) {
      if (s < n && at(s) != at(s + 1)) ops.push_back({k::send_gradient, s, 0});
      ops.push_back({k::backward, s, p.layers.ub(s)});
    }
    for (int T = 1; T <= total && (best == 0 || T < best); ++T) {
      std::vector<int> slot(ops.size(), 0);
      for (;;) {
        std::vector<pipeline_op> abs;
        double ready = 0;
        for (std::size_t i = 0; i < ops.size(); ++i) {
          double t = ready;
          if (ops[i].length > 0)
            for (t = slot[i]; t < ready;) t += T;
          abs.push_back({ops[i].kind, ops[i].stage, t, 0});
          ready = t + ops[i].length;
        }
        pipeline_plan plan;
        for (int s = 1; s <= n; ++s) plan.stages.push_back({s, s, at(s)});
        plan.period = T;
        plan.ops = remat::testing::from_absolute(abs, T);
        if (sim::simulate_pipeline(p, plan).valid) {
          best = T;
          return;
        }
        std::size_t i = 0;
        while (i < slot.size() && (ops[i].length == 0 || ++slot[i] == T)) slot[i++] = 0;
        if (i == slot.size()) break;
      }
    }
  };
  auto visit = [&](auto&& self, int i, int blocks) -> void {
    if (i == n) return eval();
    for (int b = 0; b <= blocks && b < p.processors; ++b) {
      g[static_cast<std::size_t>(i)] = b;
      self(self, i + 1, std::max(blocks, b + 1));
    }
  };
  visit(visit, 0, 0);
  return best;
}

TEST_CASE("pipeline ILP: Thm 17's costs (1, 2, 1) on 2 processors, period 2 with {1,3}|{2}") {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 0, 0}, {1, 1, 0, 0}, {0.5, 0.5, 0, 0}});
  p.processors = 2;
  auto r = pipeline_ilp_schedule<ilp_cbc>(p, ilp_single_layer_stages(3));
  REQUIRE(r);
  CHECK(r->plan.period == doctest::Approx(2));
  CHECK(r->optimal);
  CHECK(r->bound == doctest::Approx(2));
  CHECK(ilp_allocation(r->plan) == std::vector<int>{0, 1, 0});
  CHECK(r->processors_used == 2);
  ilp_check_plan(p, *r);
  // The contiguous allocations reach 3 at best.
  CHECK(*ilp_best_contiguous(p, ilp_single_layer_stages(3)) == doctest::Approx(3));
}

TEST_CASE("pipeline ILP: Lemma 10's weights (1, 2, 1), M = 2: only {1,3}|{2} fits") {
  pipeline_problem p = remat::testing::weights_one_two_one();
  CHECK_FALSE(ilp_best_contiguous(p, ilp_single_layer_stages(3)));
  auto r = pipeline_ilp_schedule<ilp_cbc>(p, ilp_single_layer_stages(3));
  REQUIRE(r);
  CHECK(ilp_allocation(r->plan) == std::vector<int>{0, 1, 0});
  CHECK(r->plan.period == doctest::Approx(2));
  ilp_check_plan(p, *r);
  CHECK(r->peaks == std::vector<bytes>{2, 2});

  SUBCASE("one byte less: no allocation fits, and 2 is the least memory") {
    p.memory = 1;
    auto e = pipeline_ilp_schedule<ilp_cbc>(p, ilp_single_layer_stages(3));
    REQUIRE_FALSE(e);
    CHECK(e.code() == status::budget_too_small);
    CHECK(e.err().minimum_budget == 2);
    CHECK(e.message().find("memory") != std::string::npos);
  }
}

TEST_CASE("pipeline ILP: activations count; a tight memory forces fewer in flight") {
  // Four one-layer stages of work 2 on 2 processors; each stage stores 1 byte per activation.
  pipeline_problem p;
  p.layers = pipe_chain({{1, 1, 1, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}}, 1);
  p.processors = 2;
  auto free_run = pipeline_ilp_schedule<ilp_cbc>(p, ilp_single_layer_stages(4));
  REQUIRE(free_run);
  CHECK(free_run->plan.period == doctest::Approx(4));
  ilp_check_plan(p, *free_run);
  // Memory for 2 stages' single activations plus buffers 2 x (1 + 1) per processor at most: the
  // period must grow, or the ILP must keep every boundary on one side.
  p.memory = 6;
  auto tight = pipeline_ilp_schedule<ilp_cbc>(p, ilp_single_layer_stages(4));
  REQUIRE(tight);
  ilp_check_plan(p, *tight);
  CHECK(tight->plan.period >= free_run->plan.period - 1e-9);
  const auto best = ilp_best_contiguous(p, ilp_single_layer_stages(4));
  if (best) CHECK(tight->plan.period <= *best + 1e-6);
}

TEST_CASE("pipeline ILP: unlimited memory, the exhaustive period; under memory, <= 1F1B*") {
  std::mt19937 rng(20211);
  std::uniform_int_distribution<int> half(1, 6), bytes_d(0, 3), wd(0, 4);
  int binding = 0;
  for (int round = 0; round < 12; ++round) {
    const int n = 2 + round % 3;  // 2..4 stages
    std::vector<pipe_layer> layers;
    const int nl = n + (round % 2);  // sometimes a stage of two layers
    for (int l = 0; l < nl; ++l)
      layers.push_back({0.5 * half(rng), 0.5 * half(rng), bytes_d(rng), wd(rng)});
    pipeline_problem p;
    p.layers = pipe_chain(layers, bytes_d(rng));
    p.processors = 2 + round % 2;
    p.copies = 1;
    p.bandwidth = round % 4 == 0 ? std::numeric_limits<double>::infinity() : 2.0;
    std::vector<std::pair<int, int>> part;
    for (int l = 1; l <= n; ++l) part.emplace_back(l, l);
    part.back().second = nl;
    INFO("round " << round);

    auto r = pipeline_ilp_schedule<ilp_cbc>(p, part);
    REQUIRE(r);
    ilp_check_plan(p, *r);
    CHECK(r->optimal);
    CHECK(r->plan.period == doctest::Approx(ilp_brute_force_period(p, part)));
    if (auto c = ilp_best_contiguous(p, part)) CHECK(r->plan.period <= *c + 1e-6);

    // Memory: the least that has a plan (budget_too_small's minimum, reported before any
    // solve), or a little more. One byte less has none.
    p.memory = 0;
    auto none = pipeline_ilp_schedule<ilp_cbc>(p, part);
    REQUIRE_FALSE(none);
    REQUIRE(none.code() == status::budget_too_small);
    REQUIRE(none.err().minimum_budget);
    const bytes least = *none.err().minimum_budget;
    p.memory = least - 1;
    CHECK(pipeline_ilp_schedule<ilp_cbc>(p, part).code() == status::budget_too_small);
    p.memory = least + round % 3;
    auto rm = pipeline_ilp_schedule<ilp_cbc>(p, part);
    REQUIRE(rm);
    ilp_check_plan(p, *rm);
    CHECK(rm->plan.period >= r->plan.period - 1e-6);
    if (rm->plan.period > r->plan.period + 1e-6) ++binding;
    if (auto contiguous = ilp_best_contiguous(p, part))
      CHECK(rm->plan.period <= *contiguous + 1e-6);
  }
  CHECK(binding >= 4);  // the memory made the period longer
}

TEST_CASE("pipeline ILP: under memory, the period of an exhaustive search over patterns") {
  // Two one-layer stages with whole times, memory from tight to loose: the ILP's memory model is
  // exact (not merely safe) when it matches the best pattern whose ops start at whole seconds.
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> t(1, 2), by(0, 3), wd(0, 3);
  int feasible = 0;
  for (int round = 0; round < 8; ++round) {
    std::vector<pipe_layer> layers;
    for (int l = 0; l < 2; ++l) layers.push_back({1.0 * t(rng), 1.0 * t(rng), by(rng), wd(rng)});
    pipeline_problem p;
    p.layers = pipe_chain(layers, by(rng));
    p.processors = 2;
    p.copies = 1;
    bytes heavy = 0;
    for (const auto& l : layers) heavy = std::max(heavy, l.w + 2 * l.a);
    p.memory = heavy + round % 4;
    INFO("round " << round);
    const int exhaustive = ilp_exhaustive_period(p);
    auto r = pipeline_ilp_schedule<ilp_cbc>(p, ilp_single_layer_stages(2));
    if (exhaustive == 0) {
      REQUIRE_FALSE(r);
      INFO(r.message());
      CHECK(r.code() == status::budget_too_small);
      continue;
    }
    ++feasible;
    REQUIRE(r);
    ilp_check_plan(p, *r);
    CHECK(r->plan.period == doctest::Approx(exhaustive));
  }
  CHECK(feasible >= 4);
}

TEST_CASE("pipeline ILP: a period bound; progress; bad input") {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 0, 0}, {1, 1, 0, 0}, {0.5, 0.5, 0, 0}});
  p.processors = 2;
  const auto part = ilp_single_layer_stages(3);
  pipeline_ilp_options o;
  o.period_bound = 2.5;
  int reports = 0;
  o.progress = [&](const milp::progress_report& rep) {
    ++reports;
    if (rep.has_incumbent()) CHECK(rep.incumbent >= 2 - 1e-6);
  };
  auto r = pipeline_ilp_schedule<ilp_cbc>(p, part, o);
  REQUIRE(r);
  CHECK(r->plan.period == doctest::Approx(2));
  CHECK(reports >= 1);
  o.period_bound = 1.9;  // below the optimum
  auto none = pipeline_ilp_schedule<ilp_cbc>(p, part, o);
  REQUIRE_FALSE(none);
  CHECK(none.code() == status::infeasible);
  CHECK(none.message().find("period <= 1.9") != std::string::npos);

  auto gap = pipeline_ilp_schedule<ilp_cbc>(p, {{1, 1}, {3, 3}});
  REQUIRE_FALSE(gap);
  CHECK(gap.code() == status::invalid_problem);
  CHECK(gap.message().find("partition") != std::string::npos);
  auto limit = pipeline_ilp_schedule<ilp_cbc>(p, part, {.time_limit = 0});
  REQUIRE_FALSE(limit);
  CHECK(limit.code() == status::invalid_problem);
}

TEST_CASE("pipeline ILP: the time limit holds on a larger instance; a warm start") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> ms(1, 9), by(1, 4);
  std::vector<pipe_layer> layers;
  for (int l = 0; l < 12; ++l) layers.push_back({0.1 * ms(rng), 0.2 * ms(rng), by(rng), by(rng)});
  pipeline_problem p;
  p.layers = pipe_chain(layers, 1);
  p.processors = 4;
  p.copies = 3;
  p.bandwidth = 20;
  // 1F1B* on four stages of three layers, and a memory it just fits in.
  const auto even = contiguous_stages({3, 6, 9, 12});
  const auto free_plan = one_f_one_b_star_fit(p, even);
  REQUIRE(free_plan);
  const auto peaks = sim::simulate_pipeline(p, *free_plan).processor_peaks;
  p.memory = *std::max_element(peaks.begin(), peaks.end());
  const auto warm = one_f_one_b_star_fit(p, even);
  REQUIRE(warm);
  const std::vector<std::pair<int, int>> part{{1, 3}, {4, 6}, {7, 9}, {10, 12}};
  const std::vector<std::pair<int, int>> singles = ilp_single_layer_stages(12);

  pipeline_ilp_options o;
  o.time_limit = 0.5;
  o.contiguous_start_limit = 0;  // cold (there would be 232 contiguous allocations anyway)
  auto start = std::chrono::steady_clock::now();
  auto r = pipeline_ilp_schedule<ilp_cbc>(p, singles, o);
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(elapsed < 3.5);  // 0.5 s, and the model, the simulator (slower under sanitizers)
  if (r) {
    ilp_check_plan(p, *r);
    if (!r->optimal) CHECK(r->gap > 0);
  } else {
    CHECK(r.code() == status::time_limit);
    CHECK(r.message().find("warm_start") != std::string::npos);
  }

  // With 1F1B*'s plan as the first incumbent, a plan at least as good comes back in time.
  o.warm_start = *warm;
  start = std::chrono::steady_clock::now();
  auto w = pipeline_ilp_schedule<ilp_cbc>(p, part, o);
  elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(elapsed < 3.5);  // 0.5 s, and the model, the simulator (slower under sanitizers)
  REQUIRE(w);
  CHECK(w->warm_start_used);
  ilp_check_plan(p, *w);
  CHECK(w->plan.period <= warm->period + 1e-6);

  // The same plan on the twelve one-layer stages, its origin moved (the ILP's starts F_1 at 0):
  // the solve stops at the limit with a plan at least as good.
  const pipeline_plan split = ilp_rotate(ilp_split_into_layers(p, *warm), 0.3 * warm->period);
  REQUIRE(sim::simulate_pipeline(p, split).valid);
  o.warm_start = split;
  start = std::chrono::steady_clock::now();
  auto ws = pipeline_ilp_schedule<ilp_cbc>(p, singles, o);
  elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(elapsed < 3.5);  // 0.5 s, and the model, the simulator (slower under sanitizers)
  REQUIRE(ws);
  CHECK(ws->warm_start_used);
  ilp_check_plan(p, *ws);
  CHECK(ws->plan.period <= warm->period + 1e-6);

  // A warm start of other stages is refused.
  o.warm_start = *warm;
  auto bad = pipeline_ilp_schedule<ilp_cbc>(p, singles, o);
  REQUIRE_FALSE(bad);
  CHECK(bad.code() == status::invalid_problem);
  CHECK(bad.message().find("warm_start") != std::string::npos);

  // Without a warm start, 1F1B*'s best contiguous plan is one: six stages on four processors
  // have 1 + 5 + 10 + 10 contiguous allocations.
  const std::vector<std::pair<int, int>> pairs{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}};
  pipeline_ilp_options a;
  a.time_limit = 0.3;
  auto au = pipeline_ilp_schedule<ilp_cbc>(p, pairs, a);
  REQUIRE(au);
  CHECK(au->warm_start_used);
  ilp_check_plan(p, *au);
  const auto contiguous = ilp_best_contiguous(p, pairs);
  REQUIRE(contiguous);
  CHECK(au->plan.period <= *contiguous + 1e-6);
  a.contiguous_start_limit = 25;  // one short
  auto cold = pipeline_ilp_schedule<ilp_cbc>(p, pairs, a);
  if (cold) CHECK_FALSE(cold->warm_start_used);
}

TEST_CASE("pipeline ILP: warm starts on Thm 17's costs") {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 0, 0}, {1, 1, 0, 0}, {0.5, 0.5, 0, 0}});
  p.processors = 2;
  pipeline_ilp_options o;
  o.warm_start = remat::testing::one_three_on_one_processor();  // the optimum itself
  auto r = pipeline_ilp_schedule<ilp_cbc>(p, ilp_single_layer_stages(3), o);
  REQUIRE(r);
  CHECK(r->warm_start_used);
  CHECK(r->optimal);
  CHECK(r->plan.period == doctest::Approx(2));
  ilp_check_plan(p, *r);

  // Two stages, {1, 2} and {3}: 1F1B*'s period 3 is the best there is.
  const auto warm = one_f_one_b_star_fit(p, contiguous_stages({2, 3}));
  REQUIRE(warm);
  o.warm_start = *warm;
  auto two = pipeline_ilp_schedule<ilp_cbc>(p, {{1, 2}, {3, 3}}, o);
  REQUIRE(two);
  CHECK(two->warm_start_used);
  CHECK(two->plan.period == doctest::Approx(warm->period));
  ilp_check_plan(p, *two);

  // A warm start above the period bound is left out.
  o.period_bound = 2.5;
  auto bounded = pipeline_ilp_schedule<ilp_cbc>(p, {{1, 2}, {3, 3}}, o);
  REQUIRE_FALSE(bounded);
  CHECK(bounded.code() == status::infeasible);
}

TEST_CASE("madpipe<cbc>: phase 2 never lengthens phase 1's period and reports its bound") {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> len(3, 6), time(1, 6), size(1, 4), keep(1, 3), procs(2, 3);
  int improved = 0, runs = 0;
  for (int trial = 0; trial < 12; ++trial) {
    INFO("trial " << trial);
    const int n = len(rng);
    std::vector<pipe_layer> ls;
    for (int l = 0; l < n; ++l)
      ls.push_back({time(rng) * 0.5, time(rng) * 0.5, size(rng), size(rng)});
    pipeline_problem p;
    p.layers = pipe_chain(ls, 2);
    for (auto& st : p.layers.stages) st.saved_bytes = st.output_bytes * keep(rng);
    p.processors = std::min(n, procs(rng));
    p.copies = 1;
    p.bandwidth = 4;
    madpipe<> one;
    madpipe<ilp_cbc> two;
    two.phase2_time_limit = 5;
    pipeline_problem q = p;
    q.memory = 0;
    auto none = one.solve(q);
    REQUIRE_FALSE(none);
    REQUIRE(none.err().minimum_budget);
    for (double f : {1.0, 1.3, 2.0}) {
      p.memory = static_cast<bytes>(static_cast<double>(*none.err().minimum_budget) * f);
      auto a = one.solve(p);
      auto b = two.solve(p);
      REQUIRE(a);
      REQUIRE(b);
      ++runs;
      const auto rep = sim::simulate_pipeline(p, b->plan);
      REQUIRE(rep.valid);
      for (bytes peak : rep.processor_peaks) CHECK(peak <= p.memory);
      CHECK(rep.normalized_period <= a->report.normalized_period + 1e-9);
      CHECK_FALSE(a->period_bound);
      CHECK(a->notes.front().find("no MILP backend") != std::string::npos);
      REQUIRE(b->period_bound);
      CHECK(*b->period_bound <= rep.normalized_period + 1e-9);
      if (rep.normalized_period < a->report.normalized_period - 1e-9) {
        ++improved;
        CHECK(b->scheduler == "ILP");
      }
    }
  }
  MESSAGE("madpipe<cbc>: phase 2 shortened " << improved << " of " << runs << " plans");
}

}  // namespace

#endif

#if defined(REMAT_HAS_LPSOLVE)

TEST_CASE("pipeline ILP: with lp_solve too, Lemma 10's allocation") {
  using namespace remat;
  const pipeline_problem p = remat::testing::weights_one_two_one();
  auto r = pipeline_ilp_schedule<milp::lpsolve>(p, {{1, 1}, {2, 2}, {3, 3}});
  REQUIRE(r);
  CHECK(r->optimal);
  CHECK(r->plan.period == doctest::Approx(2));
  std::vector<int> procs;
  for (const auto& st : r->plan.stages) procs.push_back(st.processor);
  CHECK(procs == std::vector<int>{0, 1, 0});
  CHECK(sim::simulate_pipeline(p, r->plan).valid);
}

#endif
