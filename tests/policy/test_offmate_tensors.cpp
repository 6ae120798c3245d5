// OFFMATE's whole tensors [Offmate24, Algorithm 1]: SELECT against enumeration, and on the
// O-ILP's answers for random groups of several tensors: residency within the fractions and
// under them by less than a tensor, offloads covering the running sums, the GPU memory of every
// step within the fractional plan's, each lane over it by at most a tensor per group, the
// referee's constraints all kept, and integral fractions keeping their residency and time; the
// balancing of transfers valid and never slower; whole groups as a second candidate.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/offmate/tensors.hpp>

#if defined(REMAT_HAS_LPSOLVE) || defined(REMAT_HAS_CBC)
#include <remat/policy/offmate.hpp>
#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
using tensors_backend = remat::milp::cbc;
#else
#include <remat/milp/lpsolve.hpp>
using tensors_backend = remat::milp::lpsolve;
#endif
#endif

using namespace remat;

TEST_CASE("offmate SELECT: the smallest cover, against every subset") {
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    const int n = std::uniform_int_distribution<int>(0, 12)(rng);
    std::vector<bytes> sizes;
    for (int i = 0; i < n; ++i)
      sizes.push_back(std::uniform_int_distribution<bytes>(1, round % 3 == 0 ? 8 : 1000)(rng));
    const bytes total = std::accumulate(sizes.begin(), sizes.end(), bytes{0});
    const bytes value = std::uniform_int_distribution<bytes>(-5, total + 5)(rng);
    bytes best = total;
    for (unsigned m = 0; m < (1u << n); ++m) {
      bytes s = 0;
      for (int i = 0; i < n; ++i)
        if (m >> i & 1u) s += sizes[static_cast<std::size_t>(i)];
      if (s >= value) best = std::min(best, s);
    }
    const auto pick = select_cover(sizes, value);
    bytes got = 0;
    for (int i : pick) got += sizes[static_cast<std::size_t>(i)];
    INFO("round " << round << ", n " << n << ", value " << value);
    CHECK(std::ranges::is_sorted(pick));
    CHECK(std::ranges::adjacent_find(pick) == pick.end());
    if (value <= 0) {
      CHECK(pick.empty());
    } else if (value > total) {
      CHECK(static_cast<int>(pick.size()) == n);  // all, the best there is
    } else {
      CHECK(got >= value);
      CHECK(got == best);
    }
  }
  // Deterministic, and it stops at its node limit with a cover.
  std::vector<bytes> many(40);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = 1000 + static_cast<bytes>(i * 37 % 101);
  const auto a = select_cover(many, 20'017, 2000), b = select_cover(many, 20'017, 2000);
  CHECK(a == b);
  bytes s = 0;
  for (int i : a) s += many[static_cast<std::size_t>(i)];
  CHECK(s >= 20'017);
}

#if defined(REMAT_HAS_LPSOLVE) || defined(REMAT_HAS_CBC)

namespace {

/// L blocks of one to three options and one group per block of two to six tensors of varied
/// sizes (some frozen), plus a group shared by the first and last block.
offmate_problem tensor_problem(std::mt19937& rng, int L) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  offmate_problem p;
  p.name = "tensors";
  for (int i = 0; i < L; ++i) {
    offmate_block b{"b" + std::to_string(i), {}};
    const seconds f = 0.25 * pick(1, 8), bw = 0.25 * pick(1, 12);
    const bytes s = 100 * pick(1, 10);
    b.options.push_back({"store-all", f, bw, s, 0, 100 * pick(0, 2), 100 * pick(0, 2)});
    b.options.push_back({"recompute", f, bw + f, s / 5, 0, 0, 100 * pick(0, 2)});
    b.options.push_back({"offload", f, bw, s / 5, s - s / 5, 0, 0});
    p.blocks.push_back(b);
    parameter_group w{"w" + std::to_string(i), {}, {i}};
    const int n = pick(2, 6);
    for (int j = 0; j < n; ++j) {
      const bytes size = 10 * pick(1, 60);
      w.tensors.push_back({"t" + std::to_string(j), size, pick(0, 4) == 0 ? 0 : size});
    }
    p.groups.push_back(w);
  }
  for (int t = 0; t < 2 * L; ++t) p.interface_bytes.push_back(100 * pick(0, 3));
  p.groups.push_back({"tied", {{"a", 200, 200}, {"b", 70, 70}}, {L - 1, 0}});
  return p;
}

machine tensor_machine(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  machine m = machine::with_bandwidth(250.0 * pick(2, 16));
  m.gpu_optimizer_speed = 1000.0 * pick(1, 8);
  m.cpu_optimizer_speed = 250.0 * pick(1, 8);
  m.step_overhead = 0.125 * pick(0, 2);
  return m;
}

bytes largest(const parameter_group& w, bool states, double k) {
  bytes m = 0;
  for (const auto& t : w.tensors)
    m = std::max(m, states ? static_cast<bytes>(std::llround(k * static_cast<double>(t.trainable)))
                           : t.size);
  return m;
}

}  // namespace

TEST_CASE("offmate whole tensors: within the fractions, never above their memory, valid") {
  std::mt19937 rng(31);
  int rounded = 0, moved = 0, on_cpu = 0, rounded_down = 0, faster = 0;
  for (int round = 0; round < 12; ++round) {
    const offmate_problem p = tensor_problem(rng, 2 + round % 3);
    const machine hw = tensor_machine(rng);
    offmate<tensors_backend> pol;
    pol.hw = hw;
    pol.time_limit = 20;
    const bytes least = pol.minimum_budget(p).value();
    bytes all = 0;
    for (const auto& w : p.groups) all += 4 * w.size();
    const bytes budget = least + (all - least) * (round % 4) / 6;
    const auto a = pol.plan(p, budget);
    REQUIRE(a);
    const auto tp = to_tensors(p, hw, budget, a->plan);
    const offmate_plan back = fractions_of(p, tp);
    const auto ilp = evaluate(p, hw, budget, a->plan);
    const auto ev = evaluate(p, hw, budget, back);
    INFO("round " << round << ", budget " << budget << ": "
                  << (ev.violations.empty() ? std::string() : ev.violations.front()));
    CHECK(ev.valid());
    ++rounded;
    const double k = p.optimizer_states;
    for (std::size_t wi = 0; wi < p.groups.size(); ++wi) {
      const parameter_group& w = p.groups[wi];
      const double size = static_cast<double>(w.size());
      const double tau = static_cast<double>(largest(w, false, k));
      const double tau_o = static_cast<double>(largest(w, true, k));
      const auto& gt = tp.groups[wi];
      CHECK(gt.cpu_shortfall == 0);
      for (std::size_t j = 0; j < w.tensors.size(); ++j)
        if (gt.cpu_updated[j]) {
          ++on_cpu;
          CHECK(!gt.states_resident[j]);
        }
      double c_ilp = 0, c_got = 0;
      for (int q = 0; q < p.steps(); ++q) {
        const int t = p.step_at(w, q);
        const auto& f = a->plan.at(wi, t);
        const auto& r = back.at(wi, t);
        INFO("group " << wi << ", step " << t);
        // Residency within the fractions, full where used, under them by less than a tensor.
        CHECK(r.resident * size <= f.resident * size + 1e-6 * size);
        if (p.uses(w, t)) CHECK(r.resident == 1.0);
        CHECK(r.resident * size > f.resident * size - tau - 1e-6 * size);
        // Offloads cover the running sums.
        c_ilp += f.offloaded;
        c_got += r.offloaded;
        CHECK(c_got * size >= std::min(c_ilp, 1.0) * size - 1e-6 * size);
        if (r.offloaded > 0 || r.prefetched > 0) ++moved;
        // Each lane's volume over the ILP's by at most one tensor.
        CHECK(r.offloaded * size <= f.offloaded * size + tau + 1e-6 * size);
        CHECK(r.states_offloaded * k * static_cast<double>(w.trainable()) <=
              f.states_offloaded * k * static_cast<double>(w.trainable()) + tau_o + 1e-3);
      }
    }
    // The GPU memory of every step within the fractional plan's, where every group's CPU share
    // was rounded up (Algorithm 1); a share rounded down keeps more states on the GPU, within
    // the budget (ev.valid()).
    bool up = true;
    for (std::size_t wi = 0; wi < p.groups.size(); ++wi)
      up = up && back.cpu_share(wi) >= a->plan.cpu_share(wi) - 1e-6;
    rounded_down += up ? 0 : 1;
    REQUIRE(ev.gpu_bytes.size() == ilp.gpu_bytes.size());
    for (std::size_t t = 0; t < ev.gpu_bytes.size() && up; ++t)
      CHECK(ev.gpu_bytes[t] <= ilp.gpu_bytes[t] + 1e-6 * static_cast<double>(budget));
    CHECK(ev.host_bytes <= ilp.host_bytes + 1e-6 * static_cast<double>(budget) +
                               static_cast<double>(p.groups.size()) * 1000.0);
    // Same input, same tensors.
    CHECK(to_tensors(p, hw, budget, a->plan) == tp);
    // Balanced: still valid within the budget, never slower, the same on every run.
    const offmate_tensor_plan bal = balanced(p, hw, budget, tp);
    const auto evb = evaluate(p, hw, budget, fractions_of(p, bal));
    CHECK(evb.valid());
    CHECK(evb.makespan <= ev.makespan * (1 + 1e-12));
    faster += evb.makespan < ev.makespan * (1 - 1e-9) ? 1 : 0;
    CHECK(balanced(p, hw, budget, tp) == bal);
  }
  CHECK(rounded == 12);
  MESSAGE(rounded_down << " of 12 plans have a CPU share rounded down, " << faster
                       << " are faster balanced");
  CHECK(faster > 0);
  CHECK(rounded_down < 12);
  CHECK(moved > 0);
  CHECK(on_cpu > 0);
}

TEST_CASE(
    "offmate whole tensors: fractions that are whole tensors already come back as they were") {
  std::mt19937 rng(32);
  for (int round = 0; round < 6; ++round) {
    const offmate_problem p = tensor_problem(rng, 2 + round % 2);
    const machine hw = tensor_machine(rng);
    offmate<tensors_backend> pol;
    pol.hw = hw;
    pol.whole_groups = true;
    pol.time_limit = 20;
    const bytes least = pol.minimum_budget(p).value();
    const bytes budget = least + least * (round % 3) / 4;
    const auto a = pol.plan(p, budget);
    REQUIRE(a);
    const offmate_plan back = fractions_of(p, to_tensors(p, hw, budget, a->plan));
    const auto ilp = evaluate(p, hw, unlimited_bytes, a->plan);
    const auto ev = evaluate(p, hw, unlimited_bytes, back);
    INFO("round " << round);
    CHECK(ev.valid());
    for (std::size_t wi = 0; wi < p.groups.size(); ++wi)
      for (int t = 0; t < p.steps(); ++t) {
        const auto& f = a->plan.at(wi, t);
        const auto& r = back.at(wi, t);
        CHECK(r.resident == doctest::Approx(f.resident));
        // Never more moved; less where the MILP moved for nothing (a step with time to spare).
        CHECK(r.offloaded <= f.offloaded + 1e-9);
        CHECK(r.prefetched <= f.prefetched + 1e-9);
        CHECK(r.states_resident == doctest::Approx(f.states_resident));
      }
    CHECK(back.cpu_share(0) == doctest::Approx(a->plan.cpu_share(0)));
    CHECK(ev.makespan <= ilp.makespan * (1 + 1e-9) + 1e-12);
  }
}

TEST_CASE("offmate: whole groups as a second candidate, kept only where faster") {
  std::mt19937 rng(33);
  int kept = 0;
  for (int round = 0; round < 6; ++round) {
    offmate_problem p = tensor_problem(rng, 3);
    for (auto& w : p.groups) w.tensors.resize(1);  // one tensor a group: whole tensors are lumps
    const machine hw = tensor_machine(rng);
    offmate<tensors_backend> pol;
    pol.hw = hw;
    pol.time_limit = 30;
    const bytes least = pol.minimum_budget(p).value();
    const bytes budget = least + least * (round % 3) / 3;
    const auto a = pol.plan(p, budget);
    pol.whole_group_nodes = 500;
    const auto b = pol.plan(p, budget);
    REQUIRE(a);
    REQUIRE(b);
    INFO("round " << round);
    CHECK(b->makespan <= a->makespan * (1 + 1e-9));
    const auto ev = evaluate(p, hw, budget, fractions_of(p, b->tensors));
    CHECK(ev.valid());
    CHECK(b->makespan == doctest::Approx(ev.makespan));
    const bool whole = !b->notes.empty() && b->notes.front().rfind("groups moved whole (", 0) == 0;
    if (whole) {
      ++kept;
      CHECK(b->makespan < a->makespan);
      CHECK(b->makespan == doctest::Approx(b->fractional_makespan));  // exact in whole tensors
    }
    // The same input, the same answer (the node limit stops where it stops on every run).
    const auto again = pol.plan(p, budget);
    REQUIRE(again);
    CHECK(again->tensors == b->tensors);
  }
  MESSAGE(kept << " of 6 answers are the whole-group plan");
  CHECK(kept > 0);
}

#endif
