// The multi-chain DP [Shilova21, §1.4-1.7]: the thesis' toy example and the values of its
// simulations, Lemma 2's m_min, the no-recompute thresholds, Opt_0 against Griewank's closed
// form, the DP against an exhaustive search of the unit-slot model on small instances, its
// properties (monotone in m and in b), and every program it rebuilds lowered onto the training
// graph and replayed by the simulator: makespan = the DP's value, peak within the budget.
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/multi_chain.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;

namespace {

using mc_table = multi_chain_dp::table;
constexpr std::int32_t mc_inf = mc_table::infinite;

/// Opt(L, m, b) with u_F = u_B = u_L = 1 (infinite below m_min).
std::int64_t mc_opt(const std::vector<int>& l, int m, const std::vector<bool>& b = {}) {
  const mc_table t(l, b, m);
  if (t.forwards() == mc_inf) return mc_inf;
  std::int64_t total = 1;
  for (int x : l) total += x;
  return t.forwards() + total;
}

/// The least cost (u = 1 for F, B and Loss) of MULTI-b(L, m, b) by a 0-1 breadth-first search of
/// the unit-slot model of [Shilova21, Table 1.1]; a state holds the copies of every a_i, which
/// delta_i are held, which chains are done (delta_0 made) and whether the Loss ran.
std::int64_t mc_search(const std::vector<int>& l, int m, const std::vector<bool>& b) {
  const std::size_t k = l.size();
  std::vector<std::size_t> base(k);  // chain j: copies at base..base+L, grads after, done flag
  std::size_t n = 0;
  for (std::size_t j = 0; j < k; ++j) {
    base[j] = n;
    n += 2 * static_cast<std::size_t>(l[j] + 1) + 1;
  }
  const std::size_t loss_flag = n++;
  auto a = [&](std::string& s, std::size_t j, int i) -> char& {
    return s[base[j] + static_cast<std::size_t>(i)];
  };
  auto g = [&](std::string& s, std::size_t j, int i) -> char& {
    return s[base[j] + static_cast<std::size_t>(l[j] + 1 + i)];
  };
  auto done = [&](std::string& s, std::size_t j) -> char& {
    return s[base[j] + 2 * static_cast<std::size_t>(l[j] + 1)];
  };
  auto memory = [&](std::string& s) {
    int used = 0;
    for (std::size_t j = 0; j < k; ++j)
      for (int i = 0; i <= l[j]; ++i) used += a(s, j, i) + g(s, j, i);
    return used;
  };
  std::string start(n, 0);
  for (std::size_t j = 0; j < k; ++j) a(start, j, 0) = 1;
  if (memory(start) > m) return mc_inf;
  std::unordered_map<std::string, std::int64_t> dist{{start, 0}};
  std::deque<std::string> todo{start};
  while (!todo.empty()) {
    std::string s = todo.front();
    todo.pop_front();
    const std::int64_t d = dist.at(s);
    bool goal = s[loss_flag] != 0;
    for (std::size_t j = 0; j < k && goal; ++j) {
      goal = done(s, j) && (!b[j] || g(s, j, 0));
      for (int i = 0; i <= l[j]; ++i) goal = goal && a(s, j, i) == 0;
    }
    if (goal) return d;
    auto relax = [&](std::string t, int cost) {
      if (memory(t) > m) return;
      const auto it = dist.find(t);
      if (it != dist.end() && it->second <= d + cost) return;
      dist[t] = d + cost;
      if (cost == 0)
        todo.push_front(std::move(t));
      else
        todo.push_back(std::move(t));
    };
    for (std::size_t j = 0; j < k; ++j) {
      for (int i = 0; i <= l[j]; ++i) {
        if (a(s, j, i) == 0) continue;
        std::string t = s;  // S_i
        ++a(t, j, i);
        relax(t, 0);
        t = s;  // D_i
        --a(t, j, i);
        relax(t, 0);
        if (i < l[j]) {  // F_{i+1}
          t = s;
          --a(t, j, i);
          ++a(t, j, i + 1);
          relax(t, 1);
        }
      }
      for (int i = 1; i <= l[j]; ++i) {  // B_i
        if (!g(s, j, i) || a(s, j, i - 1) == 0) continue;
        std::string t = s;
        g(t, j, i) = 0;
        --a(t, j, i - 1);
        g(t, j, i - 1) = 1;
        if (i == 1) done(t, j) = 1;
        relax(t, 1);
      }
      if (g(s, j, 0) && !b[j] && done(s, j)) {  // Dbar
        std::string t = s;
        g(t, j, 0) = 0;
        relax(t, 0);
      }
    }
    bool ready = s[loss_flag] == 0;
    for (std::size_t j = 0; j < k && ready; ++j) ready = a(s, j, l[j]) > 0;
    if (ready) {  // Loss
      std::string t = s;
      t[loss_flag] = 1;
      for (std::size_t j = 0; j < k; ++j) {
        --a(t, j, l[j]);
        g(t, j, l[j]) = 1;
        if (l[j] == 0) done(t, j) = 1;
      }
      relax(t, 1);
    }
  }
  return mc_inf;
}

std::vector<std::vector<bool>> mc_all_bits(std::size_t k) {
  std::vector<std::vector<bool>> out;
  for (unsigned mask = 0; mask < (1u << k); ++mask) {
    std::vector<bool> b(k);
    for (std::size_t j = 0; j < k; ++j) b[j] = ((mask >> j) & 1u) != 0;
    out.push_back(b);
  }
  return out;
}

int mc_full(const std::vector<int>& l) {
  int f = 0;
  for (int x : l) f += x + 1;
  return f;
}

}  // namespace

TEST_CASE("multi_chain: the thesis' toy example costs 74, not the text's 75") {
  // L = (4, 10, 12), m = 9, u = 1, b = 0 [Shilova21, §1.4]: the text's first decision (i, k) =
  // (9, 3) is valid but not optimal.
  const std::vector<int> l{4, 10, 12};
  CHECK(mc_opt(l, 9) == 74);
  const mc_table t(l, {}, 9);
  // The text's path: its sub-problems agree with the DP, its sum does not reach the optimum.
  const std::int64_t sub = t.forwards({4, 10, 3}, 8) + 17 + 1;
  CHECK(sub == 48);
  CHECK(t.forwards({4, 3, 3}, 7) + 10 + 1 == 27);
  CHECK(multi_chain_dp::minimum_slots({4, 3, 3}, {false, true, true}) == 7);
  const std::int64_t text_path = 9 + sub + (t.opt0(8, 9) + 9);
  CHECK(text_path == 75);
  // The rebuilt program: 74 in the unit-slot model within 9 slots.
  const multi_chain p{"toy", l};
  const auto r = replay(p, t.program());
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(r->forwards + 26 + 1 == 74);
  CHECK(r->peak_slots <= 9);
}

TEST_CASE("multi_chain: the values of the thesis' simulations") {
  const std::vector<bool> none;
  CHECK(mc_opt({1, 1}, 4, {false, false}) == 5);
  CHECK(mc_opt({2, 2}, 5, {false, false}) == 10);
  for (const auto& b : mc_all_bits(2)) CHECK(mc_opt({2, 2}, 6, b) == 9);
  CHECK(mc_opt({3, 3}, 5) == 16);
  CHECK(mc_opt({3, 3}, 6) == 15);
  CHECK(mc_opt({3, 3}, 8) == 13);
  CHECK(mc_opt({2, 3, 4}, 7) == 24);
  CHECK(mc_opt({2, 3, 4}, 9) == 22);
  CHECK(mc_opt({2, 3, 4}, 12) == 19);
  // L = 5: cross-modal (5, 25), Siamese (10, 10, 10), one chain 30; Span* = 61.
  struct point {
    int m;
    std::int64_t opt;
  };
  auto check_curve = [](const std::vector<int>& l, std::vector<point> listed, int first_unit,
                        std::int64_t at_first, int last) {
    for (const auto& [m, opt] : listed) {
      INFO("m = ", m);
      CHECK(mc_opt(l, m) == opt);
    }
    for (int m = first_unit; m <= last; ++m) {  // then 1 less per slot down to 61
      INFO("m = ", m);
      CHECK(mc_opt(l, m) == at_first - (m - first_unit));
    }
    CHECK(mc_opt(l, last) == 61);
  };
  check_curve({5, 25}, {{5, 132}, {6, 106}, {7, 99}, {8, 91}, {9, 84}}, 10, 83, 32);
  check_curve({10, 10, 10}, {{7, 125}, {8, 98}, {9, 91}, {10, 84}}, 11, 83, 33);
  check_curve({30}, {{3, 467}, {4, 158}, {5, 117}, {6, 101}, {7, 94}, {8, 86}}, 9, 83, 31);
}

TEST_CASE("multi_chain: Lemma 2's m_min is the least memory of the DP") {
  CHECK(multi_chain_dp::minimum_slots({4, 3, 3}, {false, true, true}) == 7);
  CHECK(multi_chain_dp::minimum_slots({1, 5}, {}) == 4);
  for (int l = 1; l <= 6; ++l) {
    if (l >= 2) CHECK(multi_chain_dp::minimum_slots({l, 5 * l}, {}) == 5);
    CHECK(multi_chain_dp::minimum_slots({2 * l, 2 * l, 2 * l}, {}) == 7);
    CHECK(multi_chain_dp::minimum_slots({6 * l}, {}) == 3);
  }
  for (const std::vector<int>& l : std::vector<std::vector<int>>{
           {0}, {1}, {3}, {0, 0}, {0, 2}, {1, 1}, {2, 1}, {3, 2}, {1, 0, 2}, {2, 2, 1}, {2, 2, 2}})
    for (const auto& b : mc_all_bits(l.size())) {
      const int lo = multi_chain_dp::minimum_slots(l, b);
      INFO("m_min = ", lo);
      CHECK(mc_opt(l, lo - 1, b) == mc_inf);
      CHECK(mc_opt(l, lo, b) < mc_inf);
    }
}

TEST_CASE("multi_chain: 12L + 1 from the no-recompute threshold, 12L + 2 one slot below") {
  for (int l : {1, 2, 3, 5}) {
    INFO("L = ", l);
    for (const auto& [lengths, threshold] :
         {std::pair{std::vector<int>{l, 5 * l}, 6 * l + 2},
          std::pair{std::vector<int>{2 * l, 2 * l, 2 * l}, 6 * l + 3},
          std::pair{std::vector<int>{6 * l}, 6 * l + 1}}) {
      CHECK(mc_full(lengths) == threshold);
      CHECK(mc_opt(lengths, threshold) == 12 * l + 1);
      CHECK(mc_opt(lengths, threshold - 1) == 12 * l + 2);
    }
  }
}

TEST_CASE("multi_chain: Opt_0 is Griewank's closed form, and one chain is Revolve's") {
  // t(l, c): the least forward steps to reverse l steps with c snapshots.
  auto binom = [](int n, int r) {
    std::int64_t v = 1;
    for (int i = 1; i <= r; ++i) v = v * (n - r + i) / i;
    return v;
  };
  auto griewank = [&](int steps, int c) -> std::int64_t {
    if (steps <= 1) return 0;
    int r = 0;
    while (binom(c + r, c) < steps) ++r;
    return std::int64_t{r} * steps - binom(c + r, c + 1);
  };
  const mc_table t({60}, {}, 11);
  for (int m = 3; m <= 11; ++m)
    for (int l = 0; l < 60; ++l) {
      INFO("l = ", l, ", m = ", m);
      CHECK(t.opt0(l, m) == griewank(l + 1, m - 2));
    }
  CHECK(t.opt0(0, 2) == 0);
  CHECK(t.opt0(1, 2) == mc_inf);
  CHECK(t.opt0(0, 1) == mc_inf);
  // The thesis' table of forward counts, rows l, columns m = 3..8.
  const std::vector<std::pair<int, std::vector<int>>> rows{
      {1, {1, 1, 1, 1, 1, 1}},       {2, {3, 2, 2, 2, 2, 2}},       {3, {6, 4, 3, 3, 3, 3}},
      {4, {10, 6, 5, 4, 4, 4}},      {5, {15, 8, 7, 6, 5, 5}},      {6, {21, 11, 9, 8, 7, 6}},
      {8, {36, 17, 13, 12, 11, 10}}, {10, {55, 24, 18, 16, 15, 14}}};
  for (const auto& [l, counts] : rows)
    for (int m = 3; m <= 8; ++m) CHECK(t.opt0(l, m) == counts[static_cast<std::size_t>(m - 3)]);
  // K = 1: SINGLE(L, m) = Opt_0(L - 1, m) + u_F + u_L, the counts of revolve's table.
  const revolve::table rev(40, 38);
  for (int l = 1; l <= 40; ++l)
    for (int m = 3; m <= 12; ++m) {
      INFO("L = ", l, ", m = ", m);
      CHECK(mc_opt({l}, m) == rev.forwards(l, std::min(m - 3, 38)) + 1 + l + 1);
    }
}

TEST_CASE("multi_chain: the DP equals an exhaustive search of the unit-slot model") {
  int compared = 0;
  for (const std::vector<int>& l : std::vector<std::vector<int>>{{1},
                                                                 {2},
                                                                 {3},
                                                                 {4},
                                                                 {1, 1},
                                                                 {2, 1},
                                                                 {2, 2},
                                                                 {3, 1},
                                                                 {0, 2},
                                                                 {0, 0},
                                                                 {1, 0, 2},
                                                                 {3, 2},
                                                                 {1, 1, 1}})
    for (const auto& b : mc_all_bits(l.size()))
      for (int m = 1; m <= mc_full(l) + 1; ++m) {
        INFO("L size ", l.size(), ", first ", l[0], ", last ", l.back(), ", m = ", m);
        CHECK(mc_opt(l, m, b) == mc_search(l, m, b));
        ++compared;
      }
  CHECK(compared > 300);
}

TEST_CASE("multi_chain: Opt is non-increasing in m and never decreases when a b bit is set") {
  for (const std::vector<int>& l :
       std::vector<std::vector<int>>{{4, 2}, {3, 3}, {1, 4, 2}, {4, 4, 4}, {0, 3, 4}, {2, 3, 4}})
    for (const auto& b : mc_all_bits(l.size())) {
      const mc_table t(l, b, mc_full(l) + 2);
      std::int64_t previous = mc_inf;
      for (int m = 0; m <= mc_full(l) + 2; ++m) {
        const std::int64_t v = t.forwards(l, m);
        CHECK(v <= previous);
        previous = v;
        for (std::size_t j = 0; j < l.size(); ++j) {
          if (b[j]) continue;
          auto more = b;
          more[j] = true;
          CHECK(mc_opt(l, m, more) >= mc_opt(l, m, b));
        }
      }
      CHECK(previous == [&] {
        int s = 0;
        for (int x : l) s += x;
        return s;
      }());
    }
}

TEST_CASE(
    "multi_chain: every program, lowered and simulated, takes the DP's time within the "
    "budget") {
  const bytes slot = 1000;
  int solved = 0;
  for (const std::vector<int>& l : std::vector<std::vector<int>>{{1},
                                                                 {5},
                                                                 {0, 0},
                                                                 {0, 2},
                                                                 {1, 1},
                                                                 {3, 2},
                                                                 {4, 10, 12},
                                                                 {1, 0, 2},
                                                                 {2, 2, 2},
                                                                 {3, 1, 4, 2}})
    for (const auto& b : mc_all_bits(l.size())) {
      const multi_chain p{"t", l, 0.5, 1.25, 3.0, slot, b};
      const auto g = build_graph(p);
      REQUIRE_MESSAGE(g.ok(), g.message());
      const multi_chain_dp dp;
      const int lo = multi_chain_dp::minimum_slots(p);
      CHECK(dp.minimum_budget(p) == (lo + multi_chain_dp::reserved_slots) * slot);
      for (int m = lo; m <= mc_full(l) + 1; ++m) {
        // The budget rounds down to whole slots: m + 2 slots and a bit.
        const bytes budget = (m + multi_chain_dp::reserved_slots) * slot + slot / 2;
        const auto s = dp.solve_detailed(p, budget);
        INFO("K = ", l.size(), ", first L ", l[0], ", m = ", m);
        REQUIRE_MESSAGE(s.ok(), s.message());
        CHECK(s->details.slots == std::min(m, mc_full(l)));
        CHECK(s->details.minimum_slots == lo);
        CHECK(s->optimal);
        const mc_table t(l, b, m);
        CHECK(s->details.forwards == t.forwards());
        // Seconds = counts x unit costs.
        CHECK(s->program.predicted_time == doctest::Approx(0.5 * static_cast<double>(t.forwards()) +
                                                           1.25 * p.total_length() + 3.0));
        const auto r = sim::simulate(*g, s->program, {.budget = budget});
        CHECK(r.valid);
        CHECK(r.makespan == doctest::Approx(s->program.predicted_time));
        CHECK(r.peak <= budget);
        CHECK(r.peak == s->program.predicted_peak);
        const auto replayed = replay(p, s->details.ops);
        REQUIRE(replayed.ok());
        CHECK(replayed->peak_slots <= m);
        ++solved;
      }
    }
  CHECK(solved > 200);
}

TEST_CASE("multi_chain: bad problems, budgets and programs are refused with the field named") {
  const multi_chain ok{"p", {2, 3}};
  CHECK(validate(ok).ok());
  auto message = [](const multi_chain& p) { return validate(p).message(); };
  CHECK(message({"p", {}}).find("no chain") != std::string::npos);
  CHECK(message({"p", {2, -3}}).find("lengths[1] is -3") != std::string::npos);
  CHECK(message({"p", {2}, -1}).find("forward_time is -1") != std::string::npos);
  CHECK(message({"p", {2}, 1, 1, std::nan("")}).find("loss_time") != std::string::npos);
  CHECK(message({"p", {2}, 1, 1, 1, 0}).find("slot_bytes is 0") != std::string::npos);
  CHECK(message({"p", {2, 3}, 1, 1, 1, 8, {true}}).find("keep has 1 entries for 2") !=
        std::string::npos);
  const multi_chain_dp dp;
  const multi_chain bad{"p", {2, -3}};
  CHECK(dp.solve(bad, 100).code() == status::invalid_problem);
  // Below m_min: the minimum is said, in slots and in bytes.
  const multi_chain p{"siamese", {2, 2}, 1, 1, 1, 100};
  CHECK(multi_chain_dp::minimum_slots(p) == 5);
  const auto small = dp.solve(p, 699);
  REQUIRE(small.code() == status::budget_too_small);
  CHECK(small.err().minimum_budget == bytes{700});
  CHECK(small.message().find("m_min = 5 slots") != std::string::npos);
  CHECK(dp.solve(p, 700).ok());
  CHECK(dp.solve(p, -1).code() == status::invalid_problem);
  // A table past max_table_bytes is refused before it is built.
  const auto big =
      multi_chain_dp{.max_table_bytes = 1000}.solve(multi_chain{"p", {30, 30}}, 100000);
  CHECK(big.code() == status::invalid_problem);
  CHECK(big.message().find("max_table_bytes") != std::string::npos);
  // Programs that break the unit-slot model's rules.
  using op = multi_chain_op;
  auto why = [&](std::vector<op> ops) { return replay(p, ops).message(); };
  CHECK(why({op::forward(1, 2)}).find("op 1 (F2^(1)): its input a_1 is not in memory") !=
        std::string::npos);
  CHECK(why({op::forward(3, 1)}).find("there is no chain 3") != std::string::npos);
  CHECK(why({op::loss()}).find("a_2^(1) is not in memory") != std::string::npos);
  CHECK(why({op::forward(1, 1), op::forward(1, 2), op::forward(2, 1), op::forward(2, 2), op::loss(),
             op::backward(1, 2)})
            .find("a_1 is not in memory") != std::string::npos);
  CHECK(why({}).find("the Loss never runs") != std::string::npos);
  CHECK(to_string(std::vector<op>{op::replicate(1, 0), op::forward(1, 1), op::loss(),
                                  op::backward(1, 1), op::discard_gradient(1)}) ==
        "S0^(1) F1^(1) Loss B1^(1) Dbar^(1)");
}
